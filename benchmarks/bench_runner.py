"""The runner's costs next to their targets.

    python benchmarks/bench_runner.py [--json benchmarks/runner.json] [--reps 20]

* importing market_sim and a study (``market_sim.scenarios.asymptotic``), in a
  fresh interpreter, interpreter start-up excluded: <= 0.5 s;
* ``market-sim scenarios``, the whole command: <= 1 s;
* per-task overhead of the runner on a study that does nothing, one worker:
  dispatch (seeding, the call, the rows) <= 1 ms; the Parquet file of each task
  is shown beside it (no target: it is the price of per-task resumability);
* a sweep with real work, 1 worker / 2 workers: >= 1.7.  The sweep is the
  asymptotic study's grid cut at m = 10^6 (3 cost laws x 9 sizes 10^2..10^6, a
  solve each) with --reps replications: 540 tasks of 1 ms to 0.5 s, about 17 s
  on one quiet core.  (The quick sweep, 0.9 s in all, is shorter than starting a
  second worker; the full grid is dominated by three tasks at m = 10^7, one of
  8 s, which no scheduling splits.)  Beside the ratio: how many workers were
  busy on average (task seconds / wall seconds), which the machine's other load
  does not hide: on a busy machine both workers run, each more slowly.

Times are the best of a few runs; the machine's other load lowers the ratio.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

NULL_STUDY = '''
"""A study that does nothing: the runner's own cost."""
REPLICATIONS = 1

def grid(quick=False):
    return [dict(i=i) for i in range(1000)]

def run(params, rng):
    return [dict(x=0.0)]
'''


def _best(fn, n: int) -> float:
    return min(fn() for _ in range(n))


def import_seconds(n: int = 5) -> float:
    code = (
        "import time; t = time.perf_counter(); import market_sim, "
        "market_sim.scenarios.asymptotic; print(time.perf_counter() - t)"
    )

    def once():
        out = subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, check=True
        )
        return float(out.stdout)

    return _best(once, n)


def scenarios_seconds(n: int = 5) -> float:
    exe = Path(sys.executable).with_name("market-sim")
    cmd = [str(exe)] if exe.exists() else [sys.executable, "-m", "market_sim.cli"]

    def once():
        t = time.perf_counter()
        subprocess.run([*cmd, "scenarios"], capture_output=True, check=True)
        return time.perf_counter() - t

    return _best(once, n)


def task_overhead_ms(n: int = 3) -> tuple[float, float]:
    """(dispatch ms, dispatch + Parquet write ms) per task of the null study."""
    from market_sim.runner import execute, find_study, plan, run_scenario

    folder = Path(tempfile.mkdtemp())
    try:
        path = folder / "null_study.py"
        path.write_text(NULL_STUDY)
        study = find_study(str(path))
        tasks = plan(str(path), study=study)

        def dispatch():
            t = time.perf_counter()
            for task in tasks:
                execute(task, study.obj)
            return (time.perf_counter() - t) / len(tasks)

        def whole():
            out = folder / f"out{time.perf_counter_ns()}"
            t = time.perf_counter()
            run_scenario(str(path), out)
            return (time.perf_counter() - t) / len(tasks)

        return 1e3 * _best(dispatch, n), 1e3 * _best(whole, n)
    finally:
        shutil.rmtree(folder)


WORK_STUDY = '''
"""The runner benchmark's sweep: the asymptotic study's tasks for m <= 10^6."""
import itertools

import numpy as np

from market_sim.scenarios.asymptotic import DISTS, run  # noqa: F401

NAME = "asymptotic_to_1e6"
REPLICATIONS = {reps}


def grid(quick=False):
    ms = [int(v) for v in np.logspace(2, 6, 9).round()]
    return [
        dict(dist=d, m=m, mu=1.0, sigma=1.0, gamma=1.0) for d, m in itertools.product(DISTS, ms)
    ]
'''


def worker_ratio(reps: int = 20) -> tuple[int, float, dict, dict]:
    """(tasks, time with 1 worker / time with 2 workers, best wall seconds, workers busy
    on average) for the sweep WORK_STUDY, each run twice, 1 and 2 workers alternating."""
    import pandas as pd

    from market_sim.runner import find_study, plan, run_scenario

    folder = Path(tempfile.mkdtemp())
    try:
        path = folder / "asymptotic_to_1e6.py"
        path.write_text(WORK_STUDY.format(reps=reps))
        n = len(plan(str(path), study=find_study(str(path))))
        times: dict[int, float] = {}
        busy: dict[int, float] = {}
        for workers in (1, 2, 1, 2):
            out = folder / f"out{workers}_{time.perf_counter_ns()}"
            t = time.perf_counter()
            run_scenario(str(path), out, workers=workers)
            wall = time.perf_counter() - t
            if wall < times.get(workers, float("inf")):
                times[workers] = wall
                busy[workers] = float(pd.read_parquet(out / "results").elapsed.sum()) / wall
            shutil.rmtree(out)
    finally:
        shutil.rmtree(folder)
    return n, times[1] / times[2], times, busy


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--json", default=None)
    ap.add_argument("--reps", type=int, default=20, help="replications of the 2-worker sweep")
    args = ap.parse_args(argv)
    dispatch, whole = task_overhead_ms()
    n, ratio, times, busy = worker_ratio(args.reps)
    rows = [
        ("import market_sim + a study (s)", import_seconds(), "<= 0.5", lambda v: v <= 0.5),
        (
            "`market-sim scenarios`, whole command (s)",
            scenarios_seconds(),
            "<= 1",
            lambda v: v <= 1.0,
        ),
        ("per-task dispatch overhead, 1 worker (ms)", dispatch, "<= 1", lambda v: v <= 1.0),
        ("per task incl. its Parquet file, 1 worker (ms)", whole, "-", None),
        (
            f"asymptotic sweep to m = 1e6, {n} tasks: 1 worker / 2 workers "
            f"({times[1]:.2f} s / {times[2]:.2f} s)",
            ratio,
            ">= 1.7",
            lambda v: v >= 1.7,
        ),
        ("  workers busy on average, 2 workers (task s / wall s)", busy[2], "-", None),
        ("  the same, 1 worker", busy[1], "-", None),
    ]
    print(
        f"# {platform.machine()}, {os.cpu_count()} cores, {time.strftime('%Y-%m-%d')}, "
        f"load average {os.getloadavg()[0]:.1f}"
    )
    print("| what | measured | target | met |")
    print("|---|---|---|---|")
    for what, value, target, ok in rows:
        met = "-" if ok is None else ("yes" if ok(value) else "no")
        print(f"| {what} | {value:.3g} | {target} | {met} |")
    if args.json:
        Path(args.json).write_text(
            json.dumps([{"what": w, "measured": v, "target": t} for w, v, t, _ in rows], indent=1)
        )


if __name__ == "__main__":
    main()
