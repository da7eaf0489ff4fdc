"""Mechanisms from the literature: Ghosh-Roth min-cost and fair-query, uniform-price,
Singer's proportional share and the prior-optimal posted price.

Worked examples by hand, each rule against a direct transcription of its definition
(sort, pick k, pay), every winner's payment against its threshold found by bisection
on its own report, budget feasibility, and the IC / IR audit."""

import itertools
import math

import numpy as np
import pytest

from market_sim.auditing import audit
from market_sim.distributions import parse_distribution
from market_sim.errors import MarketSimError
from market_sim.mechanisms.base import Mechanism, as_mechanism
from market_sim.mechanisms.builtin import PostedPriceMechanism
from market_sim.mechanisms.ghosh_roth import FairQuery, MinCostAuction, min_cost_plan
from market_sim.mechanisms.optimal_posted_price import (
    _moments,
    evaluate_posted_price,
    optimal_posted_price,
)
from market_sim.mechanisms.proportional_share import ProportionalShare
from market_sim.mechanisms.uniform_price import UniformPrice
from market_sim.registry import MECHANISMS

NAMES = ["min-cost", "fair-query", "uniform-price", "proportional-share", "optimal-posted-price"]
DIST = "uniform:1:5"


def _threshold(mech, r, i, hi=5.0):
    """The largest own report at which seller i is still bought (others fixed), by
    bisection on ``outcome``."""

    def bought(z):
        trial = r.copy()
        trial[i] = z
        return mech.run(trial).eps[i] > 0

    if bought(hi):
        return hi
    lo, up = float(r[i]), hi
    assert bought(lo)
    for _ in range(80):
        mid = 0.5 * (lo + up)
        lo, up = (mid, up) if bought(mid) else (lo, mid)
    return lo


# ---- definitions written out directly: sort, choose k, pay ----------------------------
def _fair_query_by_definition(r, B, scale, hi):
    m = r.size
    order = [i for i in np.argsort(r, kind="stable") if r[i] <= hi]
    ks = [
        k
        for k in range(1, min(len(order), m - 1) + 1)
        if r[order[k - 1]] * scale / (m - k) <= B / k
    ]
    eps, pay = np.zeros(m), np.zeros(m)
    if ks:
        k = max(ks)
        e = scale / (m - k)
        nxt = r[order[k]] if k < len(order) else hi
        eps[order[:k]] = e
        pay[order[:k]] = min(B / k, nxt * e)
    return eps, pay


def _proportional_share_winners(r, v, B_unit, hi):
    order = [i for i in np.lexsort((np.arange(r.size), r / v)) if r[i] <= hi]
    k, V = 0, 0.0
    for j, i in enumerate(order):
        V += v[i]
        if r[i] <= B_unit * v[i] / V:
            k = j + 1
    return set(order[:k])


# ---- registry and defaults --------------------------------------------------------------
@pytest.mark.parametrize("name", NAMES)
def test_registered_and_built_from_the_market_alone(name):
    assert name in MECHANISMS.names()
    mech = as_mechanism(name, dist=DIST, n_sellers=200)
    assert mech.name == name and not mech.randomized
    r = parse_distribution(DIST).sample(200, np.random.default_rng(0))
    out = mech.run(r)
    n = int(np.count_nonzero(out.eps))
    assert 1 <= n < 200
    assert np.all(out.payments >= r * out.eps)  # individually rational at the truth


def test_defaults_come_from_the_prior_optimal_posted_price():
    plan = optimal_posted_price(DIST, 200)
    k = round(plan.expected_bought)
    up = UniformPrice(DIST, n_sellers=200)
    assert (up.n_buy, up.eps_level) == (k, plan.eps_level)
    assert MinCostAuction(DIST, n_sellers=200).alpha == pytest.approx(1 - k / 200)
    assert FairQuery(DIST, n_sellers=200).budget == plan.expected_payment
    ps = ProportionalShare(DIST, n_sellers=200)
    assert (ps.budget, ps.eps_level) == (plan.expected_payment, plan.eps_level)


