"""Empirical game-theoretic analysis (EGTA) of strategies in a MarketModel market.

``egta(mechanism, dist, n_sellers, strategies, samples, seed=...)`` treats a list
of strategy specs as the pure strategies of a symmetric *meta-game*: every one of
the ``n_sellers`` sellers of a :class:`~market_sim.agents.MarketModel` market picks
one of them, and its payoff is its mean utility ``t_i - c_i eps_i``.  The payoff
table is estimated from seeded simulations and the meta-game's equilibria
(population shares) are found with replicator dynamics.

**Reduction.**  The full game has C(N + S - 1, S - 1) profiles.  A
deviation-preserving reduction (DPR; Wiedenbeck & Wellman 2012) keeps
``players`` = n reduced players: the payoff of strategy s in reduced profile
``p`` (counts summing to n) is its payoff in the full N-seller profile where one
seller plays s and the other N - 1 are split as o* = (p - e_s) (N - 1)/(n - 1).
When o* is not integer (e.g. N = 20, n = 4: 19/3 sellers per reduced player) the
payoff is interpolated: o* is a convex combination of integer splits of N - 1
(:func:`dpr_support`), each simulated, and their payoffs are averaged with its
weights.  A payoff linear in the others' counts is then reproduced exactly, as with
an integer ratio (``reduction`` says which: ``exact`` or ``interpolated``).
``players = n_sellers`` is the full game.

**Payoffs (a paired design, every seat).**  The reduced player whose payoff is
wanted is the *deviator*, a group of its own; the other N - 1 sellers are roles in a
fixed strategy order.  Sample k draws a seating (a random permutation of the seller
indices, the deviator's seat running through a random start + k mod N) and a seed,
and uses both in every market (common random numbers: the same seats, the same cost
draws, the same deviator's seat).  Two markets that share the others therefore
differ in the deviator's strategy alone, and every payoff difference that regret and
replicator dynamics use (u_s - u_t against the same others) is a paired comparison.
No seat is favoured by mechanisms that break ties by index: over the samples the
deviator sits in every seat equally often (exactly, when ``samples`` is a multiple
of N) and the others in a uniformly random order.  The payoff of s in a sample is
the deviator's mean utility per round over the last ``last_rounds`` rounds (default:
all ``rounds``; 0 in a round it sat out); the table entry is its mean over the
samples.  Strategies are per-seller policies: a group strategy (``collusion``)
coordinates only the sellers of one run of adjacent seats.

**Equilibria.**  Discrete replicator dynamics
x_s <- x_s f_s(x) / sum_t x_t f_t(x), with f = 1 + (u - u_min)/(u_max - u_min)
(the payoff table rescaled to [1, 2]; the fixed points are those of the
continuous dynamics dx_s/dt = x_s (u_s(x) - x.u(x))), from the centre, from
the neighbourhood of every vertex and from the midpoints of every edge; the
pure profiles are checked too.  u_s(x) is the expected reduced-game payoff of s
when the other n - 1 players draw from x (multinomial).  A mixture's regret is
max_s u_s(x) - sum_s x_s u_s(x) (>= 0; 0 exactly at a Nash equilibrium).
Candidates with regret <= ``regret_tol`` x (payoff range) are kept and
deduplicated; when none qualifies the least-regret one is reported.

**Regret intervals.**  The seed is the unit: each seed's markets give a payoff table
of their own, and the estimate is their mean.  For a fixed mixture x the gains
G_s(x) = u_s(x) - x.u(x) are linear in the table, so their noise is a mean over seeds;
its law is drawn by a Gaussian multiplier bootstrap over the seeds (with a common
chi-square scale: each studentized coordinate is then t with samples - 1 degrees of
freedom, :func:`gain_noise`).  An estimated equilibrium's interval is one-sided,
[0, q] (:func:`regret_upper_bounds`): a band for max_s G_s(x) uniform over the simplex,
so it holds for a mixture chosen from the data.  ``regret_test(mixture)`` of a mixture
fixed in advance tests "it is an equilibrium" (regret 0) with the max-t statistic and
bounds its regret; ``regret_ci(mixture)`` is the two-sided interval from its bounds
(:func:`regret_test`; docs/egta.md has the proofs and the coverage table).
"""

from __future__ import annotations

import copy
import itertools
import json
import math
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from math import factorial
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from ..errors import MarketSimError
from ..execution import Job, Shared, check_executor, open_store, run_jobs
from ..files import atomic_write, save_png
from ..parameters import check_int

if TYPE_CHECKING:
    import pandas as pd

__all__ = [
    "SymmetricGame",
    "Equilibrium",
    "EgtaResult",
    "egta",
    "dpr_support",
    "dpr_exact",
    "dpr_game",
    "linear_game",
    "equilibrium_regret_bounds",
    "gains",
    "simplex_grid",
    "GainNoise",
    "gain_noise",
    "regret_upper_bounds",
    "RegretTest",
    "regret_test",
    "seat_layout",
    "find_equilibria",
    "replicator_dynamics",
]

_RESERVED = ("strategy", "strategic_fraction", "n_sellers", "rounds", "seed", "rng", "agent_out")


# ---- symmetric games in counts form ---------------------------------------------------
def _compositions(total: int, parts: int) -> np.ndarray:
    """All (k_1..k_parts) >= 0 summing to ``total``, lexicographically descending."""
    rows = []
    for bars in itertools.combinations(range(total + parts - 1), parts - 1):
        edges = (-1, *bars, total + parts - 1)
        rows.append([edges[i + 1] - edges[i] - 1 for i in range(parts)])
    return np.array(rows[::-1], dtype=np.int64).reshape(-1, parts)


