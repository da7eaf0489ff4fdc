"""No-regret learners: Hedge, Exp3 and Q-learning over a seller's arms.

Each is a :class:`~market_sim.agents.strategies.Strategy` on the vectorised
group path: one instance serves its whole group and keeps per-seller state in
arrays indexed by ``group.rows``; every random draw comes from ``model.rng``
(one uniform per deciding seller per round).

**Arms** (all three), one of:

* ``above=n`` (the default, n = ``DEFAULT_ABOVE`` = 16): arm j reports
  ``cost + (top - cost) j / n``, j = 0..n: the truth (arm 0), then n + 1 evenly
  spaced reports up to the top of the support.  Every bid between the cost and
  the top is within (top - cost) / (2n) of an arm, so the action set contains the
  equilibrium of the first-price-like mechanisms (whose BNE bids lie in [c, top])
  to that resolution; the dynamics study reports the distance (``bne_action_gap``).
* ``multipliers=(...)``: arm j reports ``cost * multipliers[j]`` clipped to the
  support (``DEFAULT_MULTIPLIERS`` = 0.8 ... 2.0, the default of earlier versions,
  misses the BNE bids of cheap sellers: on Beta(2, 5) costs on [0, 2] a seller of
  cost 0.05 bids far above 2 x 0.05).
* ``grid=n``: arm 0 is the truth and arms 1..n the midpoints of n equal cells of
  the support (``model.report_grid``, the grid best responses and regret use).

Ties between arms go to the truth (then to the lowest markup, or the multiplier
nearest 1).

**Regret.**  The learners declare their arms (``arm_reports``), so the model
tracks every seller's cumulative external regret against the best fixed arm
in hindsight (``avg_external_regret`` in the rounds frame, ``external_regret``
in the seller frame; see :class:`~market_sim.agents.model.MarketModel`).

Learners:

* :class:`Hedge` (``hedge``): full information.  After each round the model
  hands it every arm's utility against the others' actual reports of the round
  (``Mechanism.deviation_utilities``: exact expectations for randomized
  mechanisms), and the seller plays arm j with probability proportional to
  exp(eta G_j / S), G_j the cumulative utility of arm j, S the scale.
* :class:`Exp3` (``exp3``): bandit, realised utility only (Auer et al. 2002).
* :class:`QLearning` (``q-learning``): epsilon-greedy Q-learning with a state
  and exploration exp(-beta t), as in the algorithmic-collusion studies
  (Calvano et al. 2020).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import ClassVar

import numpy as np

from ..errors import MarketSimError
from .strategies import SellerGroup, Strategy

__all__ = ["DEFAULT_ABOVE", "DEFAULT_MULTIPLIERS", "Hedge", "Exp3", "QLearning"]

#: the arms of ``multipliers=`` in earlier versions (1.0 is the truth); no longer the default:
#: on Beta(2, 5) costs they miss the BNE bids of the cheapest sellers (issue #51)
DEFAULT_MULTIPLIERS = (0.8, 0.9, 1.0, 1.1, 1.25, 1.5, 2.0)
#: default arms: ``above=16``, 17 reports evenly spaced from the true cost to the top
DEFAULT_ABOVE = 16


def _multipliers(value, who: str) -> np.ndarray:
    """``multipliers=``: a non-empty list of finite numbers > 0."""
    if isinstance(value, (int, float, np.number)) and not isinstance(value, bool):
        value = (value,)
    try:
        arr = np.asarray(value, dtype=float).reshape(-1)
    except (TypeError, ValueError):
        raise MarketSimError(f"{who}: multipliers must be numbers > 0 (got {value!r})") from None
    if arr.size == 0 or not np.all(np.isfinite(arr)) or arr.min() <= 0:
        raise MarketSimError(f"{who}: multipliers must be a non-empty list of numbers > 0")
    return arr


def _markups(cost, top: float, fraction) -> np.ndarray:
    """The ``above`` arms: cost + fraction (top - cost), from the truth (0) to the top (1)."""
    return cost + np.maximum(top - cost, 0.0) * fraction


def _positive(value, what: str, who: str) -> float:
    try:
        v = float(value)
    except (TypeError, ValueError):
        raise MarketSimError(f"{who}: {what} must be a number > 0 (got {value!r})") from None
    if not (np.isfinite(v) and v > 0):
        raise MarketSimError(f"{who}: {what} must be a number > 0 (got {value!r})")
    return v


def _horizon(value, who: str) -> int | None:
    if value is None:
        return None
    if not (isinstance(value, (int, np.integer)) and not isinstance(value, bool) and value >= 1):
        raise MarketSimError(f"{who}: horizon must be an integer >= 1 (got {value!r})")
    return int(value)


@dataclass
class _ArmLearner(Strategy):
    """Arms (markups, multipliers or a grid) and the per-seller bookkeeping shared by
    the learners."""

    multipliers: tuple | None = None
    grid: int | None = None
    above: int | None = None

    def __post_init__(self):
        who = self.name or type(self).__name__
        given = [k for k in ("multipliers", "grid", "above") if getattr(self, k) is not None]
        if len(given) > 1:
            raise MarketSimError(
                f"{who}: give one of multipliers, grid or above, not {' and '.join(given)}"
            )
        self._mults = None
        if self.multipliers is not None:
            self._kind = "multipliers"
            self._mults = _multipliers(self.multipliers, who)
            # arms by distance of their multiplier from 1 (stable): the truth wins ties
            self._order = np.argsort(np.abs(np.log(self._mults)), kind="stable")
            return
        self._kind = "grid" if self.grid is not None else "above"
        n = self.grid if self.grid is not None else self.above
        n = DEFAULT_ABOVE if n is None else n
        if not (isinstance(n, (int, np.integer)) and not isinstance(n, bool) and n >= 1):
            raise MarketSimError(f"{who}: {self._kind} must be an integer >= 1 (got {n!r})")
        # arm 0 the truth, then the grid's points in order: the truth wins ties
        self._order = np.arange(int(n) + 1)

    @property
    def n_arms(self) -> int:
        return int(self._order.size)

    def arm_reports(self, sellers: SellerGroup, model) -> np.ndarray:
        """(len(sellers), K): each seller's report at every arm."""
        n = int(self._order.size - 1)
        if self._kind == "grid":
            return model.report_grid(sellers.cost, n)
        lo, hi = model.dist.support
        if self._kind == "above":
            return _markups(sellers.cost[:, None], hi, np.arange(n + 1) / n)
        return np.clip(sellers.cost[:, None] * self._mults, lo, hi)

    def _reports_of(self, arm: np.ndarray, sellers: SellerGroup, model) -> np.ndarray:
        """The report of each seller's chosen arm (the same numbers as ``arm_reports``)."""
        lo, hi = model.dist.support
        n = self._order.size - 1
        if self._kind == "grid":
            mids = lo + (hi - lo) * (np.arange(n) + 0.5) / n  # as model.report_grid
            return np.where(arm == 0, sellers.cost, mids[np.maximum(arm - 1, 0)])
        if self._kind == "above":
            return _markups(sellers.cost, hi, arm / n)
        return np.clip(sellers.cost * self._mults[arm], lo, hi)

    def _greedy(self, values: np.ndarray) -> np.ndarray:
        """Row-wise argmax of ``values`` (n, K), ties to the earliest arm of ``_order``."""
        v = values[:, self._order]
        top = v.max(axis=1, keepdims=True)
        near = v >= top - 1e-12 * np.maximum(1.0, np.abs(top))
        return self._order[np.argmax(near, axis=1)]

    def _start_common(self, n: int, model, horizon) -> None:
        self.n = int(n)
        self.T = int(horizon if horizon is not None else model.rounds)
        self.last = np.zeros(n, dtype=np.intp)  # each seller's last arm
        self.plays = np.zeros(n, dtype=np.int64)  # rounds each seller has learned from


