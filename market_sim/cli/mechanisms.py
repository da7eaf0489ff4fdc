"""``market-sim mechanisms``: the registered mechanisms, built-in and third-party."""

from __future__ import annotations

from .arguments import print_listing


def add_parser(subparsers):
    lst = subparsers.add_parser(
        "mechanisms", help="list the registered mechanisms (built-in and third-party)"
    )
    lst.set_defaults(func=run)
    return lst


def run(args) -> int:
    from ..registry import MECHANISMS

    print_listing(MECHANISMS.describe(), registry=MECHANISMS)
    return 0
