"""Any mechanism under per-seller privacy budgets: eps_i capped, payments pro rata.

``Budgeted(mechanism, caps)`` runs ``mechanism`` and gives seller i

    eps_i' = min(eps_i, cap_i),     t_i' = t_i * eps_i' / eps_i   (t_i' = t_i if eps_i = 0),

where cap_i is the largest eps seller i can still sell (its privacy ledger's
``cap``), fixed before the reports are seen.

Properties (docs/ledger.md):

* **IR is kept**: u_i' = t_i' - c_i eps_i' = (eps_i'/eps_i)(t_i - c_i eps_i), a
  non-negative multiple of the uncapped utility.
* **Budgets hold**: eps_i' <= cap_i whatever the reports.
* **IC** is kept where the price per unit t_i/eps_i does not depend on the seller's
  own report while it is bought (posted prices, uniform-price rules): a capped seller
  then sells cap_i units at the same price.  For Myerson-paid allocations
  (offline, online) the price per unit t_i(z)/eps_i(z) = z + int_z eps_i / eps_i(z)
  can rise with the report z, so a capped seller may gain by over-reporting while its
  eps stays above the cap; ``deviations`` here are those of the capped rule, so the
  model's regret measures that gain.

``caps`` is an array (one per report) or a :class:`Caps` whose exact values are only
computed where a seller's allocation exceeds a known lower bound.
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


class Budgeted(Mechanism):
    """``mechanism`` with each seller's eps capped at ``caps`` (module docstring).
    ``myerson_payments`` stays False: pro rata payments do not follow Myerson's
    identity for the capped allocation."""

    def __init__(self, mechanism, caps):
        from .base import as_mechanism

        self.mechanism = as_mechanism(mechanism)
        self.caps = caps if isinstance(caps, Caps) else Caps(caps)
        self.name = f"budgeted({mechanism_name(self.mechanism)})"
        for attr in ("randomized", "own_report_inclusion", "needs_data", "n_draws"):
            setattr(self, attr, getattr(self.mechanism, attr))

    def with_data(self, X, y):
        return Budgeted(self.mechanism.with_data(X, y), self.caps)

    def _check(self, n: int) -> None:
        if self.caps.lower.size != n:
            raise MarketSimError(
                f"{self.name}: {self.caps.lower.size} caps for {n} reports; one per seller"
            )

    def outcome(self, reports, rng=None):
        reports = np.asarray(reports, dtype=float)
        self._check(reports.size)
        out = as_outcome(self.mechanism.outcome(reports, rng), reports.size, self.name)
        eps, pay = capped(out.eps, out.payments, self.caps.apply(np.arange(reports.size), out.eps))
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
        eps, pay = capped(dev.eps, dev.payments, self.caps.apply(sellers, dev.eps))
        return Outcome(eps, pay)
