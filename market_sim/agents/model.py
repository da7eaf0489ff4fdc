"""The Mesa market: sellers who decide what to report, a platform that runs a mechanism.

Each round has explicit stages: arrival -> report -> allocate -> settle ->
train, then regret is measured and the round recorded.

**Columnar sellers.**  The sellers' state (cost, report, eps, payment,
utility, regret, participation, strategy) lives in numpy arrays on the model,
one entry per seller, so a round costs a few array passes whatever m is.
This follows mesa-frames and AMBER, which keep agents as table rows for the
same reason, but stays a plain ``mesa.Model``: :class:`SellerAgent` objects are
thin views on the arrays (reading or writing ``agent.report`` reads or writes
``model.report[agent.seller_id]``).  Building 10^6 Mesa agents costs ~15 s, so
views are created eagerly only up to ``AGENT_VIEW_LIMIT`` sellers (then they
are in ``model.agents`` and the DataCollector's ``agenttype_reporters``), and
otherwise on first use (``model.seller(i)``, ``model.sellers``).

Strategies act on whole groups (``Strategy.report_all``) when they can, and
seller by seller through the views otherwise; moves are simultaneous, so both
paths give the same numbers (tested).  Mesa conventions: ``rng=`` or
``seed=``, the DataCollector records the initial state as step 0, and
``running`` turns false after ``rounds`` steps, so ``mesa.batch_run`` rows align.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

import mesa
import numpy as np

from ..errors import MarketSimError
from ..mechanisms.base import Mechanism, as_mechanism, mechanism_name
from ..mechanisms.budgeted import Budgeted, Caps
from ..privacy.ledger import PrivacyLedger, accountant_class
from ..privacy.release import StatisticRelease
from . import records
from .market_agents import PlatformAgent, SellerAgent
from .market_setup import _check_settings, _generator, _market_law, _population_of, synthetic_data
from .strategies import (
    SellerGroup,
    Strategy,
    Truthful,
    as_strategy,
    is_learner,
    is_vectorized,
)

if TYPE_CHECKING:
    import pyarrow.parquet as pq

AGENT_VIEW_LIMIT = 10_000
AGENT_COLUMNS = (
    "round",
    "seller_id",
    "cost",
    "report",
    "eps",
    "payment",
    "utility",
    "regret",
    "strategy",
)


@dataclass
class _Group:
    """Sellers ``ids`` sharing one strategy spec; per-agent strategies get copies."""

    name: str
    strategy: Strategy
    ids: np.ndarray
    copies: list | None = None
    all_rows: np.ndarray | None = None  # 0..len(ids)-1, built on first use


@dataclass
class _RegretBook:
    """A learner group's running sums for external regret (rows of the group)."""

    cum_arm: np.ndarray | None  # (n, K): cumulative utility of each arm
    cum_real: np.ndarray  # (n,): cumulative realised (expected) utility
    played: np.ndarray  # (n,): rounds each seller took part in and was scored


def _strategy_mix(strategy, strategic_fraction, n):
    """[(spec, count)] of the strategic groups (the rest are truthful)."""
    if isinstance(strategy, Mapping):
        items = list(strategy.items())
        fracs = [float(f) for _, f in items]
        if any(not (0 <= f <= 1) for f in fracs) or sum(fracs) > 1 + 1e-12:
            raise MarketSimError("strategy mix: fractions must be in [0, 1] and sum to at most 1")
        counts = [int(round(f * n)) for f in fracs]
        while sum(counts) > n:
            counts[int(np.argmax(counts))] -= 1
        return [(spec, c) for (spec, _), c in zip(items, counts, strict=True)]
    if not (0 <= strategic_fraction <= 1):
        raise MarketSimError(f"strategic_fraction must be in [0, 1] (got {strategic_fraction!r})")
    return [(strategy, int(round(strategic_fraction * n)))]


def _spec_name(spec, strat) -> str:
    if isinstance(spec, str):
        return spec
    return getattr(strat, "name", "") or type(strat).__name__


