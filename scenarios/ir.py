"""Individual rationality on the Mesa market: truthful sellers' utilities.

Every seller is truthful; costs are redrawn each round and a seller stays out
of a round when its last realised utility was negative (the participation
rule).  A mechanism is IR when no truthful utility is below -tol and
participation stays at 1; each row is one round of one market.
"""

from __future__ import annotations

import itertools

import numpy as np

from market_sim.parameters import Distribution, Number, Registered

NAME = "ir"
REPLICATIONS = 10
QUICK_REPLICATIONS = 2
TOL = 1e-9

PARAMS = {  # what `--set` accepts (market_sim.parameters)
    "mechanism": Registered("mechanism"),
    "dist": Distribution(),
    "sellers": Number(int, low=1),
    "rounds": Number(int, low=1),
    "gamma": Number(float, low=0, low_open=True),
}


def grid(quick: bool = False) -> list[dict]:
    mechanisms = ["offline", "online", "pay-as-bid", "posted-price"]
    dists = ["uniform:0:1"] if quick else ["uniform:0:1", "uniform:1:5", "beta:2:5:0:1"]
    sizes = [10] if quick else [20, 100]
    return [
        dict(mechanism=m, dist=d, sellers=n, rounds=2 if quick else 4, gamma=0.3)
        for m, d, n in itertools.product(mechanisms, dists, sizes)
    ]


def run(params: dict, rng: np.random.Generator) -> list[dict]:
    from market_sim.agents import MarketModel  # Mesa: imported when a task runs

    model = MarketModel(
        params["sellers"],
        dist=params["dist"],
        mechanism=params["mechanism"],
        strategy="truthful",
        rounds=params["rounds"],
        gamma=params["gamma"],
        new_costs_each_round=True,
        measure_regret=False,
        seed=int(rng.integers(2**63)),
    )
    model_df, agent_df = model.run()
    rows = []
    for r, part in agent_df.groupby("round"):
        u = part.utility.dropna().to_numpy()
        rows.append(
            {
                "round": int(r),
                "min_utility": float(u.min()),
                "q01_utility": float(np.quantile(u, 0.01)),
                "median_utility": float(np.median(u)),
                "share_negative": float(np.mean(u < -TOL)),
                "participation": float(model_df.participation[model_df["round"] == r].iloc[0]),
            }
        )
    return rows
