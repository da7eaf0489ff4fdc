"""``bne``'s setup and options: the market's mechanism, classes and report range
(``_Setup``), bid functions given by the user, and the pure method's options with their
checks (``_Options``, ``OPTIONS``)."""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

import numpy as np

from ..distributions import tabulated_cdf
from ..errors import MarketSimError
from ..mechanisms.base import Mechanism, as_mechanism, mechanism_name
from ..parameters import check_int
from .equilibrium_game import (
    SENTINELS,
    BidFn,
    Classes,
    Oracle,
    as_classes,
)
from .equilibrium_result import BNEResult, ClassBid

#: market settings passed to the mechanism's construction (as ``audit`` does)
CONTEXT_KEYS = ("mu", "sigma", "gamma", "privacy")


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


def _as_bidfn(bid, z_range: tuple[float, float] | None = None) -> BidFn:
    """``bid`` as a checked bid function: one finite bid per cost and, with ``z_range``,
    every bid in the report range (``_check_in_range``).  A bid outside it would be
    clipped into it where the profile is played, so a check of the user's bids would
    verify other bids than theirs without a word (issue #48: first price, 3 x U[0, 1],
    every seller bidding c + 0.5, printed epsilon / u 0.76, that of the bids clipped at
    1; with ``bid_max=1.5`` it is 0.1875, the profile's own)."""
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
        if z_range is not None:
            _check_in_range(np.asarray(c, dtype=float), b, z_range)
        return b

    return fn


