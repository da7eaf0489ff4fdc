"""Symmetric Bayes-Nash equilibria of any mechanism, and their verification.

``symmetric_bne(mechanism, dist, n_sellers, rng)`` looks for a bid function b such
that, when the n sellers' costs are i.i.d. from ``dist`` and every other seller
reports b(c_j), reporting b(c) is (nearly) a best response for a seller of cost c.

Method: iterated smoothed (logit) best responses on a cost grid, damped by
fictitious-play steps, on a fixed sample of opponents (common random numbers).

* The sample: ``markets`` markets of n costs, a scrambled Sobol sequence mapped
  through the cost quantile function (far more even than i.i.d. draws; markets
  rounded up to a power of two), drawn once.  In each, the first ``deviators``
  sellers deviate in turn, the others reporting b(c_j); ``markets =
  ceil(samples / deviators)``.  Randomized mechanisms keep one seed per market.
* A seller's utility is linear in its true cost, u(c, z) = T(z) - c E(z), where
  E(z), T(z) are its expected eps and payment when it reports z: one call of the
  mechanism's vectorised ``deviations`` per market (all candidate reports at once)
  gives u on the whole cost grid.
* Candidates: ``bid_grid`` reports on [low, z_top], 17 coarse "sentinel" reports
  on [low, bid_max], the grid costs and the current bids (the lowest report is
  low + 1e-6 of the range: a report at a support's 0 has virtual cost 0).  z_top
  is the lowest sentinel above every report that got anything (eps or payment)
  in the last iteration: above it no report is bought, so the grid is spent where
  the game is.  The cost grid (``grid`` costs) is likewise focused on
  [low, z_top + one sentinel step], with the sentinel costs above.  A seller never
  reports below its cost.
* The response of grid cost c: the logit response on the peak of the best report,
  BR(c) = sum_z z w(z) / sum_z w(z), w(z) = exp((u(c, z) - max u) / tau) dz over the
  contiguous reports within 8 tau of the best, tau = temperature x (max - min of
  u(c, .)); the temperature cools geometrically (``cooling``) from
  ``temperature`` to ``min_temperature``.  Smoothing averages out the sampling
  noise that makes an argmax jump, and keeps atoms (pooled bids) from forming.
  The current bid is kept when no candidate beats it by more than 1e-9 of the
  utility scale (so an IC mechanism keeps the truth at once).
* Monotone: the responses are made non-decreasing in the cost (pool adjacent
  violators) and at least the cost; then b <- b + max(damping, 1/(t+1)) (BR - b)
  (fictitious play, floored; plain best-response dynamics oscillate in
  first-price-like games).
* Stop, once cooled, when sup_c |BR(c) - b(c)| <= tol x (high - low), or when the
  ex-ante gain of the best candidates over b on the training sample (grid costs
  weighted by density x spacing) is <= gain_tol x their ex-ante utility (the
  relative utility loss; robust to a few costs whose best response jumps); else
  after ``max_iter`` iterations (``converged`` False).

``b(c)`` between grid costs is the linear interpolation of the (monotone) grid
bids.  ``epsilon`` (``bne_epsilon``, for any bid function):

1. evaluation costs: the centres of ``eval_grid`` cells of the (focused) range,
   off the solver's grid and off the ends of the support;
2. on the training sample (for ``symmetric_bne``, the solver's), the best
   deviation z*(c) of each evaluation cost: the argmax over the candidates,
   refined by ``refine`` reports between its neighbours;
3. on FRESH markets (``eval_samples`` opponent draws, default 4 x ``samples``: one
   pass, cheap next to the solve; an independently scrambled Sobol sequence), the
   gain g_s(c) = u_s(c, z*(c)) - u_s(c, b(c)) per market s (mean over its deviators);
4. epsilon = max(0, max_c mean_s g_s(c)).  Re-measuring on fresh opponents removes
   the upward bias of maximising over the training sample's noise.
   ``epsilon_ci``: the 95% t interval of mean_s g_s(c*) over the fresh markets at
   the maximising cost c* (conditional on c*), clipped at 0; the scrambled Sobol
   markets are negatively correlated, so the i.i.d. t interval is conservative
   (wider than the true one).  ``epsilon_relative``
   divides by the ex-ante utility at b (evaluation costs weighted by the density).

Limits: this is an equilibrium of the sampled game on the grids; epsilon measures
deviations among the candidate reports only (a lower bound on the best-response
gain, up to its sampling error), and its noise floor is about the CI's half width;
the smoothing leaves a bias of order the final temperature; no uniqueness is
claimed and the iteration may cycle (where the best response jumps between two
peaks, e.g. pay-as-bid near a support's 0, where a seller reporting near 0 has
virtual cost near 0 and is bought alone in a large quantity); asymmetric
equilibria and mixed strategies are out of scope; reports are confined to
[low, bid_max] (default the support's top, as the offline mechanisms require).

CLI: ``market-sim bne --mechanism SPEC --dist SPEC --sellers N --seed S --out DIR``
writes DIR/bid.csv, DIR/summary.json and DIR/bne.png.
"""

