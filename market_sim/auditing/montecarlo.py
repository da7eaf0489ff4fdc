"""The Monte Carlo confirmation: fresh draws of each seller's best misreport, a fresh
report and its IR quantities, escalated where the variance is unstable."""

from __future__ import annotations

import numpy as np

from ..privacy.limit import privacy_cost
from .evaluate import _loop, _pair, _refuse_negative_eps, _refuse_not_finite, _streams
from .search import _Market, _Plan
from .statistics import _N_STAGES, _Z_POWER, _bonferroni_z, _critical, _moments


def _confirm(mech, mk: _Market, P: _Plan, rng, settings) -> dict:
    """Fresh draws for each seller's best report (against the truth, in the profile it
    was found in) and for its truthful utility at its cost, the top and the bottom;
    more draws for the quantities still unsettled (``_unsettled``), up to
    ``n_confirm_max``: a later stage draws only those (a settled quantity keeps its
    sample), and for each seller 2x to 4x its draws so far, as many as its own
    unsettled bounds want (``_draws_wanted``: one seller's heavy tail or boundary
    case does not set the draws of the others).  Returns quantity -> (n, 6) moments
    (``_moments``)."""
    costs = mk.costs
    n = costs.size
    samples: dict[str, list] = {q: [np.empty(0)] * n for q in _NAMES}
    need = {q: np.ones(n, dtype=bool) for q in _NAMES}
    R = P.rows(np.arange(n))
    explore = R.lo + R.width * (1.0 - rng.random(n))  # one fresh report per seller
    more = np.full(n, settings["n_confirm"])  # the draws each seller gets next (0: none)
    for stage in range(_N_STAGES):
        for D in np.unique(more[more > 0]):  # the sellers drawing D more, at once
            active = np.flatnonzero(more == D)
            new = _confirm_draws(mech, mk, P, active, rng.integers(2**63, size=int(D)),
                                 explore, {q: need[q][active] for q in _NAMES})  # fmt: skip
            for q in _NAMES:
                for k, i in enumerate(active):
                    if need[q][i]:
                        samples[q][i] = np.concatenate([samples[q][i], new[q][:, k]])
        stats = {q: [_moments(x) for x in samples[q]] for q in _NAMES}
        need, wanted = _unsettled(stats, mk, P, settings)
        if stage == _N_STAGES - 1:
            break
        more = _next_draws(need, wanted, samples, settings["n_confirm_max"])
        if not more.any():
            break
    return {q: np.array(stats[q], dtype=float) for q in _NAMES}


_NAMES = ("gain", "explore", "truth", "top", "bottom")


def _next_draws(need: dict, wanted: np.ndarray, samples: dict, cap: int) -> np.ndarray:
    """(n,) the draws each seller gets in the next stage: 0 when all its quantities are
    settled or its sample is at ``cap``; else up to the total its unsettled bounds want
    (``wanted``), between 2x and 4x its draws so far, at most ``cap`` in all."""
    n = wanted.size
    unsettled = np.any([need[q] for q in _NAMES], axis=0)
    size = np.array([max(samples[q][i].size for q in _NAMES) for i in range(n)])
    total = np.minimum(np.clip(wanted, 2 * size, 4 * size), cap)
    return np.where(unsettled & (size < cap), total - size, 0).astype(int)


def _unsettled(stats, mk: _Market, P: _Plan, settings) -> tuple[dict, np.ndarray]:
    """Per quantity, the sellers whose sample needs more draws: its variance is
    unstable, or its confidence bound still allows a gain (IR violation) beyond tol +
    the resolution (with this market's tol and scale, at most the audit's), or (the
    best misreport) its detectable gain, (k + 1.645) SE above tol, is not within the
    resolution; and per seller the sample size its unsettled bounds want
    (``_draws_wanted``)."""
    st = {q: np.array(v, dtype=float) for q, v in stats.items()}
    tol, margin = mk.tol, settings["resolution"] * mk.found.scale
    n_pairs = settings["n_pairs"]
    out, wanted = {}, np.zeros(mk.costs.size)
    for q in ("gain", "explore"):
        g = st[q]
        k_gain = _critical(g, _bonferroni_z(2 * n_pairs * _N_STAGES), -1)
        out[q] = (g[:, 3] == 0) | (g[:, 0] + k_gain * g[:, 1] > mk.gain_tol + margin)
        wanted = np.maximum(wanted, _draws_wanted(g, k_gain, mk.gain_tol + margin - g[:, 0],
                                                  out[q]))  # fmt: skip
        if q == "gain":  # and the printed detectable gain within the resolution
            k_det = _critical(g, _bonferroni_z(2 * n_pairs * _N_STAGES), +1) + _Z_POWER
            weak = k_det * g[:, 1] > margin
            out[q] |= weak
            wanted = np.maximum(wanted, _draws_wanted(g, k_det, margin, weak))
    z_ir = _bonferroni_z(3 * n_pairs * _N_STAGES)
    for q in ("truth", "top", "bottom"):
        x = st[q]
        k_ir = _critical(x, z_ir, +1)
        out[q] = (x[:, 3] == 0) | (x[:, 0] - k_ir * x[:, 1] < -tol - margin)
        wanted = np.maximum(wanted, _draws_wanted(x, k_ir, x[:, 0] + tol + margin, out[q]))
    return out, wanted


