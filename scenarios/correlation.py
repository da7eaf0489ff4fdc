"""Dependence between data and costs: a Gaussian copula with correlation rho.

The sellers are a :class:`market_sim.population.Population` with synthetic or
Wisconsin data (its module docstring gives the generators and the copula): the cost
latent has correlation rho with a feature, the label or the label noise, and costs
keep their law exactly.  With rho < 0 and target label_noise the mislabelled sellers
are the cheap ones.

Each task draws one market and returns a row per mechanism: ``offline`` (a platform
that believes costs independent of the data: the marginal psi), ``oracle`` (the
offline mechanism with each seller's psi given its data: the optimal data-independent
rule for a platform that knows the dependence; undefined at |rho| = 1, where a cost
given its data has no density) and ``data_dependent`` (Eq. 17 of 003).  Columns: the
private model's test error (Alg. 1, over noise draws), the payment the platform expects
(sum psi eps), the payment expected given the data (sum psi_i|data eps: Myerson's
identity under the true conditional law), Eq. 11 with that payment, and the share of
the privacy budget bought from mislabelled sellers.
"""

from __future__ import annotations

import itertools
from typing import TYPE_CHECKING

import numpy as np

from market_sim.errors import MarketSimError
from market_sim.parameters import Choice, Distribution, Number

if TYPE_CHECKING:  # the heavy imports happen when a task runs
    from market_sim.population import Population

NAME = "correlation"
REPLICATIONS = 5
QUICK_REPLICATIONS = 1
N_TEST = 2000
MECHANISMS = ("offline", "oracle", "data_dependent")
TARGETS = {"synthetic": ("feature", "label_noise"), "wisconsin": ("feature", "label")}
WISCONSIN_FEATURE = "mean radius"  # larger for malignant tumours (000, Sec. 5)

PARAMS = {  # what `--set` accepts (market_sim.parameters)
    "rho": Number(
        float,
        low=-1,
        high=1,
        doc="latent correlation of the Gaussian copula between cost and target",
    ),
    "data": Choice(
        "synthetic",
        "wisconsin",
        doc="the sellers' rows: synthetic logistic data or the Wisconsin set",
    ),
    "target": Choice(
        "feature",
        "label_noise",
        "label",
        doc="what costs correlate with: a feature, being mislabelled, or the label",
    ),
    "sellers": Number(int, low=1),
    "d": Number(int, low=1, doc="number of features of the synthetic data"),
    "label_noise": Number(
        float, low=0, high=1, high_open=True, doc="share of synthetic labels flipped"
    ),
    "dist": Distribution(),
    "mu": Number(float, low=0, low_open=True),
    "sigma": Number(float, low=0, low_open=True),
    "gamma": Number(float, low=0, low_open=True),
    "reg_lambda": Number(float, low=0, low_open=True),
    "n_noise": Number(
        int, low=1, doc="draws of Algorithm 1's noise per model (test error averaged)"
    ),
    "audit_sellers": Number(int, low=0, doc="sellers per audited market (0: no audit)"),
    "audit_markets": Number(int, low=1, doc="markets the audit searches per case"),
}
# audited mechanisms: the study's row name -> the registry's name.  The oracle is no
# mechanism the audit can build (its psi_i depends on seller i's data: docs/studies.md)
AUDITED = {"offline": "offline", "data_dependent": "data-dependent"}


def grid(quick: bool = False) -> list[dict]:
    rhos = [-0.9, 0.0, 0.9] if quick else [-1.0, -0.75, -0.5, -0.25, 0.0, 0.25, 0.5, 0.75, 1.0]
    return [
        dict(
            rho=r,
            data=data,
            target=t,
            sellers=80 if quick else 300,
            d=5,
            label_noise=0.15,
            dist="uniform:0:1",
            mu=30.0,
            sigma=20000.0,
            gamma=1.0,
            reg_lambda=0.1,
            n_noise=2 if quick else 5,
            audit_sellers=8 if quick else 12,
            audit_markets=1 if quick else 3,
        )
        for data, targets in TARGETS.items()
        for r, t in itertools.product(rhos, targets)
    ]


def population(params: dict) -> Population:
    """The study's sellers: costs tied to ``target`` by the copula of
    ``market_sim.population`` (synthetic "feature" is feature 0's latent, Wisconsin's is
    the mean radius)."""
    from market_sim.population import Population

    data = params.get("data", "synthetic")
    if params["target"] not in TARGETS[data]:
        raise MarketSimError(f"target {params['target']!r} is not one of {data}'s: {TARGETS[data]}")
    on = {"feature": 0 if data == "synthetic" else WISCONSIN_FEATURE}.get(
        params["target"], params["target"]
    )
    extra = dict(d=params["d"], label_noise=params["label_noise"], n_test=N_TEST)
    return Population(
        [(params["dist"], params["sellers"])],
        data=data,
        rho=params["rho"],
        on=on,
        **(extra if data == "synthetic" else {}),
    )


