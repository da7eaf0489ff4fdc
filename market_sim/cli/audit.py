"""``market-sim audit``: the IC / IR / monotonicity audit of a mechanism on seeded markets."""

from __future__ import annotations

import sys

import numpy as np

from ..distributions import parse_distribution
from ..errors import MarketSimError
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
    population_of,
)


def add_parser(subparsers):
    a = subparsers.add_parser(
        "audit",
        help="IC / IR / monotonicity audit of a mechanism on seeded markets",
        description="Draw K markets of N truthful sellers, search each seller's best "
        "unilateral misreport (grid, probes around the truth, random reports, local "
        "search, the support's ends, other sellers' reports, jumps and opponent profiles), "
        "check IR at the drawn costs and at both ends of the support, print the table "
        "and the verdict; with --out DIR also write DIR/audit.csv, DIR/summary.json and "
        "DIR/audit.png. Exit status 0 when IC and IR "
        "(and group-IC with --coalition), 3 when a verdict fails, 4 when one is "
        "inconclusive (a randomized mechanism the draws cannot decide), 2 on bad input.",
    )
    a.add_argument(
        "--mechanism",
        required=True,
        metavar="SPEC",
        help="a registered name (see `market-sim mechanisms`: offline, online, "
        "pay-as-bid, posted-price, uniform-price, ...), name:key=value, module:attr or "
        "path/to/file.py:Class",
    )
    add_cost_law(a, population=True)
    a.add_argument(
        "--sellers",
        type=count("sellers"),
        default=None,
        help="sellers per market (default 20; with --population, its size)",
    )
    a.add_argument("--markets", type=count("markets"), default=20, help="number of markets")
    a.add_argument("--seed", type=int, default=0, help="random seed (default 0)")
    a.add_argument(
        "--grid",
        type=_number_at_least("grid", 2),
        default=33,
        help="own reports per seller on the support (default 33)",
    )
    a.add_argument(
        "--random",
        type=_number_at_least("random", 1),
        default=32,
        help="random reports per seller, uniform over the support (default 32)",
    )
    a.add_argument("--no-refine", action="store_true", help="no local search")
    a.add_argument(
        "--coalition",
        type=int,
        default=None,
        metavar="K",
        help="also search joint misreports of coalitions of up to K >= 2 sellers",
    )
    add_market_settings(a)
    add_output(a, "no progress bar nor estimate (stderr)", required=False)
    add_executor(a, "markets' searches")
    a.set_defaults(func=run)
    return a


def _number_at_least(name, least):
    return number(name, int, lambda v: v >= least, f">= {least}")


def run(args) -> int:
    from ..auditing import audit
    from ..joint_report import is_multifield

    if is_multifield(args.population, [args.mechanism]):
        return _run_fields(args)
    pop = population_of(args)
    if pop is None:
        dist = parse_distribution(args.dist, iron=args.iron)
        args.sellers = 20 if args.sellers is None else args.sellers
    else:
        dist = pop
        if args.sellers is not None and args.sellers != pop.n_sellers:
            raise MarketSimError(
                f"--sellers {args.sellers} conflicts with the population's "
                f"{pop.n_sellers} sellers (omit --sellers)"
            )
        args.sellers = pop.n_sellers
    context = market_settings(args)
    if args.coalition is not None and not 2 <= args.coalition <= args.sellers:
        raise MarketSimError(
            f"--coalition must be between 2 and the number of sellers ({args.sellers}); "
            f"got {args.coalition}"
        )
    out = output_folder(args)
    where = executor_of(args)
    timer = None
    if not args.quiet and args.markets == 1:
        _print_estimate(args, dist, context)
    elif not args.quiet:  # timed on the mechanism itself (market_sim.estimates)
        from ..estimates import FirstMarketEstimate

        timer = FirstMarketEstimate(args.markets, _note)
    result = audit(
        args.mechanism,
        dist,
        args.sellers,
        args.markets,
        np.random.default_rng(args.seed),
        n_grid=args.grid,
        n_random=args.random,
        refine=not args.no_refine,
        coalition_size=args.coalition,
        progress=not args.quiet,
        **where,
        on_market=timer,
        **context,
    )
    result.summary["seed"] = args.seed
    print(result.format())
    if out is not None:
        result.write(out)
        print(f"written to {out}: audit.csv, summary.json, audit.png")
    status = result.exit_status
    if status == 4:
        s = result.summary
        why = s.get("verdict_reason") if s["verdict"] == "inconclusive" else s.get("ir_reason")
        print(f"market-sim: audit inconclusive (exit status 4): {why}", file=sys.stderr)
    return status


def _run_fields(args) -> int:
    """The joint audit over every private field (docs/multifield.md), printed and written
    in the one-field audit's shape."""
    from dataclasses import replace

    from ..joint_audit import joint_audit
    from ..joint_report import AUDIT_FILES, JointAuditReport
    from ..mechanisms.multifield import as_multifield_mechanism
    from ..multifield import as_multifield

    if args.coalition is not None or args.iron:
        option = "--coalition" if args.coalition is not None else "--iron"
        raise MarketSimError(f"{option} is not available for sellers with several fields")
    sellers = 20 if args.sellers is None else args.sellers
    pop = as_multifield(args.population or f"{sellers}*{args.dist}")
    if args.sellers is not None and args.sellers != pop.n_sellers:
        raise MarketSimError(
            f"--sellers {args.sellers} conflicts with the population's {pop.n_sellers} "
            "sellers (omit --sellers)"
        )
    context = market_settings(args)
    mech = as_multifield_mechanism(args.mechanism, population=pop.population, **context)
    out = output_folder(args)
    steps = 0 if args.no_refine else 12
    found = joint_audit(
        mech, pop, args.markets, np.random.default_rng(args.seed), field_grid=args.grid,
        local_steps=steps,
        profiles=True,
    )  # fmt: skip
    report = JointAuditReport(replace(found, mechanism=args.mechanism), pop.spec, args.seed)
    print(report.format())
    if out is not None:
        report.write(out)
        print(f"written to {out}: {', '.join(AUDIT_FILES)}")
    return report.exit_status


def _print_estimate(args, dist, context) -> None:
    from ..auditing import audit_estimate_seconds
    from ..estimates import format_duration

    secs = audit_estimate_seconds(
        args.mechanism,
        dist,
        args.sellers,
        args.markets,
        n_grid=args.grid,
        n_random=args.random,
        refine=not args.no_refine,
        **context,
    )
    print(
        f"market-sim: audit estimated to take {format_duration(secs)} (cost model)",
        file=sys.stderr,
    )


def _note(line: str) -> None:
    """One line on stderr that leaves the progress bar intact."""
    from tqdm import tqdm

    tqdm.write(f"market-sim: {line}", file=sys.stderr)
