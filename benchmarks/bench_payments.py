"""Payments benchmark: Myerson payments and best-response utilities as ratios to one
solve, measured back to back in this run.

    python benchmarks/bench_payments.py [--m 100000] [--br-m 10000 100000]
                                        [--ref-m 300] [--smooth-check]

Rows: all payments / one solve at m, without a cap (target <= 20x) and with k = 5
(target <= 60x; 20,000 of the 10^5 sellers are bought, most at the cap, whose
integrals are interpolated in the cost); the former methods as reference ratios
(bisected piece ends without a cap; re-solving the market per point with a cap, at
--ref-m sellers only); with --smooth-check, the capped payments with every seller
integrated, their time and largest relative difference; and a best-response round
(OfflineCurves over all sellers, utilities on an 11-point candidate grid, targets 30 s
at 10^4 and 600 s at 10^5).  Per-seller laws: the payments of a one-class population's
SellerLaws / those of its law (the same calls: target ~1x), and of a 70/30 population on
U[0,1] and U[1,2] / one solve of it (and / the one-law payments above).
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
from market_sim.population import Population


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--m", type=int, default=10**5)
    ap.add_argument("--br-m", type=int, nargs="*", default=[10**4, 10**5])
    ap.add_argument("--ref-m", type=int, default=300)
    ap.add_argument("--smooth-check", action="store_true")
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

    t_solve_k = best_time(lambda: solve(psi, **kw, k=5.0))
    t_pay_k = best_time(lambda: offline_payments(c, dist, **kw, k=5.0), 2)
    print(
        f"| all payments, k = 5 | {args.m} | {t_pay_k:.3f} | {t_pay_k / t_solve_k:.1f}x | <= 60x |"
    )
    if args.smooth_check:
        from market_sim.mechanisms import payments

        fast = offline_payments(c, dist, **kw, k=5.0)[1]
        keep, payments._SMOOTH_MIN = payments._SMOOTH_MIN, 10**12
        try:
            t_all = best_time(lambda: offline_payments(c, dist, **kw, k=5.0), 1)
            each = offline_payments(c, dist, **kw, k=5.0)[1]
        finally:
            payments._SMOOTH_MIN = keep
        diff = np.max(np.abs(fast - each) / np.maximum(np.abs(each), 1e-300))
        print(
            f"| all payments, k = 5, every seller integrated | {args.m} | {t_all:.3f} | "
            f"{t_all / t_solve_k:.1f}x | reference (largest relative difference {diff:.1e}) |"
        )
    per_seller_rows(args.m, rng, kw)
    cs = dist.sample(args.ref_m, rng)
    psis = dist.virtual_cost(cs)
    t_solve_r = best_time(lambda: solve(psis, **kw, k=5.0))
    t_pay_r = best_time(lambda: offline_payments(cs, dist, **kw, k=5.0, method="resolve"), 1)
    t_pay_p = best_time(lambda: offline_payments(cs, dist, **kw, k=5.0), 2)
    print(
        f"| all payments, k = 5, re-solving per point (the former method) | {args.ref_m} | "
        f"{t_pay_r:.3f} | {t_pay_r / t_solve_r:.0f}x (pruned: {t_pay_p / t_solve_r:.0f}x) "
        "| reference |"
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


def per_seller_rows(m: int, rng, kw) -> None:
    """Payments with per-seller laws (SellerLaws) against one law, in this run."""
    one = Population([("uniform:0:1", m)])
    c = one.sample(rng).costs
    law, laws = one.laws[0], one.seller_laws
    t_law = best_time(lambda: offline_payments(c, law, **kw), 2)
    t_laws = best_time(lambda: offline_payments(c, laws, **kw), 2)
    print(
        f"| all payments, one-class SellerLaws / its law | {m} | {t_laws:.3f} | "
        f"{t_laws / t_law:.2f}x of the law's | ~1x |"
    )
    two = Population([("uniform:0:1", m * 7 // 10), ("uniform:1:2", m - m * 7 // 10)])
    c2 = two.sample(rng).costs
    psi2 = two.seller_laws.virtual_cost(c2)
    t_solve2 = best_time(lambda: solve(psi2, **kw))
    t_pay2 = best_time(lambda: offline_payments(c2, two.seller_laws, **kw), 2)
    print(
        f"| all payments, 70/30 on U[0,1] and U[1,2], per-seller laws | {m} | {t_pay2:.3f} | "
        f"{t_pay2 / t_solve2:.1f}x ({t_pay2 / t_law:.2f}x the one-law payments) | reference |"
    )


if __name__ == "__main__":
    main()
