"""EGTA coverage: do the regret intervals hold their level on games with a known equilibrium?

    python benchmarks/egta_coverage.py [--reps 500] [--boot 1000] [--workers 2] [--former 0]

Three games of 13 sellers reduced to 4 players (``egta.linear_game``: payoffs linear in
the others' counts, so the reduction is exact and the true regret of any mixture is known
in closed form), each observed as K seeds' payoff tables, the true table plus
N(0, sd^2) noise per market (a reduced entry), at sd 0.1 and 0.3 and K = 10 and 40:

* ``pure``: s0 dominant (u_0 - u_1 = 0.1 + 0.05 x_1), the equilibrium all-s0;
* ``mixed``: u_0 - u_1 = -0.1 + 0.19 x_1, the equilibrium x_1 = 10/19 (issue #49's game);
* ``boundary``: the mixed game's two strategies and s2, 0.05 worse than the others at
  their equilibrium (u_2 = 0.45): the equilibrium (9/19, 10/19, 0) on an edge.

Per run: the estimated equilibria (``find_equilibria`` of the mean table) and their
one-sided 95% intervals [0, q] (``regret_upper_bounds``); the test of "the true
equilibrium is an equilibrium" (``regret_test``, 5%).  Columns: ``cover`` (every
reported equilibrium's true regret <= q), ``cover|vertex`` (the runs whose first estimate
is a pure profile), ``median q``, ``reject x*`` (the test's rejection rate at the true
equilibrium: its size), ``former`` (the former bound, each replicate's own equilibrium, on
the first ``--former`` runs with 100 resamples; slow).  Seeded: the same numbers for any
``--workers``.  Exit status 1 if a cell's coverage is below 93%.
"""

from __future__ import annotations

import argparse
import sys
import time
from concurrent.futures import ProcessPoolExecutor

import numpy as np

from market_sim.games.egta import (
    SymmetricGame,
    equilibrium_regret_bounds,
    find_equilibria,
    linear_game,
    regret_test,
    regret_upper_bounds,
)

N_SELLERS, LEVEL = 13, 0.95
GAMES = {  # (a, b, the true equilibrium)
    "pure": ([0.5, 0.4], [[0, 0.05 / 12], [0, 0]], [1.0, 0.0]),
    "mixed": ([0.4, 0.5], [[0, 0.19 / 12], [0, 0]], [9 / 19, 10 / 19]),
    "boundary": (
        [0.4, 0.5, 0.45],
        [[0, 0.19 / 12, 0], [0, 0, 0], [0, 0, 0]],
        [9 / 19, 10 / 19, 0.0],
    ),
}


def _seed_tables(true: SymmetricGame, rng, K: int, sd: float) -> np.ndarray:
    noise = sd * rng.standard_normal((K, *true.payoffs.shape))
    return np.where(true.profiles > 0, true.payoffs + noise, np.nan)


def _former(true: SymmetricGame, rng, Y: np.ndarray, xs: np.ndarray) -> np.ndarray:
    """The former bound of xs[0] (each replicate's own equilibrium; 100 resamples)."""
    K = Y.shape[0]
    w = rng.multinomial(K, np.full(K, 1 / K), size=100) / K
    tables = np.einsum("bk,kps->bps", w, Y)
    return equilibrium_regret_bounds(true, Y.mean(axis=0)[None], tables[None], xs[:1], LEVEL)


def cell(game: str, sd: float, K: int, reps: int, boot: int, former: int, seed) -> dict:
    """One row of the table: ``reps`` runs of one game at one noise level and one K."""
    a, b, eq = GAMES[game]
    true, x_star = linear_game(a, b, N_SELLERS), np.array(eq)
    rng = np.random.default_rng(seed)
    cover, vertex, widths, reject, old = [], [], [], [], []
    for r in range(reps):
        Y = _seed_tables(true, rng, K, sd)
        estimate = SymmetricGame(true.strategies, true.players, true.profiles, Y.mean(axis=0))
        xs = np.array([x for x, _ in find_equilibria(estimate)])
        q = regret_upper_bounds(true, Y, xs, level=LEVEL, n_boot=boot, seed=[seed, r])
        truth = np.atleast_1d(true.regret(xs))
        cover.append(bool(np.all(truth <= q)))
        vertex.append(bool(xs[0].max() > 0.999))
        widths.append(float(q[0]))
        reject.append(regret_test(true, Y, x_star, n_boot=boot, seed=[seed, r]).p_value < 0.05)
        if r < former:
            old.append(bool(truth[0] <= _former(true, rng, Y, xs)[0]))
    c, v = np.array(cover), np.array(vertex)
    print(f"done: {game} sd {sd} K {K}", file=sys.stderr, flush=True)
    return {
        "game": game, "sd": sd, "K": K, "reps": reps, "cover": c.mean(),
        "vertex": v.mean(), "cover_vertex": c[v].mean() if v.any() else np.nan,
        "median_q": float(np.median(widths)), "reject": float(np.mean(reject)),
        "former": float(np.mean(old)) if old else np.nan,
    }  # fmt: skip


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=500)
    ap.add_argument("--boot", type=int, default=1000)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--former", type=int, default=0, help="runs with the former bound too")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    cells = [(g, sd, K) for g in GAMES for sd in (0.1, 0.3) for K in (10, 40)]
    seeds = [
        int(s.generate_state(1)[0]) for s in np.random.SeedSequence(args.seed).spawn(len(cells))
    ]
    t0 = time.perf_counter()
    with ProcessPoolExecutor(args.workers) as pool:
        jobs = [
            pool.submit(cell, *c, args.reps, args.boot, args.former, s)
            for c, s in zip(cells, seeds, strict=True)
        ]
        rows = [job.result() for job in jobs]
    se = np.sqrt(LEVEL * (1 - LEVEL) / args.reps)
    print(f"nominal {LEVEL:.0%}; {args.reps} runs a cell (binomial sd of the coverage {se:.1%}); "
          f"{args.boot} draws")  # fmt: skip
    print("| game | sd | K | cover [0, q] | estimate on a vertex | cover there | median q "
          "| test at x* rejects (5%) | former bound covers |")  # fmt: skip
    print("|---|---|---|---|---|---|---|---|---|")
    for w in rows:
        former = "" if np.isnan(w["former"]) else f"{w['former']:.1%} ({args.former})"
        there = "–" if np.isnan(w["cover_vertex"]) else f"{w['cover_vertex']:.1%}"
        print(f"| {w['game']} | {w['sd']} | {w['K']} | {w['cover']:.1%} | {w['vertex']:.0%} | "
              f"{there} | {w['median_q']:.3f} | {w['reject']:.1%} | "
              f"{former} |")  # fmt: skip
    print(f"{time.perf_counter() - t0:.0f} s")
    return 0 if min(w["cover"] for w in rows) >= 0.93 else 1


if __name__ == "__main__":
    raise SystemExit(main())
