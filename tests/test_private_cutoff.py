"""The private cut-off variant of the offline mechanism and noisy statistic release."""

import numpy as np
import pytest
from scipy import stats
from scipy.integrate import quad

from market_sim.agents import MarketModel
from market_sim.distributions import parse_distribution
from market_sim.errors import MarketSimError
from market_sim.mechanisms.offline import solve
from market_sim.mechanisms.private_cutoff import PrivateCutoff
from market_sim.privacy.release import StatisticRelease

U01 = parse_distribution("uniform:0:1")
U15 = parse_distribution("uniform:1:5")


def _adversarial_reports(dist, m, rng):
    """Reports that make the score fragile: most at the top, a few near each cut-off."""
    lo, hi = dist.support
    kind = rng.integers(3)
    if kind == 0:
        return dist.sample(m, rng)
    if kind == 1:
        r = np.full(m, hi)
        r[: rng.integers(1, 4)] = rng.uniform(lo, lo + 0.05 * (hi - lo), 1)
        return r
    return rng.uniform(lo, lo + (hi - lo) * rng.uniform(0.001, 0.2), m)


@pytest.mark.parametrize("dist", [U01, U15])
def test_score_moves_by_at_most_the_documented_sensitivity(dist):
    rng = np.random.default_rng(0)
    m = 40
    worst = 0.0
    for min_weight in (None, 0.05, 2.0):
        mech = PrivateCutoff(
            dist, m, mu=1.0, sigma=0.5, gamma=0.7, privacy=1.0, min_weight=min_weight
        )
        for _ in range(150):
            r = _adversarial_reports(dist, m, rng)
            r2 = r.copy()
            j = rng.integers(m)
            r2[j] = rng.choice([dist.support[0], dist.support[1], rng.uniform(*dist.support)])
            gap = np.max(np.abs(mech.scores(r) - mech.scores(r2)))
            worst = max(worst, gap / mech.sensitivity)
            # epsilon-DP of the cut-off: probability ratios within e^privacy
            p, q = mech.cutoff_probabilities(r), mech.cutoff_probabilities(r2)
            assert np.all(p <= np.exp(mech.privacy) * q * (1 + 1e-9))
    assert worst <= 1.0
    assert worst > 0.01  # the bound is not vacuous by orders of magnitude on these markets


def test_sensitivity_shrinks_with_m_and_private_loss_approaches_exact():
    sens = [PrivateCutoff(U15, m).sensitivity for m in (100, 1000, 10000)]
    assert sens[0] > sens[1] > sens[2]
    rng = np.random.default_rng(1)
    c = U15.sample(3000, rng)
    exact = solve(U15.virtual_cost(c), mu=1, sigma=1, gamma=1).proxy_loss
    losses = PrivateCutoff(U15, 3000).proxy_losses(c)
    expected = [
        PrivateCutoff(U15, 3000, privacy=e).cutoff_probabilities(c) @ losses
        for e in (0.1, 10.0, 1e4)
    ]
    assert expected[0] >= expected[1] >= expected[2]
    assert losses.min() >= exact - 1e-9  # no grid point beats the exact optimum
    assert expected[2] == pytest.approx(losses.min(), rel=1e-4)
    assert expected[2] <= exact * 1.001  # the default grid is fine enough


def test_exponential_mechanism_utility_theorem_on_the_cutoff():
    rng = np.random.default_rng(2)
    c = U01.sample(500, rng)
    mech = PrivateCutoff(U01, 500, privacy=30.0)
    s = mech.scores(c)
    t = 1.0
    gap = 2 * mech.sensitivity * (np.log(s.size) + t) / mech.privacy
    draws = [mech.outcome(c, rng).lam for _ in range(400)]
    chosen = s[np.searchsorted(mech.lams, draws)]
    bad = np.mean(chosen < s.max() - gap)
    assert bad <= np.exp(-t) + 3 * np.sqrt(np.exp(-t) / 400)


def test_cutoff_stage_is_truthful_ir_and_payments_are_myerson():
    rng = np.random.default_rng(3)
    c = U15.sample(12, rng)
    mech = PrivateCutoff(U15, 12, privacy=1.0)
    lam = mech.lams[16]
    eps, pay = mech.allocation(c, lam), mech.payments(c, lam)
    assert np.all(pay - c * eps >= -1e-12)
    assert np.count_nonzero(eps) >= 2
    i = int(np.argmax(eps))
    # payment = r eps(r) + int_r^top eps(z) dz (scipy quad)
    x = mech.virtual(c)
    w = np.maximum(lam - x, 0)
    S, P = w.sum() - w[i], w @ x - w[i] * x[i]
    top = float(U15.inverse_virtual_cost(np.array(lam)))
    integral = quad(lambda z: float(mech._own_eps(np.array(z), lam, S, P)), c[i], top)[0]
    assert pay[i] == pytest.approx(c[i] * eps[i] + integral, rel=1e-7)
    truthful = pay[i] - c[i] * eps[i]
    for r in np.linspace(1, 5, 81):
        trial = c.copy()
        trial[i] = r
        dev = mech.payments(trial, lam)[i] - c[i] * mech.allocation(trial, lam)[i]
        assert dev <= truthful + 1e-9
        assert mech.allocation(trial, lam)[i] <= eps[i] + 1e-12 or r < c[i]  # monotone


