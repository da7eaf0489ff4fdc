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

    python benchmarks/csra_measures.py --one-field-audit 30 [--budget 50]
    python benchmarks/csra_measures.py --drawn-inside 3 [--budget 50]

The two readings of "the current audit (cost only)" that the grid table cannot be:
``--one-field-audit M`` runs the one-field audit (``market_sim.auditing.audit``: every
probe, jump and opponent profile) on M markets, one at a time, CSRA's caps and sizes held
at each market's draw; ``--drawn-inside M`` runs it on M markets of a randomized
one-field wrapper that draws caps and sizes afresh inside every call (expected
utilities).  Both print the share of sellers with a profitable misreport and the largest
gain (about 5 s and 130 s a market).
"""

from __future__ import annotations

import argparse

import numpy as np

from market_sim.joint_audit import grid_regret
from market_sim.mechanisms.base import Mechanism, Outcome
from market_sim.mechanisms.multifield import CSRA
from market_sim.multifield import MultiFieldPopulation, records

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


class _HeldFields(Mechanism):
    """CSRA on costs alone, caps and sizes held at one market's."""

    name = "csra-held"

    def __init__(self, budget: float, cap: np.ndarray, size: np.ndarray):
        self.csra, self.cap, self.size = CSRA(budget=budget), cap, size

    def outcome(self, reports, rng=None) -> Outcome:
        out = self.csra.run(records(cost=reports, cap=self.cap, size=self.size))
        return Outcome(out.eps, out.payments)


class _DrawnInside(Mechanism):
    """CSRA on costs alone, caps and sizes drawn afresh from the peers' laws every call."""

    name = "csra-drawn-inside"
    randomized = True

    def __init__(self, budget: float):
        self.csra = CSRA(budget=budget)

    def outcome(self, reports, rng=None) -> Outcome:
        n = np.shape(reports)[-1]
        cap, size = rng.uniform(0.1, 5.0, n), rng.integers(10, 501, n).astype(float)
        out = self.csra.run(records(cost=reports, cap=cap, size=size))
        return Outcome(out.eps, out.payments)


def one_field(markets: int, budget: float, seed: int, drawn_inside: bool) -> dict:
    """The share of sellers with a profitable misreport and the largest gain under the
    one-field audit (module docstring)."""
    from market_sim.auditing import audit

    if drawn_inside:
        s = audit(_DrawnInside(budget), "uniform:0:1", 10, markets,
                  np.random.default_rng(seed), refine=False).summary  # fmt: skip
        return dict(share=s["share_profitable"], max_gain=s["max_gain"])
    types = MultiFieldPopulation.parse(POPULATION).draw(markets, np.random.default_rng(seed))
    shares, gains = [], []
    for j in range(markets):
        mech = _HeldFields(budget, types["cap"][j], types["size"][j])
        s = audit(mech, "uniform:0:1", 10, 1, np.random.default_rng(j),
                  costs=types["cost"][j][None, :]).summary  # fmt: skip
        shares.append(s["share_profitable"])
        gains.append(s["max_gain"])
    return dict(share=float(np.mean(shares)), max_gain=float(max(gains)))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--profiles", type=int, default=1000)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--budget", type=float, default=50.0)
    ap.add_argument("--one-field-audit", type=int, default=0, metavar="MARKETS")
    ap.add_argument("--drawn-inside", type=int, default=0, metavar="MARKETS")
    args = ap.parse_args()
    for markets, inside in ((args.one_field_audit, False), (args.drawn_inside, True)):
        if markets:
            r = one_field(markets, args.budget, args.seed, inside)
            what = "drawn inside" if inside else "held at the draw"
            head = f"one-field audit, caps and sizes {what}, B = {args.budget:g}"
            print(f"{head}, {markets} markets: share gaining {r['share']:.3f}, "
                  f"max gain {r['max_gain']:.3g}")  # fmt: skip
    if args.one_field_audit or args.drawn_inside:
        return
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
