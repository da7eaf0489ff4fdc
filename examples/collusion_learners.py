"""Where no-regret and Q-learning sellers end on Calvano et al.'s collusion scale.

First-price procurement of one unit (examples/first_price.py), 3 sellers with costs
redrawn from U[0, 1] every round, every seller a learner (``hedge`` or ``q-learning``,
their defaults) for 2000 rounds; pi is the sellers' mean utility over the last 500
rounds of a seed, and Delta = (pi - pi_N) / (pi_M - pi_N) with pi_N the utility at the
BNE b(c) = c + (1 - c)/3 and pi_M the sellers' joint-profit maximum, 1/(m + 1) (the
cheapest seller sells at the top); the index against the best common markup, 1/(2m),
is printed beside it (market_sim.games.psro, docs/env.md).

Run: ``python examples/collusion_learners.py [--seeds 8]`` (about 15 s).
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np

from market_sim.agents import MarketModel
from market_sim.games.psro import collusion_frame, collusion_scale

FIRST_PRICE = f"{Path(__file__).resolve().parent / 'first_price.py'}:FirstPriceProcurement"


def main(seeds: int = 8, rounds: int = 2000, last: int = 500, m: int = 3) -> dict:
    scale = collusion_scale(
        FIRST_PRICE,
        "uniform:0:1",
        m,
        np.random.default_rng(0),
        nash=lambda c: c + (1 - c) / m,
        markets=1024,
        multipliers=np.geomspace(1.0, 1000.0, 9),
        cartel_levels=5,
    )
    print(
        f"pi_N {scale.u_nash:.4f} (BNE), pi_M {scale.u_collusive:.4f} ({scale.cartel}), "
        f"best common markup {scale.u_markup:.4f} (k = {scale.multiplier:.3g})"
    )
    out = {}
    for strategy in ("hedge", "q-learning"):
        final = []
        for seed in range(seeds):
            model = MarketModel(
                m,
                dist="uniform:0:1",
                mechanism=FIRST_PRICE,
                strategy=strategy,
                rounds=rounds,
                new_costs_each_round=True,
                measure_regret=False,
                seed=seed,
            )
            _, agents = model.run()
            final.append(collusion_frame(agents, scale)["utility"].iloc[-last:].mean())
        s = out[strategy] = scale.over_seeds(final)
        markup = float(np.mean(scale.index_markup(final)))
        print(
            f"{strategy:10s} Delta {s['delta']:+.3f}  95% CI [{s['ci_low']:+.3f}, "
            f"{s['ci_high']:+.3f}] over {s['seeds']} seeds (markup scale {markup:+.3f})"
        )
    return out


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--seeds", type=int, default=8)
    main(ap.parse_args().seeds)
