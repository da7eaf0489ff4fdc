import numpy as np
import pytest
from scipy import integrate, stats

from market_sim.distributions import empirical, parse_distribution
from market_sim.errors import MarketSimError


@pytest.mark.parametrize(
    "spec, ref",
    [
        ("uniform:0.5:2", stats.uniform(0.5, 1.5)),
        ("truncnorm:1:0.5:0:2", stats.truncnorm(-2, 2, loc=1, scale=0.5)),
        ("beta:2:3:1:4", stats.beta(2, 3, loc=1, scale=3)),
        ("truncexpon:0.5:0.2:3", stats.truncexpon(5.6, loc=0.2, scale=0.5)),
    ],
)
def test_spec_matches_scipy(spec, ref):
    d = parse_distribution(spec)
    c = np.linspace(*d.support, 17)
    np.testing.assert_allclose(d.pdf(c), ref.pdf(c), rtol=1e-12)
    np.testing.assert_allclose(d.cdf(c), ref.cdf(c), rtol=1e-12, atol=1e-15)
    assert d.is_regular()
    # psi = c + F/f by its definition, away from the bottom where F/f -> 0
    inner = c[1:-1]
    np.testing.assert_allclose(
        d.virtual_cost(inner), inner + ref.cdf(inner) / ref.pdf(inner), rtol=1e-10
    )


def test_uniform_virtual_cost_is_2c_minus_low():
    # 003, Sec. VI: c ~ U[e^-4, 5e^-4] gives psi(c) = 2c - e^-4
    lo, hi = np.exp(-4), 5 * np.exp(-4)
    d = parse_distribution(f"uniform:{float(lo)!r}:{float(hi)!r}")
    assert parse_distribution(d.spec).support == (lo, hi)  # the spec is exact
    c = np.linspace(lo, hi, 11)
    np.testing.assert_allclose(d.virtual_cost(c), 2 * c - lo, rtol=1e-12)


def test_virtual_cost_law_of_uniform():
    d = parse_distribution("uniform:0:1")  # Psi = 2C ~ U[0, 2]
    y = np.array([0.1, 0.7, 1.9])
    np.testing.assert_allclose(d.virtual_cost_pdf(y), 0.5, rtol=1e-5)
    np.testing.assert_allclose(d.virtual_cost_cdf(y), y / 2, atol=1e-12)
    assert d.virtual_cost_pdf(np.array([2.5]))[0] == 0.0


def test_virtual_cost_pdf_integrates_to_cdf_and_matches_sampling(rng):
    d = parse_distribution("beta:2:2:0:1")
    y = d.virtual_cost(np.linspace(0, 0.95, 4001))
    mass = integrate.trapezoid(d.virtual_cost_pdf(y), y)
    assert abs(mass - d.cdf(0.95)) < 1e-3
    psi = d.virtual_cost(d.sample(20000, rng))
    for y in (0.3, 0.8, 1.5):
        assert abs(np.mean(psi <= y) - d.virtual_cost_cdf(np.array([y]))[0]) < 0.015


def test_sampling_is_reproducible_and_in_support():
    d = parse_distribution("truncnorm:0.5:1:0:1")
    a = d.sample(1000, np.random.default_rng(7))
    b = d.sample(1000, np.random.default_rng(7))
    assert np.array_equal(a, b)
    assert a.min() >= 0 and a.max() <= 1
    with pytest.raises(TypeError):
        d.sample(3, 7)


def test_non_regular_is_refused_unless_ironed():
    with pytest.raises(MarketSimError, match="not regular.*iron"):
        parse_distribution("beta:0.5:0.5:0:1")
    d = parse_distribution("beta:0.5:0.5:0:1", iron=True)
    assert d.ironed and d.iron_intervals
    assert parse_distribution("beta:0.5:0.5:0:1+iron").iron_intervals == d.iron_intervals


def test_ironing_is_monotone_and_preserves_mass():
    d = parse_distribution("beta:0.5:0.5:0:1", iron=True)
    c = np.linspace(1e-6, 1 - 1e-6, 4001)
    psi_bar = d.virtual_cost(c)
    assert np.all(np.diff(psi_bar) >= -1e-9)
    # on each ironing interval the flat value is the F-average of psi: its integral in q
    for a, b, value in d.iron_intervals:
        num, _ = integrate.quad(lambda z: float(d.raw_virtual_cost(z) * d.pdf(z)), a, b, limit=200)
        assert abs(num / (d.cdf(b) - d.cdf(a)) - value) < 1e-3 * abs(value)
    # outside the intervals nothing changes
    a0 = d.iron_intervals[0][0]
    outside = c[c < a0]
    np.testing.assert_allclose(d.virtual_cost(outside), d.raw_virtual_cost(outside))


