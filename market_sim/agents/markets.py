"""What the platform runs: one interface over every mechanism.

``outcome(reports)`` gives (eps, payments) for all participants;
``utilities(i, candidates, true_cost, reports)`` gives seller i's utility
t_i - c_i eps_i for each candidate report, the others' reports fixed (the
empirical IC test).

The data-dependent mechanism (Eq. 17) needs the participants' data:
``with_data(X, y)`` returns the market for this round's sellers.  Its
payments are Myerson's, t_i(r) = r eps_i(r) + int_r^{c_max} eps_i(z) dz, with
the integral by the trapezoid rule on {r} and the ``n_nodes`` equally spaced
reports above r, so outcome and utilities use one and the same payment rule;
the quadrature error shows up as (small) regret, which is reported, not hidden.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import numpy as np

from ..distributions import CostDistribution
from ..errors import MarketSimError
from ..mechanisms import data_dependent as dd
from ..mechanisms.baselines import pay_as_bid, posted_price
from ..mechanisms.online import OnlineMechanism
from ..mechanisms.payments import offline_payments, seller_utility
from ..mechanisms.private_cutoff import PrivateCutoff
from ..mechanisms.private_pricing import PrivatePostedPrice

MECHANISMS = ("offline", "online", "data-dependent", "pay-as-bid", "posted-price",
              "private-posted-price", "private-cutoff")
RANDOMIZED = ("private-posted-price", "private-cutoff")
DD_EPS_AVG_GRID = tuple(np.geomspace(0.05, 5.0, 10))


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
    data: tuple | None = field(default=None, repr=False, compare=False)  # data-dependent: (X, y)
    reg_lambda: float = 1e-2        # data-dependent: Lambda of Eq. 17
    n_nodes: int = 9                # data-dependent: payment quadrature nodes
    privacy: float = 1.0            # private mechanisms: epsilon of the price / cut-off choice
    private_cutoff: PrivateCutoff | None = field(default=None, repr=False, compare=False)
    rng: np.random.Generator | None = field(default=None, repr=False, compare=False)

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
        if mechanism in RANDOMIZED and m.rng is None:
            raise MarketSimError(f"{mechanism} draws its outcome at random: pass rng=")
        if mechanism == "private-cutoff":
            mech = PrivateCutoff(dist, m.planned_m, **m.params, privacy=m.privacy)
            object.__setattr__(m, "private_cutoff", mech)
        return m

    @property
    def randomized(self) -> bool:
        """True when the outcome is a random draw; utilities() then gives expectations."""
        return self.mechanism in RANDOMIZED

    @property
    def private_pricing(self) -> PrivatePostedPrice:
        """Prices on 21 quantiles of the cost law; the buyer values a unit of eps at
        the top of the support (so every price leaves it a surplus)."""
        prices = tuple(float(v) for v in self.dist.ppf(np.linspace(0.025, 0.975, 21)))
        return PrivatePostedPrice(prices, value=float(self.dist.support[1]),
                                  eps_level=self.eps_level, privacy=self.privacy)

    @property
    def params(self):
        return dict(mu=self.mu, sigma=self.sigma, gamma=self.gamma)

    def with_data(self, X, y) -> "Market":
        return replace(self, data=(np.asarray(X, dtype=float), np.asarray(y)))

    # ---- the data-dependent mechanism -------------------------------------------
    def _dd_kw(self):
        if self.data is None:
            raise MarketSimError("the data-dependent mechanism needs the sellers' data")
        return dict(**self.params, reg_lambda=self.reg_lambda, eps_avg_grid=DD_EPS_AVG_GRID)

    def _dd_own_eps(self, i, reports, z) -> np.ndarray:
        X, y = self.data
        return dd.own_cost_response(i, X, y, reports, self.dist.virtual_cost, z, **self._dd_kw())

    def _dd_payments(self, i, cands, eps_cands, reports) -> np.ndarray:
        lo, hi = self.dist.support
        nodes = np.linspace(lo, hi, self.n_nodes)
        eps_nodes = self._dd_own_eps(i, reports, nodes)
        out = []
        for r, e in zip(cands, eps_cands):
            above = nodes > r
            z, ez = np.r_[r, nodes[above]], np.r_[e, eps_nodes[above]]
            out.append(r * e + np.trapezoid(ez, z))
        return np.array(out)

    def _dd_outcome(self, reports):
        X, y = self.data if self.data is not None else (None, None)
        if X is None or len(X) != reports.size:
            raise MarketSimError("data-dependent: one data row per reporting seller is needed")
        eps = dd.solve(X, y, self.dist.virtual_cost(reports), **self._dd_kw()).eps
        pay = np.array([self._dd_payments(i, [r], [eps[i]], reports)[0]
                        for i, r in enumerate(reports)])
        return eps, pay

    def outcome(self, reports):
        reports = np.asarray(reports, dtype=float)
        if self.mechanism == "data-dependent":
            return self._dd_outcome(reports)
        if self.mechanism == "offline":
            return offline_payments(reports, self.dist, **self.params)
        if self.mechanism == "online":
            return self.online.eps(reports), self.online.payments(reports)
        if self.mechanism == "pay-as-bid":
            return pay_as_bid(reports, self.dist, **self.params)
        if self.mechanism == "private-posted-price":
            eps, pay, _ = self.private_pricing.outcome(reports, self.rng)
            return eps, pay
        if self.mechanism == "private-cutoff":
            out = self.private_cutoff.outcome(reports, self.rng)
            return out.eps, out.payments
        return posted_price(reports, price=self.price, eps_level=self.eps_level)

    def utilities(self, i: int, candidates, true_cost: float, reports) -> np.ndarray:
        cand = np.asarray(candidates, dtype=float)
        if self.mechanism == "online":  # each seller alone: the others do not matter
            return self.online.payments(cand) - true_cost * self.online.eps(cand)
        if self.mechanism == "offline":
            return np.array([seller_utility(i, r, true_cost, reports, self.dist, **self.params)
                             for r in cand])
        if self.mechanism in RANDOMIZED:  # expected over the price / cut-off draw
            mech = self.private_pricing if self.mechanism == "private-posted-price" \
                else self.private_cutoff
            return np.array([mech.expected_utility(i, r, true_cost, reports) for r in cand])
        if self.mechanism == "data-dependent":
            eps = self._dd_own_eps(i, np.asarray(reports, dtype=float), cand)
            return self._dd_payments(i, cand, eps, np.asarray(reports, dtype=float)) - true_cost * eps
        out = np.empty(cand.size)
        trial = np.array(reports, dtype=float)
        for j, r in enumerate(cand):
            trial[i] = r
            eps, pay = self.outcome(trial)
            out[j] = pay[i] - true_cost * eps[i]
        return out
