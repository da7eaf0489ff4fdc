"""Wisconsin breast-cancer replication (Sec. VII/Fig. 2 of [AES]; Sec. 5 and the
correlation experiment of [SB]).

Each task is one gamma, one data-cost mapping and one ``split``: a 60/20/20
train/validation/test split and costs c ~ U[1e-4, 5e-4] (so psi = 2c - 1e-4)
drawn from a generator seeded by the split number alone, so every gamma and
both mappings see the same data and the same costs (paired comparisons); the
task's own generator draws the noise.  Features are standardised on the training split and rows
scaled so ||x|| <= 1.  For every method the hyperparameters (Lambda, mu,
sigma) are chosen on the validation split by the buyer's overall error,
misclassification + gamma * payments, each averaged over ``n_noise`` draws of
Algorithm 1's noise; the chosen model is then scored on the test split over
fresh draws.  Methods:

* ``ours`` -- the data-dependent mechanism (Eq. 17, its expected-noise form,
  see ``market_sim.mechanisms.data_dependent``);
* ``naive`` -- the same with mu = sigma = 0 (the papers' naive model);
* ``offline`` -- the data-independent mechanism (Alg. 2, Eq. 11);
* ``non_private`` -- weighted logistic regression, no noise, no payments.

Payments are the expected total payment sum_i psi(c_i) eps_i (Myerson's
revenue identity, Thm 3.2 of 000); the allocation rules are monotone in the
own cost, so these are the expected Myerson payments.

Mapping ``sorted`` is the correlation experiment of 000: the k-th smallest
cost goes to the training row with the k-th smallest value of feature
``feature`` (0 = mean radius, larger for malignant tumours).
"""

from __future__ import annotations

import functools
import itertools
from typing import Any

import numpy as np

from market_sim.distributions import uniform
from market_sim.parameters import Choice, Number

NAME = "wisconsin"
REPLICATIONS = 1  # replications are the splits; --reps adds noise replications


@functools.cache
def _costs():
    """The sellers' cost law, U[1e-4, 5e-4] (built on first use: scipy.stats is slow to
    import, and listing the study's parameters should not wait for it)."""
    return uniform(1e-4, 5e-4)


def __getattr__(name: str):  # PEP 562: ``wisconsin.COSTS`` is the cost law
    if name == "COSTS":
        return _costs()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


SIZES: dict[str, dict[str, Any]] = {
    "full": dict(
        gammas=list(np.geomspace(1e-3, 1.0, 7)),
        lambdas=[1e-3, 1e-2, 1e-1],
        mus=[10.0, 100.0, 1000.0, 10_000.0],
        sigmas=[1.0, 10.0, 100.0, 1000.0],
        n_noise=15,
        n_eps=31,
        splits=3,
    ),
    "quick": dict(
        gammas=[1e-2, 1.0],
        lambdas=[1e-2],
        mus=[100.0, 10_000.0],
        sigmas=[10.0, 1000.0],
        n_noise=3,
        n_eps=12,
        splits=1,
    ),
}
MAPPINGS = ["independent", "sorted"]
PARAMS = {  # what `--set` accepts (market_sim.parameters)
    "size": Choice(*SIZES, doc="the hyperparameter grid and number of splits: quick or full"),
    "split": Number(int, low=0, doc="which 60/20/20 split (seeds the data split and the costs)"),
    "gamma": Number(float, low=0, low_open=True),
    "mapping": Choice(
        *MAPPINGS, doc="costs independent of the rows, or sorted by the feature (000)"
    ),
    "feature": Number(int, low=0, high=29, doc="the feature costs are sorted by (0: mean radius)"),
}


def grid(quick: bool = False) -> list[dict]:
    size = "quick" if quick else "full"
    cfg = SIZES[size]
    return [
        dict(size=size, split=k, gamma=float(g), mapping=mp, feature=0)
        for k, g, mp in itertools.product(range(cfg["splits"]), cfg["gammas"], MAPPINGS)
    ]


@functools.cache
def _data():
    from sklearn.datasets import load_breast_cancer

    X, y = load_breast_cancer(return_X_y=True)
    return X, y


def split(rng: np.random.Generator):
    """Train/validation/test (60/20/20), standardised on train, ||x|| <= 1."""
    X, y = _data()
    idx = rng.permutation(y.size)
    n_tr, n_va = int(0.6 * y.size), int(0.2 * y.size)
    parts = idx[:n_tr], idx[n_tr : n_tr + n_va], idx[n_tr + n_va :]
    mean, sd = X[parts[0]].mean(axis=0), X[parts[0]].std(axis=0)
    scale = np.linalg.norm((X[parts[0]] - mean) / sd, axis=1).max()

    def prep(rows):
        Z = (X[rows] - mean) / sd / scale
        norms = np.linalg.norm(Z, axis=1, keepdims=True)
        return Z / np.maximum(norms, 1.0), y[rows]

    return [prep(p) for p in parts]


