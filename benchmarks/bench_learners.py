"""No-regret learners benchmark: a Hedge round in MarketModel against the same round in numpy.

    python benchmarks/bench_learners.py [--m 1000000] [--json benchmarks/learners.json]

Target: a ``hedge`` round under the ``online`` mechanism at
m = 10^6 sellers (``measure_regret=False``) costs <= 3x the same round written
in plain numpy, both timed in this run (best of a few repetitions each).

The plain round does what the model's round does, with no checks and no Mesa:
draw each seller's arm from its Hedge weights (one uniform each), the reports,
every arm's eps and Myerson payment in closed form (U[0, 1] costs: psi(c) = 2c,
eps linear below the cut-off, so the payment integral is a trapezoid), the
utilities and the Hedge update, the realised outcome and its proxy loss, and the
per-seller columns the model keeps (report, eps, payment, utility, regret,
external regret).  The model's round also keeps each seller's external regret
(the best arm's cumulative utility), which Hedge gives for free.

Also reported (no target): the epsilon-greedy ``learning`` round per seller,
which the issue measured at 1.1 us/seller/round.
"""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_offline import best_time, reporter, warm_step_time, write_json  # noqa: E402

from market_sim.agents import MarketModel  # noqa: E402
from market_sim.agents.learners import DEFAULT_MULTIPLIERS  # noqa: E402
from market_sim.mechanisms.offline import proxy_loss_of_eps  # noqa: E402

DIST = "uniform:0:1"


def _model_round(m, strategy, reps=3):
    """Best time of one model round (after a first round, so memory is warm)."""
    model = MarketModel(
        m, dist=DIST, mechanism="online", strategy=strategy, rounds=reps + 1, seed=0,
        measure_regret=False,
    )  # fmt: skip
    return warm_step_time(model, reps)


def plain_hedge_round(m, rounds=4, seed=0):
    """The Hedge round in plain numpy (see the module docstring); returns a callable."""
    model = MarketModel(m, dist=DIST, mechanism="online", rounds=1, seed=seed)
    mech, cost = model.mechanism, model.cost
    lam, scale, gam = mech.cutoff, mech.scale, mech.gamma
    top = min(mech.threshold_cost, 1.0)
    e_top = scale * (lam - gam * 2.0 * top)  # eps on its line at the top
    mult = np.asarray(DEFAULT_MULTIPLIERS)
    k = mult.size
    eta = math.sqrt(8 * math.log(k) / rounds)
    G, S = np.zeros((m, k)), np.zeros(m)
    rng = np.random.default_rng(seed)
    rows = np.arange(m)

    def eps_pay(z):  # U[0, 1]: psi = 2z; t = z eps + (top - z)(eps + eps_top) / 2
        e = scale * np.maximum(lam - gam * 2.0 * z, 0.0)
        return e, z * e + np.maximum(top - z, 0.0) * 0.5 * (e + e_top)

    def one():
        nonlocal G, S
        rate = np.divide(eta, S, out=np.zeros(m), where=S > 0)
        w = np.exp((G - G.max(axis=1, keepdims=True)) * rate[:, None])
        cdf = np.cumsum(w, axis=1)
        arm = np.minimum(
            np.count_nonzero(cdf <= (rng.random(m) * cdf[:, -1])[:, None], axis=1), k - 1
        )
        reports = np.clip(cost * mult[arm], 0.0, 1.0)
        e, pay = eps_pay(np.clip(cost[:, None] * mult, 0.0, 1.0))
        U = pay - cost[:, None] * e  # every arm's utility
        eps, payment = e[rows, arm], pay[rows, arm]  # the outcome of the reports
        util = U[rows, arm]
        proxy_loss_of_eps(eps, 2.0 * cost, mu=1.0, sigma=1.0, gamma=1.0)
        G += U
        S = np.maximum(S, U.max(axis=1) - U.min(axis=1))
        regret = G.max(axis=1)  # the best fixed arm (the model's external regret)
        return [reports, eps, payment, util, np.full(m, np.nan), regret]

    return one


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--m", type=int, default=10**6)
    ap.add_argument("--json", default=None)
    args = ap.parse_args(argv)
    rows: list = []
    report = reporter(rows)

    m = args.m
    plain = best_time(plain_hedge_round(m), reps=3)
    hedge = _model_round(m, "hedge")
    report(f"plain-numpy hedge round, m = {m:.0e} (s)", plain, "-", True)
    report(f"model hedge round, m = {m:.0e} (s)", hedge, "-", True)
    report(
        f"hedge online round / plain numpy, m = {m:.0e}", hedge / plain, "<= 3", hedge / plain <= 3
    )
    eg = _model_round(m, "learning")
    report(f"learning (eps-greedy) round, m = {m:.0e} (us/seller)", eg / m * 1e6, "-", True)
    if args.json:
        write_json(args.json, rows)


if __name__ == "__main__":
    main()
