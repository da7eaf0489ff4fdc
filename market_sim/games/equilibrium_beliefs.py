"""``bne``'s opt-in last stage (``beliefs_rounds``; issue #48): fictitious play in
beliefs on large samples, from the pure method's tables.

The pure method's damped responses are each fitted to one sample of opponents; where a
seller's utility has two peaks (pay-as-bid's cheapest sellers: a low report for a
large eps, or a high one) its best response jumps, and a response read off one sample
moves from round to round by more than the equilibrium's gains.  Here the sample's
noise is averaged in the *belief*, not in the bids:

1. **Observe.**  Each round, fresh opponents play the current tables; class g's mean
   eps Ē(z) and payment T̄(z) of a deviator are measured at a fixed set of reports z
   (``report_set``) on ``beliefs_markets`` markets, in seeded chunks of ``CHUNK``
   markets (the runner's executors, ``beliefs_workers`` processes, by default every
   core: the numbers do not depend on how many).
2. **Believe.**  The belief is the running mean of the rounds' curves (fictitious play
   in beliefs: each round's opponents are one more draw of the play so far), restarted
   every ``beliefs_epoch`` rounds so the start's tables are forgotten.
3. **Respond.**  Every cost c of a fine grid takes the report maximising
   T̄(z) - c Ē(z) (a utility is linear in the cost).  At the responses' jump
   (``jump_cells``; the largest) a **step**, at the cost where its two reports pay the
   same, c = (T̄2 - T̄1) / (Ē2 - Ē1) (``steps_table``): a linear blend there would bid
   between two branches, a report nobody's best.  Below it the responses as
   ``ramps`` (each run of one report held at its middle, linear in between), above it
   the solver's spline (``equilibrium_pure._smooth``, in the quantile): continuous, for
   flats are atoms of the class's bids, which make the others' eps jump.

What it reaches is in docs/equilibrium.md, "Pay-as-bid on a Beta law"."""

from __future__ import annotations

import math
import os
import sys

import numpy as np

from ..execution import Job, Shared, in_worker, run_jobs
from ..mechanisms.base import Mechanism
from .equilibrium_game import Classes, Interim, Oracle, Sample, jump_cells, reports_of
from .equilibrium_pure import _linear, _smooth, _State
from .equilibrium_setup import _Options, _Setup

#: markets per seeded chunk of a round's observation (a power of two: a Sobol net)
CHUNK = 1024
#: the reports observed: a geometric grid above the lowest report with this ratio ...
REPORT_RATIO = 1.02
#: ... from this share of the report range up, and an even grid of this many
REPORT_EVEN = 100
REPORT_FLOOR = 1e-3
#: costs of the response grid (responses are read off the belief: costs are free)
GRID = 2001


def play_beliefs(
    setup: _Setup, opt: _Options, oracle: Oracle, state: _State, jumps, rng, progress
) -> tuple[list[list[float]], list[float]]:
    """``opt.beliefs_rounds`` rounds of fictitious play in beliefs (module doc), all
    classes at once, the tables in ``state`` replaced; per class the cost of the jump's
    step of the last round (``options["jumps"]``), and each round's change of the
    tables (the largest class's mean |new bid - old bid| on its response grid).  A
    class's responses are cut at a jump only when the pure method found one (``jumps``,
    per class: a jump that persisted over its iterations and was made a step by
    ``_sharpen``): a response read off a belief, among discrete reports, rises steeply
    here and there (first price, 4 sellers, 4096 markets: a "jump" at c = 0.135, and
    steps below it, ε̂ / u 1.08)."""
    from tqdm import tqdm

    G = len(setup.classes.laws)
    grids = [response_grid(law, state.c_top[g]) for g, law in enumerate(setup.classes.laws)]
    reports = [report_set(setup.z_range, state.z_top, float(b[0])) for b in state.bids]
    belief: list = []
    steps: list[list[float]] = [[] for _ in range(G)]
    changes: list[float] = []
    bar = tqdm(total=opt.beliefs_rounds, desc="beliefs", file=sys.stderr, disable=not progress)
    for r in range(opt.beliefs_rounds):
        seen = observe(setup, opt, oracle, state, reports, rng)
        if r % opt.beliefs_epoch == 0:  # a new epoch: the belief restarted
            belief, k = list(seen), 1
        else:
            k += 1
            belief = [tuple(b + (s - b) / k for b, s in zip(bg, sg, strict=True))
                      for bg, sg in zip(belief, seen, strict=True)]  # fmt: skip
        before = [
            np.interp(x, c, b) for x, c, b in zip(grids, state.costs, state.bids, strict=True)
        ]
        for g in range(G):
            E, T = belief[g]
            costs, bids, steps[g] = table_from_belief(
                grids[g], reports[g], E, T, opt.knots, setup.classes.laws[g], state, g,
                bool(jumps[g]),
            )  # fmt: skip
            state.costs[g], state.bids[g] = costs, np.clip(bids, *setup.z_range)
        moved = max(
            float(np.mean(np.abs(np.interp(x, c, b) - b0)))
            for x, c, b, b0 in zip(grids, state.costs, state.bids, before, strict=True)
        )
        changes.append(moved)
        bar.update(1)
        bar.set_postfix({"mean change": f"{moved:.2g}"})
    bar.close()
    return steps, changes


