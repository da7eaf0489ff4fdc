"""``market-sim strategies``: the registered strategies, built-in and third-party."""

from __future__ import annotations

from .arguments import print_listing


def add_parser(subparsers):
    lst = subparsers.add_parser(
        "strategies", help="list the registered strategies (built-in and third-party)"
    )
    lst.set_defaults(func=run)
    return lst


def run(args) -> int:
    from ..registry import STRATEGIES

    print_listing(STRATEGIES.describe(), registry=STRATEGIES)
    return 0
