"""The distributional BNE solver (market_sim.games.equilibrium_distributional; docs/equilibrium.md,
"The distributional method") on games with equilibria proved in tests/bne_reference.py,
its pieces against hand derivations, seeds, and bad input."""

from __future__ import annotations

import numpy as np
import pytest
from bne_reference import GAMES, AllPayContest, all_pay_profile, symmetric_profile

from market_sim.errors import MarketSimError
from market_sim.games.equilibrium import bne
from market_sim.games.equilibrium_distributional import (
    DistOptions,
    MixedStrategy,
    below_probabilities,
    quantile_nodes,
)
from market_sim.games.equilibrium_game import as_classes
from market_sim.mechanisms.base import as_mechanism
from market_sim.mechanisms.first_price import FirstPrice


def _conformance():
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
    import bne_conformance

    return bne_conformance


def test_below_probabilities_count_ties_half():
    """Two bids 0 and 1; class 0 all at bid 0 (q = [1, 0]): P(below 0) = 1/2 (a tie),
    P(below 1) = 1; class 1 half each (two nodes, weights 1/2): q = [1/2, 1/2], P(below
    0) = 1/4, P(below 1) = 1/2 + 1/4 = 3/4."""
    p0 = np.array([[1.0, 0.0], [1.0, 0.0]])
    p1 = np.array([[1.0, 0.0], [0.0, 1.0]])
    w = np.array([0.5, 0.5])
    out = below_probabilities([p0, p1], [w, w])
    assert np.allclose(out, [[0.5, 1.0], [0.25, 0.75]])


def test_quantile_nodes_follow_the_law():
    """F(c) = sqrt(c): the node of quantile q is q^2, so the first of 64 is (1/128)^2,
    and every node carries 1/64 of the mass (an even grid would put 1/8 of the law's
    mass, sqrt(1/64), in its first cell)."""
    law = as_classes([("beta:0.5:1:0:1", 3)])[0].laws[0]
    c, w = quantile_nodes(law, 64)
    assert np.allclose(c, ((np.arange(64) + 0.5) / 64) ** 2, atol=1e-9)
    assert np.allclose(w, 1 / 64)


def test_a_ceiling_envelope_sells_to_every_cost_under_the_reserve():
    """First price, reserve r = 0.6, 3 sellers on U[0, 1]: the equilibrium is b(c) = c +
    int_c^r (1 - t)^2 dt / (1 - c)^2 for c < r (``bne_reference.symmetric_profile``;
    the seller at cost c sells iff both others' costs are above c, and one above r bids
    its cost).  Handed a table that prices out the costs 0.5-0.6 (they bid 0.65: the
    grid's cut-off below the reserve, the case of pab-2unit-power-reserve), a plain
    envelope step keeps the cut-off (E(t) = 0 there: its tail integral lacks
    int_0.5^0.6 (1 - t)^2 dt, so every bid below 0.5 is low by that over (1 - c)^2, 0.061
    at c = 0: checked), while the ceiling envelope finds the marginal cost c* = r (for
    first price T = z E, a seller ranked at c gains (r - c) E(c) > 0 iff c < r) and maps
    the table to the equilibrium: within 1e-4 on the costs that sell, the others above
    the reserve (any such bid is a best response: it never sells), exact relative
    epsilon under 0.01% (the input's is over 1%)."""
    from market_sim.distributions import tabulated_cdf
    from market_sim.games import equilibrium_distributional as D
    from market_sim.games.equilibrium_envelope import envelope_step
    from market_sim.games.equilibrium_game import Oracle, interim_of

    game = symmetric_profile("uniform:0:1", 3, reserve=0.6)
    classes, _ = as_classes([("uniform:0:1", 3)])
    mech, law = game.mechanism, classes.laws[0]
    interim, oracle, cdfs = interim_of(mech), Oracle(mech, exact=True), [tabulated_cdf(law)]
    assert D._marginal_cost(interim, classes, 0.6) == pytest.approx(0.6, abs=1e-9)
    c = np.linspace(0.0, 1.0, 201)
    truth = game.bids[0](c)
    fooled = (c, np.where((c >= 0.5) & (c < 0.6), 0.65, truth))
    z = (0.0, 1.0)
    plain = envelope_step(interim, classes, [fooled], z, 1.0, cdfs)[0][1]
    assert plain[0] == pytest.approx(truth[0] - (0.5**3 - 0.4**3) / 3, abs=2e-3)
    eps_in = D._exact_relative_epsilon(oracle, classes, [fooled], cdfs, z)
    assert eps_in > 0.01
    bids = np.linspace(0.0, 1.0, 101)
    strategy = MixedStrategy(np.zeros(1), np.ones(1), bids, np.eye(1, 101), np.ones(1), 0.6)
    sol = D.MixedSolution((strategy,), 0, "max_iter", 0.0, ())
    best = D.Tables([fooled], 16, 0, eps_in)
    out = D._with_ceiling_envelope(best, interim, oracle, classes, sol, cdfs, z)
    costs, got = out.tables[0]
    assert out.exact_epsilon < 1e-4
    sells = costs < 0.6
    assert np.max(np.abs(got[sells] - game.bids[0](costs[sells]))) < 1e-4
    assert got[sells].max() <= 0.6 and np.all(got[~sells & (costs > 0.6)] > 0.6)