def _rows(rows: np.ndarray, n: int) -> slice | np.ndarray:
    """A slice when the rows are the whole group (views, no copies)."""
    return slice(None) if rows.size == n else rows


@dataclass
class Hedge(_ArmLearner):
    """Hedge: full-information multiplicative weights over the arms.

    Seller i plays arm j with probability p_j proportional to
    exp(eta_t G_j / S) (Freund & Schapire 1997; Cesa-Bianchi & Lugosi 2006,
    Sec. 2.1), G_j the cumulative utility of arm j against the others' actual
    reports of every past round, from ``mechanism.deviation_utilities``.
    ``eta``: the learning rate; default the textbook fixed rate
    eta = sqrt(8 ln K / T), T = ``horizon`` (default the model's rounds), with
    regret <= S sqrt(T ln K / 2) (C.-B. & L. Thm 2.2); ``anytime=true`` uses
    eta_t = sqrt(8 ln K / t) instead (Thm 2.3), t the seller's round.
    ``scale`` S: a bound on the spread (max - min over arms) of a seller's arm
    utilities in one round, which makes the utilities [0, 1]-ranged as the rate
    assumes; default, per seller, the largest spread it has seen so far, so the
    rate adapts to the mechanism's units (eta_t / S_t never increases, the
    condition of the time-varying bound).  Weights are kept as cumulative
    utilities (exponentiated after subtracting the row maximum), so they never
    overflow.
    """

    name: ClassVar[str] = "hedge"
    full_information: ClassVar[bool] = True
    eta: float | None = None
    anytime: bool = False
    scale: float | None = None
    horizon: int | None = None
    G: np.ndarray | None = field(
        default=None, init=False, repr=False
    )  # (n, K) cumulative arm utilities
    S: np.ndarray | None = field(
        default=None, init=False, repr=False, compare=False
    )  # (n,) scale in force

    def __post_init__(self):
        super().__post_init__()
        if self.eta is not None:
            self.eta = _positive(self.eta, "eta", "hedge")
        if self.scale is not None:
            self.scale = _positive(self.scale, "scale", "hedge")
        if not isinstance(self.anytime, (bool, np.bool_)):
            raise MarketSimError(f"hedge: anytime must be true or false (got {self.anytime!r})")
        self.horizon = _horizon(self.horizon, "hedge")

    def start(self, n, model):
        self._start_common(n, model, self.horizon)
        self.G = np.zeros((n, self.n_arms))
        self.S = np.full(n, self.scale if self.scale is not None else 0.0)

    def rates(self, rows=None) -> np.ndarray:
        """eta_t / S of each seller (rows of the group; default all) for its next draw."""
        assert self.S is not None, "hedge: start(n, model) first"
        take = slice(None) if rows is None else rows
        S = self.S[take]
        lnk = math.log(self.n_arms)
        if self.eta is not None:
            eta: float | np.ndarray = self.eta
        elif self.anytime:
            eta = np.sqrt(8.0 * lnk / (self.plays[take] + 1.0))
        else:
            eta = math.sqrt(8.0 * lnk / self.T)
        return np.divide(eta, S, out=np.zeros(S.shape), where=S > 0)

    def probabilities(self, rows=None) -> np.ndarray:
        """(n, K): each seller's probability of every arm at its next draw."""
        assert self.G is not None, "hedge: start(n, model) first"
        take = slice(None) if rows is None else rows
        z = self.G[take] * self.rates(rows)[:, None]
        z -= z.max(axis=1, keepdims=True)
        np.exp(z, out=z)
        z /= z.sum(axis=1, keepdims=True)
        return z

    def report_all(self, sellers, model):
        assert self.G is not None, "hedge: start(n, model) first"
        take = _rows(sellers.rows, self.n)
        z = self.G[take] * self.rates(take)[:, None]
        z -= z.max(axis=1, keepdims=True)
        np.exp(z, out=z)
        np.cumsum(z, axis=1, out=z)  # unnormalised cdf; one uniform per seller
        u = model.rng.random(z.shape[0]) * z[:, -1]
        arm = np.count_nonzero(z <= u[:, None], axis=1)  # first j with cdf_j > u
        np.minimum(arm, self.n_arms - 1, out=arm)
        self.last[take] = arm
        return self._reports_of(arm, sellers, model)

    def observe_arms(self, sellers, utilities, model):
        assert self.G is not None and self.S is not None, "hedge: start(n, model) first"
        take = _rows(sellers.rows, self.n)
        self.G[take] += utilities
        if self.scale is None:  # the largest spread of arm utilities seen so far
            spread = utilities.max(axis=1) - utilities.min(axis=1)
            self.S[take] = np.maximum(self.S[take], spread)
        self.plays[take] += 1


