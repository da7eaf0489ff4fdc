"""A black box's rank interim: exact utilities for a mechanism that says only ``outcome``.

The distributional method is exact, and holds all-pay contests, reserves and singular
laws, when the mechanism has an ``interim`` (``equilibrium_distributional``; its
envelope step and exact table search need one).  A user's black box has only
``outcome``, and the sampled path is noisy and slow: an all-pay contest written that
way, 4 x U[0, 1], was solved by neither method (issue #48: the pure one L-infinity 0.35,
verified epsilon / u 13.5; the distributional sampled path L-infinity 0.017, exact
relative epsilon 17%, in 35 s).

Many mechanisms are **rank mechanisms**: a seller's eps and payment depend on its own
report and on *how many* of the others report below it, not on their values or their
order (first price and k-unit pay-as-bid, with or without a reserve; all-pay contests).
For those, with m opponents and E_k(z), T_k(z) the deviator's eps and payment when it
reports z and exactly k of them are below,

    E(z | below, counts) = sum_k P(k of the opponents below z) E_k(z),          (R1)

the same for T, where per class h ``counts[h]`` opponents are each below z with
probability ``below[h]`` (a Poisson-binomial law; a tie counted half, as ``interim``
expects): the mechanism's exact ``interim``, built from m + 1 ``outcome`` calls per
report (the k below at evenly spaced reports under z, the others above it, the deviator
first).  Nothing of a particular mechanism is assumed but that property.

**The probe** (``rank_interim``) decides whether a black box has it before (R1) is used:
on ``PROBE_MARKETS`` random markets per kind (reports even on the report range, and
the population's costs as reports; the deviator at a random position), the deviator's
outcome must equal (R1)'s E_k, T_k at its own k, and stay the same when the others'
reports are redrawn on their own side of the deviator's (values changed, ranks kept)
and their positions shuffled, and when the mechanism is given another generator (a
lottery draws).  Any difference beyond rounding, a failure or a warning: no rank
interim (None).  A probe is a test, not a proof: a box whose outcome depends on the
others' values only where random reports seldom fall can pass it.  So the rank interim
is used to *solve* only; the verification asks the black box itself, on fresh sampled
markets (``equilibrium.bne``, ``method="distributional"``): a wrong interim shows as
gains there and the result is not certified.
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass, field
from typing import ClassVar

import numpy as np

from ..mechanisms.base import Mechanism, as_outcome, checked_outcome_arrays, mechanism_name
from ..mechanisms.first_price import below_count_pmf
from .equilibrium_game import Classes, Interim, Oracle, _batch_result, batch_agrees, is_batched

__all__ = ["PROBE_MARKETS", "RankInterim", "RankSurrogate", "rank_interim"]

#: random markets per kind of report the probe checks (two kinds: even and the costs)
PROBE_MARKETS = 256
#: the probe's tolerance on eps and payments, relative to the larger of 1 and the value
_PROBE_TOL = 1e-9
#: the largest number of sellers a rank interim is built for (m + 1 outcomes a report)
MAX_SELLERS = 256
#: reports of a one-vector box's table (``RankInterim``)
TABLE_POINTS = 4097
_RECENT = 8  # arrays of reports remembered by ``RankInterim.by_rank``
_BATCH_PROBE = 16  # markets of the probe whether a box takes a (B, n) batch
_CHUNK = 16  # markets the rank probe checks at a time


@dataclass
class RankInterim:
    """(R1) for a rank mechanism: ``interim(z, below, counts)`` from the black box's
    ``outcome`` with exactly k of the m = n - 1 opponents below z, k = 0..m.  A box that
    takes a (B, n) batch is asked at every report (each report's m + 1 outcomes once,
    remembered by value): exact.  A one-vector box (a loop of calls) is asked at
    ``TABLE_POINTS`` reports evenly on the range and read linearly in between: exact
    where eps is constant and the payment linear in the report between two of them
    (first price, all-pay), within one cell of a jump (a reserve)."""

    mech: object
    n: int
    z_range: tuple[float, float]
    batched: bool = False  # the box takes a (B, n) batch
    calls: int = 0  # report vectors evaluated
    _known: tuple = field(init=False, repr=False)  # (Z sorted, E_k, T_k) asked so far
    _table: tuple | None = field(default=None, repr=False)  # one-vector box: (Z, E, T)
    _recent: list = field(default_factory=list, repr=False)  # the last arrays asked

    def __post_init__(self):
        self._known = (np.empty(0), np.empty((0, self.n)), np.empty((0, self.n)))

    def __call__(self, z, below, counts):
        z = np.asarray(z, dtype=float)
        below = np.atleast_2d(np.asarray(below, dtype=float))
        pmf = below_count_pmf(below, counts)  # (K, m + 1)
        if pmf.shape[1] != self.n:
            raise ValueError(f"counts sum to {pmf.shape[1] - 1}, the box has {self.n - 1} others")
        E, T = self.by_rank(z.ravel())
        return (pmf * E).sum(axis=1).reshape(z.shape), (pmf * T).sum(axis=1).reshape(z.shape)

    def by_rank(self, z: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(len(z), m + 1) arrays: E_k(z) and T_k(z), the deviator's eps and payment with
        exactly k opponents below (the solver asks the same reports again and again: the
        last ``_RECENT`` arrays are kept)."""
        key = z.tobytes()
        for k, E, T in self._recent:
            if k == key:
                return E, T
        E, T = self.exact(z) if self.batched else self._read(z)
        self._recent = [*self._recent[-(_RECENT - 1) :], (key, E, T)]
        return E, T

    def exact(self, z: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """E_k(z), T_k(z) asked of the box at these very reports (each report once: the
        known ones kept sorted)."""
        Zk, Ek, Tk = self._known
        i = np.minimum(np.searchsorted(Zk, z), max(Zk.size - 1, 0))
        missing = ~(Zk[i] == z) if Zk.size else np.ones(z.shape, dtype=bool)
        if np.any(missing):
            new = np.unique(z[missing])
            X = ranked_markets(new, self.n, self.z_range)  # (len(new), m + 1, n)
            self.calls += X.shape[0] * self.n
            e, p = outcomes(
                self.mech, X.reshape(-1, self.n), np.random.default_rng(0), self.batched
            )
            Zk = np.concatenate([Zk, new])
            order = np.argsort(Zk, kind="stable")
            Ek = np.concatenate([Ek, e[:, 0].reshape(new.size, self.n)])[order]
            Tk = np.concatenate([Tk, p[:, 0].reshape(new.size, self.n)])[order]
            self._known = (Zk := Zk[order], Ek, Tk)
            i = np.searchsorted(Zk, z)
        return Ek[i], Tk[i]

    def at_rank(self, z: np.ndarray, k: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """E_k(z), T_k(z) at each report's own k (``RankSurrogate.outcome``), without
        the (len(z), m + 1) arrays of ``by_rank``."""
        if self.batched:
            E, T = self.exact(z)
            rows = np.arange(z.size)
            return E[rows, k], T[rows, k]
        return self._read(z, k)

    def _read(self, z: np.ndarray, k: np.ndarray | None = None):
        """A one-vector box: the table's values, linear between its reports (every k, or
        each report's own k)."""
        if self._table is None:
            Z = np.linspace(*self.z_range, TABLE_POINTS)
            self._table = (Z, *self.exact(Z))
        Z, E, T = self._table
        i = np.clip(np.searchsorted(Z, z, side="right") - 1, 0, Z.size - 2)
        w = np.clip((z - Z[i]) / (Z[i + 1] - Z[i]), 0.0, 1.0)
        if k is None:
            w = w[:, None]
            return E[i] * (1 - w) + E[i + 1] * w, T[i] * (1 - w) + T[i + 1] * w
        return E[i, k] * (1 - w) + E[i + 1, k] * w, T[i, k] * (1 - w) + T[i + 1, k] * w


class RankSurrogate(Mechanism):
    """The black box with its rank interim attached, for the solve and the exact check
    (``interim``), and an ``outcome`` read off the same table: every seller's E_k(z),
    T_k(z) at its own report z and its own k (the others strictly below it), batched:
    the box's outcome when the box is a rank mechanism, at the cost of vector operations
    (the exact check's win rates on 1024 markets took 2.2 M one-vector calls).  A box
    that takes a batch is asked itself, in one call: its table would ask it n times per
    report (a posted price, 16 sellers: the exact check's win rates took 14.9 s on its
    table, 0.6 s on the box)."""

    batched: ClassVar[bool] = True

    def __init__(self, box, interim: RankInterim):
        self.box, self.interim = box, interim

    def outcome(self, reports, rng=None):
        R = np.atleast_2d(np.asarray(reports, dtype=float))
        if self.interim.batched:  # deterministic (the probe refuses a randomized box)
            eps, pay = outcomes(self.box, R, np.random.default_rng(0), True)
        else:
            k = (R[:, None, :] < R[:, :, None]).sum(axis=2)  # (B, n): others below each
            eps, pay = self.interim.at_rank(R.ravel(), k.ravel())
            eps, pay = eps.reshape(R.shape), pay.reshape(R.shape)
        return (eps[0], pay[0]) if np.ndim(reports) == 1 else (eps, pay)


@dataclass
class ControlledOracle:
    """The sampled verification of a black box that passed the rank probe, with its rank
    interim as a control variate: per market, E = E_box - E_rank + E_exact (T likewise),
    E_box the box's deviator mean on the market (``box``, the verification's own oracle),
    E_rank the same deviators' outcome on the same market read off the rank interim
    (each deviator's k: the others strictly below its report), E_exact the rank
    interim's exact E against the bids' report laws (``laws``, an ``Interim``).  The
    mean over markets is unbiased for the box's expected E whatever the box is (the
    middle term's mean is the last one's); for a box that is the rank mechanism the
    probe says, the first two cancel market by market and the verification is exact,
    no noise, where the sampled one's maximum over reports picked noise (issue #48: a
    rank box at 16 sellers printed 7.6% of u for exact tables).  A box that fooled the
    probe keeps what its first two terms differ by: its gains, measured with the noise
    of that difference only.  ``raw`` is the box's oracle (win rates: E > 0 is the
    box's)."""

    raw: Oracle  # the box's
    interim: RankInterim
    laws: Interim  # the bids' exact report laws

    @property
    def path(self) -> str:
        return self.raw.path

    @property
    def outcome_only(self) -> bool:
        return self.raw.outcome_only

    @property
    def mech(self):
        return self.raw.mech

    @property
    def calls(self) -> int:
        return self.raw.calls

    @calls.setter
    def calls(self, value: int) -> None:
        self.raw.calls = value

    def eps_pay(self, sample, R, g: int, Z):
        Z = np.asarray(Z, dtype=float)
        Eb, Tb = self.raw.eps_pay(sample, R, g, Z)
        Er, Tr = self._rank_means(R, self.raw.deviators(sample, g), Z)
        own = np.arange(len(self.laws.classes.counts)) == g
        counts = np.asarray(self.laws.classes.counts) - own
        Ex, Tx = self.interim(Z, self.laws.below(Z), counts)
        return Eb - Er + Ex[None, :], Tb - Tr + Tx[None, :]

    def _rank_means(self, R: np.ndarray, dev: np.ndarray, Z: np.ndarray):
        """(markets, len(Z)): the deviators' mean E_k(z), T_k(z) on each market, k the
        others below z (the deviator's own report left out), each other *at* z (a tie)
        below it with probability 1/2: the convention of ``laws.below`` (a tie counted
        half), so that this term's mean over markets is E_exact's at an atom of the
        reports too (issue #48: read as "strictly below", a tie was the deviator's win,
        and at the atom of a flat piece of the bids the controlled E was off by the
        ties' share: F = c^0.15, 6 sellers, an exact table printed 7.2% and 28% of u
        for an exact 0.14%)."""
        E_k, T_k = self.interim.by_rank(Z)  # (K, n): k = 0..n - 1 others below
        srt = np.sort(R, axis=1)
        under = np.stack([np.searchsorted(row, Z, side="left") for row in srt])  # (M, K)
        at_or_under = np.stack([np.searchsorted(row, Z, side="right") for row in srt])
        E = np.zeros((R.shape[0], Z.size))
        T = np.zeros_like(E)
        for j in range(dev.shape[1]):
            own = R[np.arange(R.shape[0]), dev[:, j]][:, None]
            k = under - (own < Z[None, :])
            ties = at_or_under - under - (own == Z[None, :])
            e, t = _tie_mixture(E_k, T_k, k, ties)
            E += e
            T += t
        return E / dev.shape[1], T / dev.shape[1]


def _tie_mixture(E_k: np.ndarray, T_k: np.ndarray, k: np.ndarray, ties: np.ndarray):
    """E_k(z), T_k(z) read at k + J, J ~ Binomial(ties, 1/2) (each tied other below the
    deviator with probability 1/2), per market and report: (markets, len(Z)) each."""
    cols = np.arange(k.shape[1])[None, :]
    if not ties.any():
        return E_k[cols, k], T_k[cols, k]
    from scipy.stats import binom

    E, T = np.zeros(k.shape), np.zeros(k.shape)
    for j in range(int(ties.max()) + 1):
        w = binom.pmf(j, ties, 0.5)  # 0 where j > ties
        at = np.minimum(k + j, E_k.shape[1] - 1)  # k + j <= k + ties <= n - 1 where w > 0
        E += w * E_k[cols, at]
        T += w * T_k[cols, at]
    return E, T


def rank_interim(mech, classes: Classes, z_range: tuple[float, float]) -> RankInterim | None:
    """The black box's rank interim (R1) when it passes the probe (module doc), else
    None.  Also None for sellers with data (their outcome depends on more than reports),
    a mechanism that says ``randomized``, and more than ``MAX_SELLERS`` sellers.  The
    probe draws from its own generator (seed 0): the caller's stream is not touched."""
    n = classes.n
    if classes.data is not None or getattr(mech, "randomized", False) or n > MAX_SELLERS:
        return None
    lo, hi = (float(v) for v in z_range)
    if not (math.isfinite(lo) and math.isfinite(hi) and hi > lo):
        return None
    rng = np.random.default_rng(0)
    kinds = [
        rng.uniform(lo, hi, size=(PROBE_MARKETS, n)),
        np.column_stack([law.sample(PROBE_MARKETS, rng) for law in _laws_by_seller(classes)]),
    ]
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            interim = RankInterim(mech, n, (lo, hi), _takes_batches(mech, kinds[0]))
            ok = all(_passes(interim, np.clip(R, lo, hi), rng) for R in kinds)
    except Exception:  # a box that fails on the probe's markets: no rank interim
        return None
    return interim if ok else None


def _passes(interim: RankInterim, R: np.ndarray, rng: np.random.Generator) -> bool:
    """The probe on one kind of markets R (M, n), ``_CHUNK`` markets at a time (a box
    that is no rank mechanism usually fails on the first): the deviator's outcome is
    unchanged with the others' values redrawn on their side of its report, their
    positions shuffled, itself moved and another generator, and equals (R1)'s E_k, T_k
    at its own k."""
    checked = 0
    for at in range(0, R.shape[0], _CHUNK):
        ok, clear = _chunk_passes(interim, R[at : at + _CHUNK], rng)
        if not ok:
            return False
        checked += clear
    return checked >= R.shape[0] // 2  # most markets without a tie at the deviator


def _chunk_passes(interim: RankInterim, R: np.ndarray, rng: np.random.Generator):
    """(passed, markets checked): the markets with a tie at the deviator left out."""
    lo, hi = interim.z_range
    dev = np.asarray(rng.integers(0, R.shape[1], size=R.shape[0]))
    z = R[np.arange(R.shape[0]), dev]
    others = np.ones_like(R, dtype=bool)
    others[np.arange(R.shape[0]), dev] = False
    rest = R[others].reshape(R.shape[0], R.shape[1] - 1)
    clear = ~np.any(rest == z[:, None], axis=1)  # a tie (costs clipped to the range's
    R, dev, z, rest = R[clear], dev[clear], z[clear], rest[clear]  # bottom): sides unclear
    M, n = R.shape
    if M == 0:
        return True, 0
    rows = np.arange(M)
    below = rest < z[:, None]
    e, p = _deviator(interim, R, dev, seed=1)
    u = rng.random(rest.shape)  # values redrawn on their own side of z, positions shuffled
    moved = np.where(below, lo + u * (z[:, None] - lo), z[:, None] + u * (hi - z[:, None]))
    moved = np.take_along_axis(
        moved, rng.permuted(np.tile(np.arange(n - 1), (M, 1)), axis=1), axis=1
    )
    dev2 = np.asarray(rng.integers(0, n, size=M))
    R2 = np.empty_like(R)
    mask = np.ones_like(R, dtype=bool)
    mask[rows, dev2] = False
    R2[mask] = moved.ravel()
    R2[rows, dev2] = z
    e2, p2 = _deviator(interim, R2, dev2, seed=2)
    if not (_same(e, e2) and _same(p, p2)):
        return False, M
    k = below.sum(axis=1)  # (R1)'s market with the deviator's own k
    X = ranked_markets(z, n, interim.z_range)[rows, k]
    ek, pk = _deviator(interim, X, np.zeros(M, dtype=int), seed=3)
    return _same(e, ek) and _same(p, pk), M


def _deviator(interim: RankInterim, R: np.ndarray, dev: np.ndarray, seed: int):
    """The deviators' eps and payment in the markets R (seller ``dev[s]`` of market s)."""
    interim.calls += R.shape[0]
    e, p = outcomes(interim.mech, R, np.random.default_rng(seed), interim.batched)
    rows = np.arange(R.shape[0])
    return e[rows, dev], p[rows, dev]


def _same(a: np.ndarray, b: np.ndarray) -> bool:
    return bool(np.all(np.abs(a - b) <= _PROBE_TOL * np.maximum(1.0, np.abs(a))))


def ranked_markets(z: np.ndarray, n: int, z_range: tuple[float, float]) -> np.ndarray:
    """(len(z), n, n) report vectors: market [i, k] has the deviator (seller 0) at z[i]
    and k of the n - 1 others evenly below it, the rest evenly above it, every report
    strictly inside the report range: at an end of the range, where no other can be
    strictly below (above) it, the deviator reports a hair (1e-9 of the range) inside
    it, its outcome there the limit (a mechanism may refuse a report outside the
    sellers' support: ``online``)."""
    lo, hi = z_range
    hair = 1e-9 * (hi - lo)
    z = np.clip(z, lo + hair, hi - hair)[:, None]
    m = n - 1
    X = np.empty((z.size, n, n))
    X[:, :, 0] = z
    j = np.arange(1, m + 1)
    for k in range(n):
        down = z - (z - lo) * j[:k] / (k + 1)
        up = z + (hi - z) * j[: m - k] / (m - k + 1)
        X[:, k, 1:] = np.concatenate([down, up], axis=1)
    return X


def outcomes(mech, X: np.ndarray, rng: np.random.Generator, batched: bool):
    """Every seller's eps and payment, (B, n) each, for the B report vectors of X: one
    call when the box takes a batch, else one call per vector, the rows stacked.  Either
    way checked by ``checked_outcome_arrays`` with no +inf eps (a rank interim mixes
    outcomes over k: inf x a probability of 0 is NaN), so a box passes or fails the
    probe the same whether it takes a batch or not."""
    name = mechanism_name(mech)
    if batched:
        return _batch_result(mech.outcome(X, rng), X.shape, name)
    raw = [mech.outcome(x, rng) for x in X]
    try:
        e = np.array([r[0] if isinstance(r, tuple) else r.eps for r in raw], dtype=float)
        p = np.array([r[1] if isinstance(r, tuple) else r.payments for r in raw], dtype=float)
        stacked = e.shape == p.shape == X.shape
    except (TypeError, ValueError, AttributeError, IndexError):
        stacked = False
    if not stacked:  # each row as as_outcome reads it: the first bad one raises in its words
        rows = [as_outcome(r, X.shape[1], name) for r in raw]
        e = np.array([o.eps for o in rows], dtype=float)
        p = np.array([o.payments for o in rows], dtype=float)
    return checked_outcome_arrays(e, p, name, inf_eps=False)


def _takes_batches(mech, R: np.ndarray) -> bool:
    """The box says ``batched``, or its ``outcome`` of the first ``_BATCH_PROBE`` report
    vectors of R as one (k, n) batch returns, row by row, exactly what k one-vector calls
    return (``batch_agrees``; a failure: no)."""
    if is_batched(mech):
        return True
    try:
        return batch_agrees(mech, R[:_BATCH_PROBE])
    except Exception:  # a box written for one vector
        return False


def _laws_by_seller(classes: Classes) -> list:
    return [
        law for law, count in zip(classes.laws, classes.counts, strict=True) for _ in range(count)
    ]
