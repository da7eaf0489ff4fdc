"""Any mechanism under per-seller privacy budgets: eps_i capped at a per-seller cap.

``Budgeted(mechanism, caps, payments=...)`` runs ``mechanism`` and gives seller i
eps_i' = min(eps_i, cap_i), where cap_i is the largest eps seller i can still sell (its
privacy ledger's ``cap``), fixed before the reports are seen.  Two payment rules:

* ``"pro-rata"`` (any mechanism): t_i' = t_i eps_i'/eps_i (t_i' = t_i if eps_i = 0).
  **IR is kept**: u_i' = (eps_i'/eps_i)(t_i - c_i eps_i) >= 0 when the uncapped u_i is.
  **IC** is kept where the price per unit t_i/eps_i does not move with the seller's own
  report while it sells (posted prices); under Myerson payments the price per unit
  t_i(z)/eps_i(z) = z + int_z eps_i / eps_i(z) can rise with the report z, so a capped
  seller may gain by over-reporting while its eps stays above the cap.
* ``"myerson"`` (deterministic mechanisms that pay by Myerson's identity, Eq. 8 of
  003): the payment of the capped allocation x_i(z) = min(eps_i(z), cap_i) by the same
  identity, t_i'(r) = r x_i(r) + int_r^{c_high} x_i(z) dz.  Uncapped sellers keep t_i;
  with z* = inf{z : eps_i(z) <= cap_i} a capped seller gets the constant
      t_i' = cap_i z* + t_i(z*) - z* eps_i(z*)
  (t_i(z*) - z* eps_i(z*) = int_{z*} eps_i, Eq. 8), z* by bisection on its own report.
  The capped allocation is monotone (the cap does not depend on the report), so this is
  IC and IR (u_i = int_{c_i} x_i >= 0).

``payments="auto"`` (the default) is ``"myerson"`` where the mechanism sets
``myerson_payments`` and is deterministic, else ``"pro-rata"``.  Budgets hold either way:
eps_i' <= cap_i whatever the reports.  ``caps`` is an array (one per report) or a
:class:`Caps` whose exact values are only computed where an allocation exceeds a known
lower bound.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from ..errors import MarketSimError
from .base import Mechanism, Outcome, _deviation_args, as_outcome, mechanism_name

__all__ = ["Budgeted", "Caps", "capped"]


class Caps:
    """Per-position caps: ``lower`` (known now) and ``exact(positions)`` on demand,
    memoised; exact >= lower.  An array gives caps that are all exact."""

    def __init__(self, lower, exact: Callable[[np.ndarray], np.ndarray] | None = None):
        self.lower = np.asarray(lower, dtype=float).reshape(-1)
        if np.any(self.lower < 0) or not np.all(np.isfinite(self.lower)):
            raise MarketSimError("caps must be finite numbers >= 0")
        self._exact_fn = exact
        self._exact: dict[int, float] = {}

    def exact(self, positions: np.ndarray) -> np.ndarray:
        positions = np.asarray(positions, dtype=np.int64).reshape(-1)
        if self._exact_fn is None:
            return self.lower[positions]
        todo = np.array([p for p in np.unique(positions) if int(p) not in self._exact], dtype=int)
        if todo.size:
            vals = np.asarray(self._exact_fn(todo), dtype=float).reshape(-1)
            self._exact.update(zip(todo.tolist(), vals.tolist(), strict=True))
        return np.array([self._exact[int(p)] for p in positions], dtype=float)

    def apply(self, positions: np.ndarray, eps: np.ndarray) -> np.ndarray:
        """min(eps, cap) row-wise: ``eps`` is (k,) or (k, j) for sellers ``positions``."""
        eps = np.asarray(eps, dtype=float)
        low = self.lower[positions].reshape((-1,) + (1,) * (eps.ndim - 1))
        over = eps > low
        if not over.any():
            return eps
        rows = np.flatnonzero(over.reshape(eps.shape[0], -1).any(axis=1))
        cap = np.broadcast_to(low, eps.shape).copy()
        cap[rows] = self.exact(np.asarray(positions)[rows]).reshape((-1,) + (1,) * (eps.ndim - 1))
        return np.minimum(eps, cap)


def capped(eps, payments, capped_eps) -> tuple[np.ndarray, np.ndarray]:
    """(eps', t') with t' = t eps'/eps pro rata (t' = t where eps = 0)."""
    eps = np.asarray(eps, dtype=float)
    pay = np.asarray(payments, dtype=float)
    share = np.divide(capped_eps, eps, out=np.ones_like(eps), where=eps > 0)
    return np.asarray(capped_eps, dtype=float), pay * share


PAYMENTS = ("auto", "pro-rata", "myerson")


class Budgeted(Mechanism):
    """``mechanism`` with each seller's eps capped at ``caps`` (module docstring).
    ``myerson_payments`` is True only with ``payments="myerson"``."""

    bisection_steps = 60
    z_tolerance = 1e-10

    def __init__(self, mechanism, caps, payments: str = "auto"):
        from .base import as_mechanism

        if payments not in PAYMENTS:
            raise MarketSimError(
                f"payments must be one of {', '.join(PAYMENTS)} (got {payments!r})"
            )
        self.mechanism = as_mechanism(mechanism)
        self.caps = caps if isinstance(caps, Caps) else Caps(caps)
        self.name = f"budgeted({mechanism_name(self.mechanism)})"  # type: ignore[misc]
        for attr in ("randomized", "own_report_inclusion", "needs_data", "n_draws"):
            setattr(self, attr, getattr(self.mechanism, attr))
        myerson_ok = bool(self.mechanism.myerson_payments) and not self.mechanism.randomized
        if payments == "myerson" and not myerson_ok:
            raise MarketSimError(
                f"{self.name}: Myerson payments for the capped rule need a deterministic "
                "mechanism that pays by Myerson's identity (myerson_payments)"
            )
        self.payments = "myerson" if payments == "auto" and myerson_ok else payments
        if self.payments == "auto":
            self.payments = "pro-rata"
        self.myerson_payments = self.payments == "myerson"  # type: ignore[misc]
        self._constants: dict[tuple, dict[int, float]] = {}

    def with_data(self, X, y):
        return Budgeted(self.mechanism.with_data(X, y), self.caps, self.payments)

    def _check(self, n: int) -> None:
        if self.caps.lower.size != n:
            raise MarketSimError(
                f"{self.name}: {self.caps.lower.size} caps for {n} reports; one per seller"
            )

    def _high(self) -> float:
        dist = getattr(self.mechanism, "dist", None)
        if dist is None:
            raise MarketSimError(f"{self.name}: Myerson payments need the mechanism's cost law")
        return float(dist.support[1])

    def _capped_payment(self, sellers: np.ndarray, reports: np.ndarray, rng) -> np.ndarray:
        """cap_i z* + t_i(z*) - z* eps_i(z*) per seller (module docstring), memoised per
        report profile and seller."""
        key = (reports.shape, reports.tobytes())
        memo = self._constants.setdefault(key, {})
        todo = np.array([i for i in np.unique(sellers) if int(i) not in memo], dtype=np.int64)
        if todo.size:
            cap = self.caps.exact(todo)
            lo = np.zeros(todo.size)
            hi = np.full(todo.size, self._high())
            lo = np.minimum(lo, reports[todo])
            tol = self.z_tolerance * max(float(hi[0]), 1e-12)
            for _ in range(self.bisection_steps):  # eps_i(lo) > cap >= eps_i(hi)
                if np.all(hi - lo <= tol):  # z* to 1e-10 of c_high: t' to cap * that
                    break
                mid = 0.5 * (lo + hi)
                e = self.mechanism.deviations(todo, mid[:, None], reports, rng).eps[:, 0]
                above = e > cap
                lo, hi = np.where(above, mid, lo), np.where(above, hi, mid)
            d = self.mechanism.deviations(todo, hi[:, None], reports, rng)
            e_hi, t_hi = d.eps[:, 0], d.payments[:, 0]
            # at the top of the support eps may still exceed the cap: then z* = c_high
            # and int_{c_high} = 0, so the payment is cap * c_high
            k = cap * hi + np.where(e_hi <= cap, t_hi - hi * e_hi, 0.0)
            memo.update(zip(todo.tolist(), k.tolist(), strict=True))
        if len(self._constants) > 8:  # old report profiles
            self._constants = {key: memo}
        return np.array([memo[int(i)] for i in sellers], dtype=float)

    def _pay(self, sellers, eps, pay, capped_eps, reports, rng) -> np.ndarray:
        """Payments of the capped rule for rows ``sellers`` of (k,) or (k, j) arrays."""
        if self.payments == "pro-rata":
            return capped(eps, pay, capped_eps)[1]
        over = eps > capped_eps
        rows = np.flatnonzero(over.reshape(eps.shape[0], -1).any(axis=1))
        out = np.array(pay, dtype=float, copy=True)
        if rows.size:
            k = self._capped_payment(np.asarray(sellers)[rows], reports, rng)
            sub = out[rows]
            k = k.reshape((-1,) + (1,) * (eps.ndim - 1))
            out[rows] = np.where(over[rows], np.broadcast_to(k, sub.shape), sub)
        return out

    def outcome(self, reports, rng=None):
        reports = np.asarray(reports, dtype=float)
        self._check(reports.size)
        out = as_outcome(self.mechanism.outcome(reports, rng), reports.size, self.name)
        idx = np.arange(reports.size)
        eps = self.caps.apply(idx, out.eps)
        pay = self._pay(idx, out.eps, out.payments, eps, reports, rng)
        return Outcome(eps, pay, {**out.info, "uncapped_eps": out.eps})

    def deviations(self, sellers, candidates, reports, rng=None) -> Outcome:
        """The capped rule's eps and payment at other own reports.  Deterministic
        mechanisms: the inner deviations, capped (the cap does not depend on the
        report).  Randomized ones: the generic Monte Carlo over the capped outcome
        (the cap of an expectation is not the expectation of the capped draw)."""
        if self.mechanism.randomized:
            return super().deviations(sellers, candidates, reports, rng)
        sellers, cand, reports = _deviation_args(sellers, candidates, reports)
        self._check(reports.size)
        dev = self.mechanism.deviations(sellers, cand, reports, rng)
        eps = self.caps.apply(sellers, dev.eps)
        return Outcome(eps, self._pay(sellers, dev.eps, dev.payments, eps, reports, rng))