from __future__ import annotations

import dataclasses
import json
import math
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from .distributions import CostDistribution, as_distribution
from .errors import MarketSimError
from .files import atomic_write, json_plain, save_png
from .mechanisms.base import Mechanism, as_mechanism, mechanism_name
from .parameters import check_int

__all__ = [
    "BNEResult",
    "EpsilonResult",
    "symmetric_bne",
    "bne_epsilon",
    "figure",
    "plot",
]

#: market settings passed to the mechanism's construction (as ``audit`` does)
CONTEXT_KEYS = ("mu", "sigma", "gamma", "privacy")
_PEAK = 8.0  # the logit response averages reports within _PEAK temperatures of the best
_TIE = 1e-9  # a candidate must beat the current bid by this share of the utility scale


@dataclass(frozen=True)
class EpsilonResult:
    """How far a bid function is from equilibrium: ``epsilon`` (the largest expected
    gain of a deviation, on fresh opponents), its 95% bootstrap ``epsilon_ci``,
    ``epsilon_relative`` (over the ex-ante utility at the bid function) and, per
    cost of ``eval_costs``: ``gains`` (mean over the fresh markets), the deviation
    ``best_reports`` found on the training sample and the ``utilities`` at the bid."""

    epsilon: float
    epsilon_ci: tuple[float, float]
    epsilon_relative: float
    eval_costs: np.ndarray = field(repr=False)
    gains: np.ndarray = field(repr=False)
    best_reports: np.ndarray = field(repr=False)
    utilities: np.ndarray = field(repr=False)
    eval_markets: int = 0


