"""Symmetric Bayes-Nash equilibria and their epsilon."""

import dataclasses
import json
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import pytest
from shared_mechanisms import BatchedFirstPrice

from market_sim.analysis.figures import figure_problems
from market_sim.cli import main
from market_sim.errors import MarketSimError
from market_sim.games.equilibrium import (
    STOPPING_RULES,
    BNEResult,
    bne,
    bne_epsilon,
    figure,
    symmetric_bne,
)
from market_sim.games.equilibrium_game import (
    Interim,
    Oracle,
    Sample,
    as_classes,
    best_response,
    reports_of,
)
from market_sim.mechanisms.base import Mechanism, as_mechanism
from market_sim.mechanisms.first_price import (
    FirstPrice,
    asymmetric_first_price_bid,
    first_price_bid,
)

FIRST_PRICE = f"{Path(__file__).resolve().parent.parent / 'examples' / 'first_price.py'}"
FIRST_PRICE += ":FirstPriceProcurement"
SMALL = dict(samples=128, grid=9, eval_grid=9)
CHECK = dict(samples=128, eval_grid=9)  # bne_epsilon's options
CHECK_FEW = dict(CHECK, samples=32)
FAST = dict(SMALL, max_iter=10)
TOL_K_UNIT = 0.01  # L-infinity on the costs winning >= 1% of the time (issue #38's bar)
TOL_ASYM = 0.02


def closed_form(c, m):
    """Single-unit first-price procurement, U[0, 1] costs, m sellers:
    b(c) = c + int_c^1 (1 - t)^(m-1) dt / (1 - c)^(m-1) = c + (1 - c) / m."""
    return c + (1 - c) / m


def test_closed_form_is_the_first_order_condition():
    # u(x; c) = (b(x) - c)(1 - x)^(m-1) for a seller of cost c bidding as cost x:
    # at the closed form it is maximised at x = c (checked on a fine grid)
    for m in (2, 3, 5):
        x = np.linspace(0, 1, 20001)
        for c in (0.0, 0.2, 0.5, 0.8):
            u = (closed_form(x, m) - c) * (1 - x) ** (m - 1)
            assert abs(x[np.argmax(u)] - c) <= 1e-4


def test_example_deviations_match_the_generic_default():
    mech = as_mechanism(FIRST_PRICE)
    rng = np.random.default_rng(3)
    for n in (1, 2, 4):
        for _ in range(20):
            r = np.round(rng.uniform(0, 1, n), 1)  # ties happen
            z = np.round(rng.uniform(0, 1, (n, 5)), 1)
            fast = mech.deviations(np.arange(n), z, r)
            slow = Mechanism.deviations(mech, np.arange(n), z, r)
            np.testing.assert_allclose(fast.eps, slow.eps)
            np.testing.assert_allclose(fast.payments, slow.payments)


@pytest.mark.parametrize("m", [2, 4])
def test_first_price_matches_the_closed_form(m):
    """The sampled (``deviations``) path on the closed form, 4096 draws: L∞ and L2 within
    0.01 on the costs that win >= 1%, verified epsilon within 1% of the utility.  At 4
    sellers the last iterate failed (verified 1.12%, exact 1.47%; issue #48, a strict
    xfail): the tail average of the iterates (``_tail_average``) is returned."""
    tol = 0.01
    # the pure method's sampled path (auto would go on to the box's rank interim)
    r = symmetric_bne(
        FIRST_PRICE, "uniform:0:1", m, np.random.default_rng(0), samples=4096,
        reference=lambda c: closed_form(c, m), method="pure",
    )  # fmt: skip
    d = r.check.distances
    assert d["linf_active"] <= tol and d["l2_active"] <= tol
    # the distances are those of the bid function at the evaluation costs
    c = r.check.eval_costs[r.check.win_rates >= 0.01]
    assert np.max(np.abs(r.bid(c) - closed_form(c, m))) == pytest.approx(d["linf_active"])
    # epsilon: at most 1% of the utility at stake (issue #38's bar), far below truth's
    assert r.epsilon_relative <= 0.01
    # (truth's gain is of the order of its markup: a small check finds it)
    truth = bne_epsilon(FIRST_PRICE, "uniform:0:1", m, "truth", np.random.default_rng(1), **CHECK)
    assert truth.epsilon_ci[0] > 10 * r.epsilon
    # bnelearn's metrics: 0 <= L = 1 - u / (u + l) < 1, and l <= epsilon
    ch = r.check
    assert ch.loss <= ch.epsilon + 1e-12
    assert ch.relative_loss == pytest.approx(1 - ch.utility / (ch.utility + ch.loss))
    # ex-ante utility of a seller at the BNE: E[(b(c) - c)(1 - c)^(m-1)] = 1 / (m (m + 1))
    assert ch.utility == pytest.approx(1 / (m * (m + 1)), rel=0.1)


class PostedToLowest:
    """A posted price 0.5 that only the lowest report, if at most 0.5, gets (one unit)."""

    def outcome(self, reports, rng=None):
        r = np.asarray(reports, dtype=float)
        eps = np.zeros(r.size)
        i = int(np.argmin(r))
        eps[i] = 1.0 if r[i] <= 0.5 else 0.0
        return eps, 0.5 * eps


def posted_gain(c):
    """Exact best gain over truth of a seller of cost c (4 sellers, U[0, 1]) under
    PostedToLowest: truthful, it sells iff c <= 0.5 and the 3 others are above c,
    utility (0.5 - c)(1 - c)^3; reporting ~0 it always sells, utility 0.5 - c (for
    c < 0.5; above 0.5 selling loses).  Gain (0.5 - c)(1 - (1 - c)^3); its maximum,
    where (1 - (1 - c)^3) = 3 (0.5 - c)(1 - c)^2, is at c = 0.2171: 0.1471."""
    c = np.asarray(c, dtype=float)
    return np.where(c < 0.5, (0.5 - c) * (1 - (1 - c) ** 3), 0.0)


def test_verification_finds_the_under_reporting_gain():
    x = np.linspace(0, 1, 100001)
    assert posted_gain(x).max() == pytest.approx(0.1471, abs=1e-4)
    e = bne_epsilon(PostedToLowest(), "uniform:0:1", 4, "truth", np.random.default_rng(0))
    i = int(np.argmax(e.gains))
    c = e.eval_costs[i]
    assert e.best_reports[i] < c  # an under-report
    lo, hi = e.epsilon_ci
    # the exact gain at that cost, in the CI, which is a point: the box passes the rank
    # probe, and its rank interim as a control variate leaves no noise (ControlledOracle)
    assert lo - 1e-12 <= float(posted_gain(c)) <= hi + 1e-12
    assert hi - lo <= 1e-12
    assert lo > 0.12  # truth is not certified
    # and at every cost the measured gain tracks the exact one
    np.testing.assert_allclose(e.gains, posted_gain(e.eval_costs), atol=0.02)


