"""Reporting strategies of sellers: small frozen rules plus the state some of them learn."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ..errors import MarketSimError

STRATEGIES = ("truthful", "shade", "random", "best-response", "learning", "collusion")


def _clip(model, r):
    lo, hi = model.dist.support
    return float(np.clip(r, lo, hi))


@dataclass
class Truthful:
    def report(self, agent, model) -> float:
        return agent.cost

    def observe(self, agent, model, utility):
        pass


@dataclass
class Shade(Truthful):
    """Report factor x cost (clipped to the support)."""

    factor: float = 1.2

    def report(self, agent, model):
        return _clip(model, agent.cost * self.factor)


@dataclass
class RandomMisreport(Truthful):
    """Report cost x exp(N(0, spread^2)), drawn with the model's generator."""

    spread: float = 0.2

    def report(self, agent, model):
        return _clip(model, agent.cost * np.exp(self.spread * model.rng.standard_normal()))


@dataclass
class BestResponse(Truthful):
    """Best report on a grid given the others' current reports; keeps the truth
    unless a misreport gains more than ``tol`` (so flat regions stay truthful)."""

    n_grid: int = 11
    tol: float = 1e-9

    def report(self, agent, model):
        grid = model.report_grid(agent.cost, self.n_grid)
        u = model.market.utilities(agent.index, grid, agent.cost, model.current_reports())
        truth = u[0]  # grid[0] is the true cost
        j = int(np.argmax(u))
        return float(grid[j]) if u[j] > truth + self.tol * max(1.0, abs(truth)) else agent.cost


@dataclass
class Learning(Truthful):
    """EXP3 over report multipliers, from realised utilities only."""

    multipliers: tuple = (0.8, 0.9, 1.0, 1.1, 1.25, 1.5)
    rate: float = 0.3
    weights: np.ndarray = field(default=None)
    last: int = 2

    def report(self, agent, model):
        k = len(self.multipliers)
        if self.weights is None:
            self.weights = np.ones(k)
        p = (1 - self.rate) * self.weights / self.weights.sum() + self.rate / k
        self.last = int(model.rng.choice(k, p=p))
        self._p = p[self.last]
        return _clip(model, agent.cost * self.multipliers[self.last])

    def observe(self, agent, model, utility):
        scale = model.utility_scale
        gain = utility / scale if scale > 0 else 0.0
        self.weights[self.last] *= np.exp(self.rate * gain / (len(self.multipliers) * self._p))
        self.weights /= self.weights.max()


@dataclass
class CollusionGroup:
    """Sellers who report cost x a common multiplier chosen to raise their total utility."""

    members: list
    multipliers: tuple = (1.0, 1.1, 1.25, 1.5, 2.0)
    tol: float = 1e-9
    multiplier: float = 1.0

    def decide(self, model):
        reports = model.current_reports()
        totals = []
        for mult in self.multipliers:
            trial = reports.copy()
            for a in self.members:
                trial[a.index] = _clip(model, a.cost * mult)
            eps, pay = model.market.outcome(trial)
            totals.append(sum(pay[a.index] - a.cost * eps[a.index] for a in self.members))
        j = int(np.argmax(totals))
        base = totals[self.multipliers.index(1.0)]
        self.multiplier = self.multipliers[j] if totals[j] > base + self.tol * max(1, abs(base)) else 1.0


@dataclass
class Colluder(Truthful):
    group: CollusionGroup = None

    def report(self, agent, model):
        return _clip(model, agent.cost * self.group.multiplier)


def make_strategy(name: str, **kw):
    table = {"truthful": Truthful, "shade": Shade, "random": RandomMisreport,
             "best-response": BestResponse, "learning": Learning}
    if name not in STRATEGIES:
        raise MarketSimError(f"strategy: unknown {name!r}; use one of {', '.join(STRATEGIES)}")
    if name == "collusion":
        raise MarketSimError("strategy: collusion is set up by MarketModel (it needs a group)")
    return table[name](**kw)