@dataclass(frozen=True)
class BNEResult:
    """A symmetric BNE bid function on the cost grid ``costs`` (``bids``), and how it
    was found and verified (see the module doc)."""

    mechanism: str
    dist: str
    n_sellers: int
    costs: np.ndarray = field(repr=False)
    bids: np.ndarray = field(repr=False)
    epsilon: float
    epsilon_ci: tuple[float, float]
    epsilon_relative: float
    iterations: int
    converged: bool
    residual: float
    seconds: float
    check: EpsilonResult = field(repr=False)
    history: tuple[float, ...] = field(default=(), repr=False)
    options: dict = field(default_factory=dict, repr=False)
    support: tuple[float, float] = (0.0, 1.0)

    def bid(self, costs) -> np.ndarray:
        """The bid function at ``costs`` (any shape): linear interpolation of the
        monotone grid bids; costs must lie in the support."""
        return _interp(costs, self.costs, self.bids, self.support)

    __call__ = bid

    def summary(self) -> dict:
        """The numbers of ``summary.json``."""
        c, b = self.costs, self.bids
        return {
            "mechanism": self.mechanism,
            "dist": self.dist,
            "n_sellers": self.n_sellers,
            "seed": self.options.get("seed"),  # the CLI records its --seed here
            "epsilon": self.epsilon,
            "epsilon_ci": list(self.epsilon_ci),
            "epsilon_relative": self.epsilon_relative,
            "argmax_cost": float(self.check.eval_costs[int(np.argmax(self.check.gains))]),
            "iterations": self.iterations,
            "converged": self.converged,
            "residual": self.residual,
            "seconds": self.seconds,
            "max_markup": float(np.max(b - c)),
            "mean_markup": float(np.mean(b - c)),
            "eval_markets": self.check.eval_markets,
            **self.options,
        }

    def write(self, folder) -> Path:
        """DIR/bid.csv (cost, bid), DIR/summary.json and DIR/bne.png, each atomically."""
        out = Path(folder)
        if out.exists() and not out.is_dir():
            raise MarketSimError(f"{folder}: exists and is not a folder")
        out.mkdir(parents=True, exist_ok=True)
        rows = "cost,bid\n" + "".join(
            f"{c!r},{b!r}\n" for c, b in zip(self.costs.tolist(), self.bids.tolist(), strict=True)
        )
        atomic_write(out / "bid.csv", lambda fh: fh.write(rows.encode()))
        doc = json.dumps({k: json_plain(v) for k, v in self.summary().items()}, indent=2) + "\n"
        atomic_write(out / "summary.json", lambda fh: fh.write(doc.encode()))
        plot(self, out / "bne.png")
        return out

    def format(self) -> str:
        s = self.summary()
        lo, hi = s["epsilon_ci"]
        rows = [
            ("mechanism", s["mechanism"]),
            ("distribution", s["dist"]),
            ("sellers", str(s["n_sellers"])),
            ("iterations", f"{s['iterations']} (converged: {s['converged']})"),
            ("residual sup|BR - b|", f"{s['residual']:.3g}"),
            ("epsilon", f"{s['epsilon']:.3g}"),
            ("95% CI", f"[{lo:.3g}, {hi:.3g}]"),
            ("epsilon / utility", f"{s['epsilon_relative']:.3g}"),
            ("mean markup b(c) - c", f"{s['mean_markup']:.4g}"),
            ("seconds", f"{s['seconds']:.1f}"),
        ]
        width = max(len(k) for k, _ in rows)
        return "\n".join(f"{k:<{width}}  {v}" for k, v in rows)


def _interp(costs, grid, bids, support) -> np.ndarray:
    c = np.asarray(costs, dtype=float)
    lo, hi = support
    bad = ~np.isfinite(c) | (c < lo) | (c > hi)
    if np.any(bad):
        raise MarketSimError(
            f"cost {float(c[bad].flat[0])!r} is outside the support [{lo:g}, {hi:g}]"
        )
    return np.interp(c, grid, bids)


def _isotonic(y: np.ndarray) -> np.ndarray:
    """The non-decreasing sequence closest to ``y`` in least squares
    (pool-adjacent-violators)."""
    vals: list[float] = []
    sizes: list[int] = []
    for v in y.tolist():
        vals.append(v)
        sizes.append(1)
        while len(vals) > 1 and vals[-2] > vals[-1]:
            s = sizes[-2] + sizes[-1]
            vals[-2] = (vals[-2] * sizes[-2] + vals[-1] * sizes[-1]) / s
            sizes[-2] = s
            vals.pop()
            sizes.pop()
    return np.repeat(vals, sizes)


# ---- the sampled game --------------------------------------------------------------
class _Sample:
    """``markets`` markets of n costs, the first ``deviators`` of each deviating, and
    one seed per market (common random numbers for randomized mechanisms).  With
    ``qmc`` the markets are a scrambled Sobol sequence in n dimensions mapped through
    the cost quantile function (``markets`` rounded up to a power of two), which
    makes the distribution of the opponents' costs far more even than i.i.d. draws."""

    def __init__(self, dist, n, markets, deviators, rng, qmc=False):
        if qmc and n <= 21201:  # scipy's Sobol directions
            from scipy.stats import qmc as _qmc

            k = max(0, math.ceil(math.log2(markets)))
            u = _qmc.Sobol(d=n, scramble=True, seed=rng).random_base2(k)
            lo, hi = dist.support
            self.costs = np.clip(np.asarray(dist.ppf(u), dtype=float), lo, hi)
        else:
            self.costs = dist.sample(markets * n, rng).reshape(markets, n)
        self.seeds = rng.integers(2**63, size=self.costs.shape[0])
        self.sellers = np.arange(deviators)

    def eps_pay(self, mech, bidfn, cand) -> tuple[np.ndarray, np.ndarray]:
        """Per market, the deviators' mean eps and payment at each candidate report:
        two (markets, len(cand)) arrays (the deviator's own cost does not enter)."""
        M = self.costs.shape[0]
        E, T = np.empty((M, cand.size)), np.empty((M, cand.size))
        Z = np.broadcast_to(cand, (self.sellers.size, cand.size))
        for s in range(M):
            reports = bidfn(self.costs[s])
            out = mech.deviations(self.sellers, Z, reports, np.random.default_rng(self.seeds[s]))
            E[s] = np.mean(out.eps, axis=0)
            T[s] = np.mean(out.payments, axis=0)
        return E, T


