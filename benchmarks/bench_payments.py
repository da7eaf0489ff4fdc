"""Payments benchmark: Myerson payments and best-response utilities
as ratios to one solve, measured back to back in this run.

    python benchmarks/bench_payments.py [--m 100000] [--br-m 10000 100000] [--cap-m 300]

Rows: all payments / one solve at m (uncapped, target <= 20x; k = 5, target
<= 60x, measured at --cap-m since a capped evaluation still re-solves the
market); the former bisection as a reference ratio; and a best-response round
(OfflineCurves over all sellers, utilities on an 11-point candidate grid,
targets 30 s at 10^4 and 600 s at 10^5).
"""

from __future__ import annotations

import argparse
import platform
import time

import numpy as np
from bench_offline import best_time  # benchmarks/ is on sys.path when run as a script

from market_sim.distributions import parse_distribution
from market_sim.mechanisms.offline import solve
from market_sim.mechanisms.payments import OfflineCurves, offline_payments


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--m", type=int, default=10**5)
    ap.add_argument("--br-m", type=int, nargs="*", default=[10**4, 10**5])
    ap.add_argument("--cap-m", type=int, default=300)
    args = ap.parse_args(argv)
    dist = parse_distribution("uniform:0:1")
    kw = dict(mu=1.0, sigma=1.0, gamma=1.0)
    rng = np.random.default_rng(0)
    print(
        f"# payments, U[0,1] costs, mu=sigma=gamma=1; {platform.machine()}, "
        f"{time.strftime('%Y-%m-%d')}"
    )
    print("| measure | m | time s | ratio to one solve | target |")
    print("|---|---|---|---|---|")

    c = dist.sample(args.m, rng)
    psi = dist.virtual_cost(c)
    t_solve = best_time(lambda: solve(psi, **kw))
    t_pay = best_time(lambda: offline_payments(c, dist, **kw), 2)
    print(f"| all payments (Illinois) | {args.m} | {t_pay:.3f} | {t_pay / t_solve:.1f}x | <= 20x |")
    t_old = best_time(lambda: offline_payments(c, dist, **kw, method="bisect"), 1)
    print(
        f"| all payments (former bisection) | {args.m} | {t_old:.3f} | "
        f"{t_old / t_solve:.1f}x | reference |"
    )

    cs = dist.sample(args.cap_m, rng)
    psis = dist.virtual_cost(cs)
    t_solve_k = best_time(lambda: solve(psis, **kw, k=5.0))
    t_pay_k = best_time(lambda: offline_payments(cs, dist, **kw, k=5.0), 1)
    print(
        f"| all payments, k = 5 (re-solve oracle) | {args.cap_m} | {t_pay_k:.3f} | "
        f"{t_pay_k / t_solve_k:.0f}x | <= 60x at 10^5 (not met: see report) |"
    )

    for m in args.br_m:
        c = dist.sample(m, rng)
        t_solve = best_time(lambda c=c: solve(dist.virtual_cost(c), **kw))
        Z = np.clip(c[:, None] * np.linspace(0.5, 1.5, 11)[None, :], 1e-6, 1.0)

        def round_(c=c, Z=Z):
            OfflineCurves(c, dist, **kw).utilities(Z, c)

        t_br = best_time(round_, 1)
        target = "<= 30 s" if m <= 10**4 else "<= 600 s"
        print(
            f"| best-response round: curves + utilities, 11 candidates | {m} | {t_br:.2f} | "
            f"{t_br / t_solve:.0f}x | {target} |"
        )


if __name__ == "__main__":
    main()
