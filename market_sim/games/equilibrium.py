"""Bayes-Nash equilibria of any mechanism, and their verification.

``bne(mechanism, population, rng)`` finds one bid function per class of sellers (a
``Population`` or a list of ``(cost law, count)`` classes; i.i.d. within a class) such
that reporting b_g(c) is (nearly) a best response for a seller of class g and cost c
when everyone else plays their class's bid function; ``symmetric_bne`` is the
one-class case.  ``bne_epsilon`` verifies any bid function.

Method (docs/equilibrium.md has the details, the options and the limits): damped
best responses on a cost grid per class, against a quasi-random sample of opponents
or, when the mechanism has an exact ``interim``, against the laws of their reports
(exact utilities), each best response the argmax over a report grid, refined; then
verification on samples the solver never saw: every report of the
whole range (below the cost too) on a dense grid, locally refined around the best,
its gain re-measured on fresh opponents at every evaluation cost up to the support's
top; epsilon (ε̂) with a CI, bnelearn's ℓ̂ and L̂, and distances to a reference bid.
The steps live in ``market_sim.equilibrium_game``.

CLI: ``market-sim bne --mechanism SPEC --dist SPEC --sellers N --out DIR`` or
``--population 1*uniform:1:2+1*uniform:0:2``; writes DIR/bid.csv, summary.json, bne.png.
"""

from __future__ import annotations

import dataclasses
import json
import math
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import MarketSimError
from ..execution import Job, check_executor, job_rng, run_jobs
from ..files import atomic_write, fit_titles, json_plain, save_png
from ..mechanisms.base import Mechanism, as_mechanism, mechanism_name
from ..parameters import check_int
from .equilibrium_distributional import (
    DistOptions,
    bid_tables,
    live_top,
    solve_distributional,
)
from .equilibrium_game import (
    SENTINELS,
    BidFn,
    Classes,
    EpsilonResult,
    Interim,
    Oracle,
    Sample,
    as_classes,
    best_response,
    eval_costs_for,
    interim_epsilon,
    interim_of,
    isotonic,
    jump_cells,
    measure,
    prior_weights,
    reports_of,
    search_reports,
    sharpen_jump,
    tabulated_cdf,
)

__all__ = [
    "OPTIONS",
    "STOPPING_RULES",
    "BNEResult",
    "ClassBid",
    "EpsilonResult",
    "METHODS",
    "bne",
    "bne_sweep",
    "symmetric_bne",
    "bne_epsilon",
    "bne_epsilon_by_group",
    "figure",
    "plot",
]

#: market settings passed to the mechanism's construction (as ``audit`` does)
CONTEXT_KEYS = ("mu", "sigma", "gamma", "privacy")


@dataclass(frozen=True)
class ClassBid:
    """One class's bid function: ``bids`` at the grid ``costs`` (linear interpolation
    between them), its law, count and verification ``check``."""

    dist: str
    count: int
    support: tuple[float, float]
    costs: np.ndarray = field(repr=False)
    bids: np.ndarray = field(repr=False)
    check: EpsilonResult = field(repr=False)

    def bid(self, costs) -> np.ndarray:
        return _interp(costs, self.costs, self.bids, self.support)


@dataclass(frozen=True)
class BNEResult:
    """Bid functions, one per class (``classes``; class 0's also as ``costs``, ``bids``,
    ``check``), and how they were found and verified (docs/equilibrium.md)."""

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
    classes: tuple[ClassBid, ...] = field(default=(), repr=False)
    stopped_by: str = "max_iter"  # the stopping rule that fired (STOPPING_RULES)

    def bid(self, costs, group: int = 0) -> np.ndarray:
        """Class ``group``'s bid function at ``costs`` (any shape, in its support)."""
        if not 0 <= int(group) < len(self.classes):
            raise MarketSimError(f"group must be in 0..{len(self.classes) - 1} (got {group!r})")
        return self.classes[int(group)].bid(costs)

    __call__ = bid

    def bid_tables(self) -> tuple[tuple[np.ndarray, np.ndarray], ...]:
        """(grid costs, bids) per class: what the ``bne`` strategy plays when a
        ``BNEResult`` is given as a strategy (``market_sim.agents.as_strategy``)."""
        return tuple((c.costs, c.bids) for c in self.classes)

    @property
    def epsilon_by_group(self) -> tuple[float, ...]:
        return tuple(c.check.epsilon for c in self.classes)

    @property
    def loss(self) -> float:
        """ℓ̂ of the worst class (the largest)."""
        return max(c.check.loss for c in self.classes)

    @property
    def relative_loss(self) -> float:
        """L̂ of the worst class (the largest)."""
        return max(c.check.relative_loss for c in self.classes)

    def summary(self) -> dict:
        """The numbers of ``summary.json``."""
        per = [
            {"dist": c.dist, "count": c.count, **c.check.metrics(),
             "max_markup": float(np.max(c.bids - c.costs)),
             "argmax_cost": float(c.check.eval_costs[int(np.argmax(c.check.gains))])}
            for c in self.classes
        ]  # fmt: skip
        return {
            "mechanism": self.mechanism,
            "dist": self.dist,
            "n_sellers": self.n_sellers,
            "seed": self.options.get("seed"),  # the CLI records its --seed here
            "epsilon": self.epsilon,
            "epsilon_ci": list(self.epsilon_ci),
            "epsilon_relative": self.epsilon_relative,
            "epsilon_by_group": list(self.epsilon_by_group),
            "loss": self.loss,
            "relative_loss": self.relative_loss,
            "argmax_cost": per[0]["argmax_cost"],
            "iterations": self.iterations,
            "converged": self.converged,
            "stopped_by": self.stopped_by,
            "residual": self.residual,
            "seconds": self.seconds,
            "max_markup": per[0]["max_markup"],
            "mean_markup": float(np.mean(self.bids - self.costs)),
            "eval_markets": self.check.eval_markets,
            "classes": per,
            **self.options,
        }

    def write(self, folder) -> Path:
        """DIR/bid.csv (group, cost, bid), DIR/summary.json and DIR/bne.png, atomically."""
        out = Path(folder)
        if out.exists() and not out.is_dir():
            raise MarketSimError(f"{folder}: exists and is not a folder")
        out.mkdir(parents=True, exist_ok=True)
        rows = "group,cost,bid\n" + "".join(
            f"{g},{c!r},{b!r}\n"
            for g, cl in enumerate(self.classes)
            for c, b in zip(cl.costs.tolist(), cl.bids.tolist(), strict=True)
        )
        atomic_write(out / "bid.csv", lambda fh: fh.write(rows.encode()))
        doc = json.dumps({k: json_plain(v) for k, v in self.summary().items()}, indent=2) + "\n"
        atomic_write(out / "summary.json", lambda fh: fh.write(doc.encode()))
        plot(self, out / "bne.png")
        return out

    def _tol_abs(self) -> float:
        """The residual at which the ``residual`` rule stops: tol x the widest support."""
        width = max((c.support[1] - c.support[0] for c in self.classes), default=math.nan)
        return float(self.options.get("tol", math.nan)) * width

    def _stopped_text(self) -> str:
        """The rule that fired, what it means on this run's path, and whether the final
        verification certifies it (``converged``)."""
        rule = self.stopped_by
        text = f"{rule}: {STOPPING_RULES.get(rule, '?')}"
        pure = self.options.get("method") != "distributional"  # it returns the average
        if rule in ("max_iter", "stalled") and self.options.get("path") == "interim" and pure:
            text += " (the best iterate is returned)"
        elif rule == "max_iter" and pure and self.options.get("resample"):
            text += " (the last eighth's iterates averaged are returned)"
        elif not self.converged and rule not in ("max_iter", "stalled"):
            text += f"; not certified: verified epsilon / u > {self.options.get('verify_tol')}"
        return text

    def format(self) -> str:
        s = self.summary()
        lo, hi = s["epsilon_ci"]
        rows = [
            ("mechanism", s["mechanism"]),
            ("distribution", s["dist"]),
            ("sellers", str(s["n_sellers"])),
            ("path", str(s["path"])),
            ("iterations", f"{s['iterations']} (converged: {s['converged']})"),
            ("stopped by", self._stopped_text()),
            ("residual sup|BR - b|", f"{s['residual']:.3g} (its rule: <= {self._tol_abs():.3g})"),
            ("method", str(s.get("method", "pure"))),
            ("epsilon", f"{s['epsilon']:.3g}"),
            ("95% CI", f"[{lo:.3g}, {hi:.3g}]"),
            ("epsilon / utility", f"{s['epsilon_relative']:.3g} (the utility at the same costs)"),
            ("evaluation cells", ", ".join(str(c.check.eval_cells) for c in self.classes)),
            ("loss l, L", f"{s['loss']:.3g}, {s['relative_loss']:.3g}"),
            ("mean markup b(c) - c", f"{s['mean_markup']:.4g}"),
            ("seconds", f"{s['seconds']:.1f}"),
        ]
        if s.get("method") == "distributional":  # its residual is the grid's utility loss
            at = [k for k, _ in rows].index("residual sup|BR - b|")
            rows[at] = (
                "utility loss (grid)",
                f"{s['residual']:.3g} (its rule: <= {s['eps_tol']:.3g})",
            )
            rows.insert(
                at + 1,
                (
                    "mixed (spread)",
                    ", ".join(
                        f"{m} ({x:.3g})" for m, x in zip(s["mixed"], s["spread"], strict=True)
                    ),
                ),
            )
        if s.get("method_reason"):  # method="auto": which one ran, and why (as summary.json)
            at = [k for k, _ in rows].index("method")
            rows.insert(at + 1, ("method chosen", str(s["method_reason"])))
        if len(self.classes) > 1:
            rows.insert(
                6, ("epsilon by class", ", ".join(f"{e:.3g}" for e in self.epsilon_by_group))
            )
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


