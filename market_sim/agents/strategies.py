"""Sellers' reporting strategies: the public :class:`Strategy` interface and the built-ins.

A strategy decides what a seller reports and may learn from what it earned.
Write one by subclassing :class:`Strategy` and overriding ``report``::

    class ThresholdShading(Strategy):
        def __init__(self, threshold=0.5, factor=1.2):
            self.threshold, self.factor = threshold, factor

        def report(self, agent, model):
            return agent.cost * (self.factor if agent.cost < self.threshold else 1.0)

What a strategy may read (everything else is the mechanism's or the platform's):

* ``agent``: ``seller_id``, ``cost`` (its own, private), ``report`` (its last
  report), ``eps``, ``payment``, ``utility`` (last round's), ``index`` (its
  position among this round's participants), ``participating``;
* ``model``: ``dist`` (the public cost law), ``mechanism`` (a
  :class:`~market_sim.mechanisms.Mechanism`: ``utilities``/``deviation_utilities``
  give a seller's utility at other reports), ``reports`` (the participants'
  reports at the start of this report stage, by ``index``), ``rng`` (the
  model's generator: draw only from it), ``round``, ``report_grid(costs, n)``.

Moves are simultaneous: every seller decides against the reports at the
start of the stage, so the order in which sellers are asked does not matter.

The fast path: override ``report_all(sellers, model) -> reports`` (and
``observe_all``), which acts on a whole group at once; ``sellers`` is a
:class:`SellerGroup` of arrays (``ids``, ``cost``, ``index``, ``report``,
``utility``, ...).  One instance then serves its whole group, and per-seller
state lives in arrays indexed by ``group.rows`` (positions within the
strategy's group).  A strategy that overrides only ``report``/``observe`` gets
one copy per seller, so it may keep per-seller state on ``self``.  The
built-ins implement both paths and give the same numbers on either.

Learners: a strategy that overrides ``arm_reports(sellers, model)`` (the
(len(sellers), K) reports its sellers choose among) is a learner, and the model
tracks each of its sellers' external regret against the best fixed arm.  With
``full_information = True`` it also receives every arm's utility each round in
``observe_arms``.  The built-in learners are in :mod:`market_sim.agents.learners`.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import ClassVar

import numpy as np

from ..errors import MarketSimError
from ..privacy.limit import privacy_cost
from ..registry import STRATEGIES, check_params

__all__ = [
    "Strategy",
    "SellerGroup",
    "Truthful",
    "Shade",
    "RandomMisreport",
    "BestResponse",
    "Learning",
    "Collusion",
    "as_strategy",
    "is_vectorized",
    "is_learner",
]


@dataclass(frozen=True)
class SellerGroup:
    """The participating sellers of one strategy, as arrays (same order everywhere).

    ``rows`` are positions within the strategy's group (stable across rounds:
    index per-seller state with them); ``ids`` the seller ids; ``index`` the
    positions among this round's participants (for ``mechanism.deviations``)."""

    ids: np.ndarray
    rows: np.ndarray
    index: np.ndarray
    cost: np.ndarray
    report: np.ndarray
    utility: np.ndarray

    def __len__(self) -> int:
        return int(self.ids.size)

    @classmethod
    def of_one(cls, agent, utility: float | None = None) -> SellerGroup:
        """A group of one seller (row 0), from its agent view."""
        u = agent.utility if utility is None else utility
        return cls(
            *(np.array([v]) for v in (agent.seller_id, 0, agent.index, agent.cost, agent.report, u))
        )


