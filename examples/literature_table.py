"""The worked example of docs/literature.md: every literature mechanism at its defaults
on 200 seeded markets of 200 sellers (costs uniform on [1, 5], mu = sigma = gamma = 1),
beside the offline mechanism and the fixed-quantile posted price, with the audit.

    python examples/literature_table.py
"""

from __future__ import annotations

import time

import numpy as np

from market_sim.auditing import audit
from market_sim.distributions import parse_distribution
from market_sim.mechanisms.base import as_mechanism

NAMES = [
    "offline",
    "posted-price",
    "optimal-posted-price",
    "uniform-price",
    "min-cost",
    "fair-query",
    "proportional-share",
]


def main() -> None:
    dist, m = parse_distribution("uniform:1:5"), 200
    rng = np.random.default_rng(0)
    markets = [dist.sample(m, rng) for _ in range(200)]
    head = ["mechanism", "bought", "ε each (mean)", "total payment", "Eq. 11 loss"]
    print("| " + " | ".join(head) + " | audit (m = 200, 10 markets) |")
    print("|---|---|---|---|---|---|")
    for name in NAMES:
        mech = as_mechanism(name, dist=dist, n_sellers=m)
        n, e, pay, loss = [], [], [], []
        for c in markets:
            out = mech.run(c)
            s = out.eps.sum()
            n.append(np.count_nonzero(out.eps))
            e.append(s / max(n[-1], 1))
            pay.append(out.payments.sum())
            # Eq. 11 (003), payments made: mu ||eps|| / sum eps + sigma / sum eps + gamma sum t
            loss.append(np.linalg.norm(out.eps) / s + 1 / s + pay[-1] if s > 0 else np.inf)
        t = time.perf_counter()
        res = audit(name, dist, m, 10, np.random.default_rng(1))
        dt = time.perf_counter() - t
        print(
            f"| `{name}` | {np.mean(n):.1f} | {np.mean(e):.4f} | {np.mean(pay):.3f} "
            f"| {np.mean(loss):.3f} | {res.verdict}, {res.ir_verdict}, "
            f"max gain {res.summary['max_gain']:.2g} ({dt:.1f} s) |"
        )


if __name__ == "__main__":
    main()