@dataclass(frozen=True, eq=False)
class SymmetricGame:
    """A symmetric game of ``players`` players and pure strategies ``strategies``.

    ``profiles`` (P x S ints): every way to split the players among the strategies;
    ``payoffs`` (P x S): the payoff of a player of s in profile p (NaN where nobody
    plays s)."""

    strategies: tuple[str, ...]
    players: int
    profiles: np.ndarray
    payoffs: np.ndarray
    _others: np.ndarray = field(init=False, repr=False)  # the others' profiles (n - 1 players)
    _coef: np.ndarray = field(init=False, repr=False)  # their multinomial coefficients
    _dev: np.ndarray = field(init=False, repr=False)  # (S x K): payoff of s against others k

    def __post_init__(self):
        S, n = len(self.strategies), self.players
        if S < 2:
            raise MarketSimError("a game needs at least 2 strategies")
        if n < 2:
            raise MarketSimError(f"a game needs at least 2 players (got {n})")
        prof = np.asarray(self.profiles)
        pay = np.asarray(self.payoffs, dtype=float)
        if prof.shape != pay.shape or prof.ndim != 2 or prof.shape[1] != S:
            raise MarketSimError("profiles and payoffs must both be (profiles x strategies)")
        if not np.all(prof.sum(axis=1) == n) or prof.min() < 0:
            raise MarketSimError(f"every profile must split the {n} players among the strategies")
        if prof.shape[0] != math.comb(n + S - 1, S - 1):
            raise MarketSimError("the game must list every profile once")
        if not np.all(np.isfinite(pay[prof > 0])):
            raise MarketSimError("every played strategy needs a finite payoff")
        index = {tuple(int(v) for v in row): i for i, row in enumerate(prof)}
        if len(index) != prof.shape[0]:
            raise MarketSimError("the game must list every profile once")
        # the others' profiles (n - 1 players) and, per strategy, the payoff there
        others = _compositions(n - 1, S)
        coef = np.array(
            [factorial(n - 1) / np.prod([factorial(int(v)) for v in o]) for o in others]
        )
        dev = np.empty((S, others.shape[0]))
        for s in range(S):
            for k, o in enumerate(others):
                row = o.copy()
                row[s] += 1
                dev[s, k] = pay[index[tuple(int(v) for v in row)], s]
        object.__setattr__(self, "profiles", prof)
        object.__setattr__(self, "payoffs", pay)
        object.__setattr__(self, "_others", others)
        object.__setattr__(self, "_coef", coef)
        object.__setattr__(self, "_dev", dev)

    @classmethod
    def from_function(
        cls, strategies: Sequence[str], players: int, payoff: Callable[[np.ndarray], Sequence]
    ) -> SymmetricGame:
        """The game whose payoffs in profile p (counts) are ``payoff(p)`` (one per strategy)."""
        profiles = _compositions(int(players), len(strategies))
        pay = np.array([np.asarray(payoff(p), dtype=float) for p in profiles])
        return cls(tuple(strategies), int(players), profiles, np.where(profiles > 0, pay, np.nan))

    def _mix(self, x) -> np.ndarray:
        x = np.asarray(x, dtype=float)
        if x.shape[-1] != len(self.strategies) or np.any(x < -1e-12):
            raise MarketSimError(f"a mixture needs {len(self.strategies)} shares >= 0")
        total = x.sum(axis=-1, keepdims=True)
        if np.any(np.abs(total - 1) > 1e-6):
            raise MarketSimError("a mixture's shares must sum to 1")
        return np.clip(x, 0.0, None) / total

    def _others_prob(self, x: np.ndarray) -> np.ndarray:
        """P(the other n - 1 players form profile o | each draws from x): multinomial."""
        return self._coef * np.prod(x[..., None, :] ** self._others, axis=-1)

    def deviation_payoffs(self, x) -> np.ndarray:
        """u_s(x): expected payoff of a player of s when the others draw from x."""
        x = self._mix(x)
        return self._others_prob(x) @ self._dev.T

    def regret(self, x) -> np.ndarray | float:
        """max_s u_s(x) - sum_s x_s u_s(x) (>= 0; 0 at a symmetric Nash equilibrium)."""
        x = self._mix(x)
        u = self._others_prob(x) @ self._dev.T
        r = np.maximum(u.max(axis=-1) - np.sum(x * u, axis=-1), 0.0)
        return float(r) if np.ndim(r) == 0 else r

    def mixture(self, x) -> dict[str, float]:
        return {s: float(v) for s, v in zip(self.strategies, self._mix(x), strict=True)}


# ---- the deviation-preserving reduction ----------------------------------------------
def dpr_support(reduced, s: int, n_sellers: int, players: int) -> tuple[np.ndarray, np.ndarray]:
    """(weights (J,), full profiles (J x S)) whose weighted mean is the DPR's full profile
    for strategy ``s`` in the reduced profile ``reduced``: one seller plays s, the others
    are o* = (reduced - e_s) (N - 1)/(n - 1).  When o* is not integer it is written as a
    convex combination of integer splits of N - 1 (systematic rounding of its fractional
    parts: unit u + j of j = 0..r-1 goes to the strategy whose cumulative fraction covers
    it, u uniform on [0, 1); the weights are the lengths of the u-cells), so a payoff
    linear in the others' counts is reproduced exactly."""
    p = np.asarray(reduced, dtype=np.int64)
    if p[s] < 1:
        raise MarketSimError(f"strategy {s} is not played in the reduced profile {p.tolist()}")
    others = p.copy()
    others[s] -= 1
    D = players - 1
    whole, rem = np.divmod(others * (n_sellers - 1), D)  # o* = whole + rem / D
    cum = np.concatenate([[0], np.cumsum(rem)])  # cumulative fractions, in units of 1/D
    u = np.arange(D)[:, None] + 0.5  # one u per cell [t, t + 1) of length 1/D
    units = np.ceil((cum[None, 1:] - u) / D) - np.ceil((cum[None, :-1] - u) / D)
    rows, counts = np.unique(units.astype(np.int64), axis=0, return_counts=True)
    full = rows + whole
    full[:, s] += 1
    return counts / D, full


def dpr_exact(n_sellers: int, players: int) -> bool:
    """Whether (N - 1)/(n - 1) is an integer (every DPR profile is one integer split)."""
    return players >= 2 and (n_sellers - 1) % (players - 1) == 0


def dpr_game(
    strategies: Sequence[str],
    n_sellers: int,
    players: int,
    payoff: Callable[[np.ndarray], Sequence],
) -> SymmetricGame:
    """The DPR of the full ``n_sellers``-player game with payoffs ``payoff(full counts)``
    to a ``players``-player game (interpolated by :func:`dpr_support`)."""
    S = len(strategies)
    profiles = _compositions(int(players), S)
    pay = np.full(profiles.shape, np.nan)
    for i, p in enumerate(profiles):
        for j in np.flatnonzero(p):
            s = int(j)
            w, full = dpr_support(p, s, n_sellers, players)
            pay[i, s] = sum(
                wk * float(np.asarray(payoff(f))[s]) for wk, f in zip(w, full, strict=True)
            )
    return SymmetricGame(tuple(strategies), int(players), profiles, pay)


def linear_game(a, b, n_sellers: int, players: int = 4) -> SymmetricGame:
    """The DPR of the ``n_sellers``-player game u_s(c) = a_s + b_s . (c - e_s), payoffs
    linear in the others' counts c - e_s (``b`` S x S): the reduction is exact on it, so
    its regret at any mixture is the full game's, a game with known payoffs on which to
    check the intervals (docs/egta.md's coverage table)."""
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    S = a.size
    if b.shape != (S, S):
        raise MarketSimError(f"a linear game needs b of shape {(S, S)} (got {b.shape})")
    eye = np.eye(S)
    return dpr_game(
        [f"s{i}" for i in range(S)],
        n_sellers,
        players,
        lambda c: [a[s] + b[s] @ (c - eye[s]) for s in range(S)],
    )


def _dpr_plan(S: int, n_sellers: int, players: int):
    """The reduced profiles (P x S); the markets to simulate, as the deviator's strategy
    (F,) and the full profiles (F x S, the deviator included); and the weights
    (P x S x F) that make each reduced payoff from the deviators' payoffs there."""
    reduced = _compositions(players, S)
    index: dict[tuple, int] = {}  # (deviator's strategy, full counts) -> row
    entries = []
    for i, p in enumerate(reduced):
        for j in np.flatnonzero(p):
            w, full = dpr_support(p, int(j), n_sellers, players)
            for wk, f in zip(w, full, strict=True):
                f_row = index.setdefault((int(j), *(int(v) for v in f)), len(index))
                entries.append((i, int(j), f_row, float(wk)))
    weights = np.zeros((reduced.shape[0], S, len(index)))
    for row, strat, f_row, wk in entries:
        weights[row, strat, f_row] += wk
    keys = np.array(list(index), dtype=np.int64).reshape(-1, S + 1)
    return reduced, keys[:, 0], keys[:, 1:], weights


# ---- equilibria ---------------------------------------------------------------------------
def replicator_dynamics(
    game: SymmetricGame, starts, *, max_iter: int = 20_000, tol: float = 1e-12
) -> np.ndarray:
    """End points of discrete replicator dynamics from each row of ``starts`` (see the
    module doc: the payoffs rescaled to [1, 2])."""
    x = game._mix(np.atleast_2d(np.asarray(starts, dtype=float)))
    lo, hi = np.nanmin(game.payoffs), np.nanmax(game.payoffs)
    scale = hi - lo if hi > lo else 1.0
    dev = 1.0 + (game._dev - lo) / scale  # f in [1, 2]
    for _ in range(max_iter):
        f = game._others_prob(x) @ dev.T
        new = x * f
        new /= new.sum(axis=1, keepdims=True)
        if np.max(np.abs(new - x)) < tol:
            return new
        x = new
    return x


