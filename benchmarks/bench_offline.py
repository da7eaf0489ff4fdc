"""Offline mechanism benchmark: solve and payment times as ratios to numpy.sort.

    python benchmarks/bench_offline.py [--max-m 1000000] [--json benchmarks/offline.json]

Every figure is a ratio of two times measured back to back in this run (the
best of a few repetitions each), so it survives a noisy machine.
"""

from __future__ import annotations

import argparse
import json
import platform
import time

import numpy as np

from market_sim.distributions import parse_distribution
from market_sim.mechanisms.offline import solve, solve_eta_grid
from market_sim.mechanisms.payments import offline_payments


def best_time(fn, reps=3):
    best = np.inf
    for _ in range(reps):
        t = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t)
    return best


def write_json(path, rows) -> None:
    with open(path, "w") as fh:
        json.dump({"date": time.strftime("%Y-%m-%d"), "machine": platform.machine(),
                   "rows": rows}, fh, indent=1)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--max-m", type=int, default=10**6)
    ap.add_argument("--max-pay-m", type=int, default=10**5)
    ap.add_argument("--json", default=None, help="also write the rows as JSON here")
    args = ap.parse_args(argv)
    rng = np.random.default_rng(0)
    dist = parse_distribution("uniform:0:1")
    kw = dict(mu=1.0, sigma=1.0, gamma=1.0)
    rows = []
    m = 10**3
    while m <= args.max_m:
        reps = 5 if m <= 10**5 else 2
        c = dist.sample(m, rng)
        psi = dist.virtual_cost(c)
        t_sort = best_time(lambda: np.sort(psi), reps)
        t_solve = best_time(lambda: solve(psi, **kw), reps)
        t_cap = best_time(lambda: solve(psi, **kw, k=5.0), reps)
        row = {"m": m, "sort_s": t_sort, "solve_s": t_solve, "solve/sort": t_solve / t_sort,
               "solve_k5/sort": t_cap / t_sort}
        if m <= args.max_pay_m:
            t_pay = best_time(lambda: offline_payments(c, dist, **kw), 1 if m >= 10**5 else 2)
            row.update({"payments_s": t_pay, "payments/solve": t_pay / t_solve,
                        "payments/sort": t_pay / t_sort})
        if m <= 10**4:
            small = psi[: min(m, 2000)]
            t_grid = best_time(lambda: solve_eta_grid(small, **kw, n_eta=100, n_iter=200), 1)
            t_exact = best_time(lambda: solve(small, **kw), 3)
            row.update({"grid_m": small.size, "eta_grid/exact": t_grid / t_exact,
                        "exact_loss<=grid_loss": bool(solve(small, **kw).proxy_loss
                                                      <= solve_eta_grid(small, **kw, n_eta=100,
                                                                        n_iter=200).proxy_loss)})
        rows.append(row)
        m *= 10
    print(f"# offline mechanism, U[0,1] costs, mu=sigma=gamma=1; {platform.processor() or platform.machine()}, "
          f"{time.strftime('%Y-%m-%d')}")
    cols = ["m", "sort_s", "solve/sort", "solve_k5/sort", "payments_s", "payments/solve",
            "eta_grid/exact"]
    print("| " + " | ".join(cols) + " |")
    print("|" + "---|" * len(cols))
    for r in rows:
        cells = []
        for col in cols:
            v = r.get(col, "")
            cells.append(f"{v:.3g}" if isinstance(v, float) else str(v))
        print("| " + " | ".join(cells) + " |")
    if args.json:
        write_json(args.json, rows)


if __name__ == "__main__":
    main()
