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
(SODA's): Y_g += eta_t u_g / scale, s_g[i, :] = softmax(Y_g[i, :]), eta_t = ``step`` x
t^-0.05, ``scale`` the first iteration's largest |u|.  It stops when every class's
relative utility loss on the grid, 1 - u_g(s) / u_g(best response), is at most
``eps_tol`` (1e-4, SODA's), else after ``max_iter``.  The result is a
:class:`MixedSolution`; ``market_sim.equilibrium.bne(..., method="distributional")``
turns it into a ``BNEResult`` (each class's mean bid per cost node as its bid function,
the spread beside it) and verifies it with the pure solver's verification.
"""

from __future__ import annotations

import math
import sys
from dataclasses import dataclass, field

import numpy as np

from .equilibrium_game import SENTINELS, Classes, Oracle, Sample, interim_of
from .errors import MarketSimError
from .parameters import check_int

__all__ = [
    "DistOptions",
    "MixedSolution",
    "MixedStrategy",
    "live_top",
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
    step: float = 50.0  # eta: dual averaging's step (times t^-0.05), on utilities / scale
    markets: int = 256  # sampled path: opponent markets per iteration

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
        return DistOptions(**kw)


@dataclass(frozen=True)
class MixedStrategy:
    """One class's distributional strategy: ``probs[i, k]`` the probability that a seller
    at cost node ``costs[i]`` (weight ``weights[i]`` of the law) reports ``bids[i, k]``
    (each node its own grid of bids)."""

    costs: np.ndarray = field(repr=False)
    weights: np.ndarray = field(repr=False)
    bids: np.ndarray = field(repr=False)
    probs: np.ndarray = field(repr=False)
    win: np.ndarray = field(repr=False)  # per cost node, the probability of getting anything

    @property
    def mean(self) -> np.ndarray:
        """The mean bid per cost node."""
        return np.sum(self.probs * self.bids, axis=1)

    @property
    def spread(self) -> np.ndarray:
        """The standard deviation of the bid per cost node."""
        var = np.sum(self.probs * self.bids**2, axis=1) - self.mean**2
        return np.sqrt(np.maximum(var, 0.0))

    @property
    def step(self) -> float:
        """The grids' median step between bids."""
        return float(np.median(np.diff(self.bids, axis=1)))

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


def below_probabilities(bids, probs, weights, Z: np.ndarray) -> np.ndarray:
    """(classes, len(Z)): per class the probability that one seller reports below z, a
    tie counted half: its reports are node i's bids ``bids[h][i, k]`` with probability
    weights[i] probs[h][i, k]."""
    out = []
    for B, p, w in zip(bids, probs, weights, strict=True):
        pts, mass = B.ravel(), (w[:, None] * p).ravel()
        order = np.argsort(pts, kind="stable")
        pts, C = pts[order], np.concatenate(([0.0], np.cumsum(mass[order])))
        left, right = np.searchsorted(pts, Z, "left"), np.searchsorted(pts, Z, "right")
        out.append(C[left] + 0.5 * (C[right] - C[left]))
    return np.clip(np.array(out), 0.0, 1.0)


class _Game:
    """E and T of a deviator of each class at every bid of its nodes' grids (``bids[g]``,
    (nodes, K)) against the others' mixed strategies: exactly through ``interim`` or on
    fresh sampled markets (these need one grid shared by the nodes)."""

    def __init__(self, mech, classes: Classes, bids, opt: DistOptions, rng, calls=0):
        self.classes, self.bids, self.opt, self.rng = classes, bids, opt, rng
        self.interim = interim_of(mech) if classes.data is None else None
        self.oracle = Oracle(mech, exact=self.interim is not None)
        self.oracle.calls = self.calls = calls
        self.last: list[tuple[np.ndarray, np.ndarray]] = []

    @property
    def path(self) -> str:
        return self.oracle.path

    def eps_pay(self, probs, weights) -> list[tuple[np.ndarray, np.ndarray]]:
        """Per class (E, T) at every node's bids, (nodes, K) each (kept as ``last``)."""
        self.last = self._eps_pay(probs, weights)
        return self.last

    def _eps_pay(self, probs, weights) -> list[tuple[np.ndarray, np.ndarray]]:
        out = []
        if self.interim is not None:
            counts = np.asarray(self.classes.counts)
            for g, B in enumerate(self.bids):
                Z, at = np.unique(B, return_inverse=True)
                below = below_probabilities(self.bids, probs, weights, Z)
                E, T = self.interim(Z, below, counts - (np.arange(counts.size) == g))
                E, T = np.asarray(E, dtype=float), np.asarray(T, dtype=float)
                out.append((E[at].reshape(B.shape), T[at].reshape(B.shape)))
                self.calls += Z.size
            return out
        sample = Sample(self.classes, self.opt.markets, 1, self.rng)
        R = self._reports(sample, probs)
        for g, B in enumerate(self.bids):
            E, T = self.oracle.eps_pay(sample, R, g, B[0])
            shape = B.shape
            out.append((np.broadcast_to(sample.mean(E), shape), np.broadcast_to(sample.mean(T), shape)))
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
            k = np.minimum((cdf < u).sum(axis=-1), probs[g].shape[1] - 1)
            R[:, cols] = self.bids[g][node, k]
        return R


def _utilities(game: _Game, costs, probs, weights) -> list[np.ndarray]:
    """u_g[i, k] = T_g(b_ik) - c_i E_g(b_ik) per class (the deviator's utility is linear
    in its cost)."""
    return [T - c[:, None] * E
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
    return [np.where(B >= c[:, None], 0.0, -5.0) for c, B in zip(costs, bids, strict=True)]


# ---- the solve ----------------------------------------------------------------------------
def solve_distributional(
    mech, classes: Classes, z_range: tuple[float, float], rng, opt: DistOptions,
    progress: bool = False,
) -> MixedSolution:  # fmt: skip
    """Mixed strategies per class by entropic dual averaging on the discretised game
    (module doc), in two stages: a quarter of ``max_iter`` on ``bid_grid`` bids evenly
    over the report range shared by every cost node, then the rest on grids that follow
    the first stage's bids (``local_grids`` on the exact path: each node its own
    ``bid_grid`` / 2 bids around what it and its neighbours played; else one shared
    ``following_grid``), warm-started where the first stage left off.  Where a bid
    function is steep (the bottom of a first-price or all-pay support, a singular
    density) or flat (an all-pay contest's high costs all bid near the top), the
    second grids resolve it."""
    nodes = [quantile_nodes(law, opt.grid) for law in classes.laws]
    costs, weights = [c for c, _ in nodes], [w for _, w in nodes]
    even = np.linspace(z_range[0], z_range[1], opt.bid_grid)
    bids = [np.tile(even, (c.size, 1)) for c in costs]
    first = max(1, opt.max_iter // 4)
    game = _Game(mech, classes, bids, opt, rng)
    probs, stopped, history = _dual_averaging(game, costs, weights, opt, first, progress)
    if stopped != "utility_loss" and opt.max_iter > first:
        old = bids
        if game.interim is not None:
            bids = [local_grids(B, p, max(8, opt.bid_grid // 2), z_range) for B, p in zip(bids, probs, strict=True)]
        else:
            live = [_sells(p, E) >= 1e-4 for p, (E, _) in zip(probs, game.last, strict=True)]
            shared = following_grid(even, probs, weights, live, opt.bid_grid, z_range)
            bids = [np.tile(shared, (c.size, 1)) for c in costs]
        game = _Game(mech, classes, bids, opt, rng, calls=game.calls)
        start = [_carried(p, b0, b1) for p, b0, b1 in zip(probs, old, bids, strict=True)]
        probs, stopped, rest = _dual_averaging(
            game, costs, weights, opt, opt.max_iter - first, progress, start
        )
        history += rest
    U = _utilities(game, costs, probs, weights)
    strategies = tuple(
        MixedStrategy(c, w, B, p, _sells(p, E))
        for c, w, B, p, (E, _) in zip(costs, weights, bids, probs, game.last, strict=True)
    )
    return MixedSolution(
        strategies, len(history), stopped, _loss(U, probs, weights), tuple(history),
        game.path, game.calls,
    )  # fmt: skip


def _sells(p: np.ndarray, E: np.ndarray) -> np.ndarray:
    """Per node the expected eps of its mixed strategy (capped at 1 per bid)."""
    return np.sum(p * np.minimum(E, 1.0), axis=1)


def local_grids(bids: np.ndarray, probs: np.ndarray, k: int, z_range) -> np.ndarray:
    """(nodes, k): per cost node ``k`` - 1 bids evenly over the range that it and its two
    neighbours each side played (their 0.1% to 99.9% quantiles, widened by two cells of
    the old grid each side) and the report range's top (a bid that never sells)."""
    q = _purified(bids, probs, np.array([1e-3, 1 - 1e-3]))
    h = float(np.median(np.diff(bids, axis=1)))
    n = q.shape[0]
    lo = np.array([q[max(0, i - 2) : i + 3, 0].min() for i in range(n)]) - 2 * h
    hi = np.array([q[max(0, i - 2) : i + 3, 1].max() for i in range(n)]) + 2 * h
    lo, hi = np.maximum(lo, z_range[0]), np.minimum(hi, z_range[1])
    t = np.linspace(0.0, 1.0, k - 1)
    grid = lo[:, None] + (hi - lo)[:, None] * t[None, :]
    return np.concatenate((grid, np.full((n, 1), z_range[1])), axis=1)


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
    """Dual variables on the bids ``new`` (nodes, K') that start where ``probs`` on the
    bids ``old`` (nodes, K) left off: per node the log of its bid density (probability
    per unit of bid, linearly interpolated) times the new cells' widths, floored at
    1e-6 of the node's largest."""
    out = np.empty(new.shape)
    for i in range(new.shape[0]):
        dens = probs[i] / _cells(old[i])
        out[i] = np.interp(new[i], old[i], dens) * _cells(new[i])
    floor = np.maximum(1e-6 * out.max(axis=1, keepdims=True), 1e-300)
    return np.log(np.maximum(out, floor))


def _cells(b: np.ndarray) -> np.ndarray:
    """The widths of the cells of sorted bids b (midpoints to the neighbours)."""
    e = np.concatenate(([b[0]], 0.5 * (b[1:] + b[:-1]), [b[-1]]))
    return np.maximum(np.diff(e), 1e-12)


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
       ends too.  A run ends where selling ends (a reserve, costs priced out): the kink
       is kept.  The smoothing removes the grid's staircase, whose steps of about a grid
       step give deviations a first-order gain in the continuous game."""
    k = strategy.costs.size
    sub = (np.arange(4) + 0.5) / 4
    rising = bool(np.polyfit(np.arange(k), strategy.mean, 1)[0] >= 0)
    pure = _purified(strategy.bids, strategy.probs, sub if rising else 1 - sub)  # (k, 4)
    u = ((np.arange(k)[:, None] + sub[None, :]) / k).ravel()
    b = pure.ravel()
    sells = np.repeat(strategy.win >= 1e-4, sub.size)
    ends = np.array([b[0], b[-1]])
    for run in _runs(sells):
        fit = _spline(u[run], b[run], knot_every * sub.size)
        if fit is None:
            continue
        b[run] = fit(u[run])
        if run[0] == 0:
            ends[0] = fit(0.0)
        if run[-1] == u.size - 1:
            ends[1] = fit(1.0)
    lo, hi = law.support
    costs = np.concatenate(([lo], np.clip(np.asarray(law.ppf(u), dtype=float), lo, hi), [hi]))
    bids = np.clip(np.concatenate(([ends[0]], b, [ends[1]])), *z_range)
    keep = np.concatenate(([True], np.diff(costs) > 0))  # repeated costs (an atom, an end)
    return costs[keep], bids[keep]


def _purified(bids: np.ndarray, probs: np.ndarray, s: np.ndarray) -> np.ndarray:
    """(nodes, len(s)): each node's bid quantiles at ``s``, a bid of its (sorted) grid
    spread evenly over its cell (midpoints to its neighbours)."""
    out = np.empty((probs.shape[0], s.size))
    for i in range(probs.shape[0]):
        z = bids[i]
        order = np.argsort(z, kind="stable")
        z, p = z[order], probs[i][order]
        edges = np.concatenate(([z[0]], 0.5 * (z[1:] + z[:-1]), [z[-1]]))
        cdf = np.concatenate(([0.0], np.cumsum(p)))
        out[i] = np.interp(s * cdf[-1], cdf, edges)
    return out


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
