"""Leaderboard benchmark: ``compare`` of every registered cost-only mechanism.

    python benchmarks/bench_compare.py [--m 200] [--markets 10] [--reps 2] [--json FILE]

Every registered mechanism that does not need the sellers' data is compared on
``--markets`` markets of ``--m`` sellers (U[0, 1]) with the default audit search.
Target: the whole leaderboard, audits included, in under a minute at m = 200 and
10 markets.  Also reported, measured back to back in this run: the ratio of the
leaderboard to the same mechanisms' plain audits on as many markets (what the
outcomes, the statistics and the common random numbers add; target <= 1.25), and
each mechanism's share of the time.  Both are the best of ``--reps`` interleaved runs.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_offline import write_json  # noqa: E402

from market_sim.auditing import audit  # noqa: E402
from market_sim.comparison import compare  # noqa: E402
from market_sim.distributions import as_distribution  # noqa: E402
from market_sim.mechanisms.base import as_mechanism  # noqa: E402
from market_sim.registry import MECHANISMS  # noqa: E402

DIST = "uniform:0:1"
LAW = as_distribution(DIST)
TARGET_S = 60.0
TARGET_RATIO = 1.25


def cost_only(m: int) -> list[str]:
    """The registered mechanisms that run on reported costs alone."""
    return [
        name
        for name in MECHANISMS.names()
        if not getattr(MECHANISMS.load(name), "spec_argument", "")  # onnx:PATH needs a file
        and not getattr(as_mechanism(name, dist=LAW, n_sellers=m), "needs_data", False)
    ]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--m", type=int, default=200)
    ap.add_argument("--markets", type=int, default=10)
    ap.add_argument("--reps", type=int, default=2)
    ap.add_argument("--json", default=None)
    args = ap.parse_args(argv)
    names = cost_only(args.m)
    compare(names, DIST, 20, 2, 0, n_grid=5, n_random=2, refine=False)  # compile the kernels
    total = audits = np.inf
    for _ in range(args.reps):  # interleaved, the best of each: a loaded machine hurts both
        t = time.perf_counter()
        res = compare(names, DIST, args.m, args.markets, np.random.default_rng(0))
        total = min(total, time.perf_counter() - t)
        t = time.perf_counter()
        for name in names:
            audit(name, DIST, args.m, args.markets, np.random.default_rng(0))
        audits = min(audits, time.perf_counter() - t)
    ratio = total / audits
    ok = total <= TARGET_S and ratio <= TARGET_RATIO
    lb = res.leaderboard.set_index("mechanism")
    print(f"{len(names)} mechanisms, {args.markets} markets x {args.m} sellers ({DIST})")
    for name in names:
        print(f"  {name:24s} {lb.loc[name, 'seconds']:6.2f} s  {lb.loc[name, 'ic']}")
    print(
        f"leaderboard {total:.1f} s (target <= {TARGET_S:.0f}); plain audits {audits:.1f} s; "
        f"ratio {ratio:.2f}x (target <= {TARGET_RATIO}){'' if ok else '  FAILED'}"
    )
    if args.json:
        rows = [
            {
                "case": f"compare, {len(names)} mechanisms, {args.markets} x {args.m}",
                "compare_s": total,
                "audits_s": audits,
                "ratio": ratio,
                "target": f"<= {TARGET_S} s, ratio <= {TARGET_RATIO}",
                "mechanisms": names,
            }
        ]
        write_json(args.json, rows)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