def test_spec_parameters_and_bad_input():
    mech = as_mechanism("uniform-price:n_buy=3:eps_level=0.5", dist=DIST, n_sellers=10)
    assert (mech.n_buy, mech.eps_level) == (3, 0.5)
    with pytest.raises(MarketSimError, match="alpha"):
        as_mechanism("min-cost:alpha=1.5", dist=DIST)
    with pytest.raises(MarketSimError, match="budget"):
        as_mechanism("fair-query:budget=-1", dist=DIST)
    with pytest.raises(MarketSimError, match="n_buy"):
        as_mechanism("uniform-price:n_buy=0", dist=DIST)
    with pytest.raises(MarketSimError, match="finite and >= 0"):
        UniformPrice(DIST, n_buy=1, eps_level=1.0).run([1.0, -2.0])
    with pytest.raises(MarketSimError, match="3 values for 2 reports"):
        ProportionalShare(DIST, budget=1.0, eps_level=1.0, values=(1, 2, 3)).run([1.0, 2.0])


# ---- worked examples ---------------------------------------------------------------------
def test_uniform_price_worked_example():
    # k = 3 of reports 3, 1, 4, 1.5, 5, 2: sellers 1, 3, 5 sell 0.5 each at r_(4) = 3
    out = UniformPrice(DIST, n_buy=3, eps_level=0.5).run([3, 1, 4, 1.5, 5, 2])
    np.testing.assert_array_equal(out.eps, [0, 0.5, 0, 0.5, 0, 0.5])
    np.testing.assert_array_equal(out.payments, [0, 1.5, 0, 1.5, 0, 1.5])
    # all bought (k = m): each paid the reserve, the top of the support
    out = UniformPrice(DIST, n_buy=3, eps_level=0.5).run([2, 1, 3])
    np.testing.assert_array_equal(out.payments, [2.5, 2.5, 2.5])


def test_min_cost_plan_meets_the_accuracy_target_with_probability_two_thirds():
    k, e = min_cost_plan(0.25, 100)
    assert (k, e) == (75, pytest.approx(2 * math.log(3) / 25))
    # the unbought bits err by at most (m - k)/2 = alpha m / 2, and the Laplace noise
    # exceeds alpha m / 2 with probability exp(-e alpha m / 2) = 1/3
    assert (100 - k) / 2 <= 0.25 * 100 / 2
    assert math.exp(-e * 0.25 * 100 / 2) == pytest.approx(1 / 3)
    mech = MinCostAuction(DIST, alpha=0.25)
    r = np.random.default_rng(1).uniform(1, 5, 100)
    out = mech.run(r)
    order = np.argsort(r)
    assert set(np.flatnonzero(out.eps)) == set(order[:75])
    np.testing.assert_allclose(out.payments[order[:75]], r[order[75]] * e)


def test_fair_query_worked_examples():
    # sorted 1, 2, 3, 4, 5 (m = 5), e_k = 1/(5 - k): k = 2 has r_(2) e_2 = 2/3 <= B/2,
    # k = 3 has r_(3) e_3 = 3/2 > B/3 for both budgets
    r = np.array([2.0, 1.0, 4.0, 3.0, 5.0])
    out = FairQuery(DIST, budget=2.4).run(r)  # paid min(B/2, r_(3) e_2) = min(1.2, 1.0)
    np.testing.assert_allclose(out.eps, [1 / 3, 1 / 3, 0, 0, 0])
    np.testing.assert_allclose(out.payments, [1.0, 1.0, 0, 0, 0])
    out = FairQuery(DIST, budget=1.8).run(r)  # min(0.9, 1.0): the budget binds
    np.testing.assert_allclose(out.payments, [0.9, 0.9, 0, 0, 0])
    assert out.payments.sum() == pytest.approx(1.8)