def _check_float(label, v, lo, hi, lo_open=True):
    try:
        x = float(v)
    except (TypeError, ValueError):
        raise MarketSimError(f"{label} must be a number (got {v!r})") from None
    if isinstance(v, bool) or not math.isfinite(x) or x < lo or (lo_open and x == lo) or x > hi:
        lb = "(" if lo_open else "["
        raise MarketSimError(f"{label} must be in {lb}{lo:g}, {hi:g}] (got {v!r})")
    return x


# ---- setup -------------------------------------------------------------------------------
@dataclass(frozen=True)
class _Setup:
    mech: Mechanism
    classes: Classes
    z_range: tuple[float, float]  # lowest and highest report
    name: str
    cdfs: tuple = ()  # the classes' cdfs, tabulated (the interim path)


def _setup(mechanism, population, n_sellers, rng, context, bid_max) -> _Setup:
    if not isinstance(rng, np.random.Generator):
        raise MarketSimError("rng must be a numpy.random.Generator")
    classes, pop = as_classes(population, n_sellers)
    unknown = sorted(set(context) - set(CONTEXT_KEYS))
    if unknown:
        raise MarketSimError(
            f"unknown option {unknown[0]!r} (market settings: {', '.join(CONTEXT_KEYS)})"
        )
    # the market's cost law for the mechanism's construction: the pooled law of the classes
    dist = classes.laws[0] if len(classes.laws) == 1 else pop.pooled
    mech = as_mechanism(mechanism, n_sellers=classes.n, dist=dist, **context)
    if getattr(mech, "needs_data", False) and not pop.has_data:
        raise MarketSimError(
            f"{mechanism_name(mech)} needs the sellers' data: give a population with data "
            '(e.g. "4*uniform:0:1;data=synthetic")'
        )
    lo = min(d.support[0] for d in classes.laws)
    hi = max(d.support[1] for d in classes.laws)
    z_hi = hi if bid_max is None else _check_float("bid_max", bid_max, hi, math.inf, False)
    name = mechanism if isinstance(mechanism, str) else mechanism_name(mech)
    cdfs = tuple(tabulated_cdf(law) for law in classes.laws)
    return _Setup(_compiled(mech), classes, (lo + 1e-6 * (z_hi - lo), z_hi), name, cdfs)


def _compiled(mech):
    """A mechanism with a ``backend`` field (the offline allocation family) on the
    compiled kernel when it works: the solver makes thousands of small solves."""
    if dataclasses.is_dataclass(mech) and getattr(mech, "backend", None) == "auto":
        from ..mechanisms import offline

        if offline._kernel() is not None:
            return dataclasses.replace(mech, backend="numba")
    return mech


def _as_bidfn(bid) -> BidFn:
    if isinstance(bid, BNEResult):
        return bid.bid
    if isinstance(bid, ClassBid):
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


def _per_class(bid, G: int, what: str) -> list:
    """One item per class: a list/tuple of G items, or the same item for every class
    (a BNEResult gives its classes' bid functions)."""
    if isinstance(bid, BNEResult):
        if len(bid.classes) != G:
            raise MarketSimError(f"{what}: the BNEResult has {len(bid.classes)} classes, not {G}")
        return list(bid.classes)
    if isinstance(bid, (list, tuple)):
        if len(bid) != G:
            raise MarketSimError(f"{what}: {len(bid)} bid functions for {G} classes")
        return list(bid)
    return [bid] * G


