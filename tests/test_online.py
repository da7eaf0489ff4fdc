import itertools

import numpy as np
import pytest
from scipy import integrate

from market_sim.distributions import parse_distribution
from market_sim.errors import MarketSimError
from market_sim.mechanisms.online import (
    OnlineMechanism,
    PriorFreeOnline,
    compare_online_offline,
    simulate_arrivals,
)

U01 = parse_distribution("uniform:0:1")
KW = dict(mu=1.0, sigma=1.0, gamma=1.0)


def test_alg3_is_the_printed_formula():
    m, mu, sigma, gamma = 500, 2.0, 0.5, 0.7
    mech = OnlineMechanism(U01, m, mu=mu, sigma=sigma, gamma=gamma, rule="alg3")
    f0 = 0.5  # Psi = 2C ~ U[0, 2]
    lam = np.sqrt(mu**2 * gamma / (sigma * m * f0))
    assert mech.cutoff == pytest.approx(lam, rel=1e-6)
    c = np.array([0.001, 0.01, 0.05, 0.9])
    x = gamma * 2 * c
    expected = np.where(
        x < lam, 2 * np.sqrt(3) * gamma**1.5 * mu * (lam - x) / (f0**1.5 * m**1.5 * lam**3.5), 0.0
    )
    np.testing.assert_allclose(mech.eps(c), expected, rtol=1e-5)


def test_fluid_equals_alg3_when_the_density_of_psi_is_flat_near_zero():
    for m in (50, 5000):
        f = OnlineMechanism(U01, m, **KW)
        a = OnlineMechanism(U01, m, **KW, rule="alg3")
        assert f.cutoff == pytest.approx(a.cutoff, rel=1e-9)
        c = np.linspace(0, 0.2, 9)
        np.testing.assert_allclose(f.eps(c), a.eps(c), rtol=1e-6, atol=1e-15)


def test_alg3_is_the_small_lambda_limit_of_fluid():
    d = parse_distribution("beta:1:2:0:1")  # f_Psi(0) = 1 but not flat near 0
    gaps = []
    for m in (10**2, 10**4, 10**6):
        f = OnlineMechanism(d, m, **KW)
        a = OnlineMechanism(d, m, **KW, rule="alg3")
        gaps.append(abs(f.cutoff / a.cutoff - 1))
    assert gaps[0] > gaps[1] > gaps[2]
    assert gaps[0] > 1e-3 and gaps[2] < 1e-4


def test_alg3_is_refused_where_f_psi_at_zero_vanishes():
    with pytest.raises(MarketSimError, match="f_Psi\\(0\\).*use rule='fluid'"):
        OnlineMechanism(parse_distribution("uniform:1:5"), 100, **KW, rule="alg3")
    OnlineMechanism(parse_distribution("uniform:1:5"), 100, **KW)  # fluid is fine


def test_fluid_cutoff_solves_the_expected_eq14():
    d = parse_distribution("truncnorm:2:1:1:5")
    m = 1000
    mech = OnlineMechanism(d, m, mu=1.0, sigma=2.0, gamma=0.5)
    lam = mech.cutoff
    top = float(d.inverse_virtual_cost(np.array(lam / 0.5)))
    gap = lambda c: max(lam - 0.5 * float(d.virtual_cost(c)), 0.0)  # noqa: E731
    g = integrate.quad(lambda c: gap(c) ** 2 * d.pdf(c), 1, top, epsabs=1e-14)[0]
    w = integrate.quad(lambda c: gap(c) * d.pdf(c), 1, top, epsabs=1e-14)[0]
    assert mech.moments(lam) == pytest.approx((g, w), rel=1e-8)
    assert lam - 2.0 * m * g - g / w == pytest.approx(0, abs=1e-9 * lam)


def test_payments_closed_form_for_uniform():
    mech = OnlineMechanism(U01, 400, **KW)
    lam, kappa = mech.cutoff, mech.scale
    c = np.array([0.0, 0.01, 0.03, 0.5])
    top = lam / 2  # psi = 2z
    integral = np.where(c < top, kappa * (lam * (top - c) - (top**2 - c**2)), 0.0)
    np.testing.assert_allclose(mech.payments(c), c * mech.eps(c) + integral, rtol=1e-12, atol=1e-18)


@pytest.mark.parametrize("spec", ["uniform:0:1", "uniform:1:5", "beta:2:3:0:2"])
def test_ic_ir_and_monotonicity(spec):
    d = parse_distribution(spec)
    mech = OnlineMechanism(d, 200, **KW)
    reports = np.linspace(*d.support, 401)[:-1]
    eps, pay = mech.eps(reports), mech.payments(reports)
    assert np.all(np.diff(eps) <= 1e-15)
    for c in d.sample(20, np.random.default_rng(1)):
        u = pay - c * eps
        truthful = float(mech.payments([c])[0] - c * mech.eps([c])[0])
        assert truthful >= -1e-15
        assert u.max() <= truthful + 1e-12


def test_online_to_offline_ratio_tends_to_one():
    for spec, ms in (
        ("uniform:0:1", (10**2, 10**4, 10**6)),
        ("uniform:1:5", (10**2, 10**4, 10**6)),
    ):
        d = parse_distribution(spec)
        ratios = []
        for m in ms:
            r = np.mean(
                [
                    compare_online_offline(
                        d.sample(m, np.random.default_rng(s)), OnlineMechanism(d, m, **KW)
                    )["ratio"]
                    for s in range(2)
                ]
            )
            ratios.append(r)
        assert all(r >= 1 - 1e-12 for r in ratios)  # the offline optimum is optimal
        assert ratios[-1] - 1 < 0.2 * (ratios[0] - 1)
        assert ratios[-1] < 1.002


