"""The second BNE solver: distributional (mixed) strategies on a discretised game.

In the manner of SODA (Bichler, Fichtl and Oberlechner, Operations Research 2025): each
class's costs are discretised by quantile (``grid`` nodes, the midpoints of equal-mass
cells, each of weight 1 / ``grid``: a law whose density is singular at an end gets its
nodes where its sellers are), the reports by a uniform grid of ``bid_grid`` bids on the
report range, and a strategy of class g is a matrix s_g[i, k], the probability that a
seller at cost node i reports bid k.  Nothing assumes a smooth, monotone or pure bid
function, so all-pay contests, reserves and costs that never sell are solved as they are.

Utilities on the grid, u_g[i, k] = T_g(b_k) - c_i E_g(b_k) (a seller's utility is linear
in its cost; docs/equilibrium.md), with E, T the deviator's expected eps and payment at
report b_k against the others' mixed strategies:

* **exact** when the mechanism has an ``interim`` (``FirstPrice`` and rank mechanisms
  like it): the others' report laws are the classes' marginal bid distributions
  q_h[k] = sum_i s_h[i, k] / grid, and one of them reports below b_k with probability
  sum_{k' < k} q_h[k'] + q_h[k] / 2 (a tie counted half, as ``interim`` expects);
* **sampled** otherwise (any mechanism, a black box with ``outcome`` only): each
  iteration ``markets`` fresh opponent markets (a scrambled Sobol net through the
  quantile functions, from the solver's ``rng``), each opponent's report drawn from its
  cost node's mixed strategy, and the mechanism asked for the deviator's outcome at
  every bid of the grid (its ``deviations``, a batched ``outcome`` or a loop).

The learning dynamic is simultaneous online dual averaging with the entropic regulariser
(SODA's): Y_g[i] += eta_t u_g[i] / max_k u_g[i, k], s_g[i] = softmax(Y_g[i]), eta_t =
``step`` x t^-0.05 (SODA's heuristic step, relative to each node's stake), in two stages
(an even bid grid, then one that follows the first stage's bids; ``solve_distributional``);
the strategies returned are the iterates' average weighted by t.  It stops when every
class's relative utility loss on the grid, 1 - u_g(s) / u_g(best response), is at most
``eps_tol`` (1e-4, SODA's), else after ``max_iter``.  The result is a
:class:`MixedSolution`; ``bid_tables`` turns each class's strategy into a bid table
(purified, smoothed in the quantile, kinks kept; ``mean_bid_table``), and
``market_sim.games.equilibrium.bne(..., method="distributional")`` verifies those with the pure
solver's verification.
"""

from __future__ import annotations

import dataclasses
import math
import sys
from dataclasses import dataclass, field

import numpy as np

from ..distributions import law_quantiles, tabulated_cdf
from ..errors import MarketSimError
from ..parameters import check_int
from .equilibrium_envelope import envelope_step, inverse_bid_tables
from .equilibrium_game import (
    SENTINELS,
    Classes,
    Interim,
    Oracle,
    Sample,
    interim_epsilon,
    interim_of,
)

__all__ = [
    "DistOptions",
    "MixedSolution",
    "MixedStrategy",
    "Tables",
    "live_top",
    "bid_tables",
    "mean_bid_table",
    "solve_distributional",
]

#: a strategy is "genuinely mixed" when some winning cost node's bids spread wider than this
#: many bid-grid steps (one step is the discretisation's own spread)
MIXED_STEPS = 3.0
_BETA = 0.05  # eta_t = step * t^-beta (SODA's decreasing step rule)
_CHECK_EVERY = 10  # iterations between measures of the averaged strategies' utility loss


@dataclass(frozen=True)
class DistOptions:
    """The distributional solver's settings (docs/equilibrium.md, "Distributional")."""

    grid: int = 64  # cost nodes per class (quantile midpoints)
    bid_grid: int = 128  # bids on the report range
    max_iter: int = 4000
    eps_tol: float = 1e-4  # relative utility loss at which the dynamic stops
    step: float = 1.0  # eta: dual averaging's step (times t^-0.05), on utilities / scale
    markets: int = 256  # sampled path: opponent markets per iteration
    rank_interim: bool = True  # a black box that passes the rank probe: its rank interim

    def checked(self) -> DistOptions:
        """Every setting checked (bad input: one line naming it)."""
        ints = dict(grid=2, bid_grid=3, max_iter=1, markets=1)
        kw: dict = {k: check_int(k, getattr(self, k), least) for k, least in ints.items()}
        for name in ("eps_tol", "step"):
            v = getattr(self, name)
            ok = isinstance(v, (int, float, np.floating, np.integer)) and not isinstance(v, bool)
            if not ok or not math.isfinite(float(v)) or float(v) <= 0:
                raise MarketSimError(f"{name} must be a number > 0 (got {v!r})")
            kw[name] = float(v)
        if not isinstance(self.rank_interim, (bool, np.bool_)):
            raise MarketSimError(f"rank_interim must be True or False (got {self.rank_interim!r})")
        return DistOptions(**kw, rank_interim=bool(self.rank_interim))


@dataclass(frozen=True)
class MixedStrategy:
    """One class's distributional strategy: ``probs[i, k]`` the probability that a seller
    at cost node ``costs[i]`` (weight ``weights[i]`` of the law) reports ``bids[k]``."""

    costs: np.ndarray = field(repr=False)
    weights: np.ndarray = field(repr=False)
    bids: np.ndarray = field(repr=False)
    probs: np.ndarray = field(repr=False)
    win: np.ndarray = field(repr=False)  # per cost node, the probability of getting anything
    top_selling: float = math.inf  # the highest bid of the grid that gets anything

    @property
    def mean(self) -> np.ndarray:
        """The mean bid per cost node."""
        return self.probs @ self.bids

    @property
    def spread(self) -> np.ndarray:
        """The standard deviation of the bid per cost node."""
        var = self.probs @ self.bids**2 - self.mean**2
        return np.sqrt(np.maximum(var, 0.0))

    @property
    def step(self) -> float:
        """The grid's median step between bids."""
        return float(np.median(np.diff(self.bids)))

    @property
    def live_spread(self) -> float:
        """The largest spread over the cost nodes that win at least 1% of the time (0: none)."""
        live = self.win >= 0.01
        return float(self.spread[live].max()) if live.any() else 0.0

    @property
    def mixed(self) -> bool:
        """Genuinely mixed: a winning node's bids spread over more than ``MIXED_STEPS``
        grid steps (the discretisation alone spreads a pure bid over about one)."""
        return self.live_spread > MIXED_STEPS * self.step


