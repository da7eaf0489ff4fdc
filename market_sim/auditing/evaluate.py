"""Evaluating candidate reports: the mechanism's own ``deviations`` (checked against
``outcome``), ``outcome`` once per candidate, or common random numbers (Monte Carlo).

The zero-cost limit (market_sim/privacy/limit.py).  An exact evaluation accepts
eps_i = +inf with a finite payment at a report of 0, and nothing else infinite:

* psi(r) = r + F(r)/f(r) >= r (F, f >= 0), so psi(r) = 0 only at r = 0, on a support
  starting at 0 (U[0, 1], Beta laws); eps = +inf at a report r > 0 has psi(r) > 0 and
  is no limit of the mechanism: refused in one line (``_check_limit``), as are NaN or
  infinite payments and NaN or -inf eps.
* A seller of cost c > 0 reporting 0 gets u = t - c x inf = -inf: never a gain (the
  search's max ignores it), and no IR question (its own type is c > 0, whose utility
  is evaluated at its own report).  A seller of cost 0 reporting 0 gets u = t, its
  payment (0 x inf = 0, ``privacy_cost``).
* Its payment t is kept (``_Exact.floor_pay``): u = -inf does not carry it, and the
  type gains, the own-type utilities and Myerson's identity need it (v(0) = t(0)).
  Each seller has one report 0 per profile of the others, hence one such payment.

Monte Carlo (randomized mechanisms on the generic default) still refuses +inf."""

from __future__ import annotations

import numpy as np

from ..errors import MarketSimError
from ..mechanisms.base import Mechanism, as_outcome, mechanism_name
from ..privacy.limit import privacy_cost


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
        self.floor_pay: dict[int, float] = {}  # seller -> t at its eps = +inf report (0)
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
            u, e = _loop(mech, r, c, sellers, cand, [None], self.floor_pay)
            return u, e
        dev = mech.deviations(sellers, cand, r, np.random.default_rng(self.seed))
        eps = np.asarray(dev.eps, dtype=float).reshape(cand.shape)
        if self.path == "utilities":
            u = mech.deviation_utilities(sellers, cand, c[sellers], r,
                                         np.random.default_rng(self.seed))  # fmt: skip
            u = np.asarray(u, dtype=float).reshape(cand.shape)
            _refuse_not_finite(mech, eps, u)  # no payment
        else:
            pay = np.asarray(dev.payments, dtype=float).reshape(cand.shape)
            _check_limit(mech, cand, eps, pay, np.zeros(cand.shape, dtype=bool))
            u = pay - privacy_cost(c[sellers][:, None], eps)
            _keep_floor_pay(self.floor_pay, sellers, eps, pay)
        return u[None], eps[None]


class _MonteCarlo:
    """Common random numbers for a randomized mechanism on the generic default: every
    candidate of every seller sees the same draws (seeds)."""

    mc = True

    def __init__(self, mech, reports, costs, seeds):
        self.mech, self.reports, self.costs = mech, reports, costs
        self.seeds = _streams(seeds)

    def __call__(self, sellers, cand, draws=slice(None)):
        """(D, k, C) utilities and eps on the draws ``draws`` (a slice of the seeds)."""
        return _loop(self.mech, self.reports, self.costs, sellers, cand, self.seeds[draws])


def _loop(mech, reports, costs, sellers, cand, seeds, floor_pay=None):
    """(D, k, C) utilities at the true costs and eps, ``outcome`` once per seller,
    distinct candidate and draw (a fresh generator per seed: common random numbers, so
    a repeated candidate has the very same outcome and is not evaluated again).  Exact
    evaluations (``floor_pay`` given) accept the zero-cost limit eps = +inf at a report
    of 0 (``_check_limit``) and keep its payment there; Monte Carlo refuses it."""
    D = len(seeds)
    u = np.empty((D,) + cand.shape)
    e = np.empty((D,) + cand.shape)
    trial = reports.copy()
    outcome, n = mech.outcome, reports.size
    streams = _streams(seeds)
    for k, i in enumerate(sellers):
        keep = trial[i]
        values, where = np.unique(cand[k], return_inverse=True)
        got = np.empty((values.size, D, 2))  # (eps_i, t_i) per distinct candidate and draw
        for j, z in enumerate(values):
            trial[i] = z
            rows = np.empty((D, n))  # each call its own copy of the reports (a mechanism
            rows[:] = trial  # may write to them): one array of D rows, not D copies
            got[j] = _calls(outcome, rows, streams, n, i, mech)
        w = where.reshape(-1)
        e[:, k], u[:, k] = got[w, :, 0].T, got[w, :, 1].T
        trial[i] = keep
    if floor_pay is None:  # Monte Carlo: no limit outcome
        _refuse_not_finite(mech, e, u)
    else:
        _check_limit(mech, cand[None], e, u, np.zeros(u.shape, dtype=bool))
        _keep_floor_pay(floor_pay, sellers, e[0], u[0])
    _refuse_negative_eps(mech, e)
    return u - privacy_cost(np.asarray(costs, dtype=float)[sellers][:, None], e), e


