"""Singer's budget-feasible proportional-share mechanism (``proportional-share``).

Y. Singer, *Budget Feasible Mechanisms*, FOCS 2010 (arXiv:1002.2334), the mechanism
for additive utilities (knapsack; the section number could not be checked here: only
the paper's opening was reachable): the buyer values item i at v_i, has budget B,
and sellers have private costs.  Sorted by cost per value, c_1/v_1 <= c_2/v_2 <= ..., the
mechanism takes the largest k with

    c_k <= B v_k / V_k,        V_k = sum_{j <= k} v_j,

buys items 1..k and pays each winner its threshold (the largest cost it could
report and still be bought, the others fixed).  Singer's knapsack mechanism also
compares this set with the single most valuable item (for its approximation
ratio); that branch is left out here, as in the issue's specification, and is void
with equal values.

Mapping to our market: an item is one seller's data at a common privacy level e,
so seller i's cost of the item is c_i e and the rule runs on the per-unit reports
with budget B / e; payments are per unit x e.  ``values`` are the v_i (equal by
default: every seller's data is worth the same to the buyer, as in the i.i.d.
market).  Defaults: e = e* and B = the prior-optimal posted price's expected
spend (``optimal_posted_price.default_plan``).

The threshold.  Let rho'_1 <= rho'_2 <= ... be the others' ratios r_j / v_j
(rho'_0 = 0) and V'_j the value of the j lowest of them.  Reporting ratio z / v_i
puts seller i after the j others below it, and it is bought iff that position is
affordable, z / v_i <= B' / (V'_j + v_i) (B' = B / e; the affordable positions form
a prefix, since rho' rises and B' / (V'_j + v_i) falls with j).  So it is bought
iff z <= T_i with

    T_i = v_i min(rho'_{j*+1}, B' / (V'_{j*} + v_i)),
    j* = max {j : rho'_j <= B' / (V'_j + v_i)},

and a winner's j* = k - 1, giving t_i = e v_i min(rho_(k+1), B' / V_k) <= B v_i / V_k,
so sum_i t_i <= B (budget feasibility, Singer's Lemma).  With equal values this is
the largest k with r_(k) <= B' / k, each winner paid e min(B' / k, r_(k+1)).  T_i is
also capped at the reserve (the support's top; higher asks are refused).

Ties: the ratios are sorted by (ratio, index).  When rho'_{j*+1} v_i attains T_i
(also when it equals the budget bound), a report of exactly T_i wins iff i is below
the index of that seller: behind it, i stands at position j* + 2, where the budget
bound is smaller than T_i.  Were a tie of the two bounds always won, five reports
equal to B' would all be bought and paid B' each (five times the budget).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from ..distributions import CostDistribution, as_distribution
from ..errors import MarketSimError
from .uniform_price import ThresholdPurchase, _check_positive, bounded_threshold

__all__ = ["ProportionalShare"]


@dataclass(frozen=True)
class ProportionalShare(ThresholdPurchase):
    """Singer's budget-feasible proportional share (FOCS 2010, additive) with exact thresholds.

    Sorted by report per value, the largest k with r_(k) <= (B/e) v_(k) / V_k sell
    ``eps_level`` each, paid their thresholds (module doc); the total never exceeds
    ``budget``.

    ``values`` (one per seller, > 0) default to equal; ``eps_level`` and ``budget``
    to the prior-optimal posted price's e* and expected spend."""

    name: ClassVar[str] = "proportional-share"
    dist: CostDistribution
    n_sellers: int = 100
    mu: float = 1.0
    sigma: float = 1.0
    gamma: float = 1.0
    budget: float | None = None
    eps_level: float | None = None
    values: tuple | None = None

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
        if self.values is not None:
            v = np.atleast_1d(np.asarray(self.values, dtype=float))
            if v.ndim != 1 or not np.all(np.isfinite(v) & (v > 0)):
                raise MarketSimError("values must be numbers > 0, one per seller")
            object.__setattr__(self, "values", tuple(float(x) for x in v))

    def _values(self, m: int) -> np.ndarray:
        if self.values is None:
            return np.ones(m)
        if len(self.values) != m:
            raise MarketSimError(f"proportional-share: {len(self.values)} values for {m} reports")
        return np.asarray(self.values, dtype=float)

    def thresholds(self, reports):
        m = reports.size
        v = self._values(m)
        Bp = float(self.budget or 0.0) / float(self.eps_level or 1.0)  # B' = B / e
        hi = self.reserve
        ratio = reports / v
        pool = reports <= hi
        # stable sort by ratio, refused asks last (ties by index)
        order = np.lexsort((np.arange(m), ratio, ~pool))
        n = int(pool.sum())
        rank = np.empty(m, dtype=int)
        rank[order] = np.arange(m)
        s = np.full(m + 2, np.inf)
        who = np.full(m + 2, m, dtype=int)
        s[:n], who[:n] = ratio[order[:n]], order[:n]
        Vc = np.zeros(m + 2)
        Vc[1 : n + 1] = np.cumsum(v[order[:n]])
        q = np.where(rank < n, rank, n)  # position among the pool (refused: after it)
        n_o = np.where(rank < n, n - 1, n)  # others in the pool

        def others(j):  # rho'_j and V'_j (1-based j >= 1) for every seller
            below = j <= q
            rho = np.where(below, s[np.maximum(j - 1, 0)], s[np.minimum(j, m + 1)])
            V = np.where(below, Vc[j], Vc[np.minimum(j + 1, m + 1)] - v)
            return rho, V

        def affordable(j):
            rho, V = others(j)
            return (j == 0) | (rho <= Bp / (V + v))

        lo = np.zeros(m, dtype=int)  # j = 0 is always affordable
        up = n_o + 1  # past the last other: never affordable
        while np.any(up - lo > 1):
            mid = (lo + up) // 2
            ok = affordable(mid)
            lo = np.where(ok, mid, lo)
            up = np.where(ok, up, mid)
        _, V_star = others(lo)
        V_star = np.where(lo == 0, 0.0, V_star)
        nxt = lo + 1
        rho_next = np.where(nxt <= n_o, others(nxt)[0], np.inf)
        who_next = np.where(nxt <= q, who[np.maximum(nxt - 1, 0)], who[np.minimum(nxt, m + 1)])
        by_next = v * rho_next
        by_budget = v * Bp / (V_star + v)
        T, J = bounded_threshold(by_next, who_next, by_budget, hi, m)
        bought = self._buy(reports, np.arange(m), T, J)
        level = np.full(m, float(self.eps_level or 0.0))
        return T, J, level, {"k": int(bought.sum()), "budget": float(self.budget or 0.0)}