def assign_costs(X, costs, mapping: str, feature: int) -> np.ndarray:
    if mapping == "independent":
        return costs
    if mapping == "sorted":  # 000, Sec. 5: k-th smallest cost to the k-th row by feature
        out = np.empty_like(costs)
        out[np.argsort(X[:, feature], kind="stable")] = np.sort(costs)
        return out
    raise ValueError(f"unknown mapping {mapping!r}")


def _signed(data):
    X, y = data
    return np.where(y > 0, 1.0, -1.0)[:, None] * X


def _error(w, data) -> float:
    return float(np.mean(_signed(data) @ w <= 0))  # a tie counts as a mistake


def _private_errors(a, eta, lam, train, evalset, seeds) -> np.ndarray:
    """Algorithm 1 (the checked estimator is HeteroDPLogisticRegression) per noise seed."""
    from market_sim.learning.hetero_dp import objective_perturbation

    SX = _signed(train)
    return np.array(
        [
            _error(objective_perturbation(SX, a, eta, lam, np.random.default_rng(s))[0], evalset)
            for s in seeds
        ]
    )


def _candidates(method, train, psi, gamma, cfg):
    """(hyperparameters, a, eta) for each hyperparameter combination of ``method``."""
    from market_sim.mechanisms import data_dependent as dd
    from market_sim.mechanisms import offline

    X, y = train
    etas_of = lambda grid: X.shape[0] * grid  # noqa: E731
    eps_grid = np.geomspace(0.01, 10.0, cfg["n_eps"])
    for lam in cfg["lambdas"]:
        if method == "naive":
            r = dd.solve(
                X, y, psi, mu=0.0, sigma=0.0, gamma=gamma, reg_lambda=lam, eps_avg_grid=eps_grid
            )
            yield dict(reg_lambda=lam, mu=0.0, sigma=0.0), r.a, r.eta
            continue
        for mu in cfg["mus"]:
            if method == "ours":  # sigma only re-weighs the line search: one solve per mu
                base = dd.solve(
                    X, y, psi, mu=mu, sigma=0.0, gamma=gamma, reg_lambda=lam, eps_avg_grid=eps_grid
                )
            for sigma in cfg["sigmas"]:
                hp = dict(reg_lambda=lam, mu=mu, sigma=sigma)
                if method == "ours":
                    j = int(np.argmin(base.profile + sigma / etas_of(eps_grid)))
                    r = dd.solve(
                        X,
                        y,
                        psi,
                        mu=mu,
                        sigma=sigma,
                        gamma=gamma,
                        reg_lambda=lam,
                        eps_avg_grid=eps_grid[j : j + 1],
                    )
                    yield hp, r.a, r.eta
                else:
                    r = offline.solve(psi, mu=mu, sigma=sigma, gamma=gamma)
                    yield hp, r.a, r.eta


def run(params: dict, rng: np.random.Generator) -> list[dict]:
    from market_sim.learning.hetero_dp import weighted_logistic_fit

    cfg = SIZES[params["size"]]
    gamma = params["gamma"]
    data_rng = np.random.default_rng(np.random.SeedSequence([20_240_503, params["split"]]))
    train, val, test = split(data_rng)
    costs = assign_costs(
        train[0], _costs().sample(train[1].size, data_rng), params["mapping"], params["feature"]
    )
    psi = _costs().virtual_cost(costs)
    n = cfg["n_noise"]
    val_seeds = rng.integers(2**63, size=n)
    test_seeds = rng.integers(2**63, size=n)
    rows = []
    for method in ("ours", "naive", "offline"):
        best = None
        for hp, a, eta in _candidates(method, train, psi, gamma, cfg):
            payment = float(psi @ (a * eta))
            score = (
                _private_errors(a, eta, hp["reg_lambda"], train, val, val_seeds).mean()
                + gamma * payment
            )
            if best is None or score < best[0]:
                best = (score, hp, a, eta, payment)
        assert best is not None  # _candidates yields at least one combination
        _, hp, a, eta, payment = best
        errs = _private_errors(a, eta, hp["reg_lambda"], train, test, test_seeds)
        rows.append(
            dict(
                method=method,
                test_error=float(errs.mean()),
                test_error_sd=float(errs.std(ddof=1)) if n > 1 else 0.0,
                payment=payment,
                overall=float(errs.mean()) + gamma * payment,
                eps_avg=eta / a.size,
                n_bought=int(np.count_nonzero(a)),
                max_guarantee=float(np.max(a * eta + 2 * np.log1p(a / hp["reg_lambda"]))),
                **hp,
            )
        )
    # the non-private baseline: no noise, no payments; Lambda on validation
    uniform_a = np.full(train[1].size, 1.0 / train[1].size)
    fits = {lam: weighted_logistic_fit(_signed(train), uniform_a, lam) for lam in cfg["lambdas"]}
    lam = min(fits, key=lambda k: _error(fits[k], val))
    err = _error(fits[lam], test)
    rows.append(
        dict(
            method="non_private",
            test_error=err,
            test_error_sd=0.0,
            payment=0.0,
            overall=err,
            eps_avg=np.inf,
            n_bought=train[1].size,
            max_guarantee=np.inf,
            reg_lambda=lam,
            mu=np.nan,
            sigma=np.nan,
        )
    )
    return rows
