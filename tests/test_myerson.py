"""Generic Myerson payments (market_sim.mechanisms.myerson, issue 17 item 2)."""

import numpy as np
import pytest

from market_sim.distributions import parse_distribution
from market_sim.errors import MarketSimError
from market_sim.mechanisms.base import Mechanism
from market_sim.mechanisms.myerson import NonMonotoneAllocation, myerson_mechanism
from market_sim.mechanisms.offline import solve
from market_sim.mechanisms.payments import OfflineCurves, offline_payments

U01 = parse_distribution("uniform:0:1")


@pytest.mark.parametrize("spec,seed", [("uniform:0:1", 1), ("uniform:1:5", 0)])
def test_offline_allocation_matches_offline_payments(spec, seed):
    dist = parse_distribution(spec)
    costs = dist.sample(8, np.random.default_rng(seed))
    mech = myerson_mechanism(
        lambda r: solve(dist.virtual_cost(r), mu=1, sigma=1, gamma=1).eps,
        dist,
        name="offline-generic",
        tol=1e-7,
    )
    out = mech.run(costs)
    eps, pay = offline_payments(costs, dist, mu=1, sigma=1, gamma=1)
    bought = eps > 0
    assert bought.sum() >= 2
    np.testing.assert_allclose(out.eps, eps, rtol=1e-12)
    np.testing.assert_allclose(out.payments[bought], pay[bought], rtol=1e-6)
    assert np.all(out.payments[~bought] == 0)
    # the rigorous bound (first order) holds and the indicator is below tol x payment
    err = np.abs(out.payments - pay)
    assert np.all(err <= out.info["payment_bound"] + 1e-15)
    assert np.all(out.info["payment_error_estimate"][bought] <= 1e-7 * pay[bought])


def test_posted_price_step_gets_exact_payments():
    price, level = 0.37, 2.0
    mech = myerson_mechanism(lambda r: np.where(r <= price, level, 0.0), U01)
    reports = np.array([0.05, 0.2, 0.36, 0.5, 0.9])
    out = mech.run(reports)
    np.testing.assert_allclose(out.payments, [price * level] * 3 + [0, 0], rtol=1e-11)
    assert out.info["evaluations"] < 5 * 120  # a jump costs ~40 bisections, not a dense grid


def test_uniform_price_threshold_depends_on_others():
    """K cheapest bought: the Myerson payment is the K-th lowest other report per unit."""
    K, level = 2, 0.5

    def alloc(R):
        R = np.atleast_2d(R)
        rank = np.argsort(np.argsort(R, axis=1, kind="stable"), axis=1, kind="stable")
        return np.where(rank < K, level, 0.0)

    mech = myerson_mechanism(alloc, U01, vectorized=True)
    r = np.array([0.31, 0.12, 0.77, 0.45, 0.58])
    out = mech.run(r)
    np.testing.assert_allclose(out.eps, [level, level, 0, 0, 0])
    np.testing.assert_allclose(out.payments, [0.45 * level, 0.45 * level, 0, 0, 0], rtol=1e-11)


def _smooth_jumpy(R):
    """Monotone in the own report: a smooth part (others' mean sets the slope) plus a
    step at the others' median."""
    R = np.atleast_2d(R)
    m = R.shape[1]
    others_mean = (R.sum(axis=1, keepdims=True) - R) / (m - 1)
    med = np.median(R, axis=1, keepdims=True)
    return np.maximum(0.9 - R, 0.0) * (0.5 + others_mean) + 0.3 * (R < med)


@pytest.mark.parametrize("seed", range(4))
def test_ic_and_ir_on_random_markets(seed):
    rng = np.random.default_rng(seed)
    n = 5
    costs = U01.sample(n, rng)
    mech = myerson_mechanism(_smooth_jumpy, U01, vectorized=True)
    assert isinstance(mech, Mechanism)
    out = mech.run(costs)
    truthful = out.utilities(costs)
    assert np.all(truthful >= -1e-12)  # IR
    grid = np.linspace(0, 1, 41)
    cand = np.column_stack([costs, np.tile(grid, (n, 1))])
    u = mech.deviation_utilities(np.arange(n), cand, costs, costs)
    scale = np.abs(out.payments).mean()
    np.testing.assert_allclose(u[:, 0], truthful, rtol=0, atol=1e-7 * scale)
    assert np.max(u - u[:, :1]) <= 1e-6 * scale  # IC: no candidate beats the truth
    # a profitable-looking misreport exists for the pay-as-bid twin (the test has teeth)
    pab = (
        cand * mech.deviations(np.arange(n), cand, costs).eps
        - costs[:, None] * mech.deviations(np.arange(n), cand, costs).eps
    )
    assert np.max(pab - pab[:, :1]) > 1e-3


def test_deviations_vectorised_match_one_at_a_time():
    costs = np.array([0.1, 0.4, 0.6, 0.8])
    mech = myerson_mechanism(_smooth_jumpy, U01, vectorized=True)
    cand = np.array([[0.05, 0.3, 0.7], [0.2, 0.5, 0.95]])
    dev = mech.deviations([0, 2], cand, costs)
    for k, i in enumerate([0, 2]):
        for j, z in enumerate(cand[k]):
            r = costs.copy()
            r[i] = z
            o = mech.run(r)
            assert dev.eps[k, j] == pytest.approx(o.eps[i], rel=1e-12)
            assert dev.payments[k, j] == pytest.approx(o.payments[i], rel=1e-7)


