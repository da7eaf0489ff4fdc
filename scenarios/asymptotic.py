"""Asymptotics m -> infinity: the offline proxy loss on a log grid of m.

For U[0, 1] costs Thm IV.5 / Lemma IX.2 (003) give the rate m^(-1/4); the
report fits the log-log slope with a bootstrap CI.  For costs bounded away
from 0 (psi >= p = psi(c_min) > 0) the loss cannot vanish: for every m,
sigma/eta + gamma eta sum a_i psi_i >= 2 sqrt(sigma gamma p), and the loss tends
to that value, the proxy-loss part of the bound of Thm 3.4 (000) (its ||b||
term bounds the learning loss, which Eq. 11 does not contain).
"""

from __future__ import annotations

import itertools
import time

import numpy as np

from market_sim.distributions import parse_distribution
from market_sim.mechanisms.offline import solve
from market_sim.parameters import Distribution, Number

NAME = "asymptotic"
REPLICATIONS = 10
QUICK_REPLICATIONS = 3
DISTS = ["uniform:0:1", "beta:2:2:0:1", "uniform:1:5"]

PARAMS = {  # what `--set` accepts (market_sim.parameters)
    "dist": Distribution(),
    "m": Number(int, low=1, doc="number of sellers (a log grid)"),
    "mu": Number(float, low=0, low_open=True),
    "sigma": Number(float, low=0, low_open=True),
    "gamma": Number(float, low=0, low_open=True),
}


def grid(quick: bool = False) -> list[dict]:
    ms = [10**2, 10**3, 10**4] if quick else [int(v) for v in np.logspace(2, 7, 11).round()]
    return [
        dict(dist=d, m=m, mu=1.0, sigma=1.0, gamma=1.0) for d, m in itertools.product(DISTS, ms)
    ]


def limit(dist_spec: str, *, sigma: float, gamma: float) -> float:
    """lim_m proxy loss = 2 sqrt(sigma gamma psi(c_min)) (0 when psi(c_min) = 0)."""
    dist = parse_distribution(dist_spec)
    p = float(dist.virtual_cost(np.array([dist.support[0]]))[0])
    return 2.0 * np.sqrt(sigma * gamma * max(p, 0.0))


def run(params: dict, rng: np.random.Generator) -> list[dict]:
    dist = parse_distribution(params["dist"])
    psi = dist.virtual_cost(dist.sample(params["m"], rng))
    start = time.perf_counter()
    res = solve(psi, mu=params["mu"], sigma=params["sigma"], gamma=params["gamma"])
    return [
        dict(
            proxy_loss=res.proxy_loss,
            n_bought=res.n_bought,
            eta=res.eta,
            solve_seconds=time.perf_counter() - start,
            limit=limit(params["dist"], sigma=params["sigma"], gamma=params["gamma"]),
        )
    ]