_SENTINELS = 17  # coarse reports over the whole range, always tried


@dataclass(frozen=True)
class _Game:
    mech: Mechanism
    dist: CostDistribution
    n: int
    z_lo: float  # lowest report
    z_hi: float  # highest report
    k: int  # reports of the focused grid
    refine: int

    def candidates(self, z_top):
        """The focused grid on [z_lo, z_top] and the coarse sentinels on [z_lo, z_hi]."""
        focus = np.linspace(self.z_lo, z_top, self.k)
        return np.concatenate((focus, np.linspace(self.z_lo, self.z_hi, _SENTINELS)))

    def top(self, cand, Eb, Tb):
        """The lowest sentinel above every report that gets anything (eps or payment)."""
        live = (Eb > 0) | (Tb != 0)
        if not live.any():
            return self.z_hi
        sent = np.linspace(self.z_lo, self.z_hi, _SENTINELS)
        above = sent[sent > cand[np.flatnonzero(live)[-1]]]
        return float(above[0]) if above.size else self.z_hi

    def best_responses(self, sample, bidfn, costs, current, temperature=0.0, z_top=None):
        """For each cost, the best report among the candidates (never below the cost)
        given the others bid ``bidfn``, or with ``temperature`` > 0 the smoothed one
        (the module doc); the current report is kept when nothing beats it by more
        than 1e-9 of the utility scale.  Costs above ``z_top`` (where no report gets
        anything) keep theirs.  Returns (the reports, the next ``z_top``, the ex-ante
        gain of the best candidates over the current reports / their ex-ante utility)."""
        z_top = self.z_hi if z_top is None else z_top
        out = np.clip(current, self.z_lo, self.z_hi)
        act = costs <= z_top
        costs, cur = costs[act], out[act]
        floor = np.minimum(costs, self.z_hi)
        cand = np.unique(
            np.concatenate((self.candidates(z_top), np.clip(costs, self.z_lo, self.z_hi), cur))
        )
        E, T = sample.eps_pay(self.mech, bidfn, cand)
        Eb, Tb = E.mean(axis=0), T.mean(axis=0)
        new_top = self.top(cand, Eb, Tb)
        loss = 0.0
        if costs.size:
            out[act], loss = self._respond(
                sample, bidfn, costs, cur, floor, cand, Eb, Tb, temperature
            )
        return out, new_top, loss

    def _respond(self, sample, bidfn, costs, cur, floor, cand, Eb, Tb, temperature):
        U = Tb[None, :] - costs[:, None] * Eb[None, :]  # u(c, z) = T(z) - c E(z)
        allowed = cand[None, :] >= floor[:, None] - 1e-12
        U = np.where(allowed, U, -np.inf)
        k = np.argmax(U, axis=1)
        rows = np.arange(costs.size)
        best_z, best_u = cand[k], U[rows, k]
        u_cur = U[rows, np.searchsorted(cand, cur)]
        scale = max(float(np.max(np.abs(Tb))), float(np.max(np.abs(Eb))) * self.z_hi, 1e-300)
        keep = u_cur >= best_u - _TIE * scale
        # the ex-ante gain of the best candidates over the current reports, relative to
        # their ex-ante utility (costs weighted by density x spacing)
        w = np.asarray(self.dist.pdf(costs), dtype=float)
        w = w * (np.gradient(costs) if costs.size > 1 else 1.0)
        loss = float(w @ np.maximum(best_u - u_cur, 0.0)) / max(
            float(w @ np.maximum(best_u, 0.0)), 1e-300
        )
        if temperature > 0:
            # logit response: density exp(u / tau) over reports (trapezoid weights dz),
            # tau = temperature x the spread of u over the allowed reports, on the
            # peak of the best report only (the reports around it within 8 tau): the
            # mean of two separate peaks would be neither
            spread = best_u - np.where(allowed, U, np.inf).min(axis=1)
            tau = temperature * np.maximum(spread, 1e-300)
            near = U >= (best_u - _PEAK * tau)[:, None]
            label = np.cumsum(~near, axis=1)
            peak = near & (label == label[rows, k][:, None])
            with np.errstate(invalid="ignore", over="ignore"):
                w = np.where(peak, np.exp((U - best_u[:, None]) / tau[:, None]), 0.0)
            w = w * np.gradient(cand)[None, :] if cand.size > 1 else w
            best_z = (w @ cand) / w.sum(axis=1)
            return np.where(keep, cur, best_z), loss
        if self.refine:
            lo = np.maximum(cand[np.maximum(k - 1, 0)], floor)
            hi = cand[np.minimum(k + 1, cand.size - 1)]
            t = np.arange(1, self.refine + 1) / (self.refine + 1)
            pts = lo[:, None] + (hi - lo)[:, None] * t[None, :]  # (costs, refine)
            E2, T2 = sample.eps_pay(self.mech, bidfn, pts.ravel())
            U2 = (T2.mean(axis=0) - np.repeat(costs, self.refine) * E2.mean(axis=0)).reshape(
                pts.shape
            )
            j = np.argmax(U2, axis=1)
            better = U2[rows, j] > best_u
            best_z = np.where(better, pts[rows, j], best_z)
            best_u = np.where(better, U2[rows, j], best_u)
            keep = u_cur >= best_u - _TIE * scale
        return np.where(keep, cur, best_z), loss


