"""``market-sim referee``: the peers' regret protocols beside the audit's, on the same markets."""

from __future__ import annotations

from .arguments import count, number


def add_parser(subparsers):
    a = subparsers.add_parser(
        "referee",
        help="a mechanism's regret under the peers' protocols (gradient ascent from the "
        "truth, a 25-point grid) beside the audit's, on the same markets",
        description="Draw K markets of N sellers, measure each seller's regret under "
        "FL-Market's protocol (gradient ascent from the truth: --steps steps of --step, one "
        "start), MFG-RegretNet's (the best of --grid-points reports over the support) and "
        "the audit's search (market-sim audit), and print them side by side with the IR "
        "violations and the ratio of the audit's largest regret to each protocol's; "
        "--claimed prints the regret the mechanism's training reported beside them "
        "(docs/extending.md). Nothing is certified. Exit status 0, 2 on bad input.",
    )
    a.add_argument("--mechanism", required=True, metavar="SPEC",
                   help="a registered name, onnx:PATH, module:attr or file.py:Class")  # fmt: skip
    a.add_argument("--dist", required=True, metavar="SPEC", help="cost law, e.g. uniform:0:1")
    a.add_argument("--sellers", type=count("sellers"), default=10, help="sellers (default 10)")
    a.add_argument("--markets", type=count("markets"), default=20, help="markets (default 20)")
    a.add_argument("--seed", type=int, default=0, help="random seed (default 0)")
    a.add_argument("--steps", type=count("steps"), default=100, help="ascent steps (100)")
    a.add_argument("--step", type=number("step", float, lambda v: v > 0, "> 0"), default=0.1,
                   help="ascent step size (default 0.1)")  # fmt: skip
    a.add_argument("--grid-points", type=number("grid-points", int, lambda v: v >= 2, ">= 2"),
                   default=25, help="points of the grid protocol (default 25)")  # fmt: skip
    a.add_argument("--claimed", type=number("claimed", float, lambda v: v >= 0, ">= 0"),
                   default=None, help="the regret the mechanism's training reported")  # fmt: skip
    a.set_defaults(func=run)
    return a


def run(args) -> int:
    import numpy as np

    from ..referee import referee

    report = referee(
        args.mechanism,
        args.dist,
        args.sellers,
        args.markets,
        np.random.default_rng(args.seed),
        claimed=args.claimed,
        steps=args.steps,
        step=args.step,
        grid_points=args.grid_points,
    )
    print(report.format())
    return 0
