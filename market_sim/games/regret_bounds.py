"""Regret intervals of a meta-game's mixtures from the seeds' payoff tables: the gains'
noise by a Gaussian multiplier bootstrap over the seeds (``gain_noise``), a one-sided band
uniform over the simplex for estimated equilibria (``regret_upper_bounds``), the test of a
mixture fixed in advance (``regret_test``), and the former bootstrap bound kept to measure
against (``equilibrium_regret_bounds``; ``market_sim.games.egta``'s module doc, docs/egta.md).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ..errors import MarketSimError
from ..parameters import check_int
from .symmetric_game import SymmetricGame, _compositions


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