def _check_float(label, v, lo, hi, lo_open=True):
    try:
        x = float(v)
    except (TypeError, ValueError):
        raise MarketSimError(f"{label} must be a number (got {v!r})") from None
    if isinstance(v, bool) or not math.isfinite(x) or x < lo or (lo_open and x == lo) or x > hi:
        lb = "(" if lo_open else "["
        raise MarketSimError(f"{label} must be in {lb}{lo:g}, {hi:g}] (got {v!r})")
    return x


def _setup(mechanism, dist, n_sellers, rng, context, bid_max):
    if not isinstance(rng, np.random.Generator):
        raise MarketSimError("rng must be a numpy.random.Generator")
    dist = as_distribution(dist)
    n = check_int("n_sellers", n_sellers, 2)
    unknown = sorted(set(context) - set(CONTEXT_KEYS))
    if unknown:
        raise MarketSimError(
            f"unknown option {unknown[0]!r} (market settings: {', '.join(CONTEXT_KEYS)})"
        )
    mech = as_mechanism(mechanism, dist=dist, n_sellers=n, **context)
    if getattr(mech, "needs_data", False):
        raise MarketSimError(
            f"{mechanism_name(mech)} needs the sellers' data; the BNE solver draws costs only"
        )
    mech = _compiled(mech)
    lo, hi = dist.support
    z_hi = hi if bid_max is None else _check_float("bid_max", bid_max, hi, math.inf, False)
    return mech, dist, n, z_hi


def _compiled(mech):
    """A mechanism with a ``backend`` field (the offline allocation family) on the
    compiled kernel when it works: the solver makes thousands of small solves."""
    if dataclasses.is_dataclass(mech) and getattr(mech, "backend", None) == "auto":
        from .mechanisms import offline

        if offline._kernel() is not None:
            return dataclasses.replace(mech, backend="numba")
    return mech


def _midpoints(x):
    """The centres of the cells between consecutive points: costs off the solver's grid
    and off the ends of the support (a seller of cost exactly 0 on a support starting
    at 0 is a singular case of the offline allocation: psi = 0)."""
    return 0.5 * (x[1:] + x[:-1])


def _focused(lo, hi, c_top, k):
    """``k`` costs on [lo, c_top] and the coarse sentinel costs above c_top."""
    coarse = np.linspace(lo, hi, _SENTINELS)
    return np.unique(np.concatenate((np.linspace(lo, c_top, k), coarse[coarse > c_top])))


