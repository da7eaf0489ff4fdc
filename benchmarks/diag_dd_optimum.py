"""How often, and by how much, the data-dependent mechanism's multi-start solver misses the
global optimum of Eq. 17 at the defaults (mu = sigma = gamma = 1, Lambda = 0.01, not
jointly convex), against the branch-and-bound certificate of ``dd_certify``
(docs/data-dependent.md, "A statement of optimality").

For m sellers (``--sellers``, default 3 4 5 6) and ``--markets`` seeded markets of
``m*uniform:0:1;data=synthetic``, it solves ``--profiles`` virtual-cost profiles per
market with ``solve_many`` and certifies each: the truthful one, every seller alone at
the floor (psi = 0) with the others truthful, all others at the floor, and random draws
(the audit's kinds of profiles).  Prints per m: profiles, misses (the search found a
point better by more than the certificate's tol), the largest miss (absolute and
relative to the objective), the largest change of eps, certified share, seconds each.

    PYTHONPATH=$PWD python benchmarks/diag_dd_optimum.py --sellers 3 4 --markets 5
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from market_sim.mechanisms import data_dependent as dd
from market_sim.mechanisms.builtin import DD_EPS_AVG_GRID
from market_sim.population import Population

KW = dict(mu=1.0, sigma=1.0, gamma=1.0, reg_lambda=1e-2, eps_avg_grid=DD_EPS_AVG_GRID)


def profiles(psi: np.ndarray, rng: np.random.Generator, n_random: int) -> np.ndarray:
    """The truthful profile, each seller alone at psi = 0, all but the last at psi = 0,
    and ``n_random`` draws of U[0, 1] costs (psi = 2c)."""
    m = psi.size
    alone = np.tile(psi, (m, 1))
    alone[np.arange(m), np.arange(m)] = 0.0
    others = np.zeros((1, m))
    others[0, -1] = psi[-1]
    return np.vstack([psi, alone, others, 2.0 * rng.uniform(size=(n_random, m))])


def study(m: int, markets: int, n_random: int) -> dict:
    """The misses of the multi-start on ``markets`` markets of m sellers."""
    pop = Population.parse(f"{m}*uniform:0:1;data=synthetic")
    rows = []
    for seed in range(markets):
        rng = np.random.default_rng(seed)
        mk = pop.sample(rng)
        X, y = mk.data
        P = profiles(2.0 * mk.costs, rng, n_random)
        plain = dd.solve_many(X, y, P, **KW)
        t0 = time.perf_counter()
        cert = dd.solve_many(X, y, P, certify=True, **KW)
        sec = (time.perf_counter() - t0) / P.shape[0]
        assert cert.certified_optimum is not None and cert.gap_bound is not None
        for b in range(P.shape[0]):
            miss = plain.objective[b] - cert.objective[b]
            deps = float(np.max(np.abs(plain.eps[b] - cert.eps[b])))
            rows.append((miss, miss / cert.objective[b], deps, cert.certified_optimum[b],
                         cert.gap_bound[b], sec))  # fmt: skip
    r = np.array(rows, dtype=float)
    missed = r[:, 0] > 1e-7
    return dict(
        m=m,
        profiles=len(rows),
        misses=int(missed.sum()),
        max_miss=float(r[:, 0].max()),
        max_rel_miss=float(r[:, 1].max()),
        max_eps_change=float(r[:, 2].max()),
        certified=float(r[:, 3].mean()),
        max_gap=float(r[:, 4].max()),
        sec_per_profile=float(r[:, 5].mean()),
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sellers", type=int, nargs="+", default=[3, 4, 5, 6])
    ap.add_argument("--markets", type=int, default=5)
    ap.add_argument("--random", type=int, default=3)
    args = ap.parse_args()
    for m in args.sellers:
        s = study(m, args.markets, args.random)
        print(" ".join(f"{k}={v:.3g}" if isinstance(v, float) else f"{k}={v}"
                       for k, v in s.items()), flush=True)  # fmt: skip


if __name__ == "__main__":
    main()