def test_fewer_arrivals_cost_more_as_predicted_by_the_fluid_limit():
    """Thm V.1: the platform planned for m but only xi*m arrive.  The budget
    eta = sum eps shrinks like xi, so sigma/eta grows like 1/xi, ||a|| like
    1/sqrt(xi) and the payments shrink like xi: the fluid limit predicts the loss."""
    m = 400_000
    mech = OnlineMechanism(U01, m, **KW)
    g, w = mech.moments(mech.cutoff)
    k = mech.scale
    losses = []
    reps = 6
    for xi in (1.0, 0.5, 0.25, 0.125):
        n = xi * m
        runs = [
            simulate_arrivals(
                mech,
                U01.sample(m, np.random.default_rng(s)),
                xi=xi,
                rng=np.random.default_rng(100 + s),
            )
            for s in range(reps)
        ]
        # relative sd of eta over one run: sqrt(Var/n)/E = sqrt(g / (n w^2))
        tol = 3 * np.sqrt(g / (n * w * w)) / np.sqrt(reps)
        eta = np.mean([r.eps.sum() for r in runs])
        assert eta == pytest.approx(n * k * w, rel=tol)
        loss = np.mean([r.proxy_loss for r in runs])
        predicted = np.sqrt(n * g) / (n * w) + 1.0 / (n * k * w) + n * k * (mech.cutoff * w - g)
        assert loss == pytest.approx(predicted, rel=tol + 2 * tol**2 * reps)  # + Jensen bias
        losses.append(loss)
    assert losses == sorted(losses)


def test_arrival_errors_and_given_order():
    mech = OnlineMechanism(U01, 10, **KW)
    with pytest.raises(MarketSimError, match="xi"):
        simulate_arrivals(mech, [0.1, 0.2], xi=0)
    out = simulate_arrivals(mech, [0.3, 0.01, 0.02], xi=2 / 3)
    assert list(out.arrived) == [0, 1]


def test_prior_free_is_ic_and_close_to_fluid():
    m = 4096
    costs = U01.sample(m, np.random.default_rng(5))
    pf = PriorFreeOnline((0.0, 1.0), m, **KW, warmup=64)
    eps, pay = pf.run(costs)
    assert np.all(eps[:64] == 0)
    assert np.all(pay - costs * eps >= -1e-15)
    # each seller's schedule comes from earlier reports only: change one report
    j = 3000
    moved = costs.copy()
    moved[j] = 0.001
    eps2, _ = pf.run(moved)
    same_epoch = np.arange(2048, 4096) != j
    np.testing.assert_array_equal(eps2[2048:][same_epoch], eps[2048:][same_epoch])
    start, mech = pf.schedules[-1]
    assert start == 2048 and eps2[j] == mech.eps([0.001])[0]
    # IC against its own (fixed) schedule
    grid = np.linspace(0, 1, 301)[:-1]
    u = mech.payments(grid) - costs[j] * mech.eps(grid)
    truthful = mech.payments([costs[j]])[0] - costs[j] * mech.eps([costs[j]])[0]
    assert u.max() <= truthful + 1e-12
    # what not knowing the prior costs
    known = simulate_arrivals(OnlineMechanism(U01, m, **KW), costs).proxy_loss
    learnt = simulate_arrivals(pf, costs, true_dist=U01).proxy_loss
    assert abs(learnt / known - 1) < 0.05  # 0.2-1% here with the reflected KDE


def test_payments_do_not_depend_on_the_memory_layout_of_the_reports():
    """A Fortran-ordered 2-D block of reports is paid like the same reports in 1-D
    (an in-place update through ravel() once silently dropped the integral)."""
    dist = parse_distribution("uniform:0:1")
    mech = OnlineMechanism(dist, 50, mu=1.0, sigma=1.0, gamma=0.3)
    z = np.asfortranarray(np.linspace(0.01, 0.99, 24).reshape(4, 6))
    assert not z.flags.c_contiguous
    expected = mech.payments(z.ravel()).reshape(4, 6)
    np.testing.assert_allclose(mech.payments(z), expected, rtol=1e-14)
    assert np.all(mech.payments(z)[mech.eps(z) > 0] > (z * mech.eps(z))[mech.eps(z) > 0])


def test_online_payments_on_an_empirical_law_integrate_between_its_density_steps():
    """psi of an empirical law jumps at its histogram's edges (its ``breaks``), so
    eps(z) jumps there.  The reference integrates eps bin by bin with quad (no rule
    across a jump); one 64-node rule across the jumps was 2e-7 off here (measured)."""
    from scipy.integrate import quad

    from market_sim.distributions import empirical

    rng = np.random.default_rng(2)
    d = empirical(rng.beta(2, 3, size=400), bins=64, iron=True)
    mech = OnlineMechanism(d, 2000, **KW)
    top = min(mech.threshold_cost, d.support[1])
    costs = np.linspace(d.support[0], top, 6)[:-1]
    pay = mech.payments(costs)

    def eps(z):
        return float(mech.eps(np.array([z]))[0])

    for c, p in zip(costs, pay, strict=True):
        cuts = [c, *(x for x in d.breaks if c < x < top), top]
        integral = sum(quad(eps, a, b, epsabs=1e-14)[0] for a, b in itertools.pairwise(cuts))
        assert p == pytest.approx(c * eps(c) + integral, abs=1e-12)