def allocations(params: dict, pop: Population, mk) -> dict:
    """Each mechanism's solution on the market: offline with the marginal psi (a platform
    that believes costs independent of the data), the oracle's offline with psi_i given
    the data (undefined at |rho| = 1), and the data-dependent mechanism (Eq. 17, 003)."""
    from market_sim.mechanisms import data_dependent as dd
    from market_sim.mechanisms import offline

    X, y = mk.data
    psi = pop.seller_laws.virtual_cost(mk.costs)
    kw = dict(mu=params["mu"], sigma=params["sigma"], gamma=params["gamma"])
    out: dict = {"offline": offline.solve(psi, **kw)}
    if abs(params["rho"]) < 1:
        out["oracle"] = offline.solve(pop.conditional_virtual_cost(mk), **kw)
    dd_kw = dict(kw, mu=params["mu"] * params["sellers"])  # mu ||a||^2 is O(mu / m) at a = 1/m
    out["data_dependent"] = dd.solve(X, y, psi, reg_lambda=params["reg_lambda"], **dd_kw)
    return out


def run(params: dict, rng: np.random.Generator, replication: int = 0) -> list[dict]:
    from market_sim.learning import HeteroDPLogisticRegression
    from market_sim.mechanisms import offline

    pop = population(params)
    mk = pop.sample(rng)
    assert mk.data is not None and mk.test is not None  # every population here has data
    X, y = mk.data
    psi = pop.seller_laws.virtual_cost(mk.costs)
    psi_true = pop.conditional_virtual_cost(mk) if abs(params["rho"]) < 1 else None
    kw = dict(mu=params["mu"], sigma=params["sigma"], gamma=params["gamma"])
    noise_seeds = rng.integers(2**63, size=params["n_noise"])  # the same noise for every mechanism
    rows = []
    for mech, res in allocations(params, pop, mk).items():
        errors = [
            1
            - HeteroDPLogisticRegression(
                a=res.a, eta=res.eta, reg_lambda=params["reg_lambda"], random_state=int(seed)
            )
            .fit(X, y)
            .score(*mk.test)
            for seed in noise_seeds
        ]
        true = np.nan if psi_true is None else float(psi_true @ res.eps)
        eq11 = np.nan if psi_true is None else offline.proxy_loss_of_eps(res.eps, psi_true, **kw)
        rows.append(
            dict(
                mechanism=mech,
                test_error=float(np.mean(errors)),
                payment=float(psi @ res.eps),  # what a platform believing independence expects
                payment_true=true,  # E[Myerson payments | data]: psi_i given the data
                objective=float(eq11),  # Eq. 11 with the payments expected given the data
                eps_avg=float(res.eta / y.size),
                n_bought=int(np.count_nonzero(res.a)),
                budget_on_mislabelled=_on_mislabelled(res.a, mk),
                share_mislabelled=_share_mislabelled(mk),
                cost_target_corr=_cost_target_corr(params, mk),
            )
        )
    if replication == 0 and params.get("audit_sellers", 0):
        for row in rows:
            if row["mechanism"] in AUDITED:
                row.update(audit_columns(params, row["mechanism"], rng))
    return rows


def audit_columns(params: dict, mechanism: str, rng: np.random.Generator) -> dict:
    """The audit's IC and IR verdicts and largest gain for ``mechanism`` on smaller
    markets of the same population (``audit_sellers`` sellers, ``audit_markets``
    markets; data drawn with the costs, so the copula is in every audited market), with
    the parameters of :func:`allocations` (data-dependent: mu x sellers, reg_lambda),
    and the mean truthful payment a seller gets there (the scale of the gain).  The
    verdict also counts gains between adjacent candidate types (``audit_type_gain``)."""
    from market_sim.auditing import audit

    small = population(params | {"sellers": params["audit_sellers"]})
    markets = [small.sample(rng) for _ in range(params["audit_markets"])]
    costs = np.array([mk.costs for mk in markets])
    data = [mk.data for mk in markets]
    kw = dict(mu=params["mu"], sigma=params["sigma"], gamma=params["gamma"])
    if mechanism == "data_dependent":
        kw |= dict(mu=params["mu"] * params["audit_sellers"], reg_lambda=params["reg_lambda"])
    name = AUDITED[mechanism]
    res = audit(name, small, None, len(markets), rng, costs=costs, data=data, **kw)
    return dict(
        audit_ic=res.verdict,
        audit_ir=res.ir_verdict,
        audit_max_gain=res.summary["max_gain"],
        audit_type_gain=res.summary.get("type_gain_max", np.nan),  # between adjacent types
        audit_mean_payment=_mean_truthful_payment(name, small, markets, kw),
    )


def _mean_truthful_payment(name: str, pop: Population, markets: list, kw: dict) -> float:
    """A seller's mean payment when everyone reports the truth, over the audited markets."""
    from market_sim.mechanisms.base import as_mechanism

    mech = as_mechanism(name, population=pop, **kw)
    pays = [
        (mech.with_data(*mk.data) if getattr(mech, "needs_data", False) else mech)
        .outcome(mk.costs)
        .payments.mean()
        for mk in markets
    ]
    return float(np.mean(pays))


def _on_mislabelled(a, mk) -> float:
    return np.nan if mk.mislabelled is None else float(a[mk.mislabelled].sum())


def _share_mislabelled(mk) -> float:
    return np.nan if mk.mislabelled is None else float(mk.mislabelled.mean())


def _cost_target_corr(params: dict, mk) -> float:
    """Spearman's correlation between the costs and what they are tied to."""
    from scipy import stats

    X, y = mk.data
    target = {"label_noise": mk.mislabelled, "label": y}.get(params["target"], X[:, 0])
    return float(stats.spearmanr(mk.costs, target)[0])