def test_the_three_evaluation_paths_agree():
    classes, _ = as_classes("uniform:0:1", 4)
    sample = Sample(classes, 64, 1, np.random.default_rng(0))
    R = reports_of(sample, classes, [lambda c: closed_form(c, 4)])
    z = np.linspace(0.1, 0.9, 7)
    loop = Oracle(as_mechanism(PostedToLowest()))
    assert loop.path == "outcome"
    fast = Oracle(as_mechanism(FIRST_PRICE))
    batched = Oracle(as_mechanism(BatchedFirstPrice()))
    slow = Oracle(as_mechanism(type("FP", (), {"outcome": BatchedFirstPrice.outcome})()))
    assert (fast.path, batched.path, slow.path) == ("deviations", "batched", "outcome")
    E1, T1 = fast.eps_pay(sample, R, 0, z)
    for other in (batched, slow):
        E2, T2 = other.eps_pay(sample, R, 0, z)
        np.testing.assert_allclose(E1, E2)
        np.testing.assert_allclose(T1, T2)


def test_evaluated_refinement_is_not_fooled_by_a_kink():
    """A rival always reports 0.5 (first price, 2 sellers): a deviator of cost c gets
    (z - c) for z < 0.5, half that at 0.5 and nothing above, so the supremum of its
    utility is 0.5 - c, approached from below; every report above 0.5 gets 0.  The
    parabola through the best grid report and its neighbours (one above the kink) has
    its vertex far from the kink (by the parabola's shape, not by noise: every market
    is the same); the evaluated refinement keeps only evaluated reports and halves
    the bracket (about 0.056 here) three times: below 0.5, within 0.01 of it."""
    classes, _ = as_classes("uniform:0:1", 2)
    sample = Sample(classes, 16, 1, np.random.default_rng(0))
    R = np.full(sample.costs.shape, 0.5)
    oracle = Oracle(as_mechanism(BatchedFirstPrice()))
    costs = np.array([0.1, 0.2, 0.3])
    w = np.full(3, 1 / 3)
    args = (oracle, sample, R, 0, costs, costs.copy(), (1e-6, 1.0), 1.0, 10, w)
    vertex = best_response(*args, refine=0).bids
    refined = best_response(*args, refine=3).bids
    assert np.all(vertex < 0.46)  # the case fools the unevaluated vertex
    assert np.all(refined < 0.5) and np.all(refined > 0.49)


def test_automatic_settings_follow_the_path():
    black_box = type("FP", (), {"outcome": BatchedFirstPrice.outcome})()
    r = symmetric_bne(black_box, "uniform:0:1", 2, np.random.default_rng(0), **FAST)
    assert (r.options["path"], r.options["bid_grid"], r.options["br_refine"]) == (
        "outcome", 25, 0,
    )  # fmt: skip
    # fresh samples there too since its opponents are nets (issue #48); 4 x samples
    # fresh markets, searched and measured, on a coarser grid of costs and reports
    assert r.options["resample"] is True
    assert r.options["eval_samples"] == 4 * r.options["samples"]
    assert r.options["check_grid"] == 17  # (eval_grid is given: 12 when not)
    r = symmetric_bne(BatchedFirstPrice(), "uniform:0:1", 2, np.random.default_rng(0), **FAST)
    assert (r.options["bid_grid"], r.options["br_refine"], r.options["resample"]) == (49, 1, True)
    assert (r.options["damping"], r.options["max_iter"]) == (0.1, 10)  # max_iter given
    assert r.options["eval_samples"] == 4 * r.options["samples"]
    assert r.options["check_grid"] == 129
    r = symmetric_bne(
        black_box, "uniform:0:1", 2, np.random.default_rng(0), br_refine=2, resample=False,
        eval_samples=64, **FAST,
    )  # fmt: skip
    assert (r.options["br_refine"], r.options["resample"]) == (2, False)  # given: kept
    assert r.options["eval_samples"] == 64


def test_a_crowded_market_gets_100_iterations_and_a_small_one_40():
    """``CROWDED`` (16) sellers or more: 100 iterations by default (the damped iteration
    limits there, not the sample's noise; the constant's comment has the measures)."""
    from market_sim.games.equilibrium_setup import CROWDED, _Options

    opt = _Options().checked()
    got = {m: opt.for_path("deviations", 1, m).max_iter for m in (2, CROWDED - 1, CROWDED)}
    assert got == {2: 40, CROWDED - 1: 40, CROWDED: 100}
    assert opt.for_path("outcome", 1, 100).max_iter == 26  # its own schedule
    assert opt.for_path("interim", 1, 100).max_iter == 1000
    assert dataclasses.replace(opt, max_iter=7).for_path("deviations", 1, 100).max_iter == 7
    # bne passes the largest class's count (an IC mechanism: it stops at iteration 1)
    for m, want in ((CROWDED - 1, 40), (CROWDED, 100)):
        r = symmetric_bne("posted-price", "uniform:0:1", m, np.random.default_rng(0), samples=16,
                          grid=5, eval_grid=5, method="pure")  # fmt: skip
        assert (r.options["max_iter"], r.iterations) == (want, 1)


def test_pay_as_bid_with_100_sellers_is_certified_by_default():
    """The docs' headline game (docs/equilibrium.md, "Pay-as-bid with 100 sellers"): with
    40 iterations it ended at max_iter, verified epsilon / u 2.0% (an independent measure,
    ``bne_reference.deviation_gains``: 2.1%); with the crowded market's 100 a rule stops it
    at 56, verified 0.34% (independently 0.37% [0.24%, 0.49%])."""
    r = symmetric_bne("pay-as-bid", "uniform:1:5", 100, np.random.default_rng(0), method="pure")
    assert r.options["max_iter"] == 100 and r.stopped_by in ("gain", "residual")
    assert r.converged and r.epsilon_relative <= 0.01


@pytest.mark.parametrize(
    "tol, gain_tol, rule", [(1e-9, 1e9, "gain"), (1e9, 0.0, "residual"), (1e-9, 0.0, None)]
)
def test_the_result_says_which_rule_stopped_the_iterations(tol, gain_tol, rule):
    # each rule made to fire alone (the other impossible); None: neither, max_iter ends it.
    # A rule may fire only on the full sample, from iteration (max_iter + 11) / 2 on: 12 here
    r = symmetric_bne(
        BatchedFirstPrice(), "uniform:0:1", 3, np.random.default_rng(0), samples=64, grid=9,
        eval_grid=5, max_iter=12, tol=tol, gain_tol=gain_tol,
    )  # fmt: skip
    assert r.iterations == 12 and r.residual > 0
    certified = all(c.check.epsilon_relative <= r.options["verify_tol"] for c in r.classes)
    assert r.stopped_by == (rule or "max_iter")
    assert r.converged == (rule is not None and certified)  # issue #48: converged means it
    assert r.summary()["stopped_by"] == r.stopped_by
    assert f"stopped by            {r.stopped_by}" in r.format()


