"""Offline mechanism benchmark: solve and payment times as ratios to numpy.sort.

    python benchmarks/bench_offline.py [--max-m 1000000] [--target-m 1000000 10000000]
                                       [--cli-m 1000000] [--json benchmarks/offline.json]

Every figure is a ratio of two times measured back to back in this run (the
best of a few repetitions each), so it survives a noisy machine.  The first
table compares the numpy and the compiled (numba) backends of ``solve``; the
second prints each target beside its measured ratio (the kernel solve and the
capped solve against a sort at 10^6 and 10^7, peak memory); then the JIT warm-up
cost (fresh processes, numba cache cold and warm), and ``market-sim solve --k 5``
end to end on a CSV of --cli-m sellers (payments included).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
import tracemalloc
from functools import partial

import numpy as np

from market_sim.distributions import parse_distribution
from market_sim.mechanisms import offline
from market_sim.mechanisms.offline import solve, solve_eta_grid
from market_sim.mechanisms.payments import offline_payments


def best_time(fn, reps=3):
    best = np.inf
    for _ in range(reps):
        t = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t)
    return best


def warm_step_time(model, reps=3):
    """Best time of one ``model.step()``, after a first step (so memory is warm)."""
    model.step()
    return best_time(model.step, reps)


def ratio_to_sort(fn, psi, reps, clock=time.perf_counter):
    """(best time of fn, best time of np.sort(psi)), the two interleaved rep by rep.
    ``clock=time.thread_time``: the CPU time of this thread, which leaves out the time
    the thread waits for a core on a busy shared machine (a wall-clock ratio then
    depends on when each part was descheduled)."""
    t_fn = t_sort = np.inf
    for _ in range(reps):
        t = clock()
        np.sort(psi)
        t_sort = min(t_sort, clock() - t)
        t = clock()
        fn()
        t_fn = min(t_fn, clock() - t)
    return t_fn, t_sort


def peak_ratio(fn, m):
    """Peak traced memory of fn() / (8 bytes x m) (the kernel allocates in numpy only)."""
    tracemalloc.start()
    fn()
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    return peak / (8 * m)


_RSS_CODE = """
import json, numpy as np
from market_sim.mechanisms.offline import solve, _kernel
_kernel()
m = {m}
psi = 2 * np.random.default_rng(0).uniform(0, 1, m)
def status(key):
    for line in open('/proc/self/status'):
        if line.startswith(key):
            return int(line.split()[1]) * 1024
rss0 = status('VmRSS')
with open('/proc/self/clear_refs', 'w') as fh:  # reset VmHWM to the current RSS
    fh.write('5')
