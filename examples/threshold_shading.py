"""A reporting strategy: sellers whose cost is below a threshold shade their report up.

A cheap seller is likely to be bought anyway, so it asks for more:
report = min(cost * factor, top of the support) when cost < threshold, the truth
otherwise.  Against a truthful mechanism this only loses utility; against
pay-as-bid it gains.

    from market_sim.agents import MarketModel
    model = MarketModel(20, dist="uniform:1:5", mechanism="pay-as-bid",
                        strategy=ThresholdShading(quantile=0.3, factor=1.2), seed=0)
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from market_sim.agents.strategies import Strategy


@dataclass
class ThresholdShading(Strategy):
    """Shade the report by ``factor`` when the cost is below the ``quantile`` of the
    cost law (a public threshold: it needs the prior, not the others' costs)."""

    quantile: float = 0.3
    factor: float = 1.2

    def _threshold(self, model) -> float:
        return float(model.dist.ppf(self.quantile))

    def report(self, agent, model) -> float:
        lo, hi = model.dist.support
        if agent.cost < self._threshold(model):
            return float(np.clip(agent.cost * self.factor, lo, hi))
        return float(agent.cost)

    def report_all(self, sellers, model) -> np.ndarray:
        """Vectorised over a group (``sellers.cost`` is an array; same rule as ``report``)."""
        cost = np.asarray(sellers.cost, dtype=float)
        lo, hi = model.dist.support
        shaded = np.clip(cost * self.factor, lo, hi)
        return np.where(cost < self._threshold(model), shaded, cost)