def _starts(S: int, near: float = 0.05) -> np.ndarray:
    rows = [np.full(S, 1.0 / S)]
    for s in range(S):  # the neighbourhood of every vertex
        v = np.full(S, near / (S - 1))
        v[s] = 1 - near
        rows.append(v)
    for a, b in itertools.combinations(range(S), 2):  # the middle of every edge, a little inside
        v = np.full(S, near / S)
        v[a] = v[b] = (1 - near * (S - 2) / S) / 2
        rows.append(v)
    return np.array(rows)


def find_equilibria(
    game: SymmetricGame,
    *,
    regret_tol: float = 1e-3,
    support_tol: float = 1e-4,
    dedup_tol: float = 1e-3,
    max_iter: int = 20_000,
) -> list[tuple[np.ndarray, float]]:
    """(mixture, regret) of the approximate symmetric equilibria, least regret first.

    Candidates: replicator end points from ``_starts`` and the pure profiles; shares
    below ``support_tol`` are set to 0; kept when regret <= ``regret_tol`` x the range
    of the payoff table (if none is, the least-regret candidate alone); two within
    ``dedup_tol`` (largest share difference) are one."""
    S = len(game.strategies)
    ends = replicator_dynamics(game, _starts(S), max_iter=max_iter)
    ends = np.where(ends < support_tol, 0.0, ends)
    ends /= ends.sum(axis=1, keepdims=True)
    cands = np.vstack([np.eye(S), ends])
    regrets = np.atleast_1d(game.regret(cands))
    lo, hi = np.nanmin(game.payoffs), np.nanmax(game.payoffs)
    bound = regret_tol * (hi - lo) if hi > lo else 1e-12
    order = np.argsort(regrets, kind="stable")
    keep = [i for i in order if regrets[i] <= bound] or [int(order[0])]
    out: list[tuple[np.ndarray, float]] = []
    for i in keep:
        if all(np.max(np.abs(cands[i] - x)) > dedup_tol for x, _ in out):
            out.append((cands[i], float(regrets[i])))
    return out


# ---- regret intervals -----------------------------------------------------------------------
def _dev_rows(game: SymmetricGame) -> np.ndarray:
    """(S x K): the profile row where a player of s meets the others' profile k."""
    index = {tuple(int(v) for v in row): i for i, row in enumerate(game.profiles)}
    S = len(game.strategies)
    return np.array(
        [
            [index[tuple(int(v) for v in o + np.eye(S, dtype=np.int64)[s])] for o in game._others]
            for s in range(S)
        ]
    )


def _table_regrets(game: SymmetricGame, tables: np.ndarray, xs: np.ndarray) -> np.ndarray:
    """Regret of mixture xs[b] under payoff table tables[b] (B x P x S), for every b."""
    S = len(game.strategies)
    dev = tables[:, _dev_rows(game), np.arange(S)[:, None]]  # (B, S, K)
    u = np.einsum("bsk,bk->bs", dev, game._others_prob(xs))
    return np.maximum(u.max(axis=1) - np.sum(xs * u, axis=1), 0.0)


def _replicate_equilibria(
    game: SymmetricGame, tables: np.ndarray, starts, *, max_iter: int = 5000, tol: float = 1e-9
) -> np.ndarray:
    """Each table's own equilibrium near its start (B x S): replicator dynamics on
    tables[b] (payoffs rescaled to [1, 2] per table) from starts[b] nudged 1e-6 into the
    interior, shares below 1e-4 then set to 0, as in :func:`find_equilibria`."""
    S = len(game.strategies)
    dev = tables[:, _dev_rows(game), np.arange(S)[:, None]]  # (B, S, K)
    lo = np.nanmin(dev, axis=(1, 2), keepdims=True)
    span = np.nanmax(dev, axis=(1, 2), keepdims=True) - lo
    fit = 1.0 + (dev - lo) / np.where(span > 0, span, 1.0)
    y = np.broadcast_to((1 - 1e-6) * game._mix(starts) + 1e-6 / S, (tables.shape[0], S)).copy()
    for _ in range(max_iter):
        new = y * np.einsum("bsk,bk->bs", fit, game._others_prob(y))
        new /= new.sum(axis=1, keepdims=True)
        done = np.max(np.abs(new - y)) < tol
        y = new
        if done:
            break
    y = np.where(y < 1e-4, 0.0, y)
    return y / y.sum(axis=1, keepdims=True)


def equilibrium_regret_bounds(
    game: SymmetricGame,
    estimates: np.ndarray,
    tables: np.ndarray,
    equilibria: np.ndarray,
    level: float = 0.95,
) -> np.ndarray:
    """Upper ends q_r of one-sided intervals [0, q_r] for the true regret of equilibria[r],
    an equilibrium of the payoff table estimates[r] (R x P x S, a mean over seeds), from
    its bootstrap replicates tables[r] (R x B x P x S: seeds resampled).

    The former method, kept to measure against (benchmarks/egta_coverage.py); ``egta``
    uses :func:`regret_upper_bounds`.  An estimated equilibrium has regret 0 in its own
    table by construction, so the regret of the same mixture under the replicates is
    biased up.  The bootstrap principle instead: estimates[r] plays the truth and each
    replicate the estimate; the replicate's own equilibrium x*_b (near equilibria[r]) has
    true regret R_b = regret of x*_b in estimates[r], and q_r is the ``level`` quantile
    of the R_b.  It under-covers where the estimate sits on the simplex's boundary and
    the truth does not (the replicates' equilibria stay at the estimate's vertex: 6% of
    such runs covered in docs/egta.md's game) and at low signal."""
    R, B = tables.shape[:2]
    centre = estimates[:, None]
    boot = tables.reshape(R * B, *tables.shape[2:])
    own = _replicate_equilibria(game, boot, np.repeat(equilibria, B, axis=0))
    truth = np.broadcast_to(centre, tables.shape).reshape(boot.shape)
    regrets = _table_regrets(game, truth, own).reshape(R, B)
    return np.quantile(regrets, level, axis=1)


# ---- regret bounds that hold their level ------------------------------------------------------
def gains(game: SymmetricGame, tables: np.ndarray, xs: np.ndarray) -> np.ndarray:
    """G_s(x; table) = u_s(x) - sum_t x_t u_t(x), the gain of a player switching from the
    mixture x to s (..., M x S), for payoff tables (..., P x S) at mixtures xs (M x S).
    For a fixed x it is linear in the table, and the regret is max_s G_s(x) (>= 0, since
    sum_s x_s G_s(x) = 0)."""
    S = len(game.strategies)
    xs = game._mix(np.atleast_2d(xs))
    dev = np.asarray(tables)[..., _dev_rows(game), np.arange(S)[:, None]]  # (..., S, K)
    u = np.einsum("...sk,mk->...ms", dev, game._others_prob(xs))
    return u - np.sum(xs * u, axis=-1, keepdims=True)


def simplex_grid(S: int, max_points: int = 600) -> np.ndarray:
    """The mixtures with shares in multiples of 1/k (rows), k the largest (<= 200) with at
    most ``max_points`` of them: 201 points for 2 strategies, 496 (k = 30) for 3."""
    k = 1
    while k < 200 and math.comb(k + S, S - 1) <= max_points:
        k += 1
    return _compositions(k, S) / k


