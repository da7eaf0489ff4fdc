"""Ghosh and Roth, *Selling Privacy at Auction* (EC 2011; arXiv:1011.1375): ``min-cost``
and ``fair-query``.

Their setting: m individuals, each with a private bit and a cost v_i per unit of
differential privacy; an analyst estimates the sum of the bits, and individual i
loses v_i eps_i when its bit is used at privacy level eps_i.  Ours is the same with
v_i = c_i (seller i loses c_i eps_i), so privacy levels and payments carry over
unchanged.  What differs is the analyst's objective: theirs is an accuracy target
or a budget; ours is Eq. 11 (003), mu ||eps||_2 / sum eps + sigma / sum eps + gamma
sum t.  Both mechanisms buy some k sellers at one common level e, for which Eq. 11
is mu / sqrt(k) + sigma / (k e) + gamma sum t: the paper's accuracy target fixes
(k, e) and so the first two terms, and its budget caps the third.

The paper's text was not reachable from this project (only its abstract), so the
definitions below are reconstructed from the paper's description and what is
known of it, and say where they are a choice:

**MinCostAuction (Sec. 4, fixed accuracy).**  The estimate sum_{i bought} b_i +
(m - k)/2 + Lap(1/e) is alpha m-accurate with probability 2/3 when the unbought
bits contribute at most alpha m / 2 and the noise exceeds alpha m / 2 with
probability at most 1/3 (P(|Lap(1/e)| >= t) = exp(-e t)):

    k = ceil((1 - alpha) m),    e = 2 ln 3 / (alpha m).

It buys the k lowest reports at level e and pays each the (k+1)-th lowest report
per unit (the Vickrey auction for k units, which the paper proves minimises the
payment among truthful mechanisms meeting the target, up to the envy-free
benchmark): t_i = r_(k+1) e.  Default alpha = 1 - k*/m with k* the prior-optimal
posted price's expected purchase (see ``optimal_posted_price.default_plan``); the
paper's constants (2/3 confidence, the even split of the error) are kept, so e is
the paper's, not Eq. 11's optimum.

**FairQuery (Sec. 5, fixed budget).**  With budget B and a common level e, buy the
largest number k of lowest reports that can all be paid the common threshold price
within the budget:

    k* = max {k : k e r_(k+1) <= B},   t_i = r_(k*+1) e for the k* lowest.

k e r_(k+1) rises with k, so the feasible k form a prefix and a winner's report
below r_(k*+1) changes nothing; its threshold is r_(k*+1), the mechanism is
truthful, and the total payment k* e r_(k*+1) <= B.  In the paper the privacy
level of the fixed-budget mechanism is tied to k (the noise is matched to the
error of the m - k unbought bits); here e is a parameter, because with e moving
with k a winner's eps would depend on its own report and paying it "threshold x
eps" would no longer be the truthful (Myerson) payment.  Defaults: e = e* and
B = the prior-optimal posted price's expected spend m F(p*) p* e*.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from ..distributions import CostDistribution, as_distribution
from ..errors import MarketSimError
from .uniform_price import ThresholdPurchase, _check_positive, _kth_of_others, sorted_pool

__all__ = ["MinCostAuction", "FairQuery", "min_cost_plan"]

_LN3 = math.log(3.0)


def min_cost_plan(alpha: float, m: int) -> tuple[int, float]:
    """Ghosh-Roth's purchase for an alpha m-accurate sum (module doc): (k, e) with
    k = ceil((1 - alpha) m) (at least 1) and e = 2 ln 3 / (alpha m)."""
    k = max(1, math.ceil((1.0 - alpha) * m - 1e-9))
    return min(k, m), 2.0 * _LN3 / (alpha * m)


@dataclass(frozen=True)
class MinCostAuction(ThresholdPurchase):
    """Ghosh-Roth MinCostAuction (Sec. 4): for accuracy alpha m, the k = ceil((1-alpha) m)
    lowest reports sell e = 2 ln 3 / (alpha m), each paid r_(k+1) e.

    ``alpha`` defaults to 1 - k*/n_sellers with k* the prior-optimal posted price's
    expected purchase; k and e follow the market's actual size m."""

    name: ClassVar[str] = "min-cost"
    dist: CostDistribution
    n_sellers: int = 100
    mu: float = 1.0
    sigma: float = 1.0
    gamma: float = 1.0
    alpha: float | None = None

    def __post_init__(self):
        from .optimal_posted_price import default_plan

        object.__setattr__(self, "dist", as_distribution(self.dist))
        if self.alpha is None:
            k, _, _, _ = default_plan(self.dist, self.n_sellers, self.mu, self.sigma, self.gamma)
            object.__setattr__(self, "alpha", 1.0 - k / int(self.n_sellers))
        a = self.alpha
        if isinstance(a, bool) or not isinstance(a, (int, float)) or not 0 < a < 1:
            raise MarketSimError(f"alpha (the accuracy target, a share of m) must be in (0, 1), got {a!r}")

    def plan_for(self, m: int) -> tuple[int, float]:
        """(k, e) for a market of m reports."""
        assert self.alpha is not None  # set in __post_init__
        return min_cost_plan(float(self.alpha), m)

    def eps_level_for(self, m: int) -> float:
        return self.plan_for(m)[1]

    def thresholds(self, reports):
        k, e = self.plan_for(reports.size)
        s, who, _, rank = sorted_pool(reports, self.reserve)
        T, J = _kth_of_others(s, who, rank, k)
        return T, J, {"price": float(s[k]), "k": k}


