"""Dependence between data and costs: a Gaussian copula with correlation rho.

The sellers are a :class:`market_sim.population.Population` with synthetic data
(its module docstring gives the generator and the copula): the cost latent has
correlation rho with feature 0's latent ("feature") or with the label noise g
("label_noise"), and costs keep their law exactly.  With rho < 0 and target
label_noise the mislabelled sellers are the cheap ones.
Each row: one mechanism's private model (Alg. 1) on that market -- test error
over noise draws, expected payment sum psi eps, and the share of the privacy
budget spent on mislabelled sellers.
"""

from __future__ import annotations

import itertools

import numpy as np
from scipy import stats

from market_sim.distributions import parse_distribution
from market_sim.learning import HeteroDPLogisticRegression
from market_sim.mechanisms import data_dependent as dd
from market_sim.mechanisms import offline
from market_sim.parameters import Choice, Distribution, Number
from market_sim.population import Population

NAME = "correlation"
REPLICATIONS = 5
QUICK_REPLICATIONS = 1
N_TEST = 2000

PARAMS = {  # what `--set` accepts (market_sim.parameters)
    "rho": Number(float, low=-1, high=1),
    "target": Choice("feature", "label_noise"),
    "mechanism": Choice("offline", "data_dependent"),
    "sellers": Number(int, low=1),
    "d": Number(int, low=1),
    "label_noise": Number(float, low=0, high=1, high_open=True),
    "dist": Distribution(),
    "mu": Number(float, low=0, low_open=True),
    "sigma": Number(float, low=0, low_open=True),
    "gamma": Number(float, low=0, low_open=True),
    "reg_lambda": Number(float, low=0, low_open=True),
    "n_noise": Number(int, low=1),
}


def grid(quick: bool = False) -> list[dict]:
    rhos = [-0.9, 0.0, 0.9] if quick else [-1.0, -0.75, -0.5, -0.25, 0.0, 0.25, 0.5, 0.75, 1.0]
    return [
        dict(
            rho=r,
            target=t,
            mechanism=mech,
            sellers=80 if quick else 300,
            d=5,
            label_noise=0.15,
            dist="uniform:0:1",
            mu=30.0,
            sigma=20000.0,
            gamma=1.0,
            reg_lambda=0.1,
            n_noise=2 if quick else 5,
        )
        for r, t, mech in itertools.product(
            rhos, ["feature", "label_noise"], ["offline", "data_dependent"]
        )
    ]


def population(params: dict) -> Population:
    """The study's sellers: synthetic data, costs tied to ``target`` by the copula of
    ``market_sim.population`` ("feature" is feature 0's latent)."""
    on = 0 if params["target"] == "feature" else "label_noise"
    return Population(
        [(params["dist"], params["sellers"])],
        data="synthetic",
        rho=params["rho"],
        on=on,
        d=params["d"],
        label_noise=params["label_noise"],
        n_test=N_TEST,
    )


def market(params: dict, rng: np.random.Generator):
    """(X, y, flipped, costs, X_test, y_test): one market of :func:`population`."""
    mk = population(params).sample(rng)
    X, y = mk.data
    X_test, y_test = mk.test
    return X, y, mk.mislabelled, mk.costs, X_test, y_test


def run(params: dict, rng: np.random.Generator) -> list[dict]:
    X, y, flipped, costs, X_test, y_test = market(params, rng)
    dist = parse_distribution(params["dist"])
    psi = dist.virtual_cost(costs)
    kw = dict(mu=params["mu"], sigma=params["sigma"], gamma=params["gamma"])
    res: offline.OfflineResult | dd.DataDependentResult
    if params["mechanism"] == "offline":
        res = offline.solve(psi, **kw)
    else:
        kw["mu"] = params["mu"] * params["sellers"]  # mu ||a||^2 is O(mu / m) at a = 1/m
        res = dd.solve(X, y, psi, reg_lambda=params["reg_lambda"], **kw)
    errors = [
        1
        - HeteroDPLogisticRegression(
            a=res.a, eta=res.eta, reg_lambda=params["reg_lambda"], random_state=rng
        )
        .fit(X, y)
        .score(X_test, y_test)
        for _ in range(params["n_noise"])
    ]
    return [
        dict(
            test_error=float(np.mean(errors)),
            payment=float(psi @ res.eps),
            eps_avg=float(res.eta / y.size),
            n_bought=int(np.count_nonzero(res.a)),
            budget_on_mislabelled=float(res.a[flipped].sum()),
            share_mislabelled=float(flipped.mean()),
            cost_target_corr=float(
                stats.spearmanr(costs, flipped if params["target"] == "label_noise" else X[:, 0])[0]
            ),
        )
    ]