@dataclass(frozen=True)
class GainNoise:
    """The estimated gains at mixtures xs and draws of their studentized noise.

    ``mean`` (M x S): G_s(x) of the mean table (a mean over K seeds); ``se`` (M x S): its
    standard error, sd over the seeds' own tables / sqrt(K) (0 where every seed agrees);
    ``draws`` (B x M x S): Z*_b = D*_b / se, D*_b a Gaussian-multiplier draw of the
    noise Ghat - G (its covariance across all x and s is the seeds'), divided by one
    common sqrt(chi2_{K-1}/(K-1)) per draw, so that each coordinate is t with K - 1
    degrees of freedom, the exact law of a studentized mean of Gaussian seeds."""

    mean: np.ndarray
    se: np.ndarray
    draws: np.ndarray


def gain_noise(
    game: SymmetricGame, seed_tables: np.ndarray, xs: np.ndarray, n_boot: int, seed
) -> GainNoise:
    """:class:`GainNoise` of the gains at mixtures xs from the seeds' payoff tables
    (K x P x S, one per seed; the estimate is their mean).  One seed has no spread: se is
    then infinite (the bounds unbounded)."""
    check_int("n_boot", n_boot, 1)
    per_seed = gains(game, seed_tables, xs)  # (K, M, S), linear in each seed's table
    K = per_seed.shape[0]
    mean = per_seed.mean(axis=0)
    if K < 2:
        return GainNoise(mean, np.full_like(mean, np.inf), np.zeros((n_boot, *mean.shape)))
    centred = (per_seed - mean).reshape(K, -1)
    se = np.sqrt(np.sum(centred**2, axis=0) / (K * (K - 1)))
    rng = np.random.default_rng(seed)
    xi = rng.standard_normal((n_boot, K)) / math.sqrt(K * (K - 1))  # Var(xi @ centred) = se^2
    scale = np.sqrt(rng.chisquare(K - 1, size=(n_boot, 1)) / (K - 1))
    noisy = se > 1e-12 * (1.0 + np.max(np.abs(mean)))
    se = np.where(noisy, se, 0.0)
    z = np.divide(xi @ centred, se * scale, out=np.zeros((n_boot, se.size)), where=noisy)
    return GainNoise(mean, se.reshape(mean.shape), z.reshape(n_boot, *mean.shape))


def _check_level(level) -> None:
    if not (isinstance(level, (int, float)) and 0 < level < 1):
        raise MarketSimError(f"level must be a number in (0, 1) (got {level!r})")


def regret_upper_bounds(
    game: SymmetricGame,
    seed_tables: np.ndarray,
    xs: np.ndarray,
    *,
    level: float = 0.95,
    n_boot: int = 1000,
    seed=None,
) -> np.ndarray:
    """Upper ends q(x) of one-sided ``level`` intervals [0, q(x)] for the true regret of
    each mixture xs[r], valid simultaneously for every mixture, so also for mixtures
    chosen from the same data (an estimated equilibrium).

    c is the ``level`` quantile of sup_x max_s (-Z*_s(x)) over a grid of the simplex
    (:func:`simplex_grid`) and xs, and q(x) = max(0, max_s Ghat_s(x) + c se_s(x)): on the
    event sup_x max_s (G_s - Ghat_s)/se_s <= c, of probability ``level``, every G_s(x) is
    below its bound, hence so is the regret max_s G_s(x) of every x (docs/egta.md)."""
    _check_level(level)
    xs = game._mix(np.atleast_2d(xs))
    points = np.vstack([xs, simplex_grid(len(game.strategies))])
    noise = gain_noise(game, seed_tables, points, n_boot, seed)
    if not np.all(np.isfinite(noise.se)):
        return np.full(xs.shape[0], np.inf)
    c = np.quantile(np.max(-noise.draws, axis=(1, 2)), level)
    upper = np.max(noise.mean + c * noise.se, axis=-1)[: xs.shape[0]]
    return np.maximum(upper, 0.0)


@dataclass(frozen=True)
class RegretTest:
    """Is a mixture x, fixed before the data, an equilibrium?  H0: its regret is 0.

    ``regret``: the estimate max_s Ghat_s(x); ``p_value``: of H0 by the max-t statistic
    T = max_s Ghat_s(x)/se_s(x), P*(max_s Z*_s(x) >= T) (the null's least favourable
    point, every G_s(x) = 0: size <= 1 - level at any equilibrium, = at an interior one);
    ``lower``, ``upper``: one-sided ``level`` bounds on the true regret (lower > 0 exactly
    when p_value < 1 - level, up to the draws' resolution)."""

    regret: float
    p_value: float
    lower: float
    upper: float
    level: float


def regret_test(
    game: SymmetricGame,
    seed_tables: np.ndarray,
    x,
    *,
    level: float = 0.95,
    n_boot: int = 1000,
    seed=None,
) -> RegretTest:
    """:class:`RegretTest` of the mixture x from the seeds' payoff tables (K x P x S):
    ``lower`` = max(0, max_s Ghat_s - c_lo se_s), ``upper`` = max(0, max_s Ghat_s +
    c_hi se_s), c_lo, c_hi the ``level`` quantiles of max_s Z*_s and max_s -Z*_s at x
    (simultaneous over s: the regret is a max, and the bound on each gain holds at once)."""
    _check_level(level)
    x = game._mix(np.atleast_2d(x))
    noise = gain_noise(game, seed_tables, x, n_boot, seed)
    mean, se, z = noise.mean[0], noise.se[0], noise.draws[:, 0]
    regret = max(float(np.max(mean)), 0.0)
    if not np.all(np.isfinite(se)):
        return RegretTest(regret, math.nan, 0.0, math.inf, level)
    c_lo, c_hi = np.quantile(np.max(z, axis=1), level), np.quantile(np.max(-z, axis=1), level)
    exact = se == 0  # gains known without noise (every seed agrees)
    t_obs = np.max(
        np.where(exact, np.where(mean > 0, np.inf, -np.inf), mean / np.where(exact, 1, se))
    )
    p_value = (1 + np.sum(np.max(z, axis=1) >= t_obs)) / (1 + z.shape[0])
    lower = max(float(np.max(mean - c_lo * se)), 0.0)
    upper = max(float(np.max(mean + c_hi * se)), 0.0)
    return RegretTest(regret, float(p_value), lower, upper, level)


# ---- results --------------------------------------------------------------------------------
@dataclass(frozen=True)
class Equilibrium:
    """A symmetric mixed equilibrium of the meta-game: population shares, the regret
    of that mixture in the estimated table (0 up to the solver's tolerance) and a
    one-sided 95% interval [0, q] of its true regret (:func:`regret_upper_bounds`: a band
    uniform over the simplex, so valid although the mixture was chosen from the data)."""

    mixture: dict[str, float]
    regret: float
    regret_ci: tuple[float, float]

    def as_dict(self) -> dict:
        return {
            "mixture": dict(self.mixture),
            "regret": float(self.regret),
            "regret_ci": [float(self.regret_ci[0]), float(self.regret_ci[1])],
        }


