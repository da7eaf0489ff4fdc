"""Sellers with several private fields: MFG-RegretNet's table, reproduced and extended.

The generator of MFG-RegretNet's baselines (10 sellers, v ~ U[0, 1] cost per unit,
cap ~ U[0.1, 5], |D| ~ U{10..500}; budgets B in {10, 50, 100, 200}) as a
``market_sim.multifield.MultiFieldPopulation``; cost and cap private, size verified.
Each task draws ``profiles`` markets (a replication is one of the peers' seeds) and
measures one mechanism at one budget two ways:

* **their measure** (``joint_audit.grid_regret``): each seller alone reports a cost on
  a 25-point grid of [0, 1], utility t - v eps ignoring caps, regret and IR violation
  normalised by the seller's cost of its allocation (``peer_*`` columns);
* **our joint audit** (``joint_audit.audit_types``): cost and cap misreported jointly
  (per-field grids, the joint grid with its corners, a local search), utility -inf
  beyond the true cap (``joint_*`` columns; ``cap_exceeded``: truthful sellers whose cap
  the mechanism exceeds).

Mechanisms (``market_sim.mechanisms.multifield``): ``pac`` (FairQuery, scale 1, caps
not read: MFG-RegretNet's PAC), ``vcg`` (their budgeted VCG), ``csra`` (their CSRA-QMS),
``fair-query-caps`` (FL-Market's cap rule), ``all-in`` (FL-Market), ``posted-price``
(price min(1, B / n) per unit, eps = min(cap, 1): never spends above B),
``cap-threshold`` (the 5 lowest costs, eps = min(cap, 1); truthful in cost and cap) and
``mfg-pricing`` (their MFG-Pricing: every cap sold, B split in proportion).
"""

from __future__ import annotations

import itertools

import numpy as np

from market_sim.parameters import Choice, Number

NAME = "multidim"
REPLICATIONS = 5
QUICK_REPLICATIONS = 2
POPULATION = "{n}*uniform:0:1;cap=uniform:0.1:5;size=integers:10:500"
MECHANISMS = (
    "pac",
    "vcg",
    "csra",
    "fair-query-caps",
    "all-in",
    "posted-price",
    "cap-threshold",
    "mfg-pricing",
)
BUDGETS = (10.0, 50.0, 100.0, 200.0)

PARAMS = {  # what `--set` accepts (market_sim.parameters)
    "mechanism": Choice(*MECHANISMS, doc="the multi-field mechanism (module docstring)"),
    "budget": Number(float, low=0, low_open=True, doc="the buyer's budget B"),
    "sellers": Number(int, low=2),
    "profiles": Number(int, low=1, doc="markets drawn per replication"),
    "cost_grid": Number(int, low=2, doc="points of the peers' cost grid"),
    "field_grid": Number(int, low=2, doc="the joint audit's grid points per field"),
    "joint_grid": Number(int, low=1, doc="the joint audit's grid points per field, jointly"),
    "local_steps": Number(int, low=0, doc="rounds of the joint audit's local search"),
}


def grid(quick: bool = False) -> list[dict]:
    mechanisms = ("pac", "csra", "cap-threshold") if quick else MECHANISMS
    budgets = (10.0, 50.0) if quick else BUDGETS
    return [
        dict(
            mechanism=m,
            budget=b,
            sellers=10,
            profiles=8 if quick else 200,
            cost_grid=25,
            field_grid=9 if quick else 25,
            joint_grid=5 if quick else 9,
            local_steps=4 if quick else 12,
        )
        for m, b in itertools.product(mechanisms, budgets)
    ]


# The study's mechanisms at budget B for n sellers (module docstring): name -> builder,
# each given the module market_sim.mechanisms.multifield, B and n.
BUILDERS = {
    "pac": lambda mf, b, n: mf.FairQueryCaps(budget=b, scale=1.0, respect_caps=False),
    "vcg": lambda mf, b, n: mf.VCGProcurement(budget=b),
    "csra": lambda mf, b, n: mf.CSRA(budget=b),
    "fair-query-caps": lambda mf, b, n: mf.FairQueryCaps(budget=b),
    "all-in": lambda mf, b, n: mf.AllIn(budget=b),
    "mfg-pricing": lambda mf, b, n: mf.MFGPricing(budget=b),
    "posted-price": lambda mf, b, n: mf.PostedPricePerUnit(price=min(1.0, b / n), e_max=1.0),
    "cap-threshold": lambda mf, b, n: mf.CapThreshold(k=n // 2, e_max=1.0),
}


def build(name: str, budget: float, sellers: int):
    """The study's mechanism ``name`` at budget B (module docstring)."""
    from market_sim.mechanisms import multifield as mf

    return BUILDERS[name](mf, budget, sellers)


def run(params: dict, rng: np.random.Generator) -> list[dict]:
    from market_sim.joint_audit import audit_types, grid_regret
    from market_sim.multifield import MultiFieldPopulation

    pop = MultiFieldPopulation.parse(POPULATION.format(n=params["sellers"]))
    mech = build(params["mechanism"], params["budget"], params["sellers"])
    types = pop.draw(params["profiles"], rng)
    peer = grid_regret(mech, types, points=params["cost_grid"])
    audit = audit_types(
        mech,
        pop,
        types,
        rng,
        field_grid=params["field_grid"],
        joint_grid=params["joint_grid"],
        local_steps=params["local_steps"],
    )
    gain = np.nan_to_num(audit.regret, nan=0.0)
    spend = mech.run(types).payments.sum(axis=-1)
    return [
        {
            "peer_regret": float(peer.regret.mean()),
            "peer_share_gaining": float(np.mean(peer.regret > 1e-9)),
            "peer_ir_violation": float(peer.ir_violation.mean()),
            "peer_share_ir": float(np.mean(peer.ir_violation > 1e-9)),
            "joint_share_gaining": audit.share_gaining,
            "joint_mean_gain": float(gain.mean()),
            "joint_max_gain": audit.max_gain,
            "joint_share_ir": audit.share_ir_violations,
            "cap_exceeded": audit.share_cap_exceeded,
            "joint_share_escaping": audit.share_escaping,
            "joint_ic_refuted": audit.ic_refuted,
            "max_spend_over_budget": float(spend.max() / params["budget"]),
        }
    ]
