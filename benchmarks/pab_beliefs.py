"""Pay-as-bid's cheap sellers (Beta(2, 5) on [0, 2], 30 sellers) solved by fictitious
play in beliefs on large samples, and measured by an independent search (issue #48).

    python benchmarks/pab_beliefs.py --bids TABLE.npz [--rounds R] [--markets M]
        [--top C] [--bottom C] [--smooth DEG [--split C|auto]] [--skip-measure]
        [--search-markets M] [--measure-markets M] [--seed S] [--workers W] [--out F]

The table (``costs``, ``bids``; ``pab_reference.py``'s ``.npz``, or this script's
``--out``) is kept outside [``--bottom``, ``--top``] (default [0, 0.12]); inside,
each round:

1. *Observe.* The deviator's mean eps E_t(z) at the reports ``REPORTS`` against the
   current table, on ``--markets`` fresh markets, every seller of a market deviating
   against the 29 others (``deviations``, the mechanism's own).
2. *Believe.* The belief is the running mean of the rounds' curves (fictitious play in
   beliefs: each round's opponents are one more draw of the play so far, and the
   sample's noise averages out over the rounds).
3. *Respond.* Every cost c of a fine grid takes the report maximising (z - c) E(z)
   (pay-as-bid pays z per unit of eps, so T(z) = z E(z)); the table becomes these
   responses **as steps**: between two costs whose best reports differ, the step is at
   the cost where both pay the same, c = (z2 E2 - z1 E1) / (E2 - E1).  A linear
   interpolation there would bid between two levels, a report nobody's best.
   With ``--smooth DEG`` and ``--bottom`` above the jump the responses are replaced by
   a least-squares polynomial of that degree in the cost instead (``--split C``: one
   on each side of C, a step there, unless it is down; ``--split auto``: where two
   pieces fit best, if they halve the error): a step table's flats are atoms of the
   others' bids, which the next round undercuts.  With ``--smooth DEG`` and ``--bottom 0``
   both branches answer the one belief each round (``joint_table``): steps below the
   jump (the responses' largest rise), the polynomial pieces above it.

Then the measure (``--rounds 0``: the measure alone), on two samples drawn from other
seeds: the best report of each measured cost on ``--search-markets`` markets (a grid
of 2e-4 below 0.075, 5e-4 above), and its gain over the table's bid on
``--measure-markets`` others (mean and 95% interval over markets, which share
opponents), over the ex-ante utility u of the table at 100 quantile costs on those
markets.

What it found (docs/equilibrium.md, "Pay-as-bid on a Beta law", 2026-12-01): on the
solver's seed-0 table with the defaults (8 rounds of 20,000 markets, then the
measure: 41 minutes on two cores) the largest gain / u rose to 0.62 at c = 0.009,
from 0.05-0.17.  The cheapest costs' best reports move by 10^-3 with the upper
branch's first cells, whose own utility is flat in the report (their responses
wandered 0.01 a round), and the belief averages over those moves.  So this is an
experiment, not a solver: it is kept to reproduce the numbers and as the start of
the next one.  On 2026-12-02 the two branches were solved in turn (the upper cells
with ``--bottom 0.0345 --top 0.125``, then the lower branch with ``--top 0.034``):
each stage brings the costs it solves within or near the bar and moves the other
branch's best reports out of it (the docs' "Alternating the branches").  Both
branches in one belief (``--bottom 0 --top 0.125 --smooth 3``, three runs from stage D's
table) reached a largest gain of 0.0088 of u [0.0064, 0.0113] at all 74 costs (the
docs' "Both branches in one belief"); that table is ``data/pab30_beta25_joint.npz``.
The same three runs from the solver's seed-0 table itself (no stages before them; 46
minutes of play) reached 0.0097 of u [0.0071, 0.0122] here and 0.0064 [0.0034, 0.0095]
by ``pab_reference.py`` (the docs' "Joint play from the solver's table"); that table is
``data/pab30_beta25_from_solver.npz``.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from multiprocessing import Pool
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from bne_reference import _market_means  # noqa: E402

from market_sim.distributions import as_distribution  # noqa: E402
from market_sim.mechanisms.base import as_mechanism  # noqa: E402

LAW, SELLERS = "beta:2:5:0:2", 30
#: the reports searched: the lower branch finely, the upper branch's first cells
REPORTS = np.unique(np.r_[np.arange(0.025, 0.075, 2e-4), np.arange(0.165, 0.27, 5e-4)])
#: the measure's reports: those and the upper branch to 0.35 (costs up to 0.2)
SEARCHED = np.unique(np.r_[REPORTS, np.arange(0.27, 0.35, 5e-4)])
CHUNKS = 16  # seeded chunks of markets: the numbers do not depend on --workers

_mech = None
_law = None


def _start_worker() -> None:
    global _mech, _law
    _law = as_distribution(LAW)
    _mech = as_mechanism("pay-as-bid", n_sellers=SELLERS, dist=_law, backend="numba")


def _chunk(job) -> np.ndarray:
    """Per market, the mean over its deviators of eps at each report (markets, reports):
    ``bne_reference``'s market loop, every seller deviating."""
    costs, bids, reports, seed, markets = job
    E, _ = _market_means(
        _mech, _law, SELLERS, lambda c: np.interp(c, costs, bids), reports, seed, markets, SELLERS
    )
    return E


