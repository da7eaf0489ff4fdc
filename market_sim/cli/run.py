"""``market-sim run``: a study's grid into a resumable results folder."""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

from .arguments import add_executor, count, executor_of


def add_parser(subparsers):
    r = subparsers.add_parser(
        "run",
        help="run a study's grid into a resumable results folder",
        description="Run every (parameters, replication) task of a study with "
        "reproducible seeds. Each finished task is written to OUT/results/ at "
        "once; running the same command again resumes.",
    )
    r.add_argument(
        "scenario",
        metavar="STUDY",
        help="a name from `market-sim scenarios`, a module (pkg.study or "
        "module:attribute) or a file path/to/study.py",
    )
    r.add_argument("--quick", action="store_true", help="the scenario's small grid (a smoke test)")
    r.add_argument("--seed", type=int, default=0, help="root seed of the study (default 0)")
    r.add_argument(
        "--reps",
        type=count("reps"),
        default=None,
        help="replications per parameter point (default: the scenario's)",
    )
    add_executor(r)
    r.add_argument(
        "--set",
        dest="overrides",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="fix a grid parameter for every point, e.g. --set m=1000 (repeatable)",
    )
    r.add_argument("--out", default=None, help="results folder (default results/STUDY)")
    r.add_argument("--quiet", action="store_true", help="no progress bar (stderr)")
    r.add_argument("--no-progress", dest="quiet", action="store_true", help=argparse.SUPPRESS)
    r.set_defaults(func=run)
    return r


def run(args) -> int:
    from ..runner import parse_overrides, run_scenario

    default = Path(args.scenario).stem if args.scenario.endswith(".py") else args.scenario
    out = args.out or "results/" + re.sub(r"[^\w.-]+", "_", default)
    try:
        res = run_scenario(
            args.scenario,
            out,
            seed=args.seed,
            quick=args.quick,
            reps=args.reps,
            **executor_of(args),
            overrides=parse_overrides(args.overrides),
            progress=not args.quiet,
        )
    except KeyboardInterrupt:
        print(
            f"market-sim: interrupted; finished tasks are in {out}/results; run the same "
            f"command to resume",
            file=sys.stderr,
        )
        return 130
    print(
        f"{res.total} tasks: {res.skipped} already done, {res.ran} run, {res.failed} failed; "
        f"results in {out}/results"
    )
    for reason, n, first in res.failures:  # one line per distinct reason
        noun = "task" if n == 1 else "tasks"
        print(f"{n} {noun} failed: {reason} (first: {first})", file=sys.stderr)
    return 1 if res.failed else 0
