"""The market as reinforcement-learning environments (the ``rl`` extra).

``MarketEnv`` is a PettingZoo ``ParallelEnv``: the agents are the sellers
(``"seller_0"`` ... ``"seller_{m-1}"``), one step is one round of the same market as
:class:`~market_sim.agents.MarketModel` (every live seller reports, the mechanism
allocates eps and pays).  ``SellerEnv`` is a Gymnasium ``Env`` for one learning seller
(seller 0) against others who play a fixed strategy.  Both share :class:`MarketCore`,
which keeps every per-seller quantity in numpy arrays.  The module imports without the
``rl`` extra (``as_opponents`` and ``MarketCore`` need only numpy); building an
environment without it is a one-line ``MarketSimError``.

**Observation** (a float32 Box; ``OBSERVATION`` names the entries):

====  =====================  ============================================
0     ``cost``               the seller's cost this round, in the support
1     ``last_eps``           the eps it sold last round (0 at the start)
2     ``last_payment``       the payment it got last round (0 at the start)
3     ``last_report``        its report last round (its cost at the start)
4     ``total_payment``      public (``public=True``): last round's total payment
5     ``share_bought``       public: share of last round's sellers with eps > 0
last  ``budget_left``        with a ``budget``: its budget left (composed eps)
====  =====================  ============================================

**Action**: the report, a Box of shape (1,) over the cost support [low, high] of the
platform's cost law.  The report is the action clipped to [low + 1e-6 (high - low),
high]: the mechanisms are defined on the support, and at its bottom (a support that
starts at 0) a report has virtual cost 0, where the offline allocation has no
optimum (the BNE solver's lowest report is the same).  A non-finite action, one of
another shape, ``MarketEnv.step`` without an action for a live seller or with one
for an agent that is not live (unknown, or gone) is a one-line ``MarketSimError``
(the package's convention for bad input; gymnasium and pettingzoo leave it open).

**Reward**: the round's utility t_i - c_i eps_i; with a ``budget`` the privacy cost is
c_i times the increase of the seller's composed loss (docs/ledger.md), and a seller
whose budget is spent is *terminated* (it leaves the market).  After ``rounds``
rounds every live seller is *truncated* (a time limit on the repeated game), except
at ``rounds=1``: a one-round episode is a one-shot game that ends in its terminal
state, so every seller is *terminated* (gymnasium's convention, and what its
``check_env`` requires: an episode truncated after one step "has gone very wrong").
Costs are drawn at ``reset`` from ``dist`` (a cost law with ``n_sellers``, or a population: anything
:func:`~market_sim.population.as_population` takes) and kept, or redrawn every round
with ``new_costs_each_round``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from ..errors import MarketSimError
from ..mechanisms.base import Mechanism, as_mechanism
from ..mechanisms.budgeted import Budgeted, Caps
from ..population import Population, as_population
from ..privacy.ledger import PrivacyLedger, accountant_class
from ..privacy.limit import privacy_cost

try:
    from gymnasium import Env as _GymEnv
    from gymnasium import spaces
    from pettingzoo import ParallelEnv as _ParallelEnv
except ImportError as _missing:  # pragma: no cover - the rl extra is installed in CI
    _REASON = str(_missing)

    class _ParallelEnv:  # type: ignore[no-redef]
        """Stands in for the missing base class: the environments need the rl extra."""

        def __init__(self, *args, **kwargs):
            raise MarketSimError(
                f"the environments need the rl extra (pip install 'market_sim[rl]'): {_REASON}"
            )

    _GymEnv = _ParallelEnv  # type: ignore[misc]

__all__ = ["MarketEnv", "SellerEnv", "MarketCore", "as_opponents", "OBSERVATION"]

OBSERVATION = ("cost", "last_eps", "last_payment", "last_report")
PUBLIC = ("total_payment", "share_bought")


# ---- the market, as arrays ---------------------------------------------------------------
class MarketCore:
    """One market played round by round on arrays (no dicts, no spaces).

    Options as :class:`MarketEnv`'s.  ``reset(rng)`` draws the sellers; ``play(reports)``
    runs one round on the live sellers' reports and returns their utilities."""

    def __init__(
        self,
        n_sellers: int | None = None,
        *,
        dist="uniform:0:1",
        population=None,
        mechanism="offline",
        rounds: int = 10,
        mu: float = 1.0,
        sigma: float = 1.0,
        gamma: float = 1.0,
        privacy: float = 1.0,
        new_costs_each_round: bool = False,
        public: bool = False,
        budget=None,
        accountant: str = "basic",
    ):
        if not (isinstance(rounds, int | np.integer) and not isinstance(rounds, bool)):
            raise MarketSimError(f"rounds must be an integer >= 1 (got {rounds!r})")
        if rounds < 1:
            raise MarketSimError(f"rounds must be an integer >= 1 (got {rounds!r})")
        source = dist if population is None else population
        classes = isinstance(source, Population | list | tuple) or (
            isinstance(source, str) and "*" in source
        )
        if not classes and n_sellers is None:
            n_sellers = 20  # MarketModel's default
        if n_sellers is not None and not (
            isinstance(n_sellers, int | np.integer) and n_sellers >= 1
        ):
            raise MarketSimError(f"n_sellers must be an integer >= 1 (got {n_sellers!r})")
        self.population = as_population(source, n_sellers)
        self.n = self.population.n_sellers
        self.law = self.population.pooled  # the cost law the platform believes in
        self.low, self.high = (float(v) for v in self.law.support)
        # the lowest report (the BNE solver's): at a support's 0 the virtual cost is 0
        # and the offline allocation has no optimum
        self.floor = self.low + 1e-6 * (self.high - self.low)
        self.mechanism: Mechanism = as_mechanism(
            mechanism,
            dist=self.law,
            n_sellers=self.n,
            mu=float(mu),
            sigma=float(sigma),
            gamma=float(gamma),
            privacy=privacy,
        )
        if self.mechanism.needs_data and not self.population.has_data:
            raise MarketSimError(
                "this mechanism needs the sellers' data: give a population with data "
                "(e.g. '20*uniform:0:1;data=synthetic')"
            )
        self.rounds, self.new_costs, self.public = int(rounds), bool(new_costs_each_round), public
        self.budget, self.accountant = budget, accountant
        if budget is not None:
            accountant_class(accountant)  # a one-line error for an unknown name
            PrivacyLedger(1, budget, accountant)  # and for a bad budget
        self.names = (
            OBSERVATION
            + (PUBLIC if public else ())
            + (("budget_left",) if budget is not None else ())
        )

    # ---- spaces' bounds -------------------------------------------------------------
    def observation_bounds(self) -> tuple[np.ndarray, np.ndarray]:
        """(low, high) of the observation, entry by entry (module docstring)."""
        inf = np.inf
        bounds = {
            "cost": (self.low, self.high),
            "last_eps": (0.0, inf),
            "last_payment": (-inf, inf),
            "last_report": (self.low, self.high),
            "total_payment": (-inf, inf),
            "share_bought": (0.0, 1.0),
            "budget_left": (0.0, inf),
        }
        lo, hi = zip(*(bounds[k] for k in self.names), strict=True)
        return np.array(lo, dtype=np.float32), np.array(hi, dtype=np.float32)

    # ---- an episode -----------------------------------------------------------------
    def reset(self, rng: np.random.Generator) -> None:
        self.rng = rng
        self._draw()
        n = self.n
        self.eps, self.payment, self.utility = np.zeros(n), np.zeros(n), np.zeros(n)
        self.report = self.cost.copy()
        self.live = np.ones(n, dtype=bool)
        self.n_live = n
        self.round = 0
        self.total_payment, self.share_bought = 0.0, 0.0
        self.ledger = (
            None if self.budget is None else PrivacyLedger(n, self.budget, self.accountant)
        )

    def _draw(self) -> None:
        self.market = self.population.sample(self.rng)
        self.cost = np.asarray(self.market.costs, dtype=float)

    def live_ids(self) -> np.ndarray | slice:
        """The live sellers: a slice while everyone is (no index arrays)."""
        return slice(None) if self.n_live == self.n else np.flatnonzero(self.live)

    def _round_mechanism(self, ids) -> Mechanism:
        """The mechanism for this round's live sellers: their data, their budgets' caps."""
        mech = self.mechanism
        if mech.needs_data:
            X, y = self.market.data  # type: ignore[misc]  # __init__ checked has_data
            mech = mech.with_data(X[ids], y[ids])
        if self.ledger is not None:
            led, idx = self.ledger, np.arange(self.n)[ids]
            mech = Budgeted(mech, Caps(led.lower_cap(idx), lambda pos: led.cap(idx[pos])))
        return mech

    def play(self, reports: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """One round: ``reports`` of the live sellers (in id order), clipped to the
        support.  Returns (their utilities, which of them are now out of budget)."""
        ids = self.live_ids()
        z = np.clip(reports, self.floor, self.high)
        out = self._round_mechanism(ids).run(z, self.rng)
        cost = self.cost[ids]
        if self.ledger is None:
            u = out.utilities(cost)  # t_i - c_i eps_i
            gone = np.zeros(z.size, dtype=bool)
        else:  # c_i x the increase of the composed loss (docs/ledger.md)
            idx = np.arange(self.n)[ids]
            u = out.payments - privacy_cost(cost, self.ledger.charge(idx, out.eps))
            gone = self.ledger.exhausted()[idx]
        self.report[ids], self.eps[ids], self.payment[ids], self.utility[ids] = (
            z,
            out.eps,
            out.payments,
            u,
        )
        self.total_payment = float(out.payments.sum())
        self.share_bought = float(np.count_nonzero(out.eps)) / z.size
        self.round += 1
        if self.new_costs:
            self._draw()
        if gone.any():
            self.live[np.arange(self.n)[ids][gone]] = False
            self.n_live = int(self.live.sum())
        return u, gone

    def observations(self, ids=None) -> np.ndarray:
        """The (k, entries) float32 observations of sellers ``ids`` (default: the live)."""
        ids = self.live_ids() if ids is None else ids
        cols = [self.cost[ids], self.eps[ids], self.payment[ids], self.report[ids]]
        k = cols[0].size
        if self.public:
            cols += [np.full(k, self.total_payment), np.full(k, self.share_bought)]
        if self.ledger is not None:
            cols.append(np.maximum(self.ledger.left[ids], 0.0))
        obs = np.empty((k, len(cols)), dtype=np.float32)
        for j, c in enumerate(cols):
            obs[:, j] = c
        return obs


def _check_action(action, who: str) -> float:
    a = np.asarray(action, dtype=float) if not isinstance(action, np.ndarray) else action
    if a.shape != (1,):
        raise MarketSimError(f"{who}: an action is a report of shape (1,), got shape {a.shape}")
    v = float(a[0])
    if not np.isfinite(v):
        raise MarketSimError(f"{who}: the report must be a finite number (got {v!r})")
    return v


def _stack_actions(actions, agents: list[str]) -> np.ndarray:
    """The live agents' reports, in id order, from the actions dict (checked)."""
    if not isinstance(actions, dict):
        kind = type(actions).__name__
        raise MarketSimError(f"actions must be a dict of agent -> report (got a {kind})")
    extra = [a for a in actions if a not in set(agents)] if len(actions) >= len(agents) else []
    if extra:  # unknown, or a seller that left: only live sellers act
        raise MarketSimError(
            f"an action for {extra[0]!r}, which is not a live seller "
            f"({len(agents)} live: {agents[0]} ... {agents[-1]})"
        )
    try:
        a = np.asarray([actions[ag] for ag in agents], dtype=float)
    except KeyError as exc:
        raise MarketSimError(f"no action for {exc.args[0]}: every live seller reports") from None
    except (TypeError, ValueError):
        for ag in agents:
            _check_action(actions[ag], ag)  # names the offending seller
        raise
    if a.shape != (len(agents), 1):
        for ag in agents:
            _check_action(actions[ag], ag)
    if not np.all(np.isfinite(a)):
        bad = agents[int(np.flatnonzero(~np.isfinite(a[:, 0]))[0])]
        raise MarketSimError(f"{bad}: the report must be a finite number")
    return a[:, 0]


def _as_dicts(agents: list[str], obs: np.ndarray, u: np.ndarray, gone: np.ndarray, truncated):
    """PettingZoo's five dicts from the round's arrays (rows in the order of ``agents``)."""
    return (
        dict(zip(agents, obs, strict=True)),
        dict(zip(agents, u.tolist(), strict=True)),
        dict(zip(agents, gone.tolist(), strict=True)),
        dict.fromkeys(agents, bool(truncated)),
        {a: {} for a in agents},
    )


# ---- the multi-agent environment -----------------------------------------------------------
class MarketEnv(_ParallelEnv):
    """The sellers of one market as PettingZoo parallel agents (module docstring).

    ``n_sellers`` with a cost law ``dist`` (default 20), or a population (``population=``,
    or ``dist`` a population spec; anything ``as_population`` takes);
    ``mechanism`` (a registered name or spec, class or instance); ``mu``, ``sigma``,
    ``gamma``, ``privacy`` as in :class:`~market_sim.agents.MarketModel`; ``rounds`` per
    episode; ``new_costs_each_round``; ``public`` adds last round's public statistics
    to every observation; ``budget`` (eps or (eps, delta)) with ``accountant``
    (``basic``, ``rdp``, ``pld``) keeps each seller's lifetime privacy loss."""

    metadata = {"name": "market_sim_market_v0", "render_modes": [], "is_parallelizable": True}

    def __init__(self, n_sellers: int | None = None, *, seed: int | None = None, **options):
        super().__init__()
        self.core = MarketCore(n_sellers, **options)
        self.possible_agents = [f"seller_{i}" for i in range(self.core.n)]
        self.agents: list[str] = []
        self._seed = seed
        self._rng: np.random.Generator | None = None
        self._obs_spaces: dict[str, spaces.Box] = {}
        self._act_spaces: dict[str, spaces.Box] = {}
        self.render_mode = None

    def observation_space(self, agent: str) -> spaces.Box:
        space = self._obs_spaces.get(agent)
        if space is None:
            low, high = self.core.observation_bounds()
            space = self._obs_spaces[agent] = spaces.Box(low, high, dtype=np.float32)
        return space

    def action_space(self, agent: str) -> spaces.Box:
        space = self._act_spaces.get(agent)
        if space is None:
            c = self.core
            space = self._act_spaces[agent] = spaces.Box(c.low, c.high, (1,), np.float32)
        return space

    def reset(self, seed: int | None = None, options: dict | None = None):
        if seed is not None or self._rng is None:
            self._rng = np.random.default_rng(self._seed if seed is None else seed)
        self.core.reset(self._rng)
        self.agents = self.possible_agents[:]
        obs = self.core.observations()
        return dict(zip(self.agents, obs, strict=True)), {a: {} for a in self.agents}

    def step(self, actions: dict[str, Any]):
        if not self.agents:
            raise MarketSimError("the episode is over: call reset() first")
        agents, ids = self.agents, self.core.live_ids()
        u, gone = self.core.play(_stack_actions(actions, agents))
        over = self.core.round >= self.core.rounds
        if over and self.core.rounds == 1:  # a one-shot game ends in its terminal state
            gone = np.ones_like(gone)
        truncated = over and self.core.rounds > 1
        # every seller that acted gets its observation (a leaver its last one)
        out = _as_dicts(agents, self.core.observations(ids), u, gone, truncated)
        if over:
            self.agents = []
        elif gone.any():
            self.agents = [a for a, g in zip(agents, gone.tolist(), strict=True) if not g]
        return out

    def close(self) -> None:
        pass


# ---- the others' fixed strategy --------------------------------------------------------------
class _Context:
    """What a model-free strategy may read of the model: the cost law and the rng."""

    def __init__(self, dist, rng):
        self.dist, self.rng = dist, rng


def as_opponents(spec, law) -> Callable[[np.ndarray, np.random.Generator], np.ndarray]:
    """A function (costs, rng) -> reports for the sellers who do not learn.

    ``spec``: ``"truthful"`` (or None), a bid function of costs (a callable, e.g. a
    :class:`~market_sim.games.equilibrium.BNEResult`), or a registered strategy that needs
    no Mesa market (its ``report_all`` reads only ``model.dist`` and ``model.rng``:
    ``truthful``, ``shade``, ``random``).  Reports are clipped to the support."""
    from ..agents.strategies import SellerGroup, Strategy, as_strategy

    lo, hi = law.support
    if spec is None or (isinstance(spec, str) and spec in ("truthful", "truth")):
        return lambda c, rng: c
    if callable(spec) and not isinstance(spec, type | Strategy):
        return _bid_function(spec, lo, hi)
    strat = as_strategy(spec)
    name = getattr(strat, "name", "") or type(strat).__name__

    def play(costs, rng):
        k = costs.size
        rows = np.arange(k)
        group = SellerGroup(rows, rows, rows, costs, costs, np.zeros(k))
        return np.clip(np.asarray(strat.report_all(group, _Context(law, rng)), float), lo, hi)

    try:  # a probe: does it work without a Mesa market?
        probe = play(np.array([lo, hi], dtype=float), np.random.default_rng(0))
    except (AttributeError, TypeError, NotImplementedError):
        raise MarketSimError(
            f"opponent strategy {name!r} needs a Mesa market; SellerEnv's opponents play "
            "truthful, shade, random or a bid function of costs (e.g. a BNEResult)"
        ) from None
    if probe.shape != (2,):
        raise MarketSimError(f"opponent strategy {name!r} must give one report per seller")
    return play


def _bid_function(fn, lo, hi):
    def play(costs, rng):
        b = np.asarray(fn(costs), dtype=float)
        if b.shape != costs.shape or not np.all(np.isfinite(b)):
            raise MarketSimError("the opponents' bid function must give one finite bid per cost")
        return np.clip(b, lo, hi)

    return play


# ---- one learning seller --------------------------------------------------------------------
class SellerEnv(_GymEnv):
    """Seller 0 of a market learns; the others play ``opponents`` (:func:`as_opponents`).

    Options as :class:`MarketEnv`'s; ``rounds`` per episode (default 1: every episode is
    one market, drawn at ``reset``).  Observation, action and reward: the module doc."""

    metadata = {"render_modes": []}

    def __init__(
        self,
        n_sellers: int | None = None,
        *,
        opponents="truthful",
        rounds: int = 1,
        seed: int | None = None,
        **options,
    ):
        super().__init__()
        self.core = MarketCore(n_sellers, rounds=rounds, **options)
        if self.core.n < 2:
            raise MarketSimError("SellerEnv needs at least 2 sellers (one learns)")
        self.opponents = as_opponents(opponents, self.core.law)
        low, high = self.core.observation_bounds()
        self.observation_space = spaces.Box(low, high, dtype=np.float32)
        self.action_space = spaces.Box(self.core.low, self.core.high, (1,), np.float32)
        self._seed = seed
        self._started = False

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        super().reset(seed=seed if seed is not None or self._started else self._seed)
        self._started = True
        self.core.reset(self.np_random)
        return self.core.observations(slice(0, 1))[0], {}

    def step(self, action):
        c = self.core
        if not c.live[0] or c.round >= c.rounds:
            raise MarketSimError("the episode is over: call reset() first")
        mine = _check_action(action, "SellerEnv")
        ids = c.live_ids()
        costs = c.cost[ids]
        reports = np.empty(costs.size)
        reports[0] = mine
        reports[1:] = self.opponents(costs[1:], c.rng)
        u, gone = c.play(reports)
        obs = c.observations(slice(0, 1))[0]
        info = {"eps": float(c.eps[0]), "payment": float(c.payment[0])}
        over = c.round >= c.rounds
        one_shot = over and c.rounds == 1  # terminated, not truncated (module doc)
        return obs, float(u[0]), bool(gone[0]) or one_shot, over and not one_shot, info
