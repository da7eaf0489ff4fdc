"""``market-sim demo``: one small seeded market end to end, with a figure."""

from __future__ import annotations

import argparse

from ..errors import MarketSimError
from ..files import check_writable_folder
from .arguments import count


def add_parser(subparsers):
    d = subparsers.add_parser(
        "demo",
        help="a small seeded market end to end, with a figure",
        description="Run one seeded market: costs, eps, payments, utilities, "
        "an IC and IR check, and a figure.",
    )
    d.add_argument(
        "--out",
        default="demo_output",
        metavar="DIR",
        help="folder for the figure (default demo_output)",
    )
    d.add_argument("--out-dir", dest="out", default=argparse.SUPPRESS, help=argparse.SUPPRESS)
    d.add_argument("--seed", type=int, default=0, help="random seed (default 0)")
    d.add_argument(
        "--sellers", type=count("sellers"), default=200, help="number of sellers (default 200)"
    )
    d.add_argument(
        "--m", dest="sellers", type=count("m"), default=argparse.SUPPRESS, help=argparse.SUPPRESS
    )
    d.set_defaults(func=run)
    return d


def run(args) -> int:
    from ..demo import run_demo

    if args.sellers < 2:
        raise MarketSimError("--sellers must be >= 2")
    check_writable_folder(args.out)
    run_demo(out_dir=args.out, seed=args.seed, m=args.sellers)
    return 0
