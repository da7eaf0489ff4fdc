"""MarketEnv (PettingZoo) step against a MarketModel round, at m = 10^4 sellers.

    python benchmarks/bench_env.py [--m 10000] [--reps 5] [--json benchmarks/env.json]

Truthful sellers, costs kept, the same market size and mechanism.  The MarketModel
round runs with ``measure_regret=False`` (its cheapest round: no regret grid), so the
ratio is not flattered.  Each ratio is two times measured interleaved, rep by rep, in
this run (best of ``reps``).  Also reported: the dict overhead of a step (reading the
actions dict into an array and building the five output dicts from the round's arrays,
timed alone) and the caller's cost of building the actions dict from an array of
reports (not part of the step).

Target: a MarketEnv step <= 3x a MarketModel round (offline and pay-as-bid).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_offline import reporter, write_json  # noqa: E402

from market_sim.agents import MarketModel  # noqa: E402
from market_sim.games.env import MarketEnv, _as_dicts, _stack_actions  # noqa: E402


def _timer(fn):
    t = time.perf_counter()
    fn()
    return time.perf_counter() - t


def measure(m: int, mechanism: str, reps: int) -> dict[str, float]:
    rounds = 2 * reps + 4
    model = MarketModel(
        m, mechanism=mechanism, rounds=rounds, seed=0, measure_regret=False, gamma=0.2
    )
    env = MarketEnv(m, mechanism=mechanism, rounds=rounds, gamma=0.2)
    obs, _ = env.reset(seed=0)
    actions = {a: o[:1].copy() for a, o in obs.items()}  # truthful: the cost
    reports = env.core.cost.copy()
    model.step()  # warm both
    env.step(actions)
    best = dict.fromkeys(("model", "env", "dicts", "build"), np.inf)
    agents, u, gone = env.agents, np.zeros(m), np.zeros(m, dtype=bool)
    obs_rows = env.core.observations()
    for _ in range(reps):
        best["model"] = min(best["model"], _timer(model.step))
        best["env"] = min(best["env"], _timer(lambda: env.step(actions)))

        def dicts():
            _stack_actions(actions, agents)
            _as_dicts(agents, obs_rows, u, gone, False)

        best["dicts"] = min(best["dicts"], _timer(dicts))
        best["build"] = min(
            best["build"],
            _timer(lambda: dict(zip(env.possible_agents, reports.reshape(-1, 1), strict=True))),
        )
    return best


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--m", type=int, default=10**4)
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--json", default=None)
    args = ap.parse_args(argv)
    rows: list = []
    report = reporter(rows)
    for mech in ("pay-as-bid", "offline"):
        t = measure(args.m, mech, args.reps)
        m = f"{args.m:.0e}"
        report(f"MarketModel round, {mech}, m = {m} (ms)", 1e3 * t["model"], "-", True)
        report(f"MarketEnv step, {mech}, m = {m} (ms)", 1e3 * t["env"], "-", True)
        report("  of which the dicts (ms)", 1e3 * t["dicts"], "-", True)
        report("  caller: actions dict from an array (ms)", 1e3 * t["build"], "-", True)
        ratio = t["env"] / t["model"]
        report(f"MarketEnv step / MarketModel round, {mech}", ratio, "<= 3", ratio <= 3)
    if args.json:
        write_json(args.json, rows)
    return 0 if all(r["ok"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