@dataclass(frozen=True, eq=False)
class EgtaResult:
    """The estimated meta-game and its equilibria.

    ``game``: the reduced game with mean payoffs; ``full_profiles`` (F x S): the
    simulated N-seller profiles (counts, the deviator included); ``deviator`` (F,): the
    deviator's strategy in each; ``sample_payoffs`` (F x samples): per seed, the
    deviator's mean utility per round; ``weights`` (P x S x F): the DPR's weights of the
    markets behind each reduced payoff; ``seats`` (samples x N): seed k's seating, role
    r (0: the deviator, then the others in strategy order) at seat seats[k, r]."""

    mechanism: str
    dist: str
    n_sellers: int
    players: int
    samples: int
    rounds: int
    last_rounds: int
    strategies: tuple[str, ...]
    game: SymmetricGame
    full_profiles: np.ndarray
    deviator: np.ndarray
    sample_payoffs: np.ndarray
    weights: np.ndarray
    seats: np.ndarray
    equilibria: tuple[Equilibrium, ...]
    n_boot: int
    boot_seed: int
    seconds: float
    seed: int | None = None
    context: dict = field(default_factory=dict)
    population: str = ""
    class_laws: tuple[str, ...] = ()
    deviator_class: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))

    @property
    def reduction(self) -> str:
        """How the DPR's full profiles are made: ``exact`` ((N - 1)/(n - 1) an integer)
        or ``interpolated`` (between the integer splits around it; exact on games
        linear in the counts)."""
        return "exact" if dpr_exact(self.n_sellers, self.players) else "interpolated"

    def _reduced(self, per_profile: np.ndarray) -> np.ndarray:
        return _reduce(self.weights, self.game.profiles, per_profile)

    def class_payoffs(self) -> np.ndarray:
        """Payoff tables per class of sellers (C x P x S): the mean over the samples whose
        deviator sat in a seat of that class (class g's seats are its share of the N)."""
        per_seed = self._reduced(self.sample_payoffs.T)  # (K, P, S)
        return np.array(
            [per_seed[self.deviator_class == g].mean(axis=0) for g in range(len(self.class_laws))]
        )

    # -- bootstrap --------------------------------------------------------------------
    def _boot_games(self, n_boot: int, seed: int) -> np.ndarray:
        """Reduced payoff tables (n_boot x P x S) from seeds resampled with replacement."""
        K = self.samples
        rng = np.random.default_rng(seed)
        w = rng.multinomial(K, np.full(K, 1.0 / K), size=n_boot) / K  # (B, K)
        means = w @ self.sample_payoffs.T  # (B, F)
        return self._reduced(means)

    def _as_vector(self, mixture) -> np.ndarray:
        if isinstance(mixture, Mapping):
            unknown = set(mixture) - set(self.strategies)
            if unknown:
                raise MarketSimError(f"mixture: unknown strategies {sorted(unknown)}")
            return np.array([float(mixture.get(s, 0.0)) for s in self.strategies])
        return np.asarray(mixture, dtype=float)

    def regret(self, mixture) -> float:
        """Regret of a mixture ({spec: share} or shares in ``strategies`` order)."""
        return float(self.game.regret(self._as_vector(mixture)))

    def seed_tables(self) -> np.ndarray:
        """The reduced payoff table of each seed alone (samples x P x S); ``game`` has
        their mean."""
        return self._reduced(self.sample_payoffs.T)

    def regret_test(self, mixture, *, level: float = 0.95, n_boot: int | None = None) -> RegretTest:
        """Test of "this mixture, fixed in advance, is an equilibrium" (its true regret is
        0): the p-value and one-sided ``level`` bounds on the regret (:func:`regret_test`)."""
        x = self.game._mix(self._as_vector(mixture))
        return regret_test(
            self.game, self.seed_tables(), x, level=level, n_boot=n_boot or self.n_boot,
            seed=self.boot_seed,
        )  # fmt: skip

    def regret_ci(
        self, mixture, *, level: float = 0.95, n_boot: int | None = None
    ) -> tuple[float, float]:
        """Two-sided ``level`` interval of the true regret of a mixture fixed in advance:
        the one-sided (1 + level)/2 bounds of :meth:`regret_test`, so its lower end is
        above 0 exactly when the test rejects "an equilibrium" at (1 - level)/2.  An
        estimated equilibrium's interval is its ``Equilibrium.regret_ci``."""
        t = self.regret_test(mixture, level=(1 + level) / 2, n_boot=n_boot)
        return t.lower, t.upper

    # -- output ----------------------------------------------------------------------------
    def table(self) -> pd.DataFrame:
        """One row per reduced profile and played strategy (payoffs.csv)."""
        import pandas as pd

        per_seed = self._reduced(self.sample_payoffs.T)  # (K, P, S)
        sellers = np.einsum("psf,fs->ps", self.weights, self.full_profiles)
        by_class = self.class_payoffs() if len(self.class_laws) > 1 else None
        rows = []
        for i, p in enumerate(self.game.profiles):
            for s in np.flatnonzero(p):
                y = per_seed[:, i, s]
                row: dict = {"profile": i}
                row.update(
                    {f"players[{t}]": int(c) for t, c in zip(self.strategies, p, strict=True)}
                )
                row.update(
                    {
                        "strategy": self.strategies[s],
                        "share": p[s] / self.players,
                        "sellers": round(float(sellers[i, s]), 6),
                        "payoff": float(y.mean()),
                        "sd": float(y.std(ddof=1)) if y.size > 1 else math.nan,
                        "samples": int(y.size),
                    }
                )
                if by_class is not None:
                    for g, law in enumerate(self.class_laws):
                        row[f"payoff[class {g}: {law}]"] = float(by_class[g, i, s])
                rows.append(row)
        return pd.DataFrame(rows)

    def summary(self) -> dict:
        return {
            "mechanism": self.mechanism,
            "dist": self.dist,
            "population": self.population,
            "n_sellers": self.n_sellers,
            "players": self.players,
            "reduction": self.reduction,
            "others_per_reduced_player": f"{self.n_sellers - 1}/{self.players - 1}",
            "payoff": "the deviator's mean utility per round; seats drawn per seed",
            "equilibrium_regret_ci": "one-sided 95% [0, q]: a band uniform over the simplex "
            "(valid for a mixture chosen from the data)",
            "regret_ci": "two-sided 95% for a mixture fixed in advance; lower end > 0: "
            "not an equilibrium (test at 2.5%)",
            "strategies": list(self.strategies),
            "samples": self.samples,
            "rounds": self.rounds,
            "last_rounds": self.last_rounds,
            "seed": self.seed,
            "full_profiles": int(self.full_profiles.shape[0]),
            "simulations": int(self.full_profiles.shape[0] * self.samples),
            "seconds": round(self.seconds, 2),
            "n_boot": self.n_boot,
            "context": dict(self.context),
        }

    def write(self, folder) -> Path:
        """DIR/payoffs.csv, DIR/equilibria.json, DIR/summary.json and DIR/egta.png."""
        out = Path(folder)
        if out.exists() and not out.is_dir():
            raise MarketSimError(f"{folder}: exists and is not a folder")
        out.mkdir(parents=True, exist_ok=True)
        csv = self.table().to_csv(index=False).encode()
        atomic_write(out / "payoffs.csv", lambda fh: fh.write(csv))
        eq = json.dumps([e.as_dict() for e in self.equilibria], indent=2) + "\n"
        atomic_write(out / "equilibria.json", lambda fh: fh.write(eq.encode()))
        summ = json.dumps(self.summary(), indent=2) + "\n"
        atomic_write(out / "summary.json", lambda fh: fh.write(summ.encode()))
        plot(self, out / "egta.png")
        return out

    def format(self) -> str:
        ratio = f"(N-1)/(n-1) = {self.n_sellers - 1}/{self.players - 1}"
        lines = [
            f"mechanism     {self.mechanism}",
            f"sellers       {self.population or self.dist} (the mechanism's law: {self.dist})",
            f"market        {self.n_sellers} sellers, {self.rounds} round(s); payoff: mean "
            f"utility per round over the last {self.last_rounds} (seats drawn per seed)",
            f"meta-game     {len(self.strategies)} strategies, DPR to {self.players} players "
            f"({self.reduction}: {ratio}): {self.full_profiles.shape[0]} profiles x "
            f"{self.samples} samples ({self.seconds:.1f} s)",
            "pure profiles (regret, 95% CI):",
        ]
        w = max(len(s) for s in self.strategies)
        for name, vertex in zip(self.strategies, np.eye(len(self.strategies)), strict=True):
            lo, hi = self.regret_ci(vertex)
            lines.append(f"  all {name:<{w}}  {self.regret(vertex):.4g}  [{lo:.4g}, {hi:.4g}]")
        lines.append("equilibria (population shares; regret, one-sided 95% CI):")
        for e in self.equilibria:
            mix = ", ".join(f"{k} {v:.3f}" for k, v in e.mixture.items() if v > 0)
            lines.append(
                f"  {mix}  regret {e.regret:.3g} [{e.regret_ci[0]:.3g}, {e.regret_ci[1]:.3g}]"
            )
        return "\n".join(lines)


