"""The true epsilon of pay-as-bid's BNE on Beta(2, 5) on [0, 2], 30 sellers (issue #48),
by a measure independent of the solver.

    python benchmarks/pab_reference.py [--seed S | --bids FILE] [--markets M]
        [--low-markets M] [--search-markets M] [--json FILE]
        [--sets low,jump,grid] [--grid-costs C1,C2,...]
        [--beliefs-rounds R [--beliefs-markets M] [--workers W]] [--save TABLE.npz]

Solves ``bne("pay-as-bid", [("beta:2:5:0:2", 30)], default_rng(S), method="pure")``
(with ``--beliefs-rounds R``: and bne's beliefs stage, ``beliefs_rounds=R``; ``--save``
keeps the table) (or reads a bid table: ``bid.csv`` of ``market-sim bne`` or an ``.npz``
with ``costs`` and ``bids``), then measures the gain of each evaluation cost's best deviation with
``tests/bne_reference.py``'s ``deviation_gains``: i.i.d. numpy markets, the mechanism's
own ``deviations``, every report of the range searched on one sample and the gains
re-measured on another, none of the solver's code.  Three sets of costs:

* ``low``: the cheapest sellers, below the bid function's jump (or under 0.03), whose
  utilities are about 0.1 while the ex-ante utility u is about 0.005: their per-market
  gains vary most, so they get ``--low-markets`` markets (few candidates each);
* ``jump``: just above the jump (or 0.03 to 0.06);
* ``grid``: the selling range by quantile and evenly, to 0.6 (or ``--grid-costs``).

``--sets`` picks which are measured (the grid's run always: it gives u).

Prints per cost the bid, the best report, the gain with its standard error and gain / u
with its 95% interval, and per set the largest.  The solver's own verification
(``epsilon_relative``, its CI) is printed beside it when it solved.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from bne_reference import deviation_gains  # noqa: E402

from market_sim.distributions import as_distribution  # noqa: E402
from market_sim.games.equilibrium import bne  # noqa: E402
from market_sim.mechanisms.base import as_mechanism  # noqa: E402

LAW, SELLERS = "beta:2:5:0:2", 30


def _table(path: str) -> tuple[np.ndarray, np.ndarray]:
    """A bid table (costs, bids) from an ``.npz`` or a ``bid.csv`` (group, cost, bid)."""
    if path.endswith(".npz"):
        d = np.load(path)
        return np.asarray(d["costs"], float), np.asarray(d["bids"], float)
    rows = np.loadtxt(path, delimiter=",", skiprows=1, ndmin=2)
    return rows[:, 1], rows[:, 2]


def _solved(seed: int, **options) -> tuple[np.ndarray, np.ndarray, dict]:
    """The solver's bid table for ``seed`` (``options``: bne's, e.g. the beliefs stage's)
    and what its own verification printed."""
    t, wall = time.process_time(), time.perf_counter()
    rng = np.random.default_rng(seed)
    r = bne("pay-as-bid", [(LAW, SELLERS)], rng, method="pure", progress=True, **options)
    k = r.classes[0]
    lo, hi = r.epsilon_ci
    own = dict(
        epsilon_relative=r.epsilon_relative,
        ci_relative=[lo / k.check.utility, hi / k.check.utility],
        jumps=r.options["jumps"][0],
        cpu_seconds=time.process_time() - t,  # this process's (not the beliefs workers')
        seconds=time.perf_counter() - wall,
    )
    return np.asarray(k.costs), np.asarray(k.bids), own


def _jump_of(costs: np.ndarray, bids: np.ndarray) -> float | None:
    """The cost of the table's step (two equal costs with different bids), if any."""
    at = np.flatnonzero((np.diff(costs) < 1e-6) & (np.diff(bids) > 0.02))
    return float(costs[at[0]]) if at.size else None


def cost_sets(jump: float | None) -> dict[str, np.ndarray]:
    """The evaluation costs: below the jump, just above it, and the selling range."""
    j = 0.03 if jump is None else jump
    return {
        "low": np.linspace(0.0005, j - 0.0005, 10),
        "jump": j + np.array([0.0005, 0.001, 0.002, 0.004, 0.007, 0.01, 0.015, 0.02, 0.03]),
        "grid": np.unique(np.round(np.concatenate((
            np.asarray(as_distribution(LAW).ppf(np.linspace(0.01, 0.58, 24))),
            np.arange(0.08, 0.61, 0.04),
        )), 4)),
    }  # fmt: skip


def measure(costs, bids, args) -> dict:
    """``deviation_gains`` on each set of costs; the utility from the grid's run."""
    law = as_distribution(LAW)
    mech = as_mechanism("pay-as-bid", n_sellers=SELLERS, dist=law, backend="numba")

    def bid(c):
        return np.interp(c, costs, bids)

    sets = cost_sets(_jump_of(costs, bids))
    if args.grid_costs:
        sets["grid"] = np.asarray(args.grid_costs)
    sets = {name: cs for name, cs in sets.items() if name in args.sets}
    rng = np.random.default_rng(args.reference_seed)
    out = {}
    for name, cs in sets.items():
        low = name == "low"
        t = time.process_time()
        r = deviation_gains(
            mech, law, SELLERS, bid, cs, rng,
            search_markets=args.search_markets * (4 if low else 1),
            markets=args.low_markets if low else args.markets,
            reports=301 if low else 701, report_top=0.3 if low else 0.7,
            utility_costs=0 if low else 200,
        )  # fmt: skip
        out[name] = (r, time.process_time() - t)
    return out


