"""The runner's costs next to their targets (issue 21 item 3).

    python benchmarks/bench_runner.py [--json benchmarks/runner.json]

* importing market_sim and a study (``market_sim.scenarios.asymptotic``), in a
  fresh interpreter, interpreter start-up excluded: <= 0.5 s;
* ``market-sim scenarios``, the whole command: <= 1 s;
* per-task overhead of the runner on a study that does nothing, one worker:
  dispatch (seeding, the call, the rows) <= 1 ms; the Parquet file of each task
  is shown beside it (no target: it is the price of per-task resumability);
* the quick asymptotic sweep (>= 200 tasks), 1 worker / 2 workers: >= 1.7.

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


def worker_ratio(min_tasks: int = 200) -> tuple[int, float, dict]:
    """(tasks, time with 1 worker / time with 2 workers, times) of the quick asymptotic
    sweep; the first pass of each warms imports, caches and the fork server up."""
    from market_sim.runner import plan, run_scenario

    reps = -(-min_tasks // len(plan("asymptotic", quick=True, reps=1)))
    times: dict[int, float] = {}
    for workers in (1, 2, 1, 2):
        out = tempfile.mkdtemp()
        try:
            t = time.perf_counter()
            run_scenario("asymptotic", out, quick=True, reps=reps, workers=workers)
            times[workers] = time.perf_counter() - t
        finally:
            shutil.rmtree(out)
    n = len(plan("asymptotic", quick=True, reps=reps))
    return n, times[1] / times[2], times


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--json", default=None)
    args = ap.parse_args(argv)
    dispatch, whole = task_overhead_ms()
    n, ratio, times = worker_ratio()
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
            f"quick asymptotic sweep, {n} tasks: 1 worker / 2 workers "
            f"({times[1]:.2f} s / {times[2]:.2f} s)",
            ratio,
            ">= 1.7",
            lambda v: v >= 1.7,
        ),
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
