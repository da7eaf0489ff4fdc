"""A two-arm study: the uniform-price mechanism against the offline mechanism on
common markets.

Each replication draws one market's costs from ``crn`` (the generator shared by
every grid point of that replication), so both arms price the same sellers and
their difference carries no noise from different markets.

    market-sim run examples/two_arm_study.py --quick --out results/two_arm
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

NAME = "two_arm"
REPLICATIONS = 20
QUICK_REPLICATIONS = 3
DIST = "uniform:1:5"


def grid(quick: bool) -> list[dict]:
    sizes = [20] if quick else [20, 50, 100]
    return [{"arm": arm, "m": m} for m in sizes for arm in ("uniform-price", "offline")]


def _uniform_price(dist, m):
    """The example mechanism, buying as many sellers as the offline one would on
    average under the prior (the fluid cut-off's share of the market)."""
    from market_sim.mechanisms.online import OnlineMechanism
    from market_sim.registry import load_object

    fluid = OnlineMechanism(dist, m, mu=1.0, sigma=1.0, gamma=1.0)
    share = float(dist.cdf(fluid.threshold_cost))
    cls = load_object(str(Path(__file__).with_name("uniform_price.py")) + ":UniformPrice")
    return cls(n_buy=max(1, round(share * m)), eps_level=1.0, dist=dist)


def run(params, rng, *, replication, crn) -> list[dict]:
    """One market (costs from ``crn``), one arm; ``rng`` is this task's own generator
    (unused: both mechanisms are deterministic)."""
    from market_sim.distributions import parse_distribution
    from market_sim.mechanisms.base import as_mechanism
    from market_sim.mechanisms.offline import proxy_loss_of_eps

    dist = parse_distribution(DIST)
    m = int(params["m"])
    costs = dist.sample(m, crn)  # common random numbers: the same market for both arms
    if params["arm"] == "offline":
        mech = as_mechanism("offline", dist=dist, n_sellers=m)
    else:
        mech = _uniform_price(dist, m)
    out = mech.run(costs)
    psi = dist.virtual_cost(costs)
    return [
        {
            "arm": params["arm"],
            "m": m,
            "replication": replication,
            "mean_cost": float(costs.mean()),
            "proxy_loss": proxy_loss_of_eps(out.eps, psi, mu=1.0, sigma=1.0, gamma=1.0),
            "total_payment": float(out.payments.sum()),
            "total_eps": float(out.eps.sum()),
            "n_bought": int(np.count_nonzero(out.eps)),
            "min_utility": float(out.utilities(costs).min()),
        }
    ]


def section(df, folder) -> str:
    """Markdown for the report: each arm's mean proxy loss and payment by m."""
    table = (
        df.groupby(["m", "arm"])[["proxy_loss", "total_payment", "n_bought"]].mean().unstack("arm")
    )
    return (
        "## Uniform price vs offline (common markets)\n\n"
        + table.to_markdown(floatfmt=".4g")
        + "\n"
    )
