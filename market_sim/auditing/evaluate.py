"""Evaluating candidate reports: the mechanism's own ``deviations`` (checked against
``outcome``), ``outcome`` once per candidate, or common random numbers (Monte Carlo)."""

from __future__ import annotations

import numpy as np

from ..errors import MarketSimError
from ..mechanisms.base import Mechanism, as_outcome, mechanism_name


def _overrides(mech, name: str) -> bool:
    return getattr(type(mech), name) is not getattr(Mechanism, name)


# An evaluator returns, for sellers ``sellers`` and candidate reports ``cand`` (k, C),
# the utilities at the TRUE costs and the eps, per draw: two (D, k, C) arrays (D = 1
# for exact evaluations).  ``reports`` are the others' reports (a market or a profile).
class _Exact:
    """Exact utilities: the mechanism's own ``deviations`` (exact expectations for
    randomized built-ins), or ``outcome`` called once per candidate (the generic
    default, without ``run``'s checks on every call: they cost more than a small
    mechanism; the results are checked once per batch)."""

    mc = False

    def __init__(self, mech, reports, costs, rng, force_outcome=False):
        self.mech, self.reports, self.costs = mech, reports, costs
        self.seed = int(rng.integers(2**63))  # one draw per market: common to all calls
        self.path = (
            "outcome"
            if force_outcome
            else "deviations"
            if _overrides(mech, "deviations")
            else "utilities"
            if _overrides(mech, "deviation_utilities")
            else "outcome"
        )

    def __call__(self, sellers, cand):
        mech, r, c = self.mech, self.reports, self.costs
        if self.path == "outcome":
            u, e = _loop(mech, r, c, sellers, cand, [None])
            return u, e
        dev = mech.deviations(sellers, cand, r, np.random.default_rng(self.seed))
        eps = np.asarray(dev.eps, dtype=float).reshape(cand.shape)
        if self.path == "utilities":
            u = mech.deviation_utilities(sellers, cand, c[sellers], r,
                                         np.random.default_rng(self.seed))  # fmt: skip
            u = np.asarray(u, dtype=float).reshape(cand.shape)
        else:
            u = (
                np.asarray(dev.payments, dtype=float).reshape(cand.shape)
                - c[sellers][:, None] * eps
            )
        if not (np.all(np.isfinite(u)) and np.all(np.isfinite(eps))):
            raise MarketSimError(f"{mechanism_name(mech)}: eps or payments contain NaN or inf")
        return u[None], eps[None]


class _MonteCarlo:
    """Common random numbers for a randomized mechanism on the generic default: every
    candidate of every seller sees the same draws (seeds)."""

    mc = True

    def __init__(self, mech, reports, costs, seeds):
        self.mech, self.reports, self.costs = mech, reports, costs
        self.seeds = [int(s) for s in seeds]

    def __call__(self, sellers, cand):
        return _loop(self.mech, self.reports, self.costs, sellers, cand, self.seeds)


def _loop(mech, reports, costs, sellers, cand, seeds):
    """(D, k, C) utilities at the true costs and eps, ``outcome`` once per seller,
    distinct candidate and draw (a fresh generator per seed: common random numbers, so
    a repeated candidate has the very same outcome and is not evaluated again)."""
    D = len(seeds)
    u = np.empty((D,) + cand.shape)
    e = np.empty((D,) + cand.shape)
    trial = reports.copy()
    outcome, n = mech.outcome, reports.size
    streams = [_Stream(s) for s in seeds]
    for k, i in enumerate(sellers):
        ci, keep = costs[i], trial[i]
        values, where = np.unique(cand[k], return_inverse=True)
        uk, ek = np.empty((D, values.size)), np.empty((D, values.size))
        for j, z in enumerate(values):
            trial[i] = z
            for d, stream in enumerate(streams):
                eps_d, pay_d = _pair(outcome(trial.copy(), stream.fresh()), n, mech)
                ek[d, j] = eps_d[i]
                uk[d, j] = pay_d[i] - ci * eps_d[i]
        u[:, k], e[:, k] = uk[:, where.reshape(-1)], ek[:, where.reshape(-1)]
        trial[i] = keep
    if not (np.all(np.isfinite(u)) and np.all(np.isfinite(e))):
        raise MarketSimError(f"{mechanism_name(mech)}: eps or payments contain NaN or inf")
    if np.any(e < 0):
        raise MarketSimError(f"{mechanism_name(mech)}: eps must be >= 0")
    return u, e