def test_misreport_gains_at_most_the_approximate_truthfulness_bound():
    rng = np.random.default_rng(4)
    c = U15.sample(10, rng)
    for privacy in (0.3, 3.0):
        mech = PrivateCutoff(U15, 10, privacy=privacy)
        for i in range(10):
            truth = mech.expected_utility(i, c[i], c[i], c)
            best = max(mech.expected_utility(i, r, c[i], c) for r in np.linspace(1, 5, 41))
            assert best - truth <= mech.ic_bound(i, c[i], c) + 1e-12
            assert truth >= 0


def test_market_model_runs_the_private_cutoff_and_releases_statistics():
    rel = StatisticRelease("laplace", 2.0)
    model = MarketModel(
        8,
        mechanism="private-cutoff",
        strategy="best-response",
        rounds=2,
        privacy=1.0,
        release=rel,
        payment_bound=3.0,
        seed=5,
    )
    model_df, agent_df = model.run()
    mech = model.mechanism.cutoff
    assert model.mechanism.randomized
    assert np.all(agent_df.utility >= -1e-9)
    assert np.isfinite(model_df.released_payment).all()
    # best responders gain at most the bound against truth, in expectation
    reports = np.array([s.report for s in model.sellers])
    for k, s in enumerate(model.sellers):
        assert s.regret <= mech.ic_bound(k, s.cost, reports) + 1e-9
    again = MarketModel(
        8,
        mechanism="private-cutoff",
        strategy="best-response",
        rounds=2,
        privacy=1.0,
        release=rel,
        payment_bound=3.0,
        seed=5,
    ).run()[0]
    assert again.equals(model_df)


def test_release_noise_is_calibrated():
    rng = np.random.default_rng(6)
    lap = StatisticRelease("laplace", 0.5)
    vals = np.array([lap.release(3.7, rng, lower=0, upper=2).value for _ in range(4000)])
    # clipped to 2, then Laplace(scale = range / eps = 4)
    assert stats.kstest(vals - 2.0, stats.laplace(scale=4.0).cdf).pvalue > 1e-3
    out = lap.release(1.0, rng, sensitivity=1.0)
    assert out.noise_sd == pytest.approx(np.sqrt(2) * 2.0)
    tl = StatisticRelease("truncated-laplace", 1.0, 0.05)
    draws = np.array([tl.release(0.0, rng, sensitivity=1.0).value for _ in range(4000)])
    assert np.abs(draws).max() <= tl.mechanism(1.0).bound
    assert np.std(draws) == pytest.approx(tl.release(0.0, rng, sensitivity=1.0).noise_sd, rel=0.08)
    g = StatisticRelease("gaussian", 1.0, 1e-5)
    assert g.release(0.0, rng, sensitivity=1.0).noise_sd == pytest.approx(g.mechanism(1.0).sigma)


@pytest.mark.parametrize(
    "kwargs, msg",
    [
        (dict(privacy=0.0), "privacy"),
        (dict(privacy=np.inf), "privacy"),
        (dict(grid=()), "grid"),
        (dict(grid=(0.0, 0.5)), "exceed"),
        (dict(min_weight=-1.0), "min_weight"),
        (dict(m=0), "m must be"),
        (dict(sigma=0.0), "sigma"),
    ],
)
def test_private_cutoff_refuses_bad_parameters(kwargs, msg):
    base = dict(dist=U01, m=20)
    base.update(kwargs)
    with pytest.raises(MarketSimError, match=msg):
        PrivateCutoff(**base)


@pytest.mark.parametrize(
    "args, msg",
    [
        (("uniform", 1.0), "unknown"),
        (("laplace", -1.0), "epsilon"),
        (("laplace", 1.0, 0.1), "pure"),
        (("gaussian", 1.0), "delta"),
        (("gaussian", 1.0, 1.5), "delta"),
    ],
)
def test_release_refuses_bad_parameters(args, msg):
    with pytest.raises(MarketSimError, match=msg):
        StatisticRelease(*args).mechanism(1.0)


def test_release_needs_a_range_or_sensitivity_and_the_model_a_bound():
    rng = np.random.default_rng(0)
    with pytest.raises(MarketSimError, match="range"):
        StatisticRelease().release(1.0, rng)
    with pytest.raises(MarketSimError, match="sensitivity"):
        StatisticRelease().release(1.0, rng, sensitivity=0.0)
    with pytest.raises(MarketSimError, match="payment_bound"):
        MarketModel(5, release=StatisticRelease(), seed=0)


@pytest.mark.parametrize("spec", ["uniform:0:1", "uniform:1:5", "beta:2:3:0:1"])
@pytest.mark.parametrize("m", [1, 2, 7, 40])
def test_vectorised_deviations_equal_the_per_report_expectation(spec, m):
    """The registered mechanism's deviations (all sellers, candidates and cut-offs at
    once) equal PrivateCutoff.expected_utility report by report."""
    from market_sim.mechanisms.base import as_mechanism

    dist = parse_distribution(spec)
    rng = np.random.default_rng(m)
    c = dist.sample(m, rng)
    lo, hi = dist.support
    mech = as_mechanism("private-cutoff", dist=dist, n_sellers=m, gamma=0.5)
    cand = np.column_stack([c, rng.uniform(lo, hi, (m, 5)), np.full(m, hi), np.full(m, lo + 1e-3)])
    got = mech.deviation_utilities(np.arange(m), cand, c, c)
    want = np.array(
        [[mech.cutoff.expected_utility(i, z, c[i], c) for z in cand[i]] for i in range(m)]
    )
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-15 * np.abs(want).max())
    order = np.argsort(cand, axis=1)
    eps = np.take_along_axis(mech.deviations(np.arange(m), cand, c).eps, order, axis=1)
    assert np.all(eps >= 0) and np.all(np.diff(eps, axis=1) <= 1e-12)  # expected eps falls