@dataclass(frozen=True)
class MixedSolution:
    """The distributional solve: one :class:`MixedStrategy` per class, the dynamic's
    record (``history``: the relative utility loss on the grid, max over classes, per
    iteration), which rule stopped it and the evaluation path."""

    strategies: tuple[MixedStrategy, ...]
    iterations: int
    stopped_by: str  # "utility_loss" or "max_iter"
    utility_loss: float
    history: tuple[float, ...] = field(repr=False)
    path: str = "interim"
    calls: int = 0


# ---- the discretised game -----------------------------------------------------------------
def quantile_nodes(law, k: int) -> tuple[np.ndarray, np.ndarray]:
    """``k`` cost nodes of the law at the quantile midpoints (i + 1/2) / k, each of weight
    1 / k: equal-mass cells, so a density singular at an end gets nodes where its mass is."""
    lo, hi = law.support
    q = (np.arange(k) + 0.5) / k
    c = np.clip(np.asarray(law.ppf(q), dtype=float), lo, hi)
    return c, np.full(k, 1.0 / k)


def below_probabilities(probs: list[np.ndarray], weights: list[np.ndarray]) -> np.ndarray:
    """(classes, bids): per class the probability that one seller reports below bid k,
    a tie (the same grid bid) counted half: sum_{k' < k} q[k'] + q[k] / 2, q the class's
    marginal bid distribution."""
    out = []
    for p, w in zip(probs, weights, strict=True):
        q = w @ p
        out.append(np.cumsum(q) - 0.5 * q)
    return np.clip(np.array(out), 0.0, 1.0)


class _Game:
    """E and T of a deviator of each class at every bid of the grid against the others'
    mixed strategies: exactly through ``interim`` or on fresh sampled markets."""

    def __init__(self, mech, classes: Classes, bids: np.ndarray, opt: DistOptions, rng, calls=0):
        self.classes, self.bids, self.opt, self.rng = classes, bids, opt, rng
        self.interim = interim_of(mech) if classes.data is None else None
        self.oracle = Oracle(mech, exact=self.interim is not None)
        self.oracle.calls = self.calls = calls
        self.last: list[tuple[np.ndarray, np.ndarray]] = []

    @property
    def path(self) -> str:
        return self.oracle.path

    def eps_pay(self, probs, weights) -> list[tuple[np.ndarray, np.ndarray]]:
        """Per class (E, T) at every bid of the grid (kept as ``last``)."""
        self.last = self._eps_pay(probs, weights)
        return self.last

    def _eps_pay(self, probs, weights) -> list[tuple[np.ndarray, np.ndarray]]:
        if self.interim is not None:
            below = below_probabilities(probs, weights)
            out = []
            counts = np.asarray(self.classes.counts)
            for g in range(len(probs)):
                E, T = self.interim(self.bids, below, counts - (np.arange(counts.size) == g))
                out.append((np.asarray(E, dtype=float), np.asarray(T, dtype=float)))
            self.calls += len(probs) * self.bids.size
            return out
        sample = Sample(self.classes, self.opt.markets, 1, self.rng)
        R = self._reports(sample, probs)
        out = []
        for g in range(len(probs)):
            E, T = self.oracle.eps_pay(sample, R, g, self.bids)
            out.append((sample.mean(E), sample.mean(T)))
        self.calls = self.oracle.calls
        return out

    def _reports(self, sample: Sample, probs) -> np.ndarray:
        """Each sampled seller's report: a draw from its cost node's mixed strategy (the
        node of its cost's quantile cell), by inverse cdf of a uniform from ``rng``."""
        R = np.empty_like(sample.costs)
        group = self.classes.group
        for g, law in enumerate(self.classes.laws):
            cols = group == g
            q = np.asarray(law.cdf(sample.costs[:, cols]), dtype=float)
            node = np.clip((q * probs[g].shape[0]).astype(int), 0, probs[g].shape[0] - 1)
            cdf = np.cumsum(probs[g], axis=1)[node]  # (markets, sellers, bids)
            u = self.rng.random(node.shape)[..., None]
            k = np.minimum((cdf < u).sum(axis=-1), self.bids.size - 1)
            R[:, cols] = self.bids[k]
        return R


def _utilities(game: _Game, costs, probs, weights) -> list[np.ndarray]:
    """u_g[i, k] = T_g(b_k) - c_i E_g(b_k) per class (the deviator's utility is linear in
    its cost)."""
    return [T[None, :] - c[:, None] * E[None, :]
            for (E, T), c in zip(game.eps_pay(probs, weights), costs, strict=True)]  # fmt: skip


def _utility_loss(U: np.ndarray, p: np.ndarray, w: np.ndarray) -> float:
    """The relative utility loss 1 - u(s) / u(BR) of one class on the grid (SODA's
    stopping criterion); 0 when even the best response gets nothing."""
    best = float(w @ U.max(axis=1))
    here = float(w @ np.sum(p * U, axis=1))
    if best <= 0:
        return 0.0 if here >= best - 1e-15 else math.inf
    return max(0.0, 1.0 - here / best)


def _row_scale(U: np.ndarray) -> np.ndarray:
    """Per cost node the best utility on the grid (floored at 1e-3 of the class's): each
    node's step is relative to its own stake (SODA's heuristic step), so nodes of small
    utility (near the top of the support) learn as fast as the others."""
    best = U.max(axis=1, keepdims=True)
    return np.maximum(best, 1e-3 * max(float(best.max()), 1e-300))


