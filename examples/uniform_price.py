"""A uniform-price mechanism: buy the K cheapest sellers, pay each the (K+1)-th lowest
report per unit of eps.

It is truthful: a bought seller's price does not depend on its own report, and a
seller changes whether it is bought only by crossing the (K+1)-th report, which
it gains nothing from (the multi-unit Vickrey argument).  The same payments are
Myerson's (Eq. 8, 003, read as a Stieltjes integral: with a classical derivative
it would pay nothing) for the step allocation eps_i = eps_level * [r_i below the
K-th lowest other report].

    market-sim audit --mechanism examples/uniform_price.py:UniformPrice:n_buy=3 \\
        --dist uniform:1:5 --sellers 10 --markets 10 --out audit_uniform
"""

from __future__ import annotations

import numpy as np

from market_sim.mechanisms.base import Mechanism, Outcome


class UniformPrice(Mechanism):
    """Buy the ``n_buy`` cheapest reports at ``eps_level`` each, at the (n_buy+1)-th
    lowest report per unit (the top of the cost support when nobody is left out)."""

    name = "uniform-price"

    def __init__(self, n_buy: int = 5, eps_level: float = 1.0, dist=None):
        self.n_buy, self.eps_level = int(n_buy), float(eps_level)
        self.top = float(dist.support[1]) if dist is not None else np.inf

    def outcome(self, reports, rng=None) -> Outcome:
        reports = np.asarray(reports, dtype=float)
        order = np.argsort(reports, kind="stable")
        eps = np.zeros(reports.size)
        eps[order[: self.n_buy]] = self.eps_level
        price = reports[order[self.n_buy]] if reports.size > self.n_buy else self.top
        return Outcome(eps, price * eps, {"price": price})