def test_options_record_every_keyword_with_its_used_value():
    import inspect

    from market_sim.games.equilibrium import CONTEXT_KEYS, OPTIONS

    given = dict(mu=2.0, sigma=0.5, gamma=3.0, max_iter=2, samples=32, grid=5, eval_grid=3)
    r = symmetric_bne("pay-as-bid", "uniform:1:5", 3, np.random.default_rng(0), **given)
    keywords = [
        k for k, p in inspect.signature(bne).parameters.items()
        if p.kind is p.KEYWORD_ONLY
    ]  # fmt: skip
    for key in [*keywords, *OPTIONS, *CONTEXT_KEYS]:
        assert key in r.options, key
        assert key in r.summary(), key
    for key, value in given.items():
        assert r.options[key] == value, key
    assert r.options["privacy"] is None  # pay-as-bid takes no privacy
    assert r.options["n_sellers"] == 3 and r.options["init"] == "truth"
    assert r.options["bid_max"] == 5.0 and r.options["progress"] is False
    # the automatic settings are recorded as resolved, not as None
    assert None not in [r.options[k] for k in ("bid_grid", "br_refine", "resample", "damping")]


@pytest.mark.parametrize("n, k, lo, hi", [(4, 2, 0.0, 1.0), (3, 2, 1.0, 3.0)])
def test_k_unit_closed_form_is_the_first_order_condition(n, k, lo, hi):
    from scipy import stats

    x = np.linspace(lo, hi, 2001)
    b = first_price_bid(x, n, k, lo, hi)
    S = stats.beta(k, n - k).sf((x - lo) / (hi - lo))
    for c in np.linspace(lo, hi, 6)[:-1]:
        assert abs(x[np.argmax((b - c) * S)] - c) <= 2 * (hi - lo) / 2000
    if k == 1:  # the single-unit case: c + (hi - c) / n
        np.testing.assert_allclose(b, x + (hi - x) / n, atol=1e-6)


@pytest.mark.parametrize("n, k, lo, hi", [(4, 2, 0.0, 1.0), (3, 2, 1.0, 3.0)])
def test_k_unit_solver_matches_the_closed_form(n, k, lo, hi):
    r = symmetric_bne(
        FirstPrice(k), f"uniform:{lo:g}:{hi:g}", n, np.random.default_rng(0),
        samples=2048, reference=lambda c: first_price_bid(c, n, k, lo, hi), exact=False,
    )  # fmt: skip
    assert r.options["path"] == "batched"  # exact=False: sampled opponents
    assert r.check.distances["linf_active"] <= TOL_K_UNIT
    assert r.epsilon_relative <= 0.05
    # bnelearn's relative loss and its CI (the CI holds the point estimate)
    ch = r.check
    assert ch.relative_loss <= 0.01
    assert ch.relative_loss_ci[0] <= ch.relative_loss <= ch.relative_loss_ci[1]


@pytest.mark.parametrize("lows, high, b_low", [((1.0, 0.0), 2.0, 4 / 3), ((1.0, 0.0), 3.0, 1.8)])
def test_asymmetric_closed_form_is_a_best_response(lows, high, b_low):
    """Each class's bid maximises its utility against the other's, on fine grids; both
    classes' lowest report is high - beta_top, beta_top the auction's common top bid,
    from phi_1(beta) = a_1: 2 beta = a_1 (1 + k_1 beta^2) (a = (1, 2): 2/3; (2, 3): 6/5)."""
    z = np.linspace(b_low, high, 4001)
    laws = [(lows[0], high), (lows[1], high)]
    for g, (lo, hi) in enumerate(laws):
        olo, ohi = laws[1 - g]
        oc = np.linspace(olo, ohi, 20001)
        ob = asymmetric_first_price_bid(oc, 1 - g, lows, high)
        win = 1 - np.searchsorted(ob, z) / oc.size  # P(the other's report > z)
        for c in np.linspace(lo, hi, 5)[:-1]:
            best = z[np.argmax((z - c) * win)]
            assert abs(best - asymmetric_first_price_bid(c, g, lows, high)) <= 0.003 * high
    assert asymmetric_first_price_bid(lows[0], 0, lows, high) == pytest.approx(b_low)
    assert asymmetric_first_price_bid(lows[1], 1, lows, high) == pytest.approx(b_low)


ASYMMETRIC = [
    lambda c: asymmetric_first_price_bid(c, 0),
    lambda c: asymmetric_first_price_bid(c, 1),
]


def test_two_classes_get_their_own_bid_functions():
    r = bne(
        BatchedFirstPrice(), [("uniform:1:2", 1), ("uniform:0:2", 1)], np.random.default_rng(0),
        samples=1024, reference=ASYMMETRIC, method="pure",
    )  # fmt: skip
    # several classes: the automatic settings (docs/equilibrium.md)
    assert (r.options["damping"], r.options["max_iter"], r.options["br_refine"]) == (0.05, 100, 3)
    assert len(r.classes) == 2 and len(r.epsilon_by_group) == 2
    assert r.epsilon == max(r.epsilon_by_group)
    for g in (0, 1):
        assert r.classes[g].check.distances["linf_active"] <= TOL_ASYM
    c = np.array([1.2, 1.5])
    assert not np.allclose(r.bid(c, group=0), r.bid(c, group=1))  # unlike sellers
    with pytest.raises(MarketSimError, match="group must be"):
        r.bid(c, group=2)


def test_the_interim_report_law_counts_ties_half():
    """Costs U[0, 1], bids 0.2 + 0.8 c up to c = 0.5, then 0.6 (an atom of mass 0.5 at
    0.6): P(report < 0.4) = P(c < 0.25) = 0.25; at 0.6, 0.5 below and 0.5 tied: 0.75;
    below the lowest bid 0, above the highest 1."""
    classes, _ = as_classes("uniform:0:1", 2)
    laws = Interim(classes, [np.array([0.0, 0.5, 1.0])], [np.array([0.2, 0.6, 0.6])])
    z = np.array([0.1, 0.2, 0.4, 0.6, 0.7])
    np.testing.assert_allclose(laws.below(z)[0], [0.0, 0.0, 0.25, 0.75, 1.0])


def test_first_price_interim_is_exact():
    """k = 2 units, 3 opponents each below z with probability p: the deviator sells iff
    at most one is below, P = (1 - p)^3 + 3 p (1 - p)^2, and is paid z.  Through the
    interim path (the report laws of 3 opponents bidding b(c) = 0.25 + 0.75 c, U[0, 1])
    with k = 1: P(all 3 above z) = (1 - b^-1(z))^3, b^-1(z) = (z - 0.25) / 0.75."""
    p = np.array([0.0, 0.3, 0.5, 1.0])
    z = np.array([0.2, 0.4, 0.6, 0.8])
    E, T = FirstPrice(2).interim(z, p[None, :], [3])
    np.testing.assert_allclose(E, (1 - p) ** 3 + 3 * p * (1 - p) ** 2)
    np.testing.assert_allclose(T, z * E)
    classes, _ = as_classes("uniform:0:1", 4)
    c = np.linspace(0, 1, 9)
    oracle = Oracle(FirstPrice(1), exact=True)
    assert oracle.path == "interim" and Oracle(FirstPrice(1)).path == "batched"
    E, T = oracle.eps_pay(Interim(classes, [c], [closed_form(c, 4)]), None, 0, z)
    np.testing.assert_allclose(E[0], (1 - np.clip((z - 0.25) / 0.75, 0, 1)) ** 3)


