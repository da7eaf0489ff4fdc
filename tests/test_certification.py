"""Myerson's characterization checked on candidate reports, and what gets certified."""

import numpy as np
import pytest

from market_sim.certification import CERTIFIED, certificate_note, certification, myerson_check
from market_sim.distributions import parse_distribution
from market_sim.errors import MarketSimError
from market_sim.mechanisms.base import Mechanism, as_mechanism
from market_sim.mechanisms.builtin import OfflineMechanism
from market_sim.mechanisms.myerson import myerson_mechanism


def _candidates(dist, costs, rng, n_grid=33, n_random=32):
    lo, hi = dist.support
    grid = np.linspace(lo, hi, n_grid)
    grid[0] += 1e-3 * (grid[1] - grid[0])
    n = costs.size
    return np.column_stack([costs, np.tile(grid, (n, 1)), rng.uniform(lo, hi, (n, n_random))])


def _check(mech, dist, n=8, seed=0, **kw):
    rng = np.random.default_rng(seed)
    costs = dist.sample(n, rng)
    cand = _candidates(dist, costs, rng)
    dev = mech.deviations(np.arange(n), cand, costs)
    return myerson_check(cand, dev.eps, dev.payments, dist.support, **kw), dev, cand


# ---- the residual in closed form --------------------------------------------------------
def _rows(z, e, u):
    z, e, u = (np.atleast_2d(np.asarray(a, dtype=float)) for a in (z, e, u))
    return z, e, u + z * e  # payments t = u + z eps


def test_two_points_residual_is_half_the_distance_to_the_bracket():
    # int_{0.2}^{0.6} eps lies in [0.5 x 0.4, 1 x 0.4] = [0.2, 0.4] for any monotone eps
    for du, want in ((0.5, 0.05), (0.1, 0.05), (0.3, 0.0), (0.4, 0.0), (0.2, 0.0)):
        z, e, t = _rows([0.2, 0.6], [1.0, 0.5], [1.0 + du, 1.0])
        res = myerson_check(z, e, t, (0.0, 1.0))
        assert res.monotone
        assert res.identity_residual_max == pytest.approx(want, abs=1e-15)


def test_residual_uses_the_whole_chain_not_neighbours_only():
    # eps flat at 1: each bracket is exactly 0.1; each step of u is 0.15 (0.025 off
    # alone), but u_1 - u_3 = 0.3 against exactly 0.2: the least violation is 0.05
    z, e, t = _rows([0.1, 0.2, 0.3], [1, 1, 1], [0.35, 0.2, 0.05])
    res = myerson_check(z, e, t, (0.0, 0.5))
    assert res.identity_residual_max == pytest.approx(0.05, abs=1e-15)
    # h free absorbs a shift; h = 0 does not: v_1 <= 0.1 + 0.1 + tail <= 0.4 -> 1.35 - 0.4
    z, e, t = _rows([0.1, 0.2, 0.3], [1, 1, 1], [1.35, 1.2, 1.05])
    res = myerson_check(z, e, t, (0.0, 0.5))
    assert res.identity_residual_max == pytest.approx(0.05, abs=1e-14)
    assert res.identity_residual_h0_max == pytest.approx(0.95, abs=1e-14)
    assert res.identity_residual_h0_rel == pytest.approx(0.95 / (1.35 + 0.1), abs=1e-14)


def test_exact_myerson_payments_have_zero_residual_for_any_h_and_order(rng):
    # eps(z) = 1 - z on [0, 1]: int_z^1 eps = (1 - z)^2 / 2
    z = rng.uniform(0, 1, (50, 40))
    e = 1 - z
    for h in (0.0, 0.7):
        t = z * e + (1 - z) ** 2 / 2 + h
        res = myerson_check(z, e, t, (0, 1))
        assert res.passed and res.identity_residual_max <= 1e-15
        if h == 0:
            assert res.identity_residual_h0_max <= 1e-15
        else:  # h = 0.7 breaks the normalisation by almost 0.7 (the brackets' slack aside)
            assert 0.6 < res.identity_residual_h0_max <= 0.7 + 1e-12
    perm = rng.permutation(40)
    t = z * e + (1 - z) ** 2 / 2 + 0.01 * z  # a payment that departs from the identity
    a = myerson_check(z, e, t, (0, 1))
    b = myerson_check(z[:, perm], e[:, perm], t[:, perm], (0, 1))
    assert a.identity_residual_max > 0
    np.testing.assert_array_equal(a.residuals, b.residuals)


def test_repeated_reports_must_agree():
    # the same report twice: eps must be equal (else a violation), and so must u
    z, e, t = _rows([0.3, 0.3, 0.6], [1.0, 1.0, 0.5], [0.5, 0.46, 0.3])
    res = myerson_check(z, e, t, (0, 1))
    assert res.monotone and res.identity_residual_max == pytest.approx(0.02, abs=1e-15)
    z, e, t = _rows([0.3, 0.6, 0.3], [1.0, 0.5, 0.9], [0.5, 0.3, 0.5])
    res = myerson_check(z, e, t, (0, 1))
    assert not res.monotone and res.n_violations == 1
    v = res.violations[0]
    assert (v.low, v.high, v.eps_low, v.eps_high) == (0.3, 0.3, 0.9, 1.0)