# ---- options ------------------------------------------------------------------------
@dataclass(frozen=True)
class _Options:
    grid: int = 33
    bid_grid: int | None = None
    samples: int = 1024
    deviators: int = 8
    damping: float | None = None
    tol: float = 2e-3
    gain_tol: float = 1e-3
    eps_tol: float = 1e-4
    verify_every: int | None = None
    verify_tol: float = 0.01
    patience: int = 0
    max_iter: int | None = None
    eval_grid: int = 33
    eval_refine: int | None = None
    eval_samples: int | None = None
    check_grid: int = 129
    refine: int = 3
    knots: int = 6
    tilt: float = 0.0
    br_refine: int | None = None
    resample: bool | None = None
    exact: bool | None = None

    def checked(self) -> _Options:
        """The options, each checked (bad input: one line naming it)."""
        ints = dict(
            grid=3, bid_grid=3, samples=1, deviators=1, max_iter=1, eval_grid=1, check_grid=3,
            eval_refine=0, refine=0, knots=0, br_refine=0, verify_every=0, patience=0,
        )  # fmt: skip
        kw: dict = {
            k: check_int(k, getattr(self, k), least) if getattr(self, k) is not None else None
            for k, least in ints.items()
        }
        ev = 4 * kw["samples"] if self.eval_samples is None else self.eval_samples
        kw["eval_samples"] = check_int("eval_samples", ev, 2)
        kw["damping"] = (
            None if self.damping is None else _check_float("damping", self.damping, 0.0, 1.0)
        )
        kw["tol"] = _check_float("tol", self.tol, 0.0, math.inf)
        kw["gain_tol"] = _check_float("gain_tol", self.gain_tol, 0.0, math.inf, False)
        kw["eps_tol"] = _check_float("eps_tol", self.eps_tol, 0.0, math.inf, False)
        kw["verify_tol"] = _check_float("verify_tol", self.verify_tol, 0.0, math.inf, False)
        kw["tilt"] = _check_float("tilt", self.tilt, 0.0, math.inf, False)
        for flag in ("resample", "exact"):
            v = getattr(self, flag)
            if v is not None and not isinstance(v, (bool, np.bool_)):
                raise MarketSimError(f"{flag} must be True or False (got {v!r})")
            kw[flag] = None if v is None else bool(v)
        return _Options(**kw)

    def for_path(self, path: str, n_classes: int = 1) -> _Options:
        """The automatic settings left open (None) for the oracle's path and the number
        of classes: on the ``outcome`` path (one call per report vector, slow) a
        25-report grid, no evaluated refinement and one fixed sample; else a 49-report
        grid, one round of evaluated refinement (three for several classes) and a fresh
        sample each iteration; damping 0.1 and 40 iterations (0.05 and 100 for several
        classes, whose common lowest bid is a knife edge); a verification every 10
        iterations (none on the ``outcome`` path).  On the exact ``interim`` path: 401
        reports, 6 rounds, damping 0.01 and up to 1000 (cheap) iterations
        (docs/equilibrium.md)."""
        slow, many = path == "outcome", n_classes > 1
        auto = dict(
            bid_grid=25 if slow else 49,
            br_refine=0 if slow else (3 if many else 1),
            resample=not slow,
            damping=0.05 if many else 0.1,
            max_iter=100 if many else 40,
            verify_every=0 if slow else 10,
            eval_refine=1 if slow else 3,  # each doubling re-evaluates every cost
        )
        if path == "interim":  # exact utilities: reports are cheap, no sample
            auto.update(bid_grid=401, br_refine=6, resample=False, damping=0.01, max_iter=1000)
        return dataclasses.replace(
            self,
            **{k: v for k, v in auto.items() if getattr(self, k) is None},  # type: ignore[arg-type]
        )

    def markets(self, oracle: Oracle, samples: int, classes: Classes) -> tuple[int, int]:
        """(markets, deviators per market): on the ``deviations`` path up to
        ``deviators`` sellers per market share one call (one per 8 sellers of the
        largest class: in small markets, one); on the other paths one deviator."""
        d = min(self.deviators, max(1, max(classes.counts) // 8))  # small markets: 1
        d = d if oracle.path == "deviations" else 1
        return max(1, -(-samples // d)), d


#: the solver's options and their defaults
OPTIONS = {f.name: f.default for f in dataclasses.fields(_Options)}


# ---- the solve -----------------------------------------------------------------------
@dataclass
class _State:
    """The bid functions being iterated: per class, the cost grid and the bids, the
    top of the focused cost range, and the report above which nothing is bought."""

    costs: list[np.ndarray]
    bids: list[np.ndarray]
    c_top: list[float]
    z_top: float

    def bidfns(self) -> list[BidFn]:
        return [_linear(x, y) for x, y in zip(self.costs, self.bids, strict=True)]


def _linear(x: np.ndarray, y: np.ndarray) -> BidFn:
    """The linear interpolation of the bids y at the grid costs x."""

    def fn(c):
        return np.interp(c, x, y)

    return fn


def _smooth(
    costs: np.ndarray, br: np.ndarray, knots: int, z_live: float = math.inf, law=None, cuts=()
):
    """The least-squares cubic spline with ``knots`` interior knots through the best
    responses (none: as they are): equilibrium bid functions are smooth, while best
    responses on a finite sample jump, and damped iterations of jumps form atoms.  Only
    the piece of costs whose responses sell (at most ``z_live``, the highest report that
    gets anything) is fitted (uncapped: a cap at the responses' range moved the
    asymmetric first-price bids by 0.05 at the knife edge); above it the responses are
    kept as they are: no smoothing across a reserve or the cost above which a seller
    never sells (issue #48, kinks kept).  Nor across a jump of the responses inside the
    selling range (``cuts``, (cost, cost) cells: the persistent jumps,
    ``_Trace.persistent``; pay-as-bid's cheapest sellers bid low for its large
    allocation, the others far higher): each piece is fitted alone, a piece too short
    for the knots kept as it is.  The spline is in the quantile F(c) (given the
    ``law``): for F(c) = sqrt(c) the bids are smooth in sqrt(c), not in c."""
    sells = br <= z_live
    end = int(np.flatnonzero(sells)[-1]) + 1 if sells.any() else 0  # up to the last seller
    if knots <= 0 or end < knots + 8:
        return br
    out = br.copy()
    at = [
        k
        for lo, hi in cuts
        for k in (int(np.searchsorted(costs, lo, "right")), int(np.searchsorted(costs, hi)))
        if 0 < k < end
    ]
    for piece in np.split(np.arange(end), sorted(set(at))):
        if piece.size >= knots + 8:
            out[piece] = _spline_piece(costs[piece], br[piece], knots, law)
    return out


def _spline_piece(x: np.ndarray, y: np.ndarray, knots: int, law) -> np.ndarray:
    """``_smooth``'s spline through one piece of responses, in the quantile when the law's
    cdf separates the costs (else in the cost); the responses as they are if it fails."""
    from scipy.interpolate import LSQUnivariateSpline

    if law is not None:
        u = np.asarray(law.cdf(x), dtype=float)
        if np.all(np.diff(u) > 0):
            x = u
    t = np.quantile(x, np.linspace(0, 1, knots + 2)[1:-1])
    try:
        return LSQUnivariateSpline(x, y, t, k=3)(x)
    except ValueError:
        return y


def _focused(law, c_top: float, k: int) -> np.ndarray:
    """``k`` costs evenly on [low, c_top], ``k`` by quantile (equal probability under the
    law on [low, c_top]: dense where the sellers are, e.g. at 0 for F(c) = sqrt(c); issue
    #48), low + (c_top - low) 2^-j (j = 6..14: a bid function may rise like sqrt(c) at
    the bottom) when the first quantile cell is under a quarter of an even one, and the
    coarse sentinel costs above c_top."""
    lo, hi = law.support
    coarse = np.linspace(lo, hi, SENTINELS)
    q = np.linspace(0.0, float(law.cdf(c_top)), k)
    by_mass = np.clip(np.asarray(law.ppf(q), dtype=float), lo, c_top)
    even = np.linspace(lo, c_top, k)
    ends = lo + (c_top - lo) * 2.0 ** -np.arange(6, 15)  # where a bid can rise like sqrt(c)
    if not by_mass[1] - lo < (c_top - lo) / (4 * k):  # only for mass piled at the bottom
        ends = ends[:0]  # (on a sample, crowded noisy responses there bias the fit)
    grid = np.concatenate((even, by_mass[np.isfinite(by_mass)], ends, coarse[coarse > c_top]))
    grid = np.unique(grid)
    return grid[np.concatenate(([True], np.diff(grid) > 1e-9 * (hi - lo)))]  # no near-twins


def _start(setup: _Setup, opt: _Options, init) -> _State:
    inits = _per_class(init, len(setup.classes.laws), "init")
    costs, bids = [], []
    for law, b0 in zip(setup.classes.laws, inits, strict=True):
        c = _focused(law, law.support[1], opt.grid)
        b = np.clip(_as_bidfn(b0)(c), *setup.z_range)
        costs.append(c)
        bids.append(np.maximum.accumulate(b))
    return _State(costs, bids, [d.support[1] for d in setup.classes.laws], setup.z_range[1])


def _refocus(setup: _Setup, state: _State, opt: _Options, first: bool) -> None:
    """Focus each class's cost grid on [low, c_top]: above z_top no report gets anything."""
    z_lo, z_hi = setup.z_range
    step = (z_hi - z_lo) / (SENTINELS - 1)
    for g, law in enumerate(setup.classes.laws):
        lo, hi = law.support
        top = float(np.clip(state.z_top + step, lo + (hi - lo) / (SENTINELS - 1), hi))
        if top > state.c_top[g] or (first and top < state.c_top[g]):
            state.c_top[g] = top
            new = _focused(law, top, opt.grid)
            state.bids[g] = np.interp(new, state.costs[g], state.bids[g])
            state.costs[g] = new


@dataclass
class _Trace:
    """The iteration's record: residuals sup|BR - b| (``history``), the ex-ante gains of
    the responses on their own sample (``gains``) and the relative epsilons measured
    (``epsilons``: exact on the interim path, NaN where not measured), the max over
    classes each; which rule stopped it; on the interim path the best iterate."""

    iterations: int = 0
    stopped_by: str = "max_iter"
    history: list[float] = field(default_factory=list)
    gains: list[float] = field(default_factory=list)
    epsilons: list[float] = field(default_factory=list)
    best: int = 0  # the iteration whose bids are returned
    best_state: tuple | None = None
    final_checks: list | None = None  # a first verification that found no gain at all
    tail: list = field(default_factory=list)  # sampled paths: the last eighth's iterates
    jump_log: list = field(default_factory=list)  # per iteration and class, the jump cells

    def persistent(self, g: int) -> list[tuple[float, float]]:
        """Class g's jump cells (cost, cost) of the responses in each of the last
        ``_PERSIST`` iterations: on a sample, responses jump here and there from noise
        (first price, 2 sellers: rises of 10-14% of the range), a jump of the game
        stays in its cell."""
        if len(self.jump_log) < _PERSIST:
            return []
        last = [set(log[g]) for log in self.jump_log[-_PERSIST:]]
        return sorted(set.intersection(*last))

    @property
    def converged(self) -> bool:
        return self.stopped_by not in ("max_iter", "stalled")


#: iterations in a row whose responses jump in the same cell for the jump to be the game's
_PERSIST = 3

#: the stopping rules (``BNEResult.stopped_by``) and what each means
STOPPING_RULES = {
    "residual": "sup|BR - b| <= tol x the support's width (at once: the bids are kept)",
    "gain": "the responses' ex-ante gain on their own sample <= gain_tol x utility "
    "(biased up by the sample's noise: conservative)",
    "epsilon": "interim path: every class's exact largest gain <= eps_tol x its utility",
    "verified": "sampled paths, every verify_every iterations: every class's epsilon upper "
    "95% bound on fresh opponents <= verify_tol x its utility",
    "stalled": "interim path, patience > 0: no smaller exact epsilon for `patience` "
    "iterations (the best iterate is returned; not converged)",
    "max_iter": "max_iter iterations",
    "utility_loss": "distributional: every class's relative utility loss on the grid <= eps_tol",
    "tables_epsilon": "distributional, interim path: the returned tables' exact relative "
    "epsilon (every report searched against their exact report laws) <= verify_tol",
}


def _stop_rule(opt: _Options, it: int, exact: bool, residual, gain, eps, width) -> str | None:
    """Which stopping rule fires after iteration ``it`` (None: go on): on a sample only
    after the switch to the full sample and 5 more iterations (docs/equilibrium.md)."""
    if residual == 0.0:
        return "residual"
    if it == 1 and eps <= (opt.eps_tol if exact else opt.verify_tol):  # the start certified
        return "epsilon" if exact else "verified"
    if it < 5 or (not exact and 2 * it <= (opt.max_iter or 0) + 10):
        return None
    if exact:  # the exact epsilon is the criterion (the ex-ante gain is too lax)
        return "epsilon" if eps <= opt.eps_tol else None
    if residual <= opt.tol * width:
        return "residual"
    if gain <= opt.gain_tol:
        return "gain"
    return "verified" if eps <= opt.verify_tol else None  # NaN where not verified


def _width(setup) -> float:
    """The widest class support: the scale of the ``residual`` rule."""
    return max(d.support[1] - d.support[0] for d in setup.classes.laws)


def _iterate(setup, opt, oracle, train, state, progress, rng) -> _Trace:
    """Damped best responses, all classes at once, until a stopping rule fires
    (``_stop_rule``; docs/equilibrium.md, "The method")."""
    from tqdm import tqdm

    trace = _Trace()
    exact = oracle.path == "interim"
    width = _width(setup)
    bar = tqdm(total=opt.max_iter, desc="best responses", file=sys.stderr, disable=not progress)
    for it in range(1, opt.max_iter + 1):
        train = _opponents(setup, opt, state, train, it, exact, rng)
        sample = train if 2 * it > opt.max_iter or opt.tilt > 1 else train.prefix(4)
        rs = _responses(setup, opt, oracle, sample, state, exact)
        # one class only: with several, the common lowest bid's knife edge looks like a
        # jump, and cutting there broke the asymmetric first price (exact eps 0.3% -> 18%)
        single = len(rs) == 1
        logged = zip(state.costs, rs, strict=True)
        trace.jump_log.append([_jumps_of(c, r) if single else [] for c, r in logged])
        brs = [
            np.clip(
                isotonic(_smooth(c, r.bids, opt.knots, r.z_live, law, trace.persistent(g))),
                *setup.z_range,
            )
            for g, (c, r, law) in enumerate(zip(state.costs, rs, setup.classes.laws, strict=True))
        ]
        residual = max(float(np.max(np.abs(br - b))) for br, b in zip(brs, state.bids, strict=True))
        gain = max(r.gain for r in rs)
        eps = _epsilon_now(setup, opt, oracle, sample, state, it, exact, rng, residual, trace)
        trace.iterations = it
        trace.history.append(residual)
        trace.gains.append(gain)
        trace.epsilons.append(eps)
        if exact and eps <= min(trace.epsilons):  # the bids before this iteration's update
            trace.best = it
            trace.best_state = ([*state.costs], [*state.bids], [*state.c_top], state.z_top)
        bar.update(1)
        bar.set_postfix(_shown(residual=residual, gain=gain, eps=eps))
        rule = _stop_rule(opt, it, exact, residual, gain, eps, width)
        if rule is not None:
            trace.stopped_by, trace.best = rule, it
            break
        if exact and opt.patience and it - trace.best >= opt.patience:
            trace.stopped_by = "stalled"
            break
        step = max(opt.damping, 1.0 / (it + 1))  # fictitious play, floored
        state.bids = [b + step * (br - b) for br, b in zip(brs, state.bids, strict=True)]
        state.z_top = max(r.z_top for r in rs)
        _refocus(setup, state, opt, it == 1)
        if not exact and opt.resample and 8 * it > 7 * opt.max_iter:  # the tail, averaged
            trace.tail.append(([*state.costs], [b.copy() for b in state.bids]))
    if trace.stopped_by == "max_iter" and trace.tail:
        state.bids = _tail_average(state.costs, trace.tail)
    if trace.stopped_by in ("max_iter", "stalled"):
        trace.best = trace.best or trace.iterations
        if trace.best_state is not None:  # the interim path's best iterate
            state.costs, state.bids, state.c_top, state.z_top = trace.best_state
    bar.close()
    return trace


def _sharpen(setup, opt, oracle, state: _State, trace: _Trace, rng) -> list[list[float]]:
    """Every jump of the bid tables made a step at the cost where its branches pay the
    same (``sharpen_jump``), after the grid costs around it are solved again
    (``_around_jump``).  The jumps: those of the responses in each of the last
    ``_PERSIST`` iterations (``_Trace.persistent``; the damped bids smear a jump over
    cells, so they are not searched for it).  On the interim
    path against the exact report laws, else on a fresh sample of ``eval_samples``
    draws, drawn only when there is a jump.  Per class the costs of the steps
    (``options["jumps"]``)."""
    found = [
        [
            (int(np.searchsorted(c, lo, "right")) - 1, int(np.searchsorted(c, hi, "left")))
            for lo, hi in trace.persistent(g)
        ]
        for g, c in enumerate(state.costs)
    ]
    if not any(found):
        return [[] for _ in found]
    sample: Sample | Interim
    R: np.ndarray | None = None
    if oracle.path == "interim":
        sample = Interim(setup.classes, state.costs, state.bids, setup.cdfs)
    else:
        markets, per_market = opt.markets(oracle, opt.eval_samples, setup.classes)
        fresh = Sample(setup.classes, markets, per_market, rng)
        R = reports_of(fresh, setup.classes, state.bidfns())
        sample = fresh
    steps: list[list[float]] = []
    for g, cells in enumerate(found):
        steps.append([])
        floors = [0] + [j for _, j in cells[:-1]] if cells else []
        for cell, floor in zip(reversed(cells), reversed(floors), strict=True):  # from the top
            near = _around_jump(setup, opt, oracle, sample, R, g, state, floor, cell)
            if near is None:
                continue
            x, y, near_cell = near
            done = sharpen_jump(oracle, sample, R, g, x, y, near_cell, setup.z_range)
            if done is not None:
                state.costs[g], state.bids[g], at = done
                steps[g].insert(0, at)
    return steps


#: grid costs each side of a jump solved again (``_around_jump``), the even costs that
#: replace them, and the rounds of refinement of their best responses
_NEAR, _NEAR_COSTS, _NEAR_REFINE = 4, 16, 6


def _around_jump(setup, opt, oracle, sample, R, g, state, floor, cell):
    """Class g's table with the grid costs from ``_NEAR`` below the jump ``cell`` (not
    below grid index ``floor``; all of them when the piece below is too short for the
    spline, whose bids are then raw damped responses) to ``_NEAR`` above it replaced by
    best responses on the sample at ``_NEAR_COSTS`` even costs over that range
    (``_NEAR_REFINE`` rounds of refinement, undamped: a damped iterate there averages
    the two branches while the jump moves, and these sellers are few: their bids barely
    move the others'); (costs, bids, the jump's cell in them), or None when those
    responses do not jump."""
    i, j = cell
    costs, bids = state.costs[g], state.bids[g]
    top = int(np.searchsorted(costs, state.c_top[g], "right")) - 1
    first = floor if i - floor + 1 < opt.knots + 8 else max(floor, i - _NEAR)
    x = np.linspace(costs[first], costs[max(j, min(j + _NEAR, top))], _NEAR_COSTS)
    law = setup.classes.laws[g]
    resp = best_response(
        oracle, sample, R, g, x, np.interp(x, costs, bids), setup.z_range, state.z_top,
        opt.bid_grid, prior_weights(law, x), _NEAR_REFINE,
    )  # fmt: skip
    br = np.maximum.accumulate(resp.bids)
    inner = jump_cells(x, br, float(np.ptp(bids[: top + 1])))  # a jump of the whole table's
    if not inner:
        return None
    a, b = inner[0]
    below, above = costs < x[0], costs > x[-1]
    xs = np.concatenate((costs[below], x, costs[above]))
    ys = np.maximum.accumulate(np.concatenate((bids[below], br, bids[above])))
    return xs, ys, (int(below.sum()) + a, int(below.sum()) + b)


def _jumps_of(costs: np.ndarray, response) -> list[tuple[float, float]]:
    """The (cost, cost) cells where the responses that sell jump (``jump_cells``)."""
    br = response.bids
    sells = np.flatnonzero(br <= response.z_live)
    end = int(sells[-1]) + 1 if sells.size else 0
    return [(float(costs[i]), float(costs[j])) for i, j in jump_cells(costs[:end], br[:end])]


def _tail_average(costs: list[np.ndarray], tail: list) -> list[np.ndarray]:
    """Per class the mean of the tail's bid functions at ``costs`` (each iterate's table
    interpolated; a mean of monotone functions is monotone).  Sampled paths stopped by
    ``max_iter``: with fresh opponents each iteration the damped step (floored at
    ``damping``) keeps the last few samples' noise in the bids, and averaging the last
    eighth's iterates (Polyak-Ruppert; the second half's and the last quarter's kept
    the drift of the 2-unit game's iterates, n = 3 on U[1, 3]: L∞ 0.027 and 0.013) removes
    most of it (issue #48: first price, 4 sellers,
    sampled path, the last iterate's exact relative epsilon 1.47%, L∞ 0.0070)."""
    return [
        np.mean([np.interp(c, tc[g], tb[g]) for tc, tb in tail], axis=0)
        for g, c in enumerate(costs)
    ]


def _shown(**values: float) -> dict[str, str]:
    """The progress bar's numbers: those measured this iteration (no NaN), finite."""
    return {k: f"{v:.2g}" for k, v in values.items() if math.isfinite(v)}


def _epsilon_now(
    setup, opt, oracle, sample, state, it, exact, rng, residual=math.nan, trace=None
) -> float:
    """The relative epsilon of the current bids (max over classes) where it is measured:
    exactly on the interim path at every iteration; on the sampled paths every
    ``verify_every`` iterations once the full sample is used, as the upper 95% bound
    of a verification on fresh opponents (``samples`` draws); else NaN.  At the first
    iteration, when the responses nearly keep the start (an IC mechanism at the truth),
    a verification on a quarter of the draws with the density refinement: if it finds
    no gain at all it is the result's (``trace.final_checks``; issue #48: <= 2 s)."""
    if exact:
        return _exact_epsilon(setup, opt, oracle, sample, state)
    warm = 2 * it > opt.max_iter + 10
    first = it == 1 and residual <= opt.tol * _width(setup)  # the start nearly kept (IC)
    if not first and not (
        warm and opt.verify_every and it % opt.verify_every == 0 and it < opt.max_iter
    ):
        return math.nan
    quick = dataclasses.replace(opt, eval_samples=opt.samples, eval_refine=0)
    if first:
        few = max(2, opt.samples // 4)
        quick = dataclasses.replace(opt, samples=few, eval_samples=few)
    G = len(setup.classes.laws)
    checks = _verify(
        setup, quick, oracle, state.bidfns(), state.costs, state.c_top, state.z_top, rng, [None] * G
    )
    if first and trace is not None and all(ch.epsilon <= _NO_GAIN * _width(setup) for ch in checks):
        trace.final_checks = checks
    return max(
        0.0
        if ch.epsilon_ci[1] <= 0
        else (ch.epsilon_ci[1] / ch.utility if ch.utility > 0 else math.inf)
        for ch in checks
    )


#: a gain at most this times the support's width is float noise, not a gain: an IC
#: mechanism's numerically integrated payments (offline: Myerson's integral) leave
#: gains of 1e-18 to 1e-11 at the truth (issue #48: it then verified twice, 91 s for 5 sellers)
_NO_GAIN = 1e-10


def _exact_epsilon(setup, opt, oracle, laws, state) -> float:
    """The interim path's exact relative epsilon of the current bids (the max over the
    classes), at the verification's evaluation costs and the grid costs."""
    out = []
    for g, law in enumerate(setup.classes.laws):
        costs = np.union1d(eval_costs_for(law, state.c_top[g], opt.eval_grid), state.costs[g])
        bids = np.interp(costs, state.costs[g], state.bids[g])
        out.append(
            interim_epsilon(oracle, laws, g, law, costs, bids, setup.z_range, state.z_top, opt)
        )
    return max(out)


def _opponents(setup, opt, state, train, it, exact, rng):
    """This iteration's opponents: on the interim path their report laws (exact); with
    resample a fresh scramble after the first (the damped average cancels its noise)."""
    if exact:
        return Interim(setup.classes, state.costs, state.bids, setup.cdfs)
    if opt.resample and it > 1:
        return Sample(setup.classes, train.markets, train.per_market, rng, opt.tilt)
    return train


def _responses(setup, opt, oracle, sample, state, exact) -> list:
    """Every class's best responses to the current bids."""
    R = None if exact else reports_of(sample, setup.classes, state.bidfns())
    return [
        best_response(
            oracle,
            sample,
            R,
            g,
            state.costs[g],
            state.bids[g],
            setup.z_range,
            state.z_top,
            opt.bid_grid,
            prior_weights(law, state.costs[g]),
            opt.br_refine,
        )  # fmt: skip
        for g, law in enumerate(setup.classes.laws)
    ]


def _verify(setup, opt, oracle, bidfns, state_costs, c_tops, z_top, rng, references):
    """Per class, epsilon and the metrics on two samples the solve never saw: the best
    deviations are searched on one and their gains measured on the other, at evaluation
    costs refined until two successive densities agree (``_refined``; the density used
    is ``EpsilonResult.eval_cells``)."""
    search = Sample(setup.classes, *opt.markets(oracle, opt.samples, setup.classes), rng, opt.tilt)
    fresh = Sample(
        setup.classes, *opt.markets(oracle, opt.eval_samples, setup.classes), rng, opt.tilt
    )
    Rs = reports_of(search, setup.classes, bidfns)
    Rf = reports_of(fresh, setup.classes, bidfns)
    refs = [None if r is None else _as_bidfn(r) for r in references]
    # the reference's own win rates, against the reference profile (every class known)
    R_ref = None
    if not any(r is None for r in refs):  # the references tabulated (they may be slow, 1-D)
        tables = [_tabulated(r, law) for r, law in zip(refs, setup.classes.laws, strict=True)]
        R_ref = reports_of(fresh, setup.classes, tables)
    out = []
    for g, law in enumerate(setup.classes.laws):

        def at(cells, g=g, law=law):
            dens = opt.eval_grid * 2 ** np.arange(int(round(math.log2(cells / opt.eval_grid))) + 1)
            costs = np.unique(np.concatenate([eval_costs_for(law, c_tops[g], d) for d in dens]))
            bids = np.clip(bidfns[g](costs), *setup.z_range)
            z_star = search_reports(
                oracle, search, Rs, g, costs, bids, setup.z_range, z_top, opt.check_grid,
                opt.refine,
            )  # fmt: skip
            wins = None if R_ref is None else _win_rates(oracle, fresh, R_ref, g, refs[g], costs)
            return measure(oracle, fresh, Rf, g, law, costs, bids, z_star, refs[g], wins)

        out.append(_refined(at, opt.eval_grid, opt.eval_refine))
    return out


def _tabulated(fn: BidFn, law) -> BidFn:
    """``fn`` at 513 costs (evenly and by quantile), linearly interpolated: the opponents'
    reports of a reference profile, for its win rates (a closed form by quadrature may
    take one cost at a time)."""
    lo, hi = law.support
    q = np.asarray(law.ppf(np.linspace(0.0, 1.0, 257)), dtype=float)
    x = np.unique(np.clip(np.concatenate((np.linspace(lo, hi, 257), q[np.isfinite(q)])), lo, hi))
    y = np.asarray(fn(x), dtype=float)
    return _linear(x, y)


def _win_rates(oracle, fresh, R_ref, g, ref, costs) -> np.ndarray:
    """Per cost, the share of the fresh markets where the reference's bid gets anything
    when the others play the reference profile."""
    E = oracle.eps_pay(fresh, R_ref, g, np.asarray(ref(costs), dtype=float))[0]
    return fresh.mean((E > 0).astype(float))


def _refined(at, cells: int, rounds: int) -> EpsilonResult:
    """``at(cells)`` at ``cells`` evaluation cells, then at twice as many (each density's
    costs include the coarser ones, so epsilon can only grow) until two successive
    densities agree: the denser epsilon / u at most 10% (and 1e-4) above the coarser,
    or ``rounds`` doublings (issue #48: a denser evaluation must not find more)."""
    prev = at(cells)
    for _ in range(rounds):
        nxt = at(2 * cells)
        if nxt.epsilon_relative <= 1.1 * prev.epsilon_relative + 1e-4:
            return dataclasses.replace(nxt, eval_cells=2 * cells, agreed=True)
        prev, cells = nxt, 2 * cells
    return dataclasses.replace(prev, eval_cells=cells, agreed=rounds == 0)


# ---- the entry points ------------------------------------------------------------------
def bne(
    mechanism,
    population,
    rng: np.random.Generator,
    *,
    n_sellers: int | None = None,
    init="truth",
    reference=None,
    bid_max: float | None = None,
    progress: bool = False,
    method: str = "auto",
    **options,
) -> BNEResult:
    """A Bayes-Nash equilibrium of ``mechanism`` (a name, spec, class, instance or object
    with ``outcome``) for sellers in classes: ``population`` a Population (or its spec,
    ``70*uniform:0:1+30*uniform:1:2``), a list of ``(cost law, count)`` pairs, or one cost
    law with ``n_sellers`` (``market_sim.population.as_population``).  One bid function
    per class, numbered as the classes are given.  ``options``: grid, bid_grid,
    samples, deviators, damping, max_iter, br_refine, resample, exact (the solve; the
    automatic ones by path unless given); tol, gain_tol, eps_tol, verify_every,
    verify_tol, patience (the stopping rules, ``STOPPING_RULES``); eval_grid,
    eval_samples, check_grid, refine (the verification); and the market settings mu,
    sigma, gamma, privacy (docs/equilibrium.md).  ``init``: the starting bid function(s)
    ("truth", a function, a list per class or a BNEResult); ``reference``: bid
    function(s) to measure L2 / L∞ distances to.  ``method``: "pure" (bid functions,
    above), "distributional" (mixed strategies on a discretised game, ``DIST_OPTIONS``)
    or "auto" (the default: the one suited to the mechanism and the options given,
    ``_auto``; ``options["method"]`` and ``["method_reason"]`` say which and why).  Same
    ``rng`` state, same result."""
    if method != "pure":
        called = dict(n_sellers=n_sellers, init=init, reference=reference, bid_max=bid_max)
        return _by_method(method, mechanism, population, rng, called, bool(progress), options)
    t0 = time.perf_counter()
    context = {k: options.pop(k) for k in list(options) if k in CONTEXT_KEYS}
    opt = _options(options)
    setup = _setup(mechanism, population, n_sellers, rng, context, bid_max)
    G = len(setup.classes.laws)
    references = _per_class(reference, G, "reference")
    # the interim path knows the others' report laws, not their data
    exact = opt.exact is not False and not getattr(setup.mech, "needs_data", False)
    oracle = Oracle(setup.mech, exact=exact)
    sampled = Oracle(setup.mech)  # the verification draws opponents on every path
    opt = opt.for_path(oracle.path, G)
    markets, d = opt.markets(oracle, opt.samples, setup.classes)
    train = None if oracle.path == "interim" else Sample(setup.classes, markets, d, rng, opt.tilt)
    state = _start(setup, opt, init)
    trace = _iterate(setup, opt, oracle, train, state, progress, rng)
    jumps = _sharpen(setup, opt, oracle, state, trace, rng)
    checks = None if any(jumps) else trace.final_checks
    if checks is None or any(r is not None for r in references):
        checks = _verify(
            setup, opt, sampled, state.bidfns(), state.costs, state.c_top, state.z_top, rng,
            references,
        )  # fmt: skip
    oracle.calls += sampled.calls
    r = _result(setup, opt, state, trace, checks, oracle, time.perf_counter() - t0, context)
    called = dict(n_sellers=setup.classes.n, init=_described(init), progress=bool(progress))
    called["reference"] = _described(reference)
    called["method"] = "pure"
    called["jumps"] = jumps
    return dataclasses.replace(r, options={**r.options, **called})


def _described(bid) -> str | None:
    """A bid-function argument as ``options`` records it (JSON): "truth", None or its kind."""
    if bid is None or isinstance(bid, str):
        return bid
    if isinstance(bid, (list, tuple)):
        return "[" + ", ".join(str(_described(b)) for b in bid) + "]"
    return getattr(bid, "__name__", type(bid).__name__)


def bne_sweep(
    mechanism,
    settings,
    seed: int,
    *,
    workers: int = 1,
    executor: str = "local",
    address: str | None = None,
    progress: bool = False,
    **common,
) -> list[BNEResult]:
    """One equilibrium per entry of ``settings`` (dicts of :func:`bne`'s arguments:
    ``population``, ``n_sellers``, options, market settings; ``common`` for every entry),
    in their order.  Entry ``s`` is one task (``market_sim.execution``: ``workers``,
    ``executor``, ``address``) solved with its own stream ``job_rng(seed, s)``, so each
    result depends on the root seed and its own setting only: the same on any executor,
    and the same whichever other settings are swept with it."""
    check_executor(workers, executor, address)
    if isinstance(settings, dict) or not all(isinstance(s, dict) for s in settings):
        raise MarketSimError("settings: give a list of dicts of bne's arguments")
    if not isinstance(seed, int | np.integer) or isinstance(seed, bool):
        raise MarketSimError(f"seed must be an integer (got {seed!r})")
    jobs = []
    for i, setting in enumerate(settings):
        kw = {**common, **setting}
        if "population" not in kw:
            raise MarketSimError(f"settings[{i}]: no population (a cost law or a Population)")
        identity = {k: kw[k] for k in sorted(kw)}
        jobs.append(Job(f"bne-{i}", _bne_job, (mechanism, int(seed), identity, kw)))
    where: dict[str, Any] = dict(workers=workers, executor=executor, address=address)
    bar = "bne" if progress else False
    return run_jobs(jobs, progress=bar, preload=("market_sim.equilibrium",), **where)


def _bne_job(mechanism, seed: int, identity: dict, kw: dict) -> BNEResult:
    """Task of :func:`bne_sweep`: one equilibrium with the stream of its setting."""
    kw = dict(kw)
    population = kw.pop("population")
    return bne(mechanism, population, job_rng(seed, identity), **kw)


def _options(options: dict) -> _Options:
    names = {f.name for f in dataclasses.fields(_Options)}
    unknown = sorted(set(options) - names)
    if unknown:
        raise MarketSimError(
            f"unknown option {unknown[0]!r} (options: {', '.join(sorted(names))}; market "
            f"settings: {', '.join(CONTEXT_KEYS)})"
        )
    return _Options(**options).checked()


def _result(setup, opt, state, trace, checks, oracle, seconds, context) -> BNEResult:
    classes = tuple(
        ClassBid(law.spec, k, (float(law.support[0]), float(law.support[1])), c, b, ch)
        for law, k, c, b, ch in zip(
            setup.classes.laws, setup.classes.counts, state.costs, state.bids, checks, strict=True
        )
    )
    worst = max(range(len(checks)), key=lambda g: checks[g].epsilon)
    options = {
        **dataclasses.asdict(opt),
        "markets": opt.markets(oracle, opt.samples, setup.classes)[0],
        "path": oracle.path,
        "calls": oracle.calls,
        "cost_top": state.c_top[0],
        "training_gain": trace.gains[trace.best - 1] if trace.gains else math.nan,
        "training_epsilon": trace.epsilons[trace.best - 1] if trace.epsilons else math.nan,
        "best_iteration": trace.best,
        "bid_max": setup.z_range[1],
        # the market settings the mechanism uses (its own field), else as given (None: neither)
        **{k: getattr(setup.mech, k, context.get(k)) for k in CONTEXT_KEYS},
    }
    return BNEResult(
        mechanism=setup.name,
        dist=setup.classes.spec,
        n_sellers=setup.classes.n,
        costs=classes[0].costs,
        bids=classes[0].bids,
        epsilon=checks[worst].epsilon,
        epsilon_ci=checks[worst].epsilon_ci,
        epsilon_relative=max(c.epsilon_relative for c in checks),
        iterations=trace.iterations,
        converged=_certified(trace, checks, opt),
        residual=trace.history[trace.best - 1] if trace.history else math.nan,
        seconds=seconds,
        check=checks[0],
        history=tuple(trace.history),
        options=options,
        support=classes[0].support,
        classes=classes,
        stopped_by=trace.stopped_by,
    )


def _certified(trace: _Trace, checks, opt: _Options) -> bool:
    """Converged: a certifying rule fired and the final verification's epsilon / u is
    within ``verify_tol`` for every class (issue #48: ``converged`` means it)."""
    return trace.converged and all(c.epsilon_relative <= opt.verify_tol for c in checks)


def symmetric_bne(
    mechanism, dist, n_sellers: int, rng: np.random.Generator, **options
) -> BNEResult:
    """The one-class case of :func:`bne`: ``n_sellers`` sellers with i.i.d. costs from
    ``dist`` (a spec or :class:`CostDistribution`); one bid function."""
    n = check_int("n_sellers", n_sellers, 2)
    if isinstance(dist, (list, tuple)) or (isinstance(dist, str) and "*" in dist):
        raise MarketSimError("symmetric_bne takes one cost law; use bne for classes")
    return bne(mechanism, [(dist, n)], rng, **options)


def bne_epsilon(
    mechanism,
    population,
    n_sellers: int | None,
    bid,
    rng: np.random.Generator,
    *,
    reference=None,
    bid_max: float | None = None,
    **options,
) -> EpsilonResult:
    """Epsilon and the metrics of the profile where every seller of class g bids
    ``bid`` (a vectorised function, a list of them per class, a BNEResult or
    "truth"): the best deviation of each evaluation cost is searched over the whole
    report range on one sample and its gain measured on fresh opponents.  For several
    classes, the class with the largest epsilon (``bne_epsilon_by_group`` gives all).
    Options: eval_grid, eval_samples (default ``samples``), samples, check_grid, refine,
    deviators, and the market settings."""
    return max(
        bne_epsilon_by_group(
            mechanism, population, n_sellers, bid, rng, reference=reference,
            bid_max=bid_max, **options,
        ),
        key=lambda e: e.epsilon,
    )  # fmt: skip


def bne_epsilon_by_group(
    mechanism, population, n_sellers, bid, rng, *, reference=None, bid_max=None, **options
) -> list[EpsilonResult]:
    """:func:`bne_epsilon` per class."""
    context = {k: options.pop(k) for k in list(options) if k in CONTEXT_KEYS}
    opt = _options(options)
    if n_sellers is not None:
        n_sellers = check_int("n_sellers", n_sellers, 2)
    setup = _setup(mechanism, population, n_sellers, rng, context, bid_max)
    G = len(setup.classes.laws)
    bidfns = [_as_bidfn(b) for b in _per_class(bid, G, "bid")]
    refs = _per_class(reference, G, "reference")
    c_tops = [d.support[1] for d in setup.classes.laws]
    oracle = Oracle(setup.mech)
    opt = opt.for_path(oracle.path, G)  # the automatic eval_refine
    return _verify(setup, opt, oracle, bidfns, None, c_tops, setup.z_range[1], rng, refs)


# ---- the figure ------------------------------------------------------------------------
def figure(result: BNEResult):
    """The bid function against the truth (left) and the gain of the best deviation
    per cost on fresh opponents (right): a matplotlib Figure."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (ax, ax2) = plt.subplots(1, 2, figsize=(11, 4.6))
    many = len(result.classes) > 1
    for g, cl in enumerate(result.classes):
        tag = f" (class {g}: {cl.dist})" if many else ""
        ax.plot(cl.costs, cl.bids, "o-", ms=3, label=f"BNE bid b(c){tag}")
        ax2.plot(cl.check.eval_costs, cl.check.gains, ".-", label=f"mean gain at each cost{tag}")
    lo_c = min(cl.support[0] for cl in result.classes)
    hi_c = max(cl.support[1] for cl in result.classes)
    ax.plot([lo_c, hi_c], [lo_c, hi_c], "k--", lw=1, label="truth b(c) = c")
    ax.set(
        xlabel="cost c",
        ylabel="report",
        title=f"{result.mechanism}, {result.dist}, {result.n_sellers} sellers",
    )
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.15), fontsize=8)
    lo, hi = result.epsilon_ci
    ax2.axhline(result.epsilon, color="k", ls="--", lw=1, label=f"epsilon {result.epsilon:.2g}")
    ax2.axhspan(lo, hi, color="0.85", label=f"95% CI [{lo:.2g}, {hi:.2g}]")
    ax2.set(
        xlabel="cost c",
        ylabel="gain of the best deviation (fresh markets)",
        title=f"{result.iterations} iterations, stopped by {result.stopped_by}",
    )
    ax2.legend(loc="upper center", bbox_to_anchor=(0.5, -0.15), fontsize=8, ncol=2)
    fig.tight_layout()
    fit_titles(fig)  # a mechanism given by its file path can be wider than the axes
    return fig


def plot(result: BNEResult, path) -> None:
    """:func:`figure` written to ``path`` (PNG) atomically."""
    save_png(figure(result), path, dpi=100)


# ---- the second method: distributional strategies -----------------------------------------
#: ``bne``'s methods: "pure" (damped best responses of bid functions), "distributional"
#: (mixed strategies on a discretised game, ``market_sim.equilibrium_distributional``),
#: "auto" (both when the mechanism has an exact ``interim``, else the pure one and the
#: distributional one only if the pure one fails its verification; the better verified
#: one is returned; docs/equilibrium.md, "Which method")
METHODS = ("pure", "distributional", "auto")
#: the distributional method's options (besides the verification's ``_VERIFY_KEYS``)
DIST_OPTIONS = {f.name: f.default for f in dataclasses.fields(DistOptions)}
_VERIFY_KEYS = ("samples", "eval_grid", "eval_samples", "check_grid", "refine", "deviators")


def _by_method(method, mechanism, population, rng, called, progress, options) -> BNEResult:
    """``bne`` with ``method`` "distributional" or "auto"."""
    if method not in METHODS:
        raise MarketSimError(f"method must be one of {', '.join(METHODS)} (got {method!r})")
    if method == "distributional":
        return _distributional(mechanism, population, rng, called, progress, options)
    return _auto(mechanism, population, rng, called, progress, options)


def _split_options(options: dict) -> tuple[DistOptions, _Options, dict]:
    """The distributional solver's options, the verification's and the market settings;
    an option of the pure method only is refused (one line)."""
    context = {k: options[k] for k in options if k in CONTEXT_KEYS}
    rest = {k: v for k, v in options.items() if k not in CONTEXT_KEYS}
    known = set(DIST_OPTIONS) | set(_VERIFY_KEYS)
    unknown = sorted(set(rest) - known)
    if unknown:
        where = "applies to method='pure' only" if unknown[0] in OPTIONS else "is unknown"
        raise MarketSimError(
            f"option {unknown[0]!r} {where} (method='distributional' takes: "
            f"{', '.join(sorted(known))})"
        )
    dopt = DistOptions(**{k: v for k, v in rest.items() if k in DIST_OPTIONS}).checked()
    return dopt, _options({k: v for k, v in rest.items() if k in _VERIFY_KEYS}), context


def _distributional(mechanism, population, rng, called, progress, options) -> BNEResult:
    """``bne(..., method="distributional")``: mixed strategies by dual averaging on the
    discretised game, each class's mean bid per cost node as its bid function, verified
    by the pure solver's verification (``_verify``: fresh opponents playing the mean
    bids, every report of the range searched)."""
    t0 = time.perf_counter()
    if not (isinstance(called["init"], str) and called["init"] == "truth"):
        raise MarketSimError("init applies to method='pure' only")
    dopt, vopt, context = _split_options(options)
    setup = _setup(mechanism, population, called["n_sellers"], rng, context, called["bid_max"])
    laws = setup.classes.laws
    references = _per_class(called["reference"], len(laws), "reference")
    sol = solve_distributional(setup.mech, setup.classes, setup.z_range, rng, dopt, progress)
    chosen = bid_tables(setup.mech, setup.classes, sol, setup.z_range)
    tables = chosen.tables
    c_tops = [live_top(s, law.support) for s, law in zip(sol.strategies, laws, strict=True)]
    oracle = Oracle(setup.mech)
    auto = vopt.for_path(oracle.path, len(laws))  # the verification's automatic eval_refine
    vopt = dataclasses.replace(vopt, eval_refine=auto.eval_refine)
    bidfns = [_linear(c, b) for c, b in tables]
    checks = _verify(setup, vopt, oracle, bidfns, None, c_tops, setup.z_range[1], rng, references)
    state = _State([c for c, _ in tables], [b for _, b in tables], c_tops, setup.z_range[1])
    trace = _Trace(sol.iterations, sol.stopped_by, list(sol.history), best=sol.iterations)
    r = _result(setup, vopt, state, trace, checks, oracle, time.perf_counter() - t0, context)
    recorded = {
        **dataclasses.asdict(dopt),
        **{k: getattr(vopt, k) for k in _VERIFY_KEYS},
        "verify_tol": vopt.verify_tol,
        "method": "distributional",
        "path": sol.path,
        "calls": sol.calls + oracle.calls,
        "utility_loss": sol.utility_loss,
        "knot_every": chosen.knot_every,
        "envelope_steps": chosen.envelope_steps,
        "training_epsilon": chosen.exact_epsilon,
        "spread": [s.live_spread for s in sol.strategies],
        "mixed": [s.mixed for s in sol.strategies],
        "bid_max": setup.z_range[1],
        "n_sellers": setup.classes.n,
        "init": "truth",
        "reference": _described(called["reference"]),
        "progress": progress,
        **{k: r.options[k] for k in CONTEXT_KEYS},
    }
    # certified by the dynamic's rule, or on the interim path by the tables' exact epsilon
    # (the envelope step: the dynamic's grid game need not converge for them to be exact)
    rule = sol.stopped_by
    if rule != "utility_loss" and chosen.exact_epsilon <= vopt.verify_tol:
        rule = "tables_epsilon"
    converged = rule != "max_iter" and r.epsilon_relative <= vopt.verify_tol
    return dataclasses.replace(
        r, converged=converged, residual=sol.utility_loss, options=recorded, stopped_by=rule
    )


def _auto_choice(mechanism, population, called, options) -> tuple[str, str]:
    """``method="auto"``'s first pick and why (``METHODS``; docs/equilibrium.md, "Which
    method"): the pure method when the call is the pure method's (an option only it
    reads, or one both read with different meanings: grid, bid_grid, max_iter, eps_tol;
    an ``init``), when the sellers have data, or when the mechanism has no exact
    ``interim`` (the distributional method's sampled path costs ``markets`` x
    ``bid_grid`` outcomes per class and iteration); else the distributional one (exact
    utilities on the grid and the envelope step: cheap, and it holds all-pay contests,
    reserves and singular laws)."""
    solver = sorted(set(options) - set(_VERIFY_KEYS) - set(CONTEXT_KEYS))
    own = [k for k in solver if k in DIST_OPTIONS and k not in OPTIONS]
    if own and len(own) == len(solver):
        return "distributional", f"options only it reads ({', '.join(own)})"
    if solver:
        return "pure", f"options of the pure method given ({', '.join(solver)})"
    if not (isinstance(called["init"], str) and called["init"] == "truth"):
        return "pure", "an init given"
    context = {k: options[k] for k in options if k in CONTEXT_KEYS}
    probe = np.random.default_rng(0)  # the setup draws nothing; the caller's rng untouched
    setup = _setup(mechanism, population, called["n_sellers"], probe, context, called["bid_max"])
    if getattr(setup.mech, "needs_data", False) or interim_of(setup.mech) is None:
        return "pure", "no exact interim (the distributional sampled path is slow)"
    return "distributional", "an exact interim"


def _auto(mechanism, population, rng, called, progress, options) -> BNEResult:
    """``method="auto"`` (the default): the method ``_auto_choice`` picks.  When that is
    the distributional one for its exact interim and its tables' exact relative epsilon
    (``training_epsilon``) is above ``verify_tol``, the pure one runs too and the one
    with the smaller verified relative epsilon is returned.  ``options["method_reason"]``
    says which and why (the rule, and both numbers when both ran)."""
    first, why = _auto_choice(mechanism, population, called, options)
    run = {"pure": _auto_pure, "distributional": _auto_distributional}
    r = run[first](mechanism, population, rng, called, progress, options)
    exact_eps = r.options.get("training_epsilon", math.nan)
    if why != "an exact interim" or exact_eps <= r.options.get("verify_tol", 0.01):
        text = f"{first}: {why}; verified epsilon / utility {r.epsilon_relative:.3g}"
        return dataclasses.replace(r, options={**r.options, "method_reason": text})
    other = _auto_pure(mechanism, population, rng, called, progress, options)
    best, worse = (other, r) if other.epsilon_relative < r.epsilon_relative else (r, other)
    text = (
        f"{best.options['method']}: verified epsilon / utility {best.epsilon_relative:.3g} "
        f"against {worse.epsilon_relative:.3g} for {worse.options['method']} (both run: "
        "the distributional tables' exact epsilon is above verify_tol)"
    )
    return dataclasses.replace(best, options={**best.options, "method_reason": text})


def _auto_pure(mechanism, population, rng, called, progress, options) -> BNEResult:
    return bne(mechanism, population, rng, method="pure", progress=progress, **called, **options)


def _auto_distributional(mechanism, population, rng, called, progress, options) -> BNEResult:
    return _distributional(mechanism, population, rng, called, progress, options)