@dataclass
class Exp3(_ArmLearner):
    """Exp3: bandit multiplicative weights, from the realised utility only.

    Auer, Cesa-Bianchi, Freund & Schapire (2002), Fig. 1: play arm j with
    p_j = (1 - gamma) w_j / sum w + gamma / K, w_j = exp(gamma Ghat_j / K); after
    the round the played arm's reward x in [0, 1] enters as x / p_j (an unbiased
    estimate of every arm's reward).  ``gamma`` default: their Cor. 3.2,
    min(1, sqrt(K ln K / ((e - 1) T))), T = ``horizon`` (default the model's
    rounds), with expected regret <= 2.63 sqrt(T K ln K) in reward units.
    Rewards: the realised utility mapped to [0, 1] by the lowest and highest
    utility the seller has realised so far, the only scale a bandit can know; a
    seller that has seen one value only gets 0.  The range is the observed one
    only (0 is not added to it: with utilities in [10, 11] a range [0, 11] squeezed
    every reward into [0.91, 1] and Exp3 played nearly uniformly, regret 474 at
    T = 10^4), so a shift of all utilities by a constant leaves the rewards, and
    with the same seed the play, unchanged.
    """

    name: ClassVar[str] = "exp3"
    gamma: float | None = None
    horizon: int | None = None
    Ghat: np.ndarray | None = field(
        default=None, init=False, repr=False
    )  # (n, K) estimated rewards

    def __post_init__(self):
        super().__post_init__()
        if self.gamma is not None:
            g = _positive(self.gamma, "gamma", "exp3")
            if g > 1:
                raise MarketSimError(f"exp3: gamma must be in (0, 1] (got {self.gamma!r})")
            self.gamma = g
        self.horizon = _horizon(self.horizon, "exp3")

    @property
    def rate(self) -> float:
        """gamma (the given one, or Cor. 3.2's)."""
        if self.gamma is not None:
            return float(self.gamma)
        k = self.n_arms
        if k == 1:
            return 1.0
        return min(1.0, math.sqrt(k * math.log(k) / ((math.e - 1.0) * self.T)))

    def start(self, n, model):
        self._start_common(n, model, self.horizon)
        k = self.n_arms
        self.Ghat = np.zeros((n, k))
        self.p_last = np.full(n, 1.0 / k)  # the probability of the arm last played
        self.low, self.high = np.full(n, np.inf), np.full(n, -np.inf)  # realised range

    def probabilities(self, rows=None) -> np.ndarray:
        """(n, K): p_j = (1 - gamma) w_j / sum w + gamma / K."""
        assert self.Ghat is not None, "exp3: start(n, model) first"
        take = slice(None) if rows is None else rows
        g, k = self.rate, self.n_arms
        z = self.Ghat[take] * (g / k)
        z -= z.max(axis=1, keepdims=True)
        np.exp(z, out=z)
        z *= (1.0 - g) / z.sum(axis=1, keepdims=True)
        z += g / k
        return z

    def report_all(self, sellers, model):
        take = _rows(sellers.rows, self.n)
        p = self.probabilities(take)
        cdf = np.cumsum(p, axis=1)
        u = model.rng.random(p.shape[0]) * cdf[:, -1]
        arm = np.minimum(np.count_nonzero(cdf <= u[:, None], axis=1), self.n_arms - 1)
        self.last[take] = arm
        self.p_last[take] = p[np.arange(arm.size), arm]
        return self._reports_of(arm, sellers, model)

    def observe_all(self, sellers, utilities, model):
        assert self.Ghat is not None, "exp3: start(n, model) first"
        rows = sellers.rows
        u = np.asarray(utilities, dtype=float)
        lo = self.low[rows] = np.minimum(self.low[rows], u)
        hi = self.high[rows] = np.maximum(self.high[rows], u)
        span = hi - lo  # 0 until two values were seen
        x = np.divide(u - lo, span, out=np.zeros(u.shape), where=span > 0)
        self.Ghat[rows, self.last[rows]] += x / self.p_last[rows]  # rows are unique
        self.plays[rows] += 1


