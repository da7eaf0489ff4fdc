"""The Mesa market with sellers of several fields: cost, privacy cap and data size.

:class:`FieldMarketModel` is :class:`~market_sim.agents.model.MarketModel`'s round for
records (``market_sim.multifield``): each seller keeps its true type (drawn once from a
:class:`~market_sim.multifield.MultiFieldPopulation`), and every round runs the same
stages, **arrival -> report -> allocate -> settle -> train**:

* *arrival*: each seller arrives with probability ``xi``;
* *report*: each arrived seller's :class:`FieldStrategy` returns a record of reports, one
  value per field; a strategy may misreport any private field (a verified field is
  always reported true: the platform sees it);
* *allocate*: the multi-field mechanism prices the arrived sellers' reports;
* *settle*: payments are made; a seller's utility is t - c eps, or -inf when eps exceeds
  its true cap (it never consented to that loss: an IR violation of unbounded size,
  counted in ``cap_exceeded``, docs/multifield.md);
* *train*: a strategy with a ``learn(utilities)`` method sees its sellers' utilities
  (none of the built-in ones learns).

Strategies (``FIELD_STRATEGIES`` in ``market_sim.registry``): ``truthful``,
``shade-cost:factor=F`` (cost x F), ``shade-cap:factor=F`` (cap x F) and, in
``market_sim.joint_audit``, ``best-response`` (the joint audit's search against the
others' reports of the round before).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import mesa
import numpy as np
import pandas as pd

from ..errors import MarketSimError
from ..mechanisms.base import mechanism_name
from ..mechanisms.multifield import as_multifield_mechanism, utilities
from ..multifield import MultiFieldPopulation, as_multifield

__all__ = [
    "FieldMarketModel",
    "FieldRound",
    "FieldStrategy",
    "ShadeCap",
    "ShadeCost",
    "TruthfulFields",
    "as_field_strategy",
]

TOL = 1e-9


@dataclass(frozen=True)
class FieldRound:
    """What a strategy sees in the report stage: the arrived sellers' true records, their
    reports of the round before (the truth in the first round and for a seller who was
    away), which of them it plays (``mine``, a boolean mask), the mechanism and the
    population."""

    types: np.ndarray
    last_reports: np.ndarray
    mine: np.ndarray
    mechanism: object
    population: MultiFieldPopulation


class FieldStrategy:
    """A seller's strategy over records: :meth:`report` returns one record per seller of
    ``round.mine`` (the private fields may be misreported; the model restores verified
    fields to the truth)."""

    name: ClassVar[str] = "field-strategy"

    def report(self, round: FieldRound, rng: np.random.Generator) -> np.ndarray:
        raise NotImplementedError


@dataclass(frozen=True)
class TruthfulFields(FieldStrategy):
    """Every field reported true."""

    name: ClassVar[str] = "truthful"

    def report(self, round: FieldRound, rng: np.random.Generator) -> np.ndarray:
        return round.types[round.mine].copy()


@dataclass(frozen=True)
class _Shade(FieldStrategy):
    """One field reported as its true value times ``factor`` (> 0), the rest true."""

    factor: float = 1.0
    field: ClassVar[str] = "cost"

    def __post_init__(self):
        f = self.factor
        if isinstance(f, bool) or not isinstance(f, int | float) or not f > 0:
            raise MarketSimError(f"{self.name}: factor must be a number > 0, got {f!r}")

    def report(self, round: FieldRound, rng: np.random.Generator) -> np.ndarray:
        if self.field not in (round.types.dtype.names or ()):
            raise MarketSimError(f"{self.name}: the sellers have no {self.field} field")
        out = round.types[round.mine].copy()
        out[self.field] = out[self.field] * self.factor
        return out


@dataclass(frozen=True)
class ShadeCost(_Shade):
    """The cost reported as cost x ``factor`` (the one-field ``shade``)."""

    name: ClassVar[str] = "shade-cost"
    factor: float = 1.2


@dataclass(frozen=True)
class ShadeCap(_Shade):
    """The cap reported as cap x ``factor``: below 1 a seller holds back privacy, above
    1 it claims more than it accepts (and risks eps above its true cap)."""

    name: ClassVar[str] = "shade-cap"
    field: ClassVar[str] = "cap"
    factor: float = 0.5


def as_field_strategy(spec) -> FieldStrategy:
    """A FieldStrategy from itself or a registered name with ``name:key=value``."""
    from ..registry import FIELD_STRATEGIES, check_params

    if isinstance(spec, FieldStrategy) or callable(getattr(spec, "report", None)):
        return spec
    name, params = FIELD_STRATEGIES.parse(spec)
    cls = FIELD_STRATEGIES.load(name)
    check_params(cls, params, f"strategy {name!r}")
    return cls(**params)


class FieldMarketModel(mesa.Model):
    """Sellers with several fields over ``rounds`` rounds (module docstring).
    ``strategy``: a spec or strategy, or ``{spec: share}`` with shares summing to at most
    1 (the rest truthful); sellers are assigned to strategies at random.  A one-field
    mechanism is built for the population's costs with ``settings`` (mu, sigma, gamma,
    privacy) and reads the costs only."""

    def __init__(
        self,
        mechanism,
        population,
        *,
        strategy="truthful",
        rounds: int = 3,
        xi: float = 1.0,
        seed: int | None = None,
        rng: np.random.Generator | None = None,
        settings: dict | None = None,
    ):
        if seed is not None and rng is not None:
            raise MarketSimError("give seed or rng, not both")
        if not (isinstance(rounds, int | np.integer) and rounds >= 1):
            raise MarketSimError(f"rounds must be an integer >= 1 (got {rounds!r})")
        if not 0 < xi <= 1:
            raise MarketSimError(f"xi must be in (0, 1] (got {xi!r})")
        rng = rng if rng is not None else np.random.default_rng(seed)
        super().__init__(rng=rng)
        self.population = as_multifield(population)
        self.mechanism = as_multifield_mechanism(
            mechanism, population=self.population.population, **(settings or {})
        )
        self.mechanism_name = mechanism_name(self.mechanism)
        self.rounds, self.xi, self.round = int(rounds), float(xi), 0
        self.types = self.population.draw(1, self.rng)[0]
        n = self.n_sellers = self.types.shape[0]
        self.strategies, self.strategy_id = _assign(strategy, n, self.rng)
        self.strategy_names = [s.name for s in self.strategies]
        self.reports = self.types.copy()
        self.eps, self.payment, self.utility = np.zeros(n), np.zeros(n), np.zeros(n)
        self.participating = np.ones(n, dtype=bool)
        self._agent_rows: list[pd.DataFrame] = []
        self._model_rows: list[dict] = []
        self.running = True

    def step(self) -> None:
        self.round += 1
        here = self.rng.random(self.n_sellers) < self.xi  # arrival
        self.participating = here
        reports = self._report(here)
        out = self.mechanism.run(reports) if here.any() else None  # allocate
        self._settle(here, reports, out)
        self._train(here)
        self._record(here)
        self.running = self.round < self.rounds

    def _report(self, here: np.ndarray) -> np.ndarray:
        """Each strategy's records for its arrived sellers; verified fields set true."""
        types, last = self.types[here], self.reports[here]
        reports = types.copy()
        for k, strategy in enumerate(self.strategies):
            mine = self.strategy_id[here] == k
            if mine.any():
                view = FieldRound(types, last, mine, self.mechanism, self.population)
                reports[mine] = strategy.report(view, self.rng)
        for name in self.population.verified:
            reports[name] = types[name]
        return reports

    def _settle(self, here, reports, out) -> None:
        """Payments and utilities: t - c eps, -inf above the true cap."""
        self.eps[:], self.payment[:], self.utility[:] = 0.0, 0.0, 0.0
        self.reports[here] = reports
        if out is not None:
            self.eps[here], self.payment[here] = out.eps, out.payments
            self.utility[here] = utilities(out, self.types[here])

    def _train(self, here) -> None:
        for k, strategy in enumerate(self.strategies):
            learn = getattr(strategy, "learn", None)
            if callable(learn):
                learn(self.utility[here & (self.strategy_id == k)])

    def _record(self, here) -> None:
        lied = np.zeros(self.n_sellers, dtype=bool)
        for name in self.types.dtype.names or ():
            lied |= here & (self.reports[name] != self.types[name])
        u = self.utility[here]
        finite = u[np.isfinite(u)]
        self._model_rows.append(
            {
                "round": self.round,
                "participants": int(here.sum()),
                "share_misreporting": float(lied[here].mean()) if here.any() else 0.0,
                "spend": float(self.payment.sum()),
                "eps_bought": float(self.eps.sum()),
                "mean_utility": float(finite.mean()) if finite.size else float("nan"),
                "ir_violations": int(np.sum(u < -TOL)),
                "cap_exceeded": int(np.isneginf(u).sum()),
            }
        )
        frame = {"round": self.round, "seller_id": np.arange(self.n_sellers)}
        frame |= {f: self.types[f] for f in self.types.dtype.names or ()}
        frame |= {f"report_{f}": self.reports[f] for f in self.types.dtype.names or ()}
        frame |= {"arrived": here, "eps": self.eps, "payment": self.payment}
        frame |= {"utility": self.utility, "cap_exceeded": np.isneginf(self.utility)}
        frame |= {"strategy": [self.strategy_names[k] for k in self.strategy_id]}
        self._agent_rows.append(pd.DataFrame(frame))

    def run_model(self) -> None:
        while self.running:
            self.step()

    def model_frame(self) -> pd.DataFrame:
        """One row per round."""
        return pd.DataFrame(self._model_rows)

    def agent_frame(self) -> pd.DataFrame:
        """One row per seller and round: true fields, reports, outcome, utility."""
        return pd.concat(self._agent_rows, ignore_index=True)


def _assign(strategy, n: int, rng) -> tuple[list[FieldStrategy], np.ndarray]:
    """The strategies played and each seller's (a random assignment by shares)."""
    if not isinstance(strategy, dict):
        return [as_field_strategy(strategy)], np.zeros(n, dtype=int)
    shares = np.array(list(strategy.values()), dtype=float)
    if np.any(shares < 0) or shares.sum() > 1 + 1e-12:
        raise MarketSimError(f"strategy shares must be >= 0 and sum to <= 1, got {list(shares)}")
    played = [as_field_strategy(s) for s in strategy] + [TruthfulFields()]
    counts = np.floor(shares * n + 0.5).astype(int)
    ids = np.concatenate([np.full(c, k) for k, c in enumerate(counts)] + [np.full(n, len(counts))])
    return played, rng.permutation(ids[:n])
