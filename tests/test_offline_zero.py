"""Reports of virtual cost 0 have an outcome: the zero-cost limit (#47; docs/mathematics.md,
"Reports of virtual cost 0").

Truth.  With w0 sellers of value x = gamma psi = 0 that can absorb all the weight and no
allocation with x.a > 0 doing better, Eq. 11 (003) has infimum mu / sqrt(w0), reached only
as eta -> inf with a uniform on the zero sellers.  Raising the zero values to small
delta > 0 gives markets with an optimum; as delta -> 0 their a tends to that uniform
vector, their eps of the zero sellers to +inf and their payments to finite limits (eps_i
~ C / sqrt(z) near 0 is integrable).  The tests compare the outcome at 0 with those
nearby markets, and the payment with an independent quadrature of eps_i(z) = solve(...)
(scipy's quad after z = t^2, which makes the 1 / sqrt(z) end smooth).
"""

from __future__ import annotations

import functools

import mpmath as mp
import numpy as np
import offline_mp_reference as R
import pytest
from scipy import integrate

from market_sim.distributions import parse_distribution, uniform
from market_sim.mechanisms.base import as_mechanism
from market_sim.mechanisms.offline import solve
from market_sim.mechanisms.payments import OfflineCurves, _UncappedOracle, offline_payments
from market_sim.population import Population

LAW = uniform(0, 1)
KW = dict(mu=1.0, sigma=1.0, gamma=1.0)


@pytest.mark.parametrize("backend", ["numpy", "numba"])
@pytest.mark.parametrize(
    "reports, k", [([0, 0.3, 0.7, 0.2], None), ([0, 0, 0.7, 0.1], 2), ([0, 0, 0, 0.5], 1.5)]
)
def test_solve_at_zero_is_the_limit_of_nearby_markets(reports, k, backend):
    r = np.array(reports, dtype=float)
    zero = r == 0
    res = solve(LAW.virtual_cost(r), **KW, k=k, backend=backend)
    assert np.all(np.isposinf(res.eps[zero])) and np.all(res.eps[~zero] == 0)
    assert res.eta == np.inf and res.n_bought == zero.sum()
    assert res.proxy_loss == pytest.approx(1 / np.sqrt(zero.sum()), rel=1e-15)
    prev = 0.0
    for delta in (1e-6, 1e-9, 1e-12):
        near = np.where(zero, delta * (1 + np.arange(r.size) / 10), r)
        res_d = solve(LAW.virtual_cost(near), **KW, k=k, backend=backend)
        np.testing.assert_allclose(res_d.a, res.a, atol=30 * np.sqrt(delta))
        assert res_d.proxy_loss == pytest.approx(res.proxy_loss, abs=30 * np.sqrt(delta))
        assert res_d.eps[zero].min() > prev  # eps of the zero sellers grows without bound
        prev = res_d.eps[zero].min()


def _reference_payment(r, i):
    """int_0^1 eps_i(z) dz by quad, eps_i from solve, pieces cut where the bought set
    changes (found by bisection from a grid), the first piece in t = sqrt(z)."""

    def eps(z):
        rr = r.copy()
        rr[i] = z
        return solve(LAW.virtual_cost(rr), **KW, backend="numpy").eps[i]

    def key(z):
        rr = r.copy()
        rr[i] = z
        return tuple(solve(LAW.virtual_cost(rr), **KW, backend="numpy").eps > 0)

    grid = np.concatenate((np.geomspace(1e-12, 1e-3, 30), np.linspace(1e-3, 1, 200)))
    cuts = [0.0]
    for a, b in zip(grid[:-1], grid[1:], strict=True):
        if key(a) != key(b):
            while b - a > 1e-15:
                m = 0.5 * (a + b)
                a, b = (m, b) if key(m) == key(a) else (a, m)
            cuts.append(0.5 * (a + b))
    cuts.append(1.0)
    kw = dict(epsabs=0.0, epsrel=1e-13, limit=200)
    total = integrate.quad(lambda t: 2 * t * eps(t * t), 0, np.sqrt(cuts[1]), **kw)[0]
    for a, b in zip(cuts[1:-1], cuts[2:], strict=True):
        total += integrate.quad(eps, a, b, **kw)[0]
    return total


def test_payment_at_zero_equals_an_independent_integral_and_the_nearby_limit():
    r = np.array([0.0, 0.3, 0.7])
    eps, pay = offline_payments(r, LAW, **KW)
    assert np.isposinf(eps[0]) and np.all(eps[1:] == 0)
    assert pay[0] == pytest.approx(_reference_payment(r, 0), rel=1e-9)
    # the payments of nearby markets converge to it (at the rate sqrt(delta))
    gaps = []
    for delta in (1e-8, 1e-10):
        near = r.copy()
        near[0] = delta
        gaps.append(abs(offline_payments(near, LAW, **KW)[1][0] - pay[0]))
    assert gaps[1] < gaps[0] / 5 and gaps[1] < 1e-4


