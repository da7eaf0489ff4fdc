"""Numerical limits of the mechanisms and payments (issue "Robustness"): finite outputs,
eps >= 0, sum a = 1, truthful payments >= cost * eps, and what happens at each limit."""

import numpy as np
import pytest

from market_sim.distributions import parse_distribution
from market_sim.mechanisms.offline import solve
from market_sim.mechanisms.online import OnlineMechanism
from market_sim.mechanisms.payments import offline_payments

DIST = parse_distribution("uniform:0:1")
SCALES = [1e-8, 1e-4, 1e4, 1e8]


def check(eps, pay, costs):
    assert np.all(np.isfinite(eps)) and np.all(np.isfinite(pay)) and eps.min() >= 0
    assert np.all(pay >= costs * eps - 1e-9 * np.maximum(1.0, np.abs(pay)))  # IR


@pytest.mark.parametrize("scale", SCALES)
@pytest.mark.parametrize("which", ["mu", "sigma", "gamma"])
def test_hyperparameters_from_1e_minus_8_to_1e8(scale, which):
    costs = DIST.sample(40, np.random.default_rng(1))
    kw = dict(mu=1.0, sigma=1.0, gamma=1.0)
    kw[which] = scale
    res = solve(DIST.virtual_cost(costs), **kw)
    assert np.isclose(res.a.sum(), 1) and np.isfinite(res.proxy_loss) and res.eta > 0
    eps, pay = offline_payments(costs, DIST, **kw)
    check(eps, pay, costs)
    np.testing.assert_allclose(eps, res.eps, rtol=1e-9, atol=1e-300)
    # the limits: a heavy mu spreads the weight, a heavy sigma buys more privacy
    if which == "mu" and scale >= 1e4:
        assert res.n_bought == costs.size
    if which == "sigma":
        assert (res.eta > solve(DIST.virtual_cost(costs), mu=1, sigma=1, gamma=1).eta) == (
            scale > 1
        )


@pytest.mark.parametrize("m", [1, 2])
def test_one_and_two_sellers(m):
    costs = np.array([0.3, 0.7])[:m]
    eps, pay = offline_payments(costs, DIST, mu=1.0, sigma=1.0, gamma=1.0)
    check(eps, pay, costs)
    assert eps[0] > 0  # the cheapest seller is always bought
    mech = OnlineMechanism(DIST, m, mu=1.0, sigma=1.0, gamma=1.0)
    check(mech.eps(costs), mech.payments(costs), costs)


def test_equal_costs_and_costs_at_the_support_ends():
    equal = np.full(10, 0.4)
    eps, pay = offline_payments(equal, DIST, mu=1.0, sigma=1.0, gamma=1.0)
    check(eps, pay, equal)
    assert np.ptp(eps) == 0 and np.ptp(pay) <= 1e-12 * pay.max()
    ends = np.array([1e-12, 0.2, 0.5, 1.0])  # F/f -> 0 at the bottom; psi = 2 at the top
    eps, pay = offline_payments(ends, DIST, mu=1.0, sigma=1.0, gamma=1.0)
    check(eps, pay, ends)
    assert eps[-1] == 0 and pay[-1] == 0  # a seller at the top is never bought


def test_costs_spanning_many_orders_of_magnitude():
    dist = parse_distribution("uniform:0:1000000")
    costs = np.array([1e-6, 1e-3, 1.0, 1e3, 5e5, 1e6])
    eps, pay = offline_payments(costs, dist, mu=1.0, sigma=1.0, gamma=1.0)
    check(eps, pay, costs)
    assert np.all(np.diff(eps) <= 0)  # monotone across twelve orders of magnitude
    res = solve(dist.virtual_cost(costs), mu=1.0, sigma=1.0, gamma=1.0)
    assert np.isclose(res.a.sum(), 1)


def test_when_nobody_can_be_bought_the_error_says_why():
    from market_sim.errors import MarketSimError

    with pytest.raises(MarketSimError, match="finite virtual cost"):
        solve([np.inf, np.inf], mu=1.0, sigma=1.0, gamma=1.0)
    # virtual cost 0 everywhere: eta -> inf is free, so Eq. 11 has no minimiser; its limit
    # (issue #47, docs/mathematics.md): the zero-psi sellers split the weight, eps = +inf,
    # and the loss is mu ||a|| = mu / sqrt(2)
    zero = solve([0.0, 0.0], mu=1.0, sigma=1.0, gamma=1.0)
    assert np.isinf(zero.eps).all() and np.isinf(zero.eta)
    assert zero.proxy_loss == pytest.approx(np.sqrt(0.5), rel=1e-12)
    # ... unless spreading the weight onto a costly seller at a finite eta does better
    res = solve([0.0, 0.0, 0.5], mu=1.0, sigma=1e-6, gamma=1.0)
    assert res.eps[2] > 0 and np.isfinite(res.eta) and res.proxy_loss < np.sqrt(0.5)
