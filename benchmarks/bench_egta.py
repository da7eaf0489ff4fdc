"""EGTA benchmark: ``egta`` against the same markets run bare.

    python benchmarks/bench_egta.py [--samples 20] [--sellers 20] [--rounds 5]

The bare loop builds and steps, with the same seeds, exactly the markets ``egta``
simulates (strategies built once and copied, regret measurement off), and does
nothing else; ``egta`` adds the reduction, the payoff table, replicator dynamics,
1000 bootstrap resamples and the equilibria's intervals.  Both are timed back to back
in this run (best of 3).  Target: egta <= 1.5x the bare markets (posted price, 2 and
3 strategies, 4 reduced players).
"""

from __future__ import annotations

import argparse
import copy
import sys
from functools import partial
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_offline import best_time  # noqa: E402

from market_sim.agents import MarketModel, as_strategy
from market_sim.distributions import parse_distribution
from market_sim.games.egta import (
    _dpr_plan,
    _Pairs,
    _runs,
    _sample_markets,
    _seeds,
    egta,
    seat_layout,
)
from market_sim.population import as_population

DIST = parse_distribution("uniform:1:5")


def _bare(mech, strategies, n, players, samples, rounds, seed):
    built = [as_strategy(s) for s in strategies]
    _, dev, full, _ = _dpr_plan(len(strategies), n, players)
    seeds, _, seats, cost_seeds = _seeds(seed, None, samples, n)
    markets = _sample_markets(as_population(DIST, n), seats, cost_seeds)
    for d, counts in zip(dev, full, strict=True):
        for child, market in zip(seeds, markets, strict=True):
            runs = _runs(seat_layout(int(d), counts, market.seats))
            mix = _Pairs([(copy.deepcopy(built[d if s < 0 else s]), c / n) for s, c in runs])
            model = MarketModel(
                n,
                dist=DIST,
                mechanism=mech,
                strategy=mix,
                rounds=rounds,
                rng=np.random.default_rng(child),
                measure_regret=False,
                agent_views=False,
            )
            model.cost[:] = model.report[:] = model.reports[:] = market.costs
            while model.running:
                model.step()


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--samples", type=int, default=20)
    ap.add_argument("--sellers", type=int, default=20)
    ap.add_argument("--rounds", type=int, default=5)
    args = ap.parse_args(argv)
    ok = True
    for strategies in (
        ["truthful", "shade:factor=1.3"],
        ["truthful", "shade:factor=1.3", "learning"],
    ):
        from market_sim.mechanisms.base import as_mechanism

        mech = as_mechanism("posted-price", dist=DIST, n_sellers=args.sellers)
        kw = dict(n=args.sellers, players=4, samples=args.samples, rounds=args.rounds, seed=0)
        t_bare = best_time(partial(_bare, mech, strategies, **kw))
        t_egta = best_time(
            partial(
                egta,
                mech,
                DIST,
                args.sellers,
                strategies,
                args.samples,
                seed=0,
                players=4,
                rounds=args.rounds,
            )
        )
        ratio = t_egta / t_bare
        ok &= ratio <= 1.5
        print(
            f"{len(strategies)} strategies: egta {t_egta:.3f} s, bare markets {t_bare:.3f} s, "
            f"ratio {ratio:.2f} (target <= 1.5)"
        )
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
