"""PSRO over bid functions, and the collusion index.

**PSRO** (policy-space response oracles; Lanctot et al. 2017).  ``psro(mechanism,
dist, n_sellers, strategies, iterations=..., rng=...)`` starts from a population of
bid functions (a seller of cost c reports b(c)) and, each iteration:

1. *meta-game*: the symmetric game whose pure strategies are the population, each of
   the ``n_sellers`` sellers playing one of them, with payoff a seller's mean utility
   t - c eps.  Its payoffs are estimated on one fixed sample of ``markets`` markets
   (common random numbers: every profile sees the same costs and mechanism seeds);
   seller 0 is the one whose payoff is wanted, the others follow in strategy order.
   The game is reduced to ``players`` players by EGTA's deviation-preserving reduction
   (``egta.dpr_game``) and solved by EGTA's replicator dynamics
   (``egta.find_equilibria``; the least-regret equilibrium is taken).
2. *best response* to the meta-equilibrium mixture x, on a cost grid as the BNE
   solver's step: the others each draw a strategy from x (fixed uniforms per market
   and seller, mapped through x's cumulative shares: common random numbers again); one
   ``mechanism.deviations`` call per market gives seller 0's expected eps E(z) and
   payment T(z) at every candidate report z, and u(c, z) = T(z) - c E(z).  BR(c) is the
   logit-smoothed best candidate at or above c (``temperature``), made non-decreasing,
   the truth when nothing beats it by more than 1e-9 of the utility scale (so an IC
   mechanism's best response is the truth).
3. *regret* (NashConv per player), on a second, held-out sample of markets: u(c, z) at
   every candidate report z (the bid grid, the truth, the mixture's bids and the
   fitted response's) and ``regret`` = sum_c w(c) [max_z u(c, z) - u_mix(c)], the
   gain of the exact best response over the candidates (any report, below cost
   included).  A maximum over one sample is biased upwards (conservative); on
   first-price it is within 1% of the closed-form gain (tests/test_psro.py).  The
   fitted response's own gain is kept as ``regret_response``: a lower bound, 8-15%
   below the regret from truthful + ``shade:factor=1.5`` at m = 3.  The weights
   w(c) are the law's expectations of the grid's hat functions
   (:func:`expectation_weights`: the trapezoid rule under the law, the end points
   half a cell), so the mixture's ex-ante ``utility`` of the exact first-price BNE is
   1/(m(m + 1)) to 0.1%.  ``regret_relative`` divides by that utility.
4. stop when ``regret <= tol x utility``; else add BR (``br1``, ``br2``, ...).  The
   result reports the iteration of least regret (``best_iteration``) and keeps the
   last one as ``last``.

**Collusion index** (Calvano et al., AER 2020): Delta = (pi - pi_N) / (pi_M - pi_N), 0
at the competitive benchmark, 1 at the collusive one.  In this market (a procurement
auction) pi is a seller's mean utility per round, and the references are

* pi_N: a seller's ex-ante utility at the symmetric Bayes-Nash equilibrium (``nash``:
  the truth for an IC mechanism, a :class:`~market_sim.games.equilibrium.BNEResult` or any bid
  function otherwise);
* pi_M: Calvano's joint-profit benchmark, the sellers' largest joint utility per
  seller under the mechanism.  Searched over cartel rules: "the j cheapest sellers
  report p, the others the top" and common markups (every seller reports min(k c,
  top)); one rule for all markets, the best mean.  In single-unit first-price
  procurement the rule "the cheapest seller just below the top" is the joint maximum,
  E[1 - min c]/m = 1/(m + 1) (0.25 at m = 3); for other mechanisms the best rule is a
  lower bound of the joint maximum.  The best common markup alone (1/(2m) = 0.1667 at
  m = 3, all sellers at the top sharing the unit) is kept as ``u_markup``, with its
  index ``index_markup``: the narrower "cartel that agrees on one number" reference.

Every reference report lies in [lo + 1e-6 (hi - lo), top] (:func:`report_range`):
top is hi where the cost density there is positive, else the law's 1 - 1e-6
quantile (at hi of Beta(2, 5) the virtual cost is infinite and the offline
mechanism buys from nobody).
Both on the same ``markets`` sampled markets.  :class:`CollusionScale` maps utilities
(one per seed) to Delta with a t interval over the seeds; :func:`collusion_frame` adds
Delta per round to a :class:`~market_sim.agents.MarketModel` seller frame.
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from ..errors import MarketSimError
from ..execution import Job, Shared, check_executor, run_jobs
from ..files import atomic_write, fit_titles, json_plain, save_png
from ..mechanisms.base import Mechanism, as_mechanism, mechanism_name
from ..parameters import check_int
from ..population import Population, as_population
from .env import as_opponents
from .replicator import find_equilibria
from .symmetric_game import SymmetricGame, _compositions, dpr_game, dpr_support

if TYPE_CHECKING:
    import pandas as pd

__all__ = [
    "BidStrategy",
    "PsroResult",
    "psro",
    "CollusionScale",
    "collusion_scale",
    "collusion_frame",
    "expectation_weights",
    "report_range",
    "plot",
]

CONTEXT_KEYS = ("mu", "sigma", "gamma", "privacy")
_TIE = 1e-9  # a report must beat the truth by this share of the utility scale


# ---- strategies: bid functions --------------------------------------------------------------
@dataclass(frozen=True)
class BidStrategy:
    """A named bid function ``play(costs, rng) -> reports``; a best response found by
    PSRO also keeps its cost grid and bids."""

    name: str
    play: Callable[[np.ndarray, np.random.Generator], np.ndarray] = field(repr=False)
    costs: np.ndarray | None = field(default=None, repr=False)
    bids: np.ndarray | None = field(default=None, repr=False)
    spec: object = field(default=None, repr=False)  # rebuilds ``play`` in another process


def _strategy(spec, law) -> BidStrategy:
    if isinstance(spec, BidStrategy):
        return spec
    if isinstance(spec, str):
        name = spec
    else:
        name = getattr(spec, "name", "") or getattr(spec, "__name__", "") or type(spec).__name__
        if not isinstance(name, str) or name == "<lambda>":
            name = "bid function"
    return BidStrategy(name, as_opponents(spec, law), spec=spec)


def _unique_names(strats: list[BidStrategy]) -> list[BidStrategy]:
    seen: dict[str, int] = {}
    out = []
    for s in strats:
        k = seen.get(s.name, 0)
        seen[s.name] = k + 1
        out.append(
            s if k == 0 else BidStrategy(f"{s.name}#{k + 1}", s.play, s.costs, s.bids, s.spec)
        )
    return out


# ---- the sample of markets ----------------------------------------------------------------------
class _Sample:
    """``markets`` markets of n costs (rounded up to a power of two), one mechanism seed
    per market, fixed uniforms for the sellers' draws from a mixture, and each
    strategy's reports (cached).  Costs and uniforms are a scrambled Sobol sequence in
    2n dimensions (costs through the quantile function, as the BNE solver's): far more
    even than i.i.d. draws, so a best response fitted on it is far less noisy."""

    def __init__(self, law, n: int, markets: int, rng: np.random.Generator):
        from scipy.stats import qmc

        k = max(0, math.ceil(math.log2(markets)))  # a scrambled Sobol sequence in 2n dims
        u = qmc.Sobol(d=2 * n, scramble=True, seed=rng).random_base2(k)
        lo, hi = law.support
        self.costs = np.clip(np.asarray(law.ppf(u[:, :n]), dtype=float), lo, hi)
        self.uniforms = u[:, n:]
        self.seeds = rng.integers(2**63, size=self.costs.shape[0])
        self._reports: dict[int, np.ndarray] = {}

    @property
    def markets(self) -> int:
        return int(self.costs.shape[0])

    def reports(self, i: int, strat: BidStrategy) -> np.ndarray:
        """Strategy ``i``'s reports for every seller of every market, (markets, n)."""
        r = self._reports.get(i)
        if r is None:
            rng = np.random.default_rng([int(self.seeds[0]) % 2**32, i])
            r = np.asarray(strat.play(self.costs.ravel(), rng), dtype=float)
            r = self._reports[i] = r.reshape(self.costs.shape)
        return r

    def eps_pay(self, mech: Mechanism, others: np.ndarray, cand: np.ndarray):
        """Seller 0's eps and payment at candidate reports ``cand`` ((markets, K) or
        (K,)) when the others report ``others`` (markets, n): two (markets, K) arrays."""
        M = self.markets
        cand = np.broadcast_to(cand, (M, cand.shape[-1]))
        E, T = np.empty(cand.shape), np.empty(cand.shape)
        zero = np.zeros(1, dtype=int)
        for k in range(M):
            reports = others[k].copy()
            reports[0] = cand[k, 0]
            out = mech.deviations(
                zero, cand[k][None, :], reports, np.random.default_rng(self.seeds[k])
            )
            E[k], T[k] = out.eps[0], out.payments[0]
        return E, T


class _MetaGame:
    """The payoff of a seller of strategy s against the others' split ``others`` (counts
    over the strategies, n - 1 in all), cached: one deviations call per market gives it
    for every strategy at once."""

    def __init__(self, mech, sample: _Sample, strategies: list[BidStrategy], law=None,
                 where: dict | None = None):  # fmt: skip
        self.mech, self.sample, self.strategies = mech, sample, strategies
        self.law, self.where = law, where or {}
        self._cache: dict[tuple, dict[int, float]] = {}

    def fill(self, n: int, players: int) -> None:
        """Compute every payoff the reduced game needs that is not cached yet, one task
        per split of the others (``market_sim.execution``; the same on any executor)."""
        S = len(self.strategies)
        todo: dict[tuple, np.ndarray] = {}
        for p in _compositions(players, S):
            for s in np.flatnonzero(p):
                for f in dpr_support(p, int(s), n, players)[1]:
                    others = np.array(f, dtype=np.int64)
                    others[s] -= 1
                    key = tuple((int(i), int(k)) for i, k in enumerate(others) if k)
                    if key not in todo and len(self._cache.get(key, {})) < S:
                        todo[key] = others
        portable = Shared([_portable(t) for t in self.strategies])
        mech, law, sample = Shared(self.mech), Shared(self.law), Shared(self.sample)
        jobs, missing = [], []
        for key, others in todo.items():
            miss = [t for t in range(S) if t not in self._cache.get(key, {})]
            jobs.append(Job(str(key), _payoff_job, (mech, law, sample, portable, others, miss)))
            missing.append(miss)
        for key, miss, values in zip(todo, missing, run_jobs(jobs, **self.where), strict=True):
            self._cache.setdefault(key, {}).update(zip(miss, values, strict=True))

    def payoff(self, s: int, others: np.ndarray) -> float:
        key = tuple((int(i), int(k)) for i, k in enumerate(others) if k)
        row = self._cache.setdefault(key, {})
        if s not in row:
            missing = [t for t in range(len(self.strategies)) if t not in row]
            row.update(zip(missing, self._payoffs(others, missing), strict=True))
        return row[s]

    def _payoffs(self, others: np.ndarray, strats: list[int]) -> np.ndarray:
        smp = self.sample
        labels = np.repeat(np.arange(others.size), others)  # sellers 1..n-1 in strategy order
        R = np.empty_like(smp.costs)
        for j, lab in enumerate(labels, start=1):
            R[:, j] = smp.reports(int(lab), self.strategies[lab])[:, j]
        cand = np.column_stack([smp.reports(t, self.strategies[t])[:, 0] for t in strats])
        E, T = smp.eps_pay(self.mech, R, cand)
        return np.mean(T - smp.costs[:, :1] * E, axis=0)  # u = t - c eps, seller 0

    def game(self, n: int, players: int) -> SymmetricGame:
        """The meta-game reduced to ``players`` players by EGTA's DPR (``egta.dpr_game``)."""
        S = len(self.strategies)
        if self.where.get("workers", 1) > 1 or self.where.get("executor", "local") != "local":
            self.fill(n, players)

        def full(counts):  # the payoff of each strategy played in the full profile
            out = np.full(S, np.nan)
            for s in np.flatnonzero(counts):
                others = np.array(counts, dtype=np.int64)
                others[s] -= 1  # the others of a seller of s
                out[s] = self.payoff(int(s), others)
            return out

        return dpr_game([s.name for s in self.strategies], n, players, full)


def _portable(strategy: BidStrategy):
    """(name, spec, play): the spec when there is one (``as_opponents`` rebuilds the bid
    function in the worker: it may be a closure), else the picklable ``play``."""
    if strategy.spec is not None:
        return (strategy.name, strategy.spec, None)
    return (strategy.name, None, strategy.play)


def _payoff_job(mech, law, sample: _Sample, portable, others, strats):
    """Task: the payoffs of ``strats`` against the split ``others`` (``_MetaGame``)."""
    built = [BidStrategy(name, play if spec is None else as_opponents(spec, law), spec=spec)
             for name, spec, play in portable]  # fmt: skip
    return _MetaGame(mech, sample, built)._payoffs(others, strats).tolist()


def _solve(meta: _MetaGame, n: int, players: int) -> np.ndarray:
    """The least-regret symmetric equilibrium of the (reduced) meta-game."""
    if len(meta.strategies) == 1:
        return np.ones(1)
    found = find_equilibria(meta.game(n, players))
    xs = [np.asarray(x, dtype=float) for x, _ in found]
    entropy = [-float(np.sum(x[x > 0] * np.log(x[x > 0]))) for x in xs]
    return xs[int(np.argmax(entropy))]


# ---- the best response and the regret ---------------------------------------------------------
@dataclass(frozen=True)
class _Oracle:
    mech: Mechanism
    law: object
    grid: np.ndarray  # costs
    weights: np.ndarray  # density x trapezoid spacing, normalised
    z: np.ndarray  # candidate reports
    floor: float
    temperature: float

    def respond(self, train: _Sample, fresh: _Sample, strategies, x: np.ndarray) -> _Response:
        """The fitted response on ``train`` (step 2) and, on ``fresh``, the regret of
        the mixture against the best candidate report and against that response
        (step 3)."""
        support = np.flatnonzero(x > 0)
        rng = np.random.default_rng(0)
        own = np.column_stack(
            [np.clip(strategies[s].play(self.grid, rng), self.floor, None) for s in support]
        )  # (grid, |support|): the mixture's bids at the grid costs
        br = self._fit(train, strategies, x, own)
        return self._measure(fresh, strategies, x, own, br)

    def _fit(self, train: _Sample, strategies, x: np.ndarray, own: np.ndarray) -> np.ndarray:
        """Step 2: the smoothed, monotone response on the grid, fitted on ``train``."""
        c, truth_z = self.grid, np.maximum(self.grid, self.floor)
        cand = np.unique(np.concatenate([self.z, truth_z, own.ravel()]))
        E, T = train.eps_pay(self.mech, _mixed_reports(train, strategies, x), cand)
        Eb, Tb = E.mean(axis=0), T.mean(axis=0)
        U = Tb[None, :] - c[:, None] * Eb[None, :]  # u(c, z) = T(z) - c E(z)
        U = np.where(cand[None, :] >= c[:, None] - 1e-12, U, -np.inf)  # never below cost
        rows = np.arange(c.size)
        k = np.argmax(U, axis=1)
        truth = U[rows, np.searchsorted(cand, truth_z)]
        scale = max(float(np.max(np.abs(Tb))), float(np.max(np.abs(Eb) * cand)), 1e-300)
        best = U[rows, k]
        br = cand[k]
        if self.temperature > 0:  # the logit response (the BNE solver's smoothing)
            floor_u = np.min(np.where(np.isfinite(U), U, np.inf), axis=1)
            tau = self.temperature * np.maximum(best - floor_u, 1e-300)
            with np.errstate(under="ignore"):
                w = np.exp((U - best[:, None]) / tau[:, None]) * np.gradient(cand)[None, :]
            br = (w @ cand) / w.sum(axis=1)
        from sklearn.isotonic import isotonic_regression  # pool adjacent violators

        br = np.where(truth >= best - _TIE * scale, truth_z, br)
        return np.maximum(isotonic_regression(br), truth_z)  # monotone, never below cost

    def _measure(self, fresh: _Sample, strategies, x, own, br) -> _Response:
        """Step 3 on ``fresh``: u(c, z) at every candidate report z (the bid grid, the
        truth, the mixture's bids and the fitted response's), one ``deviations`` call
        per market.  ``regret`` = sum_c w(c) [max_z u(c, z) - u_mix(c)] (the exact
        best response over the candidates, any report, below cost included), and
        ``regret_response`` the fitted response's gain, a lower bound of it."""
        c, support = self.grid, np.flatnonzero(x > 0)
        cand = np.unique(np.concatenate([self.z, np.maximum(c, self.floor), own.ravel(), br]))
        E, T = fresh.eps_pay(self.mech, _mixed_reports(fresh, strategies, x), cand)
        U = T.mean(axis=0)[None, :] - c[:, None] * E.mean(axis=0)[None, :]
        rows = np.arange(c.size)
        at_own = U[rows[:, None], np.searchsorted(cand, own)]  # (grid, |support|)
        u_mix = at_own @ x[support]
        u_best = U.max(axis=1)
        u_br = U[rows, np.searchsorted(cand, br)]
        return _Response(
            bids=br,
            regret=float(self.weights @ (u_best - u_mix)),
            regret_response=float(self.weights @ (u_br - u_mix)),
            utility=float(self.weights @ u_mix),
        )


@dataclass(frozen=True)
class _Response:
    """One iteration's step 2-3: the fitted response's ``bids`` on the grid, the
    mixture's ``regret`` (best candidate report), ``regret_response`` (the fitted
    response's gain: a lower bound) and its ex-ante ``utility``."""

    bids: np.ndarray
    regret: float
    regret_response: float
    utility: float


def _mixed_reports(sample: _Sample, strategies, x: np.ndarray) -> np.ndarray:
    """Every seller's report when each draws a strategy from ``x`` (the sample's fixed
    uniforms through x's cumulative shares), (markets, n)."""
    cum = np.cumsum(x) / np.sum(x)
    labels = np.minimum(np.searchsorted(cum, sample.uniforms, side="right"), x.size - 1)
    R = np.empty_like(sample.costs)
    for s in np.flatnonzero(x > 0):
        rows = labels == s
        R[rows] = sample.reports(int(s), strategies[s])[rows]
    return R


def _oracle(mech, law, grid: int, bid_grid: int, temperature: float) -> _Oracle:
    lo, hi = (float(v) for v in law.support)
    floor = lo + 1e-6 * (hi - lo)
    c = np.linspace(lo, hi, grid)
    return _Oracle(
        mech, law, c, expectation_weights(law, c), np.linspace(floor, hi, bid_grid), floor,
        temperature,
    )  # fmt: skip


_GL_NODES, _GL_WEIGHTS = np.polynomial.legendre.leggauss(16)


def expectation_weights(law, grid: np.ndarray) -> np.ndarray:
    """Weights w_i = E[phi_i(C)], C from ``law``, phi_i the hat function of the sorted
    ``grid`` (1 at grid[i], 0 at its neighbours): sum_i w_i u(grid[i]) is exactly the
    law's expectation of u's piecewise-linear interpolant, with error O(h^2) for a
    smooth u (the trapezoid rule under the law; the end points get half a cell).
    By parts, E[phi_i] = phi_i(hi) - int phi_i'(c) F(c) dc, and phi_i' is +-1/h on
    the two cells around grid[i], so only int F over each cell is needed (16-point
    Gauss-Legendre: F is bounded where a density may not be)."""
    g = np.asarray(grid, dtype=float)
    h = np.diff(g)
    mid, half = 0.5 * (g[1:] + g[:-1]), 0.5 * h
    nodes = mid[:, None] + half[:, None] * _GL_NODES[None, :]
    cell = half * (np.asarray(law.cdf(nodes), dtype=float) @ _GL_WEIGHTS)  # int F over cells
    w = np.zeros(g.size)
    w[:-1] += cell / h  # the falling side of phi_i: -(-1/h) int F
    w[1:] -= cell / h  # the rising side: -(1/h) int F
    w[-1] += 1.0  # phi_last(hi) F(hi) = 1
    return w


@dataclass(frozen=True)
class _Interp:
    """The bids of a best response: linear between its grid points (picklable)."""

    costs: np.ndarray
    bids: np.ndarray

    def __call__(self, x, rng=None):
        return np.interp(x, self.costs, self.bids)


def _interp_strategy(name: str, costs: np.ndarray, bids: np.ndarray) -> BidStrategy:
    c, b = costs.copy(), bids.copy()
    return BidStrategy(name, _Interp(c, b), c, b)


# ---- the result --------------------------------------------------------------------------------
@dataclass(frozen=True)
class PsroResult:
    """The population (``strategies``) and per iteration the meta-equilibrium
    (``mixtures``), its ``regret`` against the best candidate report (the exact best
    response over the candidates, measured on the held-out markets),
    ``regret_response`` (the gain of the fitted response PSRO added: a lower bound of
    the regret) and its ex-ante ``utility``.  ``mixture``, :meth:`bid`,
    :meth:`format` and :meth:`summary` are those of ``best_iteration``, the iteration
    of least regret; ``last`` describes the last one."""

    mechanism: str
    dist: str
    n_sellers: int
    strategies: tuple[BidStrategy, ...]
    mixtures: tuple[dict[str, float], ...]
    regret: tuple[float, ...]
    utility: tuple[float, ...]
    converged: bool
    seconds: float
    options: dict = field(default_factory=dict, repr=False)
    regret_response: tuple[float, ...] = ()

    @property
    def mixture(self) -> dict[str, float]:
        """The meta-equilibrium of ``best_iteration``."""
        return self.mixtures[self.best_iteration - 1]

    @property
    def last(self) -> dict:
        """The last iteration: its number, mixture, regret and utility."""
        return self._iteration(len(self.regret))

    def _iteration(self, it: int) -> dict:
        return {
            "iteration": it,
            "regret": self.regret[it - 1],
            "regret_relative": self.regret_relative[it - 1],
            "utility": self.utility[it - 1],
            "mixture": {k: v for k, v in self.mixtures[it - 1].items() if v},
        }

    @property
    def regret_relative(self) -> tuple[float, ...]:
        """Regret / the mixture's utility; inf where that utility is below 10^-6 of the
        largest regret or utility seen (e.g. truthful sellers in first-price earn ~0)."""
        scale = 1e-6 * max(max(self.regret), max(abs(u) for u in self.utility), 1e-300)
        return tuple(
            r / u if u > scale else (0.0 if r == 0 else math.inf)
            for r, u in zip(self.regret, self.utility, strict=True)
        )

    @property
    def best_iteration(self) -> int:
        """The iteration (1-based) whose mixture had the least regret (PSRO's regret is
        not monotone: a new best response can move the meta-equilibrium away)."""
        return int(np.argmin(self.regret)) + 1

    def bid(self, costs, rng: np.random.Generator | None = None) -> np.ndarray:
        """The mixture's mean bid at ``costs`` (for pure mixtures: the strategy's bid)."""
        costs = np.asarray(costs, dtype=float)
        rng = np.random.default_rng(0) if rng is None else rng
        by = {s.name: s for s in self.strategies}
        out = np.zeros_like(costs)
        for k, x in self.mixture.items():
            if x:
                out += x * np.asarray(by[k].play(costs, rng), dtype=float)
        return out

    def table(self) -> pd.DataFrame:
        import pandas as pd

        return pd.DataFrame(
            {
                "iteration": np.arange(1, len(self.regret) + 1),
                "strategies": [len(m) for m in self.mixtures],
                "regret": self.regret,
                "regret_response": self.regret_response or [math.nan] * len(self.regret),
                "utility": self.utility,
                "regret_relative": self.regret_relative,
                "mixture": [
                    json.dumps({k: round(v, 6) for k, v in m.items() if v}) for m in self.mixtures
                ],
            }
        )

    def summary(self) -> dict:
        return {
            "mechanism": self.mechanism,
            "dist": self.dist,
            "n_sellers": self.n_sellers,
            "iterations": len(self.regret),
            "converged": self.converged,
            "best_iteration": self.best_iteration,
            **{k: v for k, v in self._iteration(self.best_iteration).items() if k != "iteration"},
            "last": self.last,
            "strategies": [s.name for s in self.strategies],
            "seconds": self.seconds,
            **self.options,
        }

    def write(self, folder) -> Path:
        """DIR/iterations.csv, DIR/strategies.csv (every strategy's bid on a cost grid),
        DIR/summary.json and DIR/psro.png (regret against iterations), atomically."""
        out = Path(folder)
        if out.exists() and not out.is_dir():
            raise MarketSimError(f"{folder}: exists and is not a folder")
        out.mkdir(parents=True, exist_ok=True)
        text = self.table().to_csv(index=False)
        atomic_write(out / "iterations.csv", lambda fh: fh.write(text.encode()))
        lo, hi = self.options["support"]
        c = np.linspace(lo, hi, 101)
        rng = np.random.default_rng(0)
        cols = {"cost": c, **{s.name: s.play(c, rng) for s in self.strategies}}
        import pandas as pd

        bids = pd.DataFrame(cols).to_csv(index=False)
        atomic_write(out / "strategies.csv", lambda fh: fh.write(bids.encode()))
        doc = json.dumps({k: json_plain(v) for k, v in self.summary().items()}, indent=2) + "\n"
        atomic_write(out / "summary.json", lambda fh: fh.write(doc.encode()))
        plot(self, out / "psro.png")
        return out

    def format(self) -> str:
        rows = [
            ("mechanism", self.mechanism),
            ("distribution", self.dist),
            ("sellers", str(self.n_sellers)),
            ("iterations", f"{len(self.regret)} (converged: {self.converged})"),
        ]
        best = self.best_iteration
        for i, (r, rel) in enumerate(zip(self.regret, self.regret_relative, strict=True), 1):
            share = f"{rel:.2%} of" if math.isfinite(rel) else "far above"
            mark = "  <- best" if i == best and len(self.regret) > 1 else ""
            rows.append((f"regret {i}", f"{r:.4g} ({share} the mixture's utility){mark}"))
        mix = ", ".join(f"{k} {v:.3f}" for k, v in self.mixture.items() if v)
        rows += [
            (f"mixture (iteration {best})", mix),
            ("utility", f"{self.utility[best - 1]:.4g}"),
            ("seconds", f"{self.seconds:.1f}"),
        ]
        width = max(len(k) for k, _ in rows)
        return "\n".join(f"{k:<{width}}  {v}" for k, v in rows)


# ---- PSRO -----------------------------------------------------------------------------------
def _market(mechanism, dist, n_sellers, context):
    unknown = sorted(set(context) - set(CONTEXT_KEYS))
    if unknown:
        raise MarketSimError(
            f"unknown option {unknown[0]!r} (market settings: {', '.join(CONTEXT_KEYS)})"
        )
    classes = isinstance(dist, Population | list | tuple) or (isinstance(dist, str) and "*" in dist)
    pop = as_population(dist, None if classes else n_sellers)
    if not pop.is_plain:
        raise MarketSimError("psro needs i.i.d. costs: one cost law, no classes and no data")
    n = check_int("n_sellers", pop.n_sellers, 2)
    if n_sellers is not None and int(n_sellers) != n:
        raise MarketSimError(f"n_sellers={n_sellers} conflicts with the population's {n}")
    law = pop.laws[0]
    mech = as_mechanism(mechanism, dist=law, n_sellers=n, **context)
    if mech.needs_data:
        raise MarketSimError(
            f"{mechanism_name(mech)} needs the sellers' data; psro draws costs only"
        )
    return mech, law, n


_PRELOAD = ("market_sim.games.psro",)


def psro(
    mechanism,
    dist,
    n_sellers: int,
    strategies: Sequence,
    *,
    iterations: int,
    rng: np.random.Generator,
    markets: int = 512,
    eval_markets: int | None = None,
    players: int | None = None,
    grid: int = 65,
    bid_grid: int = 257,
    tol: float = 0.02,
    temperature: float = 0.02,
    workers: int = 1,
    executor: str = "local",
    address: str | None = None,
    **context,
) -> PsroResult:
    """PSRO from ``strategies`` (specs as :func:`~market_sim.games.env.as_opponents` takes:
    ``"truthful"``, ``"shade:factor=1.2"``, ``"random"``, bid functions, BNEResults) for
    ``n_sellers`` sellers with i.i.d. costs from ``dist`` (a cost law, or a one-class
    population); at most ``iterations`` iterations, stopping when the regret is at most
    ``tol`` x the mixture's utility (the module doc).  ``markets`` sampled markets;
    ``players`` of the DPR (default: all sellers, the full game); ``grid`` costs and
    ``bid_grid`` candidate reports for the best response; ``context``: mu, sigma, gamma,
    privacy.  ``workers``, ``executor``, ``address``: where the payoff-matrix entries are
    computed, one task per split of the others (``market_sim.execution``).  Same ``rng``
    state, same result, on any executor."""
    t0 = time.perf_counter()
    check_executor(workers, executor, address)
    if not isinstance(rng, np.random.Generator):
        raise MarketSimError("rng must be a numpy.random.Generator")
    iterations = check_int("iterations", iterations, 1)
    markets = check_int("markets", markets, 1)
    mech, law, n = _market(mechanism, dist, n_sellers, context)
    players = n if players is None else check_int("players", players, 2)
    if players > n:
        raise MarketSimError(f"players must be at most the {n} sellers (got {players})")
    if isinstance(strategies, str | bytes) or not len(strategies):
        raise MarketSimError("strategies: give a list of at least one strategy")
    pop = _unique_names([_strategy(s, law) for s in strategies])
    sample = _Sample(law, n, markets, rng)
    fresh = _Sample(law, n, check_int("eval_markets", eval_markets or 4 * markets, 1), rng)
    if not (isinstance(temperature, int | float) and 0 <= temperature < math.inf):
        raise MarketSimError(f"temperature must be a number >= 0 (got {temperature!r})")
    oracle = _oracle(
        mech, law, check_int("grid", grid, 3), check_int("bid_grid", bid_grid, 3), temperature
    )
    where: dict[str, Any] = dict(
        workers=workers, executor=executor, address=address, preload=_PRELOAD
    )
    meta = _MetaGame(mech, fresh, pop, law, where)  # held out: BR cannot exploit its noise
    trace = _iterate(meta, oracle, sample, fresh, pop, n, players, iterations, tol)
    lo, hi = law.support
    return PsroResult(
        mechanism=mechanism if isinstance(mechanism, str) else mechanism_name(mech),
        dist=law.spec,
        n_sellers=n,
        strategies=tuple(pop),
        mixtures=tuple(trace["mixtures"]),
        regret=tuple(trace["regret"]),
        utility=tuple(trace["utility"]),
        regret_response=tuple(trace["regret_response"]),
        converged=trace["converged"],
        seconds=time.perf_counter() - t0,
        options={
            "markets": markets,
            "players": players,
            "grid": grid,
            "bid_grid": bid_grid,
            "tol": tol,
            "support": [float(lo), float(hi)],
            **context,
        },
    )


def _iterate(meta, oracle, sample, fresh, pop: list, n: int, players: int, iterations: int,
             tol: float) -> dict:  # fmt: skip
    """PSRO's loop (the module doc's steps 1-4), growing ``pop`` in place: per iteration
    the meta-equilibrium's mixture, its regret, the best response's own regret and the
    utility; ``converged`` when the regret fell to ``tol`` x the utility."""
    trace: dict = dict(mixtures=[], regret=[], regret_response=[], utility=[], converged=False)
    for it in range(1, iterations + 1):
        x = _solve(meta, n, players)  # step 1: the meta-equilibrium
        resp = oracle.respond(sample, fresh, pop, x)  # steps 2-3
        trace["mixtures"].append({s.name: float(v) for s, v in zip(pop, x, strict=True)})
        trace["regret"].append(resp.regret)
        trace["regret_response"].append(resp.regret_response)
        trace["utility"].append(resp.utility)
        if resp.regret <= tol * abs(resp.utility):  # the best candidate's regret
            trace["converged"] = True
            break
        if it < iterations:  # step 4
            pop.append(_interp_strategy(f"br{it}", oracle.grid, resp.bids))
    return trace


def figure(result: PsroResult):
    """Regret (NashConv per player) against iterations, log scale, with 5% of the last
    mixture's utility for reference: a matplotlib Figure."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6.5, 4.2))
    it = np.arange(1, len(result.regret) + 1)
    floor = 1e-6 * max(max(result.regret), abs(result.utility[-1]), 1e-300)
    ax.semilogy(it, np.maximum(result.regret, floor), "o-", label="regret of the mixture")
    if result.utility[-1] > 0:
        ax.axhline(
            0.05 * result.utility[-1], color="k", ls="--", lw=1, label="5% of its utility (last)"
        )
    name = Path(result.mechanism).name if "/" in result.mechanism else result.mechanism
    ax.set(
        xlabel="PSRO iteration",
        ylabel="NashConv per player",
        title=f"{name}, {result.dist}, {result.n_sellers} sellers",
    )
    ax.set_xticks(it)
    ax.legend(loc="best")
    fig.tight_layout()
    fit_titles(fig)  # a long mechanism path wraps instead of running off the edge
    return fig


def plot(result: PsroResult, path) -> None:
    """:func:`figure` written to ``path`` (PNG) atomically."""
    save_png(figure(result), path, dpi=100)


# ---- the collusion index -----------------------------------------------------------------------
@dataclass(frozen=True)
class CollusionScale:
    """Calvano et al.'s profit-gain scale for one market (the module doc): ``u_nash`` a
    seller's ex-ante utility at the BNE; ``u_collusive`` (pi_M) the sellers' largest
    joint utility per seller found under the mechanism, by the cartel rule ``cartel``
    (:func:`collusion_scale`); ``u_markup`` at the best common markup ``multiplier``
    (the narrower reference, kept under its own name), with ``utilities`` at every
    one of ``multipliers``; ``top`` the highest report the references use."""

    mechanism: str
    dist: str
    n_sellers: int
    u_nash: float
    u_collusive: float
    multiplier: float
    multipliers: np.ndarray = field(repr=False)
    utilities: np.ndarray = field(repr=False)
    u_markup: float = math.nan
    cartel: str = ""
    top: float = math.nan

    def index(self, utility) -> np.ndarray:
        """Delta = (u - u_nash) / (u_collusive - u_nash), elementwise: Calvano et al.'s
        index, against the joint-profit maximum."""
        return self._delta(utility, self.u_collusive, f"the cartel's best ({self.cartel})")

    def index_markup(self, utility) -> np.ndarray:
        """(u - u_nash) / (u_markup - u_nash): the index against the best common markup."""
        return self._delta(utility, self.u_markup, f"best common markup {self.multiplier:g}")

    def _delta(self, utility, reference: float, what: str) -> np.ndarray:
        gap = reference - self.u_nash
        if not gap > 0:
            raise MarketSimError(
                f"no collusive gain in this market ({what} gives {reference:.4g} <= the "
                f"equilibrium's {self.u_nash:.4g}): the collusion index is undefined"
            )
        return (np.asarray(utility, dtype=float) - self.u_nash) / gap

    def over_seeds(self, utilities) -> dict[str, float]:
        """Delta of each seed's mean utility: their mean and 95% t interval."""
        from scipy import stats

        d = np.atleast_1d(self.index(utilities))
        mean = float(d.mean())
        if d.size < 2:
            return {"delta": mean, "ci_low": math.nan, "ci_high": math.nan, "seeds": d.size}
        half = float(stats.t.ppf(0.975, d.size - 1) * d.std(ddof=1) / math.sqrt(d.size))
        return {"delta": mean, "ci_low": mean - half, "ci_high": mean + half, "seeds": d.size}

    def summary(self) -> dict:
        return {
            "mechanism": self.mechanism,
            "dist": self.dist,
            "n_sellers": self.n_sellers,
            "u_nash": self.u_nash,
            "u_collusive": self.u_collusive,
            "cartel": self.cartel,
            "u_markup": self.u_markup,
            "multiplier": self.multiplier,
            "top": self.top,
        }


def _mean_utility(mech, sample: _Sample, reports: np.ndarray) -> float:
    """A seller's mean utility t - c eps over the sample's markets and sellers."""
    total = 0.0
    for k in range(sample.markets):
        out = mech.run(reports[k], np.random.default_rng(sample.seeds[k]))
        total += float(np.mean(out.utilities(sample.costs[k])))
    return total / sample.markets


def report_range(law) -> tuple[float, float]:
    """(lowest, highest) report of the collusion references: inside the support and
    where the density is positive, so every report has a finite virtual cost.  The
    lowest is lo + 1e-6 (hi - lo) (at a support's 0 the virtual cost is 0, the BNE
    solver's lowest report); the highest is hi where the density there is positive,
    else the law's 1 - 1e-6 quantile (Beta(a, b) with b > 1 has density 0 at hi,
    where the virtual cost c + F/f is infinite and no mechanism that ranks by it
    buys: a cartel at hi would sell nothing)."""
    lo, hi = (float(v) for v in law.support)
    floor = lo + 1e-6 * (hi - lo)
    with np.errstate(all="ignore"):
        ok = float(np.asarray(law.pdf(hi))) > 0 and np.isfinite(law.virtual_cost(hi)).all()
    top = hi if ok else float(np.asarray(law.ppf(1.0 - 1e-6)))
    return floor, min(max(top, floor), hi)


def _cartel_counts(n: int) -> np.ndarray:
    """How many designated sellers the cartel search tries: all of 1..n up to 4
    sellers, else 1, n and geometric steps between (at most 6)."""
    if n <= 4:
        return np.arange(1, n + 1)
    return np.unique(np.round(np.geomspace(1, n, 6)).astype(int))


def _best_cartel(mech, sample: _Sample, floor: float, top: float, levels: int):
    """The joint-profit reference: over cartel rules "the j cheapest sellers report p,
    the others the top" (j from :func:`_cartel_counts`; p on ``levels`` equally spaced
    reports from the floor to the top, and just below the top, then ``levels`` more
    between the best one's neighbours for the best j), the largest mean utility per
    seller (ex ante: one rule for all markets, as the common markup).  The rule that
    designates the cheapest seller just below the top is the joint maximum of
    single-unit procurement (tests/test_psro.py derives it); for other mechanisms this
    is the best of the family, a lower bound of the joint maximum."""
    c = sample.costs
    rank = np.argsort(np.argsort(c, axis=1, kind="stable"), axis=1)  # 0: the cheapest

    def utility(j: int, p: float) -> float:
        return _mean_utility(mech, sample, np.where(rank < j, p, top))

    coarse = np.unique(np.append(np.linspace(floor, top, levels), top - 1e-6 * (top - floor)))
    tried = {(int(j), float(p)): utility(int(j), float(p))
             for j in _cartel_counts(c.shape[1]) for p in coarse}  # fmt: skip
    j, p = max(tried, key=lambda k: tried[k])
    i = int(np.searchsorted(coarse, p))
    fine = np.linspace(coarse[max(i - 1, 0)], coarse[min(i + 1, coarse.size - 1)], levels + 2)
    tried |= {(j, float(q)): utility(j, float(q)) for q in fine[1:-1] if (j, float(q)) not in tried}
    j, p = max(tried, key=lambda k: tried[k])
    return tried[(j, p)], f"the {j} cheapest report {p:.6g}, the others {top:.6g}"


def collusion_scale(
    mechanism,
    dist,
    n_sellers: int,
    rng: np.random.Generator,
    *,
    nash="truthful",
    multipliers=None,
    markets: int = 256,
    cartel_levels: int = 33,
    **context,
) -> CollusionScale:
    """The references of the collusion index (the module doc) on ``markets`` sampled
    markets: ``nash`` the equilibrium bid function (``"truthful"`` for an IC mechanism,
    a :class:`~market_sim.games.equilibrium.BNEResult` or a function of costs); pi_M the
    best cartel rule or common markup (:func:`_best_cartel`), the markup reference
    apart; ``multipliers`` the common markups tried (default 81 from 1 to 1000,
    geometric: at 1000 nearly every seller reports the top); ``cartel_levels`` the
    designated sellers' reports tried.  Every report is kept in :func:`report_range`.
    Cost: (len(multipliers) + (cartel_levels + 1) x (up to 6 counts) + cartel_levels)
    x ``markets`` calls of ``mechanism.run``."""
    if not isinstance(rng, np.random.Generator):
        raise MarketSimError("rng must be a numpy.random.Generator")
    mech, law, n = _market(mechanism, dist, n_sellers, context)
    ks = np.geomspace(1.0, 1000.0, 81) if multipliers is None else multipliers
    ks = np.asarray(ks, dtype=float).reshape(-1)
    if ks.size == 0 or not np.all(np.isfinite(ks)) or np.any(ks < 1):
        raise MarketSimError("multipliers must be finite numbers >= 1")
    levels = check_int("cartel_levels", cartel_levels, 2)
    sample = _Sample(law, n, check_int("markets", markets, 2), rng)
    floor, top = report_range(law)
    c = sample.costs
    nash_reports = np.clip(
        as_opponents(nash, law)(c.ravel(), np.random.default_rng(0)).reshape(c.shape), floor, top
    )
    u_nash = _mean_utility(mech, sample, nash_reports)
    utilities = np.array([_mean_utility(mech, sample, np.clip(k * c, floor, top)) for k in ks])
    j = int(np.argmax(utilities))
    u_cartel, rule = _best_cartel(mech, sample, floor, top, levels)
    if utilities[j] >= u_cartel:
        u_cartel, rule = float(utilities[j]), f"common markup {ks[j]:g}"
    return CollusionScale(
        mechanism=mechanism if isinstance(mechanism, str) else mechanism_name(mech),
        dist=law.spec,
        n_sellers=n,
        u_nash=u_nash,
        u_collusive=float(u_cartel),
        multiplier=float(ks[j]),
        multipliers=ks,
        utilities=utilities,
        u_markup=float(utilities[j]),
        cartel=rule,
        top=top,
    )


def collusion_frame(agents: pd.DataFrame, scale: CollusionScale, strategy: str | None = None):
    """Delta per round of a seller frame (``MarketModel.agent_frame()``: columns
    ``round``, ``utility``, ``strategy``): the mean utility of the sellers playing
    ``strategy`` (default: all) in each round, its Delta (``delta``, against the
    joint-profit reference) and ``delta_markup`` (against the best common markup)."""
    import pandas as pd

    need = {"round", "utility"} | ({"strategy"} if strategy is not None else set())
    missing = sorted(need - set(agents.columns))
    if missing:
        raise MarketSimError(f"the seller frame has no column {missing[0]!r}")
    rows = agents if strategy is None else agents[agents["strategy"] == strategy]
    if rows.empty:
        raise MarketSimError(f"no seller plays {strategy!r} in the frame")
    u = rows.groupby("round")["utility"].mean()
    return pd.DataFrame({
        "round": u.index, "utility": u.to_numpy(), "delta": scale.index(u),
        "delta_markup": scale.index_markup(u),
    })  # fmt: skip
