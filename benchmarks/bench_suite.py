"""The rest of the benchmark table -- the eta-grid and cvxpy baselines against the
exact solve, the online mechanism against a sort -- every figure a ratio of two times
measured back to back in this run.  (The runner's figures are ``bench_runner.py``'s.)

    python benchmarks/bench_suite.py [--json benchmarks/suite.json] [--plot benchmarks/scaling.png]
"""

from __future__ import annotations

import argparse
import platform
import time
import tracemalloc
from functools import partial

import numpy as np
from bench_offline import best_time, write_json  # run as a script: benchmarks/ is on the path

from market_sim.distributions import parse_distribution
from market_sim.mechanisms.offline import project_capped_simplex, solve
from market_sim.mechanisms.online import OnlineMechanism
from market_sim.mechanisms.payments import offline_payments

KW = dict(mu=1.0, sigma=1.0, gamma=1.0)


def bench_cvxpy(rng, dist):
    """Exact solve vs cvxpy/Clarabel solving Eq. 11 at the optimal eta only (one convex
    problem: a head start the general solver would not have)."""
    try:
        import cvxpy as cp
    except ImportError:
        return []
    rows = []
    for m in (100, 1000, 10_000):
        psi = dist.virtual_cost(dist.sample(m, rng))
        res = solve(psi, **KW)
        a = cp.Variable(m)
        prob = cp.Problem(
            cp.Minimize(KW["mu"] * cp.norm(a, 2) + res.eta * KW["gamma"] * psi @ a),
            [a >= 0, cp.sum(a) == 1],
        )
        t_cvx = best_time(partial(prob.solve, solver=cp.CLARABEL), 1)
        t_exact = best_time(partial(solve, psi, **KW), 5)
        v = project_capped_simplex(a.value)  # interior-point output is feasible to ~1e-10 only
        cvx_loss = (
            KW["mu"] * np.linalg.norm(v) + KW["sigma"] / res.eta + res.eta * KW["gamma"] * psi @ v
        )
        rows.append(
            {
                "what": "solve vs cvxpy (one eta)",
                "m": m,
                "ratio": t_cvx / t_exact,
                "exact_not_worse": bool(res.proxy_loss <= cvx_loss + 1e-12),
            }
        )
    return rows


def bench_online(rng, dist):
    m = 10**6
    costs = dist.sample(m, rng)
    mech = OnlineMechanism(dist, m, **KW)
    t_sort = best_time(lambda: np.sort(costs))
    t_eps = best_time(lambda: mech.eps(costs))
    t_pay = best_time(lambda: mech.payments(costs), 2)
    return [
        {"what": "online eps, 1e6 arrivals / sort", "m": m, "ratio": t_eps / t_sort},
        {"what": "online eps + payments, 1e6 / sort", "m": m, "ratio": (t_eps + t_pay) / t_sort},
    ]


def bench_mesa(rng, dist):
    from market_sim.agents import MarketModel

    m = 10**4
    costs = dist.sample(m, rng)
    t_solve = best_time(lambda: solve(dist.virtual_cost(costs), **KW))
    t_pay = best_time(lambda: offline_payments(costs, dist, **KW), 1)

    def one_round():
        MarketModel(
            m, mechanism="offline", strategy="truthful", rounds=1, measure_regret=False, seed=0
        ).run()

    t_model = best_time(one_round, 1)
    return [
        {
            "what": "Mesa round, 1e4 truthful sellers / one solve",
            "m": m,
            "ratio": t_model / t_solve,
        },
        {
            "what": "Mesa round / (solve + all payments)",
            "m": m,
            "ratio": t_model / (t_solve + t_pay),
        },
    ]


def bench_memory(rng, dist):
    m = 10**7
    psi = dist.virtual_cost(dist.sample(m, rng))
    tracemalloc.start()
    solve(psi, **KW)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    return [{"what": "peak memory of a solve / (8 bytes x m)", "m": m, "ratio": peak / (8 * m)}]


def bench_scaling(rng, dist, path):
    ms = np.logspace(3, 7, 9).astype(int)
    times = [
        best_time(
            lambda m=m: solve(dist.virtual_cost(dist.sample(m, rng)), **KW), 2 if m < 10**6 else 1
        )
        for m in ms
    ]
    if path:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        ref = times[-1] * ms * np.log(ms) / (ms[-1] * np.log(ms[-1]))
        plt.loglog(ms, times, "o-", label="exact offline solve (incl. drawing costs)")
        plt.loglog(ms, ref, "k--", label="m log m")
        plt.xlabel("m")
        plt.ylabel("seconds")
        plt.legend()
        plt.savefig(path, dpi=100)
        plt.close()
    return [
        {"what": "solve time (s)", "m": int(m), "ratio": t} for m, t in zip(ms, times, strict=True)
    ]


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--json", default=None)
    ap.add_argument("--plot", default=None)
    args = ap.parse_args(argv)
    rng = np.random.default_rng(0)
    dist = parse_distribution("uniform:0:1")
    rows = (
        bench_cvxpy(rng, dist)
        + bench_online(rng, dist)
        + bench_mesa(rng, dist)
        + bench_memory(rng, dist)
        + bench_scaling(rng, dist, args.plot)
    )
    print(f"# {platform.machine()}, {time.strftime('%Y-%m-%d')}")
    print("| what | m | ratio |")
    print("|---|---|---|")
    for r in rows:
        extra = "" if "exact_not_worse" not in r else f" (exact not worse: {r['exact_not_worse']})"
        print(f"| {r['what']}{extra} | {r['m']:,} | {r['ratio']:.3g} |")
    if args.json:
        write_json(args.json, rows)


if __name__ == "__main__":
    main()