def test_non_monotone_allocation_is_refused_and_listed():
    mech = myerson_mechanism(lambda r: r.copy(), U01, name="increasing")
    with pytest.raises(NonMonotoneAllocation) as err:
        mech.run(np.array([0.2, 0.5, 0.7]))
    msg = str(err.value)
    assert "\n" not in msg and "seller 0" in msg and "violations seen" in msg
    assert isinstance(err.value, MarketSimError)
    v = mech.violations(np.array([0.2, 0.5, 0.7]))
    assert {x.seller for x in v} == {0, 1, 2}
    assert all(x.high > x.low and x.size > 0 for x in v)
    assert mech.unchecked().run(np.array([0.2, 0.5])).payments.shape == (2,)


@pytest.mark.parametrize(
    "alloc,words",
    [
        (lambda r: np.ones(len(r) + 1), "shape"),
        (lambda r: np.full(len(r), np.nan), "NaN"),
        (lambda r: -np.ones(len(r)), "negative"),
    ],
)
def test_bad_allocations_give_one_line_errors(alloc, words):
    with pytest.raises(MarketSimError, match=words) as err:
        myerson_mechanism(alloc, U01).run(np.array([0.2, 0.5]))
    assert "\n" not in str(err.value)


def test_bad_arguments():
    with pytest.raises(MarketSimError, match="allocation"):
        myerson_mechanism(3, U01)
    with pytest.raises(MarketSimError, match="tol"):
        myerson_mechanism(np.ones_like, U01, tol=0)


def test_eq8_read_literally_underpays_where_eps_jumps():
    """Eq. 8 (003), t_i = -int_{c_i}^inf z d eps_i(z), read with a classical derivative
    drops the jump term z0 * (eps(z0-) - eps(z0+)).  The offline optimum jumps: in this
    market seller 2's eps falls from 0.2163 to 0 at report z0 = 0.31181, where the optimum
    switches from 3 sellers to 2.  Read as a Stieltjes integral, Eq. 8 is our payment
    c eps(c) + int_c^{c_high} eps (IC, IR); the literal reading underpays by 20% at the
    truthful cost 0.172, and at cost 0.25 it pays less than the cost (IR fails) and
    reporting above z0 (eps = 0, no payment) beats the truth (IC fails)."""
    base = np.array([0.034, 0.075, 0.172, 0.965])
    kw = dict(mu=1.0, sigma=1.0, gamma=0.2)
    i = 2

    def eps_at(z):
        r = base.copy()
        r[i] = z
        return solve(U01.virtual_cost(r), **kw)

    lo, hi = 0.172, 1.0  # bisect for the jump
    for _ in range(60):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if eps_at(mid).eps[i] > 0 else (lo, mid)
    z0, jump = lo, eps_at(lo).eps[i]
    assert z0 == pytest.approx(0.311814, abs=1e-6) and jump == pytest.approx(0.216304, abs=1e-6)
    assert eps_at(lo).n_bought == 3 and eps_at(hi).n_bought == 2 and eps_at(hi).eps[i] == 0

    def literal(c):  # -sum z d eps on [c, z0-] (graded mesh: eps is steep near z0)
        z = z0 - (z0 - c) * np.linspace(1.0, 0.0, 1501) ** 2
        e = np.array([eps_at(x).eps[i] for x in z])
        assert np.all(np.diff(e) <= 0) and e[-1] == jump  # smooth and non-increasing
        # eps = 0 on (z0, 1]: the jump z0 -> z0+ is the only step a classical derivative
        # does not see
        return float(-np.sum((z[1:] + z[:-1]) / 2 * np.diff(e))), e[0]

    for c, under in ((0.172, 0.196), (0.25, 0.265)):
        r = base.copy()
        r[i] = c
        eps, pay = offline_payments(r, U01, **kw)
        t_lit, e_c = literal(c)
        assert e_c == pytest.approx(eps[i], rel=1e-12)
        assert t_lit == pytest.approx(pay[i] - z0 * jump, abs=2e-5)  # only the jump term
        assert 1 - t_lit / pay[i] == pytest.approx(under, abs=1e-3)
        assert pay[i] - c * eps[i] >= 0  # ours: IR ...
        curves = OfflineCurves(r, U01, **kw)  # ... and IC on a grid of misreports
        u = curves.utilities(np.linspace(0.0, 1.0, 41)[None, :], [c], sellers=[i])
        assert u.max() <= pay[i] - c * eps[i] + 1e-9
    # at cost 0.25 the literal payment is below the cost, and opting out (report 1) pays 0
    assert t_lit - 0.25 * e_c < -0.02 < 0.0
    # the generic Myerson mechanism integrates through the jump: it pays ours
    mech = myerson_mechanism(lambda r: solve(U01.virtual_cost(r), **kw).eps, U01, tol=1e-6)
    np.testing.assert_allclose(mech.run(r).payments[i], pay[i], rtol=1e-6)