# ---- simulation -------------------------------------------------------------------------------


class _Pairs(Mapping):
    """An ordered {strategy: fraction} whose keys need not be hashable (looked up by identity)."""

    def __init__(self, pairs):
        self._pairs = list(pairs)

    def __getitem__(self, key):
        for k, v in self._pairs:
            if k is key:
                return v
        raise KeyError(key)

    def __iter__(self):
        return (k for k, _ in self._pairs)

    def __len__(self):
        return len(self._pairs)


def seat_layout(deviator: int, full, seats: np.ndarray) -> np.ndarray:
    """The strategy of every seat (seller index), the deviator's seat marked -1: role 0
    is the deviator (playing ``deviator``), roles 1..N-1 the others in strategy order
    (``full`` minus the deviator), and role r sits at seat ``seats[r]``."""
    others = np.asarray(full, dtype=np.int64) - np.eye(len(full), dtype=np.int64)[deviator]
    roles = np.r_[-1, np.repeat(np.arange(len(full)), others)]
    layout = np.empty(roles.size, dtype=np.int64)
    layout[np.asarray(seats)] = roles
    return layout


def _runs(layout: np.ndarray) -> list[tuple[int, int]]:
    """(strategy, length) of the runs of equal entries along the seats."""
    cuts = np.flatnonzero(np.diff(layout)) + 1
    starts = np.r_[0, cuts]
    return [
        (int(layout[a]), int(b - a)) for a, b in zip(starts, np.r_[cuts, layout.size], strict=True)
    ]


def _simulate(dev, full, strategies: list, n, mechanism, dist, rounds, last, seed, market, context):
    """The deviator's mean utility per round over the last ``last`` rounds in the market
    of ``full`` seated by :func:`seat_layout` (``market``: this seed's seating, costs and
    data)."""
    from ..agents import MarketModel

    layout = seat_layout(dev, full, market.seats)
    runs = _runs(layout)
    # every run of seats (the deviator a run of its own) gets a fresh copy of its
    # strategy, built once from its spec (a registry look-up per market is slow)
    mix = _Pairs([(copy.deepcopy(strategies[dev if s < 0 else s]), size / n) for s, size in runs])
    # the population itself (per-seller laws, its data), or with data= the one-law form
    who = {"population": market.population} if "data" not in context else {"dist": dist}
    model = MarketModel(
        n,
        **who,
        market=market.drawn,
        mechanism=mechanism,
        strategy=mix,
        rounds=rounds,
        rng=np.random.default_rng(seed),
        **context,
    )
    if [g.ids.size for g in model.groups] != [size for _, size in runs]:  # pragma: no cover
        raise MarketSimError(f"egta: the market did not build the profile {list(full)}")
    seat, total = int(market.seats[0]), 0.0
    first = rounds - last
    while model.running:
        model.step()
        if model.round > first:
            total += float(model.utility[seat])  # 0 when the seller sat the round out
    return total / last


def _check_strategies(strategies) -> tuple[str, ...]:
    """The strategies' names: a spec as given; a BNEResult (``bid_tables``) ``bne``."""
    if isinstance(strategies, str) or not all(
        isinstance(s, str) or callable(getattr(s, "bid_tables", None)) for s in strategies
    ):
        raise MarketSimError("strategies must be a list of strategy specs (strings) or BNEResults")
    strategies = tuple(s if isinstance(s, str) else "bne" for s in strategies)
    if len(strategies) < 2:
        raise MarketSimError(f"egta needs at least 2 strategies to compare (got {len(strategies)})")
    if len(set(strategies)) != len(strategies):
        raise MarketSimError(f"egta: a strategy is listed twice in {list(strategies)}")
    return strategies


def _check_numbers(n_sellers, samples, rounds, players, last_rounds, n_boot, regret_tol):
    n = check_int("n_sellers", n_sellers, 2)
    samples = check_int("samples", samples, 1)
    rounds = check_int("rounds", rounds, 1)
    players = min(check_int("players", players, 2), n)
    last = rounds if last_rounds is None else check_int("last_rounds", last_rounds, 1)
    if last > rounds:
        raise MarketSimError(f"last_rounds ({last}) exceeds rounds ({rounds})")
    n_boot = check_int("n_boot", n_boot, 1)
    if not (isinstance(regret_tol, (int, float)) and regret_tol >= 0):
        raise MarketSimError(f"regret_tol must be a number >= 0 (got {regret_tol!r})")
    return n, samples, rounds, players, last, n_boot


def _build_mechanism(mechanism, pop, dist, context):
    """The mechanism as MarketModel(population=pop) builds it (each seller's own law to
    those that take them), or from the one law ``dist`` with data= from Python."""
    from ..mechanisms.base import as_mechanism, mechanism_name

    bad = sorted(set(context) & set(_RESERVED))
    if bad:
        raise MarketSimError(f"egta sets {', '.join(bad)} itself; do not pass it")
    mech_context = {k: context[k] for k in ("mu", "sigma", "gamma", "privacy") if k in context}
    mech = as_mechanism(mechanism, dist=dist, n_sellers=pop.n_sellers, **mech_context)
    name = mechanism if isinstance(mechanism, str) else mechanism_name(mech)
    if getattr(mech, "needs_data", False) and "data" not in context and not pop.has_data:
        raise MarketSimError(
            f"mechanism {name} needs the sellers' data: give a population with data "
            "(e.g. 20*uniform:1:5;data=synthetic) or data= from Python"
        )
    if "data" not in context:
        mech = as_mechanism(mechanism, population=pop, **mech_context)
    return mech, name