class Strategy:
    """Base class of every reporting strategy (see the module docstring)."""

    name: ClassVar[str] = ""
    #: what a reader of a simulation's numbers should know about this play (printed by
    #: ``market-sim simulate``; empty: nothing)
    caveat: ClassVar[str] = ""

    def report(self, agent, model) -> float:
        """This seller's report (default: the truth)."""
        return agent.cost

    def observe(self, agent, model, utility: float) -> None:
        """Called after settlement with the utility the seller realised."""

    def report_all(self, sellers: SellerGroup, model) -> np.ndarray:
        """Reports of a whole group (default: ``report`` seller by seller)."""
        return np.array([self.report(model.seller(i), model) for i in sellers.ids], dtype=float)

    def observe_all(self, sellers: SellerGroup, utilities: np.ndarray, model) -> None:
        """What a whole group realised (default: ``observe`` seller by seller, if defined)."""
        if type(self).observe is Strategy.observe:
            return
        for i, u in zip(sellers.ids, utilities, strict=True):
            self.observe(model.seller(i), model, float(u))

    def start(self, n: int, model) -> None:
        """Called once before the first round with the size of the strategy's group
        (allocate per-seller arrays here)."""

    # ---- the learner protocol (regret over time) ----------------------------------
    #: a learner that wants every arm's utility each round (full information)
    full_information: ClassVar[bool] = False

    def arm_reports(self, sellers: SellerGroup, model) -> np.ndarray | None:
        """A learner's arms: the (len(sellers), K) reports each seller chooses among
        this round (K the same every round), or None for a strategy that is not a
        learner (the default).  For a learner the model tracks each seller's
        cumulative external regret against the best fixed arm in hindsight."""
        return None

    def observe_arms(self, sellers: SellerGroup, utilities: np.ndarray, model) -> None:
        """Called after settlement, before ``observe_all``, with each seller's utility
        at every arm ((len(sellers), K), the others at this round's actual reports;
        expectations for randomized mechanisms), when ``full_information`` is set."""


def is_vectorized(strategy) -> bool:
    """True when the strategy acts on whole groups (overrides ``report_all``)."""
    return type(strategy).report_all is not Strategy.report_all


def is_learner(strategy) -> bool:
    """True when the strategy declares arms (overrides ``arm_reports``): the model then
    tracks its sellers' external regret."""
    return type(strategy).arm_reports is not Strategy.arm_reports


def _clip(model, r):
    lo, hi = model.dist.support
    return np.clip(r, lo, hi)


@dataclass
class Truthful(Strategy):
    """Report the true cost."""

    name: ClassVar[str] = "truthful"

    def report_all(self, sellers, model):
        return sellers.cost.copy()


@dataclass
class Shade(Strategy):
    """Report factor x cost (clipped to the support)."""

    name: ClassVar[str] = "shade"
    factor: float = 1.2

    def __post_init__(self):
        if not (np.isfinite(self.factor) and self.factor > 0):
            raise MarketSimError(f"shade: factor must be a finite number > 0, got {self.factor!r}")

    def report(self, agent, model):
        return float(_clip(model, agent.cost * self.factor))

    def report_all(self, sellers, model):
        return _clip(model, sellers.cost * self.factor)


@dataclass
class RandomMisreport(Strategy):
    """Report cost x exp(N(0, spread^2)), drawn from the model's generator in seller order."""

    name: ClassVar[str] = "random"
    spread: float = 0.2

    def __post_init__(self):
        if not (np.isfinite(self.spread) and self.spread >= 0):
            raise MarketSimError(
                f"random: spread must be a finite number >= 0, got {self.spread!r}"
            )

    def report(self, agent, model):
        return float(_clip(model, agent.cost * np.exp(self.spread * model.rng.standard_normal())))

    def report_all(self, sellers, model):
        z = model.rng.standard_normal(len(sellers))
        return _clip(model, sellers.cost * np.exp(self.spread * z))


@dataclass
class BestResponse(Strategy):
    """Best response: the best report on a grid against the others' reports.

    The grid is the truth, then ``n_grid`` cell midpoints of the support; the
    truth is kept unless a misreport gains more than ``tol`` (relative), so flat
    regions stay truthful."""

    name: ClassVar[str] = "best-response"
    caveat: ClassVar[str] = (
        "best-response sellers see the others' reports (complete information) and keep "
        "their costs, so they settle in round 1 and stay there (under pay-as-bid the "
        "cheapest pool on one report); that is not the Bayes-Nash "
        "equilibrium of sellers who know only the cost law: `market-sim bne` computes "
        "it and `--strategy bne:DIR/bid.csv` plays it (docs/agents.md)"
    )
    n_grid: int = 11
    tol: float = 1e-9

    def _choose(self, grid, u, cost):
        truth = u[:, 0]  # grid[:, 0] is the true cost
        j = np.argmax(u, axis=1)
        best = u[np.arange(u.shape[0]), j]
        gain = best > truth + self.tol * np.maximum(1.0, np.abs(truth))
        return np.where(gain, grid[np.arange(grid.shape[0]), j], cost)

    def report(self, agent, model):
        grid = model.report_grid(np.array([agent.cost]), self.n_grid)
        u = model.mechanism.deviation_utilities(
            [agent.index], grid, [agent.cost], model.reports, model.rng
        )
        return float(self._choose(grid, u, np.array([agent.cost]))[0])

    def report_all(self, sellers, model):
        grid = model.report_grid(sellers.cost, self.n_grid)
        u = model.mechanism.deviation_utilities(
            sellers.index, grid, sellers.cost, model.reports, model.rng
        )
        return self._choose(grid, u, sellers.cost)