def test_the_marginal_cost_is_where_a_report_at_the_ceiling_stops_paying():
    """A mechanism whose interim pays (z - 0.1) E (a fee of 0.1 per unit sold), E = 1 -
    below (a seller sells iff its one opponent is above it), ceiling r = 0.7: a seller
    ranked at c gains (0.6 - c)(1 - c) at the ceiling, positive iff c < 0.6, so c* =
    0.6; with the fee 0 it is r; with a fee of 0.8 no cost gains (None)."""
    from market_sim.games import equilibrium_distributional as D

    classes, _ = as_classes([("uniform:0:1", 2)])
    for fee, expected in ((0.1, 0.6), (0.0, 0.7), (0.8, None)):

        def interim(z, below, counts, fee=fee):
            E = 1.0 - below[0]
            return E, (np.asarray(z) - fee) * E

        got = D._marginal_cost(interim, classes, 0.7)
        assert got == (None if expected is None else pytest.approx(expected, abs=1e-9))


def test_the_cut_off_is_where_the_table_first_bids_above_the_ceiling():
    """Linear between rows: (0, 0.1) to (1, 0.5) crosses 0.3 at c = 0.5; a table that
    dips after crossing is read non-decreasing (the first crossing counts); never above:
    its last cost; above from the start: its first."""
    from market_sim.games.equilibrium_distributional import _cut_off

    c = np.array([0.0, 1.0])
    assert _cut_off(c, np.array([0.1, 0.5]), 0.3) == pytest.approx(0.5)
    c3 = np.array([0.0, 0.5, 1.0])
    assert _cut_off(c3, np.array([0.1, 0.4, 0.2]), 0.3) == pytest.approx(0.5 * 2 / 3)
    assert _cut_off(c, np.array([0.1, 0.2]), 0.3) == 1.0
    assert _cut_off(c, np.array([0.4, 0.5]), 0.3) == 0.0


def test_mixed_flag_reads_the_spread():
    """A node spread evenly over 5 bids 0.1 apart (sd 0.141 > 3 steps of 0.1? no: 1.41
    steps) is not "mixed"; over bids 0 and 1 (sd 0.5 = 5 steps) it is."""
    bids = np.linspace(0, 1, 11)
    even5 = np.zeros((1, 11))
    even5[0, 3:8] = 0.2
    two = np.zeros((1, 11))
    two[0, [0, 10]] = 0.5
    one = np.array([0.5])
    assert not MixedStrategy(one, np.ones(1), bids, even5, np.ones(1)).mixed
    assert MixedStrategy(one, np.ones(1), bids, two, np.ones(1)).mixed
    assert np.isclose(MixedStrategy(one, np.ones(1), bids, two, np.ones(1)).spread[0], 0.5)