def test_asymmetric_interim_solve_meets_the_bar():
    """The issue's bar on the two-class closed form: every class within 0.01 of it
    (L-infinity on the costs that win >= 1% of the time) and its verified epsilon (on
    sampled opponents the solve never saw) within 1% of its utility; the solve on exact
    utilities returns its best iterate, whose exact epsilon it reports."""
    r = bne(
        FirstPrice(1), [("uniform:1:2", 1), ("uniform:0:2", 1)], np.random.default_rng(0),
        samples=2048, reference=ASYMMETRIC, method="pure",
    )  # fmt: skip
    assert r.options["path"] == "interim" and r.stopped_by in ("epsilon", "stalled", "max_iter")
    assert r.options["training_epsilon"] <= 0.01
    for cl in r.classes:
        assert cl.check.distances["linf_active"] <= 0.01
        assert cl.check.epsilon_relative <= 0.01
    # both classes' lowest bids near the common 4/3
    assert abs(r.bid([1.0], group=0)[0] - 4 / 3) <= 0.005
    assert abs(r.bid([0.0], group=1)[0] - 4 / 3) <= 0.005


def test_identical_classes_give_the_symmetric_closed_form():
    """Two classes with the same law (1 and 2 sellers of U[0, 2]) are one symmetric
    market of 3: both bid functions must be b(c) = c + (2 - c) / 3 (the interim path
    counts each class's opponents: the deviator's own class one fewer)."""
    sym = lambda c: c + (2 - c) / 3  # noqa: E731
    r = bne(
        FirstPrice(1), [("uniform:0:2", 1), ("uniform:0:2", 2)], np.random.default_rng(0),
        samples=512, reference=[sym, sym],
    )  # fmt: skip
    assert r.options["path"] == "interim"
    for cl in r.classes:
        assert cl.check.distances["linf_active"] <= 0.01


def test_a_population_with_data():
    """The data-dependent mechanism is IC for any data when its Myerson payments are
    integrated accurately (an allocation monotone in each seller's own cost;
    docs/data-dependent.md; with the old 9-node trapezoid rule it is not near cost 0:
    docs/equilibrium.md).  On 3 sellers with synthetic data (d = 2), every sampled
    market carries its own rows (the mechanism refuses to run without them), and with
    33 nodes the truth is kept at the first iteration with epsilon 0.  Pay-as-bid on
    the same population is not IC: its cheapest sellers' bids move above their costs."""
    pop = "3*uniform:0:1;data=synthetic;d=2"
    tiny = dict(samples=4, eval_samples=4, grid=3, bid_grid=3, eval_grid=2, check_grid=3)
    tiny.update(refine=0, br_refine=0, max_iter=2)
    classes, _ = as_classes(pop)
    sample = Sample(classes, 4, 1, np.random.default_rng(0))
    assert len(sample.data) == 4 and all(X.shape == (3, 2) for X, _ in sample.data)
    r = bne("data-dependent:n_nodes=33", pop, np.random.default_rng(0), **tiny)
    assert (r.iterations, r.stopped_by) == (1, "residual")
    np.testing.assert_allclose(r.bids, r.costs, atol=1e-5)
    assert r.epsilon <= 1e-9
    p = bne("pay-as-bid", pop, np.random.default_rng(0), **tiny)
    assert p.bids[0] > p.costs[0] + 0.05


def test_stopping_rules_say_which_fired():
    # a certificate that is met at the first verification: "verified" (converged)
    opts = dict(SMALL, max_iter=30, verify_every=5)
    r = symmetric_bne(FIRST_PRICE, "uniform:0:1", 2, np.random.default_rng(0), **opts,
                      verify_tol=1e9, gain_tol=1e-12, tol=1e-12)  # fmt: skip
    assert (r.stopped_by, r.converged, r.iterations) == ("verified", True, 25)
    # one that is never met: max_iter, not converged
    r = symmetric_bne(FIRST_PRICE, "uniform:0:1", 2, np.random.default_rng(0), **opts,
                      verify_tol=1e-12, gain_tol=1e-12, tol=1e-12)  # fmt: skip
    assert (r.stopped_by, r.converged, r.iterations) == ("max_iter", False, 30)
    assert r.summary()["stopped_by"] == "max_iter"
    assert "averaged are returned" in r.format()  # the sampled path's tail average


def test_tail_average_interpolates_each_iterate():
    """Two iterates on different grids, b1(c) = c on {0, 1} and b2 = min(2c, 1) on
    {0, 0.5, 1}; at the final costs {0, 0.25, 0.5, 1}: (0 + 0)/2, (0.25 + 0.5)/2,
    (0.5 + 1)/2, (1 + 1)/2."""
    from market_sim.games.equilibrium_pure import _tail_average

    tail = [
        ([np.array([0.0, 1.0])], [np.array([0.0, 1.0])]),
        ([np.array([0.0, 0.5, 1.0])], [np.array([0.0, 1.0, 1.0])]),
    ]
    out = _tail_average([np.array([0.0, 0.25, 0.5, 1.0])], tail)
    np.testing.assert_allclose(out[0], [0.0, 0.375, 0.75, 1.0])


@pytest.mark.parametrize("mech", ["posted-price", "offline"])
def test_ic_mechanisms_give_truth_with_zero_epsilon(mech):
    r = symmetric_bne(mech, "uniform:1:5", 5, np.random.default_rng(0), **SMALL)
    assert r.converged and r.iterations == 1 and r.stopped_by == "residual"
    # the first verification (a quarter of the draws) found no gain beyond float noise
    # (offline's integrated payments leave 1e-18): it is the result's, not re-run on
    # 4 x samples fresh draws (issue #48: an IC mechanism stops at the first one)
    assert r.check.eval_markets == SMALL["samples"] // 4
    np.testing.assert_allclose(r.bids, r.costs, atol=1e-5 * 4)
    assert r.epsilon <= 1e-9 and r.epsilon_ci[1] <= 1e-9
    # both are dominant-strategy IC (no deviation gains in any market), so a few markets
    # of another seed test it as well as many: 32 (offline's payments cost 0.1 s a market)
    e = bne_epsilon(mech, "uniform:1:5", 5, "truth", np.random.default_rng(1), **CHECK_FEW)
    assert e.epsilon <= 1e-9


def test_truth_under_pay_as_bid_is_not_an_equilibrium_and_the_bne_is():
    rng = np.random.default_rng(0)
    truth = bne_epsilon("pay-as-bid", "uniform:1:5", 5, "truth", rng, **CHECK)
    assert truth.epsilon_ci[0] > 0.1  # truthful utility is 0: shading up pays
    r = symmetric_bne("pay-as-bid", "uniform:1:5", 5, np.random.default_rng(0), **SMALL)
    assert r.epsilon < 0.05 * truth.epsilon
    bought = r.check.utilities > 0
    assert np.all(r.bid(r.check.eval_costs[bought]) > r.check.eval_costs[bought])  # markups
    assert np.all(np.diff(r.bids) >= 0) and np.all(r.bids >= r.costs - 1e-12)
    # the best deviation found is never below the cost
    assert np.all(r.check.best_reports >= r.check.eval_costs - 1e-12)