def test_proportional_share_worked_example():
    # e = 0.5, B = 2.8: B' = 5.6; r_(2) = 2 <= 5.6/2, r_(3) = 3 > 5.6/3; paid
    # e min(B'/2, r_(3)) = 0.5 min(2.8, 3) = 1.4 each
    out = ProportionalShare(DIST, budget=2.8, eps_level=0.5).run([3, 1, 4, 2, 5])
    np.testing.assert_allclose(out.eps, [0, 0.5, 0, 0.5, 0])
    np.testing.assert_allclose(out.payments, [0, 1.4, 0, 1.4, 0])


# ---- rules against their definitions, thresholds, budgets --------------------------------
def test_fair_query_is_its_definition_and_budget_feasible():
    rng = np.random.default_rng(2)
    for trial in range(150):
        m = int(rng.integers(1, 25))
        B, scale = float(rng.uniform(0.05, 5)), float(rng.choice([1.0, 0.3]))
        r = rng.uniform(1, 5, m)
        if trial % 3 == 0:
            r = np.round(r)  # ties, broken by index
        out = FairQuery(DIST, budget=B, eps_scale=scale).run(r)
        eps, pay = _fair_query_by_definition(r, B, scale, 5.0)
        np.testing.assert_allclose(out.eps, eps)
        np.testing.assert_allclose(out.payments, pay)
        assert out.payments.sum() <= B * (1 + 1e-12)


@pytest.mark.parametrize(
    "mech_kind", ["fair-query", "proportional-share", "proportional-share-values"]
)
def test_every_winner_is_paid_its_threshold(mech_kind):
    rng = np.random.default_rng(3)
    for _ in range(12):
        m = int(rng.integers(2, 20))
        r = rng.uniform(1, 5, m)
        if mech_kind == "fair-query":
            mech = FairQuery(DIST, budget=float(rng.uniform(0.2, 4)))
        else:
            values = tuple(rng.uniform(0.2, 3, m)) if mech_kind.endswith("values") else None
            mech = ProportionalShare(
                DIST, budget=float(rng.uniform(0.1, 3)), eps_level=0.1, values=values
            )
        out = mech.run(r)
        budget = mech.budget
        assert out.payments.sum() <= budget * (1 + 1e-12)
        for i in np.flatnonzero(out.eps):
            assert out.payments[i] == pytest.approx(_threshold(mech, r, i) * out.eps[i], rel=1e-10)


def test_proportional_share_is_singers_rule():
    rng = np.random.default_rng(4)
    for trial in range(100):
        m = int(rng.integers(1, 30))
        v = rng.uniform(0.2, 3, m) if trial % 2 else np.ones(m)
        mech = ProportionalShare(
            DIST, budget=float(rng.uniform(0.05, 3)), eps_level=0.1, values=tuple(v)
        )
        r = rng.uniform(1, 5, m)
        out = mech.run(r)
        assert set(np.flatnonzero(out.eps)) == _proportional_share_winners(
            r, v, mech.budget / 0.1, 5.0
        )


@pytest.mark.parametrize("name", NAMES)
def test_fast_deviations_equal_rerunning_the_outcome(name):
    mech = as_mechanism(name, dist=DIST, n_sellers=40)
    rng = np.random.default_rng(5)
    r = rng.uniform(1, 5, 40)
    sellers = np.arange(0, 40, 3)
    cand = rng.uniform(1, 5, (sellers.size, 9))
    cand[:, 0] = r[sellers]
    fast = mech.deviations(sellers, cand, r)
    slow = Mechanism.deviations(mech, sellers, cand, r)
    np.testing.assert_array_equal(fast.eps, slow.eps)
    np.testing.assert_allclose(fast.payments, slow.payments, rtol=1e-14)


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("dist", [DIST, "truncnorm:2:1:0:5"])
def test_audit_finds_them_ic_and_ir(name, dist):
    res = audit(name, dist, 30, 3, np.random.default_rng(6), n_boot=50)
    assert res.verdict == "ic" and res.ir_verdict == "ir", res.summary
    assert res.summary["max_gain"] <= 1e-12


