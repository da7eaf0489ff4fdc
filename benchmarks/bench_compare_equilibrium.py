"""A newcomer's at-equilibrium comparison from the CLI alone (issue #51, item 1).

    python benchmarks/bench_compare_equilibrium.py [--m 30] [--markets 40] [--workers 2]
                                                   [--json FILE]

Runs, as a user would type it::

    market-sim compare --mechanism offline --mechanism pay-as-bid --mechanism uniform-price
        --dist beta:2:5:0:2 --sellers 30 --markets 40 --at equilibrium --workers 2 --quiet

and times the whole command (imports, the BNE of each mechanism the library does not
prove truthful, the audits it still needs, the scores).  Target: <= 3 minutes on two
cores.  It also times ``market-sim --help`` in the same run, so that a loaded machine
shows as a large start-up time beside the total (ratio total / start-up reported).
The load average at the start is printed: the target is stated for a free machine.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_offline import write_json  # noqa: E402

TARGET_S = 180.0
MECHANISMS = ("offline", "pay-as-bid", "uniform-price")
DIST = "beta:2:5:0:2"


def market_sim() -> str:
    """The ``market-sim`` of this interpreter's environment."""
    return str(Path(sys.executable).with_name("market-sim"))


def timed(cmd: list[str]) -> tuple[float, subprocess.CompletedProcess]:
    t = time.perf_counter()
    done = subprocess.run(cmd, capture_output=True, text=True, stdin=subprocess.DEVNULL)
    return time.perf_counter() - t, done


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--m", type=int, default=30)
    ap.add_argument("--markets", type=int, default=40)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--json", default=None)
    args = ap.parse_args(argv)
    load = os.getloadavg()[0]
    startup, _ = timed([market_sim(), "--help"])
    with tempfile.TemporaryDirectory() as tmp:
        cmd = [market_sim(), "compare"]
        for name in MECHANISMS:
            cmd += ["--mechanism", name]
        cmd += ["--dist", DIST, "--sellers", str(args.m), "--markets", str(args.markets)]
        cmd += ["--at", "equilibrium", "--workers", str(args.workers), "--quiet"]
        cmd += ["--out", tmp]
        total, done = timed(cmd)
    if done.returncode != 0:
        print(done.stdout, done.stderr, sep="\n")
        print(f"FAILED: exit {done.returncode}")
        return 1
    print(done.stdout)
    ok = total <= TARGET_S
    print(
        f"compare --at equilibrium, {len(MECHANISMS)} mechanisms, {args.markets} markets x "
        f"{args.m} sellers ({DIST}), {args.workers} workers: {total:.1f} s (target <= "
        f"{TARGET_S:.0f} s on a free machine); start-up {startup:.2f} s; load average at "
        f"start {load:.1f}{'' if ok else '  FAILED'}"
    )
    if args.json:
        row = {
            "case": f"compare --at equilibrium, {args.markets} x {args.m}",
            "seconds": total,
            "startup_s": startup,
            "load": load,
            "target": f"<= {TARGET_S} s",
        }
        write_json(args.json, [row])
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