@dataclass
class Learning(Strategy):
    """Learning: epsilon-greedy over report multipliers, from realised utilities only.

    Every multiplier is tried once (the truthful one first), then the seller
    plays the best average realised utility, exploring at rate ``explore``.
    One uniform draw u per exploring-capable seller decides both: explore iff
    u < explore, then arm floor(k u / explore).  Ties go to the multiplier
    nearest 1 (so a seller who is never bought stays truthful).
    """

    name: ClassVar[str] = "learning"
    multipliers: tuple = (0.8, 0.9, 1.0, 1.1, 1.25, 1.5)
    explore: float = 0.1
    totals: np.ndarray | None = field(default=None, repr=False)  # (n, k)
    counts: np.ndarray | None = field(default=None, repr=False)
    last: np.ndarray | None = field(default=None, repr=False)

    def __post_init__(self):
        if not (0 <= self.explore <= 1):
            raise MarketSimError(f"learning: explore must be in [0, 1] (got {self.explore!r})")
        if len(self.multipliers) == 0 or min(self.multipliers) <= 0:
            raise MarketSimError("learning: multipliers must be a non-empty list of numbers > 0")

    def start(self, n, model):
        k = len(self.multipliers)
        self.totals, self.counts = np.zeros((n, k)), np.zeros((n, k))
        self.last = np.zeros(n, dtype=int)

    @property
    def _order(self) -> np.ndarray:
        """Arms by distance of their multiplier from 1 (stable)."""
        return np.argsort(np.abs(np.log(np.asarray(self.multipliers, dtype=float))), kind="stable")

    def greedy(self, rows=None) -> np.ndarray:
        """The greedy arm of each seller (rows of the group; default all)."""
        totals, counts = self.totals, self.counts
        assert totals is not None and counts is not None, "learning: start(n, model) first"
        if rows is None or len(rows) == totals.shape[0]:  # rows are 0..n-1: views, no copies
            T, C = totals, counts
        else:
            T, C = totals[np.asarray(rows)], counts[np.asarray(rows)]
        means = np.divide(T, C, out=np.full(T.shape, -np.inf), where=C > 0)
        top = means.max(axis=1, keepdims=True)
        near = means >= top - 1e-12 * np.maximum(1.0, np.abs(top))
        order = self._order
        return order[np.argmax(near[:, order], axis=1)]

    def greedy_multipliers(self) -> np.ndarray:
        return np.asarray(self.multipliers, dtype=float)[self.greedy()]

    def report_all(self, sellers, model):
        rows, k = sellers.rows, len(self.multipliers)
        assert self.counts is not None, "learning: start(n, model) first"
        whole = rows.size == self.counts.shape[0]  # rows are 0..n-1
        order = self._order
        untried = (self.counts if whole else self.counts[rows]) == 0
        has_untried = untried.any(axis=1)
        arm = np.empty(rows.size, dtype=int)
        if has_untried.any():
            arm[has_untried] = order[np.argmax(untried[has_untried][:, order], axis=1)]
            rest = np.flatnonzero(~has_untried)
        else:
            rest = None  # everybody
        if rest is None or rest.size:
            u = model.rng.random(rows.size if rest is None else rest.size)
            exploring = u < self.explore
            if rest is None:
                greedy = self.greedy(None if whole else rows)
            else:
                greedy = self.greedy(rows[rest])
            explored = np.minimum((u / max(self.explore, 1e-300) * k).astype(int), k - 1)
            arm[slice(None) if rest is None else rest] = np.where(exploring, explored, greedy)
        self.last[rows] = arm
        return _clip(model, sellers.cost * np.asarray(self.multipliers, dtype=float)[arm])

    def observe_all(self, sellers, utilities, model):
        rows = sellers.rows  # unique, so fancy += adds once per seller
        assert self.totals is not None and self.counts is not None
        flat = rows * self.totals.shape[1] + self.last[rows]  # C order: row-major cells
        self.totals.reshape(-1)[flat] += utilities
        self.counts.reshape(-1)[flat] += 1

    # per-agent path (one copy per seller, so n = 1): the same rule on a group of one
    def report(self, agent, model):
        if self.totals is None:
            self.start(1, model)
        return float(self.report_all(SellerGroup.of_one(agent), model)[0])

    def observe(self, agent, model, utility):
        self.observe_all(SellerGroup.of_one(agent, utility), np.array([utility]), model)