def test_bad_input_is_one_line():
    z = np.array([[0.2, 0.5]])
    with pytest.raises(MarketSimError, match="outside the support"):
        myerson_check(z + 1, z, z, (0, 1))
    with pytest.raises(MarketSimError, match="shape"):
        myerson_check(z, z[:, :1], z, (0, 1))
    with pytest.raises(MarketSimError, match="c_min < c_max"):
        myerson_check(z, z, z, (1, 0))


# ---- the library's mechanisms ---------------------------------------------------------
@pytest.mark.parametrize(
    "name,spec,kw",
    [
        ("offline", "uniform:1:5", {}),
        ("offline", "uniform:0:1", {}),
        ("offline", "uniform:1:5", {"k": 2.0}),
        ("online", "uniform:1:5", {}),
        ("online", "uniform:0:1", {"rule": "alg3"}),
        ("online", "truncnorm:2:1:1:5", {}),  # psi not linear: the payment by quadrature
        ("offline", "truncexpon:1:1:5", {}),
    ],
)
def test_builtin_myerson_mechanisms_are_certified(name, spec, kw):
    dist = parse_distribution(spec)
    mech = as_mechanism(name, dist=dist, n_sellers=8, **kw)
    res, dev, cand = _check(mech, dist)
    assert res.monotone and res.n_violations == 0
    assert res.identity_residual_rel <= 1e-9 and res.identity_residual_h0_rel <= 1e-9
    assert dev.payments.max() > 0  # somebody is bought: the identity is not vacuous
    assert certification(mech, res) == CERTIFIED


def test_myerson_mechanism_passes_the_check_but_is_not_certified():
    """myerson_mechanism computes (P), but over a user's allocation checked only where it
    is evaluated: a passing check earns the note, not the certificate."""
    dist = parse_distribution("uniform:1:5")

    def threshold(r):  # monotone with jumps: 1 below the 3rd lowest other report
        out = np.zeros(r.size)
        for i in range(r.size):
            out[i] = 1.0 if r[i] < np.sort(np.delete(r, i))[2] else 0.2 * (r[i] < 4)
        return out

    mech = myerson_mechanism(threshold, dist)
    res, _, _ = _check(mech, dist, n=6)
    assert res.passed and certification(mech, res) is None
    assert certificate_note(mech, 66) == "Myerson payments; monotonicity checked at 66 reports"

    rising = myerson_mechanism(lambda r: r / 5.0, dist, check_monotone=False)
    res, dev, cand = _check(rising, dist, n=4)
    assert not res.monotone and certification(rising, res) is None
    v = res.violations[0]
    assert v.low < v.high and v.eps_high > v.eps_low
    assert v.eps_low == pytest.approx(v.low / 5) and v.eps_high == pytest.approx(v.high / 5)
    # every neighbouring pair of the 4 x 66 candidates rises, except repeated reports
    assert res.n_violations >= 4 * 60 and len(res.violations) == 100


def test_pay_as_bid_fails_the_identity_in_closed_form():
    dist = parse_distribution("uniform:1:5")
    mech = as_mechanism("pay-as-bid", dist=dist)
    res, dev, cand = _check(mech, dist)
    assert res.monotone  # the offline allocation
    assert not res.identity_holds and certification(mech, res) is None
    # pay-as-bid leaves u = t - r eps = 0 at every report, and every bracket is >= 0,
    # so the least violation is half the lower bracket summed over all candidates
    order = np.argsort(cand, axis=1)
    z, e = np.take_along_axis(cand, order, 1), np.take_along_axis(dev.eps, order, 1)
    want = 0.5 * np.sum(e[:, 1:] * np.diff(z, axis=1), axis=1)
    np.testing.assert_allclose(res.residuals, want, rtol=1e-12, atol=1e-15)
    assert res.identity_residual_rel > 1e-3


def test_user_classes_claiming_myerson_are_not_certified():
    dist = parse_distribution("uniform:0:1")

    class Linear(Mechanism):  # truly Myerson: eps = 1 - r, t = r eps + (1 - r)^2 / 2
        myerson_payments = True

        def outcome(self, reports, rng=None):
            return 1 - reports, reports * (1 - reports) + (1 - reports) ** 2 / 2

    class MyOffline(OfflineMechanism):
        pass

    class Duck:
        myerson_payments = True

        def outcome(self, reports):
            return 1 - reports, reports * (1 - reports) + (1 - reports) ** 2 / 2

    class Faked(Mechanism):  # claims a library module: the name is not the class
        myerson_payments = True

        def outcome(self, reports, rng=None):
            return 1 - reports, reports * (1 - reports) + (1 - reports) ** 2 / 2

    Faked.__module__ = "market_sim.mechanisms.builtin"
    Faked.__qualname__ = Faked.__name__ = "OfflineMechanism"
    for mech in (Linear(), MyOffline(dist), as_mechanism(Duck()), Faked()):
        res, _, _ = _check(mech, dist, n=5)
        assert res.passed  # the check alone cannot tell them apart ...
        assert certification(mech, res) is None  # ... the library vouches for its own code only


def test_posted_price_passes_the_check_but_is_not_declared():
    dist = parse_distribution("uniform:1:5")
    mech = as_mechanism("posted-price", dist=dist)
    res, _, _ = _check(mech, dist)
    assert res.passed and certification(mech, res) is None


def test_randomized_mechanisms_are_not_certified():
    dist = parse_distribution("uniform:1:5")
    mech = as_mechanism("private-posted-price", dist=dist)
    res, _, _ = _check(mech, dist, n=4)
    assert certification(mech, res) is None