solve(psi, mu=1.0, sigma=1.0, gamma=1.0, k={k})
print(json.dumps((status('VmHWM') - rss0) / (8 * m)))
"""


def peak_rss_ratio(m, k):
    """Peak RSS growth of a solve in a fresh process / (8 bytes x m); None if unmeasurable."""
    out = subprocess.run(
        [sys.executable, "-c", _RSS_CODE.format(m=m, k=k)], capture_output=True, text=True
    )
    return json.loads(out.stdout) if out.returncode == 0 else None


_JIT_CODE = """
import json, time
t0 = time.perf_counter()
import numba  # noqa: F401
t1 = time.perf_counter()
import numpy as np
from market_sim.mechanisms.offline import solve
psi = np.random.default_rng(0).uniform(0, 2, 10000)
t2 = time.perf_counter()
solve(psi, mu=1.0, sigma=1.0, gamma=1.0, backend="numba")
t3 = time.perf_counter()
solve(psi, mu=1.0, sigma=1.0, gamma=1.0, backend="numba")
t4 = time.perf_counter()
print(json.dumps({"import_numba_s": t1 - t0, "first_solve_s": t3 - t2, "second_solve_s": t4 - t3}))
"""


def bench_jit():
    """First solve in a fresh process (compile + load), numba cache cold then warm."""
    rows = []
    with tempfile.TemporaryDirectory() as cache:
        env = dict(os.environ, NUMBA_CACHE_DIR=cache)
        for state in ("cold", "warm"):
            out = subprocess.run(
                [sys.executable, "-c", _JIT_CODE], capture_output=True, text=True, env=env
            )
            row = json.loads(out.stdout) if out.returncode == 0 else {"error": out.stderr[-300:]}
            rows.append({"cache": state, **row})
    return rows


def bench_cli(m, k=5.0, timeout=600):
    """``market-sim solve --k`` end to end on an m-seller CSV (seconds, None on timeout)."""
    rng = np.random.default_rng(1)
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "costs.csv")
        with open(path, "w") as fh:
            fh.write("seller_id,cost\n")
            fh.writelines(f"s{i},{c!r}\n" for i, c in enumerate(rng.uniform(0, 1, m).tolist()))
        cmd = [
            sys.executable,
            "-m",
            "market_sim.cli",
            "solve",
            "--costs",
            path,
            "--dist",
            "uniform:0:1",
            "--k",
            str(k),
            "--out",
            os.path.join(tmp, "out.csv"),
        ]
        t = time.perf_counter()
        try:
            subprocess.run(cmd, check=True, capture_output=True, timeout=timeout)
        except subprocess.TimeoutExpired:
            return None
        return time.perf_counter() - t


def bench_targets(ms, psi_of):
    """Targets: kernel solve / sort, capped (k = 5) / sort, peak memory."""
    rows = []
    for m in ms:
        psi = psi_of(m)
        kw = dict(mu=1.0, sigma=1.0, gamma=1.0)
        big = m >= 10**7
        last = m == max(ms)
        for clock, tag in ((time.perf_counter, ""), (time.thread_time, ", thread CPU time")):
            t_u, s_u = ratio_to_sort(partial(solve, psi, **kw), psi, 3 if tag == "" else 5, clock)
            t_c, s_c = ratio_to_sort(partial(solve, psi, **kw, k=5.0), psi, 3, clock)
            rows += [
                {"what": f"solve / sort{tag}", "m": m, "ratio": t_u / s_u, "target": 3.0,
                 "s": t_u},
                {"what": f"solve k=5 / sort{tag}", "m": m, "ratio": t_c / s_c,
                 "target": 12.0 if big else 6.0, "s": t_c},
            ]  # fmt: skip
        if last:  # memory at the largest m (10^7 by default)
            rows += [
                {
                    "what": "peak traced memory / 8m",
                    "m": m,
                    "ratio": peak_ratio(partial(solve, psi, **kw), m),
                    "target": 3.0,
                },
                {
                    "what": "peak traced memory k=5 / 8m",
                    "m": m,
                    "ratio": peak_ratio(partial(solve, psi, **kw, k=5.0), m),
                    "target": None,
                },
                {
                    "what": "peak RSS growth / 8m",
                    "m": m,
                    "ratio": peak_rss_ratio(m, None),
                    "target": 3.0,
                },
            ]
        del psi
    return rows


def reporter(rows: list):
    """report(what, value, target, ok): append a target row to ``rows`` and print it."""

    def report(what, value, target, ok):
        rows.append(dict(what=what, value=value, target=target, ok=bool(ok)))
        print(
            f"{what:58s} {value:>10.3g}   target {target:12s} {'ok' if ok else 'NOT MET'}",
            flush=True,
        )

    return report


def write_json(path, rows, targets=(), jit=(), cli=()) -> None:
    with open(path, "w") as fh:
        json.dump(
            {
                "date": time.strftime("%Y-%m-%d"),
                "machine": platform.machine(),
                "kernel_min_m": offline.KERNEL_MIN_M,
                "rows": rows,
                "targets": list(targets),
                "jit": list(jit),
                "cli": list(cli),
            },
            fh,
            indent=1,
        )


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--max-m", type=int, default=10**6)
    ap.add_argument("--max-pay-m", type=int, default=10**5)
    ap.add_argument(
        "--target-m",
        type=int,
        nargs="*",
        default=[10**6, 10**7],
        help="sizes of the target rows (kernel solve, memory)",
    )
    ap.add_argument(
        "--cli-m",
        type=int,
        nargs="*",
        default=[10**6],
        help="sizes for market-sim solve --k 5 end to end (payments included; < 60 s at 1e6)",
    )
    ap.add_argument("--json", default=None, help="also write the rows as JSON here")
    args = ap.parse_args(argv)
    kern = offline._kernel()
    rng = np.random.default_rng(0)
    dist = parse_distribution("uniform:0:1")
    kw = dict(mu=1.0, sigma=1.0, gamma=1.0)
    rows = []
    m = 10**3
    while m <= args.max_m:
        reps = 5 if m <= 10**5 else 2
        c = dist.sample(m, rng)
        psi = dist.virtual_cost(c)
        t_sort = best_time(partial(np.sort, psi), reps)
        t_solve = best_time(partial(solve, psi, **kw), reps)
        t_cap = best_time(partial(solve, psi, **kw, k=5.0), reps)
        row = {
            "m": m,
            "sort_s": t_sort,
            "solve_s": t_solve,
            "solve/sort": t_solve / t_sort,
            "solve_k5/sort": t_cap / t_sort,
        }
        if kern is not None:  # the two backends, back to back
            t_np = best_time(partial(solve, psi, **kw, backend="numpy"), reps)
            t_nb = best_time(partial(solve, psi, **kw, backend="numba"), reps)
            t_np5 = best_time(partial(solve, psi, **kw, k=5.0, backend="numpy"), reps)
            t_nb5 = best_time(partial(solve, psi, **kw, k=5.0, backend="numba"), reps)
            row.update({"numpy/numba": t_np / t_nb, "numpy/numba k5": t_np5 / t_nb5})
        if m <= args.max_pay_m:
            t_pay = best_time(partial(offline_payments, c, dist, **kw), 1 if m >= 10**5 else 2)
            row.update(
                {
                    "payments_s": t_pay,
                    "payments/solve": t_pay / t_solve,
                    "payments/sort": t_pay / t_sort,
                }
            )
        if m <= 10**4:
            small = psi[: min(m, 2000)]
            t_grid = best_time(partial(solve_eta_grid, small, **kw, n_eta=100, n_iter=200), 1)
            t_exact = best_time(partial(solve, small, **kw), 3)
            row.update(
                {
                    "grid_m": small.size,
                    "eta_grid/exact": t_grid / t_exact,
                    "exact_loss<=grid_loss": bool(
                        solve(small, **kw).proxy_loss
                        <= solve_eta_grid(small, **kw, n_eta=100, n_iter=200).proxy_loss
                    ),
                }
            )
        rows.append(row)
        m *= 10
    cpu = platform.processor() or platform.machine()
    print(
        f"# offline mechanism, U[0,1] costs, mu=sigma=gamma=1; {cpu}, {time.strftime('%Y-%m-%d')}"
    )
    cols = [
        "m",
        "sort_s",
        "solve/sort",
        "solve_k5/sort",
        "numpy/numba",
        "numpy/numba k5",
        "payments_s",
        "payments/solve",
        "eta_grid/exact",
    ]
    print("| " + " | ".join(cols) + " |")
    print("|" + "---|" * len(cols))
    for r in rows:
        cells = []
        for col in cols:
            v = r.get(col, "")
            cells.append(f"{v:.3g}" if isinstance(v, float) else str(v))
        print("| " + " | ".join(cells) + " |")
    print(
        f"(solve: backend auto = numba from m = {offline.KERNEL_MIN_M} on"
        f"{'' if kern is not None else '; numba unavailable, numpy only'})"
    )
    targets, jit, cli = [], [], []
    if kern is not None:
        targets = bench_targets(args.target_m, lambda m: dist.virtual_cost(dist.sample(m, rng)))
        print("\n| what | m | measured | target | met |\n|---|---|---|---|---|")
        for r in targets:
            t = r["target"]
            v = r["ratio"]
            met = "" if t is None or v is None else ("yes" if v <= t else "**no**")
            print(
                f"| {r['what']} | {r['m']:.0e} | {'n/a' if v is None else f'{v:.2f}'} | "
                f"{'' if t is None else f'<= {t:g}'} | {met} |"
            )
        jit = bench_jit()
        print("\nJIT warm-up, fresh process, solve of m = 1e4 (s):")
        print("| numba cache | import numba | first solve | second solve |\n|---|---|---|---|")
        for r in jit:
            if "error" in r:
                print(f"| {r['cache']} | error: {r['error']} | | |")
            else:
                print(
                    f"| {r['cache']} | {r['import_numba_s']:.2f} | {r['first_solve_s']:.2f} | "
                    f"{r['second_solve_s']:.4f} |"
                )
    for m in args.cli_m:
        t = bench_cli(m)
        cli.append({"m": m, "k": 5.0, "s": t})
        target = " (target < 60 s)" if m == 10**6 else ""
        print(
            f"\nmarket-sim solve --k 5, m = {m}, end to end (payments included): "
            + ("timed out" if t is None else f"{t:.1f} s")
            + target
        )
    if args.json:
        write_json(args.json, rows, targets, jit, cli)


if __name__ == "__main__":
    main()
