"""``market-sim scenarios``: the studies, built-in and installed."""

from __future__ import annotations

from .arguments import print_listing


def add_parser(subparsers):
    ls = subparsers.add_parser("scenarios", help="list the studies (built-in and installed)")
    ls.set_defaults(func=run)
    return ls


def run(args) -> int:
    from ..registry import SCENARIOS
    from ..runner import list_scenarios

    print_listing(list_scenarios(), width=24, registry=SCENARIOS)
    return 0
