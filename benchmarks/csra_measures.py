"""CSRA under the peers' measures: where the issue's "67-68% of sellers gain" can and
cannot come from (docs/multifield.md, "CSRA: the issue's 67-68%").

    python benchmarks/csra_measures.py [--profiles 1000] [--seed 0]

On MFG-RegretNet's generator (10 sellers, v ~ U[0, 1], cap ~ U[0.1, 5], |D| ~ U{10..500})
and each budget, CSRA with both zero-bid rules (``first``: ours; ``last``: the peers'
code) under the peers' measure (``joint_audit.grid_regret``, caps ignored in the utility)
on their 25-point cost grid alone and on their current 25 x 12 (v, eps) grid.  Columns:
the share of sellers with a gain > 1e-9, the share of markets where some seller gains, the
largest gain, the largest normalised regret, the share of sellers not IR (t < v eps).
Counts, not times: the numbers depend only on the seed.
"""

from __future__ import annotations

import argparse

import numpy as np

from market_sim.joint_audit import grid_regret
from market_sim.mechanisms.multifield import CSRA
from market_sim.multifield import MultiFieldPopulation

POPULATION = "10*uniform:0:1;cap=uniform:0.1:5;size=integers:10:500"
BUDGETS = (10.0, 50.0, 100.0, 200.0)


def rows(profiles: int, seed: int) -> list[dict]:
    types = MultiFieldPopulation.parse(POPULATION).draw(profiles, np.random.default_rng(seed))
    v = types["cost"]
    out = []
    for budget in BUDGETS:
        for zero_bid in ("first", "last"):
            mech = CSRA(budget=budget, zero_bid=zero_bid)
            truth = mech.run(types)
            u0 = truth.payments - v * truth.eps
            for grid, cap_points in (("cost 25", 0), ("(v, eps) 25 x 12", 12)):
                peer = grid_regret(mech, types, points=25, cap_points=cap_points)
                denom = np.maximum(
                    np.where(v * truth.eps > 1e-5, v * truth.eps,
                             np.maximum(v * np.clip(types["cap"], 0.1, 5), 0.02)), 1e-4
                )  # fmt: skip
                gain = peer.regret * denom
                out.append(
                    dict(
                        budget=budget,
                        zero_bid=zero_bid,
                        grid=grid,
                        share_gaining=float(np.mean(gain > 1e-9)),
                        markets_with_a_gain=float(np.mean((gain > 1e-9).any(axis=1))),
                        max_gain=float(gain.max()),
                        max_regret=float(peer.regret.max()),
                        share_not_ir=float(np.mean(u0 < 0)),
                    )
                )
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--profiles", type=int, default=1000)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    print("| B | zero bid | grid | sellers gaining | markets with a gain | max gain | "
          "max regret (normalised) | sellers not IR |")  # fmt: skip
    print("|---|---|---|---|---|---|---|---|")
    for r in rows(args.profiles, args.seed):
        print(
            f"| {r['budget']:g} | {r['zero_bid']} | {r['grid']} | {r['share_gaining']:.3f} | "
            f"{r['markets_with_a_gain']:.3f} | {r['max_gain']:.3g} | {r['max_regret']:.3g} | "
            f"{r['share_not_ir']:.4f} |",
            flush=True,
        )


if __name__ == "__main__":
    main()
