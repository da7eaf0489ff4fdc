import cvxpy as cp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from market_sim.errors import MarketSimError
from market_sim.mechanisms.offline import proxy_loss, solve, solve_eta_grid


def markets(max_m=25, cap=True):
    """(psi, mu, sigma, gamma, k) drawn by hypothesis."""
    pos = st.floats(0.05, 20.0)
    return st.tuples(
        st.lists(st.floats(0.01, 3.0), min_size=1, max_size=max_m).map(np.array),
        pos,
        pos,
        pos,
        st.one_of(st.none(), st.floats(1.0, 4.0)) if cap else st.none(),
    )


class InnerSolver:
    """The convex inner problem for fixed eta, by cvxpy + Clarabel."""

    def __init__(self, psi, mu, gamma, cap):
        m = psi.size
        self.eta = cp.Parameter(nonneg=True)
        self.a = cp.Variable(m)
        cons = [self.a >= 0, cp.sum(self.a) == 1, self.a <= cap]
        obj = mu * cp.norm(self.a, 2) + gamma * self.eta * (psi @ self.a)
        self.prob = cp.Problem(cp.Minimize(obj), cons)

    def value(self, eta, sigma):
        self.eta.value = eta
        self.prob.solve(solver=cp.CLARABEL)
        return self.prob.value + sigma / eta, self.a.value


def _cap(k, m):
    return 1.0 if k is None or k >= m else k / m


@settings(max_examples=25)
@given(markets())
def test_feasible_and_never_worse_than_the_papers_eta_grid(case):
    psi, mu, sigma, gamma, k = case
    m = psi.size
    res = solve(psi, mu=mu, sigma=sigma, gamma=gamma, k=k)
    assert np.isclose(res.a.sum(), 1, atol=1e-12)
    assert res.a.min() >= 0 and res.a.max() <= _cap(k, m) * (1 + 1e-12)
    np.testing.assert_allclose(res.eps, res.a * res.eta)
    assert np.isclose(
        res.proxy_loss, proxy_loss(res.a, res.eta, psi, mu=mu, sigma=sigma, gamma=gamma)
    )
    grid = solve_eta_grid(psi, mu=mu, sigma=sigma, gamma=gamma, k=k, n_eta=30, n_iter=150)
    assert res.proxy_loss <= grid.proxy_loss * (1 + 1e-9)


@pytest.mark.parametrize("seed", range(6))
def test_global_optimum_against_a_convex_solver(seed):
    """cvxpy solves the convex problem for each eta on a fine grid; the exact
    solver is never beaten, and at its own eta cvxpy finds the same a."""
    rng = np.random.default_rng(seed)
    m = int(rng.integers(3, 20))
    psi = rng.uniform(0.05, 2.0, m) * rng.choice([1.0, 5.0], m)  # two clusters
    mu, sigma, gamma = rng.uniform(0.2, 3.0, 3)
    k = None if seed % 2 == 0 else 2.0
    res = solve(psi, mu=mu, sigma=sigma, gamma=gamma, k=k)
    inner = InnerSolver(psi, mu, gamma, _cap(k, m))
    at_eta, a_cvx = inner.value(res.eta, sigma)
    assert abs(at_eta - res.proxy_loss) <= 1e-6 * res.proxy_loss
    np.testing.assert_allclose(a_cvx, res.a, atol=1e-4)
    etas = res.eta * np.geomspace(0.05, 20, 41)
    best_grid = min(inner.value(e, sigma)[0] for e in etas)
    assert res.proxy_loss <= best_grid * (1 + 1e-7)


def test_finds_the_global_minimum_where_a_local_search_stops():
    """Two clusters of sellers make the loss along the KKT family bimodal."""
    psi = np.array([0.02] * 3 + [1.0] * 60)
    kw = dict(mu=1.0, sigma=0.05, gamma=1.0)
    res = solve(psi, **kw)
    lam = np.linspace(0.0201, 3.0, 200001)  # dense scan of the family a ~ (lam - psi)^+
    u = np.maximum(lam[:, None] - psi[None, :], 0)
    a = u / u.sum(axis=1, keepdims=True)
    h = np.linalg.norm(a, axis=1) + 2 * np.sqrt(kw["sigma"] * (a @ psi))
    assert res.proxy_loss <= h.min() + 1e-12
    left = h[lam < 1.0]
    right = h[lam > 1.0]
    # two local minima, and the solver picked the better one
    assert min(left.min(), right.min()) == pytest.approx(res.proxy_loss, rel=1e-6)
    assert abs(left.min() - right.min()) > 1e-3


def test_kkt_structure_eq13():
    rng = np.random.default_rng(3)
    psi = rng.uniform(0, 2, 500)
    res = solve(psi, mu=1.0, sigma=1.0, gamma=0.7)
    x = 0.7 * psi
    bought = res.eps > 0
    assert np.all(x[bought] < res.lam) and np.all(x[~bought] >= res.lam)
    ratio = res.eps[bought] / (res.lam - x[bought])
    np.testing.assert_allclose(ratio, ratio[0], rtol=1e-9)
    # Eq. 14 holds at the cut-off
    u = np.maximum(res.lam - x, 0)
    G, W = np.sum(u * u), np.sum(u)
    assert abs(res.lam - 1.0 * G - G / W) <= 1e-9 * res.lam


