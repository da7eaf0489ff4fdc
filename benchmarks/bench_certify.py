"""Certification and coalition benchmark, as ratios measured back to back in this run.

    python benchmarks/bench_certify.py [--n 10000] [--k 100] [--markets 10 100 10000]

Rows: ``myerson_check`` on n sellers x k candidate reports against sorting the same
(n, k) array row by row (the check sorts once and then does O(k) work per seller;
well under a second at 10^4 x 100); ``coalition_search`` (pairs,
default budget) on one market of the offline mechanism against one ``run`` of it on the
same market (reference: the search evaluates ~1000 joint reports, each a re-solve plus
two members' Myerson payments).
"""

from __future__ import annotations

import argparse
import platform
import time

import numpy as np
from bench_offline import best_time  # benchmarks/ is on sys.path when run as a script

from market_sim.certification import myerson_check
from market_sim.coalitions import coalition_search
from market_sim.distributions import parse_distribution
from market_sim.mechanisms.base import as_mechanism


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--n", type=int, default=10**4)
    ap.add_argument("--k", type=int, default=100)
    ap.add_argument("--markets", type=int, nargs="*", default=[10, 100, 10**4])
    args = ap.parse_args(argv)
    rng = np.random.default_rng(0)
    print(f"# certification and coalitions; {platform.machine()}, {time.strftime('%Y-%m-%d')}")
    print("| measure | size | time s | ratio | target |")
    print("|---|---|---|---|---|")

    z = rng.uniform(0, 1, (args.n, args.k))
    e = 1 - z
    t = z * e + (1 - z) ** 2 / 2  # exact Myerson payments of eps = 1 - z
    t_sort = best_time(lambda: np.sort(z, axis=1))
    t_check = best_time(lambda: myerson_check(z, e, t, (0, 1)))
    print(
        f"| myerson_check / row sort | {args.n} x {args.k} | {t_check:.3f} | "
        f"{t_check / t_sort:.1f}x | < 1 s |"
    )

    dist = parse_distribution("uniform:1:5")
    for m in args.markets:
        costs = dist.sample(m, np.random.default_rng(m))
        mech = as_mechanism("offline", dist=dist, n_sellers=m)
        mech.run(costs)  # compile / warm up
        t_run = best_time(lambda mech=mech, costs=costs: mech.run(costs))
        start = time.perf_counter()
        res = coalition_search(mech, costs, 2, np.random.default_rng(1), tol=0.0)
        t_search = time.perf_counter() - start
        print(
            f"| coalition search (pairs, {res.n_joint_reports} joint reports) / one run | "
            f"{m} sellers | {t_search:.2f} | {t_search / t_run:.0f}x | reference |"
        )


if __name__ == "__main__":
    main()
