"""BNE solver benchmark: ``symmetric_bne`` of pay-as-bid with default options.

    python benchmarks/bench_equilibrium.py [--m 100] [--dist uniform:1:5 uniform:0:1]
                                           [--json FILE]

Rows, per cost law: the whole solve (target <= 60 s at m = 100), its iterations and
epsilon; the solver's overhead: its time over (the ``deviations`` calls it made x the
time of one such call, measured here on a market of the same size) and the pay-as-bid
``deviations`` of one market, payment curves built (the former path) over allocation
oracle only (the path the solver uses), both measured back to back in this run.
"""

from __future__ import annotations

import argparse
import json
import platform
import time

import numpy as np

from market_sim.distributions import parse_distribution
from market_sim.equilibrium import symmetric_bne
from market_sim.mechanisms.base import as_mechanism


def _best(fn, reps=5):
    out = []
    for _ in range(reps):
        t = time.perf_counter()
        fn()
        out.append(time.perf_counter() - t)
    return min(out)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--m", type=int, default=100)
    ap.add_argument("--dist", nargs="*", default=["uniform:1:5", "uniform:0:1"])
    ap.add_argument("--json", default=None)
    args = ap.parse_args(argv)
    print(f"# symmetric_bne(pay-as-bid), defaults; {platform.machine()}, {time.strftime('%F')}")
    print("| law | m | seconds | iterations | epsilon (95% CI) | eps / utility | target |")
    print("|---|---|---|---|---|---|---|")
    rows = []
    for spec in args.dist:
        dist = parse_distribution(spec)
        r = symmetric_bne("pay-as-bid", dist, args.m, np.random.default_rng(0))
        lo, hi = r.epsilon_ci
        ok = "✓" if r.seconds <= 60 else "✗"
        print(
            f"| {spec} | {args.m} | {r.seconds:.1f} | {r.iterations} | {r.epsilon:.3g} "
            f"({lo:.3g}, {hi:.3g}) | {r.epsilon_relative:.3g} | <= 60 s {ok} |"
        )
        # the unit of work: one market's deviations on the solver's candidate count
        mech = as_mechanism("pay-as-bid", dist=dist, n_sellers=args.m, backend="numba")
        rng = np.random.default_rng(1)
        reports = np.clip(r.bid(dist.sample(args.m, rng)), *dist.support)
        d = r.options["deviators"]
        k = r.options["bid_grid"] + 17 + 2 * r.options["grid"]  # focus, sentinels, costs, bids
        z = np.tile(np.linspace(dist.support[0] + 1e-6, r.options["cost_top"], k), (d, 1))
        sellers = np.arange(d)
        unit = _best(lambda m=mech, s=sellers, z=z, r=reports: m.deviations(s, z, r))
        # per iteration one call per market; epsilon: two per market (grid, refinement)
        # and one per fresh market
        calls = (r.iterations + 2) * r.options["markets"] + r.check.eval_markets
        curves_t = _best(lambda m=mech, s=sellers, z=z, r=reports: m.curves(r).eps_at(z, s), 3)
        oracle_t = _best(
            lambda m=mech, s=sellers, z=z, r=reports: m.curves(r).allocation_at(z, s), 3
        )
        print(
            f"| {spec}: solver time / (calls x one call) | {args.m} | "
            f"{r.seconds / (calls * unit):.2f} ({calls} calls of {unit * 1e3:.2f} ms) | | | | "
            "reported |"
        )
        print(
            f"| {spec}: deviations with payment curves / allocation only | {args.m} | "
            f"{curves_t / oracle_t:.1f} | | | | reported |"
        )
        rows.append(
            dict(
                dist=spec,
                m=args.m,
                seconds=r.seconds,
                iterations=r.iterations,
                converged=r.converged,
                epsilon=r.epsilon,
                epsilon_ci=list(r.epsilon_ci),
                epsilon_relative=r.epsilon_relative,
                one_call_s=unit,
                calls=calls,
                overhead=r.seconds / (calls * unit),
                curves_over_allocation=curves_t / oracle_t,
            )
        )
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(rows, fh, indent=2)


if __name__ == "__main__":
    main()