def test_seeded_reproducibility():
    a = symmetric_bne(FIRST_PRICE, "uniform:0:1", 3, np.random.default_rng(5), **FAST)
    b = symmetric_bne(FIRST_PRICE, "uniform:0:1", 3, np.random.default_rng(5), **FAST)
    c = symmetric_bne(FIRST_PRICE, "uniform:0:1", 3, np.random.default_rng(6), **FAST)
    np.testing.assert_array_equal(a.bids, b.bids)
    assert a.epsilon == b.epsilon and a.epsilon_ci == b.epsilon_ci
    assert not np.array_equal(a.bids, c.bids)


def test_result_object():
    r = symmetric_bne(FIRST_PRICE, "uniform:0:1", 2, np.random.default_rng(0), **SMALL)
    assert isinstance(r, BNEResult)
    with pytest.raises(AttributeError):
        r.epsilon = 0.0  # frozen
    c = np.array([[0.0, 0.3], [0.7, 1.0]])
    assert r.bid(c).shape == (2, 2)
    assert np.all(np.diff(r.bid(np.linspace(0, 1, 50))) >= 0)
    with pytest.raises(MarketSimError, match="outside the support"):
        r.bid([1.5])
    s = r.summary()
    assert s["epsilon"] == r.epsilon and s["iterations"] == r.iterations
    assert len(r.history) == r.iterations
    fig = figure(r)  # labelled, titled, finite, no legend over the data
    assert figure_problems(fig) == []
    assert fig.axes[1].get_title().endswith(f"stopped by {r.stopped_by}")  # which rule
    plt.close(fig)
    # a warm start from the result begins much nearer a fixed point than the truth
    w = symmetric_bne(
        FIRST_PRICE, "uniform:0:1", 2, np.random.default_rng(0), init=r, max_iter=1, **SMALL
    )
    assert w.iterations == 1 and w.history[0] < r.history[0] / 3


def test_bad_input_is_one_line():
    rng = np.random.default_rng(0)
    cases = [
        (dict(mechanism="data-dependent"), "needs the sellers' data"),
        (dict(n_sellers=1), "n_sellers must be an integer >= 2"),
        (dict(grid=2), "grid must be an integer >= 3"),
        (dict(damping=0), "damping must be in"),
        (dict(samples=0), "samples must be an integer >= 1"),
        (dict(grdi=5), "unknown option 'grdi'"),
        (dict(bid_max=0.5), "bid_max must be in"),
        (dict(rng=1), "rng must be a numpy.random.Generator"),
        (dict(dist="uniform:1"), "uniform"),
        (dict(eval_grid=0), "eval_grid must be an integer >= 1"),
        (dict(resample="yes"), "resample must be True or False"),
        (dict(br_refine=-1), "br_refine must be an integer >= 0"),
        (dict(exact="yes"), "exact must be True or False"),
        (dict(verify_every=-1), "verify_every must be an integer >= 0"),
        (dict(eps_tol=-1), "eps_tol must be in"),
        (dict(dist=[("uniform:0:1", 2)]), "symmetric_bne takes one cost law"),
    ]
    for kw, msg in cases:
        args = dict(mechanism="pay-as-bid", dist="uniform:0:1", n_sellers=3, rng=rng)
        args.update(kw)
        with pytest.raises(MarketSimError, match=msg) as info:
            symmetric_bne(**args)
        assert "\n" not in str(info.value)
    with pytest.raises(MarketSimError, match="bid must be"):
        bne_epsilon("pay-as-bid", "uniform:0:1", 3, 0.5, rng)
    bad_interim = type(
        "BadInterim",
        (),
        {"outcome": BatchedFirstPrice.outcome, "interim": lambda s, z, b, c: (0, 0)},
    )()
    with pytest.raises(MarketSimError, match="interim returned eps of shape") as info:
        bne(bad_interim, "uniform:0:1", rng, n_sellers=2, **FAST)
    assert "\n" not in str(info.value)
    for population, msg in [
        ([("uniform:0:1", 2), ("nosuch:1", 1)], "unknown distribution"),
        ([("uniform:0:1", 0)], "count must be a positive integer"),
        ([("uniform:0:1",)], "a seller class is a"),
        ([("uniform:0:1", 1)], "n_sellers must be an integer >= 2"),
    ]:
        with pytest.raises(MarketSimError, match=msg) as info:
            bne(FIRST_PRICE, population, rng)
        assert "\n" not in str(info.value)


def test_cli_writes_the_three_files(tmp_path, capsys):
    out = tmp_path / "bne"
    argv = ["bne", "--mechanism", FIRST_PRICE, "--dist", "uniform:0:1", "--sellers", "2"]
    argv += ["--seed", "4", "--out", str(out), "--quiet", "--samples", "128", "--grid", "9"]
    assert main(argv) == 0
    table = pd.read_csv(out / "bid.csv")
    assert list(table.columns) == ["group", "cost", "bid"]
    s = json.loads((out / "summary.json").read_text())
    assert s["seed"] == 4 and s["n_sellers"] == 2
    assert s["stopped_by"] in STOPPING_RULES
    assert {"mu", "sigma", "gamma", "privacy", "tol", "gain_tol", "max_iter"} <= set(s)
    for key in ("epsilon", "epsilon_ci", "iterations", "seconds", "converged"):
        assert key in s
    assert (out / "bne.png").stat().st_size > 0
    # the same seed from Python gives the same bid function
    r = symmetric_bne(FIRST_PRICE, "uniform:0:1", 2, np.random.default_rng(4), samples=128, grid=9)
    np.testing.assert_allclose(table["bid"], r.bids)
    # --population: one bid function per class, in the order given
    out2 = tmp_path / "bne2"
    argv = ["bne", "--mechanism", FIRST_PRICE, "--population", "1*uniform:1:2+1*uniform:0:2"]
    argv += ["--out", str(out2), "--quiet", "--samples", "64", "--grid", "9", "--max-iter", "3"]
    assert main(argv) == 0
    t2 = pd.read_csv(out2 / "bid.csv")
    assert sorted(set(t2["group"])) == [0, 1]
    assert t2[t2["group"] == 0]["cost"].min() == 1.0 and t2[t2["group"] == 1]["cost"].min() == 0
    assert s["epsilon"] == pytest.approx(r.epsilon)
    printed = capsys.readouterr().out
    assert "epsilon" in printed and f"stopped by            {s['stopped_by']}" in printed


@pytest.mark.parametrize(
    "extra, msg",
    [
        (["--mechanism", "data-dependent"], "needs the sellers' data"),
        (["--mechanism", "pay-as-bid", "--sellers", "1"], "sellers must be >= 2"),
        (["--mechanism", "pay-as-bid", "--damping", "0"], "damping must be in"),
        (["--mechanism", "no-such-mechanism"], "unknown"),
        (["--mechanism", "pay-as-bid", "--population", "x"], "not allowed with argument --dist"),
        (["--mechanism", "pay-as-bid", "--grid", "0"], "grid must be >= 3"),
    ],
)
def test_cli_bad_input_exits_2(tmp_path, capsys, extra, msg):
    argv = ["bne", "--dist", "uniform:0:1", "--sellers", "3", "--out", str(tmp_path / "o")]
    try:
        code = main(argv + extra)
    except SystemExit as exc:  # argparse's own checks
        code = exc.code
    assert code == 2
    err = capsys.readouterr().err
    assert msg in err and err.count("\n") == 1 and "Traceback" not in err
    assert not (tmp_path / "o" / "summary.json").exists()


