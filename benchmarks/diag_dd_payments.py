"""The data-dependent mechanism's Myerson integral, int_0^1 eps_i(z) dz, three ways
(docs/data-dependent.md, Payments): the envelope rule (Eq. 17's value at 0 and 1), the
trapezoid rule on 9 and 33 equally spaced reports, against an independent reference
(the jumps of the chosen eta located by 60 bisections, Gauss-Legendre on each piece);
and whether eps_i is monotone on 2,400 reports.

    PYTHONPATH=$PWD python benchmarks/diag_dd_payments.py
"""

from __future__ import annotations

from itertools import pairwise

import numpy as np

from market_sim.distributions import uniform
from market_sim.mechanisms import data_dependent as dd
from market_sim.mechanisms.builtin import DD_EPS_AVG_GRID
from market_sim.population import Population

KW = dict(mu=1.0, sigma=1.0, gamma=1.0, reg_lambda=1e-2, eps_avg_grid=DD_EPS_AVG_GRID)
DIST = uniform(0, 1)


def own(X, y, costs, i, z):
    """(eps_i, eta, Eq. 17's value) when seller i reports each z, the others at costs."""
    P = np.tile(DIST.virtual_cost(costs), (z.size, 1))
    P[:, i] = DIST.virtual_cost(z)
    res = dd.solve_many(X, y, P, **KW)
    return res.eps[:, i], res.eta, res.objective


def reference(X, y, costs, i, n_gl=16):
    """int_0^1 eps_i by Gauss-Legendre between the bisected changes of eta; its jumps."""
    z = np.unique(np.r_[np.linspace(0, 1, 65), np.geomspace(1e-7, 1, 40)])
    eta = own(X, y, costs, i, z)[1]
    jumps = []
    for k in np.flatnonzero(eta[1:] != eta[:-1]):
        a, b = z[k], z[k + 1]
        for _ in range(60):
            mid = 0.5 * (a + b)
            same = own(X, y, costs, i, np.array([mid]))[1][0] == eta[k]
            a, b = (mid, b) if same else (a, mid)
        jumps.append(0.5 * (a + b))
    x, w = np.polynomial.legendre.leggauss(n_gl)
    edges = np.r_[0.0, jumps, 1.0]
    nodes = np.concatenate([(a + b) / 2 + (b - a) / 2 * x for a, b in pairwise(edges)])
    weights = np.concatenate([(b - a) / 2 * w for a, b in pairwise(edges)])
    return float(weights @ own(X, y, costs, i, nodes)[0]), jumps


def main() -> None:
    for seed, m in [(0, 10), (1, 15), (2, 20)]:
        mk = Population([("uniform:0:1", m)], data="synthetic").sample(np.random.default_rng(seed))
        (X, y), costs = mk.data, mk.costs
        for i in range(3):
            scan = np.unique(np.r_[np.linspace(0, 1, 2001), np.geomspace(1e-7, 1, 400)])
            e = own(X, y, costs, i, scan)[0]
            rises = int(np.sum(np.diff(e) > 1e-9 * e.max()))
            ref, jumps = reference(X, y, costs, i)
            value = own(X, y, costs, i, np.array([0.0, 1.0]))[2]
            envelope = (value[1] - value[0]) / (2 * KW["gamma"])  # psi = 2z: psi' = 2
            trap = {n: np.trapezoid(own(X, y, costs, i, np.linspace(0, 1, n))[0],
                                    np.linspace(0, 1, n)) for n in (9, 33)}  # fmt: skip
            print(f"m={m} seed={seed} seller {i}: eps(0) {e[0]:.3g}, rises {rises}, "
                  f"eta jumps {len(jumps)}; integral {ref:.6f}; minus it: envelope "
                  f"{envelope - ref:.1e}, trapezoid 9 {trap[9] - ref:.3g}, "
                  f"33 {trap[33] - ref:.3g}")  # fmt: skip


if __name__ == "__main__":
    main()