def _as_bidfn(bid, dist) -> Callable[[np.ndarray], np.ndarray]:
    if isinstance(bid, BNEResult):
        return bid.bid
    if isinstance(bid, str) and bid == "truth":
        return lambda c: np.asarray(c, dtype=float)
    if not callable(bid):
        raise MarketSimError("bid must be a function of costs, a BNEResult or 'truth'")

    def fn(c):
        b = np.asarray(bid(c), dtype=float)
        if b.shape != np.shape(c) or not np.all(np.isfinite(b)):
            raise MarketSimError("the bid function must return one finite bid per cost")
        return b

    return fn


def _epsilon(game, train, fresh, bidfn, eval_costs, z_top=None) -> EpsilonResult:
    """Steps 1-3 of the module doc."""
    b = bidfn(eval_costs)
    z_star, _, _ = game.best_responses(train, bidfn, eval_costs, b, 0.0, z_top)
    cur = np.clip(b, game.z_lo, game.z_hi)
    pts = np.concatenate((z_star, cur))
    E, T = fresh.eps_pay(game.mech, bidfn, pts)
    g = eval_costs.size
    U = T - np.tile(eval_costs, 2)[None, :] * E  # (markets, 2g): u = T(z) - c E(z)
    gains = U[:, :g] - U[:, g:]  # per fresh market and cost
    mean_gain = gains.mean(axis=0)
    i = int(np.argmax(mean_gain))
    eps = max(0.0, float(mean_gain[i]))
    M = gains.shape[0]
    from scipy import stats

    # 95% t interval of the mean gain over the fresh markets at the maximising cost
    half = float(stats.t.ppf(0.975, M - 1) * gains[:, i].std(ddof=1) / math.sqrt(M))
    ci = (max(0.0, float(mean_gain[i]) - half), max(0.0, float(mean_gain[i]) + half))
    util = U[:, g:].mean(axis=0)
    w = np.asarray(game.dist.pdf(eval_costs), dtype=float)
    w = w / w.sum() if w.sum() > 0 else np.full(g, 1.0 / g)
    ex_ante = float(w @ util)
    rel = eps / ex_ante if ex_ante > 0 else (0.0 if eps == 0 else math.inf)
    return EpsilonResult(eps, ci, rel, eval_costs, mean_gain, z_star, util, M)


