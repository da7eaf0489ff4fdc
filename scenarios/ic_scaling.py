"""IC and IR against m: strategic sellers under offline, online, private cut-off and pay-as-bid.

Per task one MarketModel runs a few rounds with a fraction of best-response or
learning sellers; each row is one round.  The regret of truth-telling (best
utility over candidate reports minus the utility of reporting the true cost, the
others' reports fixed) is measured on a uniform sample of ``regret_sample``
participants, relative to the mean payment of a bought seller.  Candidates: 33
cell midpoints of the support plus the own cost times ``LOCAL`` (as m grows the
cut-off moves towards the bottom of the support, and a profitable shading is a
small step above the own cost, finer than any fixed grid).  Pay-as-bid is the
control: its regret must stay clearly positive.  Sizes: online to 10^5 (10^6 for
truthful sellers), the others to 10^4 (an offline best-response round at 10^5
takes ~15 s, too long for the study's budget of 30 minutes on 2 cores over the
whole grid).
"""

from __future__ import annotations

import itertools

import numpy as np

from market_sim.parameters import Distribution, Number, Registered

NAME = "ic_scaling"
REPLICATIONS = 3
QUICK_REPLICATIONS = 1
TOL = 1e-9
LOCAL = (0.8, 0.9, 0.95, 0.99, 1.01, 1.02, 1.05, 1.1, 1.2, 1.5, 2.0)

SIZES = {
    "online": [100, 1_000, 10_000, 100_000],
    "offline": [100, 1_000, 10_000],
    "pay-as-bid": [100, 1_000, 10_000],
    "private-cutoff": [100, 1_000, 10_000],
}

PARAMS = {  # what `--set` accepts (market_sim.parameters)
    "mechanism": Registered("mechanism"),
    "strategy": Registered("strategy"),
    "strategic_fraction": Number(float, low=0, high=1),
    "m": Number(int, low=1),
    "rounds": Number(int, low=1),
    "dist": Distribution(),
    "gamma": Number(float, low=0, low_open=True),
    "regret_sample": Number(
        int, low=1, doc="participants whose regret of truth-telling is measured"
    ),
}


def grid(quick: bool = False) -> list[dict]:
    strategies = ["best-response"] if quick else ["best-response", "learning"]
    fractions = [0.5] if quick else [0.1, 0.5, 1.0]
    out = []
    for mech, strat, frac in itertools.product(SIZES, strategies, fractions):
        for m in SIZES[mech][:2] if quick else SIZES[mech]:
            out.append(
                dict(
                    mechanism=mech,
                    strategy=strat,
                    strategic_fraction=frac,
                    m=m,
                    rounds=2 if quick else (8 if strat == "learning" else 3),
                    dist="uniform:0:1",
                    gamma=0.3,
                    regret_sample=100 if quick else 200,
                )
            )
    if not quick:
        out.append(
            dict(
                mechanism="online",
                strategy="truthful",
                strategic_fraction=1.0,
                m=1_000_000,
                rounds=2,
                dist="uniform:0:1",
                gamma=0.3,
                regret_sample=200,
            )
        )
    return out


def truth_regret(model, sample: int, rng: np.random.Generator) -> np.ndarray:
    """Regret of truth-telling of a uniform sample of this round's participants."""
    active = model.active()
    idx = np.sort(rng.choice(active.size, min(sample, active.size), replace=False))
    costs = model.cost[active[idx]]
    lo, hi = model.dist.support
    local = np.clip(costs[:, None] * np.asarray(LOCAL), lo, hi)
    grid = np.hstack([model.report_grid(costs, 33), local])  # column 0: the truth
    u = model.mechanism.deviation_utilities(idx, grid, costs, model.report[active], model.rng)
    return np.maximum(u.max(axis=1) - u[:, 0], 0.0)


def run(params: dict, rng: np.random.Generator) -> list[dict]:
    from market_sim.agents import MarketModel  # Mesa: imported when a task runs

    model = MarketModel(
        params["m"],
        dist=params["dist"],
        mechanism=params["mechanism"],
        strategy=params["strategy"],
        strategic_fraction=params["strategic_fraction"],
        rounds=params["rounds"],
        gamma=params["gamma"],
        measure_regret=False,
        agent_views=False,
        rng=rng,
    )
    rows = []
    truthful = (
        model.strategy_id == model.strategy_names.index("truthful")
        if "truthful" in model.strategy_names
        else np.zeros(model.n_sellers, dtype=bool)
    )
    while model.running:
        model.step()
        bought = model.eps > 0
        scale = float(model.payment[bought].mean()) if bought.any() else 1.0
        regret = truth_regret(model, params["regret_sample"], rng)
        rows.append(
            {
                "round": model.round,
                "max_regret": float(regret.max()),
                "mean_regret": float(regret.mean()),
                "rel_max_regret": float(regret.max()) / scale,
                "share_profitable": float(np.mean(regret > TOL * max(1.0, scale))),
                "ir_violations": int(np.sum(model.utility[truthful & model.participating] < -TOL)),
                "share_misreporting": model._share_misreporting(),
                "proxy_loss": float(model.platform.proxy_loss),
                "total_payment": float(model.platform.total_payment),
                "mean_payment": scale,
            }
        )
    return rows