_STATES = ("bought", "arm", "none")


@dataclass
class QLearning(_ArmLearner):
    """Q-learning: epsilon-greedy over the arms with a one-round memory.

    As in the algorithmic-collusion studies (Calvano, Calzolari, Denicolò &
    Pastorello 2020): Q(s, a) <- (1 - alpha) Q(s, a) + alpha (u + delta max_a'
    Q(s', a')), exploration at rate eps_t = exp(-beta t) (t the seller's
    rounds so far; an exploring seller picks an arm uniformly), Q starting at 0
    (the value of never selling).  Defaults: their alpha = 0.15, delta = 0.95;
    beta = ln(100) / T (T = ``horizon``, default the model's rounds: exploration
    falls to 1% by the last round, where their 4e-6 suits 10^6 periods).
    ``state``: ``bought`` (whether the seller was bought last round; their state
    is the last price profile, which with m sellers has K^m values), ``arm``
    (its own last arm) or ``none`` (a stateless learner).  One uniform u per
    seller decides both: explore iff u < eps_t, then arm floor(K u / eps_t).
    Q-learning is invariant to the utility scale (with Q starting at 0), so
    utilities enter as they are.
    """

    name: ClassVar[str] = "q-learning"
    alpha: float = 0.15
    delta: float = 0.95
    beta: float | None = None
    state: str = "bought"
    horizon: int | None = None
    Q: np.ndarray | None = field(
        default=None, init=False, repr=False, compare=False
    )  # (n, states, K)

    def __post_init__(self):
        super().__post_init__()
        self.alpha = _positive(self.alpha, "alpha", "q-learning")
        if self.alpha > 1:
            raise MarketSimError(f"q-learning: alpha must be in (0, 1] (got {self.alpha!r})")
        try:
            self.delta = float(self.delta)
        except (TypeError, ValueError):
            raise MarketSimError(
                f"q-learning: delta must be in [0, 1) (got {self.delta!r})"
            ) from None
        if not (0 <= self.delta < 1):
            raise MarketSimError(f"q-learning: delta must be in [0, 1) (got {self.delta!r})")
        if self.beta is not None:
            self.beta = _positive(self.beta, "beta", "q-learning")
        if self.state not in _STATES:
            raise MarketSimError(
                f"q-learning: state must be one of {', '.join(_STATES)} (got {self.state!r})"
            )
        self.horizon = _horizon(self.horizon, "q-learning")

    @property
    def decay(self) -> float:
        """beta (the given one, or ln(100) / T)."""
        return float(self.beta) if self.beta is not None else math.log(100.0) / self.T

    def start(self, n, model):
        self._start_common(n, model, self.horizon)
        k = self.n_arms
        states = {"bought": 2, "arm": k, "none": 1}[self.state]
        self.Q = np.zeros((n, states, k))
        self.s = np.zeros(n, dtype=np.intp)  # current state (not bought / arm 0)

    def greedy(self, rows=None) -> np.ndarray:
        """Each seller's greedy arm in its current state."""
        assert self.Q is not None, "q-learning: start(n, model) first"
        r = np.arange(self.n) if rows is None else np.asarray(rows)
        return self._greedy(self.Q[r, self.s[r]])

    def report_all(self, sellers, model):
        rows, k = sellers.rows, self.n_arms
        explore = np.exp(-self.decay * self.plays[rows])  # eps_t
        u = model.rng.random(rows.size)
        exploring = u < explore
        explored = np.minimum((np.minimum(u / explore, 1.0) * k).astype(np.intp), k - 1)
        arm = np.where(exploring, explored, self.greedy(rows))
        self.last[rows] = arm
        return self._reports_of(arm, sellers, model)

    def observe_all(self, sellers, utilities, model):
        assert self.Q is not None, "q-learning: start(n, model) first"
        rows = sellers.rows
        a, s = self.last[rows], self.s[rows]
        if self.state == "bought":
            nxt = (model.eps[sellers.ids] > 0).astype(np.intp)
        elif self.state == "arm":
            nxt = a
        else:
            nxt = np.zeros(rows.size, dtype=np.intp)
        future = self.Q[rows, nxt].max(axis=1)
        q = self.Q[rows, s, a]
        self.Q[rows, s, a] = (1 - self.alpha) * q + self.alpha * (
            np.asarray(utilities, dtype=float) + self.delta * future
        )
        self.s[rows] = nxt
        self.plays[rows] += 1