class MarketModel(mesa.Model):
    """Repeated rounds of one market.

    Who sells: ``population`` (a :class:`~market_sim.population.Population` or its spec:
    costs, and with data the rows and test rows, from ``pop.sample(model.rng)``; a
    ``group`` column in the seller rows), or the shorthand ``n_sellers`` sellers with
    costs from ``dist`` (default 20 on ``uniform:0:1``) and optional ``data=``.
    ``mechanism``: a registered name or spec (``"offline"``, ``"online:rule=alg3"``,
    ``"mypkg.mech:UniformPrice"``, ``"path/to/file.py:UniformPrice"``), a
    :class:`~market_sim.mechanisms.Mechanism` class or instance.
    ``strategy``: a registered name or spec (``"shade:factor=1.3"``,
    ``"bne:DIR/bid.csv"``), a :class:`Strategy` class or instance, or a ``BNEResult``
    (its bid functions played: the ``bne`` strategy), given to a fraction
    ``strategic_fraction`` of the sellers; or a mapping ``{strategy: fraction}``
    for mixed populations.  The others are truthful.
    ``privacy`` is the epsilon of the private mechanisms' random choice;
    ``release`` (with ``payment_bound``) publishes noisy round statistics.
    ``budget`` (eps or ``(eps, delta)``): each seller's lifetime privacy budget, kept
    in a :class:`~market_sim.privacy.ledger.PrivacyLedger` composed by ``accountant``
    (``basic``, ``rdp`` or ``pld``; a sale at eps_i is an eps_i-DP mechanism of unknown
    form, composed as its worst case, binary randomized response at eps_i); the mechanism runs under
    :class:`~market_sim.mechanisms.budgeted.Budgeted` caps, a seller's privacy cost
    is c_i times the increase of its composed loss, and a seller whose budget is
    spent leaves the market (docs/ledger.md).
    ``market``: a drawn market of the population (``pop.sample(rng)``) to start from
    instead of drawing one (the market every profile of an EGTA sample shares).
    With ``measure_regret`` every seller's regret (best utility on a report
    grid minus actual utility) is computed each round (on a uniform sample of
    ``regret_sample`` participants when given; the others' regret is NaN).  ``agent_out``: a
    Parquet file the per-seller rows are appended to round by round (instead of
    being kept in memory for ``agent_frame``).
    """

    def __init__(
        self,
        n_sellers: int | None = None,
        *,
        dist=None,
        population=None,
        mechanism="offline",
        strategy="truthful",
        strategic_fraction: float = 1.0,
        rounds: int = 3,
        mu: float = 1.0,
        sigma: float = 1.0,
        gamma: float = 1.0,
        xi: float = 1.0,
        new_costs_each_round: bool = False,
        measure_regret: bool = True,
        n_grid: int = 11,
        collusion_size: int | None = None,
        data=None,
        privacy: float = 1.0,
        release: StatisticRelease | None = None,
        payment_bound: float | None = None,
        agent_out=None,
        agent_views: bool | None = None,
        vectorized: bool = True,
        regret_sample: int | None = None,
        budget=None,
        accountant: str = "basic",
        market=None,
        seed: int | None = None,
        rng=None,
    ):
        _check_settings(rounds, xi, n_grid, release, payment_bound, regret_sample, seed, rng)
        accountant_class(accountant)  # a one-line error for an unknown name
        pop = _population_of(population, dist, n_sellers, data)
        mix = _strategy_mix(strategy, strategic_fraction, pop.n_sellers)
        super().__init__(rng=_generator(seed, rng))
        self._set_market(pop, population is not None, mu, sigma, gamma)
        self.release, self.payment_bound = release, payment_bound
        self._set_mechanism(mechanism, privacy)
        self.rounds, self.xi, self.tol = int(rounds), float(xi), 1e-9
        self.new_costs, self.measure_regret, self.n_grid = (
            new_costs_each_round,
            measure_regret,
            int(n_grid),
        )
        self.vectorized = bool(vectorized)
        self.regret_sample = regret_sample
        self._set_ledger(budget, accountant)
        market = self._first_market(market)
        self._set_sellers(market.costs)
        self._build_groups(mix, collusion_size)
        test_data = self._set_data(market, data)
        eager = self._set_agents(agent_views, test_data, agent_out)
        self._set_collector(eager)
        self.datacollector.collect(self)  # step 0: the initial state

    # ---- the steps of __init__ ------------------------------------------------------
    def _first_market(self, market):
        """The market of round 1: ``market`` (a draw of the population, e.g. the one every
        profile of an EGTA sample shares) or a fresh ``population.sample(rng)``."""
        if market is None:
            return self.population.sample(self.rng)
        costs = np.asarray(getattr(market, "costs", ()), dtype=float)
        if costs.shape != (self.n_sellers,):
            raise MarketSimError(
                f"market: {costs.size} costs for {self.n_sellers} sellers; give a "
                "population.sample(rng) of this population"
            )
        if self.population.has_data and getattr(market, "data", None) is None:
            raise MarketSimError("market: the population has data and this market none")
        return market

    def _set_market(self, pop, explicit: bool, mu, sigma, gamma) -> None:
        """Who sells: the population, its size, the cost law(s) and the objective's weights.
        ``dist`` is the one law of a one-class population, else the pooled law (its
        support is the hull of the classes'), else the per-seller laws."""
        self.population = pop
        self.n_sellers = pop.n_sellers
        self.group = np.asarray(pop.group)  # each seller's class
        self._population_given = explicit
        self.seller_laws = pop.seller_laws
        self.dist = _market_law(pop)
        self.mu, self.sigma, self.gamma = float(mu), float(sigma), float(gamma)

    def _set_mechanism(self, mechanism, privacy) -> None:
        """The mechanism; given a population, per-seller laws to those that take them."""
        settings = dict(mu=self.mu, sigma=self.sigma, gamma=self.gamma, privacy=privacy)
        if self._population_given:
            self.mechanism: Mechanism = as_mechanism(
                mechanism, population=self.population, **settings
            )
        else:
            self.mechanism = as_mechanism(
                mechanism, dist=self.dist, n_sellers=self.n_sellers, **settings
            )
        self.base_mechanism = self.mechanism
        self.mechanism_name = (
            mechanism if isinstance(mechanism, str) else mechanism_name(self.mechanism)
        )

    def _set_ledger(self, budget, accountant) -> None:
        """The privacy ledger (docs/ledger.md)."""
        n = self.n_sellers
        if budget is not None and self.mechanism.needs_data:  # adaptive composition: docs/ledger.md
            raise MarketSimError(
                f"budget with mechanism {self.mechanism_name}: its eps_i are computed from the "
                "sellers' data rows, and the ledger composes only eps_i that are not"
            )
        self.ledger = None if budget is None else PrivacyLedger(n, budget, accountant)
        self.accountant = accountant
        self.loss_increase = np.zeros(n)  # this round's increase of the composed loss
        self._exhausted = np.zeros(n, dtype=bool)

    def _set_sellers(self, costs) -> None:
        """The seller arrays (one entry per seller)."""
        n = self.n_sellers
        self.cost = np.asarray(costs, dtype=float)
        self.report = self.cost.copy()
        self.eps, self.payment, self.utility = np.zeros(n), np.zeros(n), np.zeros(n)
        self.regret = np.full(n, np.nan)
        self._regret_written = False  # until measure() runs, regret is all NaN
        self.truth_regret = np.full(n, np.nan)  # best grid utility - utility of the truth
        self.external_regret = np.full(n, np.nan)  # learners: cumulative regret / rounds
        self._scored = False  # until a learner is scored, external_regret is all NaN
        self.participating = np.ones(n, dtype=bool)
        self.position = np.arange(n)
        self._identity_positions = True
        self._n_misreporting = 0
        self.reports = self.report.copy()

    def _set_data(self, market, data):
        """The sellers' rows and the held-out test rows: from the population's market, or
        from ``data=`` ('synthetic' or (X, y, X_test, y_test)).  Returns the test rows."""
        n = self.n_sellers
        self.X = self.y = None
        test_data = None
        if market.data is not None:
            (self.X, self.y), test_data = market.data, market.test
        elif data is not None:
            if isinstance(data, str) and data == "synthetic":
                data = synthetic_data(n, 5, self.rng)
            try:
                X, y, X_test, y_test = (np.asarray(v) for v in data)
            except (TypeError, ValueError):
                raise MarketSimError("data must be 'synthetic' or (X, y, X_test, y_test)") from None
            if len(X) != n or len(y) != n:
                raise MarketSimError(
                    f"data: {len(X)} rows for {n} sellers; give one (x, y) per seller"
                )
            self.X, self.y = X, y
            test_data = (X_test, y_test)
        if self.mechanism.needs_data and test_data is None:
            raise MarketSimError(
                f"mechanism {self.mechanism_name} needs the sellers' data: pass "
                "data= (or --data on the command line), or a population with data"
            )
        return test_data

    def _set_agents(self, agent_views, test_data, agent_out) -> bool:
        """Seller views (eagerly up to AGENT_VIEW_LIMIT) and the platform; True if eager."""
        n = self.n_sellers
        self._views: dict[int, SellerAgent] = {}
        eager = n <= AGENT_VIEW_LIMIT if agent_views is None else bool(agent_views)
        if eager:
            for i in range(n):
                self.seller(i)
        self.platform = PlatformAgent(self, test_data)
        self._agent_rows: list[dict] = []
        self._agent_writer: pq.ParquetWriter | None = None
        self.agent_out = agent_out
        self.round = 0
        self.running = True
        return eager

    def _set_collector(self, eager: bool) -> None:
        """The DataCollector: one row per round, and per seller when views are eager."""
        self.datacollector = records.collector(self, eager)

    # ---- groups of sellers by strategy ------------------------------------------
    def _build_groups(self, mix, collusion_size):
        n = self.n_sellers
        self.groups: list[_Group] = []
        self.strategy_id = np.zeros(n, dtype=np.int16)
        start = 0
        specs = []
        for spec, count in mix:
            strat = as_strategy(spec)
            if collusion_size is not None and getattr(strat, "name", "") == "collusion":
                strat.size = int(collusion_size)
            specs.append((_spec_name(spec, strat), strat, count))
        taken = sum(c for _, _, c in specs)
        specs.append(("truthful", Truthful(), n - taken))
        for name, strat, count in specs:
            if count <= 0:
                continue
            ids = np.arange(start, start + count)
            start += count
            vectorized = is_vectorized(strat) and (self.vectorized or not _has_own_report(strat))
            copies = None if vectorized else [copy.deepcopy(strat) for _ in ids]
            for s in copies or [strat]:
                s.start(1 if copies else count, self)
            self.strategy_id[ids] = len(self.groups)
            self.groups.append(_Group(name, strat, ids, copies))
        self.strategy_names = [g.name for g in self.groups]
        # learners (strategies declaring arms): their sellers' external regret is tracked
        self._learners = {
            gi: _RegretBook(None, np.zeros(g.ids.size), np.zeros(g.ids.size, dtype=np.int64))
            for gi, g in enumerate(self.groups)
            if is_learner(g.strategy)
        }
        self._learner_ids = (
            np.concatenate([self.groups[gi].ids for gi in self._learners])
            if self._learners
            else np.zeros(0, dtype=int)
        )
        self.agent_columns: tuple[str, ...] = (
            AGENT_COLUMNS[:2]
            + (("group",) if self._population_given else ())
            + AGENT_COLUMNS[2:-1]
            + (("external_regret",) if self._learners else ())
            + (("eps_spent", "budget_left") if self.ledger is not None else ())
            + AGENT_COLUMNS[-1:]
        )

    def strategy_of(self, seller_id: int) -> Strategy:
        g = self.groups[self.strategy_id[seller_id]]
        return g.strategy if g.copies is None else g.copies[seller_id - g.ids[0]]

    # ---- views and helpers for strategies -------------------------------------------
    def seller(self, seller_id: int) -> SellerAgent:
        """The Mesa agent viewing seller ``seller_id`` (created on first use)."""
        view = self._views.get(int(seller_id))
        if view is None:
            if not 0 <= seller_id < self.n_sellers:
                raise MarketSimError(f"no seller {seller_id} (0..{self.n_sellers - 1})")
            view = self._views[int(seller_id)] = SellerAgent(self, seller_id)
        return view

    @property
    def sellers(self) -> list[SellerAgent]:
        return [self.seller(i) for i in range(self.n_sellers)]

    def active(self) -> np.ndarray:
        """Ids of this round's participants."""
        return np.flatnonzero(self.participating)

    def current_reports(self) -> np.ndarray:
        return self.report[self.participating]

    def report_grid(self, costs, n: int) -> np.ndarray:
        """Per seller: the true cost first, then the midpoints of n equal cells of the
        support (the bottom itself is avoided: at a support starting at 0, psi = 0
        there).  ``costs`` a scalar -> (n + 1,), an array of k -> (k, n + 1)."""
        lo, hi = self.dist.support
        mids = lo + (hi - lo) * (np.arange(n) + 0.5) / n
        c = np.asarray(costs, dtype=float)
        if c.ndim == 0:
            return np.concatenate(([float(c)], mids))
        return np.ascontiguousarray(np.column_stack([c, np.broadcast_to(mids, (c.size, n))]))

    def _group_view(self, g: _Group) -> SellerGroup:
        """The group's participants; read-only views (no copies) when all take part."""
        a, b = int(g.ids[0]), int(g.ids[-1]) + 1
        mask = self.participating[a:b]
        take: slice | np.ndarray
        if mask.all():  # the group's ids and 0..n-1, kept read-only (no per-round arrays)
            if g.all_rows is None:
                g.all_rows = np.arange(b - a)
                g.all_rows.flags.writeable = g.ids.flags.writeable = False
            ids, rows, take = g.ids, g.all_rows, slice(a, b)
        else:
            rows = np.flatnonzero(mask)
            ids = take = a + rows
        cols = [self.position[take], self.cost[take], self.report[take], self.utility[take]]
        for c in cols:
            c.flags.writeable = False
        return SellerGroup(ids, rows, *cols)

    # ---- one round ---------------------------------------------------------------
    def arrival(self) -> slice | np.ndarray:
        """Who takes part: stay out after a round with negative utility; with xi < 1
        each seller is also absent with probability 1 - xi."""
        if self.new_costs and self.round > 1:
            self._redraw()
        self.participating[:] = self.utility >= -self.tol
        if self.ledger is not None:  # a seller whose budget is spent has left
            self.participating &= ~self._exhausted
        if self.xi < 1:
            self.participating &= ~(self.rng.random(self.n_sellers) >= self.xi)
        active: slice | np.ndarray
        if self.participating.all():  # a slice: views and fast assignment, no index arrays
            active, self.n_active = slice(None), self.n_sellers
            if not self._identity_positions:
                self.position[:] = np.arange(self.n_sellers)
                self._identity_positions = True
        else:
            active = self.active()
            self.n_active = active.size
            if active.size == 0:
                raise MarketSimError("no seller participates in this round")
            self.position[active] = np.arange(active.size)
            self._identity_positions = False
            out = ~self.participating
            self.eps[out] = self.payment[out] = self.utility[out] = 0.0
            self.regret[out] = np.nan
        if self.base_mechanism.needs_data:  # this round's sellers' data
            assert self.X is not None and self.y is not None  # __init__ requires them
            self.mechanism = self.base_mechanism.with_data(self.X[active], self.y[active])
        else:
            self.mechanism = self.base_mechanism
        if not isinstance(active, slice):  # per-seller laws: this round's sellers'
            self.mechanism = self.mechanism.for_sellers(active)
        if self.ledger is not None:  # this round's caps, fixed before the reports
            led, ids = self.ledger, np.arange(self.n_sellers)[active]
            self.mechanism = Budgeted(
                self.mechanism, Caps(led.lower_cap(ids), lambda pos: led.cap(ids[pos]))
            )
        return active

    def _redraw(self) -> None:
        """A new market from the population: costs, and with its data, rows and test rows."""
        market = self.population.sample(self.rng)
        self.cost[:] = market.costs
        if market.data is not None:
            self.X, self.y = market.data
            self.platform.test_data = market.test

    def virtual_costs(self, active) -> np.ndarray:
        """psi_i(c_i) of this round's participants, each under its own law (Eq. 11, 003)."""
        if self.population.n_classes == 1:
            return self.dist.virtual_cost(self.cost[active])
        ids = np.arange(self.n_sellers)[active]
        return self.seller_laws.virtual_cost(self.cost[ids], sellers=ids)

    def collect_reports(self, active) -> None:
        """Every strategic group decides against the reports at the stage's start
        (``model.reports``); a group's reports are written after all its decisions."""
        self.reports = self.report[active].copy()
        self.reports.flags.writeable = False
        self._n_misreporting = 0
        for g in self.groups:
            sel = self._group_view(g)
            if not len(sel):
                continue
            if type(g.strategy) is Truthful:
                if len(sel) == g.ids.size:
                    self.report[g.ids[0] : g.ids[-1] + 1] = sel.cost
                else:
                    self.report[sel.ids] = sel.cost
                continue
            r: np.ndarray | list[float]
            if g.copies is None:
                r = g.strategy.report_all(sel, self)
            else:
                r = [
                    g.copies[row].report(self.seller(i), self)
                    for i, row in zip(sel.ids, sel.rows, strict=True)
                ]
            r = np.asarray(r, dtype=float).reshape(-1)
            if r.size != len(sel) or not np.all(np.isfinite(r)):
                raise MarketSimError(
                    f"strategy {g.name}: reports must be {len(sel)} finite numbers"
                )
            self._n_misreporting += int(np.count_nonzero(np.abs(r - sel.cost) > 1e-12))
            if len(sel) == g.ids.size:
                self.report[g.ids[0] : g.ids[-1] + 1] = r
            else:
                self.report[sel.ids] = r

    def score_arms(self, active) -> None:
        """Learners: every arm's utility against this round's actual reports.

        For each learner group (``Strategy.arm_reports``) that learns from full
        information, or every learner group when ``measure_regret`` is on, one
        ``deviation_utilities`` call gives each seller's utility at each of its
        arms (expectations for randomized mechanisms, which also score the actual
        report: expected vs expected).  They go to ``observe_arms`` (full
        information) and into the external-regret sums (``_RegretBook``)."""
        reports = None
        for gi, book in self._learners.items():
            g = self.groups[gi]
            full = bool(g.strategy.full_information)
            if not (full or self.measure_regret):
                continue
            sel = self._group_view(g)
            if not len(sel):
                continue
            if reports is None:
                reports = self.report[active]
            arms = self._arm_reports(g, sel)
            k = arms.shape[1]
            randomized = bool(self.mechanism.randomized)
            cand = np.column_stack([arms, sel.report]) if randomized else arms
            u = np.asarray(
                self.mechanism.deviation_utilities(sel.index, cand, sel.cost, reports, self.rng),
                dtype=float,
            )
            if u.shape != cand.shape:
                raise MarketSimError(
                    f"mechanism {self.mechanism_name}: deviation_utilities gave shape "
                    f"{u.shape} for {cand.shape} candidates"
                )
            arm_u = u[:, :k]
            realised = u[:, k] if randomized else self.utility[sel.ids]
            self._book(gi, book, sel, arm_u, realised)
            if full:
                arm_u.flags.writeable = False
                if g.copies is None:
                    g.strategy.observe_arms(sel, arm_u, self)
                else:
                    for j, (i, row) in enumerate(zip(sel.ids, sel.rows, strict=True)):
                        one = SellerGroup.of_one(self.seller(i))
                        g.copies[row].observe_arms(one, arm_u[j : j + 1], self)

    def learner_arms(self) -> list[tuple[np.ndarray, np.ndarray]]:
        """Each learner group's action set this round: a list of (seller ids, (n, K)
        reports at every arm) over its participating sellers (groups whose strategy
        declares no arms are left out)."""
        out = []
        for gi in self._learners:
            g = self.groups[gi]
            sel = self._group_view(g)
            if len(sel):
                out.append((np.asarray(sel.ids), self._arm_reports(g, sel)))
        return out

    def _arm_reports(self, g: _Group, sel: SellerGroup) -> np.ndarray:
        if g.copies is None:
            arms = g.strategy.arm_reports(sel, self)
        else:
            arms = np.vstack(
                [
                    np.asarray(
                        g.copies[row].arm_reports(SellerGroup.of_one(self.seller(i)), self),
                        dtype=float,
                    ).reshape(1, -1)
                    for i, row in zip(sel.ids, sel.rows, strict=True)
                ]
            )
        arms = np.asarray(arms, dtype=float)
        if arms.ndim != 2 or arms.shape[0] != len(sel) or arms.shape[1] < 1:
            raise MarketSimError(
                f"strategy {g.name}: arm_reports must be a ({len(sel)}, K) array, got "
                f"shape {arms.shape}"
            )
        if not np.all(np.isfinite(arms)):
            raise MarketSimError(f"strategy {g.name}: arm_reports must be finite numbers")
        return arms

    def _book(self, gi: int, book: _RegretBook, sel: SellerGroup, arm_u, realised) -> None:
        """Add this round to a learner group's sums; external regret of each scored
        seller = (max_j cumulative utility of arm j - cumulative realised utility)
        / rounds it was scored (not clipped at 0: a learner may beat every fixed arm)."""
        k = arm_u.shape[1]
        if book.cum_arm is None:
            book.cum_arm = np.zeros((book.played.size, k))
        elif book.cum_arm.shape[1] != k:
            raise MarketSimError(
                f"strategy {self.groups[gi].name}: arm_reports gave {k} arms this round, "
                f"{book.cum_arm.shape[1]} before; a learner's arms must not change"
            )
        whole = len(sel) == book.played.size
        take = slice(None) if whole else sel.rows
        cum = book.cum_arm[take]
        cum += arm_u  # a view when whole; else write back below
        book.cum_real[take] += realised
        book.played[take] += 1
        if not whole:
            book.cum_arm[take] = cum
        regret = (cum.max(axis=1) - book.cum_real[take]) / book.played[take]
        g = self.groups[gi]
        self._scored = True
        if whole:
            self.external_regret[g.ids[0] : g.ids[-1] + 1] = regret
        else:
            self.external_regret[sel.ids] = regret

    def observe(self, active) -> None:
        for g in self.groups:
            s = g.strategy
            if type(s).observe_all is Strategy.observe_all and type(s).observe is Strategy.observe:
                continue  # nothing to learn
            sel = self._group_view(g)
            if not len(sel):
                continue
            if g.copies is None:
                g.strategy.observe_all(sel, self.utility[sel.ids], self)
            else:
                for i, row in zip(sel.ids, sel.rows, strict=True):
                    g.copies[row].observe(self.seller(i), self, float(self.utility[i]))

    def measure(self, active: np.ndarray) -> None:
        """Regret of each participant: best utility on its report grid (others fixed)
        minus its actual utility (expected utility for randomized mechanisms)."""
        reports = self.report[active]
        ids = np.arange(self.n_sellers)[active]
        idx = np.arange(self.n_active)
        if self.regret_sample is not None and self.regret_sample < idx.size:
            idx = np.sort(self.rng.choice(idx.size, self.regret_sample, replace=False))
            self.regret[ids] = self.truth_regret[ids] = np.nan
        costs = self.cost[ids[idx]]
        grid = self.report_grid(costs, self.n_grid)
        u = self.mechanism.deviation_utilities(idx, grid, costs, reports, self.rng)
        best = u.max(axis=1)
        if self.mechanism.randomized:  # expectation vs expectation
            actual = self.mechanism.deviation_utilities(
                idx, reports[idx, None], costs, reports, self.rng
            )[:, 0]
        else:
            actual = self.utility[ids[idx]]
        self.regret[ids[idx]] = np.maximum(best - actual, 0.0)
        self._regret_written = True
        self.truth_regret[ids[idx]] = np.maximum(best - u[:, 0], 0.0)  # grid[:, 0]: the truth

    def step(self):
        self.round += 1
        active = self.arrival()
        self.collect_reports(active)
        outcome = self.platform.allocate(self.report[active])
        self.platform.settle(active, outcome)
        if self._learners:
            self.score_arms(active)
        self.observe(active)
        self.platform.train(active)
        if self.measure_regret:
            self.measure(active)
        self._record(active)
        self.datacollector.collect(self)
        if self.round >= self.rounds:
            self.running = False
        elif self.ledger is not None and self._exhausted.all():
            self.running = False  # every budget is spent: the market closes

    def run(self):
        """All remaining rounds; returns (model frame, agent frame)."""
        while self.running:
            self.step()
        return self.model_frame(), self.agent_frame()

    # ---- records ------------------------------------------------------------------
    def _regret_stat(self, fn) -> float:
        if not self.measure_regret or self.round == 0:
            return np.nan
        r = self.regret[self.participating]
        r = r[np.isfinite(r)]
        return float(fn(r)) if r.size else np.nan

    def _avg_external_regret(self) -> float:
        """Mean over the learners' sellers of cumulative external regret / rounds
        (sellers not scored yet left out); NaN without learners or scores."""
        if not self._learners or self.round == 0:
            return np.nan
        ids = self._learner_ids
        contiguous = ids.size and ids[-1] - ids[0] + 1 == ids.size and np.all(np.diff(ids) == 1)
        r = self.external_regret[ids[0] : ids[-1] + 1] if contiguous else self.external_regret[ids]
        r = r[np.isfinite(r)]
        return float(r.mean()) if r.size else np.nan

    def _share_misreporting(self) -> float:
        if self.round == 0:
            return 0.0
        return self._n_misreporting / self.n_active

    def _record(self, active) -> None:
        """Keep this round's per-seller columns (ids, round and strategy are added when
        the frame is built; costs only when they change)."""
        records.record(self, active)

    def _nan_column(self) -> np.ndarray:
        return records.nan_column(self)

    def _table(self, rows, first_round: int):
        return records.arrow_table(self, rows, first_round)

    def close(self) -> None:
        """Finish the Parquet file of per-seller rows (when ``agent_out`` is set)."""
        if self._agent_writer is not None:
            self._agent_writer.close()
            self._agent_writer = None

    def model_frame(self):
        """One row per round (1..rounds); the DataCollector's step-0 row is the initial state."""
        df = self.datacollector.get_model_vars_dataframe().iloc[1:].reset_index(drop=True)
        df.insert(0, "round", np.arange(1, len(df) + 1))
        return df

    def ledger_frame(self, accountants=("basic", "rdp", "pld")):
        """One row per seller: its sales, the eps it sold (sum), its composed loss under
        the model's accountant (``eps_spent``), ``budget_left``, and the loss of the same
        history under each of ``accountants`` at the budget's delta (``spent_<name>``;
        pld is left out when dp-accounting is not installed)."""
        return records.ledger_frame(self, accountants)

    def agent_frame(self):
        """One row per seller and round (``AGENT_COLUMNS``)."""
        return records.agent_frame(self)


def _has_own_report(strat) -> bool:
    return type(strat).report is not Strategy.report
