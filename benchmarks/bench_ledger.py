"""The privacy ledger's cost: a 100-round market with budgets, per accountant.

    python benchmarks/bench_ledger.py [--json benchmarks/ledger.json] [--sellers 300]

For each mechanism, the same market (seeded, costs redrawn each round, no regret,
no data) without a budget and with ``budget=(3, 1e-6)`` under each accountant, timed
back to back in this run; the ratio to the run without a budget is the ledger's
overhead (the budgeted runs also sell a different amount: sellers leave).
Target: every run <= 30 s at m = 300 ("seconds", docs/ledger.md).
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import time
from pathlib import Path

TARGET_SECONDS = 30.0
MECHANISMS = ["posted-price:price=0.9:eps_level=0.1", "offline"]


def one(mechanism: str, m: int, rounds: int, budget, accountant: str) -> float:
    from market_sim.agents import MarketModel

    t = time.perf_counter()
    model = MarketModel(
        m,
        mechanism=mechanism,
        rounds=rounds,
        new_costs_each_round=True,
        measure_regret=False,
        budget=budget,
        accountant=accountant,
        seed=0,
    )
    model.run()
    return time.perf_counter() - t


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--json", default=None)
    ap.add_argument("--sellers", type=int, default=300)
    ap.add_argument("--rounds", type=int, default=100)
    args = ap.parse_args(argv)
    rows = []
    for mech in MECHANISMS:
        base = one(mech, args.sellers, args.rounds, None, "basic")
        rows.append(dict(mechanism=mech, accountant="none", seconds=base, ratio=1.0))
        for acc in ("basic", "rdp", "pld"):
            s = one(mech, args.sellers, args.rounds, (3.0, 1e-6), acc)
            rows.append(dict(mechanism=mech, accountant=acc, seconds=s, ratio=s / base))
    for r in rows:
        ok = r["seconds"] <= TARGET_SECONDS
        print(
            f"{r['mechanism']:40s} {r['accountant']:6s} {r['seconds']:7.2f} s "
            f"x{r['ratio']:.2f} {'OK' if ok else 'MISSED'}"
        )
    if args.json:
        Path(args.json).write_text(
            json.dumps(
                dict(
                    machine=platform.platform(),
                    sellers=args.sellers,
                    rounds=args.rounds,
                    target_seconds=TARGET_SECONDS,
                    rows=rows,
                ),
                indent=2,
            )
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