def test_run_and_deviations_never_raise_on_a_report_of_zero():
    """#47's market: per-seller laws, gamma = 1, a seller of the U[0, 1] class reports 0."""
    pop = Population([("uniform:0:1", 5), ("uniform:1:2", 5)])
    mech = as_mechanism("offline", population=pop, mu=1.0, sigma=1.0, gamma=1.0)
    costs = pop.sample(np.random.default_rng(3)).costs
    for seller in range(3):  # each of three sellers of the first class at 0
        reports = costs.copy()
        reports[seller] = 0.0
        out = mech.run(reports)
        assert np.isposinf(out.eps[seller]) or np.isfinite(out.eps).all()
        assert np.all(np.isfinite(out.payments))
        dev = mech.deviations(np.array([seller, 7]), np.array([[0.0, 0.2], [1.0, 1.5]]), reports)
        assert np.all(np.isfinite(dev.payments))
    # every first-class seller at 0 (the floor profile)
    floor = np.where(np.arange(10) < 5, 0.0, costs)
    out = mech.run(floor)
    assert np.all(np.isposinf(out.eps[:5])) and np.all(out.eps[5:] == 0)


def test_utility_at_zero_is_minus_inf_for_a_positive_cost_and_finite_at_zero():
    r = np.array([0.3, 0.0, 0.7, 0.2])
    cur = OfflineCurves(r, LAW, **KW)
    u = cur.utilities(np.array([[0.0, 0.3], [0.0, 0.1]]), [0.3, 0.0], sellers=[0, 1])
    assert u[0, 0] == -np.inf and np.isfinite(u[0, 1])
    assert np.isfinite(u[1, 0]) and u[1, 0] >= u[1, 1]  # truth is best for the zero-cost seller


def _floor_reference(law, r, i):
    """t_i = r_i eps_i(r_i) + int_{r_i}^{h} eps_i, eps_i from ``solve`` (numpy backend) and
    scipy's quad on pieces cut where the bought set changes (bisected to 1e-15 from a grid
    geometric near the floor, where eps_i varies on the scale of the opponents' values),
    each piece split again at that grid's points."""
    lo, hi = law.support

    def solved(z):
        rr = r.copy()
        rr[i] = z
        return solve(law.virtual_cost(rr), **KW, backend="numpy").eps

    w = hi - lo
    grid = lo + w * np.concatenate((np.geomspace(1e-12, 1e-3, 40), np.linspace(1e-3, 1, 60)))
    grid = np.unique(np.append(grid[grid > r[i]], r[i]))
    cuts = [r[i]]
    for a, b in zip(grid[:-1], grid[1:], strict=True):
        if np.any((solved(a) > 0) != (solved(b) > 0)):
            while b - a > 1e-15 * w:
                m = 0.5 * (a + b)
                a, b = (m, b) if np.all((solved(m) > 0) == (solved(a) > 0)) else (a, m)
            cuts.append(0.5 * (a + b))
    edges = np.unique(np.concatenate((cuts, [hi], grid[grid < cuts[-1]])))
    kw = dict(epsabs=0.0, epsrel=1e-13, limit=200)
    tail = sum(integrate.quad(lambda z: solved(z)[i], a, b, **kw)[0]
               for a, b in zip(edges[:-1], edges[1:], strict=True))  # fmt: skip
    return r[i] * solved(r[i])[i] + tail


@pytest.mark.parametrize("spec", ["uniform:0:1", "beta:2:5:0:2"])
def test_floor_profile_payments_equal_a_high_precision_reference(spec):
    """The audit's floor profile (opponents at the bottom of the support + 1e-9 of its
    width, psi ~ 1e-9): eps_i varies on that scale at the start of a piece ~1e-4 wide,
    where one Gauss-Legendre rule errs by ~7e-5 (the pre-#47 payments)."""
    law = parse_distribution(spec)
    lo, hi = law.support
    floor = lo + 1e-9 * (hi - lo)
    for own in (floor, lo + 1e-6 * (hi - lo)):
        r = np.r_[own, np.full(9, floor)]
        eps, pay = offline_payments(r, law, **KW)
        assert eps[0] > 0
        assert pay[0] == pytest.approx(_floor_reference(law, r, 0), rel=1e-9)


def _mp_eps(spec, reports, i):
    psi = R.virtual_cost(spec)
    with mp.workdps(R.DPS):
        return float(R.eps_of([psi(r) for r in reports], i)[0])


@functools.cache
def _least_seller_references():
    """(costs, i, eps_i and t_i at Z_SMALL by mpmath): the least seller of a drawn U[0, 1]
    market, t_i(0) by ``R.payment``, t_i(z) = t_i(0) - int_0^z eps_i + z eps_i(z)."""
    spec, costs = "uniform:0:1", LAW.sample(10, np.random.default_rng(0))
    i = int(np.argmin(costs))
    at = lambda z: np.where(np.arange(10) == i, z, costs)  # noqa: E731
    eps = np.array([_mp_eps(spec, at(z), i) for z in Z_SMALL])
    t0 = R.payment(spec, at(0.0), i, 1.0)
    pay = [t0] + [t0 - R.integral(spec, at(0.0), i, 0.0, z) + z * e
                  for z, e in zip(Z_SMALL[1:], eps[1:], strict=True)]  # fmt: skip
    return costs, i, eps, np.array(pay)


