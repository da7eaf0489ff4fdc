"""Uniform-price procurement (``uniform-price``) and the threshold-purchase base class.

A *threshold purchase* buys some sellers at one common privacy level ``e`` (their
eps_i = e, the others 0) and pays each bought seller its threshold T_i(r_-i) per
unit: the largest report at which it is still bought, the others' reports fixed.
Seller i's allocation is the step eps_i(z) = e_i 1[z <= T_i], where neither T_i nor
the level e_i it is bought at depends on its own report; Myerson's payment (Eq. 8,
003) of a step is t_i = T_i e_i, so truthful reporting is a dominant strategy and a
truthful seller's utility (T_i - c_i) e_i is never negative.  Subclasses say who is
bought by returning every seller's (T_i, e_i); ``outcome`` and ``deviations`` both
follow from the step, so they are exact and consistent.

Ties are broken by seller index: every rule sorts the reports by (report, index),
as a stable sort does, and T_i is the supremum of the reports at which seller i is
still bought in that order.  Whether a report of exactly T_i wins is then fixed by
the rule, not by a convention of the payment: if T_i is another seller j's report
(alone or equal to a budget bound or the reserve), seller i stands before j iff
i < j and only then is bought; if only a budget bound or the reserve attains T_i,
the bound is met with equality and i is bought (:func:`bounded_threshold`).  Either
way t_i = T_i e_i is Myerson's payment and the budget-feasible rules keep
sum t <= B on every profile, ties included.  Reports above the top of the support
``hi`` are refused, and a phantom report ``hi`` (index m) stands after the real
ones, so a seller bought with fewer than k others left is paid the reserve ``hi``
(the most any seller can ask).

``uniform-price``: the (k+1)-price auction for k identical units (Vickrey, 1961):
the k lowest reports are bought at level e and each is paid the (k+1)-th lowest
report per unit, t_i = r_(k+1) e.  Its threshold for seller i is the k-th lowest
of the *other* reports.  Mapping to our market: a unit is one seller's data at
privacy level e; seller i's cost c_i e.  Defaults come from the prior-optimal
posted price (p*, e*) (:func:`~market_sim.mechanisms.optimal_posted_price.default_plan`):
k = m F(p*) rounded into [1, m - 1] and e = e*, so that the auction buys, in
expectation, what the best posted price buys, at the price the reports set.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from ..distributions import CostDistribution, as_distribution
from ..errors import MarketSimError
from ..parameters import check_int
from .base import Mechanism, Outcome, _deviation_args

__all__ = ["ThresholdPurchase", "UniformPrice", "bounded_threshold", "sorted_pool"]


def _check_reports(reports, who: str) -> np.ndarray:
    r = np.asarray(reports, dtype=float).reshape(-1)
    if r.size == 0:
        raise MarketSimError(f"{who}: no reports")
    if not np.all(np.isfinite(r)) or np.any(r < 0):
        bad = int(np.argmax(~np.isfinite(r) | (r < 0)))
        raise MarketSimError(f"{who}: reports must be finite and >= 0 (seller {bad}: {r[bad]!r})")
    return r


def _check_positive(label: str, v) -> float:
    ok = not isinstance(v, bool) and isinstance(v, (int, float, np.integer, np.floating))
    if not (ok and np.isfinite(v) and v > 0):
        raise MarketSimError(f"{label} must be a finite number > 0 (got {v!r})")
    return float(v)


def sorted_pool(r: np.ndarray, hi: float):
    """The reports at most ``hi`` sorted (stable: ties by index), padded with the phantom
    report ``hi`` to length m + 2; their seller indices (m for the phantom); the pool
    size n; every seller's 0-based rank in the stable sort of all reports."""
    m = r.size
    order = np.argsort(r, kind="stable")
    n = int(np.count_nonzero(r <= hi))
    s = np.full(m + 2, float(hi))
    who = np.full(m + 2, m, dtype=int)
    s[:n], who[:n] = r[order[:n]], order[:n]
    rank = np.empty(m, dtype=int)
    rank[order] = np.arange(m)
    return s, who, n, rank