@pytest.mark.parametrize("tilt", [0.0, 3.0])
def test_the_opponent_sample_is_unbiased(tilt):
    """P(the 3 other sellers' costs all exceed x) = (1 - x)^3 for U[0, 1], as the
    (importance-weighted) mean over the sample's markets.  Two ways to get it wrong that
    this catches: deviators rotating s mod n line up with the Sobol sequence (0.548
    instead of 0.461 at x = 0.227), and tilting every second market (the odd rows of a
    Sobol sequence share a half of the first coordinate)."""
    classes, _ = as_classes("uniform:0:1", 4)
    s = Sample(classes, 4096, 1, np.random.default_rng(0), tilt)
    others = np.ones_like(s.costs, dtype=bool)
    others[np.arange(s.markets), s.deviators[0][:, 0]] = False
    for x in (0.05, 0.227, 0.5, 0.8):
        above = np.array([np.all(c[o] > x) for c, o in zip(s.costs, others, strict=True)])
        assert s.mean(above.astype(float)) == pytest.approx((1 - x) ** 3, abs=0.015)


# ---- issue #48: honest numbers, grids by quantile, kinks kept ----------------------------
def _reserve_game_bid(c):
    """1-unit first price, 3 x U[0, 1], reserve 0.6: b(c) = c + int_c^0.6 (1 - t)^2 dt /
    (1 - c)^2 = c + ((1 - c)^3 - 0.4^3) / (3 (1 - c)^2) below 0.6 (tests/bne_reference.py,
    (1)), truth above."""
    c = np.asarray(c, dtype=float)
    inside = c + ((1 - c) ** 3 - 0.4**3) / (3 * np.maximum(1 - c, 1e-9) ** 2)
    return np.where(c < 0.6, inside, c)


def test_distances_count_the_costs_the_reference_wins():
    """Bids that price costs in [0.5, 0.6] out (0.65 > the reserve: they never sell) are
    0.65 - b(c) >= 0.05 from the reference there, where the reference wins with
    probability >= (1 - 0.6)^2 = 16%: L-inf on the costs that win must see it (the
    issue's complaint: measured on the costs the *solver's* bids let win, it did not)."""
    from bne_reference import FirstPriceReserve

    def priced_out(c):
        c = np.asarray(c, dtype=float)
        return np.where((c >= 0.5) & (c < 0.6), 0.65, _reserve_game_bid(c))

    e = bne_epsilon(FirstPriceReserve(1, 0.6), "uniform:0:1", 3, priced_out,
                    np.random.default_rng(0), reference=_reserve_game_bid, **CHECK)  # fmt: skip
    gap = 0.65 - float(_reserve_game_bid(0.5))  # the smallest gap on [0.5, 0.6): 0.124
    assert e.distances["linf_active"] >= gap - 1e-9
    assert e.distances["active_top"] >= 0.55


def test_epsilon_is_refined_until_two_densities_agree():
    """2 sellers U[0, 1], the closed form except truth on [0.2935, 0.2975]: a seller of
    cost 0.2955 bidding its cost gets 0 where b(c) = (1 + c)/2 earns (b - c) P(the
    other bids above b) = (1 - c)/2 (1 - c) = 0.2482 (the window's mass aside).  33
    evaluation cells have no cost in the window (centres 0.2879, 0.3182);
    66 do (0.2955): the refined epsilon finds the gain, the unrefined one does not."""

    def hole(c):
        c = np.asarray(c, dtype=float)
        return np.where((c > 0.2935) & (c < 0.2975), c, closed_form(c, 2))

    def check(**kw):
        opts = dict(samples=256, eval_grid=33, **kw)
        return bne_epsilon(FirstPrice(1), "uniform:0:1", 2, hole, np.random.default_rng(0), **opts)

    coarse, refined = check(eval_refine=0), check()
    assert coarse.epsilon < 0.01  # the window missed
    assert abs(refined.epsilon - (1 - 0.2955) ** 2 / 2) < 0.02
    assert refined.eval_cells >= 66 and refined.agreed


def test_bids_outside_the_report_range_are_refused_not_clipped():
    """3 x U[0, 1], every seller bidding c + 0.5: bids above 1 leave the report range
    [1e-6, 1].  Clipped where the profile is played (as they were), the check verified
    other bids than these: epsilon / u 0.76, that of min(c + 0.5, 1), where the
    profile's own, with the range widened by ``bid_max=1.5``, is 0.1875.  Proof: each
    other bids above z w.p. 1.5 - z, so U(z) = (z - c)(1.5 - z)^2, best at
    z = 0.5 + 2c/3; the gain over the bid, (0.5 - c/3)(1 - 2c/3)^2 - (1 - c)^2 / 2, is
    largest at c = 3/4: 1/16 - 1/32 = 1/32, and u = E[(1 - c)^2 / 2] = 1/6.  Now a
    one-line error names the cost and the bid; bids at the support's bottom (the
    closed form's, truth) stay fine."""
    up = lambda c: np.asarray(c, dtype=float) + 0.5  # noqa: E731
    down = lambda c: np.asarray(c, dtype=float) - 0.5  # noqa: E731
    with pytest.raises(MarketSimError, match="above the highest report 1: pass bid_max="):
        bne_epsilon(FirstPrice(1), "uniform:0:1", 3, up, np.random.default_rng(0))
    with pytest.raises(MarketSimError, match="bids -0.5 at cost 0, below the lowest report"):
        bne_epsilon(FirstPrice(1), "uniform:0:1", 3, down, np.random.default_rng(0))
    wide = bne_epsilon(FirstPrice(1), "uniform:0:1", 3, up, np.random.default_rng(0), bid_max=1.5)
    assert wide.epsilon_relative == pytest.approx(0.1875, rel=1e-3)
    at_bottom = bne_epsilon(FirstPrice(1), "uniform:0:1", 3, lambda c: closed_form(c, 3),
                            np.random.default_rng(0))  # fmt: skip
    assert at_bottom.epsilon_relative < 1e-6
    truth = bne_epsilon("uniform-price", "uniform:0:1", 3, "truth", np.random.default_rng(0))
    assert truth.epsilon <= 1e-12  # a report of 0 at cost 0


def test_converged_only_when_the_verification_certifies():
    """A rule that fires (gain, with gain_tol huge) but a verification that cannot certify
    (verify_tol tiny): not converged, and the printout says so beside the path."""
    r = symmetric_bne(FIRST_PRICE, "uniform:0:1", 2, np.random.default_rng(0), **SMALL,
                      max_iter=12, gain_tol=1e9, tol=1e-12, verify_tol=1e-12)  # fmt: skip
    assert r.stopped_by == "gain" and r.converged is False
    assert r.summary()["converged"] is False
    text = r.format()
    assert "converged: False" in text and "not certified" in text
    assert f"path                  {r.options['path']}" in text


