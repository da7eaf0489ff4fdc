"""Single-unit first-price procurement: the lowest report sells ``eps_level`` and is
paid its own report per unit (ties share the unit equally).

Not truthful: a seller shades its report up towards the next-lowest report.  With
m sellers and i.i.d. U[0, 1] costs the symmetric Bayes-Nash equilibrium is

    b(c) = c + (1 - c) / m

(a seller of cost c bidding b(x) wins iff the m - 1 others have costs above x,
with probability (1 - x)^(m-1); the first-order condition at x = c is
d/dc [b(c) (1 - c)^(m-1)] = c d/dc [(1 - c)^(m-1)], whose solution with
b(1) = 1 is b(c) = c + int_c^1 (1 - t)^(m-1) dt / (1 - c)^(m-1); docs/equilibrium.md).

``outcome`` alone would do (the base class re-runs it per candidate report);
``deviations`` is the same rule vectorised over sellers and candidates, which the
BNE solver and the audit call thousands of times::

    market-sim bne --mechanism examples/first_price.py:FirstPriceProcurement \\
        --dist uniform:0:1 --sellers 3 --seed 0 --out bne_first_price
"""

from __future__ import annotations

import numpy as np

from market_sim.mechanisms.base import Mechanism, Outcome


class FirstPriceProcurement(Mechanism):
    """Buy ``eps_level`` from the lowest report at that report (pay-as-bid, one unit)."""

    name = "first-price"

    def __init__(self, eps_level: float = 1.0):
        self.eps_level = float(eps_level)

    def outcome(self, reports, rng=None) -> Outcome:
        reports = np.asarray(reports, dtype=float)
        won = reports == reports.min()
        eps = self.eps_level * won / won.sum()  # ties share the unit
        return Outcome(eps, reports * eps)

    def deviations(self, sellers, candidates, reports, rng=None) -> Outcome:
        """Seller ``sellers[k]`` alone reporting ``candidates[k, j]``: (k, n) arrays."""
        reports = np.asarray(reports, dtype=float).reshape(-1)
        sellers = np.asarray(sellers, dtype=int).reshape(-1)
        z = np.asarray(candidates, dtype=float).reshape(sellers.size, -1)
        # the lowest report of the others: the lowest, or the second lowest for its holder
        order = np.argsort(reports, kind="stable")
        low = reports[order[0]]
        second = reports[order[1]] if reports.size > 1 else np.inf
        others_min = np.where(sellers == order[0], second, low)[:, None]
        # others at that lowest report (seller i itself excluded): they share a tie
        ties = (reports[None, :] == others_min).sum(axis=1) - (reports[sellers] == others_min[:, 0])
        eps = self.eps_level * ((z < others_min) + (z == others_min) / (1.0 + ties[:, None]))
        return Outcome(eps, z * eps)