class _Stream:
    """``np.random.default_rng(seed)`` at its start on every ``fresh()`` (None for no
    seed): one generator whose state is reset, the very same numbers as a new one, at a
    quarter of the cost of building it (a Monte Carlo audit makes ~10^5 of them)."""

    def __init__(self, seed):
        self.seed = seed
        self.rng = None if seed is None else np.random.default_rng(seed)
        self.start = None if seed is None else self.rng.bit_generator.state

    def fresh(self):
        if self.rng is None:
            return None
        if self.rng.bit_generator.seed_seq.n_children_spawned:  # ``spawn`` moved its seed
            self.rng = np.random.default_rng(self.seed)  # sequence: a new one, as before
        else:
            self.rng.bit_generator.state = self.start
        return self.rng


def _pair(result, n, mech):
    """(eps, payments) of what ``outcome`` returned, as arrays of n (checked lightly;
    a malformed result gets ``as_outcome``'s full message)."""
    if isinstance(result, tuple) and len(result) >= 2:
        eps, pay = result[0], result[1]
    elif hasattr(result, "eps") and hasattr(result, "payments"):
        eps, pay = result.eps, result.payments
    else:
        return _pair(as_outcome(result, n, mechanism_name(mech)), n, mech)
    eps, pay = np.asarray(eps, dtype=float).reshape(-1), np.asarray(pay, dtype=float).reshape(-1)
    if eps.size != n or pay.size != n:
        as_outcome(result, n, mechanism_name(mech))  # raises with the full message
    return eps, pay


def _deviations_disagree(mech, costs, P, rng, tol_factor: float = 1e-6) -> str | None:
    """A deterministic mechanism's ``deviations`` (or ``deviation_utilities``) checked
    against ``outcome`` (what ``run`` pays: the mechanism) at four reports of up to four
    sellers: why they disagree, or None.  The audit then calls ``outcome`` instead.
    They disagree when they differ by more than a hundredth of the tolerance factor
    (relative to the utilities' scale): a smaller gap is two quadratures of one integral
    (myerson_mechanism: ~1e-9) and cannot carry a gain of the tolerance."""
    from ..certification import unmodified

    ev = _Exact(mech, costs, costs, rng)
    if ev.path == "outcome" or getattr(mech, "randomized", False) or unmodified(mech) is None:
        return None  # the library's own unmodified offline or online mechanism: its code
    # is what a certificate trusts (``certification.unmodified``); not re-checked
    sellers = np.arange(min(4, costs.size))
    R = P.rows(sellers)
    cand = R.clip(np.column_stack([costs[sellers], R.floor, R.hi,
                                   R.lo + R.width * rng.random(sellers.size)]))  # fmt: skip
    u_dev, e_dev = ev(sellers, cand)
    u_out, e_out = _loop(mech, costs, costs, sellers, cand, [None])
    scale = float(np.max(np.abs(u_out)) + np.max(e_out) * float(R.width.max())) + 1e-300
    gap = float(max(np.max(np.abs(u_dev - u_out)), np.max(np.abs(e_dev - e_out)) * R.width.max()))
    if gap > max(1e-9, 0.01 * tol_factor) * scale:
        return (f"{ev.path} disagrees with outcome by {gap:.3g} at the reports checked; "
                "outcome (what run pays) is audited")  # fmt: skip
    return None


def _is_monte_carlo(mech) -> bool:
    return bool(getattr(mech, "randomized", False)) and not (
        _overrides(mech, "deviations") or _overrides(mech, "deviation_utilities")
    )
