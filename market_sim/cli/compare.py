"""``market-sim compare``: a leaderboard of mechanisms on the same seeded markets."""

from __future__ import annotations

import numpy as np

from ..distributions import parse_distribution
from ..errors import MarketSimError
from .arguments import (
    add_cost_law,
    add_executor,
    add_output,
    count,
    executor_of,
    number,
    output_folder,
    population_of,
    positive,
    resumable,
)


def add_parser(subparsers):
    a = subparsers.add_parser(
        "compare",
        help="leaderboard of mechanisms on the same markets, ranked by Eq. 11 with the "
        "payments made (lower is better)",
        description="Run every --mechanism on the same K seeded markets of N truthful "
        "sellers (the same cost draws and seeds; with --population, the same data too, and "
        "results per class), audit each mechanism on those markets, and rank them by the "
        "mean objective, Eq. 11 with the payments made (lower is better): "
        "mu ||eps||_2 / sum(eps) + sigma / sum(eps) + gamma sum(payments). Prints the "
        "leaderboard; with --out DIR also writes DIR/leaderboard.csv, DIR/paired.csv "
        "(differences against the baseline, paired t 95% CIs), DIR/markets.csv, "
        "DIR/leaderboard.md, DIR/summary.json and DIR/compare.png, and keeps each finished "
        "task (a market's audit, a mechanism's scores) in DIR/tasks at once, so the same "
        "command resumes. Exit status 0, 2 on bad input.",
    )
    _add_market_options(a)
    _add_audit_options(a)
    _add_play_options(a)
    add_output(a, "no progress bars (stderr)", required=False)
    add_executor(a, "audits and scores")
    a.set_defaults(func=run)
    return a


def _add_market_options(a) -> None:
    """What is compared on which markets: --mechanism, --baseline, the cost law, --sellers,
    --markets, --seed and the objective's weights."""
    a.add_argument(
        "--mechanism",
        action="append",
        required=True,
        metavar="SPEC",
        help="a mechanism to compare (repeat: at least 2): a registered name, "
        "name:key=value, module:attr or path/to/file.py:Class",
    )
    a.add_argument(
        "--baseline",
        metavar="NAME",
        default=None,
        help="the mechanism the paired differences are taken against (default the first)",
    )
    add_cost_law(a, population=True)
    a.add_argument(
        "--sellers",
        type=count("sellers"),
        nargs="+",
        default=None,
        metavar="N",
        help="sellers per market; several sizes give curves against m (default 100; "
        "with --population, its own)",
    )
    a.add_argument(
        "--markets",
        type=number("markets", int, lambda v: v >= 2, ">= 2"),
        default=20,
        help="markets per size (default 20)",
    )
    a.add_argument("--seed", type=int, default=0, help="random seed (default 0)")
    for name, what in (
        ("mu", "weight of the ||a|| term"),
        ("sigma", "weight of the 1/eta term"),
        ("gamma", "weight of the payments"),
        ("privacy", "epsilon of the private mechanisms' price / cut-off choice"),
    ):
        a.add_argument(f"--{name}", type=positive(name), default=1.0, help=f"{what}, default 1")


def _add_audit_options(a) -> None:
    """How each mechanism is audited on the markets: --grid, --random, --no-refine,
    --no-audit, --audit."""
    a.add_argument(
        "--grid",
        type=number("grid", int, lambda v: v >= 2, ">= 2"),
        default=33,
        help="audit: own reports per seller on the support (default 33)",
    )
    a.add_argument(
        "--random",
        type=count("random"),
        default=32,
        help="audit: random reports per seller (default 32)",
    )
    a.add_argument("--no-refine", action="store_true", help="audit: no local search")
    a.add_argument("--no-audit", action="store_true", help="skip the audits (no IC column)")
    a.add_argument(
        "--audit",
        action="append",
        default=None,
        metavar="LABEL",
        help="audit only this mechanism (its label in the table; repeat for others)",
    )


