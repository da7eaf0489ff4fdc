"""Equilibria of a symmetric meta-game: discrete replicator dynamics from the centre, every
vertex's neighbourhood and every edge's midpoint, and the pure profiles
(``find_equilibria``; ``market_sim.games.egta``'s module doc, "Equilibria").
"""

from __future__ import annotations

import itertools

import numpy as np

from .symmetric_game import SymmetricGame


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