@dataclass(frozen=True)
class FairQuery(ThresholdPurchase):
    """Ghosh-Roth FairQuery (Sec. 5) at a fixed level e: the k* = max{k : k e r_(k+1) <= B}
    lowest reports sell e, each paid r_(k*+1) e; the total never exceeds ``budget``.

    ``eps_level`` and ``budget`` default to the prior-optimal posted price's e* and
    expected spend (module doc)."""

    name: ClassVar[str] = "fair-query"
    dist: CostDistribution
    n_sellers: int = 100
    mu: float = 1.0
    sigma: float = 1.0
    gamma: float = 1.0
    budget: float | None = None
    eps_level: float | None = None

    def __post_init__(self):
        from .optimal_posted_price import default_plan

        object.__setattr__(self, "dist", as_distribution(self.dist))
        if self.budget is None or self.eps_level is None:
            _, e, b, _ = default_plan(self.dist, self.n_sellers, self.mu, self.sigma, self.gamma)
            if self.budget is None:
                object.__setattr__(self, "budget", b)
            if self.eps_level is None:
                object.__setattr__(self, "eps_level", e)
        object.__setattr__(self, "budget", _check_positive("budget", self.budget))
        object.__setattr__(self, "eps_level", _check_positive("eps_level", self.eps_level))

    def eps_level_for(self, m: int) -> float:
        assert self.eps_level is not None  # set in __post_init__
        return self.eps_level

    def thresholds(self, reports):
        """Seller i's threshold is w_(k0), the k0-th lowest other report, with k0 =
        max{k : k e w_(k) <= B} over the others' sorted reports w (and the reserve):
        below it seller i is among the k0 lowest and k* = k0; above it no k that
        includes i is affordable."""
        e, B = float(self.eps_level or 0.0), float(self.budget or 0.0)
        s, who, n, rank = sorted_pool(reports, self.reserve)
        k = np.arange(1, n + 2)
        a = int(np.max(np.flatnonzero(k * e * s[: n + 1] <= B) + 1, initial=0))  # k e s_k <= B
        b = int(np.max(np.flatnonzero(k[:n] * e * s[1 : n + 1] <= B) + 1, initial=0))  # k e s_(k+1)
        r1 = np.where(rank < n, rank + 1, n + 2)  # 1-based position; refused asks sit past the pool
        k0 = np.minimum(a, r1 - 1)
        win_side = r1 <= b
        idx = np.where(win_side, b, np.maximum(k0 - 1, 0))
        T = np.where(win_side | (k0 > 0), s[idx], -np.inf)
        J = np.where(win_side | (k0 > 0), who[idx], -1)
        return T, J, {"price": float(s[b]), "k": b, "budget": B}
