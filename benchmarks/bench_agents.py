"""Agent-based market benchmark: Mesa rounds against the bare mechanism arithmetic.

    python benchmarks/bench_agents.py [--max-m 1000000] [--slow] [--json benchmarks/agents.json]

Every ratio is two times measured back to back in this run (the best of a few
repetitions each), so it survives a noisy machine.  Targets:

* truthful round, online, m = 10^6: <= 3x the plain-numpy round (eps, payments,
  utilities, proxy loss and the same five per-seller columns kept);
* building the model at 10^6: <= 2 s;
* truthful round, offline: <= 1.5x (one solve + all payments), m = 10^4, 10^5 (and
  10^6 with --slow);
* best-response round: online at 10^5 <= 5 s; offline at 10^4 <= 30 s (and at
  10^5 <= 10 min with --slow); data-dependent, 30 sellers x 3 rounds <= 60 s.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_offline import best_time, reporter, warm_step_time, write_json  # noqa: E402

from market_sim.agents import MarketModel  # noqa: E402
from market_sim.distributions import parse_distribution  # noqa: E402
from market_sim.mechanisms.offline import proxy_loss_of_eps  # noqa: E402
from market_sim.mechanisms.payments import offline_payments  # noqa: E402

DIST = parse_distribution("uniform:0:1")


def _round_time(model_kw, reps=3):
    """Best time of one round (after a first round, so memory is warm)."""
    model = MarketModel(rounds=reps + 1, **model_kw)
    return warm_step_time(model, reps)


def _plain_online_round(m, seed=0):
    model = MarketModel(m, mechanism="online", rounds=1, seed=seed, measure_regret=False)
    mech, cost = model.mechanism, model.cost

    def one():
        active = np.flatnonzero(np.ones(m, dtype=bool))  # noqa: F841 (participation)
        reports = cost.copy()
        eps, pay = mech.eps(reports), mech.payments(reports)
        util = pay - cost * eps
        proxy_loss_of_eps(eps, DIST.virtual_cost(cost), mu=1.0, sigma=1.0, gamma=1.0)
        keep = [reports, eps.copy(), pay.copy(), util.copy(), np.full(m, np.nan)]
        return keep

    return one


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--max-m", type=int, default=10**6)
    ap.add_argument("--slow", action="store_true", help="also the 10-minute targets")
    ap.add_argument("--json", default=None)
    args = ap.parse_args(argv)
    rows: list = []
    report = reporter(rows)

    m = args.max_m
    t = time.perf_counter()
    MarketModel(m, mechanism="online", rounds=1, seed=0, measure_regret=False)
    report(
        f"build the model, m = {m:.0e} (s)",
        time.perf_counter() - t,
        "<= 2 s",
        time.perf_counter() - t <= 2,
    )
    plain = best_time(_plain_online_round(m), reps=3)
    mesa_round = _round_time(dict(n_sellers=m, mechanism="online", seed=0, measure_regret=False))
    report(
        f"truthful online round / plain numpy, m = {m:.0e}",
        mesa_round / plain,
        "<= 3",
        mesa_round / plain <= 3,
    )
    for mm in [10**4, 10**5, 10**6] if args.slow else [10**4, 10**5]:
        if mm > m:
            break
        costs = DIST.sample(mm, np.random.default_rng(0))
        # (a first call, as the round's own first step, loads the compiled kernels)
        ref = best_time(lambda c=costs: offline_payments(c, DIST, mu=1, sigma=1, gamma=1), reps=2)
        rnd = _round_time(
            dict(n_sellers=mm, mechanism="offline", seed=0, measure_regret=False), reps=1
        )
        report(
            f"truthful offline round / (solve + payments), m = {mm:.0e}",
            rnd / ref,
            "<= 1.5",
            rnd / ref <= 1.5,
        )
    br = _round_time(
        dict(
            n_sellers=10**5,
            mechanism="online",
            strategy="best-response",
            seed=0,
            measure_regret=False,
        ),
        reps=1,
    )
    report("best-response round, online, m = 1e5 (s)", br, "<= 5 s", br <= 5)
    for mm, limit in ([10**4, 30], [10**5, 600]) if args.slow else ([10**4, 30],):
        br = _round_time(
            dict(
                n_sellers=mm,
                mechanism="offline",
                strategy="best-response",
                seed=0,
                measure_regret=False,
            ),
            reps=1,
        )
        report(f"best-response round, offline, m = {mm:.0e} (s)", br, f"<= {limit} s", br <= limit)
    t = time.perf_counter()
    MarketModel(
        30,
        mechanism="data-dependent",
        strategy="best-response",
        rounds=3,
        seed=0,
        data="synthetic",
        measure_regret=False,
    ).run()
    dd = time.perf_counter() - t
    report("data-dependent, 30 sellers x 3 rounds, best response (s)", dd, "<= 60 s", dd <= 60)
    if args.json:
        write_json(args.json, rows)


if __name__ == "__main__":
    main()