def _seeds(seed, rng, samples: int, n: int):
    """Per-sample seeds of the markets, the bootstrap's seed and the seatings (samples x
    N): a uniform random permutation of the seats per sample, its deviator's seat then
    replaced so that the deviator's seats are spread evenly from a random start,
    start + floor(k N / samples) mod N (every seat equally often when ``samples`` is a
    multiple of N; with fewer samples than seats, every stretch of seats -- a
    population's class is one -- gets its share of them, not a block of consecutive
    seats)."""
    if seed is not None and rng is not None:
        raise MarketSimError("give seed or rng, not both")
    if rng is not None:
        if not isinstance(rng, np.random.Generator):
            raise MarketSimError("rng must be a numpy.random.Generator")
        root = np.random.SeedSequence(int(rng.integers(2**63)))
    else:
        root = np.random.SeedSequence(seed)
    *seeds, boot, seating = root.spawn(samples + 2)
    cost_seeds = root.spawn(samples)
    seat_rng = np.random.default_rng(seating)
    seats = np.array([seat_rng.permutation(n) for _ in range(samples)]).reshape(samples, n)
    dev_seat = (int(seat_rng.integers(n)) + (np.arange(samples) * n) // samples) % n
    for k in range(samples):  # swap the deviator onto its seat
        r = int(np.flatnonzero(seats[k] == dev_seat[k])[0])
        seats[k, [0, r]] = seats[k, [r, 0]]
    return seeds, int(boot.generate_state(1, np.uint64)[0]), seats, cost_seeds


@dataclass(frozen=True)
class _SampleMarket:
    """What sample k shares across its markets: the seating (role r at seat seats[r]) and
    the population's draw (``drawn``: every seat's cost and, with data, its rows)."""

    seats: np.ndarray
    population: Any
    drawn: Any

    @property
    def costs(self) -> np.ndarray:
        return self.drawn.costs

    @property
    def data(self) -> tuple | None:
        """(X, y, X_test, y_test), or None without data."""
        mk = self.drawn
        return None if mk.data is None else (*mk.data, *mk.test)


def _sample_markets(population, seats, cost_seeds) -> list[_SampleMarket]:
    """Per sample, one draw of the population (``pop.sample``) with its own seed."""
    return [
        _SampleMarket(seating, population, population.sample(np.random.default_rng(cs)))
        for seating, cs in zip(seats, cost_seeds, strict=True)
    ]


def _population_of(dist, n_sellers, context):
    """The Population (``as_population``: a cost law needs ``n_sellers``; a population's
    own count wins, a conflicting ``n_sellers`` is an error) and the law the mechanism
    and the model believe in (the pooled law)."""
    from ..population import as_population

    pop = as_population(dist, n_sellers)
    if not pop.is_plain and context.get("new_costs_each_round"):
        raise MarketSimError(
            "new_costs_each_round redraws every cost from one law: with a population of "
            "several classes or with data, each market keeps its draw (leave it out)"
        )
    if pop.has_data and "data" in context:
        raise MarketSimError("give the data through the population or data=, not both")
    return pop, pop.pooled


def _run_markets(dev, full, built, n, mech, dist, rounds, last, seeds, markets, ctx, progress,
                 where):  # fmt: skip
    """sample_payoffs (F x samples): every market under every seed (common random
    numbers: seed k gives every market the same costs and the same seating, so two
    markets with the same others differ in the deviator's strategy alone), one task per
    (profile f, sample k), run where ``where`` says (``market_sim.execution``)."""
    F, K = full.shape[0], len(seeds)
    built, mech, dist, ctx = (Shared(v) for v in (built, mech, dist, ctx))  # one copy a worker
    jobs = [
        Job(f"{f}/{k}", _simulate,
            (int(dev[f]), full[f], built, n, mech, dist, rounds, last, seeds[k], markets[k], ctx))
        for f in range(F)
        for k in range(K)
    ]  # fmt: skip
    Y = run_jobs(jobs, progress="simulations" if progress else False, preload=_PRELOAD, **where)
    return np.array(Y, dtype=float).reshape(F, K)


_PRELOAD = ("market_sim.egta", "market_sim.agents")


def _request(mechanism, pop, strategies, samples, seed, rng_state, players, rounds, last,
             context) -> dict:  # fmt: skip
    """What decides an egta's tasks (the store's manifest): a value that is not a plain
    number or string by a digest of its pickle."""
    import hashlib
    import pickle

    from ..mechanisms.base import mechanism_name

    def plain(v):
        if isinstance(v, (int, float, str, bool)) or v is None:
            return v
        try:
            return "pickle-sha256:" + hashlib.sha256(pickle.dumps(v)).hexdigest()[:16]
        except Exception:
            return repr(v)

    return {
        "mechanism": mechanism if isinstance(mechanism, str) else mechanism_name(mechanism),
        "population": pop.spec, "strategies": list(strategies), "samples": samples,
        "seed": seed, "rng_state": rng_state, "players": players, "rounds": rounds,
        "last_rounds": last, "context": {k: plain(v) for k, v in sorted(context.items())},
    }  # fmt: skip


def _reduce(weights: np.ndarray, profiles: np.ndarray, per_profile: np.ndarray) -> np.ndarray:
    """Reduced tables (... x P x S) from the deviators' payoffs (... x F): the DPR's
    weighted means (NaN where the strategy is not played)."""
    out = np.einsum("psf,...f->...ps", weights, per_profile)
    return np.where(profiles > 0, out, np.nan)


def _with_intervals(result: EgtaResult, found) -> EgtaResult:
    """The result with its equilibria and their one-sided regret intervals [0, q], q from
    the band :func:`regret_upper_bounds` (valid for all of them at once)."""
    game = result.game
    eqs = []
    if found:
        xs = np.array([x for x, _ in found])
        upper = regret_upper_bounds(
            game, result.seed_tables(), xs, n_boot=result.n_boot, seed=result.boot_seed
        )
        for (x, r), q in zip(found, upper, strict=True):
            eqs.append(Equilibrium(game.mixture(x), r, (0.0, max(float(q), r))))
    return replace(result, equilibria=tuple(eqs))


def egta(
    mechanism,
    population,
    n_sellers: int | None = None,
    strategies: Sequence[str] = (),
    samples: int = 10,
    *,
    seed: int | None = None,
    rng: np.random.Generator | None = None,
    players: int = 4,
    rounds: int = 1,
    last_rounds: int | None = None,
    n_boot: int = 1000,
    regret_tol: float = 1e-3,
    progress: bool = False,
    workers: int = 1,
    executor: str = "local",
    address: str | None = None,
    store=None,
    **context,
) -> EgtaResult:
    """Empirical game of ``strategies`` (specs or BNEResults, at least 2) among a
    population's sellers.

    ``mechanism``: a spec, class or instance; ``population``: a
    :class:`~market_sim.population.Population` or its spec (``n_sellers`` from it), or a
    cost law (spec or CostDistribution) with ``n_sellers``; ``players``: reduced players
    of the DPR (capped at N); each needed profile is simulated ``samples`` times for
    ``rounds`` rounds, with ``seed`` (or ``rng``).  ``context`` goes to
    :class:`~market_sim.agents.MarketModel` (mu, sigma, gamma, privacy,
    new_costs_each_round, xi, ...).  ``workers``, ``executor``, ``address``: where the
    simulations run, one task per (profile, sample) (``market_sim.execution``; the same
    table on any of them); ``store``: a folder keeping each finished simulation, so that
    the same call resumes (another call into it is refused).  See the module doc."""
    from ..agents import as_strategy

    t0 = time.perf_counter()
    check_executor(workers, executor, address)
    rng_state = rng.bit_generator.state if isinstance(rng, np.random.Generator) else None
    labels = _check_strategies(strategies)
    built = [as_strategy(s) for s in strategies]  # unknown names fail before any run
    strategies = labels
    pop, dist = _population_of(population, n_sellers, context)
    n, samples, rounds, players, last, n_boot = _check_numbers(
        pop.n_sellers, samples, rounds, players, last_rounds, n_boot, regret_tol
    )
    mech, name = _build_mechanism(mechanism, pop, dist, context)
    if store is not None:
        request = _request(mechanism, pop, strategies, samples, seed, rng_state, players, rounds,
                           last, context)  # fmt: skip
        store = open_store(store, "egta", request)
    seeds, boot_seed, seats, cost_seeds = _seeds(seed, rng, samples, n)
    markets = _sample_markets(pop, seats, cost_seeds)
    model_context = {"measure_regret": False, "agent_views": False, **context}

    reduced, dev, full, weights = _dpr_plan(len(strategies), n, players)
    where = dict(workers=workers, executor=executor, address=address, store=store)
    Y = _run_markets(
        dev, full, built, n, mech, dist, rounds, last, seeds, markets, model_context, progress,
        where,
    )  # fmt: skip
    game = SymmetricGame(strategies, players, reduced, _reduce(weights, reduced, Y.mean(axis=1)))
    result = EgtaResult(
        mechanism=name, dist=dist.spec, n_sellers=n, players=players, samples=samples,
        rounds=rounds, last_rounds=last, strategies=strategies, game=game, full_profiles=full,
        deviator=dev, sample_payoffs=Y, weights=weights, seats=seats, equilibria=(),
        n_boot=n_boot, boot_seed=boot_seed, seconds=0.0, seed=seed,
        context={k: v for k, v in context.items() if isinstance(v, (int, float, str, bool))},
        population=pop.spec, class_laws=tuple(law.spec for law in pop.laws),
        deviator_class=pop.group[seats[:, 0]],
    )  # fmt: skip
    result = _with_intervals(result, find_equilibria(game, regret_tol=regret_tol))
    return replace(result, seconds=time.perf_counter() - t0)


# ---- the figure ------------------------------------------------------------------------------
def plot(result: EgtaResult, path) -> None:
    """Two strategies: u_s(x) against the share of the second; three: the regret over
    the simplex; more: the equilibria's shares as bars.  Equilibria marked."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    S = len(result.strategies)
    title = (
        f"EGTA: {result.mechanism}, {result.dist}, N={result.n_sellers} "
        f"(DPR {result.players} players, {result.samples} samples)"
    )
    if S == 2:
        fig = _plot_two(result, plt)
    elif S == 3:
        fig = _plot_three(result, plt)
    else:
        fig = _plot_many(result, plt)
    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    save_png(fig, path, dpi=100)


def _plot_two(result: EgtaResult, plt):
    """u_s(x) against the share of the second strategy, and the gain of switching to it
    with its pointwise bootstrap band; the equilibria marked."""
    game, names = result.game, result.strategies
    S = len(names)
    fig, (ax, low) = plt.subplots(
        2, 1, figsize=(7.5, 6.4), sharex=True, gridspec_kw={"height_ratios": [3, 2]}
    )
    share = np.linspace(0, 1, 201)
    X = np.column_stack([1 - share, share])
    U = game.deviation_payoffs(X)
    for s in range(S):
        ax.plot(share, U[:, s], lw=2, label=f"payoff of {names[s]}")
    # the gain of switching, a paired difference: its bootstrap band is narrow
    boot = np.array(
        [
            np.diff(SymmetricGame(names, game.players, game.profiles, t).deviation_payoffs(X))
            for t in result._boot_games(min(result.n_boot, 200), result.boot_seed)
        ]
    )[..., 0]
    lo, hi = np.quantile(boot, [0.025, 0.975], axis=0)
    low.plot(share, U[:, 1] - U[:, 0], color="C2", lw=2)
    low.fill_between(share, lo, hi, color="C2", alpha=0.25, lw=0, label="95% bootstrap")
    low.axhline(0, color="k", lw=0.8)
    for e in result.equilibria:
        x1 = e.mixture[names[1]]
        for a in (ax, low):
            a.axvline(x1, color="k", ls="--", lw=1)
        ax.annotate(
            f"equilibrium, regret {e.regret:.2g}",
            (x1, ax.get_ylim()[1]),
            textcoords="offset points",
            xytext=(3 if x1 < 0.5 else -3, -12),
            ha="left" if x1 < 0.5 else "right",
            fontsize=8,
        )
    ax.set(ylabel="expected payoff\n(mean utility per round)")
    ax.legend(loc="best", fontsize=9)
    low.set(
        xlabel=f"population share of {names[1]} (the rest: {names[0]})",
        ylabel=f"gain of {names[1]}\nover {names[0]}",
    )
    low.legend(loc="best", fontsize=8)
    return fig


def _plot_three(result: EgtaResult, plt):
    """The regret over the simplex, the equilibria starred."""
    game, names = result.game, result.strategies
    fig, ax = plt.subplots(figsize=(7, 6))
    k = 60
    pts = np.array([(i, j, k - i - j) for i in range(k + 1) for j in range(k + 1 - i)]) / k
    corners = np.array([[0.0, 0.0], [1.0, 0.0], [0.5, np.sqrt(3) / 2]])
    xy = pts @ corners
    reg = np.asarray(game.regret(pts))
    tc = ax.tricontourf(xy[:, 0], xy[:, 1], reg, levels=20, cmap="viridis_r")
    fig.colorbar(tc, ax=ax, label="regret of the mixture")
    ax.plot(*np.vstack([corners, corners[:1]]).T, color="k", lw=1)
    for c, label, (dx, dy) in zip(corners, names, [(0, -16), (0, -16), (0, 8)], strict=True):
        ax.annotate(label, c, textcoords="offset points", xytext=(dx, dy), ha="center")
    for e in result.equilibria:
        p = np.array([e.mixture[s] for s in names]) @ corners
        ax.plot(*p, "r*", ms=14, mec="w")
        ax.annotate(
            f"regret {e.regret:.2g}", p, textcoords="offset points", xytext=(6, 6), fontsize=8
        )
    ax.set_aspect("equal")
    ax.set(xlim=(-0.12, 1.12), ylim=(-0.1, 0.97))
    ax.axis("off")
    return fig


def _plot_many(result: EgtaResult, plt):
    """The gain of one seller's switch from every pure profile (a heatmap) and the
    equilibria's shares as bars."""
    game, names = result.game, result.strategies
    S = len(names)
    # the gain of one seller switching from s (everybody's strategy) to t
    gain = np.array(
        [game.deviation_payoffs(v) - game.deviation_payoffs(v)[i] for i, v in enumerate(np.eye(S))]
    )
    fig, (ax, bars) = plt.subplots(
        1, 2, figsize=(11, 0.9 * S + 2.2), gridspec_kw={"width_ratios": [3, 2]}
    )
    top = float(np.max(np.abs(gain))) or 1.0
    im = ax.imshow(gain, cmap="RdBu_r", vmin=-top, vmax=top)
    for i, j in itertools.product(range(S), range(S)):
        dark = abs(gain[i, j]) > 0.6 * top
        ax.text(
            j,
            i,
            f"{gain[i, j]:.2g}",
            ha="center",
            va="center",
            fontsize=8,
            color="w" if dark else "k",
        )
    ax.set_xticks(range(S), names, rotation=20, ha="right", fontsize=8)
    ax.set_yticks(range(S), [f"all {n}" for n in names], fontsize=8)
    ax.set(xlabel="one seller switches to", title="gain of one seller's switch")
    fig.colorbar(im, ax=ax, shrink=0.8)
    left = np.zeros(len(result.equilibria))
    for name in names:
        w = np.array([e.mixture[name] for e in result.equilibria])
        bars.barh(range(len(w)), w, left=left, label=name)
        left += w
    bars.set_yticks(
        range(len(result.equilibria)),
        [f"regret {e.regret:.2g}" for e in result.equilibria],
        fontsize=8,
    )
    bars.invert_yaxis()
    bars.set(xlabel="population share", xlim=(0, 1), title="equilibria")
    bars.legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.25), ncol=2)
    return fig