def response_grid(law, c_top: float) -> np.ndarray:
    """``GRID`` even costs on [low, c_top] (a step's cost is solved exactly, so the grid
    only decides which reports are tried)."""
    return np.linspace(law.support[0], c_top, GRID)


def report_set(z_range: tuple[float, float], z_top: float, lowest_bid: float) -> np.ndarray:
    """The reports observed, fixed for the stage (a belief averages curves at the same
    reports): z_lo + w REPORT_RATIO^k (w = z_top - z_lo; the spacing is 2% of the report
    above z_lo: a seller whose eps is large and steep, at a low report, needs finer
    reports than one at a high report, whose utility is flat near its peak) from half
    the class's lowest bid at the stage's start above z_lo (at least ``REPORT_FLOOR`` w:
    the geometric reports far below every bid are never a response and cost the most;
    pay-as-bid, 30 sellers: 290 reports instead of 449), and ``REPORT_EVEN`` even
    reports on [z_lo, z_top]."""
    z_lo = z_range[0]
    w = max(z_top - z_lo, 1e-12)
    floor = min(max(REPORT_FLOOR, 0.5 * (lowest_bid - z_lo) / w), 1.0)
    k = math.ceil(math.log(1.0 / floor) / math.log(REPORT_RATIO))
    geometric = z_lo + w * floor * REPORT_RATIO ** np.arange(k + 1)
    even = np.linspace(z_lo, z_top, REPORT_EVEN)
    return np.unique(np.clip(np.r_[geometric, even], z_lo, z_top))