def _refuse_not_finite(mech, eps, pay) -> None:
    """Refuse, in one line, eps or payments (utilities) that are NaN or infinite."""
    if not (np.all(np.isfinite(pay)) and np.all(np.isfinite(eps))):
        raise MarketSimError(f"{mechanism_name(mech)}: eps or payments contain NaN or inf")


def _refuse_negative_eps(mech, eps) -> None:
    """Refuse, in one line, a negative eps."""
    if np.any(eps < 0):
        raise MarketSimError(f"{mechanism_name(mech)}: eps must be >= 0")


def _check_limit(mech, cand, eps, pay, neg_inf_ok) -> None:
    """Refuse, in one line, what is not the zero-cost limit (privacy/limit.py): NaN or
    -inf eps, eps = +inf at a report other than 0 (psi(r) = r + F(r)/f(r) >= r, so
    psi = 0 needs r = 0: the module doc), or a payment (``pay``; utilities
    with ``neg_inf_ok``) that is NaN or infinite."""
    name = mechanism_name(mech)
    inf = np.isposinf(eps)
    if np.any(np.isnan(eps) | np.isneginf(eps)):
        raise MarketSimError(f"{name}: eps or payments contain NaN or inf")
    off = inf & (np.broadcast_to(cand, eps.shape) != 0)
    if np.any(off):
        z = float(np.broadcast_to(cand, eps.shape)[off][0])
        raise MarketSimError(f"{name}: eps = +inf at a report of {z:.6g} > 0 (only a report of 0 "
                             "can have virtual cost 0, the zero-cost limit)")  # fmt: skip
    bad = ~np.isfinite(pay) & ~(neg_inf_ok & inf & np.isneginf(pay))
    if np.any(bad):
        raise MarketSimError(f"{name}: eps or payments contain NaN or inf")


def _keep_floor_pay(store: dict, sellers, eps, pay) -> None:
    """The payment at each seller's eps = +inf report (0: one report, one payment), which
    its utility -inf at a cost c > 0 does not carry."""
    rows, cols = np.nonzero(np.isposinf(eps))
    for r, j in zip(rows, cols, strict=True):
        store[int(sellers[r])] = float(pay[r, j])


class _Stream:
    """``np.random.default_rng(seed)`` at its start on every ``fresh()`` (None for no
    seed): one generator whose state is reset, the very same numbers as a new one, at a
    quarter of the cost of building it (a Monte Carlo audit makes ~10^5 of them)."""

    def __init__(self, seed):
        self.seed = seed
        self.rng = None if seed is None else np.random.default_rng(seed)
        self.start = None if seed is None else self.rng.bit_generator.state

    def fresh(self):
        rng = self.rng
        if rng is None:
            return None
        bits = rng.bit_generator
        if bits.seed_seq.n_children_spawned:  # ``spawn`` moved its seed sequence:
            self.rng = rng = np.random.default_rng(self.seed)  # a new one, as before
        else:
            bits.state = self.start
        return rng


def _calls(outcome, rows, streams, n: int, i: int, mech) -> list:
    """(eps_i, t_i) of ``outcome(row, generator)`` for each row and its stream at its
    start: ``_Stream.fresh`` and ``_entry``'s common case inlined (a tuple of two float
    arrays of n; ~1 us of the ~10 us a call of the bench's lottery costs), anything else
    through them."""
    out = []
    for row, stream in zip(rows, streams, strict=True):
        rng = stream.rng
        if rng is not None:
            if rng.bit_generator.seed_seq.n_children_spawned:
                rng = stream.fresh()  # ``spawn`` moved its seed sequence: a new one
            else:
                rng.bit_generator.state = stream.start
        res = outcome(row, rng)
        if type(res) is tuple and len(res) == 2:
            eps, pay = res
            if (type(eps) is np.ndarray and type(pay) is np.ndarray and eps.dtype == _F64
                    and pay.dtype == _F64 and eps.shape == pay.shape == (n,)):  # fmt: skip
                out.append((eps[i], pay[i]))
                continue
        out.append(_entry(res, n, i, mech))
    return out