def _softmax(Y: np.ndarray) -> np.ndarray:
    e = np.exp(Y - Y.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def _start(costs, bids) -> list[np.ndarray]:
    """The dual variables at the start: uniform over the bids at or above the cost (a
    report below the cost never pays more than it costs)."""
    return [np.where(bids[None, :] >= c[:, None], 0.0, -5.0) for c in costs]


# ---- the solve ----------------------------------------------------------------------------
def solve_distributional(
    mech, classes: Classes, z_range: tuple[float, float], rng, opt: DistOptions,
    progress: bool = False,
) -> MixedSolution:  # fmt: skip
    """Mixed strategies per class by entropic dual averaging on the discretised game
    (module doc), in two stages: a quarter of ``max_iter`` on ``bid_grid`` bids evenly
    over the report range, then the rest on ``bid_grid`` bids that follow the first
    stage's bids (half at the quantiles of the bids the selling nodes play, half evenly
    over their range, and the range's top, which never sells): where a bid function is
    flat (an all-pay contest's high costs all bid near the top) or the bids fill a small
    part of the range, the second grid resolves it."""
    nodes = [quantile_nodes(law, opt.grid) for law in classes.laws]
    costs, weights = [c for c, _ in nodes], [w for _, w in nodes]
    bids = np.linspace(z_range[0], z_range[1], opt.bid_grid)
    first = max(1, opt.max_iter // 4)
    game = _Game(mech, classes, bids, opt, rng)
    probs, stopped, history = _dual_averaging(game, costs, weights, opt, first, progress)
    if stopped != "utility_loss" and opt.max_iter > first:
        live = [p @ np.minimum(E, 1.0) >= 1e-4 for p, (E, _) in zip(probs, game.last, strict=True)]
        old, bids = bids, following_grid(bids, probs, weights, live, opt.bid_grid, z_range)
        game = _Game(mech, classes, bids, opt, rng, calls=game.calls)
        start = [_carried(p, old, bids) for p in probs]
        probs, stopped, rest = _dual_averaging(
            game, costs, weights, opt, opt.max_iter - first, progress, start
        )
        history += rest
    U = _utilities(game, costs, probs, weights)
    strategies = tuple(
        MixedStrategy(c, w, bids, p, p @ np.minimum(E, 1.0), _top_selling(bids, E))
        for c, w, p, (E, _) in zip(costs, weights, probs, game.last, strict=True)
    )
    return MixedSolution(
        strategies, len(history), stopped, _loss(U, probs, weights), tuple(history),
        game.path, game.calls,
    )  # fmt: skip


def following_grid(bids, probs, weights, live, k: int, z_range) -> np.ndarray:
    """``k`` bids that follow a solved grid game's bids: half at the quantiles of the
    pooled bid distribution of the selling cost nodes (each grid bid spread evenly over
    its cell), the rest evenly over the range they play (from its 0.1% to its 99.9%
    quantile, widened by two cells each side) but for ``SENTINELS`` bids evenly over the
    whole report range (its top never sells: a bid for the nodes that do not)."""
    mass = sum(w[m] @ p[m] for p, w, m in zip(probs, weights, live, strict=True))
    mass = np.asarray(mass, dtype=float)
    if np.ndim(mass) == 0 or mass.sum() <= 0:
        return bids
    h = bids[1] - bids[0]
    edges = np.concatenate(([bids[0] - h / 2], 0.5 * (bids[1:] + bids[:-1]), [bids[-1] + h / 2]))
    cdf = np.concatenate(([0.0], np.cumsum(mass) / mass.sum()))
    half = k // 2
    at_quantiles = np.interp((np.arange(half) + 0.5) / half, cdf, edges)
    lo, hi = np.interp([1e-3, 1 - 1e-3], cdf, edges) + np.array([-2 * h, 2 * h])
    even = np.linspace(max(lo, z_range[0]), min(hi, z_range[1]), max(2, k - half - SENTINELS))
    whole = np.linspace(z_range[0], z_range[1], SENTINELS)
    return np.unique(np.clip(np.concatenate((at_quantiles, even, whole)), *z_range))


def _carried(probs: np.ndarray, old: np.ndarray, new: np.ndarray) -> np.ndarray:
    """Dual variables on the bids ``new`` that start where ``probs`` on the bids ``old``
    left off: log of each node's bid density (probability per unit of bid, linearly
    interpolated) times the new cells' widths, floored at 1e-6 of the row's largest."""

    def cells(b):
        e = np.concatenate(([b[0]], 0.5 * (b[1:] + b[:-1]), [b[-1]]))
        return np.maximum(np.diff(e), 1e-12)

    dens = probs / cells(old)[None, :]
    carried = np.array([np.interp(new, old, row) for row in dens]) * cells(new)[None, :]
    floor = 1e-6 * carried.max(axis=1, keepdims=True)
    return np.log(np.maximum(carried, np.maximum(floor, 1e-300)))


def _dual_averaging(
    game, costs, weights, opt: DistOptions, iters: int, progress: bool, start=None
):  # fmt: skip
    """``iters`` iterations of entropic dual averaging from ``start`` (dual variables;
    None: ``_start``):
    (strategies, stopping rule, history).  The strategies returned are the iterates'
    average weighted by the iteration number (the last iterates cycle around the grid
    game's equilibrium at the scale of a grid step; the average settles), or the first
    (current or averaged) whose relative utility loss is at most ``opt.eps_tol``."""
    from tqdm import tqdm

    Y = _start(costs, game.bids) if start is None else start
    probs = [_softmax(y) for y in Y]
    avg = [p.copy() for p in probs]
    history: list[float] = []
    bar = tqdm(total=iters, desc="dual averaging", file=sys.stderr, disable=not progress)
    try:
        for t in range(1, iters + 1):
            U = _utilities(game, costs, probs, weights)
            loss = _loss(U, probs, weights)
            if t % _CHECK_EVERY == 0 and loss > opt.eps_tol:  # the average's loss
                loss_avg = _loss(_utilities(game, costs, avg, weights), avg, weights)
                if loss_avg <= opt.eps_tol:
                    loss, probs = loss_avg, [p.copy() for p in avg]
            history.append(loss)
            bar.update(1)
            bar.set_postfix(loss=f"{loss:.2e}")
            if loss <= opt.eps_tol:
                return probs, "utility_loss", history
            for g in range(len(Y)):  # dual averaging, SODA's heuristic step per cost node
                Y[g] += opt.step * t**-_BETA * U[g] / _row_scale(U[g])
            probs = [_softmax(y) for y in Y]
            for g in range(len(Y)):  # weighted by t: avg += (p - avg) 2 / (t + 2)
                avg[g] += (probs[g] - avg[g]) * (2.0 / (t + 2))
    finally:
        bar.close()
    return avg, "max_iter", history


def _top_selling(bids: np.ndarray, E: np.ndarray) -> float:
    """A ceiling: the highest bid that gets anything when the next one gets nothing while
    it still gets at least 1e-3 (a reserve: selling stops at once); inf when selling
    fades out continuously (the others' highest bids) or never stops."""
    sells = np.flatnonzero(E > 0)
    if sells.size == 0 or sells[-1] == bids.size - 1 or E[sells[-1]] < 1e-3:
        return math.inf
    return float(bids[sells[-1]])


def _loss(U, probs, weights) -> float:
    """The largest relative utility loss over the classes."""
    return max(_utility_loss(u, p, w) for u, p, w in zip(U, probs, weights, strict=True))


# ---- the strategy as a bid function -------------------------------------------------------
def mean_bid_table(
    strategy: MixedStrategy, law, z_range: tuple[float, float], knot_every: int = 8,
) -> tuple[np.ndarray, np.ndarray]:  # fmt: skip
    """(costs, bids): the class's strategy as a bid function (a table; linear
    interpolation between its rows), in two steps.

    1. **Purified**: a cost node stands for its cell of quantiles [i/k, (i+1)/k]; where
       it mixes, the cell's costs are sorted onto its bids in the order of the bid
       function (increasing when the mean bids rise with the cost, else decreasing):
       the cell's quantile i/k + s/k bids the node's bid quantile s (each grid bid
       spread evenly over its cell), at s = 1/8, 3/8, 5/8, 7/8.  For a monotone
       equilibrium this is the pure strategy the mixed one stands for (a point mass of
       costs that would bid an interval mixes over it).
    2. **Smoothed** on each run of nodes that sell (expected eps >= 1e-4) by a
       least-squares cubic spline in the quantile with a knot every ``knot_every``
       nodes (a bid function is smooth in the quantile where a density is singular: F =
       sqrt(c) gives b = 1/6 + sqrt(c)/3 + ..., linear in it), evaluated at the support's
       ends too, and at the edge of its end node's cell where a run ends inside the
       support (a reserve, costs priced out): the kink is kept, and a selling run's bids
       stay at or below the highest bid that sells.  The nodes that never sell bid the
       larger of their cost and the highest bid that sells (their mixed bids, wherever
       they never sell, are all best responses; this one is the continuous game's).
       The smoothing removes the grid's staircase, whose steps of about a grid step
       give deviations a first-order gain in the continuous game."""
    k = strategy.costs.size
    sub = (np.arange(4) + 0.5) / 4
    rising = bool(np.polyfit(np.arange(k), strategy.mean, 1)[0] >= 0)
    pure = _purified(strategy, sub if rising else 1 - sub)  # (k, 4)
    u = ((np.arange(k)[:, None] + sub[None, :]) / k).ravel()
    b = pure.ravel()
    sells = np.repeat(strategy.win >= 1e-4, sub.size)
    ends = np.array([b[0], b[-1]])
    edges_u, edges_b = [], []  # a run's end inside the support: the kink, kept
    for run in _runs(sells):
        fit = _spline(u[run], b[run], knot_every * sub.size)
        if fit is None:
            continue
        b[run] = np.minimum(fit(u[run]), strategy.top_selling)
        for i, end in ((run[0], 0.0), (run[-1], 1.0)):
            at = (i // sub.size + end) / k  # the edge of the end node's cell
            value = min(float(fit(at)), strategy.top_selling)
            if at in (0.0, 1.0):
                ends[int(end)] = value
            else:
                edges_u.append(at)
                edges_b.append(value)
    lo, hi = law.support
    dead = ~sells  # nodes that never sell: at least the highest selling bid (and the cost)
    if np.isfinite(strategy.top_selling):
        c_sub = np.clip(np.asarray(law.ppf(u[dead]), dtype=float), lo, hi)
        b[dead] = np.maximum(c_sub, strategy.top_selling)
        ends[1] = b[-1] if dead[-1] else ends[1]
    u_all = np.concatenate((u, edges_u))
    order = np.argsort(u_all, kind="stable")
    inner = np.clip(np.asarray(law.ppf(u_all[order]), dtype=float), lo, hi)
    costs = np.concatenate(([lo], inner, [hi]))
    bids = np.clip(
        np.concatenate(([ends[0]], np.concatenate((b, edges_b))[order], [ends[1]])), *z_range
    )
    keep = np.concatenate(([True], np.diff(costs) > 0))  # repeated costs (an atom, an end)
    return costs[keep], bids[keep]


def _purified(strategy: MixedStrategy, s: np.ndarray) -> np.ndarray:
    """(nodes, len(s)): each node's bid quantiles at ``s``, a grid bid spread evenly
    over its cell (midpoints to its neighbours)."""
    z = strategy.bids
    edges = np.concatenate(([z[0]], 0.5 * (z[1:] + z[:-1]), [z[-1]]))
    cdf = np.concatenate((np.zeros((strategy.probs.shape[0], 1)), np.cumsum(strategy.probs, 1)), 1)
    return np.array([np.interp(s, row / row[-1], edges) for row in cdf])


def _runs(mask: np.ndarray) -> list[np.ndarray]:
    """The index runs where ``mask`` is true."""
    idx = np.flatnonzero(mask)
    return [r for r in np.split(idx, np.flatnonzero(np.diff(idx) > 1) + 1) if r.size]


def _spline(x: np.ndarray, y: np.ndarray, every: int):
    """The least-squares cubic spline through (x, y) with interior knots at every
    ``every``-th point (None when there are too few points for one)."""
    from scipy.interpolate import LSQUnivariateSpline

    if every < 1 or x.size < 2 * every + 4:
        return None
    knots = x[every : x.size - every : every]
    try:
        return LSQUnivariateSpline(x, y, knots, k=3)
    except ValueError:
        return None


def live_top(strategy: MixedStrategy, support: tuple[float, float]) -> float:
    """The top of the costs that get anything: the next node above the highest one whose
    expected eps is at least 1e-4 (the support's top when every node does)."""
    live = np.flatnonzero(strategy.win >= 1e-4)
    if live.size == 0 or live[-1] + 1 >= strategy.costs.size:
        return float(support[1])
    return float(strategy.costs[live[-1] + 1])


#: the smoothing candidates (a knot every so many cost nodes) the exact path chooses from
KNOT_CHOICES = (6, 8, 12, 16, 20, 24, 28)


@dataclass(frozen=True)
class _Search:
    """The verification's search settings for ``interim_epsilon``."""

    check_grid: int = 129
    refine: int = 3


#: envelope steps tried after the smoothing on the exact path (with several classes; one
#: class needs one: ``equilibrium_envelope``) and their damping
ENVELOPE_STEPS = 4
ENVELOPE_DAMPING = 0.5


@dataclass(frozen=True)
class Tables:
    """``bid_tables``'s answer: per class (costs, bids); the knot spacing of the
    smoothing; how many envelope steps were kept (0: none improved); the exact relative
    epsilon of the tables (NaN on the sampled path); whether the tables are the inverse
    bids of the first-order system (``equilibrium_envelope.inverse_bid_tables``)."""

    tables: list[tuple[np.ndarray, np.ndarray]]
    knot_every: int
    envelope_steps: int
    exact_epsilon: float
    inverse_bids: bool = False


def bid_tables(mech, classes: Classes, sol: MixedSolution, z_range: tuple[float, float]) -> Tables:
    """Each class's bid table (``mean_bid_table``), then on the exact path the best of
    the candidates by their exact relative epsilon (``_exact_relative_epsilon``: every
    report of the range searched against the tables' exact report laws, at quantile and
    even costs; the largest over the classes).  The candidates: the knot spacings
    ``KNOT_CHOICES`` (how much to smooth is a property of the game: a steep bottom wants
    more, a curved bid less), then envelope steps from the best of those
    (``equilibrium_envelope``: with one class, from the table with the rows
    ``quantile_rows`` adds, since the step's bids are exact at every row and its
    trapezoid runs on them, and once more when the stepped table, its bids now right,
    asks for rows its start did not (a start whose bids fall and rise again has no
    curvature to read: all-pay, 32 sellers, a cell of 1/256 left whole, its chord
    8.7e-6 under the bid, exact epsilon 0.85% -> 0.17%); ``ENVELOPE_STEPS`` damped ones
    with several), each kept
    only if it lowers the exact epsilon; with several classes, last,
    the inverse bids of the first-order system solved by shooting
    (``equilibrium_envelope.inverse_bid_tables``: the damped steps' fixed point, which
    they need not reach), up to the lowest top of the supports or the highest bid that
    sells (a reserve), kept if it lowers the exact epsilon; with one class under a
    ceiling, one envelope step from the table made to sell to exactly the costs below
    the marginal cost (``_with_ceiling_envelope``), kept if its exact epsilon is no
    larger.  On the sampled path a knot every 16 nodes, nothing measured."""
    laws = classes.laws
    interim = interim_of(mech) if classes.data is None else None

    def tables(every):
        return [
            mean_bid_table(s, law, z_range, every)
            for s, law in zip(sol.strategies, laws, strict=True)
        ]

    if interim is None:
        return Tables(tables(16), 16, 0, math.nan)
    oracle, cdfs = Oracle(mech, exact=True), [tabulated_cdf(law) for law in laws]
    best = Tables(tables(16), 16, 0, math.inf)
    for every in KNOT_CHOICES:
        tabs = tables(every)
        eps = _exact_relative_epsilon(oracle, classes, tabs, cdfs, z_range)
        if eps < best.exact_epsilon:
            best = Tables(tabs, every, 0, eps)
    steps, damping = (2, 1.0) if len(laws) == 1 else (ENVELOPE_STEPS, ENVELOPE_DAMPING)
    tabs = best.tables
    for step in range(1, steps + 1):
        if len(laws) == 1:  # the step's bids are exact at every row: give it the rows
            rows = quantile_rows(*tabs[0], laws[0], sol.strategies[0].top_selling)
            if step > 1 and rows[0].size == tabs[0][0].size:
                break  # one class: a second step on the same rows is the first's fixed point
            tabs = [rows]
        tabs = envelope_step(interim, classes, tabs, z_range, damping, cdfs)
        eps = _exact_relative_epsilon(oracle, classes, tabs, cdfs, z_range)
        if eps < best.exact_epsilon:
            best = Tables(tabs, best.knot_every, step, eps)
    if len(laws) > 1:
        best = _with_inverse_bids(best, interim, oracle, classes, sol, cdfs, z_range)
    else:
        best = _with_ceiling_envelope(best, interim, oracle, classes, sol, cdfs, z_range)
    best = _with_quantile_rows(best, oracle, classes, sol, cdfs, z_range)
    dense = _refined_exact_epsilon(oracle, classes, best.tables, cdfs, z_range)
    return dataclasses.replace(best, exact_epsilon=max(best.exact_epsilon, dense))


def _with_inverse_bids(best: Tables, interim, oracle, classes: Classes, sol, cdfs, z_range):
    """``best``, or the inverse bids of the first-order system when their exact relative
    epsilon is smaller (``bid_tables``), run to each of two tops of the bids: the lowest
    top of the supports or where selling stops (first price: a cost above the lowest
    top never sells), and where selling stops alone (an all-pay contest: every report
    under the top wins against the weak seller's atom there, so a seller whose costs end
    at 0.5 still bids up to 1: U[0, 0.5] against U[0, 1], one each, 19% exact epsilon
    with the first top alone)."""
    ceiling = min(min(_ceiling(interim, classes, s) for s in sol.strategies), z_range[1])
    lowest_top = min(min(law.support[1] for law in classes.laws), ceiling)
    for top in dict.fromkeys((lowest_top, ceiling)):
        tabs = inverse_bid_tables(interim, classes, top)
        if tabs is None:
            continue
        eps = _exact_relative_epsilon(oracle, classes, tabs, cdfs, z_range)
        if eps < best.exact_epsilon:
            best = Tables(tabs, best.knot_every, 0, eps, inverse_bids=True)
    return best


def _with_ceiling_envelope(best: Tables, interim, oracle, classes: Classes, sol, cdfs, z_range):
    """One class under a ceiling (a reserve, ``_ceiling``): ``best``, or one envelope step
    from its table made to sell to exactly the costs that sell in the equilibrium, when
    its exact relative epsilon is no larger.  With one class the step maps a table to the
    equilibrium given the costs that sell in the table (``equilibrium_envelope``: E(t)
    is the table's allocation), and a grid's table prices out costs just under the
    ceiling (issue #48, pab-2unit-power-reserve: the grid's highest selling bid 0.6992
    under a reserve of 0.7; costs 0.638-0.675 pooled at 0.6925 and the step kept its
    cut-off: L-infinity 0.0103).  In the equilibrium a seller of cost c sells, ranked by
    its cost, as long as it gains by a report at the ceiling r: c < c*, the marginal
    cost (``_marginal_cost``; c* = r for pay-as-bid, T = z E).  The table's bids: at
    most r below c*, r at c*, and from just above c* at least the cost and the grid's
    bid after r (which does not sell: r's next float still sells, r being found to
    1e-12); the step's reports searched up to r.  Both tables are measured also at
    costs between ``best``'s own cut-off under r and c* (a band that its even and
    quantile costs can miss: F = c^0.3, 3 sellers, reserve 0.2, priced out 0.1981-0.2,
    where the dense measure then found 1.2%)."""
    r = _ceiling(interim, classes, sol.strategies[0])
    if not math.isfinite(r):
        return best
    c_star = _marginal_cost(interim, classes, r)
    costs, bids = best.tables[0]
    if c_star is None or not costs[0] < c_star < costs[-1]:
        return best
    above = _next_bid(sol.strategies[0])  # it does not sell (``_ceiling``)
    gap = 1e-9 * (costs[-1] - costs[0])  # the cut-off: a row just above c* sells nothing
    low, high = costs < c_star, costs > c_star + gap
    tab = (
        np.concatenate((costs[low], [c_star, c_star + gap], costs[high])),
        np.concatenate((np.minimum(bids[low], r), [r, above],
                        np.maximum(np.maximum(bids[high], costs[high]), above))),
    )  # fmt: skip
    tabs = envelope_step(interim, classes, [tab], (z_range[0], r), 1.0, cdfs)
    band = [np.linspace(min(_cut_off(costs, bids, r), c_star), c_star, 9)[:-1]]
    before = _exact_relative_epsilon(oracle, classes, best.tables, cdfs, z_range, extra=band)
    before = max(before, best.exact_epsilon)
    eps = _exact_relative_epsilon(oracle, classes, tabs, cdfs, z_range, extra=band)
    if eps <= before:
        return Tables(tabs, best.knot_every, 1, eps)
    return dataclasses.replace(best, exact_epsilon=before)


def _cut_off(costs: np.ndarray, bids: np.ndarray, r: float) -> float:
    """The cost where the table (linear between its rows) first bids above ``r``
    (its last cost when it never does)."""
    mono = np.maximum.accumulate(bids)
    above = np.flatnonzero(mono > r)
    if above.size == 0:
        return float(costs[-1])
    i = int(above[0])
    if i == 0:
        return float(costs[0])
    t = (r - mono[i - 1]) / (mono[i] - mono[i - 1])
    return float(costs[i - 1] + t * (costs[i] - costs[i - 1]))


def _marginal_cost(interim, classes: Classes, r: float) -> float | None:
    """The top of the costs c of the (one) class whose seller, with its own class below
    it with probability F(c) (its rank), gets T(r) - c E(r) > 0 at the ceiling r, by
    bisection to 1e-12 (None: no such cost, or every cost of the support)."""
    law = classes.laws[0]
    lo, hi = (float(x) for x in law.support)
    counts = np.asarray(classes.counts) - 1

    def gains(c: float) -> bool:
        below = np.clip(np.asarray(law.cdf(np.array([c])), dtype=float), 0.0, 1.0)[None, :]
        E, T = interim(np.array([r]), below, counts)
        return float(np.asarray(T)[0]) - c * float(np.asarray(E)[0]) > 0

    if not math.isfinite(hi) or gains(hi) or not gains(lo):
        return None
    return _last_true(gains, lo, hi)


def _with_quantile_rows(best: Tables, oracle, classes: Classes, sol, cdfs, z_range) -> Tables:
    """``best``, or its tables with rows added inside the cells where the cost is far
    from linear in the quantile (``quantile_rows``), when that lowers the exact relative
    epsilon.  A table is read linearly in the cost, but a bid function is smooth in the
    quantile (``mean_bid_table``): where the law's density is singular or vanishes at an
    end, the chord in the cost between two rows is not the bid function's (issue #48:
    F = c^0.15, 5 sellers: rows at c = 8.7e-19 and 1.3e-15, the gain at c = 2e-16, exact
    relative epsilon 1.21% -> 0.07%; all-pay on Beta(2, 2), 3 sellers: 1.37% -> 0.02%)."""
    tabs = [
        quantile_rows(c, b, law, s.top_selling)
        for (c, b), law, s in zip(best.tables, classes.laws, sol.strategies, strict=True)
    ]
    if all(t[0].size == c.size for t, (c, _) in zip(tabs, best.tables, strict=True)):
        return best
    eps = _exact_relative_epsilon(oracle, classes, tabs, cdfs, z_range)
    return (
        dataclasses.replace(best, tables=tabs, exact_epsilon=eps)
        if eps < best.exact_epsilon
        else best
    )


#: ``quantile_rows``: rows per cell where a cell bends, the bend that counts, and the
#: chord's error in the bid that counts whatever the bend (a steep cell: all-pay on F =
#: c^0.4, 5 sellers: cells at c ~ 1e-3 bend by 1.2% with bids 0.013 apart, the chord
#: 1.5e-4 under the bid function, exact epsilon 1.9%; issue #48); a curved bid gets
#: rows until its chord is within ``_CHORD_ERROR`` (at most ``CURVED_PARTS`` a cell:
#: all-pay, 32 sellers, u = 1/1056, was 0.85% with 1e-5 and is 0.17% with 2e-6)
QUANTILE_PARTS, _BEND, _BID_ERROR, CURVED_PARTS, _CHORD_ERROR = 16, 0.02, 1e-5, 32, 2e-6
#: ``_end_rows``: the ratio of two successive quantiles towards a singular end (the bid
#: of F = sqrt(c) is b_0 + 7 sqrt(c) there, 8 sellers of all-pay: read linearly in the
#: cost between quantiles a ratio 2 apart it was 7e-5 low at c = 3.4e-8, 1.3% of u;
#: the chord's error falls with the square of the ratio's excess over 1)
_END_RATIO = 2.0**0.125


def quantile_rows(
    costs: np.ndarray, bids: np.ndarray, law, top_selling: float = math.inf
) -> tuple[np.ndarray, np.ndarray]:
    """The table (costs, bids) with rows added, evenly in the quantile u = F(c), inside
    each cell that a linear reading in the cost gets wrong, their bids linear in u
    between the cell's (an envelope step then makes them exact, ``bid_tables``):

    * ``QUANTILE_PARTS`` parts where the cost is far from linear in u (the cell's
      midpoint in u off its middle cost by more than ``_BEND`` of the cell, or by so
      much that the chord is ``_BID_ERROR`` off in the bid);
    * where the bid is curved in the cost (``_chord_error``: its second differences),
      as many parts as bring the chord within ``_CHORD_ERROR``: all-pay, 12 sellers on U[0,
      1], b(c) = 1 - 11/12 (1 - c)^12 rises by 0.04 in the first cells of 1/256 and its
      chord is 2.3e-4 under it; every report in such a cell earns a utility linear in
      the report, so the best one is a row's and the gain first order (issue #48: exact
      epsilon 3.1%).

    Only cells whose bids sell (at most ``top_selling``).  A uniform law and a bid linear
    in the cost get none (the table as it is)."""
    costs, bids = np.asarray(costs, dtype=float), np.asarray(bids, dtype=float)
    lo, hi = law.support
    u = np.clip(np.asarray(law.cdf(costs), dtype=float), 0.0, 1.0)
    u0, u1, c0, c1 = u[:-1], u[1:], costs[:-1], costs[1:]
    mid = np.clip(law_quantiles(law, 0.5 * (u0 + u1)), lo, hi)
    width = np.maximum(c1 - c0, 1e-300)
    bend = np.abs(mid - 0.5 * (c0 + c1)) / width  # the chord's error, a share of the cell
    bent = (bend > _BEND) | (bend * np.abs(np.diff(bids)) > _BID_ERROR)
    curved = np.ceil(np.sqrt(_chord_error(costs, bids) / _CHORD_ERROR))
    parts = np.maximum(np.where(bent, QUANTILE_PARTS, 1), np.minimum(curved, CURVED_PARTS))
    sells = np.maximum(bids[:-1], bids[1:]) <= top_selling
    parts = np.where((u1 > u0) & sells, parts, 1).astype(np.int64)
    if not (parts > 1).any():
        return costs, bids
    cells = np.flatnonzero(parts > 1)
    added = parts[cells] - 1
    cell = np.repeat(cells, added)
    t = (np.arange(added.sum()) - np.repeat(np.cumsum(added) - added, added) + 1) / parts[cell]
    u_new = np.concatenate((u0[cell] + t * (u1 - u0)[cell], _end_rows(u, parts, bent)))
    c_new = np.clip(law_quantiles(law, u_new), lo, hi)
    b_new = np.interp(u_new, u, bids)
    order = np.argsort(np.concatenate((costs, c_new)), kind="stable")
    c_all = np.concatenate((costs, c_new))[order]
    b_all = np.concatenate((bids, b_new))[order]
    keep = np.concatenate(([True], np.diff(c_all) > 0))
    return c_all[keep], np.maximum.accumulate(b_all[keep]) if _rising(bids) else b_all[keep]


def _end_rows(u: np.ndarray, parts: np.ndarray, bent: np.ndarray) -> np.ndarray:
    """Quantiles geometric towards an end of the law, down to 1e-15, inside the table's
    first (last) cell when it bends and starts at u = 0 (ends at 1): under a density
    singular there the cost is far from linear in u at every scale, so even parts leave
    a first part as bent as the cell (all-pay, 8 sellers, F = sqrt(c), b(c) ~ b_0 +
    7 sqrt(c): read linearly in the cost over the first part, the others' reports were
    spread like sqrt(z - b_0) above b_0 instead of evenly, and a seller of cost 1e-9
    gained 2.9% of u by the report 0.0354; issue #48)."""
    rows = []
    if parts[0] > 1 and bent[0] and u[0] <= 0.0:
        rows.append(_geometric_below(u[1] - u[0]))
    if parts[-1] > 1 and bent[-1] and u[-1] >= 1.0:
        rows.append(1.0 - _geometric_below(u[-1] - u[-2]))
    return np.concatenate(rows) if rows else np.empty(0)


def _geometric_below(first: float) -> np.ndarray:
    """Quantiles from ``first`` down to 1e-15, each ``_END_RATIO`` times the next."""
    count = int(math.log(max(first, 1e-15) / 1e-15) / math.log(_END_RATIO))
    return first * _END_RATIO ** -np.arange(1.0, count + 1)


def _chord_error(costs: np.ndarray, bids: np.ndarray) -> np.ndarray:
    """Per cell, the chord's error in the bid, width^2 |b''| / 8, with b'' the larger of
    the second divided differences at the cell's two rows (0 at the table's ends, and
    beside a step, two rows at one cost)."""
    width = np.diff(costs)
    ok = width > 0
    slope = np.where(ok, np.diff(bids) / np.where(ok, width, 1.0), np.nan)
    span = costs[2:] - costs[:-2]
    with np.errstate(invalid="ignore"):
        second = 2 * np.abs(np.diff(slope)) / np.where(span > 0, span, np.nan)
    second = np.nan_to_num(np.concatenate(([0.0], second, [0.0])), nan=0.0, posinf=0.0)
    return width**2 * np.maximum(second[:-1], second[1:]) / 8


def _rising(bids: np.ndarray) -> bool:
    return bool(np.all(np.diff(bids) >= 0))


def _ceiling(interim, classes: Classes, strategy: MixedStrategy) -> float:
    """Where selling stops (a reserve), to 1e-12: between the grid's highest bid that
    sells (``top_selling``) and the next bid of the grid, the highest report at which a
    seller with every opponent above it still sells (the interim's E > 0, by bisection);
    inf when selling does not stop at once."""
    if not math.isfinite(strategy.top_selling):
        return math.inf
    alone = np.zeros((len(classes.laws), 1))
    counts = np.asarray(classes.counts) - (np.arange(len(classes.laws)) == 0)  # a class-0 seller's

    def sells(z: float) -> bool:
        return float(np.asarray(interim(np.array([z]), alone, counts)[0])[0]) > 0

    return _last_true(sells, strategy.top_selling, _next_bid(strategy))


def _next_bid(strategy: MixedStrategy) -> float:
    """The grid's bid after the highest that sells (``top_selling``; the grid's top if none)."""
    bids = strategy.bids
    return float(bids[min(int(np.searchsorted(bids, strategy.top_selling)) + 1, bids.size - 1)])


def _last_true(holds, low: float, high: float) -> float:
    """Bisection to 1e-12 (relative, of at least 1) between ``low``, where ``holds`` is
    true, and ``high``, where it is false: the last point where it holds."""
    while high - low > 1e-12 * max(1.0, abs(high)):
        mid = 0.5 * (low + high)
        low, high = (mid, high) if holds(mid) else (low, mid)
    return low


def _refined_exact_epsilon(oracle, classes: Classes, tabs, cdfs, z_range) -> float:
    """The chosen tables' exact relative epsilon measured denser until two successive
    densities agree (within 5% of the larger, or 1e-5): costs 128, 256, 512 quantiles
    and as many even costs, reports 4 x as dense as the choice's search, 6 rounds of
    refinement; the largest value seen (a printed epsilon is never smaller than a
    denser evaluation finds, issue #48)."""
    search = _Search(check_grid=4 * _Search.check_grid, refine=6)
    seen: list[float] = []
    for cells in (128, 256, 512):
        seen.append(_exact_relative_epsilon(oracle, classes, tabs, cdfs, z_range, cells, search))
        if len(seen) > 1 and abs(seen[-1] - seen[-2]) <= max(0.05 * max(seen[-2:]), 1e-5):
            break
    return max(seen)


def truth_relative_epsilon(mech, classes: Classes, z_range: tuple[float, float]) -> float:
    """The exact relative epsilon of truthful reports on the mechanism's ``interim``
    (``_exact_relative_epsilon`` of the tables b(c) = c), the largest over the classes:
    0 for an IC mechanism, large (or NaN: no utility at the truth) for one that pays the
    bid.  ``auto`` asks it of a black box's rank interim."""
    laws = classes.laws
    tabs = [(np.array(law.support, dtype=float), np.clip(law.support, *z_range)) for law in laws]
    cdfs = [tabulated_cdf(law) for law in laws]
    return _exact_relative_epsilon(Oracle(mech, exact=True), classes, tabs, cdfs, z_range)


def _exact_relative_epsilon(
    oracle, classes: Classes, tabs, cdfs, z_range, cells: int = 64, search: _Search | None = None,
    extra=None,
) -> float:  # fmt: skip
    """The largest over the classes of the exact relative epsilon of the tables
    (``interim_epsilon``) at ``cells`` quantile and ``cells`` - 1 even costs of each law
    (and per class the costs ``extra[g]``, when given)."""
    mono = [(c, np.maximum.accumulate(b)) for c, b in tabs]
    laws_of = Interim(classes, [c for c, _ in mono], [b for _, b in mono], cdfs)
    eps = 0.0
    for g, law in enumerate(classes.laws):
        lo, hi = law.support
        q = (np.arange(cells) + 0.5) / cells
        costs = np.union1d(np.asarray(law.ppf(q)), np.linspace(lo, hi, cells + 1)[1:-1])
        costs = np.clip(np.union1d(costs, [] if extra is None else extra[g]), lo, hi)
        bids = np.interp(costs, *tabs[g])
        eps = max(
            eps,
            interim_epsilon(
                oracle, laws_of, g, law, costs, bids, z_range, z_range[1], search or _Search()
            ),
        )
    return eps