def test_sampled_utilities_agree_with_the_exact_ones():
    """The sampled path (a black box: FirstPrice's ``outcome`` without its ``interim``)
    and the exact path give the same E(z) for the same mixed strategies, within the
    Monte Carlo error of 4096 markets (binomial sd <= 0.008; we allow 0.03)."""
    from market_sim.games.equilibrium_distributional import _Game

    classes = as_classes([("uniform:0:1", 3)])[0]
    bids = np.linspace(0, 1, 9)
    rng = np.random.default_rng(0)
    probs = [rng.dirichlet(np.ones(9), size=8)]
    weights = [np.full(8, 1 / 8)]

    class BlackBox:
        batched = True

        def outcome(self, reports, rng=None):
            return FirstPrice(1).outcome(reports, rng)

    exact = _Game(FirstPrice(1), classes, bids, DistOptions(), rng).eps_pay(probs, weights)
    opt = DistOptions(markets=4096)
    box = as_mechanism(BlackBox(), n_sellers=3, dist=classes.laws[0])
    sampled = _Game(box, classes, bids, opt, np.random.default_rng(1)).eps_pay(probs, weights)
    assert np.max(np.abs(exact[0][0] - sampled[0][0])) < 0.03


def test_first_price_closed_form_and_a_cross_check_of_the_pure_solver():
    """First price, U[0, 1], 3 sellers: b(c) = c + (1 - c)/3 (tests/bne_reference.py,
    (1)); the distributional solve is within 0.01 of it on the costs that win >= 1%
    (reference's win probability (1 - c)^2 >= 0.01: c <= 0.9), and the pure solver's
    interim path agrees with it within 0.01 too (the cross-check)."""
    pop = [("uniform:0:1", 3)]
    d = bne(FirstPrice(1), pop, np.random.default_rng(0), method="distributional",
            max_iter=1500, samples=256)  # fmt: skip
    c = np.linspace(0, 0.9, 91)
    assert np.max(np.abs(d.bid(c) - (c + (1 - c) / 3))) <= 0.01
    p = bne(FirstPrice(1), pop, np.random.default_rng(0), max_iter=200, samples=256)
    assert np.max(np.abs(d.bid(c) - p.bid(c))) <= 0.01
    assert d.options["method"] == "distributional" and d.options["path"] == "interim"


def test_all_pay_contest_within_the_bar():
    """The all-pay contest, 4 x U[0, 1]: z(c) = 1 - 3/4 (1 - c)^4 (tests/bne_reference.py,
    (2)); L∞ <= 0.01 on the costs where the reference wins >= 1% ((1 - c)^3 >= 0.01:
    c <= 0.78); the pure bid-function solver's failure on it was L∞ 0.22 (issue #48).
    The exact relative gain of the returned bids (the independent measure:
    bne_reference's exact best response) at most 1%: 1.16% before the envelope step
    (docs/equilibrium.md, step 6d), which is recorded as kept (one class: up to two,
    the second on the rows the stepped table asks for)."""
    p = all_pay_profile(4)
    r = bne(AllPayContest(), p.population, np.random.default_rng(0), method="distributional",
            samples=256)  # fmt: skip
    c = np.linspace(0, 0.78, 157)
    assert np.max(np.abs(r.bid(c) - p.bids[0](c))) <= 0.01
    assert _conformance().exact_relative_gain(p, r, 0) <= 0.01
    assert r.options["envelope_steps"] in (1, 2)