def test_the_printout_names_the_path_it_ran():
    """On the outcome path "max_iter" says nothing of the interim path (issue #48, 6);
    the verification may say "rank interim" (a rank box's exact check)."""

    class OnlyOutcome:
        def outcome(self, reports, rng=None):
            r = np.asarray(reports, dtype=float)
            eps = (r == r.min()).astype(float)
            return eps, r * eps

    r = symmetric_bne(OnlyOutcome(), "uniform:0:1", 2, np.random.default_rng(0),
                      samples=32, grid=5, eval_grid=5, max_iter=2)  # fmt: skip
    assert r.options["path"] == "outcome" and r.stopped_by == "max_iter"
    assert "interim path" not in r.format() and "outcome" in r.format()


def test_an_ic_mechanism_stops_at_the_first_verification():
    """uniform-price is dominant-strategy IC: truth, verified gain 0, one iteration."""
    r = symmetric_bne("uniform-price", "uniform:0:1", 4, np.random.default_rng(0), samples=256)
    assert (r.iterations, r.stopped_by, r.converged) == (1, "verified", True)
    assert r.epsilon == 0.0
    np.testing.assert_allclose(r.bids, r.costs, atol=1e-6)


def test_progress_bar_numbers_are_finite():
    from market_sim.games.equilibrium_pure import _shown

    assert _shown(residual=0.1, gain=0.2, eps=float("nan")) == {"residual": "0.1", "gain": "0.2"}
    # pay-as-bid at the truth: utility 0; the responses' gain is relative to u + gain
    r = symmetric_bne("pay-as-bid", "uniform:1:5", 3, np.random.default_rng(0), samples=64,
                      grid=5, eval_grid=5, max_iter=2)  # fmt: skip
    assert 0.0 <= r.options["training_gain"] <= 1.0


def test_no_smoothing_across_the_cost_above_which_nothing_sells():
    """Responses min(c + 0.2, 0.7) below c = 0.6, which sell (reports up to 0.7 do), and
    0.75 + c / 4 above, which do not: the spline fits the selling piece only, the rest is
    kept as it is (the old fit through all of them moved the costs above 0.6)."""
    from market_sim.games.equilibrium_pure import _smooth

    c = np.linspace(0, 1, 41)
    br = np.where(c < 0.6, np.minimum(c + 0.2, 0.7), 0.75 + c / 4)
    out = _smooth(c, br, 6, z_live=0.7)
    np.testing.assert_array_equal(out[c >= 0.6], br[c >= 0.6])
    assert np.max(np.abs(out[c < 0.6] - br[c < 0.6])) < 0.02  # the fit of the piece


def test_grids_follow_the_law():
    """F(c) = sqrt(c): half the sellers have costs below 0.25; the solve's grid and the
    evaluation costs put more than 35% of their points there (an even grid: a quarter)."""
    from market_sim.distributions import as_distribution
    from market_sim.games.equilibrium_game import eval_costs_for
    from market_sim.games.equilibrium_pure import _focused

    law = as_distribution("beta:0.5:1:0:1")
    for pts in (_focused(law, 1.0, 33), eval_costs_for(law, 1.0, 33)):
        assert np.mean(pts < 0.25) > 0.35
        assert pts.min() < 1e-3


class CountingPostedToLowest(PostedToLowest):
    """PostedToLowest that counts its ``outcome`` calls (one report vector each)."""

    calls = 0

    def outcome(self, reports, rng=None):
        self.calls += 1
        return super().outcome(reports, rng)


def test_the_outcome_loop_evaluates_each_report_vector_once():
    """Issue #48 (speed): asked again for reports it has evaluated against the same
    sample and opponents (a denser verification, a refinement round), the outcome loop
    calls the black box only for the new reports, and every column equals a fresh
    oracle's (the same numbers, market by market)."""
    classes, _ = as_classes("uniform:0:1", 4)
    sample = Sample(classes, 32, 1, np.random.default_rng(0))
    R = reports_of(sample, classes, [lambda c: closed_form(c, 4)])
    box = CountingPostedToLowest()
    oracle = Oracle(as_mechanism(box))
    first = np.linspace(0.1, 0.9, 9)
    again = np.concatenate((first[::2], [0.15, 0.25], first[:2]))  # 5 old, 2 new, 2 repeated
    oracle.eps_pay(sample, R, 0, first)
    probe = box.calls - 32 * 9  # the one probe whether it takes a batch (it does not)
    assert 0 <= probe <= 1 + 16
    E, T = oracle.eps_pay(sample, R, 0, again)
    assert box.calls == probe + 32 * (9 + 2)
    E0, T0 = Oracle(as_mechanism(PostedToLowest())).eps_pay(sample, R, 0, again)
    np.testing.assert_array_equal(E, E0)
    np.testing.assert_array_equal(T, T0)
    # other opponents' reports (a new matrix): evaluated afresh
    oracle.eps_pay(sample, R.copy(), 0, first[:1])
    assert box.calls == probe + 32 * 12


class CountingRowwiseFirstPrice(BatchedFirstPrice):
    """BatchedFirstPrice without the ``batched`` flag, counting its calls: a user's
    box that happens to take a (B, n) batch row by row."""

    batched = False
    calls = 0

    def outcome(self, reports, rng=None):
        self.calls += 1
        return super().outcome(reports, rng)


class GlobalMinFirstPrice:
    """First price written for one vector (``r.min()`` of everything): given a (B, n)
    array, only the lowest report of the whole batch wins, so its rows are wrong."""

    def outcome(self, reports, rng=None):
        r = np.asarray(reports, dtype=float)
        won = r == r.min()
        eps = won / won.sum()
        return eps, r * eps


def test_a_black_box_that_takes_batches_is_found_and_one_that_does_not_is_looped():
    """Issue #48 (speed): a box whose ``outcome`` of a (k, n) array equals k one-vector
    calls row by row is then called once per chunk of markets (same numbers as the
    loop); a box that is wrong on a batch (global minimum) is looped, and its numbers
    are the one-vector first price's (from the batched flag's path, independently)."""
    classes, _ = as_classes("uniform:0:1", 4)
    sample = Sample(classes, 64, 1, np.random.default_rng(0))
    R = reports_of(sample, classes, [lambda c: closed_form(c, 4)])
    z = np.linspace(0.1, 0.9, 7)
    truth = Oracle(as_mechanism(BatchedFirstPrice())).eps_pay(sample, R, 0, z)
    rowwise = CountingRowwiseFirstPrice()
    found = Oracle(as_mechanism(rowwise))
    got = found.eps_pay(sample, R, 0, z)
    assert rowwise.calls <= 1 + 16 + 1  # the probe (1 + 16) and one batch
    looped = Oracle(as_mechanism(GlobalMinFirstPrice()))
    kept = looped.eps_pay(sample, R, 0, z)
    assert looped._rows_ok is False
    for E, T in (got, kept):
        np.testing.assert_array_equal(E, truth[0])
        np.testing.assert_array_equal(T, truth[1])


