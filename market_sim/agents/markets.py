"""What the platform runs: one interface over every mechanism.

``outcome(reports)`` gives (eps, payments) for all participants;
``utilities(i, candidates, true_cost, reports)`` gives seller i's utility
t_i - c_i eps_i for each candidate report, the others' reports fixed (the
empirical IC test).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ..distributions import CostDistribution
from ..errors import MarketSimError
from ..mechanisms.baselines import pay_as_bid, posted_price
from ..mechanisms.online import OnlineMechanism
from ..mechanisms.payments import offline_payments, seller_utility

MECHANISMS = ("offline", "online", "pay-as-bid", "posted-price")


@dataclass(frozen=True)
class Market:
    mechanism: str
    dist: CostDistribution
    mu: float = 1.0
    sigma: float = 1.0
    gamma: float = 1.0
    planned_m: int = 100
    price: float | None = None      # posted price; default: the 0.1 quantile of costs
    eps_level: float = 1.0          # posted price: eps bought from each accepting seller
    online: OnlineMechanism | None = field(default=None, repr=False, compare=False)

    @classmethod
    def build(cls, mechanism: str, dist: CostDistribution, **kw) -> "Market":
        if mechanism not in MECHANISMS:
            raise MarketSimError(f"mechanism: unknown {mechanism!r}; use one of {', '.join(MECHANISMS)}")
        m = cls(mechanism, dist, **kw)
        if mechanism == "online":
            mech = OnlineMechanism(dist, m.planned_m, mu=m.mu, sigma=m.sigma, gamma=m.gamma)
            object.__setattr__(m, "online", mech)
        if mechanism == "posted-price" and m.price is None:
            object.__setattr__(m, "price", float(dist.ppf(0.1)))
        return m

    @property
    def params(self):
        return dict(mu=self.mu, sigma=self.sigma, gamma=self.gamma)

    def outcome(self, reports):
        reports = np.asarray(reports, dtype=float)
        if self.mechanism == "offline":
            return offline_payments(reports, self.dist, **self.params)
        if self.mechanism == "online":
            return self.online.eps(reports), self.online.payments(reports)
        if self.mechanism == "pay-as-bid":
            return pay_as_bid(reports, self.dist, **self.params)
        return posted_price(reports, price=self.price, eps_level=self.eps_level)

    def utilities(self, i: int, candidates, true_cost: float, reports) -> np.ndarray:
        cand = np.asarray(candidates, dtype=float)
        if self.mechanism == "online":  # each seller alone: the others do not matter
            return self.online.payments(cand) - true_cost * self.online.eps(cand)
        if self.mechanism == "offline":
            return np.array([seller_utility(i, r, true_cost, reports, self.dist, **self.params)
                             for r in cand])
        out = np.empty(cand.size)
        trial = np.array(reports, dtype=float)
        for j, r in enumerate(cand):
            trial[i] = r
            eps, pay = self.outcome(trial)
            out[j] = pay[i] - true_cost * eps[i]
        return out