def test_same_seed_same_numbers_on_the_sampled_path():
    """A black box (no interim): the solve samples opponents from the rng; the same seed
    gives the same bids, another seed other bids."""

    class BlackBox:
        batched = True

        def outcome(self, reports, rng=None):
            return FirstPrice(1).outcome(reports, rng)

    kw = dict(
        method="distributional",
        grid=8,
        bid_grid=16,
        max_iter=8,
        markets=32,
        samples=16,
        eval_grid=4,
        check_grid=9,
        refine=1,
        rank_interim=False,
    )  # fmt: skip  (the sampled path: no rank interim)
    a = bne(BlackBox(), [("uniform:0:1", 3)], np.random.default_rng(5), **kw)
    b = bne(BlackBox(), [("uniform:0:1", 3)], np.random.default_rng(5), **kw)
    c = bne(BlackBox(), [("uniform:0:1", 3)], np.random.default_rng(6), **kw)
    assert a.options["path"] == "batched"
    assert np.array_equal(a.bids, b.bids) and a.epsilon == b.epsilon
    assert not np.array_equal(a.bids, c.bids)


@pytest.mark.parametrize(
    "kw, message",
    [
        (dict(method="mixed"), "method must be one of pure, distributional, auto"),
        (dict(method="distributional", damping=0.1), "option 'damping' applies to method='pure'"),
        (dict(method="distributional", step=-1.0), "step must be a number > 0"),
        (dict(method="distributional", grid=1), "grid must be an integer >= 2"),
        (dict(method="distributional", init=lambda c: c), "init applies to method='pure' only"),
        (dict(method="distributional", wobble=3), "option 'wobble' is unknown"),
    ],
)
def test_bad_input_is_one_line(kw, message):
    with pytest.raises(MarketSimError) as e:
        bne(FirstPrice(1), [("uniform:0:1", 3)], np.random.default_rng(0), **kw)
    assert message in str(e.value) and "\n" not in str(e.value)


def test_auto_is_the_default_and_says_which_method_and_why():
    """No method given: ``auto``.  A mechanism with an exact interim and no solver option
    given: the distributional method (its tables' exact epsilon within verify_tol, so
    nothing else runs); ``method_reason`` names the rule and the numbers, in the printed
    block as in summary.json (issue #48)."""
    r = bne(FirstPrice(1), [("uniform:0:1", 3)], np.random.default_rng(0), samples=128)
    why = r.options["method_reason"]
    assert r.options["method"] == "distributional"
    assert why.startswith("distributional: an exact interim") and "verified" in why
    assert r.options["training_epsilon"] <= 0.01
    assert r.summary()["method_reason"] == why and why in r.format()


@pytest.mark.parametrize(
    "mech, kw, method, reason",
    [
        (FirstPrice(1), dict(damping=0.1), "pure", "options of the pure method given (damping)"),
        (FirstPrice(1), dict(grid=9), "pure", "options of the pure method given (grid)"),
        (FirstPrice(1), dict(step=2.0), "distributional", "options only it reads (step)"),
        (FirstPrice(1), dict(samples=64, mu=0.1), "distributional", "an exact interim"),
        ("uniform-price", dict(), "pure", "no exact interim"),
    ],
)
def test_auto_choice_follows_the_rule(mech, kw, method, reason):
    """docs/equilibrium.md, "Which method": the options given, then the mechanism."""
    from market_sim.games.equilibrium import _auto_choice

    called = dict(n_sellers=None, init="truth", reference=None, bid_max=None)
    got, why, probed = _auto_choice(mech, [("uniform:0:1", 3)], called, kw)
    assert got == method and why.startswith(reason)
    # only a mechanism with neither options nor an exact interim is probed (and counted)
    assert (probed > 0) == (reason == "no exact interim")


def test_conformance_table_claims():
    """docs/equilibrium.md's conformance claims, re-run reduced (the two games the
    distributional method is for; fewer verification draws): L∞ <= 0.01 where the
    reference wins >= 1% and the exact relative gain of the returned profile (an
    independent measure) within the docs' numbers; the markdown has one row per class."""
    conf = _conformance()
    rows = conf.conformance(["asym-reserve"], ["distributional"], samples=256)
    assert len(rows) == 2
    for r in rows:
        assert r["linf"] <= 0.01, r
        assert r["eps_exact"] <= 0.01, r
    table = conf.markdown(rows)
    assert table.count("| asym-reserve |") == 2


def test_reference_games_are_known():
    assert {"all-pay-4", "asym-reserve", "uniform-4"} <= set(GAMES)