_F64 = np.dtype(np.float64)


def _entry(result, n, i, mech) -> tuple[float, float]:
    """(eps_i, t_i) of what ``outcome`` returned: a tuple of two float arrays of n read
    directly (the common case: ~1 us of the ~11 us a call of the bench's lottery costs),
    anything else through ``_pair``'s checks."""
    if type(result) is tuple and len(result) == 2:
        eps, pay = result
        if (type(eps) is np.ndarray and type(pay) is np.ndarray and eps.dtype == np.float64
                and pay.dtype == np.float64 and eps.shape == pay.shape == (n,)):  # fmt: skip
            return eps[i], pay[i]
    eps, pay = _pair(result, n, mech)
    return eps[i], pay[i]


def _streams(seeds) -> list[_Stream]:
    """One ``_Stream`` per seed (None: no generator); streams given are kept, so that a
    market's evaluators share its streams (building a generator costs ~30 us, several
    times a small mechanism's call; resetting one, ~3 us: the same numbers)."""
    return [s if isinstance(s, _Stream) else _Stream(None if s is None else int(s))
            for s in seeds]  # fmt: skip


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
    u_out, e_out = _loop(mech, costs, costs, sellers, cand, [None], {})
    fin = np.isfinite(u_out) & np.isfinite(e_out)  # the limit eps = +inf: must agree exactly
    if np.any((u_dev != u_out) & ~fin) or np.any((e_dev != e_out) & ~fin):
        return "deviations disagrees with outcome at eps = +inf; outcome (what run pays) is audited"
    scale = float(np.max(np.abs(u_out[fin]), initial=0.0)
                  + np.max(e_out[fin], initial=0.0) * float(R.width.max())) + 1e-300  # fmt: skip
    with np.errstate(invalid="ignore"):  # inf - inf where both are the limit: masked
        u_gap = np.abs(np.where(fin, u_dev - u_out, 0.0))
        e_gap = np.abs(np.where(fin, e_dev - e_out, 0.0))
    gap = float(max(np.max(u_gap), np.max(e_gap) * R.width.max()))
    if gap > max(1e-9, 0.01 * tol_factor) * scale:
        return (f"{ev.path} disagrees with outcome by {gap:.3g} at the reports checked; "
                "outcome (what run pays) is audited")  # fmt: skip
    return None


def _same_answer(a, b) -> bool:
    """Two answers of ``outcome`` to the same reports are the same up to float rounding
    (1e-9 relative: a deterministic mechanism whose sums run on threads may differ in the
    last bits from call to call, far below any gain the audit can see)."""
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    finite = a[np.isfinite(a)]
    scale = float(np.max(np.abs(finite))) if finite.size else 0.0
    return a.shape == b.shape and bool(
        np.allclose(a, b, rtol=1e-9, atol=1e-12 * scale, equal_nan=True)
    )


def _undeclared_randomness(mech, costs, P) -> None:
    """Refuse, in one line, a mechanism that declares itself deterministic (not
    ``randomized``) whose ``outcome`` answers the same reports differently: called twice
    each on the market's costs and on every seller at its own floor and at its own top.
    One call of such a mechanism is no exact evaluation: its noise would read as gains
    and as IR failures (``tests/redteam/fresh.py::UndeclaredRandom``, IC and IR in
    expectation, was ``not_ic`` and ``not_ir``).  The library's own unmodified
    mechanisms (``certification.unmodified``) are not probed: their code is trusted."""
    from ..certification import unmodified

    if getattr(mech, "randomized", False) or unmodified(mech) is None:
        return
    R = P.rows(np.arange(costs.size))
    for reports in (costs, R.floor, R.hi):
        try:
            first = _pair(mech.outcome(np.array(reports, dtype=float), None), costs.size, mech)
        except (ValueError, ArithmeticError):  # no outcome there (every seller at a
            continue  # top of psi = inf): the search meets it in its own way
        again = _pair(mech.outcome(np.array(reports, dtype=float), None), costs.size, mech)
        if not all(_same_answer(a, b) for a, b in zip(first, again, strict=True)):
            raise MarketSimError(
                f"{mechanism_name(mech)} declares randomized = False, but outcome gave "
                "different results for the same reports: set randomized = True to audit it "
                "in expectation (Monte Carlo)"
            )


def _is_monte_carlo(mech) -> bool:
    return bool(getattr(mech, "randomized", False)) and not (
        _overrides(mech, "deviations") or _overrides(mech, "deviation_utilities")
    )
