import numpy as np
import pytest
from scipy import stats

from market_sim.errors import MarketSimError
from market_sim.learning import HeteroDPLogisticRegression


def data(m=200, d=3, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((m, d))
    X /= np.linalg.norm(X, axis=1, keepdims=True).max()
    y = (X @ np.arange(1, d + 1) > 0).astype(int)
    return X, y


def test_noise_norm_is_gamma_d_1():
    X, y = data(d=4)
    norms = [
        HeteroDPLogisticRegression(np.full(200, 1.0), random_state=s).fit(X, y).noise_norm_
        for s in range(300)
    ]
    assert stats.kstest(norms, stats.gamma(4).cdf).pvalue > 0.01


def test_privacy_accounting_never_claims_less_than_prop_ii2():
    X, y = data()
    eps = np.linspace(0.1, 2.0, 200)
    clf = HeteroDPLogisticRegression(eps, reg_lambda=0.05, random_state=0).fit(X, y)
    a = eps / eps.sum()
    np.testing.assert_allclose(clf.eps_, eps)  # a_i eta = eps_i exactly
    np.testing.assert_allclose(clf.privacy_guarantees_, eps + 2 * np.log1p(a / 0.05))
    assert np.all(clf.privacy_guarantees_ >= eps)
    zero = HeteroDPLogisticRegression(np.r_[0.0, np.ones(199)], random_state=0).fit(X, y)
    assert zero.privacy_guarantees_[0] == 0.0  # not in the objective at all


def test_learns_with_large_budget_and_labels_in_either_coding():
    X, y = data(m=500)
    clf = HeteroDPLogisticRegression(np.full(500, 50.0), reg_lambda=1e-3, random_state=1).fit(X, y)
    assert clf.score(X, y) > 0.9
    pm = HeteroDPLogisticRegression(np.full(500, 50.0), reg_lambda=1e-3, random_state=1)
    pm.fit(X, 2 * y - 1)
    np.testing.assert_allclose(pm.coef_, clf.coef_)
    assert set(pm.predict(X)) <= {-1, 1}
    assert clf.predict_proba(X).shape == (500, 2)


def test_same_seed_same_model_and_a_eta_form():
    X, y = data()
    a = np.full(200, 1 / 200)
    m1 = HeteroDPLogisticRegression(a=a, eta=100.0, random_state=7).fit(X, y)
    m2 = HeteroDPLogisticRegression(np.full(200, 0.5), random_state=7).fit(X, y)
    np.testing.assert_array_equal(m1.coef_, m2.coef_)


def test_data_norm_and_clipping():
    X, y = data()
    big = 3 * X
    with pytest.raises(MarketSimError, match="data_norm"):
        HeteroDPLogisticRegression(np.ones(200)).fit(big, y)
    scaled = HeteroDPLogisticRegression(np.ones(200), data_norm=3.0, random_state=0).fit(big, y)
    unit = HeteroDPLogisticRegression(np.ones(200), random_state=0).fit(X, y)
    np.testing.assert_allclose(scaled.decision_function(big), unit.decision_function(X))
    clipped = HeteroDPLogisticRegression(np.ones(200), clip=True, random_state=0).fit(big, y)
    assert np.isfinite(clipped.coef_).all()


@pytest.mark.parametrize(
    "X, y, kw, msg",
    [
        (np.array([[0.1, np.nan]] * 4), [0, 1, 0, 1], {}, "NaN"),
        (np.full((4, 2), 0.1), [0, 1, 2, 1], {}, "Only binary"),
        (np.full((4, 2), 0.1), [0, 1, 0, 1], {"epsilons": [1, 1, 1]}, "epsilons must be 4"),
        (
            np.full((4, 2), 0.1),
            [0, 1, 0, 1],
            {"epsilons": None, "a": [0.5, 0.5, 0, 0]},
            "give epsilons",
        ),
    ],
)
def test_bad_data_is_refused(X, y, kw, msg):
    args = {"epsilons": np.ones(4)}
    args.update(kw)
    with pytest.raises((MarketSimError, ValueError), match=msg):
        HeteroDPLogisticRegression(**args).fit(X, y)


def test_passes_scikit_learn_check_estimator():
    from sklearn.utils.estimator_checks import check_estimator

    # clip=True: the checks feed rows of any norm; without it they are refused by design
    results = check_estimator(HeteroDPLogisticRegression(clip=True, random_state=0), on_fail=None)
    failed = [
        (r["check_name"], str(r["exception"])[:200]) for r in results if r["status"] == "failed"
    ]
    assert failed == []


def test_log_base_of_the_surrogate_and_of_privacy():
    """The code's loss is ln(1 + e^-z) (Prop. II.2 needs its slope bound 1); the bound
    1[z <= 0] <= loss of Thm II.4 holds for log2 = ln / ln 2 but fails for ln on
    (-ln(e - 1), 0], so with ln the surrogate bound carries a factor 1/ln 2."""
    from market_sim.mechanisms.data_dependent import _losses

    z = np.linspace(-5, 5, 100_001)
    ln_loss = _losses(z[:, None], np.ones(1))  # rows SX = z, w = 1: margins z
    np.testing.assert_allclose(ln_loss, np.log1p(np.exp(-z)), rtol=1e-12)
    slope = np.abs(np.gradient(ln_loss, z))
    assert slope.max() <= 1 and slope.max() > 0.99  # sensitivity 1: eps_i = a_i eta
    err = (z <= 0).astype(float)
    assert np.all(err <= ln_loss / np.log(2) + 1e-12)  # base 2: Thm II.4's first step
    fails = z[err > ln_loss]
    assert fails.min() == pytest.approx(-np.log(np.e - 1), abs=1e-4) and fails.max() == 0.0
    slope2 = np.abs(np.gradient(ln_loss / np.log(2), z))  # base 2: sensitivity above 1
    assert 1.4 < slope2.max() <= 1 / np.log(2)