# ---- the optimal posted price ------------------------------------------------------------
def test_binomial_moments_are_exact():
    e_half, e_inv, e_k, p_empty = _moments(7, np.array([0.3]))
    from scipy.stats import binom

    K = np.arange(1, 8)
    w = binom.pmf(K, 7, 0.3) / (1 - 0.7**7)
    assert p_empty[0] == pytest.approx(0.7**7)
    assert e_k[0] == pytest.approx(7 * 0.3 / (1 - 0.7**7)) == pytest.approx(w @ K)
    assert e_inv[0] == pytest.approx(w @ (1 / K))
    assert e_half[0] == pytest.approx(w @ K**-0.5)


def test_expected_objective_matches_simulated_markets():
    dist = parse_distribution(DIST)
    plan = optimal_posted_price(dist, 30)
    mech = as_mechanism("optimal-posted-price", dist=dist, n_sellers=30)
    rng = np.random.default_rng(7)
    vals = []
    for _ in range(4000):
        out = mech.run(dist.sample(30, rng))
        if out.eps.sum() > 0:  # Eq. 11: mu ||eps|| / sum eps + sigma / sum eps + gamma sum t
            s = out.eps.sum()
            vals.append(np.linalg.norm(out.eps) / s + 1 / s + out.payments.sum())
    se = np.std(vals) / np.sqrt(len(vals))
    assert abs(np.mean(vals) - plan.objective) < 4 * se


def test_optimal_posted_price_beats_the_fixed_quantile_and_a_brute_force_grid_agrees():
    # markets large enough that the fixed 0.1-quantile price also leaves P(nobody
    # sells) = 0.9^m below the optimiser's bound 1e-3 (m >= 66): the same convention
    for dist, m in [(DIST, 200), ("truncnorm:2:1:0:5", 80), ("uniform:0:1", 120)]:
        d = parse_distribution(dist)
        plan = optimal_posted_price(d, m)
        fixed = PostedPriceMechanism(d)  # the 0.1 quantile at eps 1
        worse = evaluate_posted_price(d, m, fixed.price, fixed.eps_level)
        assert worse.p_empty <= 1e-3 and plan.p_empty <= 1e-3 * (1 + 1e-9)
        assert plan.objective <= worse.objective
        # the fixed-quantile price at its best eps is no better either
        for e in np.geomspace(1e-3, 10, 60):
            assert plan.objective <= evaluate_posted_price(d, m, fixed.price, e).objective
        # brute force over (p, e) among prices with P(nobody sells) <= 1e-3
        q_min = 1 - 1e-3 ** (1 / m)
        best = np.inf
        for q in np.linspace(q_min, 1, 80):
            p = float(d.ppf(q))
            for e in plan.eps_level * np.geomspace(0.25, 4, 33):
                best = min(best, evaluate_posted_price(d, m, p, e).objective)
        assert plan.objective <= best + 1e-9
        assert best <= plan.objective * (1 + 5e-3)


@pytest.mark.parametrize("name", NAMES)
def test_best_responders_stay_truthful_in_the_market(name):
    from market_sim.agents import MarketModel

    m = MarketModel(12, mechanism=name, strategy="best-response", seed=1, rounds=2, n_grid=9)
    model_df, agent_df = m.run()
    assert (model_df.share_misreporting == 0).all()
    assert model_df.max_regret.max() <= 1e-9
    assert agent_df.utility.min() >= -1e-12 and agent_df.eps.max() > 0


# ---- ties: every profile of a small report grid -----------------------------------------
TIE_GRID = (0.25, 1 / 3, 0.5, 0.75, 1.0, 1.5, 2.0)


def _all_profiles(mech, grid, n):
    """Every profile of n reports from ``grid``: codes (N, n) with row p the base-len(grid)
    digits of p (seller 0 first), and outcome's eps and payments (N, n)."""
    codes = np.array(list(itertools.product(range(len(grid)), repeat=n)))
    reports = np.asarray(grid)[codes]
    outs = [mech.outcome(r) for r in reports]
    return codes, reports, np.array([o.eps for o in outs]), np.array([o.payments for o in outs])


