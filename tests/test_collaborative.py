"""Collaborative private ML (004): noise-aware posteriors, Bayesian surprise,
Shapley and rho-Shapley rewards, reward control."""

import numpy as np
import pytest
from scipy import integrate, special, stats

from market_sim.collaborative import (
    BernoulliModel,
    GaussianMeanModel,
    LinearRegressionModel,
    SharedStatistic,
    collaborate,
    kl_nearest_neighbour,
    noise_reward,
    rationality_rho,
    rdp_noise_variance,
    rho_shapley_rewards,
    shapley_values,
    temper_reward,
)
from market_sim.collaborative.valuation import coalition_values
from market_sim.errors import MarketSimError


def test_gaussian_mechanism_variance_gives_the_stated_renyi_divergence():
    D, eps, order = 2.0, 0.7, 3.0
    sd = np.sqrt(rdp_noise_variance(D, eps, order))
    p, q = stats.norm(0, sd), stats.norm(D, sd)
    integrand = lambda x: np.exp(order * p.logpdf(x) + (1 - order) * q.logpdf(x))  # noqa: E731
    span = order * D + 15 * sd
    renyi = np.log(integrate.quad(integrand, -span, span, limit=200)[0]) / (order - 1)
    assert renyi == pytest.approx(eps, rel=1e-6)


def _pit(model, draw_theta, draw_data, rng, reps=300):
    """Posterior CDF at the true parameter: uniform iff the posterior is calibrated."""
    u = []
    for _ in range(reps):
        theta = draw_theta()
        s = model.share(draw_data(theta), 0.05, rng)  # strong privacy: lots of noise
        post = model.posterior([s])
        if hasattr(post, "theta"):
            mass = post.w * np.exp(post.log_density)
            u.append(mass[post.theta <= theta].sum())
        else:
            u.append(stats.norm.cdf(theta, post.mean[0], np.sqrt(post.cov[0, 0])))
    return stats.kstest(u, "uniform").pvalue


def test_noise_aware_posteriors_are_calibrated():
    rng = np.random.default_rng(0)
    g = GaussianMeanModel(data_var=1.0, prior_var=1.0, bound=50.0)
    assert _pit(g, lambda: rng.normal(0, 1), lambda t: rng.normal(t, 1, 40), rng) > 1e-3
    b = BernoulliModel(a=2, b=2, grid_size=1500)
    assert _pit(b, lambda: rng.beta(2, 2), lambda t: (rng.random(40) < t).astype(int), rng) > 1e-3


def test_ignoring_the_noise_is_not_calibrated():
    """The check above can fail: the non-noise-aware posterior (noise_var 0) is overconfident."""
    rng = np.random.default_rng(1)
    g = GaussianMeanModel(data_var=1.0, prior_var=1.0, bound=50.0)
    u = []
    for _ in range(300):
        theta = rng.normal()
        s = g.share(rng.normal(theta, 1, 40), 0.05, rng)
        post = g.posterior([SharedStatistic(s.n, s.value, 0.0)])
        u.append(stats.norm.cdf(theta, post.mean[0], np.sqrt(post.cov[0, 0])))
    assert stats.kstest(u, "uniform").pvalue < 1e-6


def test_bernoulli_kl_matches_the_beta_closed_form_without_noise():
    m = BernoulliModel(a=2, b=3)
    post = m.posterior([SharedStatistic(50, np.array([18.0]), 0.0)])
    a1, b1, a0, b0 = 20, 35, 2, 3
    exact = (
        special.betaln(a0, b0)
        - special.betaln(a1, b1)
        + (a1 - a0) * special.digamma(a1)
        + (b1 - b0) * special.digamma(b1)
        + (a0 - a1 + b0 - b1) * special.digamma(a1 + b1)
    )
    assert post.kl(m.prior) == pytest.approx(exact, rel=1e-4)


def test_linear_regression_reduces_to_the_conjugate_posterior_without_noise():
    rng = np.random.default_rng(2)
    model = LinearRegressionModel(d=3, noise_var_y=0.5, alpha=2.0, x_bound=10.0, y_bound=100.0)
    X, y = rng.normal(size=(60, 3)), rng.normal(size=60)
    ss, n = model.sufficient_statistic((X, y))
    post = model.posterior([SharedStatistic(n, ss, 0.0)])
    prec = 2.0 * np.eye(3) + X.T @ X / 0.5
    assert np.allclose(post.cov, np.linalg.inv(prec))
    assert np.allclose(post.mean, np.linalg.solve(prec, X.T @ y / 0.5))


