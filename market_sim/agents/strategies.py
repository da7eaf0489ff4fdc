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
    """epsilon-greedy over report multipliers, from realised utilities only.

    Every multiplier is tried once (the truthful one first), then the seller
    plays the best average realised utility, exploring at rate ``explore``.
    Ties go to the multiplier nearest 1 (so a seller who is never bought
    stays truthful, as with the best response).
    """

    multipliers: tuple = (0.8, 0.9, 1.0, 1.1, 1.25, 1.5)
    explore: float = 0.1
    totals: np.ndarray = field(default=None, repr=False)
    counts: np.ndarray = field(default=None, repr=False)
    last: int = 0

    def greedy(self) -> int:
        means = np.where(self.counts > 0, self.totals / np.maximum(self.counts, 1), -np.inf)
        best = np.flatnonzero(means >= means.max() - 1e-12 * max(1.0, abs(means.max())))
        return int(min(best, key=lambda j: abs(np.log(self.multipliers[j]))))

    def report(self, agent, model):
        k = len(self.multipliers)
        if self.totals is None:
            self.totals, self.counts = np.zeros(k), np.zeros(k)
        untried = np.flatnonzero(self.counts == 0)
        if untried.size:
            order = sorted(untried, key=lambda j: abs(np.log(self.multipliers[j])))
            self.last = int(order[0])
        elif model.rng.random() < self.explore:
            self.last = int(model.rng.integers(k))
        else:
            self.last = self.greedy()
        return _clip(model, agent.cost * self.multipliers[self.last])

    def observe(self, agent, model, utility):
        self.totals[self.last] += utility
        self.counts[self.last] += 1


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