def _check_in_range(c: np.ndarray, b: np.ndarray, z_range: tuple[float, float]) -> None:
    """A clear error for a bid outside the report range ``z_range`` (above its top by
    more than 1e-9 of its width; below its bottom, which ``_setup`` puts 1e-6 of the
    width above the support's, by more than 2e-6: a bid of the support's bottom is
    fine): the first such cost and its bid."""
    lo, hi = z_range
    for out, side in ((b > hi + 1e-9 * (hi - lo), f"above the highest report {hi:g}: pass "
                                                   "bid_max= to widen the range"),
                      (b < lo - 2e-6 * (hi - lo), f"below the lowest report {lo:g}")):  # fmt: skip
        if np.any(out):
            i = np.flatnonzero(out.ravel())[0]
            raise MarketSimError(
                f"the bid function bids {b.ravel()[i]:.6g} at cost {c.ravel()[i]:.6g}, {side}"
            )


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
    eval_grid: int | None = None
    eval_refine: int | None = None
    eval_samples: int | None = None
    check_grid: int | None = None
    refine: int = 3
    knots: int = 6
    tilt: float = 0.0
    br_refine: int | None = None
    resample: bool | None = None
    exact: bool | None = None
    beliefs_rounds: int = 0
    beliefs_markets: int = 16384
    beliefs_epoch: int = 8
    beliefs_workers: int | None = None

    def checked(self) -> _Options:
        """The options, each checked (bad input: one line naming it)."""
        ints = dict(
            grid=3, bid_grid=3, samples=1, deviators=1, max_iter=1, eval_grid=1, check_grid=3,
            eval_refine=0, refine=0, knots=0, br_refine=0, verify_every=0, patience=0,
            beliefs_rounds=0, beliefs_markets=1, beliefs_epoch=1, beliefs_workers=1,
        )  # fmt: skip
        kw: dict = {
            k: check_int(k, getattr(self, k), least) if getattr(self, k) is not None else None
            for k, least in ints.items()
        }
        ev = self.eval_samples  # automatic (None): ``for_path``
        kw["eval_samples"] = None if ev is None else check_int("eval_samples", ev, 2)
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

    def for_path(
        self, path: str, n_classes: int = 1, sellers: int = 1, controlled: bool = False
    ) -> _Options:
        """The automatic settings left open (None) for the oracle's path and the number
        of classes: on the ``outcome`` path (one call per report vector, slow) a
        25-report grid and no evaluated refinement; else a 49-report grid, one round of
        evaluated refinement (three for several classes); a fresh sample each iteration
        (on the ``outcome`` path too since its opponents are nets: a fixed sample of
        1024 left Beta(1, 3)'s exact epsilon / u at 2.7%, fresh ones 0.15%); damping
        0.1 and 40 iterations (26 on the ``outcome`` path, with its own ``schedule``;
        0.05 and 100 for several classes, whose common lowest bid is a knife edge; 100 in
        a market of at least ``CROWDED`` ``sellers``, the largest class's count: there a
        deviator's outcome varies little from market to market and the damped iteration,
        not the sample's noise, is what limits the solve; ``CROWDED``'s comment); a
        verification every 10 iterations (none on the ``outcome`` path);
        ``eval_samples`` 4 x ``samples``, 2 x when the verification has a control
        variate (``controlled``: ``CONTROLLED_MARKETS``); the verification's ``eval_grid`` 33 and
        ``check_grid`` 129 (12 and 17 on the ``outcome`` path, whose search is its fresh
        markets' shared report grid: the bids at every evaluation cost are most of it,
        ``equilibrium_pure._verify``).  On the exact ``interim`` path: 401 reports, 6
        rounds, damping 0.01 and up to 1000 (cheap) iterations
        (docs/equilibrium.md)."""
        slow, many, crowded = path == "outcome", n_classes > 1, sellers >= CROWDED
        auto = dict(
            bid_grid=25 if slow else 49,
            br_refine=0 if slow else (3 if many else 1),
            resample=True,  # the outcome path too since its nets (issue #48)
            damping=0.05 if many else 0.1,
            # the outcome path's cheaper schedule (``schedule``) needs fewer iterations
            max_iter=26 if slow else (100 if many or crowded else 40),
            verify_every=0 if slow else 10,
            eval_refine=1 if slow else 3,  # each doubling re-evaluates every cost
            eval_samples=(CONTROLLED_MARKETS if controlled else 4) * self.samples,
            eval_grid=12 if slow else 33,
            check_grid=17 if slow else 129,
        )
        if path == "interim":  # exact utilities: reports are cheap, no sample
            auto.update(bid_grid=401, br_refine=6, resample=False, damping=0.01, max_iter=1000)
        return dataclasses.replace(
            self,
            **{k: v for k, v in auto.items() if getattr(self, k) is None},  # type: ignore[arg-type]
        )

    def schedule(self, path: str) -> _Schedule:
        """When the solve uses which share of the sample, step floor and candidate
        reports (``for_path``'s ``max_iter`` set).  Every path: the first half of the
        iterations on a quarter of the sample, then all of it, the step floored at
        ``damping``, every candidate report; a stopping rule after iteration
        (max_iter + 10) / 2; at ``max_iter`` the last eighth's iterates averaged.  The
        ``outcome`` path (one call per report vector; issue #48): the first 5/13 of the
        iterations (10 of 26) on a quarter of the sample with the step floored at 0.2
        (the start's transient decays twice as fast: first price, 4 sellers, the exact
        epsilon / u 0.32-1.11% -> 0.22-0.56% on U[0, 1], seeds 0-4), the first 8 of them
        trying the bid grid and the sentinels, and the current bids at the first only
        (``tries_current``: at an IC mechanism's truth the tie keeps the start; from the
        2nd to the 8th their utilities interpolated: those columns were a fifth of
        Beta(1, 3)'s solve calls, on its 68-cost grid, and the early responses move far
        from them; from the 9th on, ``current_from``, the jumps' log included, as
        before), the others on half
        of it (512: the damped and the tail averages cancel its noise) trying only the
        current bids, 5 sentinels and the live range's two ends (``best_response``:
        near the equilibrium the current bids are a dense set of candidates around the
        responses); a stopping rule from iteration 21/26 on (11 on the half sample);
        at ``max_iter`` the last 30% averaged (8 of 26; docs/equilibrium.md, "The
        solve", step 6)."""
        m = self.max_iter or 1
        if path != "outcome":
            return _Schedule(m // 2, 4, 1, self.damping or 0.0, self.bid_grid or 0, SENTINELS,
                             (m + 10) // 2 + 1, 7 * m // 8, 1)  # fmt: skip
        floor = max(self.damping or 0.0, _OUTCOME_EARLY_FLOOR)
        early = 5 * m // 13
        return _Schedule(early, 4, 2, floor, 2, 5, 21 * m // 26, 7 * m // 10, max(1, early - 1))

    def markets(self, oracle: Oracle, samples: int, classes: Classes) -> tuple[int, int]:
        """(markets, deviators per market): on the ``deviations`` path up to
        ``deviators`` sellers per market share one call (one per 8 sellers of the
        largest class: in small markets, one); on the other paths one deviator."""
        d = min(self.deviators, max(1, max(classes.counts) // 8))  # small markets: 1
        d = d if oracle.path == "deviations" else 1
        return max(1, -(-samples // d)), d


#: ``eval_samples`` per ``samples`` when the sampled verification has a control variate
#: (a black box that passed the rank probe, ``equilibrium_rank.ControlledOracle``; else
#: 4): for a rank box the box's and its rank interim's terms cancel market by market, so
#: markets add no accuracy, and they are what the box is asked for (one call per market
#: and report); the other half of the markets a box that fooled the probe would have
#: had, ``_until_certifiable`` adds while its epsilon is above ``verify_tol`` and two
#: halves disagree.  The benchmark's black box (first price, 4 sellers, U[0, 1], seeds 0
#: and 1): 11.9 s and 9.8 s -> 8.2 s and 7.1 s, the same epsilon to every digit.  The
#: price: a box that departs from its rank interim in a share q of the markets only is
#: missed when no drawn market is one of them, probability about exp(-M q) for M
#: markets (q = 1/1000, 1024 samples: 1.7% with 4096 markets, 13% with 2048)
CONTROLLED_MARKETS = 2


#: the solver's options and their defaults
OPTIONS = {f.name: f.default for f in dataclasses.fields(_Options)}


#: sellers from which a market is crowded (``_Options.for_path``: 100 iterations, not 40).
#: Built-in pay-as-bid on U[1, 5], seed 0, verified epsilon / u (an independent measure,
#: ``bne_reference.deviation_gains``): 100 sellers 2.0% (2.1%) in 40 iterations, 0.34%
#: (0.37%) stopped by the gain rule at 56, in 0.75 of the CPU time; 20 sellers 0.62%
#: (0.60%) -> 0.14% (0.11%), 0.8 of it; 16 sellers 0.73% (0.76%) -> 0.44% (0.03%), 0.84
#: of it.  First price (its own ``deviations``), 16 sellers: L-inf 0.0183 -> 0.0153 (1.3
#: times the CPU).  With 2 sellers on 4096 draws, where the sample's noise limits, 100
#: iterations left L-inf 0.0139 where 40 left 0.0040 (the gain rule fired on the quarter
#: sample's last iterates): small markets keep 40
CROWDED = 16


#: the ``outcome`` path's step floor in its early iterations (``_Options.schedule``):
#: first price, 4 sellers, seeds 0-4, exact epsilon / u on U[0, 1] 0.32-1.11% with 0.1,
#: 0.22-0.56% with 0.2, 0.5-16% with 0.3 (it oscillates)
_OUTCOME_EARLY_FLOOR = 0.2


@dataclass(frozen=True)
class _Schedule:
    """The solve's schedule (``_Options.schedule``): iterations 1..``early`` are early,
    the others late."""

    early: int  # the last early iteration
    early_share: int  # early iterations use 1/early_share of the sample (a prefix: a net)
    late_share: int  # late iterations use 1/late_share of it
    early_floor: float  # the step max(floor, 1/(it + 1)) in the early iterations
    late_bid_grid: int  # late: reports evenly on the live range (early: ``bid_grid``)
    late_sentinels: int  # late: coarse reports over the whole range (early: SENTINELS)
    first_stop: int  # the first iteration at which a stopping rule may fire (but at 1)
    tail_from: int  # at ``max_iter`` the iterates after this one are averaged
    current_from: int  # the first iteration whose candidates include the current bids

    def late(self, it: int) -> bool:
        return it > self.early

    def share(self, it: int) -> int:
        """The share of the sample iteration ``it`` uses (1: all of it)."""
        return self.late_share if self.late(it) else self.early_share

    def floor(self, it: int, damping: float) -> float:
        """The step's floor at iteration ``it``."""
        return damping if self.late(it) else self.early_floor

    def tries_current(self, it: int) -> bool:
        """Whether iteration ``it``'s candidates include the current bids: the first
        (the start: at an IC mechanism's truth every response ties with it, and the tie
        keeps it) and every one from ``current_from`` on."""
        return it == 1 or it >= self.current_from