def _add_play_options(a) -> None:
    """What the sellers report: --at truth or equilibrium, --bne-samples, --bids."""
    a.add_argument(
        "--at",
        choices=("truth", "equilibrium"),
        default="truth",
        help="truth: every seller reports its cost (default); equilibrium: a mechanism "
        "neither found IC by the audit nor proved IC by the library (offline, online by "
        "name; not audited there) is played at its symmetric BNE",
    )
    a.add_argument(
        "--bne-samples",
        type=count("bne-samples"),
        default=None,
        help="with --at equilibrium: the BNE solver's opponent draws (default its own)",
    )
    a.add_argument(
        "--bids",
        action="append",
        default=None,
        metavar="LABEL=bne:DIR/bid.csv",
        help="the sellers of mechanism LABEL play a given bid function (the bid.csv of "
        "market-sim bne) instead of the truth or a solved BNE (repeat for others)",
    )


def run(args) -> int:
    from ..joint_report import is_multifield

    if is_multifield(args.population, args.mechanism):
        return _run_fields(args)
    audit = _audit_arg(args)  # refused before any work
    pop = population_of(args)
    dist = pop if pop is not None else parse_distribution(args.dist, iron=args.iron)
    out = output_folder(args)
    where = executor_of(args)
    result, stopped = resumable(out, lambda store: _compare(args, dist, pop, store, where, audit))
    if stopped is not None:
        return stopped
    result.settings["seed"] = args.seed
    print(result.format())
    if out is not None:
        result.write(out)
        print(f"written to {out}: " + ", ".join(_files()))
    return 0


def _run_fields(args) -> int:
    """Multi-field mechanisms ranked on the same markets, each audited jointly
    (joint_report.compare_fields; docs/multifield.md)."""
    from ..joint_report import COMPARE_FILES, compare_fields
    from ..multifield import as_multifield

    given = [o for o, v in (("--no-audit", args.no_audit), ("--audit", args.audit),
             ("--bids", args.bids), ("--iron", args.iron),
             ("--at equilibrium", args.at == "equilibrium")) if v]  # fmt: skip
    if given:
        raise MarketSimError(f"{given[0]} is not available for sellers with several fields")
    sizes = args.sellers or [20]
    if len(sizes) > 1:
        raise MarketSimError("one --sellers for sellers with several fields")
    pop = as_multifield(args.population or f"{sizes[0]}*{args.dist}")
    if args.sellers and args.sellers[0] != pop.n_sellers:
        raise MarketSimError(
            f"--sellers {args.sellers[0]} conflicts with the population's {pop.n_sellers} "
            "sellers (omit --sellers)"
        )
    out = output_folder(args)
    result, stopped = resumable(out, lambda store: compare_fields(
        args.mechanism, pop, args.markets, np.random.default_rng(args.seed),
        baseline=args.baseline, mu=args.mu, sigma=args.sigma, gamma=args.gamma,
        field_grid=args.grid, local_steps=0 if args.no_refine else 12, profiles=True,
        store=store,
    ))  # fmt: skip
    if stopped is not None:
        return stopped
    result.settings["seed"] = args.seed
    print(result.format())
    if out is not None:
        result.write(out)
        print(f"written to {out}: " + ", ".join(COMPARE_FILES))
    return 0


def _audit_arg(args):
    """compare's ``audit``: False (--no-audit), the labels of --audit, or True (all)."""
    if args.no_audit and args.audit:
        raise MarketSimError("give --no-audit or --audit LABEL, not both")
    return False if args.no_audit else (args.audit or True)


def _compare(args, dist, pop, store, where, audit):
    from ..comparison import compare

    return compare(
        args.mechanism,
        dist,
        args.sellers if pop is not None else args.sellers or [100],
        args.markets,
        np.random.default_rng(args.seed),
        baseline=args.baseline,
        mu=args.mu,
        sigma=args.sigma,
        gamma=args.gamma,
        privacy=args.privacy,
        audit=audit,
        n_grid=args.grid,
        n_random=args.random,
        refine=not args.no_refine,
        at=args.at,
        bne_options=None if args.bne_samples is None else {"samples": args.bne_samples},
        bids=_bids_arg(args.bids),
        progress=not args.quiet,
        store=store,
        **where,
    )


def _bids_arg(items) -> dict:
    """--bids LABEL=SPEC values -> {label: spec}."""
    out = {}
    for item in items or ():
        label, sep, path = item.rpartition("=bne:")  # a label may hold "=" (price=0.5)
        if not sep or not label or not path:
            raise MarketSimError(f"--bids {item!r}: give LABEL=bne:DIR/bid.csv")
        out[label] = f"bne:{path}"
    return out


def _files():
    from ..comparison import FILES

    return FILES