Z_SMALL = np.array([0.0, 1e-300, 1e-18, 3e-18, 1e-12, 1e-7])


@pytest.mark.parametrize("backend", ["numpy", "numba"])
def test_reports_near_zero_below_the_least_value_are_exact(backend, monkeypatch):
    """The least seller (value ref = 0.055) moving to a report z near 0, on a curve built
    from 0 (the audit's floor candidate).  (1) Below ulp(ref) ~ 7e-18 its cell (it alone
    bought) has mean p = 2z, which the prefix sums shifted by ref rounded to 0: no KKT
    point, so every such report fell back to a full solve (a 10 x 20 audit: 38 CPU s,
    1.5 s now).  (2) Its payment at z > 0 in the curve's first piece [0, 5e-4], where
    eps_i ~ 1 / sqrt(z): one rule on [z, end] lost z (off by 5e-6 of t at z = 1e-12,
    the sign of t(z) - t(0) wrong).  Truth: the mpmath reference."""
    costs, i, eps_ref, pay_ref = _least_seller_references()
    assert 2e-18 < np.spacing(2 * costs[i]) < 1e-17  # reports 1e-300 .. 3e-18: below it

    def no_fallback(self, xi, p):
        raise AssertionError(f"full re-solve at report value {p!r}")

    monkeypatch.setattr(_UncappedOracle, "_resolve", no_fallback)
    cur = OfflineCurves(costs, LAW, **KW, backend=backend)
    eps, pay = cur.outcome_at(Z_SMALL[None, :], [i])
    assert np.isposinf(eps[0, 0])
    np.testing.assert_allclose(eps[0, 1:], eps_ref[1:], rtol=1e-12)
    np.testing.assert_allclose(pay[0], pay_ref, rtol=1e-9)
    assert np.all(np.diff(pay[0, 1:]) < 0)  # t(z) falls with z (z eps'(z) < 0; 1e-300: t(0))


@pytest.mark.parametrize("spec", ["uniform:0:1", "beta:2:2:0:1", "beta:2:5:0:2"])
def test_payments_at_the_floor_equal_an_mpmath_reference(spec):
    """The audit's floor profile on a support from 0 (every other seller at 0, the
    zero-cost limit's neighbourhood), the own report at 0 (eps = +inf, a finite payment)
    and 1e-9 of the width above, and a drawn market with one seller at 0: payments equal
    the mpmath reference (its own cubic, virtual costs from betainc, tanh-sinh on the
    pieces) to 1e-9."""
    law = parse_distribution(spec)
    lo, hi = law.support
    for own in (lo, lo + 1e-9 * (hi - lo)):
        r = np.r_[own, np.full(9, lo)]
        eps, pay = offline_payments(r, law, **KW)
        assert eps[0] > 0 and np.isposinf(eps[0]) == (own == lo)
        assert pay[0] == pytest.approx(R.payment(spec, r, 0, hi), rel=1e-9)
    if spec == "uniform:0:1":  # (the others' laws alike; ~6 s of mpmath each)
        r = law.sample(10, np.random.default_rng(1))
        r[0] = lo
        eps, pay = offline_payments(r, law, **KW)
        assert np.isposinf(eps[0]) and pay[0] == pytest.approx(R.payment(spec, r, 0, hi), rel=1e-9)


def test_pay_as_bid_at_zero_is_paid_the_limit_0_without_a_nan():
    """Pay-as-bid pays report x eps; at a report of 0 (eps = +inf) the product is NaN and
    its limit is 0: z eps(z) <= sqrt(sigma z / gamma) (``baselines.paid_as_bid``'s proof).
    Checked: run and deviations pay 0 there with no RuntimeWarning, and z eps(z) obeys
    the bound and falls towards 0 at z = 1e-2 ... 1e-10."""
    import warnings

    mech = as_mechanism("pay-as-bid", dist=LAW, **KW)
    reports = np.array([0.0, 0.3, 0.7, 0.2])
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        out = mech.run(reports)
        dev = mech.deviations(np.array([1]), np.array([[0.0, 0.5]]), reports)
    assert np.isposinf(out.eps[0]) and out.payments[0] == 0.0
    assert np.all(np.isfinite(out.payments)) and np.all(out.payments[1:] == 0.0)
    assert np.isposinf(dev.eps[0, 0]) and dev.payments[0, 0] == 0.0
    assert dev.payments[0, 1] == pytest.approx(0.5 * dev.eps[0, 1])
    z = 10.0 ** -np.arange(2, 11, 2)
    paid = np.array([mech.deviations(np.array([1]), np.array([[v]]), reports).payments[0, 0]
                     for v in z])  # fmt: skip
    assert np.all(paid > 0) and np.all(paid <= np.sqrt(KW["sigma"] * z / KW["gamma"]))
    assert np.all(np.diff(paid) < 0) and paid[-1] < 1e-4