def test_nearest_neighbour_kl_estimates_the_closed_form():
    rng = np.random.default_rng(3)
    model = LinearRegressionModel(d=2)
    X = rng.normal(size=(50, 2)) / 2
    s = model.share((X, X @ np.array([1.0, -1.0]) + rng.normal(size=50) * 0.5), 2.0, rng)
    post = model.posterior([s])
    exact = post.kl(model.prior)
    est = np.mean(
        [
            kl_nearest_neighbour(post.sample(rng, 4000), model.prior.sample(rng, 4000))
            for _ in range(5)
        ]
    )
    assert est == pytest.approx(exact, rel=0.1)


def _expected_values(model, eps_first, rng, reps=150):
    v_single, v_grand = [], []
    for _ in range(reps):
        theta = rng.normal()
        shared = [
            model.share(rng.normal(theta, 1, n), e, rng)
            for n, e in ((30, eps_first), (30, 1.0), (30, 1.0))
        ]
        vals = coalition_values(model, shared)
        v_single.append(vals[1])
        v_grand.append(vals[7])
    return np.mean(v_single), np.mean(v_grand)


def test_privacy_valuation_trade_off_and_party_monotonicity_in_expectation():
    rng = np.random.default_rng(4)
    model = GaussianMeanModel(data_var=1.0, prior_var=1.0, bound=3.0)
    rows = [_expected_values(model, e, rng) for e in (0.05, 0.5, 5.0)]
    singles, grands = zip(*rows, strict=True)
    assert singles[0] < singles[1] < singles[2]  # V3 for {1}
    assert grands[0] < grands[1] < grands[2]  # V3 for N
    assert all(g > s for s, g in rows)  # V2: adding parties adds value


def test_shapley_exact_and_sampled_and_their_axioms():
    rng = np.random.default_rng(5)
    w = np.array([1.0, 2.0, 2.0, 0.0])
    v = {mask: float(np.sqrt(sum(w[i] for i in range(4) if mask >> i & 1))) for mask in range(16)}
    phi = shapley_values(v, 4)
    assert phi.sum() == pytest.approx(v[15])  # efficiency
    assert phi[1] == pytest.approx(phi[2])  # symmetry
    assert phi[3] == pytest.approx(0.0)  # null player
    assert phi[1] > phi[0]  # desirability
    est = shapley_values(v, 4, permutations=3000, rng=rng)
    assert np.allclose(est, phi, atol=0.02)
    assert est.sum() == pytest.approx(v[15])  # every permutation is efficient


def _collaboration(rng, model=None, sizes=(40, 80, 160), eps=(0.5, 1.0, 2.0)):
    model = model or GaussianMeanModel(data_var=1.0, prior_var=1.0, bound=3.0)
    shared = [model.share(rng.normal(0.7, 1, n), e, rng) for n, e in zip(sizes, eps, strict=True)]
    return model, shared


def test_rho_shapley_rewards_are_feasible_efficient_and_rational():
    rng = np.random.default_rng(6)
    model, shared = _collaboration(rng)
    out = collaborate(model, shared, 0.5)
    vals = out.values
    assert all(v >= 0 for v in vals.values())  # V1
    assert np.all(out.targets >= 0) and np.all(out.targets <= out.v_grand + 1e-12)
    best = int(np.argmax(out.phi))
    assert out.targets[best] == pytest.approx(out.v_grand)  # P2
    assert out.rewards[best].control == 1.0
    for r in out.rewards:
        assert r.attained == pytest.approx(r.target, rel=1e-8, abs=1e-10)
    rho_r = rationality_rho(out.v_single, out.phi, out.v_grand)
    assert rho_r > 0
    for rho in np.linspace(0, rho_r, 5):  # P4 on [0, rho_r]
        assert np.all(rho_shapley_rewards(out.phi, out.v_grand, rho) >= out.v_single - 1e-12)
    if rho_r < 1:  # and beyond it some party is worse off than alone
        assert np.any(rho_shapley_rewards(out.phi, out.v_grand, 1.0) < out.v_single)


def test_equal_parties_get_equal_rewards_and_a_better_party_more():
    model = GaussianMeanModel()
    same = SharedStatistic(50, np.array([30.0]), 4.0)
    better = SharedStatistic(50, np.array([30.0]), 1.0)  # same data, weaker noise
    out = collaborate(model, [same, same, better], 0.8)
    assert out.targets[0] == pytest.approx(out.targets[1])  # symmetry
    assert out.targets[2] > out.targets[0]  # strict desirability
    for rho in (0.0, 0.3, 1.0):
        r = rho_shapley_rewards(out.phi, out.v_grand, rho)
        assert r[0] == pytest.approx(r[1])


