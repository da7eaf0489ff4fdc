"""Online vs offline: the competitive ratio as m grows, and the xi sweep.

For each cost distribution and m, the same realised costs are answered by the
online fluid rule (Alg. 3's exact form) and by the exact offline optimum; the
row records both proxy losses and their ratio.  Thm V.1 (003): the ratio tends
to 1, and arriving sellers' shortfall xi costs roughly 1/xi in the sigma/eta term.
"""

from __future__ import annotations

import itertools

import numpy as np

from market_sim.distributions import parse_distribution
from market_sim.parameters import Distribution, Number

NAME = "online_vs_offline"
REPLICATIONS = 5
QUICK_REPLICATIONS = 2

PARAMS = {  # what `--set` accepts (market_sim.parameters)
    "dist": Distribution(),
    "m": Number(int, low=1),
    "xi": Number(
        float,
        low=0,
        high=1,
        low_open=True,
        doc="share of the planned sellers that arrive (Thm V.1, 003)",
    ),
    "mu": Number(float, low=0, low_open=True),
    "sigma": Number(float, low=0, low_open=True),
    "gamma": Number(float, low=0, low_open=True),
}


def grid(quick: bool = False) -> list[dict]:
    ms = [10**2, 10**3, 10**4] if quick else [10**2, 10**3, 10**4, 10**5, 10**6]
    dists = ["uniform:0:1", "uniform:1:5"]
    rows = [
        dict(dist=d, m=m, xi=1.0, mu=1.0, sigma=1.0, gamma=1.0)
        for d, m in itertools.product(dists, ms)
    ]
    xis = [1.0, 0.5, 0.25] if quick else [1.0, 0.75, 0.5, 0.25, 0.1]
    rows += [
        dict(dist="uniform:0:1", m=ms[-1], xi=xi, mu=1.0, sigma=1.0, gamma=1.0)
        for xi in xis
        if xi < 1.0
    ]
    return rows


def run(params: dict, rng: np.random.Generator) -> list[dict]:
    from market_sim.mechanisms.online import OnlineMechanism, compare_online_offline

    dist = parse_distribution(params["dist"])
    mech = OnlineMechanism(
        dist, params["m"], mu=params["mu"], sigma=params["sigma"], gamma=params["gamma"]
    )
    costs = dist.sample(params["m"], rng)
    out = compare_online_offline(costs, mech, xi=params["xi"], rng=rng)
    return [{**out, "cutoff": mech.cutoff}]
