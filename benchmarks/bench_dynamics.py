"""The dynamics study's quick run next to its target.

    python benchmarks/bench_dynamics.py [--json benchmarks/dynamics.json] [--workers 1]

Wall time of the whole command ``market-sim run dynamics --quick`` (default: one
worker, as a user types it), start-up and the Bayes-Nash references included:
<= 120 s.  Beside it: the task seconds per mechanism, from the stored rows
(``elapsed``), which say where the time goes.  The machine's other load lengthens
the wall time; quote a run on a quiet machine.
"""

from __future__ import annotations

import argparse
import json
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

TARGET_SECONDS = 120.0


def quick_run(workers: int) -> tuple[float, dict]:
    """(wall seconds of the command, task seconds per mechanism)."""
    import pandas as pd

    exe = Path(sys.executable).with_name("market-sim")
    cmd = [str(exe)] if exe.exists() else [sys.executable, "-m", "market_sim.cli"]
    folder = Path(tempfile.mkdtemp())
    try:
        out = folder / "dynamics"
        t = time.perf_counter()
        subprocess.run(
            [*cmd, "run", "dynamics", "--quick", "--workers", str(workers), "--out", str(out)],
            check=True,
            capture_output=True,
        )
        wall = time.perf_counter() - t
        df = pd.read_parquet(out / "results")
        per_task = df.groupby(["mechanism", "task"]).elapsed.first()
        return wall, {k: round(float(v), 2) for k, v in per_task.groupby("mechanism").sum().items()}
    finally:
        shutil.rmtree(folder)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--json", default=None)
    ap.add_argument("--workers", type=int, default=1)
    args = ap.parse_args(argv)
    wall, per_mech = quick_run(args.workers)
    ok = wall <= TARGET_SECONDS
    print(
        f"market-sim run dynamics --quick ({args.workers} worker(s)): {wall:.1f} s "
        f"(target <= {TARGET_SECONDS:.0f} s) {'OK' if ok else 'MISSED'}"
    )
    print("task seconds per mechanism:", per_mech)
    if args.json:
        Path(args.json).write_text(
            json.dumps(
                dict(
                    machine=platform.platform(),
                    workers=args.workers,
                    wall_seconds=wall,
                    target_seconds=TARGET_SECONDS,
                    task_seconds=per_mech,
                ),
                indent=2,
            )
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
