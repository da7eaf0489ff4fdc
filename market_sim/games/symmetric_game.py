"""The symmetric meta-game of EGTA in counts form, and its deviation-preserving reduction.

``SymmetricGame``: a symmetric game of ``players`` players over pure strategies, its
payoffs per profile of counts, mixtures' expected payoffs and regrets.  The DPR
(Wiedenbeck & Wellman 2012; ``dpr_support``, ``dpr_game``, ``dpr_exact``) keeps n reduced
players of an N-seller game; ``market_sim.games.egta``'s module doc has the definitions.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from math import factorial

import numpy as np

from ..errors import MarketSimError


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
