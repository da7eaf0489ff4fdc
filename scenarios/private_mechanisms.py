"""What protecting the reports costs: private mechanisms against the exact one.

Per task: m costs, then for each mechanism one row with its expected proxy loss
(Eq. 11, 003, of what is bought; given that something is bought, with the
probability ``p_empty`` of buying nothing beside it), expected total payment and, for a few
sellers, the largest expected gain from a misreport on a report grid next to
the approximate-truthfulness bound.

* ``exact``: the offline mechanism (Alg. 2), deterministic, exactly IC.
* ``private-cutoff``: the cut-off drawn by the exponential mechanism; loss and
  payment are exact expectations over its law (no sampling).
* ``private-posted-price``: one price per unit of eps by the exponential mechanism,
  calibrated from the prior (``calibrated_posted_price``).
"""

from __future__ import annotations

import itertools
from typing import TYPE_CHECKING, Any

import numpy as np

from market_sim.distributions import parse_distribution
from market_sim.mechanisms.offline import proxy_loss_of_eps
from market_sim.parameters import Distribution, Number

if TYPE_CHECKING:  # the heavy imports happen when a task runs
    from market_sim.mechanisms.private_pricing import PrivatePostedPrice

NAME = "private_mechanisms"
REPLICATIONS = 3
QUICK_REPLICATIONS = 1
GAMMA = 1.0

PARAMS = {  # what `--set` accepts (market_sim.parameters)
    "privacy": Number(
        float, low=0, low_open=True, doc="the private mechanisms' DP level in the reports"
    ),
    "m": Number(int, low=1),
    "dist": Distribution(),
    "ic_sellers": Number(int, low=1, doc="sellers whose best misreport gain is measured"),
}


def grid(quick: bool = False) -> list[dict]:
    privacy = [0.3, 3.0] if quick else [0.1, 0.3, 1.0, 3.0, 10.0, 30.0, 100.0]
    sizes = [50] if quick else [100, 1000, 10000]
    dists = ["uniform:1:5"] if quick else ["uniform:0:1", "uniform:1:5"]
    return [
        dict(privacy=p, m=m, dist=d, ic_sellers=2 if quick else 4)
        for p, m, d in itertools.product(privacy, sizes, dists)
    ]


def calibrated_posted_price(dist, m, privacy, **kw) -> PrivatePostedPrice:
    """Posted price tuned from the prior to mimic the fluid mechanism: the buyer
    values a unit of eps at psi(t) (t the fluid threshold cost), so the
    surplus-maximising price (v - p) F(p) is t itself; each accepting seller
    sells the fluid mechanism's mean eps per bought seller."""
    from market_sim.mechanisms.online import OnlineMechanism
    from market_sim.mechanisms.private_pricing import PrivatePostedPrice

    fluid = OnlineMechanism(dist, m, **kw)
    t = fluid.threshold_cost
    _, w = fluid.moments(fluid.cutoff)
    eps_level = fluid.scale * w / float(dist.cdf(np.array(t)))
    q = float(dist.cdf(np.array(t))) * np.geomspace(0.25, 4.0, 21)  # around t, like the cut-offs
    prices = tuple(float(v) for v in dist.ppf(np.minimum(q, 0.999)))
    return PrivatePostedPrice(
        prices, value=float(dist.virtual_cost(np.array(t))), eps_level=eps_level, privacy=privacy
    )


def _conditional_loss(prob, losses) -> dict:
    """Expected proxy loss given that something is bought (buying nothing has
    infinite loss), and the probability of buying nothing."""
    empty = ~np.isfinite(losses)
    p_empty = float(prob[empty].sum())
    if p_empty >= 1.0:
        return dict(proxy_loss=np.inf, p_empty=1.0)
    return dict(proxy_loss=float(prob[~empty] @ losses[~empty] / (1.0 - p_empty)), p_empty=p_empty)


def _ic(utility, costs, bound, n, n_bought, n_grid=21):
    """Largest gain over truth and largest bound among n sellers spread over the
    3 n_bought cheapest (where the mechanisms act), reports up to the cost of the
    3 n_bought-th cheapest."""
    order = np.argsort(costs)
    top = order[: max(3 * n_bought, n)]
    reports = np.linspace(costs.min(), costs[top[-1]], n_grid)
    gains, bounds = [], []
    for i in top[np.linspace(0, top.size - 1, n).astype(int)]:
        truth = utility(i, costs[i])
        gains.append(max(utility(i, r) for r in reports) - truth)
        bounds.append(bound(i))
    return max(gains), max(bounds)


def run(params: dict, rng: np.random.Generator) -> list[dict]:
    from market_sim.mechanisms.payments import offline_payments
    from market_sim.mechanisms.private_cutoff import PrivateCutoff

    dist = parse_distribution(params["dist"])
    m, privacy, n_ic = int(params["m"]), float(params["privacy"]), int(params["ic_sellers"])
    costs = dist.sample(m, rng)
    psi = dist.virtual_cost(costs)
    kw: dict[str, Any] = dict(mu=1.0, sigma=1.0, gamma=GAMMA)

    eps, pay = offline_payments(costs, dist, **kw)
    exact_loss = proxy_loss_of_eps(eps, psi, **kw)
    rows: list[dict[str, Any]] = [
        dict(
            mechanism="exact",
            proxy_loss=exact_loss,
            p_empty=0.0,
            total_payment=float(pay.sum()),
            max_gain=np.nan,
            gain_bound=0.0,
        )
    ]

    cut = PrivateCutoff(dist, m, privacy=privacy, **kw)
    prob = cut.cutoff_probabilities(costs)
    losses = cut.proxy_losses(costs)
    live = prob > 1e-15
    payment = sum(
        p * cut.payments(costs, lam).sum()
        for p, lam in zip(prob[live], cut.lams[live], strict=True)
    )
    n_bought = int(np.count_nonzero(eps))
    gain, bound = _ic(
        lambda i, r: cut.expected_utility(i, r, float(costs[i]), costs),
        costs,
        lambda i: cut.ic_bound(i, float(costs[i]), costs),
        n_ic,
        n_bought,
    )
    rows.append(
        dict(
            mechanism="private-cutoff",
            **_conditional_loss(prob, losses),
            total_payment=float(payment),
            max_gain=gain,
            gain_bound=bound,
            sensitivity=cut.sensitivity,
        )
    )

    posted = calibrated_posted_price(dist, m, privacy, **kw)
    p_price = posted.price_probabilities(costs)
    losses_pp, pay_pp = [], 0.0
    for p, price in zip(p_price, posted.prices, strict=True):
        bought = np.where(costs <= price, posted.eps_level, 0.0)
        losses_pp.append(proxy_loss_of_eps(bought, psi, **kw))
        pay_pp += p * price * bought.sum()
    gain, bound = _ic(
        lambda i, r: posted.expected_utility(i, r, float(costs[i]), costs),
        costs,
        lambda i: posted.ic_bound(float(costs[i])),
        n_ic,
        n_bought,
    )
    rows.append(
        dict(
            mechanism="private-posted-price",
            **_conditional_loss(p_price, np.array(losses_pp)),
            total_payment=float(pay_pp),
            max_gain=gain,
            gain_bound=bound,
            sensitivity=posted.sensitivity,
        )
    )
    for r in rows:
        r["loss_ratio"] = r["proxy_loss"] / exact_loss
    return rows
