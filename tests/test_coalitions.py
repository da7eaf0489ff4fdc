"""Coalition search: joint misreports of small groups of sellers."""

import numpy as np
import pytest

from market_sim.coalitions import _generic, _member_outcomes, coalition_search
from market_sim.distributions import parse_distribution
from market_sim.errors import MarketSimError
from market_sim.mechanisms.base import Mechanism, as_mechanism
from market_sim.mechanisms.myerson import myerson_mechanism

DIST = parse_distribution("uniform:1:5")


def _uniform_price(reports, q):
    order = np.argsort(reports, kind="stable")
    eps = np.zeros(reports.size)
    eps[order[:q]] = 1.0
    return eps, reports[order[q]] * eps


class UniformPrice(Mechanism):
    """Buy the q cheapest at eps 1, each paid the (q+1)-th lowest report: unilaterally
    truthful (a (q+1)-th price auction), but the price setter moves the winners' pay."""

    def __init__(self, q=3):
        self.q = q

    def outcome(self, reports, rng=None):
        return _uniform_price(reports, self.q)


class RandomUniformPrice(UniformPrice):
    """q drawn from {2, 3} each round: the same coalition gain, in expectation."""

    randomized = True
    n_draws = 32

    def outcome(self, reports, rng=None):
        return _uniform_price(reports, int(rng.integers(2, 4)))


class Lottery(Mechanism):
    """A price drawn from a fixed law, independent of the reports: group-IC in
    expectation (and for every draw)."""

    randomized = True
    n_draws = 16

    def outcome(self, reports, rng=None):
        price = rng.uniform(1, 5)
        eps = (reports <= price).astype(float)
        return eps, price * eps


def _costs(n=8, seed=3):
    return DIST.sample(n, np.random.default_rng(seed))


def _utility_sum(mech, costs, members, reports, rng=None):
    r = costs.copy()
    r[list(members)] = reports
    return float(mech.run(r, rng).utilities(costs)[list(members)].sum())


def test_uniform_price_is_unilaterally_ic_but_a_coalition_gains():
    costs = _costs()
    mech = UniformPrice(q=3)
    n = costs.size
    lo, hi = DIST.support
    cand = np.column_stack(
        [costs, np.tile(np.linspace(lo, hi, 201), (n, 1)), costs + 1e-9, costs - 1e-9]
    )
    util = mech.deviation_utilities(np.arange(n), cand, costs, costs)
    assert np.all(util <= util[:, :1] + 1e-12)  # no seller gains alone

    res = coalition_search(mech, costs, 2, np.random.default_rng(0), tol=1e-9, support=(lo, hi))
    order = np.argsort(costs)
    winners, setter = set(order[:3].tolist()), int(order[3])
    assert not res.group_ic and res.max_gain > 0.1
    w = res.witness
    assert setter in w.members and winners & set(w.members)
    assert setter in res.price_setters
    # the witness is real: re-run the mechanism at the joint report
    truth = _utility_sum(mech, costs, w.members, np.array(w.costs))
    assert _utility_sum(mech, costs, w.members, np.array(w.reports)) - truth == pytest.approx(
        w.gain, abs=1e-12
    )
    # at most the gap to the next report above the price per winner
    assert res.max_gain <= 3 * (hi - costs[setter]) + 1e-12
    assert w.member_gains[w.members.index(setter)] == 0.0  # the loser loses nothing


@pytest.mark.parametrize("name", ["posted-price", "online"])
def test_report_independent_prices_are_group_ic(name):
    mech = as_mechanism(name, dist=DIST, n_sellers=8)
    res = coalition_search(mech, _costs(), 3, np.random.default_rng(1), tol=1e-9)
    assert res.group_ic and res.witness is None
    assert res.max_gain <= 1e-9
    assert res.n_coalitions >= 10 and res.n_joint_reports > 20 * res.n_coalitions
    if name == "posted-price":
        assert res.max_gain == 0.0  # the price cannot move


def test_offline_is_manipulable_by_a_pair():
    """Finding: the offline mechanism is IC but not group-IC.  Two bought sellers:
    one raises its report (losing a second-order amount, IC) and the other's eps and
    Myerson payment rise by more."""
    costs = _costs(n=6, seed=3)
    mech = as_mechanism("offline", dist=DIST, n_sellers=6)
    res = coalition_search(
        mech, costs, 2, np.random.default_rng(0), tol=1e-9, n_random_coalitions=4
    )
    w = res.witness
    assert not res.group_ic and w is not None
    truth = _utility_sum(mech, costs, w.members, np.array(w.costs))
    found = _utility_sum(mech, costs, w.members, np.array(w.reports))
    assert found - truth == pytest.approx(w.gain, rel=1e-9)  # fast path == run
    mean_pay = float(np.mean(mech.run(costs).payments))
    assert w.gain > 0.01 * mean_pay


