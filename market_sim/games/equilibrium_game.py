"""The sampled game behind ``market_sim.games.equilibrium``: seller classes, opponent samples,
a deviator's expected eps and payment at candidate reports, best responses, and the
verification (epsilon and bnelearn's metrics).  docs/equilibrium.md has the method.

A seller's utility is linear in its true cost, u(c, z) = T(z) - c E(z), with E(z), T(z)
its expected eps and payment when it reports z and the others play their classes' bid
functions: one evaluation of E and T at a vector of reports serves every cost.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np

from ..distributions import CostDistribution
from ..errors import MarketSimError
from ..mechanisms.base import Mechanism, as_outcome, checked_outcome_arrays, mechanism_name
from ..population import Population, as_population

BidFn = Callable[[np.ndarray], np.ndarray]
SENTINELS = 17  # coarse reports over the whole range, always tried
WIN_SHARE = 0.01  # a cost "wins" when it gets something at least this often
_TIE = 1e-9  # a candidate must beat the current bid by this share of the utility scale
_CHUNK = 250_000  # rows per call of a batched outcome
_PROBE = 16  # markets of the one probe whether a black box takes a (B, n) batch
_MEMOS = 4  # (sample, reports, class) whose loop columns are kept: a verification uses 3


# ---- the sellers ----------------------------------------------------------------------
@dataclass(frozen=True)
class Classes:
    """Seller classes as the solver sees them: a cost law and a count per class, and the
    class of each seller (class 0's sellers first, in order)."""

    laws: tuple[CostDistribution, ...]
    counts: tuple[int, ...]
    data: Population | None = None  # the population, when its sellers have data

    @property
    def n(self) -> int:
        return int(sum(self.counts))

    @property
    def group(self) -> np.ndarray:
        return np.repeat(np.arange(len(self.counts)), self.counts)

    @property
    def spec(self) -> str:
        if len(self.laws) == 1:
            return self.laws[0].spec
        return "+".join(f"{k}*{d.spec}" for d, k in zip(self.laws, self.counts, strict=True))


def as_classes(population, n_sellers=None) -> tuple[Classes, Population]:
    """The classes of a Population, a population spec, a list of ``(cost law, count)``
    pairs, or one cost law with ``n_sellers`` (``market_sim.population.as_population``),
    and the Population itself (kept in ``Classes.data`` when its sellers have data:
    the opponent samples then draw whole markets from it, data and all)."""
    pop = as_population(population, n_sellers)
    if pop.n_sellers < 2:
        raise MarketSimError(f"n_sellers must be an integer >= 2 (got {pop.n_sellers})")
    return Classes(tuple(pop.laws), tuple(pop.counts), pop if pop.has_data else None), pop


# ---- the opponents --------------------------------------------------------------------
class Sample:
    """``markets`` markets of n costs, each seller's from its class law: a scrambled
    Sobol sequence in n dimensions mapped through the quantile functions (``markets``
    rounded up to a power of two), so the opponents' costs are far more even than
    i.i.d. draws.  In market s the deviators of class g are ``deviators[g][s]`` (up
    to ``per_market`` of its sellers from a random one on); one seed per market
    (common random numbers for randomized mechanisms).  With ``placed`` the deviators'
    opponents always hold the same Sobol coordinates (``_deviators_last``).  For a
    population with data, i.i.d. whole markets of ``Population.sample`` instead, with
    their rows (``data``)."""

    def __init__(
        self,
        classes: Classes,
        markets: int,
        per_market: int,
        rng,
        tilt: float = 0.0,
        placed: bool = False,
    ):
        n = classes.n
        self.placed = placed
        k = max(0, math.ceil(math.log2(max(markets, 1))))
        self.data: list | None = None
        if classes.data is not None:  # whole markets from the population: costs and data
            self._from_population(classes, markets, per_market, rng)
            return
        if n <= 21201:
            from scipy.stats import qmc

            u = qmc.Sobol(d=n, scramble=True, seed=rng).random_base2(k)
        else:  # beyond scipy's Sobol directions
            u = rng.random((2**k, n))
        self.weights = np.ones(u.shape[0])
        if tilt > 1 and u.shape[0] >= 2:
            u, self.weights = _tilted(u, tilt)
        self.per_market = per_market
        group = classes.group
        M = u.shape[0]
        self.seeds = rng.integers(2**63, size=M)
        self.deviators = []
        for g in range(len(classes.laws)):
            idx = np.flatnonzero(group == g)
            d = min(per_market, idx.size)
            # a random first deviator per market (a rotation s mod n would line up with
            # the Sobol sequence's structure and bias the opponents' costs)
            first = rng.integers(idx.size, size=M)
            pos = (first[:, None] + np.arange(d)[None, :]) % idx.size
            self.deviators.append(idx[pos])  # (M, d)
            if placed:
                u[:, idx] = _deviators_last(u[:, idx], pos)
        self.costs = np.empty_like(u)
        for g, law in enumerate(classes.laws):
            cols = group == g
            lo, hi = law.support
            self.costs[:, cols] = np.clip(np.asarray(law.ppf(u[:, cols]), dtype=float), lo, hi)

    def _from_population(self, classes: Classes, markets: int, per_market: int, rng) -> None:
        """``markets`` i.i.d. markets of ``Population.sample`` (the copula between costs
        and data kept); ``data[s]`` market s's (X, y)."""
        drawn = [classes.data.sample(rng) for _ in range(markets)]  # type: ignore[union-attr]
        self.costs = np.array([m.costs for m in drawn], dtype=float)
        self.data = [m.data for m in drawn]
        self.weights = np.ones(markets)
        self.per_market = per_market
        self.seeds = rng.integers(2**63, size=markets)
        self.deviators = []
        for g in range(len(classes.laws)):
            idx = np.flatnonzero(classes.group == g)
            d = min(per_market, idx.size)
            first = rng.integers(idx.size, size=markets)
            self.deviators.append(idx[(first[:, None] + np.arange(d)[None, :]) % idx.size])

    def mechanism(self, mech, s: int):
        """The mechanism for market s, one object per market and kept: bound to its
        sellers' data when they have data, else a shallow copy, so that a mechanism
        which caches work for the last market it saw (the built-in offline family: the
        payment curves of its last market) keeps it for this market across the
        solver's calls (the search, its refinement rounds, ``measure``; issue #48: an
        IC mechanism verified in <= 2 s)."""
        bound = self.__dict__.setdefault("_bound", {})
        if (id(mech), s) not in bound:
            own = _twin(mech) if self.data is None else mech.with_data(*self.data[s])
            bound[id(mech), s] = own
        return bound[id(mech), s]

    @property
    def markets(self) -> int:
        return int(self.costs.shape[0])

    def prefix(self, share: int) -> Sample:
        """The first 1/``share`` of the markets (a prefix of a Sobol sequence of length
        a power of two is a balanced net itself): cheap early iterations."""
        m = max(1, self.markets // share)
        sub = object.__new__(Sample)
        sub.costs, sub.weights, sub.seeds = self.costs[:m], self.weights[:m], self.seeds[:m]
        sub.data = None if self.data is None else self.data[:m]
        sub.deviators = [d[:m] for d in self.deviators]
        sub.per_market = self.per_market
        sub.placed = self.placed
        return sub

    def mean(self, X: np.ndarray) -> np.ndarray:
        """The (importance-weighted) mean over the markets of a (markets, ...) array."""
        return np.tensordot(self.weights, X, axes=1) / self.weights.sum()


def _deviators_last(u: np.ndarray, pos: np.ndarray) -> np.ndarray:
    """One class's Sobol coordinates u (M, k) placed so that, in every market, its
    sellers who are not deviators get coordinates 0, 1, ... in the order of their seats
    and deviator j (``pos[:, j]``, a seat within the class) gets coordinate k - d + j.
    A deviator's own cost is never used (its report is the candidate), so each
    deviator's opponents are then always the same coordinates of the net, a projection
    of a (t, m, s)-net, while its seat stays random.  With the deviator's seat holding
    a random coordinate (before issue #48's black-box work) the opponents' points were
    a different three of the four coordinates in each market, no net: first price, 4
    sellers, the RMS error of a deviation's gain at 4096 markets 4.8e-4 against 8.9e-5
    with this placement (i.i.d. draws: 9.4e-4)."""
    M, k = u.shape
    d = pos.shape[1]
    key = np.tile(np.arange(k, dtype=float), (M, 1))
    key[np.arange(M)[:, None], pos] = k + np.arange(d)[None, :]
    seats = np.argsort(key, axis=1, kind="stable")  # seats in the order of coordinates
    out = np.empty_like(u)
    np.put_along_axis(out, seats, u, axis=1)
    return out


def _twin(mech):
    """A shallow copy of ``mech`` by its attributes (no ``__getstate__`` /
    ``__setstate__``, which may rebuild, e.g. an ONNX session per copy): the same
    objects under a new instance, whose own later attributes (a per-market cache) stay
    its own; ``mech`` itself when it has no ``__dict__``."""
    state = getattr(mech, "__dict__", None)
    if state is None:
        return mech
    try:
        twin = object.__new__(type(mech))
    except TypeError:
        return mech
    twin.__dict__.update(state)
    return twin


def _tilted(u: np.ndarray, a: float) -> tuple[np.ndarray, np.ndarray]:
    """Importance sampling towards high costs: every second market's quantiles are
    raised to the power 1/a (Beta(a, 1): all costs high), the defensive mixture
    q(u) = 1/2 + 1/2 prod_j a u_j^(a-1) of the two; weights 1/q(u).  Where a seller
    rarely wins (every rival's cost must be higher), the plain sample has few
    informative markets; the tilted half has many (every second market: the second half)."""
    u = u.copy()
    half = u.shape[0] // 2  # the second half of a Sobol sequence is a net too (odd rows are not)
    u[half:] = u[half:] ** (1.0 / a)
    with np.errstate(over="ignore", divide="ignore"):
        log_tilt = np.sum(math.log(a) + (a - 1) * np.log(np.maximum(u, 1e-300)), axis=1)
        w = 1.0 / (0.5 + 0.5 * np.exp(np.minimum(log_tilt, 700.0)))
    return u, w


def reports_of(sample: Sample, classes: Classes, bidfns: Sequence[BidFn]) -> np.ndarray:
    """Every seller's report b_g(c) in every sampled market: (markets, n)."""
    R = np.empty_like(sample.costs)
    group = classes.group
    for g, fn in enumerate(bidfns):
        cols = group == g
        R[:, cols] = fn(sample.costs[:, cols])
    return R


class Interim:
    """The opponents as laws, not draws (the ``interim`` path): each class's report law
    from its monotone piecewise-linear bid function and its cost law, exactly.  It
    stands where a ``Sample`` does, as one "market" of weight 1."""

    markets = 1
    per_market = 1
    weights = np.ones(1)

    def __init__(
        self,
        classes: Classes,
        costs: Sequence[np.ndarray],
        bids: Sequence[np.ndarray],
        cdfs: Sequence[Callable] | None = None,
    ):
        self.classes = classes
        self.costs = [np.asarray(c, dtype=float) for c in costs]
        self.bids = [np.asarray(b, dtype=float) for b in bids]
        self.cdfs = [law.cdf for law in classes.laws] if cdfs is None else list(cdfs)

    def prefix(self, share: int) -> Interim:
        return self

    def mean(self, X: np.ndarray) -> np.ndarray:
        return X[0]

    def below(self, Z: np.ndarray) -> np.ndarray:
        """(classes, len(Z)): per class, the probability that a seller's report is below
        z, a tie counted half: F(c_<(z)) + (F(c_<=(z)) - F(c_<(z))) / 2, with c_<(z) =
        sup{c : b(c) < z} and c_<=(z) = sup{c : b(c) <= z} of the interpolated bids."""
        out = np.empty((len(self.costs), Z.size))
        for h, (x, y, cdf) in enumerate(zip(self.costs, self.bids, self.cdfs, strict=True)):
            lo, hi = (np.asarray(cdf(_sup_cost(x, y, Z, side)), dtype=float)
                      for side in ("left", "right"))  # fmt: skip
            out[h] = np.clip(0.5 * (lo + hi), 0.0, 1.0)
        return out


def _sup_cost(x: np.ndarray, y: np.ndarray, Z: np.ndarray, side: str) -> np.ndarray:
    """sup{c : b(c) < z} (side "left") or sup{c : b(c) <= z} ("right") for the linear
    interpolation b of the non-decreasing bids y at the costs x."""
    i = np.searchsorted(y, Z, side=side)  # type: ignore[call-overload]  # bids below (at) z
    j = np.clip(i, 1, x.size - 1)
    y0, y1, x0, x1 = y[j - 1], y[j], x[j - 1], x[j]
    with np.errstate(divide="ignore", invalid="ignore"):
        c = np.where(y1 > y0, x0 + (Z - y0) / (y1 - y0) * (x1 - x0), x0)
    c = np.minimum(np.maximum(c, x0), x1)
    return np.where(i == 0, x[0], np.where(i == x.size, x[-1], c))


# ---- the mechanism, four ways -------------------------------------------------------
def is_batched(mech) -> bool:
    """A user's ``outcome`` takes a (B, n) batch of report vectors (``batched = True``)."""
    return bool(
        getattr(mech, "batched", False) or getattr(getattr(mech, "obj", None), "batched", False)
    )


def interim_of(mech) -> Callable | None:
    """The mechanism's ``interim`` (a deviator's exact expected eps and payment from the
    opponents' probabilities of reporting below it), or None; a duck-typed object's too."""
    for m in (mech, getattr(mech, "obj", None)):
        fn = getattr(m, "interim", None)
        if callable(fn):
            return fn
    return None


def has_vector_deviations(mech) -> bool:
    """The mechanism overrides ``deviations`` (vectorised over candidates)."""
    return type(mech).deviations is not Mechanism.deviations


@dataclass
class Oracle:
    """E and T of a deviator at candidate reports, per sampled market: exactly from the
    mechanism's ``interim`` when it has one and ``exact`` (one "market", an
    ``Interim``), through its own ``deviations`` when it overrides it, one batched
    ``outcome`` call when the mechanism says ``batched = True``, else a tight loop
    over ``outcome``."""

    mech: Mechanism
    exact: bool = False
    calls: int = 0  # report vectors evaluated (outcome rows or deviations entries)
    path: str = field(init=False)
    _memos: list = field(init=False, default_factory=list, repr=False)
    _rows_ok: bool | None = field(init=False, default=None, repr=False)  # takes (B, n)

    def __post_init__(self):
        if self.exact and interim_of(self.mech) is not None:
            self.path = "interim"
        elif has_vector_deviations(self.mech):
            self.path = "deviations"
        elif is_batched(self.mech):
            self.path = "batched"
        else:
            self.path = "outcome"

    @property
    def outcome_only(self) -> bool:
        """One ``outcome`` call per report vector (a user's black box): the opponents
        are nets (``Sample(placed=True)``) and the verification searches and measures on
        one fresh sample (``equilibrium_pure._verify``; issue #48)."""
        return self.path == "outcome"

    def eps_pay(self, sample, R: np.ndarray | None, g: int, Z: np.ndarray):
        """(markets, len(Z)) arrays: class g's deviators' mean eps and payment when one
        of them reports z and everyone else reports R[s] (``sample`` a Sample; on the
        interim path an Interim, R None, one row)."""
        Z = np.asarray(Z, dtype=float)
        if self.path == "interim":
            return self._interim(sample, g, Z)
        dev = sample.deviators[g]
        if self.path == "deviations" and getattr(self.mech, "randomized", False):
            self.calls += sample.markets * dev.shape[1] * Z.size
            return self._deviations(sample, R, dev, Z)
        if self.path == "deviations":  # a column is the same whatever else is asked
            return self._remembered(sample, R, g, Z)
        if self.path == "batched" and sample.data is None:
            self.calls += sample.markets * Z.size
            return self._batched(sample, R, dev[:, 0], Z)
        return self._remembered(sample, R, g, Z)  # one outcome call per report vector

    def deviators(self, sample, g: int) -> np.ndarray:
        """(markets, d): class g's deviators whose outcomes this oracle averages per
        market: all ``per_market`` of them on the ``deviations`` path, else the first."""
        dev = sample.deviators[g]
        return dev if self.path == "deviations" else dev[:, :1]

    def _remembered(self, sample, R: np.ndarray | None, g: int, Z: np.ndarray):
        """The loop over ``outcome`` (or, on the ``deviations`` path, the mechanism's
        ``deviations`` of a deterministic mechanism) at the reports of Z not yet
        evaluated against this very (sample, R, g), the others from memory: a report
        vector is evaluated once (the verification's denser costs and refinement rounds
        repeat reports; the columns are the same numbers, market by market, with the
        same seeds)."""
        dev = self.deviators(sample, g)
        dev = dev if self.path == "deviations" else dev[:, 0]
        per_column = sample.markets * (dev.shape[1] if dev.ndim == 2 else 1)
        evaluate = self._deviations if self.path == "deviations" else self._evaluate
        if not np.all(np.isfinite(Z)):  # NaN is no key: evaluated as it comes
            self.calls += per_column * Z.size
            return evaluate(sample, R, dev, Z)
        memo = self._memo_for(sample, R, g)
        wanted = Z.ravel().tolist()
        new = sorted({z for z in wanted if z not in memo})
        if new:
            self.calls += per_column * len(new)
            E, T = evaluate(sample, R, dev, np.array(new))
            memo.update({z: (E[:, k], T[:, k]) for k, z in enumerate(new)})
        if not wanted:
            return np.empty((sample.markets, 0)), np.empty((sample.markets, 0))
        E = np.stack([memo[z][0] for z in wanted], axis=1)
        T = np.stack([memo[z][1] for z in wanted], axis=1)
        return E, T

    def _evaluate(self, sample, R, dev, Z):
        """One batched ``outcome`` call per chunk of markets when the black box turned out
        to take a (B, n) batch (``_takes_batches``, probed once), else the loop."""
        if self._rows_ok is None:
            self._rows_ok = self._takes_batches(sample, R, dev, Z)
        if self._rows_ok:
            return self._batched(sample, R, dev, Z)
        return self._loop(sample, R, dev, Z)

    def _takes_batches(self, sample, R, dev, Z) -> bool:
        """Whether ``outcome`` of a (k, n) array of report vectors (the first k <= 16
        markets, deviators at the first reports) returns, row by row, exactly what k
        one-market calls return; never for a randomized mechanism, one with data per
        market, or one that fails, warns or differs in a single bit (then the loop)."""
        if getattr(self.mech, "randomized", False) or sample.data is not None:
            return False
        k = min(_PROBE, R.shape[0])
        X = R[:k].copy()
        X[np.arange(k), dev[:k]] = Z[np.arange(k) % Z.size]
        try:
            agrees = batch_agrees(self.mech, X)
        except Exception:  # a box written for one vector: any failure means "loop"
            return False
        self.calls += 2 * k
        return agrees

    def _memo_for(self, sample, R: np.ndarray | None, g: int) -> dict:
        """The evaluated columns for (sample, R, g), by identity (the solver never writes
        into a report matrix it has passed; the entry holds both, so no id is reused);
        the last ``_MEMOS`` of them kept."""
        for s, r, h, memo in self._memos:
            if s is sample and r is R and h == g:
                return memo
        memo = {}
        self._memos = [*self._memos[-(_MEMOS - 1) :], (sample, R, g, memo)]
        return memo

    def _interim(self, laws: Interim, g: int, Z: np.ndarray):
        counts = np.array(laws.classes.counts) - (np.arange(len(laws.classes.counts)) == g)
        self.calls += Z.size
        E, T = interim_of(self.mech)(Z, laws.below(Z), counts)  # type: ignore[misc]
        E, T = np.asarray(E, dtype=float), np.asarray(T, dtype=float)
        if E.shape != Z.shape or T.shape != Z.shape:
            raise MarketSimError(
                f"{mechanism_name(self.mech)}: interim returned eps of shape {E.shape} for "
                f"{Z.size} reports"
            )
        return E[None, :], T[None, :]

    def _deviations(self, sample, R, dev, Z):
        """``deviations`` per market; a generator each if the mechanism draws, else one."""
        M, randomized = R.shape[0], getattr(self.mech, "randomized", False)
        E, T = np.empty((M, Z.size)), np.empty((M, Z.size))
        cand = np.broadcast_to(Z, (dev.shape[1], Z.size))
        shared = None if randomized or M == 0 else np.random.default_rng(sample.seeds[0])
        for s in range(M):
            mech = sample.mechanism(self.mech, s)
            rng = np.random.default_rng(sample.seeds[s]) if randomized else shared
            out = mech.deviations(dev[s], cand, R[s], rng)
            E[s] = np.mean(out.eps, axis=0)
            T[s] = np.mean(out.payments, axis=0)
        return E, T

    def _batched(self, sample, R, dev, Z):
        M, K = R.shape[0], Z.size
        name = mechanism_name(self.mech)
        if getattr(self.mech, "randomized", False):  # one seed per market: common numbers
            E, T = np.empty((M, K)), np.empty((M, K))
            for s in range(M):
                X = np.repeat(R[s : s + 1], K, axis=0)
                X[:, dev[s]] = Z
                e, p = _batch_result(
                    self.mech.outcome(X, np.random.default_rng(sample.seeds[s])), X.shape, name
                )
                E[s], T[s] = e[:, dev[s]], p[:, dev[s]]
            return E, T
        rows = max(1, _CHUNK // max(K, 1))
        E, T = np.empty((M, K)), np.empty((M, K))
        for a in range(0, M, rows):
            b = min(M, a + rows)
            X = np.repeat(R[a:b], K, axis=0)
            who = np.repeat(dev[a:b], K)
            X[np.arange(X.shape[0]), who] = np.tile(Z, b - a)
            e, p = _batch_result(
                self.mech.outcome(X, np.random.default_rng(sample.seeds[a])), X.shape, name
            )
            E[a:b] = e[np.arange(X.shape[0]), who].reshape(b - a, K)
            T[a:b] = p[np.arange(X.shape[0]), who].reshape(b - a, K)
        return E, T

    def _loop(self, sample, R, dev, Z):
        M, K = R.shape[0], Z.size
        E, T = np.empty((M, K)), np.empty((M, K))
        fn = self.mech.outcome
        inner = getattr(self.mech, "obj", None)  # a duck-typed object: skip the adapter
        if inner is not None and getattr(self.mech, "takes_rng", False):
            fn = inner.outcome
        randomized = bool(getattr(self.mech, "randomized", False))
        shared = np.random.default_rng(0)
        zs = Z.tolist()
        first = True
        for s in range(M):
            if sample.data is not None:
                fn = sample.mechanism(self.mech, s).outcome
            r = R[s].copy()
            i = int(dev[s])
            seed = int(sample.seeds[s])
            Es, Ts = E[s], T[s]
            for k, z in enumerate(zs):
                r[i] = z
                res = fn(r, np.random.default_rng(seed) if randomized else shared)
                if first:  # checked once: shape, finite, eps >= 0
                    res = as_outcome(res, r.size, mechanism_name(self.mech))
                    first = False
                if isinstance(res, tuple):
                    Es[k], Ts[k] = res[0][i], res[1][i]
                else:
                    Es[k], Ts[k] = res.eps[i], res.payments[i]
        return E, T


def batch_agrees(mech, X: np.ndarray) -> bool:
    """Whether ``outcome`` of the (k, n) batch X returns, row by row, exactly what k
    one-vector calls return (each with another seed: a box that draws differs); a
    warning is raised as an error, and any error propagates (the caller's "no")."""
    name = mechanism_name(mech)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        e, p = _batch_result(mech.outcome(X, np.random.default_rng(0)), X.shape, name)
        rows = [
            as_outcome(mech.outcome(x, np.random.default_rng(j + 1)), x.size, name)
            for j, x in enumerate(X)
        ]
    return all(
        np.array_equal(e[j], np.asarray(o.eps, dtype=float))
        and np.array_equal(p[j], np.asarray(o.payments, dtype=float))
        for j, o in enumerate(rows)
    )


def _batch_result(res, shape, name):
    if isinstance(res, tuple):
        e, p = res[0], res[1]
    else:
        e, p = res.eps, res.payments
    e, p = np.asarray(e, dtype=float), np.asarray(p, dtype=float)
    if e.shape != shape or p.shape != shape:
        raise MarketSimError(
            f"{name}: batched = True, but outcome of a {shape} batch returned eps of shape "
            f"{e.shape}"
        )
    return checked_outcome_arrays(e, p, name, inf_eps=False)  # utilities mix markets


# ---- best responses ---------------------------------------------------------------------
def parabolic_peak(Z: np.ndarray, U: np.ndarray, k: np.ndarray) -> np.ndarray:
    """Per row, the vertex of the parabola through the best candidate k and its two
    neighbours (a sub-grid argmax), kept within the neighbours; k itself at an end."""
    rows = np.arange(U.shape[0])
    inner = (k > 0) & (k < Z.size - 1)
    k0, k2 = np.clip(k - 1, 0, Z.size - 1), np.clip(k + 1, 0, Z.size - 1)
    x0, x1, x2 = Z[k0], Z[k], Z[k2]
    y0, y1, y2 = U[rows, k0], U[rows, k], U[rows, k2]
    num = (x1 - x0) ** 2 * (y1 - y2) - (x1 - x2) ** 2 * (y1 - y0)
    den = (x1 - x0) * (y1 - y2) - (x1 - x2) * (y1 - y0)
    with np.errstate(divide="ignore", invalid="ignore"):
        v = x1 - 0.5 * num / den
    ok = inner & (den > 0) & np.isfinite(v)
    return np.where(ok, np.clip(v, x0, x2), x1)


@dataclass(frozen=True)
class Response:
    bids: np.ndarray  # the best responses at the grid costs
    z_top: float  # the lowest sentinel above every report that got anything
    gain: float  # ex-ante gain of the best responses over the current bids / utility
    z_live: float = math.inf  # the highest evaluated report that gets anything


def best_response(
    oracle: Oracle,
    sample: Sample | Interim,
    R: np.ndarray | None,
    g: int,
    costs: np.ndarray,
    current: np.ndarray,
    z_range: tuple[float, float],
    z_top: float,
    k: int,
    weights: np.ndarray,
    refine: int = 0,
    sentinels: int = SENTINELS,
    with_current: bool = True,
) -> Response:
    """Class g's best responses at ``costs`` among ``k`` reports on [z_lo, z_top], the
    ``sentinels`` coarse reports over the whole range and the current bids (any
    report, below the cost too), then ``refine`` rounds of evaluated local refinement
    (``refine_best``; with none, the parabola's vertex through the best and its
    neighbours); the current bid is kept when nothing beats it by more than 1e-9 of
    the utility scale.  Without ``with_current`` the current bids are not candidates
    and their utilities are interpolated linearly between the candidates'
    (``at_reports``; the ``outcome`` path's first early iterations,
    ``_Schedule.current_from``).  The top of the live range is on the lattice of
    ``SENTINELS`` whatever ``sentinels`` (5 of 17 are on it)."""
    z_lo, z_hi = z_range
    sent = np.linspace(z_lo, z_hi, SENTINELS)
    tried = sent if sentinels == SENTINELS else np.linspace(z_lo, z_hi, sentinels)
    listed = [np.linspace(z_lo, z_top, k), tried] + ([current] if with_current else [])
    Z = np.unique(np.concatenate(listed))
    E, T = oracle.eps_pay(sample, R, g, Z)
    Eb, Tb = sample.mean(E), sample.mean(T)
    U = Tb[None, :] - costs[:, None] * Eb[None, :]
    best = np.argmax(U, axis=1)
    rows = np.arange(costs.size)
    u_cur = at_reports(Z, U, current)
    scale = np.maximum(U.max(axis=1) - U.min(axis=1), 1e-300)
    if refine > 0:
        z_best, u_best = refine_best(oracle, sample, R, g, costs, Z, U, z_range, refine)
    else:
        z_best, u_best = parabolic_peak(Z, U, best), U[rows, best]
    keep = u_cur >= u_best - _TIE * scale
    br = np.where(keep, current, z_best)
    live = (Eb > 0) | (Tb != 0)
    top = z_hi
    if live.any():
        above = sent[sent > Z[np.flatnonzero(live)[-1]]]
        top = float(above[0]) if above.size else z_hi
    util = float(weights @ np.maximum(u_cur, 0.0))
    gain = float(weights @ (u_best - u_cur))
    # relative to u + gain (in [0, 1]): at a utility of 0 (pay-as-bid at the truth) a
    # ratio to u alone is absurd (issue #48)
    rel = gain / (util + gain) if util + gain > 0 else 0.0
    z_live = float(Z[np.flatnonzero(live)[-1]]) if live.any() else -math.inf
    return Response(br, top, rel, z_live)


def at_reports(Z: np.ndarray, U: np.ndarray, reports: np.ndarray) -> np.ndarray:
    """Per row i, U[i] (utilities at the sorted reports Z) at ``reports[i]``: exact where
    it is one of Z, else linearly interpolated between its neighbours in Z (the end
    value outside [Z[0], Z[-1]])."""
    if Z.size == 1:
        return U[:, 0].copy()
    j = np.clip(np.searchsorted(Z, reports), 1, Z.size - 1)
    i = np.arange(reports.size)
    z0, z1 = Z[j - 1], Z[j]
    t = np.clip((reports - z0) / (z1 - z0), 0.0, 1.0)
    return (1.0 - t) * U[i, j - 1] + t * U[i, j]


def refine_best(oracle, sample, R, g, costs, Z, U, z_range, rounds, starts: int = 1):
    """Per cost, the best report after ``rounds`` rounds of evaluated local refinement
    of the argmax of U over the reports Z: each round tries the parabola's vertex
    (first round) and the points half a bracket either side of the best so far, the
    bracket halving each round, all costs at once; only evaluated points are kept
    (a vertex through a kink, e.g. at a rival's lowest bid, can be far off).  With
    ``starts`` > 1 also from each cost's next best local maxima of U (``_local_peaks``),
    the best of all kept: a narrow peak between two reports can beat the argmax's
    (issue #48: all-pay-asym-u3-b52, c = 0.000214, 1.0e-5 of u found, 3.4e-5 missed)."""
    k = _local_peaks(U, starts)  # (costs, starts); column 0 the argmax
    n, s = k.shape
    rows = np.repeat(np.arange(n), s)
    z, u = _refined_from(oracle, sample, R, g, costs[rows], Z, U[rows], k.ravel(), z_range,
                         rounds)  # fmt: skip
    z, u = z.reshape(n, s), u.reshape(n, s)
    j = np.argmax(u, axis=1)  # ties: the argmax's refinement (column 0)
    r = np.arange(n)
    return z[r, j], u[r, j]


def _local_peaks(U: np.ndarray, starts: int) -> np.ndarray:
    """(rows, starts): each row's argmax, then its best other local maxima (a column at
    least its neighbours) by value; a row with fewer repeats its argmax."""
    k0 = np.argmax(U, axis=1)
    if starts <= 1 or U.shape[1] < 3:
        return k0[:, None]
    inner = (U[:, 1:-1] >= U[:, :-2]) & (U[:, 1:-1] >= U[:, 2:])
    peak = np.full(U.shape, -np.inf)
    peak[:, 1:-1] = np.where(inner, U[:, 1:-1], -np.inf)
    peak[np.arange(U.shape[0]), k0] = -np.inf
    m = min(starts - 1, U.shape[1] - 1)
    top = np.argpartition(-peak, m - 1, axis=1)[:, :m]
    top = np.where(np.isfinite(np.take_along_axis(peak, top, axis=1)), top, k0[:, None])
    return np.concatenate((k0[:, None], top), axis=1)


def _refined_from(oracle, sample, R, g, costs, Z, U, k, z_range, rounds):
    """``refine_best``'s refinement of each row's report Z[k] (one start per row)."""
    z_lo, z_hi = z_range
    rows = np.arange(costs.size)
    best_z, best_u = Z[k], U[rows, k]
    h = np.maximum(best_z - Z[np.maximum(k - 1, 0)], Z[np.minimum(k + 1, Z.size - 1)] - best_z)
    extra = parabolic_peak(Z, U, k)
    for _ in range(rounds):  # halve the bracket around the best so far
        h = h / 2
        pts = np.clip(np.stack((best_z - h, best_z + h, extra), axis=1), z_lo, z_hi)
        u3 = _utilities_at(oracle, sample, R, g, costs, pts)
        j = np.argmax(u3, axis=1)
        better = u3[rows, j] > best_u
        best_z = np.where(better, pts[rows, j], best_z)
        best_u = np.where(better, u3[rows, j], best_u)
        extra = best_z
    return best_z, best_u


def _utilities_at(oracle, sample, R, g, costs, pts: np.ndarray) -> np.ndarray:
    """(costs, k): the mean utility of cost i reporting pts[i, j].  On a sample the
    distinct reports are evaluated once as columns (each a pass over the markets) and
    every cost reads them; against exact report laws (an ``Interim``) each cost's own
    reports only (linear, not costs x distinct reports: the exact verification's
    2400 costs; issue #48)."""
    if isinstance(sample, Interim):
        E, T = oracle.eps_pay(sample, R, g, pts.ravel())
        return (T[0] - np.repeat(costs, pts.shape[1]) * E[0]).reshape(pts.shape)
    P = np.unique(pts)
    E2, T2 = oracle.eps_pay(sample, R, g, P)
    U2 = sample.mean(T2)[None, :] - costs[:, None] * sample.mean(E2)[None, :]
    return np.take_along_axis(U2, np.searchsorted(P, pts), axis=1)


#: a jump of a bid function (``jump_cells``): a rise over one or two grid cells of at
#: least this share of the bids' range, with a slope this many times its neighbours'
JUMP_SHARE = 0.1
JUMP_SLOPE = 4.0


def jump_cells(
    costs: np.ndarray, y: np.ndarray, span: float | None = None
) -> list[tuple[int, int]]:
    """The jumps of bids ``y`` at sorted ``costs``: (i, j) with j = i + 1 or i + 2 where
    y rises by at least ``JUMP_SHARE`` of its range (or of ``span``: a whole table's
    range when y is a part of it) with a slope at least ``JUMP_SLOPE``
    times the larger of the neighbouring cells' (the rise split over two cells: a grid
    cost whose damped bid averages the two branches).  A smooth function, even a steep
    one like sqrt(c) at 0, changes slope gradually; a jump does not (pay-as-bid's cheapest
    sellers: the bids jump from about 0.05 to 0.2 within one cell; issue #48)."""
    x, y = np.asarray(costs, dtype=float), np.asarray(y, dtype=float)
    if y.size < 4:
        return []
    span = float(y.max() - y.min()) if span is None else float(span)
    dx = np.maximum(np.diff(x), 1e-300)
    slope = np.diff(y) / dx
    found: list[tuple[int, int]] = []
    for s in (1, 2):
        for i in range(y.size - s):
            j = i + s
            rise = y[j] - y[i]
            left = slope[i - 1] if i > 0 else 0.0
            right = slope[j] if j < slope.size else 0.0
            steep = rise / (x[j] - x[i]) > JUMP_SLOPE * max(left, right, 0.0)
            taken = any(a <= i < b or a < j <= b for a, b in found)
            if rise >= JUMP_SHARE * span and rise > 0 and steep and not taken:
                found.append((i, j))
    return sorted(found)


def sharpen_jump(oracle, sample, R, g, costs, bids, cell, z_range, rounds: int = 4):
    """Class g's table (costs, bids) with the jump in ``cell`` (i, j) made a step at the
    cost c* where its two branches pay the same (issue #48): each branch continued by the
    line through its two grid points next to the jump, z_A(c) and z_B(c), and c* the cost
    where the two reports' utilities cross, T(z_A) - c E(z_A) = T(z_B) - c E(z_B)
    (a utility is linear in the cost), c* = (T_A - T_B) / (E_A - E_B), solved again at
    the branches' reports at c* (``rounds`` times).  The costs between the two grid
    points next to c* are replaced by c* -+ a 10^-9 of the support: a seller of a cost
    inside the cell bids its branch, not a linear blend of the two (a report in the gap,
    which no one's utility prefers).  None when the reports do not part (E_A <= E_B)."""
    i, j = cell
    n = costs.size
    line_a = _line(costs, bids, max(i - 1, 0), i)
    line_b = _line(costs, bids, j, min(j + 1, n - 1))
    lo_c, hi_c = costs[max(i - 1, 0)], costs[min(j + 1, n - 1)]
    c = 0.5 * (costs[i] + costs[j])
    for _ in range(rounds):
        Z = np.clip([line_a(c), line_b(c)], *z_range)
        E, T = oracle.eps_pay(sample, R, g, Z)
        Eb, Tb = sample.mean(E), sample.mean(T)
        if not Eb[0] > Eb[1]:
            return None
        c = float(np.clip((Tb[0] - Tb[1]) / (Eb[0] - Eb[1]), lo_c, hi_c))
    h = 1e-9 * max(costs[-1] - costs[0], 1e-300)
    za, zb = np.clip([line_a(c), line_b(c)], *z_range)
    left = (np.arange(n) <= i) & (costs < c - h)
    right = (np.arange(n) >= j) & (costs > c + h)
    x = np.concatenate((costs[left], [c - h, c + h], costs[right]))
    y = np.concatenate((bids[left], [za, zb], bids[right]))
    return x, np.maximum.accumulate(y), c


def _line(x, y, a: int, b: int) -> Callable[[float], float]:
    """The line through (x[a], y[a]) and (x[b], y[b]) (constant y[a] when a == b)."""
    slope = 0.0 if a == b else (y[b] - y[a]) / (x[b] - x[a])
    return lambda c: float(y[a] + slope * (c - x[a]))


def prior_weights(law: CostDistribution, costs: np.ndarray) -> np.ndarray:
    """Weights of sorted ``costs`` for expectations under the law: the probability of
    each cost's cell (midpoints to its neighbours, the support's ends outside; exact
    where the density is singular, e.g. F(c) = sqrt(c) at 0), normalised."""
    lo, hi = law.support
    edges = np.concatenate(([lo], 0.5 * (costs[1:] + costs[:-1]), [hi]))
    w = np.diff(np.asarray(law.cdf(edges), dtype=float))
    s = w.sum()
    return w / s if s > 0 else np.full(costs.size, 1.0 / costs.size)


# ---- verification -------------------------------------------------------------------
@dataclass(frozen=True)
class EpsilonResult:
    """How far one class's bid function is from a best response (docs/equilibrium.md):
    ``epsilon`` (ε̂, the largest mean gain of a deviation over the evaluation costs, on
    fresh opponents) and its 95% ``epsilon_ci``; ``epsilon_relative`` (ε̂ over the
    ex-ante utility ``utility``); ``loss`` (ℓ̂, the prior-weighted mean of the gains)
    and ``relative_loss`` (L̂ = 1 - u / (u + ℓ̂)); per cost of ``eval_costs``: ``gains``,
    the deviations ``best_reports``, ``utilities`` at the bid, ``win_rates`` (share
    of fresh markets where the bid gets anything); ``distances`` to a reference bid
    function when one was given (L2 and L∞, over all costs and over the costs that
    win at least 1% of the time)."""

    epsilon: float
    epsilon_ci: tuple[float, float]
    epsilon_relative: float
    eval_costs: np.ndarray = field(repr=False)
    gains: np.ndarray = field(repr=False)
    best_reports: np.ndarray = field(repr=False)
    utilities: np.ndarray = field(repr=False)
    eval_markets: int = 0
    loss: float = 0.0
    relative_loss: float = 0.0
    utility: float = 0.0
    win_rates: np.ndarray = field(default_factory=lambda: np.zeros(0), repr=False)
    distances: dict = field(default_factory=dict)
    loss_ci: tuple[float, float] = (0.0, 0.0)
    relative_loss_ci: tuple[float, float] = (0.0, 0.0)
    eval_cells: int = 0  # the evaluation density used (cells; ``eval_costs_for``)
    agreed: bool = False  # it agreed with the next coarser density
    #: ε̂ on the first half of the fresh markets alone (a prefix of the net, itself a net):
    #: the next coarser density of opponents (``equilibrium_pure._until_certifiable``)
    epsilon_half: float = math.nan
    #: "exact" (searched and measured against the bids' exact report laws, one "market":
    #: the CI is the point) or "sampled" (on fresh markets; ``equilibrium_pure._verify``)
    verification: str = "sampled"

    def metrics(self) -> dict:
        """The scalar metrics (for summaries and tables)."""
        return {
            "epsilon": self.epsilon,
            "epsilon_ci": list(self.epsilon_ci),
            "epsilon_relative": self.epsilon_relative,
            "loss": self.loss,
            "relative_loss": self.relative_loss,
            "loss_ci": list(self.loss_ci),
            "relative_loss_ci": list(self.relative_loss_ci),
            "utility": self.utility,
            "eval_cells": self.eval_cells,
            "eval_density_agreed": self.agreed,
            "eval_markets": self.eval_markets,
            "verification": self.verification,
            **self.distances,
        }


def eval_costs_for(
    law: CostDistribution, c_top: float, cells: int, thin: bool = False
) -> np.ndarray:
    """The evaluation costs, every one up to the support's top: the centres of ``cells``
    cells of the whole support, of ``cells`` cells of [low, c_top] (where reports get
    anything) and of ``cells`` cells of equal probability under the law (a law whose
    density is singular at an end has its mass there), and costs dense at both ends of
    [low, c_top], where a seller's utility is small and a gain is easily missed:
    low and c_top themselves, low + w 2^-j and c_top - w 2^-j, w = c_top - low, j = 2..8
    (issue #48: a gain rising towards the cheapest cost peaks at low itself).  With
    ``thin`` (the ``outcome`` path, where each cost's bid is a report column of calls)
    the three families' costs closer than a quarter of a whole cell to one kept are
    dropped (with c_top just under the top, the whole and the focused centres nearly
    coincide: Beta(1, 3), 165 costs -> 114); the ends are all kept."""
    lo, hi = law.support
    top = min(c_top, hi)
    whole = np.linspace(lo, hi, cells + 1)
    focus = np.linspace(lo, top, cells + 1)
    q = (np.arange(cells) + 0.5) / cells
    by_mass = np.clip(np.asarray(law.ppf(q * float(law.cdf(top))), dtype=float), lo, top)
    ends = (top - lo) * 2.0 ** -np.arange(2, 9)
    grids = np.concatenate(
        (0.5 * (whole[1:] + whole[:-1]), 0.5 * (focus[1:] + focus[:-1]), by_mass)
    )
    grids = np.unique(grids[np.isfinite(grids)])
    if thin:
        grids = _spaced(grids, (hi - lo) / (4 * cells))
    mids = np.concatenate((grids, [lo, top], lo + ends, top - ends))
    return np.unique(mids[np.isfinite(mids)])


def _spaced(x: np.ndarray, gap: float) -> np.ndarray:
    """The sorted ``x`` without the points closer than ``gap`` to the last one kept."""
    kept = [x[0]] if x.size else []
    for v in x[1:].tolist():
        if v - kept[-1] >= gap:
            kept.append(v)
    return np.asarray(kept, dtype=float)


def search_reports(
    oracle, sample, R, g, costs, bids, z_range, z_top, dense, refine, more=(), starts=1
) -> np.ndarray:
    """Each cost's best report on the search sample: the argmax over ``dense`` reports on
    the whole range [z_lo, z_hi] (below the cost too), ``dense`` more on [z_lo, z_top],
    the bids and the reports ``more``, then ``refine`` rounds of local refinement (the
    parabola's vertex and the midpoints to both neighbours of the best so far, all costs
    at once) from the argmax and, with ``starts`` > 1, from the next best local maxima
    (``refine_best``)."""
    z_lo, z_hi = z_range
    grid = (np.linspace(z_lo, z_hi, dense), np.linspace(z_lo, z_top, dense), bids)
    Z = np.unique(np.concatenate((*grid, np.clip(np.asarray(more, dtype=float), z_lo, z_hi))))
    E, T = oracle.eps_pay(sample, R, g, Z)
    U = sample.mean(T)[None, :] - costs[:, None] * sample.mean(E)[None, :]
    return refine_best(oracle, sample, R, g, costs, Z, U, z_range, refine, starts)[0]


def interim_epsilon(oracle, laws: Interim, g, law, costs, bids, z_range, z_top, opt) -> float:
    """On the ``interim`` path, class g's exact largest gain of a deviation at ``costs``
    over the ex-ante utility (prior-weighted at those costs): the verification's search
    (every report of the range, refined) with exact utilities instead of two samples."""
    z_star = search_reports(
        oracle, laws, None, g, costs, bids, z_range, z_top, opt.check_grid, opt.refine
    )
    E, T = oracle.eps_pay(laws, None, g, np.concatenate((z_star, bids)))
    U = T[0] - np.tile(costs, 2) * E[0]
    util = float(prior_weights(law, costs) @ np.maximum(U[costs.size :], 0.0))
    eps = float(np.max(U[: costs.size] - U[costs.size :]))
    return eps / util if util > 0 else (0.0 if eps <= 0 else math.inf)


def measure(
    oracle, fresh, R, g, law, costs, bids, z_star, reference: BidFn | None, ref_wins=None,
    own_wins=None,
) -> EpsilonResult:  # fmt: skip
    """The gains of the deviations ``z_star`` over the bids, re-measured on the fresh
    sample, and the metrics (docs/equilibrium.md); the distances to ``reference`` on
    the costs where the reference wins >= 1% (``ref_wins``: its win rates at ``costs``,
    against the reference profile; without them the bids' own: ``own_wins`` when the
    oracle's E is no outcome, a control variate's, else E > 0 here)."""
    n_c = costs.size
    E, T = oracle.eps_pay(fresh, R, g, np.concatenate((z_star, bids)))
    U = T - np.tile(costs, 2)[None, :] * E
    gains = U[:, :n_c] - U[:, n_c:]  # per fresh market and cost
    mean_gain = fresh.mean(gains)
    i = int(np.argmax(mean_gain))
    eps = max(0.0, float(mean_gain[i]))
    M = gains.shape[0]
    half = _t_half(fresh, gains[:, i], float(mean_gain[i]))  # at the maximising cost
    ci = (max(0.0, float(mean_gain[i]) - half), max(0.0, float(mean_gain[i]) + half))
    util = fresh.mean(U[:, n_c:])
    wins = fresh.mean((E[:, n_c:] > 0).astype(float)) if own_wins is None else own_wins
    w = prior_weights(law, costs)
    u = float(w @ util)
    loss = float(w @ np.maximum(mean_gain, 0.0))  # ℓ̂: prior-weighted interim loss
    rel_loss = 1.0 - u / (u + loss) if u + loss > 0 else 0.0  # L̂
    # ℓ̂'s CI: per fresh market the prior-weighted gain (unclipped: its mean is w @ gain)
    per_market = gains @ w
    half_l = _t_half(fresh, per_market, float(w @ mean_gain))
    loss_ci = (max(0.0, loss - half_l), loss + half_l)
    rel_ci = tuple(1.0 - u / (u + x) if u + x > 0 else 0.0 for x in loss_ci)
    rel = eps / u if u > 0 else (0.0 if eps == 0 else math.inf)
    h = max(1, M // 2)  # the first half of the markets: the next coarser net
    eps_half = max(0.0, float(np.max(fresh.weights[:h] @ gains[:h] / fresh.weights[:h].sum())))
    w_ref = wins if ref_wins is None else ref_wins
    dist = distances(law, costs, bids, w_ref, reference) if reference is not None else {}
    return EpsilonResult(
        eps, ci, rel, costs, mean_gain, z_star, util, M, loss, rel_loss, u, wins, dist,
        loss_ci, (float(rel_ci[0]), float(rel_ci[1])), epsilon_half=eps_half,
    )  # fmt: skip


def _t_half(sample: Sample, x: np.ndarray, mean: float) -> float:
    """The half width of the 95% t interval of the (self-normalised, weighted) mean of
    the per-market values x."""
    from scipy import stats

    M = x.size
    w = sample.weights / sample.weights.sum()
    se = float(np.sqrt(np.sum(w**2 * (x - mean) ** 2) * M / max(M - 1, 1)))
    return float(stats.t.ppf(0.975, max(M - 1, 1)) * se)


def distances(law, costs, bids, wins, reference: BidFn) -> dict:
    """L2 (prior-weighted) and L∞ distances of the bids to ``reference`` at the
    evaluation costs, over all of them and over those whose ``wins`` (the reference's
    win rates, when it is known for every class) are >= 1%."""
    diff = np.abs(bids - np.asarray(reference(costs), dtype=float))
    w = prior_weights(law, costs)
    active = wins >= WIN_SHARE
    out = {
        "l2": float(np.sqrt(w @ diff**2)),
        "linf": float(diff.max()),
        "l2_active": math.nan,
        "linf_active": math.nan,
        "active_top": float(costs[active].max()) if active.any() else math.nan,
    }
    if active.any():
        wa = w[active] / w[active].sum() if w[active].sum() > 0 else None
        out["l2_active"] = float(
            np.sqrt((wa if wa is not None else 1.0 / active.sum()) @ diff[active] ** 2)
        )
        out["linf_active"] = float(diff[active].max())
    return out