def test_regular_distribution_is_not_changed_by_iron():
    d = parse_distribution("uniform:0:1", iron=True)
    assert not d.iron_intervals
    np.testing.assert_allclose(d.virtual_cost([0.2, 0.9]), [0.4, 1.8])


def test_empirical_from_samples_and_file(tmp_path, rng):
    x = rng.uniform(1, 3, 3000)
    d = empirical(x, iron=True)
    assert d.support == (x.min(), x.max())
    c = np.linspace(*d.support, 9)
    np.testing.assert_allclose(d.cdf(c), stats.uniform(1, 2).cdf(c), atol=0.04)
    assert np.all(np.diff(d.virtual_cost(np.linspace(*d.support, 500))) >= -1e-9)
    f = tmp_path / "costs.csv"
    f.write_text("cost\n" + "\n".join(map(str, x)))
    d2 = parse_distribution(f"empirical:{f}", iron=True)
    assert d2.support == d.support


@pytest.mark.parametrize(
    "spec, msg",
    [
        ("", "non-empty"),
        ("gamma:1:2", "unknown distribution"),
        ("uniform:0", "takes 2 numbers"),
        ("uniform:a:b", "must be numbers"),
        ("uniform:1:0", "LOW < HIGH"),
        ("uniform:-1:1", "0 <= LOW"),
        ("uniform:0:inf", "finite"),
        ("truncnorm:0:0:0:1", "SD must be > 0"),
        ("beta:0:1:0:1", "A and B must be > 0"),
        ("empirical:/no/such/file.csv", "no such file"),
    ],
)
def test_bad_specs(spec, msg):
    with pytest.raises(MarketSimError, match=msg):
        parse_distribution(spec)


def test_virtual_cost_outside_support_is_an_error():
    d = parse_distribution("uniform:0:1")
    with pytest.raises(MarketSimError, match="outside the support"):
        d.virtual_cost([0.5, 1.5])


@pytest.mark.parametrize(
    "spec, hint",
    [
        ("unifrom:0:1", "did you mean uniform:LOW:HIGH"),
        ("normal:3:1", "did you mean truncnorm:MEAN:SD:LOW:HIGH"),
        ("uniform(1,5)", "did you mean uniform:LOW:HIGH"),
        ("uniform:1", "as in uniform:LOW:HIGH"),
    ],
)
def test_a_misspelt_cost_law_gets_a_suggestion_and_the_syntax(spec, hint):
    with pytest.raises(MarketSimError, match=hint.replace("(", r"\(")):
        parse_distribution(spec)


@pytest.mark.parametrize(
    "spec",
    [
        "truncnorm:0.5:0.25:0:1",  # the body: a < 0 < b
        "truncnorm:0.5:0.01:0:1",  # z from -50 to 50: erfc underflows, F and f both ~1e-545
        "truncnorm:3:0.5:0:1",  # the whole support in the lower tail (z <= -4)
        "truncnorm:-2:1:0:3",  # the whole support in the upper tail (a >= 0)
        "truncnorm:0.2:0.05:0.1:5",  # upper tail to z = 96: F/f overflows to +inf
    ],
)
def test_truncnorm_virtual_cost_equals_a_50_digit_reference(spec):
    """psi = c + F/f of the truncated normal by its closed form (erfcx, three branches)
    against mpmath at 50 digits: (Phi(z) - Phi(a)) / phi(z) times the scale, where the
    normalising constant cancels.  Where the true ratio exceeds the float range the
    closed form says +inf."""
    import mpmath as mp

    mp.mp.dps = 50
    d = parse_distribution(spec)
    a, loc, scale = d.dist.args[0], d.dist.kwds["loc"], d.dist.kwds["scale"]
    lo, hi = d.support
    c = np.linspace(lo, hi, 121)
    got = d.raw_virtual_cost(c)
    assert got[0] == lo  # F/f -> 0 at the bottom
    for ci, g in zip(c[1:], got[1:], strict=True):
        z = (mp.mpf(ci) - loc) / scale
        want = ci + scale * (mp.ncdf(z) - mp.ncdf(a)) / mp.npdf(z)
        if want > np.finfo(float).max:
            assert g == np.inf
        else:
            assert abs(g - want) <= 1e-12 * abs(want), (ci, g, float(want))