def test_tempering_is_monotone_and_closer_to_the_grand_posterior_than_noise():
    rng = np.random.default_rng(7)
    for model in (GaussianMeanModel(), LinearRegressionModel(d=2), BernoulliModel(grid_size=800)):
        noise_ok = model.noise_aware
        if isinstance(model, LinearRegressionModel):
            X = rng.normal(size=(120, 2)) / 2
            data = [(X[:40], X[:40] @ [1, -1]), (X[40:], X[40:] @ [1, -1])]
        elif isinstance(model, BernoulliModel):
            data = [(rng.random(40) < 0.3).astype(int), (rng.random(80) < 0.3).astype(int)]
        else:
            data = [rng.normal(0.5, 1, 40), rng.normal(0.5, 1, 80)]
        shared = [model.share(d, e, rng) for d, e in zip(data, (0.5, 2.0), strict=True)]
        values = [model.value(shared, k) for k in np.linspace(0, 1, 21)]
        assert values[0] == pytest.approx(0.0, abs=1e-9)
        assert np.all(np.diff(values) > 0)
        target = 0.5 * values[-1]
        t = temper_reward(model, shared, target)
        assert t.attained == pytest.approx(target, rel=1e-8)
        if not noise_ok:
            with pytest.raises(MarketSimError, match="noise-aware"):
                noise_reward(model, shared, target, rng)
            continue
        sims = [noise_reward(model, shared, target, rng).similarity for _ in range(8)]
        assert t.similarity > np.mean(sims)


@pytest.mark.parametrize(
    "call, msg",
    [
        (lambda: rdp_noise_variance(1.0, 0.0), "epsilon"),
        (lambda: rdp_noise_variance(1.0, -1.0), "epsilon"),
        (lambda: rdp_noise_variance(1.0, 1.0, order=1.0), "order"),
        (lambda: rho_shapley_rewards([1.0, 2.0], 3.0, 1.5), "rho"),
        (lambda: rho_shapley_rewards([1.0, 2.0], 3.0, -0.1), "rho"),
        (lambda: rho_shapley_rewards([-1.0, 2.0], 3.0, 0.5), "negative"),
        (lambda: collaborate(GaussianMeanModel(), [], 0.5), "at least one party"),
        (lambda: GaussianMeanModel().posterior([SharedStatistic(3, np.zeros(2), 1.0)]), "shape"),
        (
            lambda: LinearRegressionModel(d=2).sufficient_statistic(
                (np.zeros((4, 3)), np.zeros(4))
            ),
            "columns",
        ),
        (lambda: kl_nearest_neighbour(np.zeros((10, 2)), np.zeros((10, 3))), "dimension"),
        (lambda: GaussianMeanModel().posterior([], temper=1.5), "tempering"),
        (
            lambda: temper_reward(GaussianMeanModel(), [SharedStatistic(3, np.ones(1), 1.0)], 99.0),
            "exceeds",
        ),
        (lambda: BernoulliModel().sufficient_statistic([0, 2]), "0/1"),
        (lambda: shapley_values({0: 0.0}, 0), "parties"),
        (
            lambda: collaborate(
                GaussianMeanModel(), [SharedStatistic(3, np.ones(1), 1.0)], 0.5, control="noise"
            ),
            "rng",
        ),
    ],
)
def test_bad_inputs_are_refused_clearly(call, msg):
    with pytest.raises(MarketSimError, match=msg):
        call()


def test_collaboration_model_parties_trade_privacy_cost_against_reward():
    from market_sim.agents.collaboration import CollaborationModel

    kw = dict(
        sizes=(60, 60, 60),
        eps_pref=(1.0, 1.0, 1.0),
        rho=0.8,
        strategy="strategic",
        n_draws=4,
        seed=3,
    )
    cheap = CollaborationModel(privacy_cost=(0.001, 0.001, 0.001), **kw).run()[1]
    dear = CollaborationModel(privacy_cost=(1.0, 1.0, 1.0), **kw).run()[1]
    assert dear.eps.max() < cheap.eps.min()  # a high privacy cost buys privacy
    again = CollaborationModel(privacy_cost=(1.0, 1.0, 1.0), **kw).run()[1]
    assert again.equals(dear)  # same seed, same numbers
    truthful = CollaborationModel(sizes=(60, 60), eps_pref=(0.3, 3.0), seed=1).run()[1]
    assert list(truthful.eps) == [0.3, 3.0]
    assert truthful.reward.iloc[1] >= truthful.reward.iloc[0]  # less noise, more reward


@pytest.mark.parametrize(
    "kw, msg",
    [
        (dict(sizes=(), eps_pref=()), "one entry per party"),
        (dict(sizes=(10, 10), eps_pref=(1.0,)), "one entry per party"),
        (dict(eps_pref=(1.0, 0.0, 1.0)), "epsilon"),
        (dict(rho=1.5), "rho"),
        (dict(strategy="greedy"), "strategy"),
        (dict(control="magic"), "control"),
        (dict(sizes=(10, 0, 10)), "data point"),
    ],
)
def test_collaboration_model_refuses_bad_inputs(kw, msg):
    from market_sim.agents.collaboration import CollaborationModel

    with pytest.raises(MarketSimError, match=msg):
        CollaborationModel(**kw)
