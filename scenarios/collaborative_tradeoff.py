"""[SZH]'s synthetic experiment (Sec. 6): a party's privacy level against its valuation and reward.

Three parties share the sufficient statistic of a Gaussian model with known
variance (sizes 100, 200, 400; the seed uses Bayesian linear regression,
whose noise-aware posterior needs MCMC, see ``collaborative.models``) under
(2, eps)-Renyi DP; the others keep eps = 0.5 and
party 1 (index 0) sweeps eps_1.  For each rho the row holds party 1's value
alone v_1, its Shapley value phi_1, the targets r_1..r_3 and the grand value
v_N, and how close party 1's reward is to the grand coalition's posterior
(-KL) under likelihood tempering and under noise addition at the same target.
"""

from __future__ import annotations

import numpy as np

from market_sim.parameters import Number

NAME = "collaborative_tradeoff"
REPLICATIONS = 20
QUICK_REPLICATIONS = 2
SIZES = (100, 200, 400)
OTHERS_EPS = 0.5
RHOS = (0.0, 0.2, 0.5, 1.0)
TRUE_MEAN = 0.5

PARAMS = {  # what `--set` accepts (market_sim.parameters)
    "eps_1": Number(
        float, low=0, low_open=True, doc="party 1's privacy level (Renyi eps); the others keep 0.5"
    ),
}


def grid(quick: bool = False) -> list[dict]:
    eps = [0.05, 5.0] if quick else [float(v) for v in np.geomspace(0.01, 100.0, 11)]
    return [dict(eps_1=e) for e in eps]


def run(params: dict, rng: np.random.Generator) -> list[dict]:
    from market_sim.collaborative import GaussianMeanModel
    from market_sim.collaborative.rewards import noise_reward, target_rewards, temper_reward
    from market_sim.collaborative.valuation import rho_shapley_rewards

    model = GaussianMeanModel(data_var=1.0, prior_var=1.0, bound=3.0)
    shared = [
        model.share(
            rng.normal(TRUE_MEAN, 1.0, n), float(params["eps_1"]) if i == 0 else OTHERS_EPS, rng
        )
        for i, n in enumerate(SIZES)
    ]
    values, phi, _ = target_rewards(model, shared, 0.0, negative="clip")
    v_grand = values[7]
    rows = []
    for rho in RHOS:
        r = rho_shapley_rewards(phi, v_grand, rho, negative="clip")
        temper = temper_reward(model, shared, r[0])
        noise = noise_reward(model, shared, r[0], rng)
        rows.append(
            dict(
                rho=rho,
                v_1=values[1],
                phi_1=float(phi[0]),
                r_1=float(r[0]),
                r_2=float(r[1]),
                r_3=float(r[2]),
                v_grand=v_grand,
                kappa_1=temper.control,
                tau_1=noise.control,
                similarity_temper=temper.similarity,
                similarity_noise=noise.similarity,
                negative_shapley=int(np.sum(phi < 0)),
            )
        )
    return rows
