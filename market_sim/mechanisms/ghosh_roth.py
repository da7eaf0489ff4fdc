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
known of it, and say where they are a choice; for the same reason the sections are
named by their setting, not by number:

**MinCostAuction (the fixed-accuracy setting).**  The estimate sum_{i bought} b_i +
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

**FairQuery (the fixed-budget setting).**  With m - k bits unbought the estimate is
off by up to (m - k)/2 anyway, so the paper matches the noise to it: k sellers are
bought at e_k = 1/(m - k), and FairQuery buys as many as a budget-feasible rule
allows.  Sorted reports r_(1) <= r_(2) <= ...,

    k* = max {k <= m - 1 : r_(k) e_k <= B / k},    e_k = s / (m - k),
    t_i = min(B / k*, r_(k*+1) e_k*) for the k* lowest,

(s = ``eps_scale``, 1 in the paper).  k e_k r_(k) rises with k, so the affordable k
form a prefix.  Seller i wins iff it is affordable at its own position p, i.e.
z <= B / (p e_p); so while it wins k* does not move (the positions above k* keep
their reports), its level e_k* is fixed, and its threshold per unit is
min(r_(k*+1), B / (k* e_k*)): the payment above is Myerson's for this step, the
mechanism is truthful and individually rational, and sum t <= k* B / k* = B.
Ties are sorted by index: a report of exactly r_(k*+1) wins iff it is from a lower
index than that seller's, also when r_(k*+1) equals B / (k* e_k*) (behind it, the
seller would be at position k* + 1, which is not affordable).
With a level e that does not depend on k the rule is ``proportional-share`` with
equal values.  Defaults: s = 1 and B = the prior-optimal posted price's expected
spend m F(p*) p* e* (``optimal_posted_price.default_plan``), the same budget as
``proportional-share``'s.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from ..distributions import CostDistribution, as_distribution
from ..errors import MarketSimError
from .uniform_price import (
    ThresholdPurchase,
    _check_positive,
    _kth_of_others,
    bounded_threshold,
    sorted_pool,
)

__all__ = ["MinCostAuction", "FairQuery", "min_cost_plan"]

_LN3 = math.log(3.0)


def min_cost_plan(alpha: float, m: int) -> tuple[int, float]:
    """Ghosh-Roth's purchase for an alpha m-accurate sum (module doc): (k, e) with
    k = ceil((1 - alpha) m) (at least 1) and e = 2 ln 3 / (alpha m)."""
    k = max(1, math.ceil((1.0 - alpha) * m - 1e-9))
    return min(k, m), 2.0 * _LN3 / (alpha * m)


@dataclass(frozen=True)
class MinCostAuction(ThresholdPurchase):
    """Ghosh-Roth MinCostAuction (EC 2011, fixed accuracy): a Vickrey auction for accuracy alpha m.

    The k = ceil((1 - alpha) m) lowest reports sell e = 2 ln 3 / (alpha m), each paid
    r_(k+1) e.

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
            raise MarketSimError(
                f"alpha (the accuracy target, a share of m) must be in (0, 1), got {a!r}"
            )

    def plan_for(self, m: int) -> tuple[int, float]:
        """(k, e) for a market of m reports."""
        assert self.alpha is not None  # set in __post_init__
        return min_cost_plan(float(self.alpha), m)

    def thresholds(self, reports):
        k, e = self.plan_for(reports.size)
        s, who, _, rank = sorted_pool(reports, self.reserve)
        T, J = _kth_of_others(s, who, rank, k)
        return T, J, np.full(reports.size, e), {"price": float(s[k]), "k": k, "eps_level": e}


@dataclass(frozen=True)
class FairQuery(ThresholdPurchase):
    """Ghosh-Roth FairQuery (EC 2011, fixed budget): the most sellers a budget buys at eps 1/(m-k).

    The k* = max{k <= m-1 : r_(k) e_k <= B/k} lowest reports sell e_k* (e_k =
    eps_scale / (m - k)), each paid min(B/k*, r_(k*+1) e_k*); the total never exceeds
    ``budget``.

    ``budget`` defaults to the prior-optimal posted price's expected spend (module doc)."""

    name: ClassVar[str] = "fair-query"
    dist: CostDistribution
    n_sellers: int = 100
    mu: float = 1.0
    sigma: float = 1.0
    gamma: float = 1.0
    budget: float | None = None
    eps_scale: float = 1.0

    def __post_init__(self):
        from .optimal_posted_price import default_plan

        object.__setattr__(self, "dist", as_distribution(self.dist))
        if self.budget is None:
            _, _, b, _ = default_plan(self.dist, self.n_sellers, self.mu, self.sigma, self.gamma)
            object.__setattr__(self, "budget", b)
        object.__setattr__(self, "budget", _check_positive("budget", self.budget))
        object.__setattr__(self, "eps_scale", _check_positive("eps_scale", self.eps_scale))

    def thresholds(self, reports):
        """Seller i's k is K_i = max{k : k e_k w_(k-1) <= B} over the others' sorted
        reports w (w_(0) = 0): the largest position at which it is affordable.  Its
        threshold is min(w_(K_i), B / (K_i e_K_i), reserve), its level e_K_i; K_i is
        the outcome's k* whenever seller i is bought."""
        m, B, sc = reports.size, float(self.budget or 0.0), float(self.eps_scale)
        s, who, n, rank = sorted_pool(reports, self.reserve)
        r1 = np.where(rank < n, rank + 1, n + 1)  # 1-based position; refused asks after the pool
        kmax = np.minimum(np.where(rank < n, n, n + 1), m - 1)  # sellers that can be bought
        k = np.arange(1, m + 1)
        e = sc / np.maximum(m - k, 1)
        s0 = np.r_[0.0, s]  # s0[k] = r_(k), s0[0] = 0
        c_ok = (k * e * s0[1 : m + 1] <= B) & (k <= m - 1)  # affordable at k: the profile
        a_ok = (k * e * s0[0:m] <= B) & (k <= m - 1)  # ... with one more seller below
        c_max = np.max(np.flatnonzero(c_ok[:n]) + 1, initial=0)  # the outcome's k*
        a_max = np.max(np.flatnonzero(a_ok) + 1, initial=0)
        K = np.where(c_max >= r1 + 1, c_max, np.minimum(a_max, r1))
        K = np.minimum(K, kmax)
        live = K >= 1
        Ks = np.maximum(K, 1)
        idx = np.where(Ks <= r1 - 1, Ks - 1, Ks)  # the K-th other, 0-based in s
        by_next = s[idx]
        e_K = sc / np.maximum(m - Ks, 1)
        by_budget = B / (Ks * e_K)
        T, J = bounded_threshold(by_next, who[idx], by_budget, self.reserve, m)
        T = np.where(live, T, -np.inf)
        J = np.where(live, J, -1)
        kstar = int(c_max)
        info = {"k": kstar, "eps_level": sc / (m - kstar) if kstar else 0.0, "budget": B}
        return T, J, np.where(live, e_K, 0.0), info
