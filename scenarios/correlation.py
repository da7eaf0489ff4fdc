"""Dependence between data and costs: a Gaussian copula with correlation rho.

Sellers' rows come from a latent standard normal G (x = G / (2 sqrt d), clipped
to ||x|| <= 1); labels follow a linear rule, flipped for the sellers whose
latent noise g exceeds Phi^-1(1 - label_noise).  The cost latent z is standard
normal with corr(z, target) = rho, where the target is G[:, 0] ("feature") or g
("label_noise"), and c = F^-1(Phi(z)), so costs keep the law F exactly.  With
rho < 0 and target label_noise the mislabelled sellers are the cheap ones.
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


def market(params: dict, rng: np.random.Generator):
    """(X, y, flipped, costs, X_test, y_test) with the copula of the module docstring."""
    m, d, noise = params["sellers"], params["d"], params["label_noise"]
    w_true = np.ones(d) / np.sqrt(d)

    def rows(k):
        G = rng.standard_normal((k, d))
        X = G / (2 * np.sqrt(d))
        X /= np.maximum(1.0, np.linalg.norm(X, axis=1))[:, None]
        g = rng.standard_normal(k)
        flipped = g > stats.norm.ppf(1 - noise)
        y = np.where(flipped, X @ w_true <= 0, X @ w_true > 0).astype(int)
        return X, y, flipped, G[:, 0], g

    X, y, flipped, feature, g = rows(m)
    target = feature if params["target"] == "feature" else g
    rho = params["rho"]
    z = rho * target + np.sqrt(max(0.0, 1 - rho**2)) * rng.standard_normal(m)
    dist = parse_distribution(params["dist"])
    lo, hi = dist.support
    costs = np.clip(dist.ppf(stats.norm.cdf(z)), lo, hi)
    X_test, y_test, *_ = rows(N_TEST)
    return X, y, flipped, costs, X_test, y_test


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
