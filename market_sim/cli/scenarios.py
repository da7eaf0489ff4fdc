"""``market-sim scenarios [STUDY]``: the studies, built-in and installed; with a STUDY, its
parameters (what ``run STUDY --set KEY=VALUE`` accepts) with their defaults, allowed values
and meanings."""

from __future__ import annotations

from .arguments import print_listing


def add_parser(subparsers):
    ls = subparsers.add_parser(
        "scenarios",
        help="list the studies; with STUDY, its parameters (defaults, allowed values, meaning)",
        description="Without STUDY: every study, built-in and installed. With STUDY (a name, "
        "module or path/to/study.py): each parameter `market-sim run STUDY --set KEY=VALUE` "
        "accepts, its value(s) in the study's grid, what it allows and what it means.",
    )
    ls.add_argument("study", nargs="?", metavar="STUDY", help="a study whose parameters to list")
    ls.set_defaults(func=run)
    return ls


def run(args) -> int:
    from ..registry import SCENARIOS
    from ..runner import describe_parameters, list_scenarios

    if args.study is None:
        print_listing(list_scenarios(), width=24, registry=SCENARIOS)
        return 0
    rows = describe_parameters(args.study)
    width = max((len(r.name) for r in rows), default=0) + 2
    print(f"parameters of {args.study} (market-sim run {args.study} --set KEY=VALUE):")
    for r in rows:
        print(f"  {r.name:<{width}}{r.meaning or '(no description)'}")
        print(f"  {'':<{width}}default: {r.default}; allowed: {r.allowed}")
    return 0