@dataclass
class Collusion(Strategy):
    """Collusion: the first ``size`` sellers of the group shade by a common multiplier.

    The multiplier is chosen each round (against the others' last reports) to
    raise the members' total utility; the rest of the group is truthful."""

    name: ClassVar[str] = "collusion"
    size: int = 3
    multipliers: tuple = (1.0, 1.1, 1.25, 1.5, 2.0)
    tol: float = 1e-9
    multiplier: float = 1.0

    def __post_init__(self):
        if 1.0 not in self.multipliers:
            raise MarketSimError("collusion: multipliers must include 1.0 (the truth)")

    def report_all(self, sellers, model):
        members = sellers.rows < self.size
        idx, cost = sellers.index[members], sellers.cost[members]
        self.multiplier = 1.0
        if idx.size:
            totals = []
            for mult in self.multipliers:
                trial = model.reports.copy()
                trial[idx] = _clip(model, cost * mult)
                out = model.mechanism.run(trial, model.rng)
                totals.append(float(np.sum(out.payments[idx] - privacy_cost(cost, out.eps[idx]))))
            j = int(np.argmax(totals))
            base = totals[self.multipliers.index(1.0)]
            if totals[j] > base + self.tol * max(1.0, abs(base)):
                self.multiplier = self.multipliers[j]
        out = sellers.cost.copy()
        out[members] = _clip(model, cost * self.multiplier)
        return out

    def report(self, agent, model):
        raise MarketSimError("collusion decides for its whole group; it has no per-seller path")


def as_strategy(obj) -> Strategy:
    """A Strategy from a registered name or spec ``name[:key=value]...`` (``bne:bid.csv``:
    a value alone for a class's ``spec_argument``), a Strategy class (built with its
    defaults) or instance, an object with ``bid_tables()`` (a ``BNEResult``: ``bne``), or any
    object with ``report``."""
    if isinstance(obj, str):
        name, params = STRATEGIES.parse(obj)
        found = STRATEGIES.load(name)
        if not isinstance(found, type):
            if params:
                raise MarketSimError(f"strategy {name!r} is an instance; it takes no parameters")
            return as_strategy(copy.deepcopy(found))
        check_params(found, params, f"strategy {name!r}")
        return as_strategy(_build(found, params, name))
    if isinstance(obj, type):
        if callable(getattr(obj, "report", None)) or callable(getattr(obj, "report_all", None)):
            return as_strategy(_build(obj, {}, obj.__name__))
        raise MarketSimError(f"{obj.__name__} is not a Strategy: it has no report method")
    if isinstance(obj, Strategy):
        return obj
    if callable(getattr(obj, "bid_tables", None)):  # a BNEResult: play its bid functions
        return as_strategy(STRATEGIES.load("bne").of_tables(obj.bid_tables()))
    if callable(getattr(obj, "report", None)):
        return _AdaptedStrategy(obj)
    raise MarketSimError(f"{type(obj).__name__} is not a Strategy: it has no report method")


def _build(cls, params, name):
    try:
        return cls(**params)
    except MarketSimError:
        raise
    except (TypeError, ValueError) as exc:
        raise MarketSimError(f"strategy {name!r}: {exc}") from None


class _AdaptedStrategy(Strategy):
    """A duck-typed object with ``report(agent, model)`` (and maybe ``observe``)."""

    def __init__(self, obj):
        self.obj = obj
        self.name = getattr(obj, "name", "") or type(obj).__name__

    def report(self, agent, model):
        return self.obj.report(agent, model)

    def observe(self, agent, model, utility):
        if callable(getattr(self.obj, "observe", None)):
            self.obj.observe(agent, model, utility)

    def __deepcopy__(self, memo):
        return _AdaptedStrategy(copy.deepcopy(self.obj, memo))