@pytest.mark.parametrize(
    "spec", ["beta:2:5:0:2", "beta:0.5:1:0:1", "beta:0.3:2:1:3", "beta:50:3:0:1"]
)
def test_beta_virtual_cost_equals_a_50_digit_reference(spec):
    """psi = c + F/f of a scaled Beta by its closed form (betainc over the density, the
    power in logs) against mpmath at 50 digits: I_x(a, b) B(a, b) / (x^(a-1)
    (1 - x)^(b-1)) times the scale, x = (c - low) / (high - low); densities singular at
    the bottom (a < 1), a support away from 0, a mass far from the bottom (Beta(50, 3)),
    and costs 1e-300 and 1e-30 above the bottom, where F/f ~ x scale / a."""
    import mpmath as mp

    mp.mp.dps = 50
    d = parse_distribution(spec)
    a, b = d.dist.args
    lo, hi = d.support
    c = np.r_[np.linspace(lo, hi, 121)[:-1], lo + 1e-300, lo + 1e-30]
    got = d.raw_virtual_cost(c)
    assert got[0] == lo and np.all(np.isfinite(got))
    for ci, g in zip(c[1:], got[1:], strict=True):
        x = (mp.mpf(ci) - lo) / (hi - lo)
        F = mp.betainc(a, b, 0, x, regularized=True)
        f = x ** (a - 1) * (1 - x) ** (b - 1) / mp.beta(a, b) / (hi - lo)
        want = ci + F / f
        assert abs(g - want) <= 1e-12 * abs(want), (ci, g, float(want))


def test_tabulated_cdf_follows_a_density_singular_at_an_end():
    """F(c) = c^0.4 (Beta(0.4, 1)) tabulated: between its quantile points the chord of
    a concave F is below it by at most a share (1 - r^0.4) - ... of F where the cell's
    costs are r apart; the geometric quantiles towards 0 keep r <= 1.2 down to 1e-15 of
    the mass, so F is read within 0.3% of itself from c = 1e-30 on.  Without them the
    first cell is c in [0, (1/4096)^2.5 = 9.3e-10], where the chord reads c F(c_1) /
    c_1: at c = 1e-12 it gives 2.6e-7 for 1.6e-5 (issue #48: an exact verification
    10 times the true gain).  U[0, 1] is read exactly; the values are a cdf's."""
    from market_sim.distributions import tabulated_cdf

    law = parse_distribution("beta:0.4:1:0:1")
    cdf = tabulated_cdf(law)
    c = np.geomspace(1e-30, 1.0, 2001)
    exact = c**0.4
    assert np.max(np.abs(cdf(c) / exact - 1)) < 3e-3
    chord = np.interp(1e-12, [0.0, (1 / 4096) ** 2.5], [0.0, 1 / 4096])
    assert chord < 0.02 * 1e-12**0.4  # what the table without the ends read
    u = tabulated_cdf(parse_distribution("uniform:0:1"))
    x = np.linspace(0, 1, 1001)
    assert np.max(np.abs(u(x) - x)) < 1e-15
    y = cdf(np.linspace(-1, 2, 3001))
    assert y[0] == 0 and y[-1] == 1 and np.all(np.diff(y) >= 0)


def test_tail_costs_reach_a_singular_end_and_skip_a_flat_one():
    """``tail_costs``: F = sqrt(c) puts the quantile 1e-15 at the cost 1e-30 (c = u^2),
    which even costs and equal-mass cells of 1/4096 do not reach (their first is 6e-8);
    U[a, b] is linear in u at both ends, so it gets none; Beta(2, 5) vanishes at 0 (c ~
    sqrt(u)) and gets its low end."""
    from market_sim.distributions import parse_distribution, tail_costs

    sqrt_law = parse_distribution("beta:0.5:1:0:1")
    t = tail_costs(sqrt_law, 64)
    assert t.min() == pytest.approx(1e-30, rel=1e-6) and np.all(np.isfinite(t))
    assert np.all((t >= 0) & (t <= 1))
    assert tail_costs(parse_distribution("uniform:1:3"), 64).size == 0
    low = tail_costs(parse_distribution("beta:2:5:0:1"), 64)
    assert low.min() < 1e-7