def _options(samples, deviators, n, markets_for_eval):
    d = min(n, deviators)
    return d, max(1, -(-samples // d)), max(2, -(-markets_for_eval // d))


def bne_epsilon(
    mechanism,
    dist,
    n_sellers: int,
    bid,
    rng: np.random.Generator,
    *,
    eval_grid: int = 65,
    bid_grid: int = 129,
    refine: int = 6,
    samples: int = 1024,
    eval_samples: int | None = None,
    deviators: int = 8,
    bid_max: float | None = None,
    **context,
) -> EpsilonResult:
    """Epsilon of the symmetric profile where every seller bids ``bid(cost)`` (a
    vectorised function, a :class:`BNEResult` or ``"truth"``): the best deviation
    of each of ``eval_grid`` costs is found on ``samples`` opponent draws and its
    gain re-measured on ``eval_samples`` (default 4 x ``samples``) fresh ones.  Options
    and ``context`` (mu, sigma, gamma, privacy) as :func:`symmetric_bne`'s."""
    mech, dist, n, z_hi = _setup(mechanism, dist, n_sellers, rng, context, bid_max)
    eval_grid = check_int("eval_grid", eval_grid, 2)
    bid_grid = check_int("bid_grid", bid_grid, 3)
    refine = check_int("refine", refine, 0)
    samples = check_int("samples", samples, 1)
    deviators = check_int("deviators", deviators, 1)
    ev = check_int("eval_samples", 4 * samples if eval_samples is None else eval_samples, 2)
    d, markets, eval_markets = _options(samples, deviators, n, ev)
    lo, hi = dist.support
    game = _Game(mech, dist, n, lo + 1e-6 * (z_hi - lo), z_hi, bid_grid, refine)
    bidfn = _as_bidfn(bid, dist)
    train = _Sample(dist, n, markets, d, rng)
    fresh = _Sample(dist, n, eval_markets, d, rng, qmc=True)
    return _epsilon(game, train, fresh, bidfn, _midpoints(np.linspace(lo, hi, eval_grid + 1)))


def symmetric_bne(
    mechanism,
    dist,
    n_sellers: int,
    rng: np.random.Generator,
    *,
    grid: int = 33,
    bid_grid: int = 129,
    refine: int = 6,
    samples: int = 1024,
    deviators: int = 8,
    temperature: float = 0.03,
    min_temperature: float = 0.003,
    cooling: float = 0.9,
    damping: float = 0.05,
    tol: float = 2e-3,
    gain_tol: float = 5e-3,
    max_iter: int = 150,
    eval_grid: int = 65,
    eval_samples: int | None = None,
    bid_max: float | None = None,
    init="truth",
    progress: bool = False,
    **context,
) -> BNEResult:
    """A symmetric Bayes-Nash equilibrium bid function of ``mechanism`` (a name,
    spec, class, instance or object with ``outcome``) for ``n_sellers`` sellers with
    i.i.d. costs from ``dist`` (a spec or :class:`CostDistribution`), by iterated
    smoothed best responses (the module doc has the method and its limits).

    ``grid`` costs on the range where reports get anything; ``bid_grid`` candidate
    reports there; ``samples`` opponent draws (the first ``deviators`` sellers of
    ``ceil(samples / deviators)`` markets); logit temperature from ``temperature``
    down to ``min_temperature`` by ``cooling`` per iteration (``temperature=0``:
    plain argmax, refined by ``refine`` reports); step ``max(damping, 1/(t+1))``;
    stop at sup|BR - b| <= ``tol`` x the support width or an ex-ante best-response
    gain <= ``gain_tol`` x the ex-ante utility, or after ``max_iter`` iterations; epsilon on
    ``eval_grid`` costs and ``eval_samples`` (default 4 x ``samples``) fresh draws;
    reports at most ``bid_max`` (default the support's top); ``init``: the starting
    bid function ("truth", a function or a :class:`BNEResult`; for a warm start pass
    also ``temperature=min_temperature``).  ``context``: mu, sigma, gamma, privacy,
    passed to the mechanism's construction.  Same ``rng`` state, same result."""
    t0 = time.perf_counter()
    mech, dist, n, z_hi = _setup(mechanism, dist, n_sellers, rng, context, bid_max)
    grid = check_int("grid", grid, 3)
    bid_grid = check_int("bid_grid", bid_grid, 3)
    refine = check_int("refine", refine, 0)
    samples = check_int("samples", samples, 1)
    deviators = check_int("deviators", deviators, 1)
    max_iter = check_int("max_iter", max_iter, 1)
    eval_grid = check_int("eval_grid", eval_grid, 2)
    ev = check_int("eval_samples", 4 * samples if eval_samples is None else eval_samples, 2)
    damping = _check_float("damping", damping, 0.0, 1.0)
    tol = _check_float("tol", tol, 0.0, math.inf)
    gain_tol = _check_float("gain_tol", gain_tol, 0.0, math.inf, False)
    temperature = _check_float("temperature", temperature, 0.0, math.inf, False)
    min_temperature = min(
        temperature, _check_float("min_temperature", min_temperature, 0.0, math.inf, False)
    )
    cooling = _check_float("cooling", cooling, 0.0, 1.0)
    d, markets, eval_markets = _options(samples, deviators, n, ev)

    lo, hi = dist.support
    game = _Game(mech, dist, n, lo + 1e-6 * (z_hi - lo), z_hi, bid_grid, refine)
    costs, c_top = np.linspace(lo, hi, grid), float(hi)
    b = np.clip(_as_bidfn(init, dist)(costs), game.z_lo, z_hi)
    b = np.maximum.accumulate(b)
    train = _Sample(dist, n, markets, d, rng, qmc=True)
    history: list[float] = []
    gains: list[float] = []
    converged = False
    from tqdm import tqdm

    bar = tqdm(total=max_iter, desc="best responses", file=sys.stderr, disable=not progress)
    it, tau, z_top = 0, temperature, z_hi
    for it in range(1, max_iter + 1):  # noqa: B007 (``it`` is reported)
        current = b.copy()
        tau = max(min_temperature, temperature * cooling ** (it - 1))

        def bidfn(c, current=current, costs=costs):
            return np.interp(c, costs, current)

        br, z_top, gain = game.best_responses(train, bidfn, costs, current, tau, z_top)
        br = np.maximum(_isotonic(br), np.minimum(costs, z_hi))  # monotone, never below cost
        residual = float(np.max(np.abs(br - current)))
        history.append(residual)
        bar.update(1)
        bar.set_postfix(residual=f"{residual:.2g}", temperature=f"{tau:.2g}")
        gains.append(gain)
        small = residual <= tol * (hi - lo) or gain <= gain_tol
        if residual == 0.0 or (small and tau <= min_temperature):
            converged = True
            b = br  # a fixed point up to tol: take the best response itself
            break
        b = current + max(damping, 1.0 / (it + 1)) * (br - current)  # fictitious-play step
        # focus the cost grid on [low, c_top]: above z_top no report gets anything
        top = min(float(hi), z_top + (hi - lo) / (_SENTINELS - 1))
        if top > c_top or (it == 1 and top < c_top):
            c_top = top
            new = _focused(lo, hi, c_top, grid)
            b, costs = np.interp(new, costs, b), new
    bar.close()

    final = b.copy()
    support = (float(lo), float(hi))

    def final_fn(c):
        return np.interp(c, costs, final)

    fresh = _Sample(dist, n, eval_markets, d, rng, qmc=True)
    ev_costs = _midpoints(_focused(lo, hi, c_top, eval_grid + 1))
    check = _epsilon(game, train, fresh, final_fn, ev_costs, z_top)
    options = {
        "grid": grid,
        "cost_top": c_top,
        "bid_grid": bid_grid,
        "refine": refine,
        "samples": samples,
        "deviators": d,
        "markets": train.costs.shape[0],
        "temperature": temperature,
        "min_temperature": min_temperature,
        "cooling": cooling,
        "final_temperature": tau,
        "damping": damping,
        "tol": tol,
        "gain_tol": gain_tol,
        "training_gain": gains[-1],
        "max_iter": max_iter,
        "eval_grid": eval_grid,
        "eval_samples": ev,
        "bid_max": z_hi,
        **{k: v for k, v in context.items()},
    }
    return BNEResult(
        mechanism=mechanism if isinstance(mechanism, str) else mechanism_name(mech),
        dist=dist.spec,
        n_sellers=n,
        costs=costs,
        bids=final,
        epsilon=check.epsilon,
        epsilon_ci=check.epsilon_ci,
        epsilon_relative=check.epsilon_relative,
        iterations=it,
        converged=converged,
        residual=history[-1],
        seconds=time.perf_counter() - t0,
        check=check,
        history=tuple(history),
        options=options,
        support=support,
    )


# ---- the figure ------------------------------------------------------------------------
def figure(result: BNEResult):
    """The bid function against the truth (left) and the gain of the best deviation
    per cost on fresh opponents (right): a matplotlib Figure."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (ax, ax2) = plt.subplots(1, 2, figsize=(11, 4.3))
    c = result.costs
    ax.plot(c, result.bids, "o-", ms=3, label="BNE bid b(c)")
    ax.plot(c, c, "k--", lw=1, label="truth b(c) = c")
    ax.set(
        xlabel="cost c",
        ylabel="report",
        title=f"{result.mechanism}, {result.dist}, {result.n_sellers} sellers",
    )
    ax.legend(loc="upper left")
    ch = result.check
    ax2.plot(ch.eval_costs, ch.gains, ".-", label="mean gain at each cost")
    lo, hi = result.epsilon_ci
    ax2.axhline(result.epsilon, color="k", ls="--", lw=1, label=f"epsilon {result.epsilon:.2g}")
    ax2.axhspan(lo, hi, color="0.85", label=f"95% CI [{lo:.2g}, {hi:.2g}]")
    ax2.set(
        xlabel="cost c",
        ylabel="gain of the best deviation (fresh markets)",
        title=f"{result.iterations} iterations, converged: {result.converged}",
    )
    ax2.legend(loc="best")
    fig.tight_layout()
    return fig


def plot(result: BNEResult, path) -> None:
    """:func:`figure` written to ``path`` (PNG) atomically."""
    save_png(figure(result), path, dpi=100)
