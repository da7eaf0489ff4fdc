"""A private posted-price procurement mechanism (the digital-goods pricing
of 001, Sec. on auctions, turned to buying).

The platform values a unit of privacy at ``value``.  It picks one price p per unit
of eps from ``prices`` by the exponential mechanism with score
s(p) = (value - p) * eps_level * #{i : report_i <= p}, the buyer's surplus, and buys
``eps_level`` from every seller whose report is at most p, paying p per unit.
One seller changes the count by at most 1, so the sensitivity is
max_p |value - p| * eps_level.  The chosen price is ``privacy``-DP in the reports.
Given the price, accepting exactly when p >= c is optimal; a report moves the price
distribution by a factor of at most exp(privacy), so a misreport can gain at most
(exp(privacy) - 1) * max_p (p - c)^+ * eps_level in expectation (approximate
truthfulness, 001).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..errors import MarketSimError
from ..privacy.selection import exponential_mechanism, exponential_probabilities


@dataclass(frozen=True)
class PrivatePostedPrice:
    prices: tuple
    value: float
    eps_level: float = 1.0
    privacy: float = 1.0

    def __post_init__(self):
        p = np.asarray(self.prices, dtype=float)
        if p.ndim != 1 or p.size == 0 or not np.all(np.isfinite(p)) or p.min() < 0:
            raise MarketSimError("prices must be a non-empty list of finite numbers >= 0")
        if not (np.isfinite(self.value) and self.value > 0):
            raise MarketSimError("value must be a finite number > 0")
        if not (np.isfinite(self.eps_level) and self.eps_level > 0):
            raise MarketSimError("eps_level must be a finite number > 0")
        if not (np.isfinite(self.privacy) and self.privacy > 0):
            raise MarketSimError("privacy (the epsilon of the price choice) must be > 0")

    @property
    def sensitivity(self) -> float:
        return float(np.max(np.abs(self.value - np.asarray(self.prices))) * self.eps_level)

    def scores(self, reports) -> np.ndarray:
        p = np.asarray(self.prices, dtype=float)
        r = np.sort(np.asarray(reports, dtype=float))
        counts = np.searchsorted(r, p, side="right")
        return (self.value - p) * self.eps_level * counts

    def price_probabilities(self, reports) -> np.ndarray:
        return exponential_probabilities(self.scores(reports), self.privacy, self.sensitivity)

    def outcome(self, reports, rng: np.random.Generator):
        """(eps, payments, price) for one draw of the price."""
        r = np.asarray(reports, dtype=float)
        price = float(
            np.asarray(self.prices)[
                exponential_mechanism(self.scores(r), self.privacy, self.sensitivity, rng)
            ]
        )
        eps = np.where(r <= price, self.eps_level, 0.0)
        return eps, price * eps, price

    def expected_utility(self, i: int, report: float, cost: float, reports) -> float:
        """Seller i's utility averaged over the mechanism's price draw."""
        trial = np.array(reports, dtype=float)
        trial[i] = report
        p = np.asarray(self.prices, dtype=float)
        prob = self.price_probabilities(trial)
        return float(prob @ ((p - cost) * self.eps_level * (report <= p)))

    def ic_bound(self, cost: float) -> float:
        """Most a misreport can gain in expectation (approximate truthfulness)."""
        p = np.asarray(self.prices, dtype=float)
        return float(np.expm1(self.privacy) * np.max(np.maximum(p - cost, 0.0)) * self.eps_level)
