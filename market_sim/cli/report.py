"""``market-sim report``: Markdown and HTML reports of results folders (reads, never runs)."""

from __future__ import annotations

from pathlib import Path

from ..errors import MarketSimError
from ..files import check_writable_folder


def add_parser(subparsers):
    rep = subparsers.add_parser(
        "report",
        help="Markdown and HTML report of results folders",
        description="Read RESULTS/results (never re-running anything) and write "
        "report.md, report.html (figures embedded) and the figures into the report "
        "folder. With several RESULTS, one page across the studies with a table of "
        "contents, each study's own report in OUT/<study>/.",
    )
    rep.add_argument("results", nargs="+", help="folders written by `market-sim run`")
    rep.add_argument(
        "--out",
        default=None,
        help="report folder (default: RESULTS/report; needed with several RESULTS)",
    )
    rep.set_defaults(func=run)
    return rep


def run(args) -> int:
    from market_sim.analysis.report import write_index, write_report

    if len(args.results) > 1 and args.out is None:
        raise MarketSimError("report: --out is needed with several results folders")
    check_writable_folder(args.out or str(Path(args.results[0]) / "report"))
    if len(args.results) > 1:
        path = write_index(args.results, args.out)
    else:
        path = write_report(args.results[0], args.out)
    print(f"report written to {path} (and report.html)")
    return 0