class ThresholdPurchase(Mechanism):
    """Buy sellers at a common eps level, each bought seller paid its threshold (module doc).

    Subclasses set ``dist`` (its support's top is the reserve) and implement
    ``thresholds(reports)``."""

    dist: CostDistribution

    def thresholds(self, reports: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, dict]:
        """Per seller, from the others' reports only: the threshold T_i, the index of
        the seller whose report sets it (m: the reserve or a budget bound, met with
        equality), and the level e_i it sells at when bought (the same for every
        bought seller of one outcome); and an ``info`` dict for the outcome."""
        raise NotImplementedError

    @property
    def reserve(self) -> float:
        return float(self.dist.support[1])

    @staticmethod
    def _buy(z, i, T, J):
        return (z < T) | ((z == T) & (i < J))

    def outcome(self, reports, rng=None) -> Outcome:
        r = _check_reports(reports, self.name)
        T, J, level, info = self.thresholds(r)
        bought = self._buy(r, np.arange(r.size), T, J)
        eps = np.where(bought, level, 0.0)
        pay = np.where(bought, T, 0.0) * level
        return Outcome(eps, pay, {**info, "n_bought": int(bought.sum())})

    def deviations(self, sellers, candidates, reports, rng=None) -> Outcome:
        """eps_i(z) = e_i 1[z <= T_i] and t_i(z) = T_i eps_i(z): one threshold computation
        for all sellers and candidates."""
        sellers, cand, reports = _deviation_args(sellers, candidates, reports)
        r = _check_reports(reports, self.name)
        T, J, level, _ = self.thresholds(r)
        Ti, Ji, Ei = T[sellers][:, None], J[sellers][:, None], level[sellers][:, None]
        bought = self._buy(cand, sellers[:, None], Ti, Ji)
        eps = np.where(bought, Ei, 0.0)
        return Outcome(eps, np.where(bought, Ti, 0.0) * Ei)


def bounded_threshold(by_next, who_next, by_budget, reserve: float, m: int):
    """T_i = min(next other's report, budget bound, reserve) and J_i, the index that
    decides a report of exactly T_i (``ThresholdPurchase._buy``).

    At z = T_i = the next other's report, seller i stands before that seller iff its
    index is lower (the stable sort), and only then is it bought, *also when a budget
    bound or the reserve equals it*: behind it, i would be one position further on,
    where z exceeds the (smaller) budget bound.  So J_i = who_next whenever the next
    report attains the minimum; J_i = m (bought at T_i) when only a budget bound or the
    reserve attains it, since those are met with equality (z <= bound)."""
    T = np.minimum(np.minimum(by_next, by_budget), reserve)
    J = np.where(by_next <= np.minimum(by_budget, reserve), who_next, m)
    return T, J


def _kth_of_others(s, who, rank, k: int):
    """Each seller's k-th lowest among the others' reports (pool + reserve), and whose."""
    idx = np.where(rank >= k, k - 1, k)
    return s[idx], who[idx]


@dataclass(frozen=True)
class UniformPrice(ThresholdPurchase):
    """Uniform-price (k+1)-price auction: the k lowest reports sell at the (k+1)-th lowest.

    Each of the k sells ``eps_level`` and is paid t_i = r_(k+1) eps_level (Vickrey 1961).

    ``n_buy`` = k and ``eps_level`` default to the prior-optimal posted price's
    expected purchase (module doc); ``n_sellers``, ``mu``, ``sigma``, ``gamma`` are
    the market those defaults are computed for."""

    name: ClassVar[str] = "uniform-price"
    dist: CostDistribution
    n_sellers: int = 100
    mu: float = 1.0
    sigma: float = 1.0
    gamma: float = 1.0
    n_buy: int | None = None
    eps_level: float | None = None

    def __post_init__(self):
        from .optimal_posted_price import default_plan

        object.__setattr__(self, "dist", as_distribution(self.dist))
        if self.n_buy is None or self.eps_level is None:
            k, e, _, _ = default_plan(self.dist, self.n_sellers, self.mu, self.sigma, self.gamma)
            if self.n_buy is None:
                object.__setattr__(self, "n_buy", k)
            if self.eps_level is None:
                object.__setattr__(self, "eps_level", e)
        object.__setattr__(self, "n_buy", check_int("n_buy", self.n_buy, 1))
        object.__setattr__(self, "eps_level", _check_positive("eps_level", self.eps_level))

    def thresholds(self, reports):
        s, who, _, rank = sorted_pool(reports, self.reserve)
        k = min(int(self.n_buy or 1), reports.size)
        T, J = _kth_of_others(s, who, rank, k)
        level = np.full(reports.size, float(self.eps_level or 0.0))
        return T, J, level, {"price": float(s[k])}  # r_(k+1), or the reserve if fewer are left
