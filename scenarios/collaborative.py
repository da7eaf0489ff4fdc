"""Collaborative ML ([SZH]), parties as agents: rho, number of parties, spread of privacy wishes.

Per task one ``CollaborationModel``: parties with Gaussian data of sizes
50 x 1.6^i, preferred epsilons exp(spread x u_i) (u evenly spread on [-1, 1]),
privacy cost 0.1 / preferred epsilon per unit of epsilon.  Truthful parties
share at their preferred level; strategic ones best-respond (two rounds of
iterated best response).  One row per party of the last round: its epsilon,
value alone, Shapley value, reward value and utility, with the round's group
welfare (sum of reward values) and share of parties whose reward is rational.
"""

from __future__ import annotations

import itertools

import numpy as np

from market_sim.parameters import Choice, Number

NAME = "collaborative"
REPLICATIONS = 4
QUICK_REPLICATIONS = 1

PARAMS = {  # what `--set` accepts (market_sim.parameters)
    "rho": Number(float, low=0, high=1, doc="rho of the rho-Shapley reward targets ([SZH])"),
    "parties": Number(int, low=1, doc="number of parties"),
    "spread": Number(float, doc="spread of preferred epsilons: exp(spread * u), u on [-1, 1]"),
    "strategy": Choice(
        "truthful", "strategic", doc="parties share at their preferred level, or best-respond"
    ),
    "control": Choice(
        "temper", "noise", doc="how rewards are realised: likelihood tempering or added noise"
    ),
}


def grid(quick: bool = False) -> list[dict]:
    rhos = [0.0, 1.0] if quick else [0.0, 0.25, 0.5, 0.75, 1.0]
    parties = [3] if quick else [3, 5]
    spreads = [1.5] if quick else [0.0, 1.5]
    strategies = ["truthful", "strategic"]
    return [
        dict(rho=r, parties=n, spread=s, strategy=st, control="temper")
        for r, n, s, st in itertools.product(rhos, parties, spreads, strategies)
    ]


def run(params: dict, rng: np.random.Generator) -> list[dict]:
    from market_sim.agents.collaboration import (
        CollaborationModel,  # Mesa: imported when a task runs
    )

    n = int(params["parties"])
    sizes = [int(round(50 * 1.6**i)) for i in range(n)]
    eps_pref = np.exp(float(params["spread"]) * np.linspace(-1, 1, n))
    strategic = params["strategy"] == "strategic"
    model = CollaborationModel(
        sizes,
        eps_pref,
        rho=float(params["rho"]),
        control=params["control"],
        strategy=params["strategy"],
        rounds=2 if strategic else 1,
        n_draws=6,
        seed=int(rng.integers(2**63)),
    )
    model_df, agents = model.run()
    last = agents[agents["round"] == agents["round"].max()]
    top = model_df.iloc[-1]
    return [
        dict(
            party=int(a.index),
            size=sizes[int(a.index)],
            eps=float(a.eps),
            eps_pref=float(a.eps_pref),
            value_alone=float(a.value_alone),
            shapley=float(a.shapley),
            reward=float(a.reward),
            utility=float(a.utility),
            similarity=float(a.similarity),
            welfare=float(top.welfare),
            share_rational=float(top.share_rational),
            negative_shapley=int(top.negative_shapley),
        )
        for a in last.itertuples()
    ]