def market_eps(pool, costs, bids, reports, markets: int, seed) -> np.ndarray:
    """(markets, reports): each market's mean eps of a deviator at each report."""
    seeds = np.random.SeedSequence(seed).spawn(CHUNKS)
    sizes = [markets // CHUNKS + (i < markets % CHUNKS) for i in range(CHUNKS)]
    jobs = [(costs, bids, reports, s, k) for s, k in zip(seeds, sizes, strict=True) if k]
    return np.vstack(pool.map(_chunk, jobs))


def best_reports(E: np.ndarray, costs: np.ndarray, reports: np.ndarray) -> np.ndarray:
    """Each cost's report maximising (z - c) E(z) (index into ``reports``)."""
    return np.argmax((reports[None, :] - costs[:, None]) * E[None, :], axis=1)


def as_steps(costs, best, E, reports) -> tuple[np.ndarray, np.ndarray]:
    """The responses as a step table: where two neighbouring costs' best reports differ,
    a step at the cost where both pay the same (clipped to their cell)."""
    best = np.maximum.accumulate(best)
    xs, ys = [costs[0]], [reports[best[0]]]
    for i in np.flatnonzero(np.diff(best)):
        a, b = best[i], best[i + 1]
        z1, z2, e1, e2 = reports[a], reports[b], E[a], E[b]
        at = (z2 * e2 - z1 * e1) / (e2 - e1) if e2 != e1 else costs[i + 1]
        at = float(np.clip(at, costs[i], costs[i + 1] - 2e-12))  # at + 1e-12 stays inside
        xs += [at, at + 1e-12]
        ys += [z1, z2]
    xs.append(costs[-1])
    ys.append(reports[best[-1]])
    return np.asarray(xs), np.asarray(ys)


def _fit(costs, responses, degree: int, split: float | None) -> np.ndarray:
    """Least-squares polynomials of ``degree``: one, or one on each side of ``split``."""
    whole = np.ones(costs.shape, bool)
    pieces = [whole] if split is None else [costs < split, costs >= split]
    out = np.empty_like(responses)
    for on in pieces:
        out[on] = np.polyval(np.polyfit(costs[on], responses[on], degree), costs[on])
    return out


def best_split(costs, responses, degree: int) -> float | None:
    """The cost (one of ``costs``, about 0.0025 apart, 0.01 inside the range) where
    two pieces fit the responses best; None unless they halve the one piece's squared
    error (a rise the one piece draws through, not the report grid's rounding)."""
    best, split = np.sum((_fit(costs, responses, degree, None) - responses) ** 2) / 2, None
    every = max(1, int(round(0.0025 / (costs[1] - costs[0]))))
    inside = np.flatnonzero((costs >= costs[0] + 0.01) & (costs <= costs[-1] - 0.01))
    for s in costs[inside[::every]]:
        two = np.sum((_fit(costs, responses, degree, float(s)) - responses) ** 2)
        if two < best:
            best, split = two, float(s)
    return split


def smoothed(costs, responses, degree: int, split: float | str | None) -> np.ndarray:
    """Least-squares polynomials of ``degree`` in the cost through the responses, one
    on each side of ``split`` (a step there; ``"auto"``: ``best_split``) when it is
    given, unless the step is down: a table is increasing, and its fill would be a
    flat, an atom of the others' bids."""
    if split == "auto":
        split = best_split(costs, responses, degree)
    out = _fit(costs, responses, degree, split)
    if split is None:
        return out
    i = int(np.searchsorted(costs, split))  # the first cost of the upper piece
    return out if out[i] >= out[i - 1] else _fit(costs, responses, degree, None)


def joint_table(grid, best, E, reports, degree: int, split: float | str | None):
    """Both branches from one belief: the responses below the jump (their largest rise
    between neighbouring costs) as steps, with the jump's step where both pay the same;
    above it, ``smoothed`` pieces."""
    best = np.maximum.accumulate(best)
    j = int(np.argmax(np.diff(reports[best])))  # grid[j] bids low, grid[j + 1] high
    xs, ys = as_steps(grid[: j + 2], best[: j + 2], E, reports)
    if isinstance(split, float) and not grid[j + 1] + 0.005 < split < grid[-1] - 0.005:
        split = None  # the jump moved past the split: one piece
    upper = smoothed(grid[j + 1 :], reports[best[j + 1 :]], degree, split)
    return np.r_[xs[:-1], grid[j + 1 :]], np.r_[ys[:-1], upper]


def play(pool, costs, bids, args) -> tuple[np.ndarray, np.ndarray]:
    """``--rounds`` of fictitious play in beliefs of the costs in [``--bottom``, ``--top``]."""
    lo, hi = args.bottom, args.top
    grid = np.linspace(lo, hi, int(round((hi - lo) / 1.25e-4)) + 1)
    below, above = costs < lo, costs > hi
    low_costs, low_bids = costs[below], bids[below]  # the table's, kept
    top_costs, top_bids = costs[above], bids[above]
    # above a held lower branch, only the upper branch's reports (and 0.02 below) compete
    reports = REPORTS[REPORTS >= np.interp(lo, costs, bids) - 0.02] if lo > 0 else REPORTS
    belief = None
    for r in range(args.rounds):
        t = time.time()
        E = market_eps(pool, costs, bids, reports, args.markets, [args.seed, r]).mean(0)
        belief = E if belief is None else belief + (E - belief) / (r + 1)
        best = best_reports(belief, grid, reports)
        before = np.interp(grid, costs, bids)
        played = reports[best]  # what the table now bids on the grid
        if args.smooth and lo == 0:  # both branches: steps below the jump, pieces above
            xs, ys = joint_table(grid, best, belief, reports, args.smooth, args.split)
            played = np.interp(grid, xs, ys)
        elif args.smooth:  # a polynomial through the responses: no flats, so no atoms
            xs, ys = grid, smoothed(grid, played, args.smooth, args.split)
            played = ys  # (the change printed is the table's, not the fit's residual)
        else:
            xs, ys = as_steps(grid, best, belief, reports)
        costs = np.r_[low_costs, xs, top_costs]
        bids = np.maximum.accumulate(np.r_[low_bids, ys, top_bids])
        moved = np.abs(played - before)
        worst = grid[np.argmax(moved)]
        print(f"round {r}: {time.time() - t:.0f} s; mean |response - bid| {moved.mean():.5f}, "
              f"largest {moved.max():.4f} at c = {worst:.4f}", flush=True)  # fmt: skip
    return costs, bids


def measure(pool, costs, bids, args) -> dict:
    """The independent search and measure (two other seeds) of the table's gains."""
    law = as_distribution(LAW)
    at = np.unique(np.r_[np.linspace(0.0005, 0.034, 40), np.linspace(0.035, 0.2, 34)])
    bid = np.interp(at, costs, bids)
    quantiles = np.asarray(law.ppf((np.arange(100) + 0.5) / 100))
    E = market_eps(pool, costs, bids, SEARCHED, args.search_markets, [args.seed, 10**6]).mean(0)
    best = SEARCHED[best_reports(E, at, SEARCHED)]
    P, inv = np.unique(np.r_[best, bid, np.interp(quantiles, costs, bids)], return_inverse=True)
    rows = market_eps(pool, costs, bids, P, args.measure_markets, [args.seed, 2 * 10**6])
    U = (P[inv][None, :] - np.r_[at, at, quantiles][None, :]) * rows[:, inv]
    k = at.size
    G = U[:, :k] - U[:, k : 2 * k]
    u_m = U[:, 2 * k :].mean(1)
    u = float(u_m.mean())
    g, se = G.mean(0), G.std(0, ddof=1) / np.sqrt(len(G))
    print(f"\nu = {u:.5g} +- {u_m.std(ddof=1) / np.sqrt(len(G)):.1g} "
          f"({len(G)} markets x {SELLERS} deviators)")  # fmt: skip
    print("    cost     bid    best   gain/u  95% interval")
    for c, b, z, gi, si in zip(at, bid, best, g, se, strict=True):
        print(f"  {c:.4f}  {b:.4f}  {z:.4f}  {gi / u:7.4f}  "
              f"[{(gi - 1.96 * si) / u:.4f}, {(gi + 1.96 * si) / u:.4f}]")  # fmt: skip
    i = int(np.argmax(g))
    lo, hi = (g[i] - 1.96 * se[i]) / u, (g[i] + 1.96 * se[i]) / u
    print(f"largest gain / u {g[i] / u:.4f} [{lo:.4f}, {hi:.4f}] at c = {at[i]:.4f}")
    return dict(utility=u, largest_relative=g[i] / u, ci=[lo, hi], at_cost=float(at[i]),
                costs=at.tolist(), bids=bid.tolist(), best=best.tolist(),
                relative_gains=(g / u).tolist())  # fmt: skip


def _split_arg(text: str) -> float | str:
    if text == "auto":
        return text
    try:
        return float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a cost or 'auto'") from None


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--bids", required=True, help="the solver's table (.npz: costs, bids)")
    p.add_argument("--rounds", type=int, default=8,
                   help="rounds of play (default 8; 0: measure the table as it is)")  # fmt: skip
    p.add_argument("--markets", type=int, default=20000, help="markets a round (20000)")
    p.add_argument("--search-markets", type=int, default=50000, help="(default 50000)")
    p.add_argument("--measure-markets", type=int, default=150000, help="(default 150000)")
    p.add_argument("--top", type=float, default=0.12, help="costs re-solved (default 0.12)")
    p.add_argument("--bottom", type=float, default=0.0, help="... from here (default 0)")
    p.add_argument("--skip-measure", action="store_true", help="play only, no measure")
    p.add_argument("--smooth", type=int, default=0,
                   help="responses above the jump as a polynomial of this degree, not "
                   "steps (with --bottom 0: both branches in one belief; with --bottom "
                   "above the jump: those costs alone; default 0: steps)")  # fmt: skip
    p.add_argument("--split", type=_split_arg,
                   help="--smooth: two pieces, a step at this cost (auto: where "
                   "they fit best)")  # fmt: skip
    p.add_argument("--seed", type=int, default=0, help="seed of every sample (default 0)")
    p.add_argument("--workers", type=int, default=2, help="processes (default 2)")
    p.add_argument("--out", help="write the table (.npz) and the measure (.json) here")
    args = p.parse_args(argv)
    for name in ("markets", "search_markets", "measure_markets", "workers"):
        if getattr(args, name) < 1:
            p.error(f"--{name.replace('_', '-')} must be at least 1")
    if args.rounds < 0 or (args.rounds == 0 and args.skip_measure):
        p.error("--rounds must be at least 0, and at least 1 with --skip-measure")
    if not 0.03 < args.top <= 0.25:
        p.error("--top must be in (0.03, 0.25]: the reports searched cover that range")
    if not 0.0 <= args.bottom < args.top - 0.005:
        p.error("--bottom must be in [0, top - 0.005)")
    if args.smooth and not (1 <= args.smooth <= 6 and (args.bottom == 0 or args.bottom > 0.028)):
        p.error("--smooth takes a degree 1-6, and --bottom 0 (both branches) or above the jump")
    if args.split is not None and not (
        args.smooth
        and (args.split == "auto" or args.bottom + 0.005 < args.split < args.top - 0.005)
    ):
        p.error("--split needs --smooth and a cost 0.005 inside (--bottom, --top)")
    try:
        table = np.load(args.bids)
        costs, bids = np.asarray(table["costs"], float), np.asarray(table["bids"], float)
    except (OSError, KeyError, ValueError) as e:
        p.error(f"--bids {args.bids}: not an .npz with costs and bids ({e})")
    with Pool(args.workers, _start_worker) as pool:
        costs, bids = play(pool, costs, bids, args)
        summary = None if args.skip_measure else measure(pool, costs, bids, args)
    if args.out:
        np.savez(f"{args.out}.npz", costs=costs, bids=bids)
        if summary is not None:
            Path(f"{args.out}.json").write_text(json.dumps(summary, indent=1))


if __name__ == "__main__":
    main()