def _draws_wanted(x, k, gap, unsettled) -> np.ndarray:
    """Per row, the sample size at which an unsettled bound would settle if the mean
    and the spread stayed as drawn: D (k SE / gap)^2, with a quarter more for the
    drift of both; infinite (the next stage's 4x) for a row whose variance is unstable
    or whose mean is itself past the boundary (gap <= 0); 0 for a settled row.  The
    stages stay ``_N_STAGES`` (the Bonferroni count): only their sizes follow the data."""
    D, se = x[:, 4], x[:, 1]
    bad = (x[:, 3] == 0) | (gap <= 0)
    with np.errstate(divide="ignore", invalid="ignore"):
        want = np.where(bad, np.inf, 1.25 * D * (k * se / np.where(bad, 1.0, gap)) ** 2)
    return np.where(unsettled, want, 0.0)


def _confirm_draws(mech, mk: _Market, P: _Plan, sellers, seeds, explore, need) -> dict:
    """One batch of fresh draws for ``sellers``: quantity -> (D, k) samples (only the
    entries ``need``, quantity -> (k,) bool, says are kept; the other columns repeat a
    needed one and cost nothing); ``explore`` (n,): a report per seller drawn afresh,
    confirmed too (an outcome the search's few draws never showed, a rare prize, is not
    tied to the report the search chose)."""
    costs = mk.costs
    c = costs[sellers]
    R = P.rows(sellers)
    streams = _streams(seeds)  # one generator per seed for every call below
    # the truthful market: for the truth, a gain or a fresh report (a later stage is
    # often the top alone)
    truth = np.zeros((len(seeds), sellers.size))
    if np.any(need["truth"] | need["gain"] | need["explore"]):
        truth = _truthful(mech, costs, streams)[:, sellers]
    in_market = mk.best_group[sellers] == 0
    best = np.where(in_market, mk.best_report[sellers], c)
    cols = np.column_stack([R.floor, R.hi, best, explore[sellers]])
    want = np.column_stack([need["bottom"], need["top"], need["gain"] & in_market,
                            need["explore"]])  # fmt: skip
    rows = np.flatnonzero(want.any(axis=1))
    first = cols[rows, np.argmax(want[rows], axis=1)]
    cols[rows] = np.where(want[rows], cols[rows], first[:, None])  # repeats: evaluated once
    U = np.zeros((len(seeds), sellers.size, 4))
    E = np.zeros_like(U)
    if rows.size:
        U[:, rows], E[:, rows] = _loop(mech, costs, costs, sellers[rows], cols[rows], streams)
    gain = U[:, :, 2] - truth
    for k in np.flatnonzero(~in_market & need["gain"]):
        i = sellers[k]
        pair = np.array([[costs[i], mk.best_report[i]]])
        Ug, _ = _loop(mech, mk.groups[mk.best_group[i]], costs, np.array([i]), pair, streams)
        gain[:, k] = Ug[:, 0, 1] - Ug[:, 0, 0]
    return {
        "gain": gain,
        "explore": U[:, :, 3] - truth,
        "truth": truth,
        "bottom": U[:, :, 0] + (c - R.floor) * E[:, :, 0],
        "top": U[:, :, 1] + (c - R.hi) * E[:, :, 1],
    }


def _truthful(mech, costs, streams) -> np.ndarray:
    """(D, n) every seller's truthful utility t - c eps on each stream at its start:
    ``outcome`` read as ``evaluate._pair`` reads it (``run``'s full checks cost ~50 us
    a call, several times a small mechanism's), refused in one line, as ``_loop``
    refuses it, when not finite or eps < 0."""
    n = costs.size
    out = np.empty((len(streams), n))
    for d, st in enumerate(streams):
        eps, pay = _pair(mech.outcome(costs.copy(), st.fresh()), n, mech)
        _refuse_not_finite(mech, eps, pay)
        _refuse_negative_eps(mech, eps)
        out[d] = pay - privacy_cost(costs, eps)
    return out
