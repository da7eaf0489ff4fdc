"""``market-sim psro``: PSRO over bid functions; the regret per iteration and its figure."""

from __future__ import annotations

import dataclasses

from .arguments import (
    add_cost_law,
    add_executor,
    add_market_settings,
    add_output,
    count,
    executor_of,
    market_settings,
    number,
    output_folder,
)


def add_parser(subparsers):
    a = subparsers.add_parser(
        "psro",
        help="PSRO: grow a population of bid functions by best responses to its meta-equilibrium",
        description="Start from the given strategies; each iteration solve the meta-game "
        "(EGTA's reduction and replicator dynamics on common random numbers), compute a best "
        "response to its equilibrium on a cost grid, record the mixture's regret and add the "
        "response; stop after --iterations or when the regret is at most --tol x the "
        "mixture's utility.  Prints the regret per iteration; with --out DIR also "
        "writes DIR/iterations.csv, DIR/strategies.csv, DIR/summary.json and "
        "DIR/psro.png (regret against iterations).",
    )
    a.add_argument(
        "--mechanism",
        required=True,
        metavar="SPEC",
        help="a registered name (offline, pay-as-bid, ...), name:key=value, module:attr "
        "or path/to/file.py:Class",
    )
    add_cost_law(a, "uniform:0:1")
    a.add_argument(
        "--sellers", type=count("sellers"), default=3, help="sellers per market (default 3)"
    )
    a.add_argument(
        "--strategy",
        action="append",
        metavar="SPEC",
        help="a starting strategy (repeat; default truthful): truthful, shade:factor=F, "
        "random:spread=S",
    )
    a.add_argument("--iterations", type=count("iterations"), default=8, help="at most (default 8)")
    a.add_argument(
        "--markets", type=count("markets"), default=512, help="sampled markets (default 512)"
    )
    a.add_argument(
        "--players",
        type=number("players", int, lambda v: v >= 2, ">= 2"),
        default=None,
        help="reduced players of the meta-game (default: every seller, the full game)",
    )
    a.add_argument(
        "--tol",
        type=number("tol", float, lambda v: v >= 0, ">= 0"),
        default=0.02,
        help="stop when regret <= tol x the mixture's utility (default 0.02)",
    )
    a.add_argument("--seed", type=int, default=0, help="random seed (default 0)")
    add_market_settings(a)
    add_output(a, quiet="with --out, print only the last line", required=False)
    add_executor(a, "payoff-matrix entries")
    a.set_defaults(func=run)
    return a


def run(args) -> int:
    import numpy as np

    from ..distributions import parse_distribution
    from ..games.psro import psro

    dist = parse_distribution(args.dist, iron=args.iron)
    out = output_folder(args)
    where = executor_of(args)
    result = psro(
        args.mechanism,
        dist,
        args.sellers,
        args.strategy or ["truthful"],
        iterations=args.iterations,
        rng=np.random.default_rng(args.seed),
        markets=args.markets,
        players=args.players,
        tol=args.tol,
        **where,
        **market_settings(args),
    )
    result = dataclasses.replace(result, options={**result.options, "seed": args.seed})
    if not args.quiet or out is None:  # without --out the table is the only answer
        print(result.format())
    if out is not None:
        result.write(out)
        print(f"written to {out}: iterations.csv, strategies.csv, summary.json, psro.png")
    return 0