def report(out: dict, own: dict | None) -> dict:
    u = out["grid"][0].utility
    summary: dict = {"utility": u, "utility_se": out["grid"][0].utility_se}
    for name, (r, cpu) in out.items():
        print(f"\n{name}: {r.markets} markets x {r.deviators} deviators ({cpu:.0f} CPU s)")
        print("     cost      bid     best       gain       se    gain/u  95% interval")
        for c, b, z, g, s in zip(r.costs, r.bids, r.best, r.gains, r.se, strict=True):
            lo, hi = (g - 1.96 * s) / u, (g + 1.96 * s) / u
            print(f"  {c:7.4f}  {b:7.4f}  {z:7.4f}  {g:9.2e}  {s:7.1e}  {g / u:8.4f}  "
                  f"[{lo:.4f}, {hi:.4f}]")  # fmt: skip
        i = r.at
        g, s = r.gains[i], r.se[i]
        summary[name] = dict(
            largest_relative=g / u, ci=[(g - 1.96 * s) / u, (g + 1.96 * s) / u],
            at_cost=float(r.costs[i]), markets=r.markets, deviators=r.deviators,
            cpu_seconds=cpu,
        )  # fmt: skip
    print(f"\nex-ante utility u = {u:.5g} +- {summary['utility_se']:.2g}")
    for name in out:
        s = summary[name]
        print(f"{name:5s} largest gain / u {s['largest_relative']:.4f} "
              f"[{s['ci'][0]:.4f}, {s['ci'][1]:.4f}] at c = {s['at_cost']:.4f}")  # fmt: skip
    if own is not None:
        lo, hi = own["ci_relative"]
        print(f"solver's own verification: eps / u {own['epsilon_relative']:.4f} "
              f"[{lo:.4f}, {hi:.4f}], jumps {own['jumps']}")  # fmt: skip
        summary["solver"] = own
    return summary


def _set_names(text: str) -> tuple[str, ...]:
    names = tuple(dict.fromkeys(n.strip() for n in text.split(",") if n.strip()))
    unknown = [n for n in names if n not in ("low", "jump", "grid")]
    if unknown:
        raise argparse.ArgumentTypeError(f"unknown set {unknown[0]!r} (low, jump, grid)")
    return tuple(n for n in ("low", "jump", "grid") if n in names or n == "grid")


def _costs(text: str) -> list[float]:
    try:
        cs = sorted(float(x) for x in text.split(",") if x.strip())
    except ValueError:
        raise argparse.ArgumentTypeError(f"costs must be numbers (got {text!r})") from None
    if not cs or not all(0.0 <= c <= 2.0 for c in cs):
        raise argparse.ArgumentTypeError("costs must be in the support [0, 2]")
    return cs


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--seed", type=int, default=0, help="the solve's seed (default 0)")
    p.add_argument("--bids", help="a bid table (.npz or bid.csv) instead of solving")
    p.add_argument("--markets", type=int, default=4000,
                   help="measuring markets of the jump and grid sets (default 4000)")  # fmt: skip
    p.add_argument("--low-markets", type=int, default=30000,
                   help="measuring markets of the cheapest costs (default 30000)")  # fmt: skip
    p.add_argument("--search-markets", type=int, default=1000,
                   help="search markets (x 4 for the cheapest costs; default 1000)")  # fmt: skip
    p.add_argument("--reference-seed", type=int, default=12345,
                   help="seed of the reference's markets (default 12345)")  # fmt: skip
    p.add_argument("--beliefs-rounds", type=int, default=0,
                   help="solve with bne's beliefs stage, R rounds (default 0: off)")  # fmt: skip
    p.add_argument("--beliefs-markets", type=int, default=16384,
                   help="markets a beliefs round (default 16384)")  # fmt: skip
    p.add_argument("--workers", type=int, default=None,
                   help="processes of the beliefs rounds (default: every core)")  # fmt: skip
    p.add_argument("--sets", type=_set_names, default=("low", "jump", "grid"),
                   help="the cost sets measured, comma-separated (default low,jump,grid; "
                        "grid, whose run gives u, always)")  # fmt: skip
    p.add_argument("--grid-costs", type=_costs,
                   help="the grid set's costs instead (comma-separated, in [0, 2])")  # fmt: skip
    p.add_argument("--save", help="write the solved table here (.npz: costs, bids)")
    p.add_argument("--json", help="write the summary here")
    args = p.parse_args(argv)
    if args.beliefs_rounds < 0 or args.beliefs_markets < 1 or (args.workers or 1) < 1:
        p.error("--beliefs-rounds must be >= 0, --beliefs-markets and --workers >= 1")
    own = None
    if args.bids:
        costs, bids = _table(args.bids)
    else:
        stage = dict(beliefs_rounds=args.beliefs_rounds, beliefs_markets=args.beliefs_markets,
                     beliefs_workers=args.workers) if args.beliefs_rounds else {}  # fmt: skip
        costs, bids, own = _solved(args.seed, **stage)
        if args.save:
            np.savez(args.save, costs=costs, bids=bids)
    summary = report(measure(costs, bids, args), own)
    if args.json:
        Path(args.json).write_text(json.dumps(summary, indent=1, default=float))


if __name__ == "__main__":
    main()
