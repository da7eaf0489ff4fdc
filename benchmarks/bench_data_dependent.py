"""Data-dependent mechanism benchmark (Eq. 17 / Alg. 4 of 003): the fast path against
the old one, measured back to back in this run.

    PYTHONPATH=$PWD python benchmarks/bench_data_dependent.py [--sellers 100]
        [--markets 1] [--audit-sellers 100] [--audit-before-sellers 5] [--repeat 3]

Paths: "old" = ``warm_start=False, blas_threads=None, cache_nodes=False`` (every
re-solve from scratch, the BLAS pool as found, payment nodes re-solved on every call);
"fast" = the defaults (one BLAS thread, nodes cached; warm starts only where
Eq. 17 is jointly convex, 2 Lambda mu > m, not at the default mu = 1, Lambda = 0.01);
"fast+warm" = the jointly convex mu = 1000, Lambda = 0.1 with warm starts, against its
own old path.  Rows: one solve, one outcome (n solves plus n x 9 payment nodes) and
an audit of --audit-sellers sellers with synthetic data over --markets markets (fast
only; the old path at that size takes hours), with the old/fast ratio of an audit at
--audit-before-sellers sellers, and the projection to 10 markets.
"""

from __future__ import annotations

import argparse
import platform
import time

import numpy as np

from market_sim.auditing import audit
from market_sim.distributions import uniform
from market_sim.mechanisms import data_dependent as dd
from market_sim.mechanisms.builtin import DataDependentMechanism
from market_sim.population import Population

OLD = dict(warm_start=False, blas_threads=None, cache_nodes=False)
CONVEX = dict(mu=1000.0, reg_lambda=0.1)


def _seconds(f, repeat: int) -> float:
    """Best of ``repeat`` wall-clock runs of f()."""
    best = np.inf
    for _ in range(repeat):
        t = time.perf_counter()
        f()
        best = min(best, time.perf_counter() - t)
    return float(best)


def _market(n: int, seed: int = 0):
    mk = Population([("uniform:0:1", n)], data="synthetic").sample(np.random.default_rng(seed))
    return mk.data, mk.costs


def _row(name: str, old: float, fast: float) -> None:
    print(f"{name:<34} old {old:9.3f} s   fast {fast:8.3f} s   old/fast {old / fast:7.1f}x")


def bench_solve_and_outcome(n: int, repeat: int) -> None:
    (X, y), costs = _market(n)
    for label, params in (("default (non-convex)", {}), ("convex mu=1000 L=0.1", CONVEX)):
        fast = DataDependentMechanism(uniform(0, 1), **params).with_data(X, y)
        old = DataDependentMechanism(uniform(0, 1), **params, **OLD).with_data(X, y)
        psi = fast.dist.virtual_cost(costs)
        kw = fast._kw()
        t_old = _seconds(
            lambda kw=kw, psi=psi: dd.solve(X, y, psi, blas_threads=None, **kw), repeat
        )
        t_fast = _seconds(lambda kw=kw, psi=psi: dd.solve(X, y, psi, **kw), repeat)
        _row(f"solve n={n} {label}", t_old, t_fast)
        t_old = _seconds(lambda old=old: old.outcome(costs), 1)
        t_fast = _seconds(lambda fast=fast: fast.outcome(costs), 1)
        _row(f"outcome n={n} {label}", t_old, t_fast)


def _audit(mech, n: int, markets: int):
    pop = Population([("uniform:0:1", n)], data="synthetic")
    return audit(mech, pop, None, markets, np.random.default_rng(0))


def bench_audit(n: int, markets: int, n_before: int) -> None:
    old = DataDependentMechanism(uniform(0, 1), **OLD)
    fast = DataDependentMechanism(uniform(0, 1))
    t_old = _seconds(lambda: _audit(old, n_before, 1), 1)
    t_fast = _seconds(lambda: _audit(fast, n_before, 1), 1)
    _row(f"audit n={n_before} x 1 market", t_old, t_fast)
    t = _seconds(lambda: _audit(fast, n, markets), 1)
    per = t / markets
    print(
        f"audit n={n} x {markets} market(s), fast: {t:.1f} s ({per:.1f} s per market;"
        f" 10 markets projected {10 * per:.0f} s = {10 * per / 60:.1f} min)"
    )


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--sellers", type=int, default=100)
    ap.add_argument("--markets", type=int, default=1)
    ap.add_argument("--audit-sellers", type=int, default=100)
    ap.add_argument("--audit-before-sellers", type=int, default=5)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--no-audit", action="store_true")
    args = ap.parse_args(argv)
    print(f"{platform.processor() or platform.machine()}, python {platform.python_version()}")
    bench_solve_and_outcome(args.sellers, args.repeat)
    if not args.no_audit:
        bench_audit(args.audit_sellers, args.markets, args.audit_before_sellers)


if __name__ == "__main__":
    main()
