"""Repeated markets under lifetime privacy budgets: what a tighter accountant buys.

Each task runs one market of ``m`` sellers for ``rounds`` rounds with a budget
``budget`` (``EPS`` or ``EPS:DELTA``) per seller, composed by ``accountant``
(basic / rdp / pld; market_sim.privacy.ledger).  Costs are redrawn every round, the
platform trains Algorithm 1 on the bought sellers' synthetic rows, and sellers whose
budget is spent leave.  Each row is one round: the buyer's test error, the sellers
still in the market, what was bought and paid, the mean composed loss and the mean
sum of eps sold (so the accountant's tightness is sum / composed).  Rounds after the
market closed (every budget spent) are rows with nothing bought.
"""

from __future__ import annotations

import itertools

import numpy as np

from market_sim.parameters import Choice, Distribution, Number, Registered

NAME = "repeated"
REPLICATIONS = 3
QUICK_REPLICATIONS = 1

# posted price 0.9 (9 sellers in 10 sell each round) at 0.1 of privacy a sale: a budget of
# 3 is 30 sales by the sum; offline sells eps ~ 0.5-1 a sale to fewer sellers
MECHANISMS = {"offline": 300, "posted-price:price=0.9:eps_level=0.1": 1000}  # spec -> m
QUICK_M = 30
ACCOUNTANTS = ["basic", "rdp", "pld"]
# EPS:DELTA; pure DP ("3") only with basic: there every accountant is the sum (tested)
BUDGETS = ["3:1e-6", "3:1e-3"]
PURE = "3"


def _budget(value) -> None:
    """EPS or EPS:DELTA (eps > 0, delta in (0, 1))"""
    from market_sim.privacy.ledger import Budget

    Budget.parse(str(value))


PARAMS = {  # what `--set` accepts (market_sim.parameters)
    "mechanism": Registered("mechanism"),
    "accountant": Choice(
        *ACCOUNTANTS, doc="how a seller's privacy losses compose (market_sim.privacy.ledger)"
    ),
    "budget": _budget,
    "m": Number(int, low=2),
    "rounds": Number(int, low=1),
    "dist": Distribution(),
}


def grid(quick: bool = False) -> list[dict]:
    points = [(acc, b) for acc, b in itertools.product(ACCOUNTANTS, BUDGETS)]
    points.append(("basic", PURE))
    return [
        dict(
            mechanism=mech,
            accountant=acc,
            budget=b,
            m=QUICK_M if quick else m,
            rounds=40 if quick else 100,
            dist="uniform:0:1",
        )
        for (mech, m), (acc, b) in itertools.product(MECHANISMS.items(), points)
    ]


def run(params: dict, rng: np.random.Generator) -> list[dict]:
    from market_sim.agents import MarketModel  # Mesa: imported when a task runs

    m, rounds = int(params["m"]), int(params["rounds"])
    model = MarketModel(
        m,
        dist=params["dist"],
        mechanism=params["mechanism"],
        rounds=rounds,
        new_costs_each_round=True,
        measure_regret=False,
        data="synthetic",
        budget=str(params["budget"]),
        accountant=params["accountant"],
        seed=int(rng.integers(2**63)),
    )
    rows = []
    led = model.ledger
    assert led is not None
    while model.running:
        model.step()
        sold = model.eps[model.participating]
        summed, spent = led.basic.spent, led.spent
        rows.append(
            {
                "round": model.round,
                "test_error": model.platform.test_error,
                "sellers_in_market": int(m - model._exhausted.sum()),
                "n_bought": int(np.count_nonzero(sold)),
                "eps_bought": float(sold.sum()),
                "total_payment": model.platform.total_payment,
                "mean_eps_spent": float(spent.mean()),
                "mean_eps_sum": float(summed.mean()),
                "max_eps_spent": float(spent.max()),
                "mean_sales": float(led.rounds.mean()),  # rounds a seller sold in, so far
                "tightness": float(summed.sum() / spent.sum()) if spent.sum() > 0 else np.nan,
            }
        )
    last = rows[-1]
    for r in range(model.round + 1, rounds + 1):  # the market has closed
        rows.append(
            {
                **last,
                "round": r,
                "test_error": np.nan,
                "sellers_in_market": 0,
                "n_bought": 0,
                "eps_bought": 0.0,
                "total_payment": 0.0,
            }
        )
    return rows