def test_randomized_gain_found_and_lottery_passes():
    costs = _costs(n=7)
    res = coalition_search(
        RandomUniformPrice(),
        costs,
        2,
        np.random.default_rng(2),
        tol=1e-9,
        support=DIST.support,
        n_random_coalitions=4,
        n_random_reports=8,
    )
    assert res.randomized and res.n_draws == 32 and not res.group_ic
    assert res.witness.gain - res.z * res.witness.gain_se > 1e-9
    lot = coalition_search(
        Lottery(),
        costs,
        3,
        np.random.default_rng(2),
        tol=1e-9,
        support=DIST.support,
        n_random_coalitions=4,
        n_random_reports=8,
    )
    # common random numbers: the same price per draw, so no report of the truth's
    # members can raise their summed utility in any draw
    assert lot.group_ic and lot.max_gain <= 1e-12 and lot.z > 3


def test_fast_paths_match_run():
    costs = _costs(n=6)
    rng = np.random.default_rng(5)
    members = np.array([1, 4])
    joint = rng.uniform(1, 5, (4, 2))
    # pay-as-bid: the compiled kernel against run's numpy solve (m = 6 < KERNEL_MIN_M)
    for name in ("offline", "online", "posted-price", "pay-as-bid"):
        mech = as_mechanism(name, dist=DIST, n_sellers=6)
        path = _member_outcomes(mech)
        assert path.fn is not _generic
        fast = path.fn(mech, costs, members, joint, members, 0)
        slow = _generic(mech, costs, members, joint, members, 0)
        for a, b in zip(fast, slow, strict=True):
            np.testing.assert_allclose(a, b, rtol=1e-10, atol=1e-12)
    mech = myerson_mechanism(lambda r: np.maximum(4.0 - r - 0.1 * np.sort(r)[1], 0.0), DIST)
    path = _member_outcomes(mech)
    assert path.fn is not _generic
    fast = path.fn(mech, costs, members, joint, members, 0)
    slow = _generic(mech, costs, members, joint, members, 0)
    for a, b in zip(fast, slow, strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-14)
    # the exact expectations of the private posted price: one mover against the
    # mechanism's own exact deviations, two movers against Monte Carlo
    mech = as_mechanism("private-posted-price", dist=DIST)
    path = _member_outcomes(mech)
    assert path.exact
    one = path.fn(mech, costs, members[:1], joint[:, :1], members[:1], 0)
    dev = mech.deviations(members[:1], joint[:, :1].T, costs)
    np.testing.assert_allclose(one[0], dev.eps.T, rtol=1e-12)
    np.testing.assert_allclose(one[1], dev.payments.T, rtol=1e-12)
    exact = path.fn(mech, costs, members, joint, members, 0)
    draws = [_generic(mech, costs, members, joint, members, s) for s in range(400)]
    for a, b in zip(exact, np.mean(draws, axis=0), strict=True):
        np.testing.assert_allclose(a, b, atol=0.3)  # 400 draws: se < 5 / 20 / 2


def test_same_seed_same_result_and_bad_input():
    costs = _costs()
    a = coalition_search(UniformPrice(), costs, 3, np.random.default_rng(4), tol=0.0,
                         support=DIST.support)  # fmt: skip
    b = coalition_search(UniformPrice(), costs, 3, np.random.default_rng(4), tol=0.0,
                         support=DIST.support)  # fmt: skip
    assert a == b
    for k in (1, 9, 2.5):
        with pytest.raises(MarketSimError, match="coalition size must be an integer in 2..8"):
            coalition_search(UniformPrice(), costs, k, np.random.default_rng(0), tol=0.0,
                             support=DIST.support)  # fmt: skip
    with pytest.raises(MarketSimError, match="pass support"):
        coalition_search(UniformPrice(), costs, 2, np.random.default_rng(0), tol=0.0)
    with pytest.raises(MarketSimError, match="no joint report"):
        coalition_search(UniformPrice(), costs, 2, np.random.default_rng(0), tol=0.0,
                         support=DIST.support, multipliers=(), n_random_reports=0)  # fmt: skip