def _bisected_threshold(mech, r, i, lo, up, reserve):
    """sup {z : seller i is bought at z}, others fixed, by bisection on ``outcome`` between
    a report ``lo`` that is bought and ``up`` that is not (``reserve`` if bought there)."""

    def bought(z):
        trial = r.copy()
        trial[i] = z
        return mech.outcome(trial).eps[i] > 0

    if up == reserve and bought(reserve):
        return reserve
    assert bought(lo) and not bought(up)
    delta = 1e-8  # candidates (grid reports, budget bounds) differ by more; ends first
    lo, up = (up - delta, up) if bought(up - delta) else (lo, up)
    lo, up = (lo, lo + delta) if not bought(lo + delta) else (lo, up)
    while up - lo > delta:
        mid = 0.5 * (lo + up)
        lo, up = (mid, up) if bought(mid) else (lo, mid)
    return 0.5 * (lo + up)


def _check_every_profile(mech, grid, n, reserve, budget=None):
    """On every profile of n reports from ``grid`` (reports = costs): sum t <= budget; IR;
    no profitable deviation to another grid report (exhaustive: the deviation's profile is
    on the grid too); a bought seller's allocation is a step in its own report; ``deviations``
    agrees with ``outcome`` (on every 97th profile); and every winner's payment is its level
    times its threshold found by bisection on ``outcome``.

    A seller's threshold depends on its index and the others' reports only through the
    multisets of those below and above its index (the rules sort by (report, index)), so
    it is bisected once per such class and compared on every profile of the class."""
    codes, R, EPS, PAY = _all_profiles(mech, grid, n)
    G, tol = np.asarray(grid), 1e-12
    if budget is not None:
        assert PAY.sum(axis=1).max() <= budget * (1 + tol)
    util = PAY - R * EPS
    assert util.min() >= -tol  # IR
    weights = len(grid) ** (n - 1 - np.arange(n))
    rows = np.arange(len(R))
    unit_pay = np.where(EPS > 0, PAY / np.where(EPS > 0, EPS, 1), np.nan)
    for i in range(n):
        dev = rows[:, None] + (np.arange(len(grid))[None, :] - codes[:, i : i + 1]) * weights[i]
        dev_util = PAY[dev, i] - R[:, i : i + 1] * EPS[dev, i]  # true cost = report
        assert np.all(dev_util <= util[:, i : i + 1] + tol)  # IC on the grid
        won = EPS[dev, i] > 0
        for p in range(0, len(R), 97):  # the fast deviations agree with outcome on ties too
            fast = mech.deviations(np.array([i]), G[None, :], R[p])
            np.testing.assert_array_equal(fast.eps[0], EPS[dev[p], i])
            np.testing.assert_allclose(fast.payments[0], PAY[dev[p], i], rtol=1e-14)
        assert not np.any(~won[:, :-1] & won[:, 1:])  # bought below every report it wins at
        key = np.hstack([np.sort(codes[:, :i], axis=1), np.sort(codes[:, i + 1 :], axis=1)])
        first, cls = np.unique(key, axis=0, return_index=True, return_inverse=True)[1:]
        T = np.empty(first.size)
        for c, p in enumerate(first):
            j = int(np.count_nonzero(won[p]))  # grid reports 0..j-1 win
            lo = float(G[j - 1]) if j else 0.0
            up = float(G[j]) if j < len(grid) else reserve
            T[c] = _bisected_threshold(mech, R[p].copy(), i, lo, up, reserve)
        Ti, win = T[cls.reshape(-1)], EPS[:, i] > 0
        np.testing.assert_allclose(unit_pay[win, i], Ti[win], rtol=0, atol=1e-7)
        assert np.all(R[~win, i] >= Ti[~win] - 1e-7)
    return PAY.sum(axis=1)