def test_input_order_ties_and_single_seller():
    rng = np.random.default_rng(5)
    psi = np.round(rng.uniform(0.1, 1, 200), 2)  # many ties
    perm = rng.permutation(psi.size)
    r1 = solve(psi, mu=1, sigma=2, gamma=1)
    r2 = solve(psi[perm], mu=1, sigma=2, gamma=1)
    np.testing.assert_allclose(r2.eps, r1.eps[perm], rtol=1e-12)
    for v in np.unique(psi):
        assert np.ptp(r1.a[psi == v]) <= 1e-15
    same = solve(np.full(7, 0.3), mu=1, sigma=1, gamma=1)
    np.testing.assert_allclose(same.a, 1 / 7)
    one = solve([0.5], mu=2, sigma=3, gamma=4)
    assert one.a[0] == 1 and one.eta == pytest.approx(np.sqrt(3 / (4 * 0.5)))
    assert one.proxy_loss == pytest.approx(2 + 2 * np.sqrt(3 * 4 * 0.5))


def test_cap_binds_and_k_one_is_uniform():
    rng = np.random.default_rng(8)
    psi = rng.uniform(0, 2, 300)
    capped = solve(psi, mu=0.1, sigma=1, gamma=1, k=2)
    free = solve(psi, mu=0.1, sigma=1, gamma=1)
    assert free.a.max() > 2 / 300  # the cap matters here
    assert capped.a.max() <= 2 / 300 * (1 + 1e-12)
    assert np.isclose(capped.a.max(), 2 / 300)
    assert capped.proxy_loss >= free.proxy_loss
    uni = solve(psi, mu=1, sigma=1, gamma=1, k=1)
    np.testing.assert_allclose(uni.a, 1 / 300)


def test_infinite_virtual_costs_are_never_bought():
    psi = np.array([0.2, np.inf, 0.4, np.inf])
    res = solve(psi, mu=1, sigma=1, gamma=1)
    assert res.eps[1] == 0 and res.eps[3] == 0
    np.testing.assert_allclose(res.eps[[0, 2]], solve([0.2, 0.4], mu=1, sigma=1, gamma=1).eps)


@pytest.mark.parametrize("scale", [1e-6, 1e-3, 1e3, 1e6])
def test_extreme_hyperparameters_stay_finite(scale):
    psi = np.random.default_rng(2).uniform(0.01, 1, 1000)
    for kw in (
        dict(mu=scale, sigma=1, gamma=1),
        dict(mu=1, sigma=scale, gamma=1),
        dict(mu=1, sigma=1, gamma=scale),
    ):
        res = solve(psi, **kw)
        assert np.all(np.isfinite(res.eps)) and res.eps.min() >= 0
        assert np.isclose(res.a.sum(), 1)
        assert res.proxy_loss <= solve_eta_grid(psi, **kw, n_eta=20, n_iter=50).proxy_loss * (
            1 + 1e-9
        )


def test_errors_are_clear():
    with pytest.raises(MarketSimError, match="mu must be"):
        solve([0.5], mu=0, sigma=1, gamma=1)
    with pytest.raises(MarketSimError, match="k must be >= 1"):
        solve([0.5], mu=1, sigma=1, gamma=1, k=0.5)
    with pytest.raises(MarketSimError, match="NaN"):
        solve([0.5, np.nan], mu=1, sigma=1, gamma=1)
    with pytest.raises(MarketSimError, match="non-empty"):
        solve([], mu=1, sigma=1, gamma=1)
    with pytest.raises(MarketSimError, match="cannot sum to 1"):
        solve([0.5, np.inf, np.inf], mu=1, sigma=1, gamma=1, k=1)


def test_zero_virtual_cost_with_a_finite_optimum():
    # a seller with psi = 0 is harmless when spreading over others beats mu*||e_1|| = mu
    psi = np.concatenate(([0.0], np.full(50, 1e-3)))
    res = solve(psi, mu=1, sigma=1e-3, gamma=1)
    assert res.proxy_loss < 1.0 and np.isfinite(res.eta)


def test_proxy_loss_shrinks_like_m_to_the_minus_quarter():
    """Thm IV.5 / Lemma IX.2 (003): for U[0,1] costs (psi = 2c), mu = sigma = gamma = 1."""
    rng = np.random.default_rng(0)
    ms = np.array([10**3, 10**4, 10**5, 10**6])
    loss = [
        np.mean(
            [solve(2 * rng.uniform(0, 1, m), mu=1, sigma=1, gamma=1).proxy_loss for _ in range(3)]
        )
        for m in ms
    ]
    slope = np.polyfit(np.log(ms), np.log(loss), 1)[0]
    assert -0.28 < slope < -0.22