def test_on_the_outcome_path_each_deviators_opponents_are_a_net():
    """Issue #48 (the black box): with ``placed`` the deviator's opponents hold Sobol
    coordinates 0..n-2 in every market, so their uniform quantiles form a projection
    of a scrambled Sobol net: each of the 8 half-boxes of [0, 1]^3 holds exactly M/8
    markets (a (t, m, 3)-net with m - t >= 3: the first three Sobol coordinates have
    t = 1 at m = 8).  The deviator's seat stays random (all four seats occur).  With the
    deviator at a random coordinate (``placed=False``, every other path) the counts
    are not exact."""
    classes, _ = as_classes("uniform:0:1", 4)
    counts = {}
    for placed in (True, False):
        s = Sample(classes, 256, 1, np.random.default_rng(3), placed=placed)
        dev = s.deviators[0][:, 0]
        others = np.ones(s.costs.shape, bool)
        others[np.arange(256), dev] = False
        opp = s.costs[others].reshape(256, 3)  # uniform costs are their quantiles
        boxes = (opp >= 0.5) @ np.array([1, 2, 4])
        counts[placed] = np.bincount(boxes, minlength=8)
        assert set(dev.tolist()) == {0, 1, 2, 3}
    assert counts[True].tolist() == [32] * 8
    assert counts[False].tolist() != [32] * 8


def test_a_black_box_verification_measures_the_exact_gain():
    """Issue #48 (the black box printed epsilon / u 3.0% where the exact one is 4.6%):
    first price written with ``outcome`` only, 4 sellers, U[0, 1], every seller bidding
    the equilibrium c + (1 - c) / 4 plus a bump 0.02 exp(-((c - 0.15) / 0.05)^2).  The
    truth is ``bne_reference.exact_gain`` (tests/: the exact best response over 4001
    reports and a local refinement against the exact law of the others' reports, none
    of the solver's code): a relative epsilon of 0.128.  The verification (the defaults:
    4096 fresh markets, each cost's deviation searched and measured on them) is never
    more than 5% below it (the reports' resolution) nor 15% above it (the fresh
    markets' noise, which the same-sample maximum picks) on seeds 0-2 (1.02, 1.01,
    1.04; 1.04-1.18 on 1024 markets); with the deviator's opponents at random Sobol
    coordinates, the search on 256 markets and no doubling, it was 1.19, 1.17, 1.10
    (and 0.90 on seed 3)."""
    from bne_reference import table_gain

    from market_sim.distributions import as_distribution

    law = as_distribution("uniform:0:1")
    x = np.linspace(0.0, 1.0, 401)
    b = np.maximum.accumulate(closed_form(x, 4) + 0.02 * np.exp(-(((x - 0.15) / 0.05) ** 2)))

    def bid(c):
        return np.interp(c, x, b)

    truth = table_gain(law, x, b, 4).relative
    assert truth == pytest.approx(0.128, abs=0.002)
    for seed in range(3):
        e = bne_epsilon(GlobalMinFirstPrice(), "uniform:0:1", 4, bid, np.random.default_rng(seed))
        assert 0.95 <= e.epsilon_relative / truth <= 1.15


def test_the_outcome_paths_fresh_markets_are_doubled_only_when_it_can_certify():
    """Issue #48: on the outcome path (one sample searched and measured: the same-sample
    maximum is at least the exact gain on average, and more markets only lower it), a
    check is measured again on twice the markets only while its epsilon / u is above
    ``tol`` and its halves disagree (by more than 10% either way: noise), at most
    ``rounds`` times; the doubling keeps the costs and the best reports found.  Stub
    measurements: the numbers are given."""
    from market_sim.games.equilibrium_game import EpsilonResult
    from market_sim.games.equilibrium_pure import _until_certifiable

    def check(eps, half, markets):
        z = np.zeros(1)
        return EpsilonResult(
            eps, (eps, eps), eps, z, z, z, z, eval_markets=markets, utility=1.0,
            eval_cells=66, epsilon_half=half,
        )  # fmt: skip

    asked = []

    def at(cells, costs, reports, opponents):
        asked.append((cells, opponents))
        return check(0.012, 0.0125, opponents)

    agreeing = _until_certifiable(check(0.02, 0.021, 1024), at, lambda m: m, 1, 0.01)
    assert asked == [] and agreeing.eval_markets == 1024
    certified = _until_certifiable(check(0.008, 0.029, 1024), at, lambda m: m, 1, 0.01)
    assert asked == [] and certified.epsilon == 0.008  # below tol: more markets change nothing
    again = _until_certifiable(check(0.016, 0.029, 1024), at, lambda m: m, 1, 0.01)
    assert asked == [(66, 2048)] and again.epsilon == 0.012 and again.eval_markets == 2048
    _until_certifiable(check(0.016, 0.029, 1024), at, lambda m: m, 0, 0.01)
    assert len(asked) == 1  # no rounds: no new markets


@pytest.mark.parametrize(
    ("bump", "at", "width", "truth"),
    [(0.01, 0.3, 0.02, 0.0498), (0.005, 0.02, 0.01, 0.0815), (-0.02, 0.6, 0.03, 0.0160)],
)
def test_the_black_box_verification_finds_a_narrow_gain(bump, at, width, truth):
    """Issue #48 (no printed epsilon below an independent measure), cases built to fool
    the verification: first price with ``outcome`` only (one call per report vector),
    4 sellers, U[0, 1], every seller bidding the equilibrium c + (1 - c) / 4 plus a
    narrow bump ``bump`` exp(-((c - at) / width)^2), narrower than the evaluation grid's
    cells (1/34) or at its dense bottom end.  A seller inside the bump gains by bidding
    the equilibrium; the truth is ``bne_reference.exact_gain`` (the exact best response
    at 802 costs over 4001 reports, refined, against the exact law of the others'
    reports; none of the solver's code), asserted first.  Before the peaks' refinement
    (``_around_peaks``) the verification printed 0.72-0.80 of it (on the solver's own
    table with these bumps: 3.6-3.8% for 5.0%, 6.3% for 8.4%, 1.29-1.40% for 1.83%), and
    the two-sample verification before issue #48's last change 0.87-0.99, the same-sample
    one 0.98-1.09 on seeds 0-2.  The box passes the rank probe, so ``bne_epsilon`` also
    measures the bids exactly on its rank interim and keeps the larger: 0.9999-1.062 of
    it on seeds 0-2 (the two exact measures differ by their grids: at least 0.999
    asserted)."""
    from bne_reference import table_gain

    from market_sim.distributions import as_distribution

    law = as_distribution("uniform:0:1")
    x = np.linspace(0.0, 1.0, 2001)
    b = np.maximum.accumulate(closed_form(x, 4) + bump * np.exp(-(((x - at) / width) ** 2)))

    def bid(c):
        return np.interp(c, x, b)

    exact = table_gain(law, x, b, 4).relative
    assert exact == pytest.approx(truth, abs=0.0005)
    for seed in range(2):
        e = bne_epsilon(GlobalMinFirstPrice(), "uniform:0:1", 4, bid, np.random.default_rng(seed))
        assert e.epsilon_relative >= 0.999 * exact