def observe(setup: _Setup, opt: _Options, oracle: Oracle, state: _State, reports, rng):
    """Per class (Ē, T̄) at its reports against fresh opponents playing the tables: on
    the interim path exactly, else the weighted mean over ``beliefs_markets`` markets in
    seeded chunks of ``CHUNK`` (each chunk's seed drawn here: the numbers do not depend
    on ``beliefs_workers``)."""
    if oracle.path == "interim":
        laws = Interim(setup.classes, state.costs, state.bids, setup.cdfs)
        out = []
        for g in range(len(setup.classes.laws)):
            E, T = oracle.eps_pay(laws, None, g, reports[g])
            out.append((E[0], T[0]))
        return out
    chunks = max(1, -(-opt.beliefs_markets // CHUNK))
    seeds = rng.integers(2**63, size=chunks)
    per_market = max(setup.classes.counts) if oracle.path == "deviations" else 1
    game = Shared((setup.mech, setup.classes))
    jobs = [
        Job(f"beliefs-{i}", observe_chunk,
            (game, state.costs, state.bids, reports, int(s), per_market, oracle.outcome_only))
        for i, s in enumerate(seeds)
    ]  # fmt: skip
    workers = min(len(jobs), opt.beliefs_workers or available_cores())
    parts = run_jobs(jobs, workers=workers, preload=("market_sim.games.equilibrium",))
    weight = sum(p[0] for p in parts)
    out = []
    for g in range(len(setup.classes.laws)):
        E = sum(p[1][g][0] for p in parts) / weight
        T = sum(p[1][g][1] for p in parts) / weight
        out.append((E, T))
    oracle.calls += sum(p[2] for p in parts)
    return out


def available_cores() -> int:
    """The cores this process may run on (``beliefs_workers``' default); one inside a
    runner's worker (``bne_sweep``: its tasks already use every core; no pool in a pool)."""
    if in_worker():
        return 1
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not on Linux
        return max(1, os.cpu_count() or 1)


def observe_chunk(
    game: tuple[Mechanism, Classes], costs, bids, reports, seed: int, per_market: int,
    placed: bool,
):  # fmt: skip
    """One seeded chunk: (total weight, per class the weighted sums of eps and payment
    at its reports, the report vectors evaluated)."""
    mech, classes = game
    oracle = Oracle(mech)  # a sampled path: the interim one never reaches the chunks
    sample = Sample(classes, CHUNK, per_market, np.random.default_rng(seed), placed=placed)
    R = reports_of(sample, classes, [_linear(c, b) for c, b in zip(costs, bids, strict=True)])
    sums = []
    for g in range(len(classes.laws)):
        E, T = oracle.eps_pay(sample, R, g, reports[g])
        sums.append((sample.weights @ E, sample.weights @ T))
    return float(sample.weights.sum()), sums, oracle.calls


def table_from_belief(grid, reports, E, T, knots: int, law, state: _State, g: int, cut: bool):
    """Class g's new table from the belief (module doc, step 3): (costs, bids, the
    cost of the jump's step); with ``cut``, ramps below the responses' largest jump
    (``jump_cells``), a step at it and a spline above, else one spline.  Costs whose
    best report gets nothing, or gains nothing (U <= 0), keep the current table's
    bids."""
    U = T[None, :] - grid[:, None] * E[None, :]
    best = np.argmax(U, axis=1)
    sells = (U[np.arange(grid.size), best] > 0) & (E[best] > 0)
    end = int(np.flatnonzero(sells)[-1]) + 1 if sells.any() else 0
    if end < 4:
        return state.costs[g], state.bids[g], []
    best = np.maximum.accumulate(best[:end])
    br = reports[best]
    x = grid[:end]
    cells = jump_cells(x, br) if cut else []
    if cells:
        i, j = max(cells, key=lambda ij: br[ij[1]] - br[ij[0]])
        sx, sy = steps_table(x[i : j + 1], best[i : j + 1], reports, E, T)
        k = int(np.argmax(np.diff(sy)))  # the jump's step: (c* - h, c*)
        m = int(np.searchsorted(x, sx[k]))  # the grid costs below it
        upper = _smooth(x[j:], br[j:], knots, math.inf, law)
        xs = np.r_[x[:m], sx[k : k + 2], x[j:]]
        ys = np.r_[ramps(x[:m], best[:m], reports), sy[k : k + 2], upper]
        jumps = [float(sx[k + 1])]
    else:
        xs, ys, jumps = x, _smooth(x, br, knots, math.inf, law), []
    keep = state.costs[g] > xs[-1]
    costs = np.r_[xs, state.costs[g][keep]]
    bids = np.maximum.accumulate(np.r_[ys, state.bids[g][keep]])
    return costs, bids, jumps


def ramps(costs, best, reports) -> np.ndarray:
    """The responses (``best``, indices into ``reports``, non-decreasing) as a continuous
    bid function at ``costs``: each run of costs with the same best report holds it at
    the run's middle, linear in between (flat before the first middle and after the
    last).  Not steps: a step table's flats are atoms of the class's bids, and an
    opponent's atom makes a deviator's expected eps jump at reports far from it
    (pay-as-bid, 30 sellers: the lower branch's steps at the 449 reports put drops of
    about 1% of u into the upper branch's utility, at reports near 0.2264 and 0.2342,
    gone with the lower branch made continuous; docs/equilibrium.md)."""
    if not costs.size:
        return np.asarray(costs, dtype=float)
    change = np.flatnonzero(np.diff(best)) + 1
    first, last = np.r_[0, change], np.r_[change - 1, best.size - 1]
    return np.interp(costs, 0.5 * (costs[first] + costs[last]), reports[best[first]])


def steps_table(costs, best, reports, E, T) -> tuple[np.ndarray, np.ndarray]:
    """The responses (``best``, indices into ``reports``, non-decreasing) as a step
    table: where two neighbouring costs' best reports differ, a step at the cost where
    both pay the same, T1 - c E1 = T2 - c E2 (clipped to their cell)."""
    xs, ys = [costs[0]], [reports[best[0]]]
    h = 1e-9 * max(costs[-1] - costs[0], 1e-300)
    for i in np.flatnonzero(np.diff(best)):
        a, b = best[i], best[i + 1]
        at = (T[b] - T[a]) / (E[b] - E[a]) if E[b] != E[a] else costs[i + 1]
        at = float(np.clip(at, costs[i] + 2 * h, costs[i + 1] - 2 * h))
        xs += [at - h, at]
        ys += [reports[a], reports[b]]
    xs.append(costs[-1])
    ys.append(reports[best[-1]])
    return np.asarray(xs), np.asarray(ys)
