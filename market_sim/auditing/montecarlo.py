"""The Monte Carlo confirmation: fresh draws of each seller's best misreport, a fresh
report and its IR quantities, escalated where the variance is unstable."""

from __future__ import annotations

import numpy as np

from .evaluate import _loop
from .search import _Market, _Plan
from .statistics import _N_STAGES, _bonferroni_z, _critical, _moments


def _confirm(mech, mk: _Market, P: _Plan, rng, settings) -> dict:
    """Fresh draws for each seller's best report (against the truth, in the profile it
    was found in) and for its truthful utility at its cost, the top and the bottom;
    4x more draws for the sellers with an unstable quantity, up to ``n_confirm_max``.
    Returns quantity -> (n, 6) moments (``_moments``)."""
    costs = mk.costs
    n = costs.size
    names = ("gain", "explore", "truth", "top", "bottom")
    samples: dict[str, list] = {q: [np.empty(0)] * n for q in names}
    active, D = np.arange(n), settings["n_confirm"]
    R = P.rows(np.arange(n))
    explore = R.lo + R.width * (1.0 - rng.random(n))  # one fresh report per seller
    for stage in range(_N_STAGES):
        new = _confirm_draws(mech, mk, P, active, rng.integers(2**63, size=D), explore)
        for q in names:
            for k, i in enumerate(active):
                samples[q][i] = np.concatenate([samples[q][i], new[q][:, k]])
        stats = {q: [_moments(x) for x in samples[q]] for q in names}
        unsettled = _unsettled(stats, mk, P, settings)
        unstable = [i for i in active if unsettled[i]]
        size = samples["gain"][0].size if not unstable else samples["gain"][unstable[0]].size
        if not unstable or stage == _N_STAGES - 1 or size >= settings["n_confirm_max"]:
            break
        active, D = np.array(unstable), min(3 * size, settings["n_confirm_max"] - size)
    return {q: np.array(stats[q], dtype=float) for q in names}


def _unsettled(stats, mk: _Market, P: _Plan, settings) -> np.ndarray:
    """Sellers that need more draws: a quantity whose variance is unstable, or whose
    confidence bound still allows a gain (IR violation) beyond tol + the resolution
    (with this market's tol and scale, at most the audit's)."""
    st = {q: np.array(v, dtype=float) for q, v in stats.items()}
    tol, margin = mk.tol, settings["resolution"] * mk.found.scale
    n_pairs = settings["n_pairs"]
    out = np.zeros(len(st["gain"]), dtype=bool)
    for g in (st["gain"], st["explore"]):
        out |= g[:, 3] == 0
        k_gain = _critical(g, _bonferroni_z(2 * n_pairs * _N_STAGES), -1)
        out |= g[:, 0] + k_gain * g[:, 1] > mk.gain_tol + margin
    z_ir = _bonferroni_z(3 * n_pairs * _N_STAGES)
    for q in ("truth", "top", "bottom"):
        x = st[q]
        out |= (x[:, 3] == 0) | (x[:, 0] - _critical(x, z_ir, +1) * x[:, 1] < -tol - margin)
    return out


def _confirm_draws(mech, mk: _Market, P: _Plan, sellers, seeds, explore) -> dict:
    """One batch of fresh draws for ``sellers``: quantity -> (D, k) samples; ``explore``
    (n,): a report per seller drawn afresh, confirmed too (an outcome the search's few
    draws never showed, a rare prize, is not tied to the report the search chose)."""
    costs = mk.costs
    c = costs[sellers]
    R = P.rows(sellers)
    truth = np.array([mech.run(costs, np.random.default_rng(int(s))).utilities(costs)[sellers]
                      for s in seeds])  # fmt: skip
    in_market = mk.best_group[sellers] == 0
    best = np.where(in_market, mk.best_report[sellers], c)
    cols = np.column_stack([R.floor, R.hi, best, explore[sellers]])
    U, E = _loop(mech, costs, costs, sellers, cols, list(seeds))
    gain = U[:, :, 2] - truth
    for k in np.nonzero(~in_market)[0]:
        i = sellers[k]
        pair = np.array([[costs[i], mk.best_report[i]]])
        Ug, _ = _loop(mech, mk.groups[mk.best_group[i]], costs, np.array([i]), pair, list(seeds))
        gain[:, k] = Ug[:, 0, 1] - Ug[:, 0, 0]
    return {
        "gain": gain,
        "explore": U[:, :, 3] - truth,
        "truth": truth,
        "bottom": U[:, :, 0] + (c - R.floor) * E[:, :, 0],
        "top": U[:, :, 1] + (c - R.hi) * E[:, :, 1],
    }
