"""Every consumer of an outcome reads eps_i = +inf as its limit (#47; docs/mathematics.md,
"Reports of virtual cost 0").

Truth.  The offline outcome at a report of virtual cost 0 that takes all the weight is
the limit, as M -> inf, of the outcomes with eps_i = M on those sellers: a = eps / sum eps
tends to the uniform vector on them, eta = sum eps to +inf, the noise 2 b / eta of
Algorithm 1 (003) to 0, sigma / eta to 0, and c eps_i to 0 at c = 0 and to +inf at
c > 0.  Each test compares a consumer at eps = +inf with the same consumer at a large
finite M (or with the closed form of that limit), and checks that no NaN appears.
"""

from __future__ import annotations

import numpy as np
import pytest

from market_sim.agents.model import MarketModel
from market_sim.agents.strategies import Strategy
from market_sim.learning.hetero_dp import HeteroDPLogisticRegression, weighted_logistic_fit
from market_sim.mechanisms.base import Outcome
from market_sim.mechanisms.offline import buyer_loss, proxy_loss_of_eps
from market_sim.privacy.ledger import PrivacyLedger, rr_rdp
from market_sim.privacy.limit import privacy_cost, weights

INF = np.inf
EPS = np.array([INF, 0.0, INF, 0.0])
BIG = np.where(np.isinf(EPS), 1e12, EPS)  # the same outcome at a large finite M


def test_weights_and_privacy_cost_are_the_limits():
    a, eta = weights(EPS)
    a_big, eta_big = weights(BIG)
    assert eta == INF and eta_big == 2e12
    np.testing.assert_allclose(a, a_big, rtol=1e-15)
    np.testing.assert_array_equal(a, [0.5, 0, 0.5, 0])
    assert weights([0.0, 0.0]) == (pytest.approx([0.0, 0.0]), 0.0)
    c = np.array([0.0, 0.3, 0.0, 0.3])
    np.testing.assert_array_equal(privacy_cost(c, [INF, INF, 2.0, 0.0]), [0, INF, 0, 0])
    with np.errstate(invalid="ignore"):
        assert np.isnan(np.float64(0.0) * INF)  # what the IEEE product would have given


def test_outcome_utilities_have_no_nan():
    out = Outcome(eps=EPS, payments=np.array([0.2, 0.0, 0.2, 0.0]))
    u = out.utilities([0.0, 0.4, 0.3, 0.5])
    np.testing.assert_array_equal(u, [0.2, 0.0, -INF, 0.0])


def test_buyer_and_proxy_losses_are_the_limits():
    kw = dict(mu=1.5, sigma=2.0, gamma=0.7)
    pay = np.array([0.2, 0.0, 0.2, 0.0])
    psi = np.array([0.0, 0.4, 0.0, 0.9])
    # closed form of the limit: mu ||a|| with a uniform on two sellers, sigma / eta -> 0
    limit = 1.5 / np.sqrt(2)
    assert proxy_loss_of_eps(EPS, psi, **kw) == pytest.approx(limit, rel=1e-15)
    assert proxy_loss_of_eps(BIG, psi, **kw) == pytest.approx(limit, rel=1e-11)
    assert buyer_loss(EPS, pay, **kw) == pytest.approx(limit + 0.7 * 0.4, rel=1e-15)
    # bought at a positive virtual cost with eta = +inf: an infinite loss, not NaN
    assert proxy_loss_of_eps(EPS, psi[::-1], **kw) == INF


def test_algorithm_1_at_eps_inf_is_the_noiseless_fit_on_those_rows():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(6, 3))
    X /= 2 * np.linalg.norm(X, axis=1).max()
    y = np.array([0, 1, 0, 1, 1, 0])
    eps = np.array([INF, INF, INF, INF, 0.0, 0.0])
    clf = HeteroDPLogisticRegression(eps, reg_lambda=0.1, random_state=1).fit(X, y)
    a = np.isinf(eps) / 4.0
    s = np.where(y == 1, 1.0, -1.0)
    exact = weighted_logistic_fit(s[:, None] * X, a, 0.1)  # no noise term (data_norm = 1)
    np.testing.assert_allclose(clf.coef_, exact, atol=1e-6)
    assert clf.eta_ == INF and np.array_equal(np.isinf(clf.privacy_guarantees_), np.isinf(eps))
    assert not np.isnan(clf.privacy_guarantees_).any()
    big = HeteroDPLogisticRegression(np.where(np.isinf(eps), 1e9, 0.0), reg_lambda=0.1,
                                     random_state=1).fit(X, y)  # fmt: skip
    np.testing.assert_allclose(clf.coef_, big.coef_, atol=1e-6)


@pytest.mark.parametrize("accountant, budget", [("basic", 5.0), ("rdp", (5.0, 1e-5)),
                                                ("pld", (5.0, 1e-5))])  # fmt: skip
def test_ledger_charges_an_infinite_event_as_infinite(accountant, budget):
    led = PrivacyLedger(3, budget, accountant)
    rise = led.charge([0, 1], [INF, 0.5])
    assert rise[0] == INF and 0 < rise[1] <= 0.5 + 1e-9
    assert led.spent[0] == INF and np.isfinite(led.spent[1:]).all()
    assert led.charge([0], [INF])[0] == INF  # again: still infinite, not inf - inf
    assert np.all(rr_rdp([INF]) == INF)


class _Floor(Strategy):
    """Report the bottom of the support (virtual cost 0 on U[0, 1])."""

    def report_all(self, sellers, model):
        return np.zeros(sellers.cost.size)


def test_a_simulated_round_with_reports_of_zero_has_no_nan():
    m = MarketModel(n_sellers=8, strategy=_Floor, strategic_fraction=0.25, seed=1, rounds=1)
    m.step()
    floor = m.report == 0
    assert floor.sum() == 2 and np.all(np.isposinf(m.eps[floor])) and np.all(m.eps[~floor] == 0)
    # a seller of positive cost who gives its data without noise has utility -inf
    assert np.all(m.utility[floor] == -INF) and np.all(m.utility[~floor] == 0)
    row = m.datacollector.get_model_vars_dataframe().iloc[-1]
    assert row["buyer_loss"] == pytest.approx(1 / np.sqrt(2) + row["total_payment"], rel=1e-12)
    assert not np.isnan(row[["buyer_loss", "proxy_loss", "total_payment"]].to_numpy(float)).any()


def test_deviation_utilities_at_a_report_of_zero():
    """Seller 0 of cost 0 reporting 0 (eps = +inf): utility = its payment, finite, and no
    report beats the truth; a seller of cost 0.3 reporting 0 has utility -inf."""
    from market_sim.mechanisms.base import as_mechanism

    mech = as_mechanism("offline", dist="uniform:0:1", mu=1.0, sigma=1.0, gamma=1.0)
    reports = np.array([0.0, 0.3, 0.7, 0.2])
    cand = np.array([[0.0, 0.1, 0.5], [0.0, 0.3, 0.5]])
    u = mech.deviation_utilities([0, 1], cand, [0.0, 0.3], reports)
    assert np.isfinite(u[0]).all() and u[0, 0] >= u[0, 1:].max() - 1e-12
    assert u[1, 0] == -INF and np.isfinite(u[1, 1:]).all()
