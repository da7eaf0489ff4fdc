"""Deliberately non-truthful controls: pay-as-bid and a posted price.

They are the negative controls of the IC tests: under pay-as-bid a seller
gains by shading its report upwards, which a working IC test must detect.
"""

from __future__ import annotations

import numpy as np

from ..distributions import CostDistribution, SellerLaws
from ..errors import MarketSimError
from ..privacy.limit import privacy_cost
from .offline import solve

__all__ = ["pay_as_bid", "posted_price"]


def pay_as_bid(
    reports,
    dist: CostDistribution | SellerLaws,
    *,
    mu: float,
    sigma: float,
    gamma: float,
    k: float | None = None,
    backend: str = "auto",
):
    """The offline allocation of the reports, paid t_i = report_i * eps_i
    (``backend`` as :func:`~market_sim.mechanisms.offline.solve`'s)."""
    r = dist.check_in_support(np.asarray(reports, dtype=float), "report")
    eps = solve(dist.virtual_cost(r), mu=mu, sigma=sigma, gamma=gamma, k=k, backend=backend).eps
    return eps, paid_as_bid(r, eps)


def paid_as_bid(reports: np.ndarray, eps: np.ndarray) -> np.ndarray:
    """t_i = report_i * eps_i: the seller's reported privacy cost, with 0 x inf = 0 at
    the zero-cost limit (a report of 0 at a support's bottom 0, eps_i = +inf;
    ``offline._zero_cost_limit``), the limit of z eps_i(z) as z -> 0.  Proof: eps_i =
    a_i eta with eta = sqrt(sigma / x.a) and x.a >= a_i x_i, so eps_i <= sqrt(a_i sigma
    / x_i) <= sqrt(sigma / (gamma psi_i)) (a_i <= 1); psi(z) = z + F(z)/f(z) >= z, so
    z eps_i(z) <= sqrt(sigma z / gamma) -> 0."""
    return privacy_cost(reports, eps)


def posted_price(reports, *, price: float, eps_level: float):
    """Every seller reporting at most ``price`` sells ``eps_level`` at ``price`` per unit."""
    if not (np.isfinite(price) and price >= 0 and np.isfinite(eps_level) and eps_level > 0):
        raise MarketSimError("posted price needs price >= 0 and eps_level > 0")
    r = np.asarray(reports, dtype=float)
    eps = np.where(r <= price, eps_level, 0.0)
    return eps, price * eps
