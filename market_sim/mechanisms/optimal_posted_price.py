"""The optimal take-it-or-leave-it posted price for the prior (``optimal-posted-price``).

A posted-price mechanism offers every seller the same price ``p`` per unit of
privacy loss for a fixed privacy level ``e``: seller i sells (eps_i = e, t_i = p e)
iff its report is at most p.  It is truthful and individually rational for any
(p, e), as in Ligett and Roth, *Take it or leave it: running a survey when privacy
comes at a cost* (WINE 2012), where the price is offered to one individual at a time.
Here (p, e) are chosen from the cost law F and the market size m before any report
is seen, to minimise the expected Eq. 11 (003) objective of what is bought,

    L(eps, t) = mu ||eps||_2 / sum eps + sigma / sum eps + gamma sum t.

With K sellers accepting, all at the common level e, ||eps||_2 / sum eps = 1/sqrt(K)
and the objective is

    L(K; p, e) = mu / sqrt(K) + sigma / (K e) + gamma K p e,   K ~ Binomial(m, F(p)).

Buying nothing (K = 0) leaves sum eps = 0 and an infinite objective, so every price
with F(p) < 1 has an infinite unconditional expectation.  As in the private
mechanisms' study (``scenarios/private_mechanisms.py``), the objective is the
expectation *given K >= 1*, and ``p_empty = (1 - F(p))^m`` is reported beside it:

    J(p, e) = mu E[K^-1/2] + sigma E[1/K] / e + gamma p e E[K]      (all given K >= 1).

Conditioning alone rewards prices that mostly buy nothing (a price near a support
starting at 0 makes gamma p e tiny while P(K = 0) -> 1), so the optimisation also
requires ``p_empty <= max_empty`` (1e-3 by default): F(p) >= 1 - max_empty^(1/m).

For fixed p this is minimised in closed form at e*(p) = sqrt(sigma E[1/K] /
(gamma p E[K])), leaving J*(p) = mu E[K^-1/2] + 2 sqrt(sigma gamma p E[1/K] E[K]), a
function of q = F(p) alone once p = F^-1(q).  The minimiser over q in (0, 1] is found
on a grid of ``n_grid`` quantiles (exact binomial expectations at each) and refined
by bounded Brent search between the best point's neighbours.

The optimum is also the market plan the other literature mechanisms take their
defaults from (:func:`default_plan`): buy about m F(p*) sellers at e*, spending
about m F(p*) p* e*.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from typing import ClassVar

import numpy as np

from ..distributions import CostDistribution, as_distribution
from ..errors import MarketSimError
from ..parameters import check_int
from .base import Mechanism, Outcome, _deviation_args
from .offline import check_params

__all__ = [
    "PostedPricePlan",
    "evaluate_posted_price",
    "optimal_posted_price",
    "default_plan",
    "OptimalPostedPrice",
]


@dataclass(frozen=True)
class PostedPricePlan:
    """A posted price ``price`` per unit eps at level ``eps_level``, its expected Eq. 11
    objective given that someone sells (``objective``), ``p_empty`` = P(nobody sells),
    and the expected number sold and total payment (unconditional)."""

    price: float
    eps_level: float
    objective: float
    p_empty: float
    expected_bought: float
    expected_payment: float


def _moments(m: int, q: np.ndarray):
    """E[K^-1/2], E[1/K], E[K] given K >= 1 for K ~ Binomial(m, q), and P(K = 0);
    one row per q (exact sums over K = 1..m)."""
    from scipy.stats import binom

    q = np.clip(np.asarray(q, dtype=float).reshape(-1), 0.0, 1.0)
    p_empty = (1.0 - q) ** m
    live = 1.0 - p_empty
    e_half, e_inv = np.empty(q.size), np.empty(q.size)
    for g, qg in enumerate(q):
        # K within m q +- 12 sd (+ 20): the binomial mass outside is below 1e-30
        mid, sd = m * qg, np.sqrt(m * qg * (1.0 - qg))
        lo, hi = max(1, int(mid - 12 * sd) - 20), min(m, int(mid + 12 * sd) + 20)
        K = np.arange(lo, hi + 1, dtype=float)
        pmf = binom.pmf(K, m, qg)
        e_half[g], e_inv[g] = pmf @ K**-0.5, pmf @ (1.0 / K)
    with np.errstate(divide="ignore", invalid="ignore"):
        return e_half / live, e_inv / live, m * q / live, p_empty


def _check_market(dist, n_sellers, mu, sigma, gamma) -> tuple[CostDistribution, int]:
    dist = as_distribution(dist)
    m = check_int("n_sellers", n_sellers, 1)
    check_params(mu, sigma, gamma)
    return dist, m


def evaluate_posted_price(
    dist, n_sellers: int, price: float, eps_level: float, *, mu=1.0, sigma=1.0, gamma=1.0
) -> PostedPricePlan:
    """The expected Eq. 11 objective (given K >= 1) of posting ``price`` at ``eps_level``
    to ``n_sellers`` sellers with costs from ``dist`` (the module doc's J(p, e))."""
    dist, m = _check_market(dist, n_sellers, mu, sigma, gamma)
    if not (np.isfinite(price) and price >= 0 and np.isfinite(eps_level) and eps_level > 0):
        raise MarketSimError("a posted price needs price >= 0 and eps_level > 0")
    q = float(dist.cdf(np.array(price)))
    e_half, e_inv, e_k, p_empty = _moments(m, np.array([q]))
    if p_empty[0] >= 1.0:
        obj = np.inf
    else:  # J(p, e), module doc
        obj = mu * e_half[0] + sigma * e_inv[0] / eps_level + gamma * price * eps_level * e_k[0]
    return PostedPricePlan(
        float(price),
        float(eps_level),
        float(obj),
        float(p_empty[0]),
        m * q,
        m * q * price * eps_level,
    )


def _best_value(dist, m, q, mu, sigma, gamma):
    """J*(F^-1(q)) and e*(F^-1(q)) (module doc) for an array of quantiles q in (0, 1]."""
    p = np.asarray(dist.ppf(q), dtype=float)
    e_half, e_inv, e_k, p_empty = _moments(m, q)
    with np.errstate(divide="ignore", invalid="ignore"):
        eps = np.sqrt(sigma * e_inv / (gamma * p * e_k))
        val = mu * e_half + 2.0 * np.sqrt(sigma * gamma * p * e_inv * e_k)
    bad = (p_empty >= 1.0) | ~np.isfinite(val) | ~(eps > 0) | ~np.isfinite(eps)
    return np.where(bad, np.inf, val), np.where(bad, np.nan, eps)


@functools.lru_cache(maxsize=64)
def _optimal(
    dist: CostDistribution, m: int, mu, sigma, gamma, max_empty: float, n_grid: int
) -> PostedPricePlan:
    from scipy.optimize import minimize_scalar

    q_min = -np.expm1(np.log(max_empty) / m)  # (1 - q)^m <= max_empty
    q = q_min + (1.0 - q_min) * np.linspace(0.0, 1.0, n_grid)
    val, _ = _best_value(dist, m, q, mu, sigma, gamma)
    if not np.any(np.isfinite(val)):
        raise MarketSimError(
            f"no posted price has a finite expected objective for {dist.spec} "
            "(every price is 0: a cost law concentrated at 0?)"
        )
    j = int(np.argmin(val))
    best_q, best_v = float(q[j]), float(val[j])
    lo, hi = float(q[max(j - 1, 0)]), float(q[min(j + 1, q.size - 1)])
    if hi > lo:
        res = minimize_scalar(
            lambda x: float(_best_value(dist, m, np.array([x]), mu, sigma, gamma)[0][0]),
            bounds=(lo, hi),
            method="bounded",
            options={"xatol": 1e-10},
        )
        if np.isfinite(res.fun) and res.fun < best_v:
            best_q = float(res.x)
    price = float(dist.ppf(best_q))
    _, eps = _best_value(dist, m, np.array([best_q]), mu, sigma, gamma)
    return evaluate_posted_price(dist, m, price, float(eps[0]), mu=mu, sigma=sigma, gamma=gamma)


def optimal_posted_price(
    dist,
    n_sellers: int,
    *,
    mu=1.0,
    sigma=1.0,
    gamma=1.0,
    max_empty: float = 1e-3,
    n_grid: int = 512,
) -> PostedPricePlan:
    """The (price, eps_level) minimising the expected Eq. 11 objective given K >= 1
    among prices with P(K = 0) <= ``max_empty`` (module doc), for ``n_sellers``
    sellers with costs from ``dist``."""
    dist, m = _check_market(dist, n_sellers, mu, sigma, gamma)
    n_grid = check_int("n_grid", n_grid, 2)
    if not (isinstance(max_empty, (int, float)) and 0 < max_empty < 1):
        raise MarketSimError(f"max_empty must be a probability in (0, 1) (got {max_empty!r})")
    return _optimal(dist, m, float(mu), float(sigma), float(gamma), float(max_empty), n_grid)


def default_plan(dist, n_sellers, mu, sigma, gamma) -> tuple[int, float, float, float]:
    """The literature mechanisms' defaults from the prior-optimal posted price (p*, e*):
    (k, eps_level, budget, price) with k = m F(p*) rounded into [1, m - 1] (at least
    one seller left to set the price), eps_level = e*, budget = m F(p*) p* e* (the
    posted price's expected spend)."""
    plan = optimal_posted_price(dist, n_sellers, mu=mu, sigma=sigma, gamma=gamma)
    m = int(n_sellers)
    k = int(np.clip(round(plan.expected_bought), 1, max(m - 1, 1)))
    return k, plan.eps_level, plan.expected_payment, plan.price


@dataclass(frozen=True)
class OptimalPostedPrice(Mechanism):
    """Posted price and eps level chosen from the prior to minimise the expected Eq. 11 loss.

    Truthful and individually rational (module doc).

    Each report <= p* sells e* and is paid p* e*.  ``n_sellers`` is the market size
    the price is optimised for, ``max_empty`` the largest accepted P(nobody sells);
    ``plan`` holds the optimum and its objective."""

    name: ClassVar[str] = "optimal-posted-price"
    own_report_inclusion: ClassVar[bool] = True
    dist: CostDistribution
    n_sellers: int = 100
    mu: float = 1.0
    sigma: float = 1.0
    gamma: float = 1.0
    max_empty: float = 1e-3
    plan: PostedPricePlan | None = field(default=None, repr=False, compare=False)

    def __post_init__(self):
        object.__setattr__(self, "dist", as_distribution(self.dist))
        if self.plan is None:
            plan = optimal_posted_price(
                self.dist,
                self.n_sellers,
                mu=self.mu,
                sigma=self.sigma,
                gamma=self.gamma,
                max_empty=self.max_empty,
            )
            object.__setattr__(self, "plan", plan)

    @property
    def price(self) -> float:
        assert self.plan is not None  # set in __post_init__
        return self.plan.price

    @property
    def eps_level(self) -> float:
        assert self.plan is not None  # set in __post_init__
        return self.plan.eps_level

    def outcome(self, reports, rng=None) -> Outcome:
        r = np.asarray(reports, dtype=float)
        eps = np.where(r <= self.price, self.eps_level, 0.0)
        return Outcome(eps, self.price * eps, {"price": self.price})

    def deviations(self, sellers, candidates, reports, rng=None) -> Outcome:
        """A seller's offer does not depend on the others: its outcome at each candidate."""
        _, cand, _ = _deviation_args(sellers, candidates, reports)
        eps = np.where(cand <= self.price, self.eps_level, 0.0)
        return Outcome(eps, self.price * eps)
