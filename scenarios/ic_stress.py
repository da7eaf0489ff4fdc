"""IC stress test on the Mesa market: strategic sellers against each mechanism.

Per task one MarketModel runs a few rounds; each row is one round with the
regret of truth-telling (best utility on a report grid minus actual utility)
summarised over sellers, and the share of sellers who misreport.  Pay-as-bid
is the negative control: there regret and misreporting must show up.
"""

from __future__ import annotations

import itertools

import numpy as np

from market_sim.parameters import Distribution, Number, Registered

NAME = "ic_stress"
REPLICATIONS = 5
QUICK_REPLICATIONS = 1

PARAMS = {  # what `--set` accepts (market_sim.parameters)
    "mechanism": Registered("mechanism"),
    "strategy": Registered("strategy"),
    "strategic_fraction": Number(float, low=0, high=1),
    "dist": Distribution(),
    "sellers": Number(int, low=1),
    "rounds": Number(int, low=1),
    "gamma": Number(float, low=0, low_open=True),
}


def grid(quick: bool = False) -> list[dict]:
    mechanisms = ["offline", "online", "pay-as-bid"] + (
        [] if quick else ["private-cutoff", "private-posted-price"]
    )
    strategies = (
        ["best-response", "shade"] if quick else ["best-response", "shade", "learning", "collusion"]
    )
    fractions = [1.0] if quick else [0.5, 1.0]
    dists = ["uniform:0:1"] if quick else ["uniform:0:1", "uniform:1:5"]
    n = 6 if quick else 20
    return [
        dict(
            mechanism=m,
            strategy=s,
            strategic_fraction=f,
            dist=d,
            sellers=n,
            rounds=2 if quick else 4,
            gamma=0.3,
        )
        for m, s, f, d in itertools.product(mechanisms, strategies, fractions, dists)
    ]


def run(params: dict, rng: np.random.Generator) -> list[dict]:
    from market_sim.agents import MarketModel  # Mesa: imported when a task runs

    model = MarketModel(
        params["sellers"],
        dist=params["dist"],
        mechanism=params["mechanism"],
        strategy=params["strategy"],
        strategic_fraction=params["strategic_fraction"],
        rounds=params["rounds"],
        gamma=params["gamma"],
        n_grid=9,
        seed=int(rng.integers(2**63)),
    )
    model_df, agent_df = model.run()
    rows = []
    for r, part in agent_df.groupby("round"):
        regret = part.regret.dropna().to_numpy()
        rows.append(
            {
                "round": int(r),
                "max_regret": float(regret.max()),
                "q90_regret": float(np.quantile(regret, 0.9)),
                "share_profitable_deviation": float(np.mean(regret > 1e-7)),
                "share_misreporting": float(np.mean(part.report != part.cost)),
                "min_utility": float(part.utility.min()),
                "proxy_loss": float(model_df.proxy_loss[model_df["round"] == r].iloc[0]),
            }
        )
    return rows