@pytest.mark.parametrize("spec", ["proportional-share:budget=1:eps_level=1", "fair-query:budget=1"])
def test_budget_feasible_on_every_tie_profile(spec):
    """All 7^5 = 16,807 profiles of 5 sellers over TIE_GRID.  Were a report equal to both
    the next report and the budget bound always bought, proportional-share would overspend
    on 1,734 of them (all five reporting 1: all bought, paid 5) and fair-query on 293
    ((0.25, 1.5, 1.5, 1.5, 1.5) would pay 2.5)."""
    mech = as_mechanism(spec, dist="uniform:0:2", n_sellers=5)
    spend = _check_every_profile(mech, TIE_GRID, 5, reserve=2.0, budget=1.0)
    assert spend.max() > 0.99  # the budget is reached, so the bound is tight
    # the two profiles, by hand: one bought at 1 (the others tie behind it);
    # fair-query: k* = 2 (2 e_2 r_(2) = 2/3 1.5 = 1 <= B), sellers 0 and 1 paid 1/2
    if spec.startswith("proportional"):
        out = mech.outcome(np.ones(5))
        np.testing.assert_array_equal(out.eps, [1, 0, 0, 0, 0])
        assert out.payments.sum() == 1.0
    else:
        out = mech.outcome(np.array([0.25, 1.5, 1.5, 1.5, 1.5]))
        np.testing.assert_allclose(out.eps, [1 / 3, 1 / 3, 0, 0, 0])
        np.testing.assert_allclose(out.payments, [0.5, 0.5, 0, 0, 0])


@pytest.mark.parametrize(
    "spec", ["uniform-price:n_buy=2:eps_level=1", "min-cost:alpha=0.5", "posted-price:price=1"]
)
def test_index_tie_breaks_are_thresholds_on_every_tie_profile(spec):
    """The other threshold rules on every profile of 4 sellers over the same grid: IR,
    IC on the grid, payments = bisected thresholds; uniform-price and min-cost spend
    exactly k r_(k+1) e (k = 2 of 4 for alpha = 0.5)."""
    mech = as_mechanism(spec, dist="uniform:0:2", n_sellers=4)
    spend = _check_every_profile(mech, TIE_GRID, 4, reserve=2.0)
    if not spec.startswith("posted"):
        codes = np.array(list(itertools.product(range(7), repeat=4)))
        third = np.sort(np.asarray(TIE_GRID)[codes], axis=1)[:, 2]
        e = 1.0 if spec.startswith("uniform") else min_cost_plan(0.5, 4)[1]
        np.testing.assert_allclose(spend, 2 * third * e)


def test_optimal_posted_price_ties_at_its_price():
    mech = as_mechanism("optimal-posted-price", dist="uniform:0:2", n_sellers=4)
    grid = (mech.price / 2, mech.price, 2 * mech.price)
    _check_every_profile(mech, grid, 4, reserve=2.0)


def test_first_price_is_registered_and_is_not_pay_as_bid():
    """Two pay-as-bid mechanisms, two names (docs/literature.md): `first-price` buys eps = 1
    from the k lowest reports whatever the law; `pay-as-bid` is the offline allocation,
    whose eps depend on the reports' virtual costs."""
    from market_sim.mechanisms.first_price import FirstPrice

    reports = np.array([0.3, 0.1, 0.5, 0.2, 0.9])
    fp = as_mechanism("first-price:k=2", dist="uniform:0:1", n_sellers=5)
    assert isinstance(fp, FirstPrice)
    eps, pay = fp.outcome(reports)
    assert eps.tolist() == [0, 1, 0, 1, 0] and pay.tolist() == [0, 0.1, 0, 0.2, 0]
    for law in ("uniform:0:1", "uniform:0:2"):  # the same outcome under any law
        assert np.array_equal(as_mechanism("first-price:k=2", dist=law).outcome(reports)[0], eps)
    pab = as_mechanism("pay-as-bid", dist="uniform:0:1", n_sellers=5)
    out = pab.outcome(reports)
    assert not np.array_equal(out.eps, eps)
    np.testing.assert_allclose(out.payments, reports * out.eps)
