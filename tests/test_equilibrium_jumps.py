"""Jumps of a bid function (issue #48): found, kept out of the spline, and made a step
at the cost where the two branches pay the same."""

import numpy as np

from market_sim.games.equilibrium_game import jump_cells, sharpen_jump
from market_sim.games.equilibrium_pure import _smooth


def test_a_jump_is_found_and_a_steep_smooth_bid_is_not():
    """A step of 0.15 within one cell of an even grid is a jump; sqrt(c) on the same
    grid (slope 16 times its neighbour's at the first cell, but rising gradually after)
    and a line are not; a step split over two cells (a grid cost between the branches)
    is one jump over both cells."""
    c = np.linspace(0, 1, 33)
    step = np.where(c < 0.1, 0.05 + 0.2 * c, 0.2 + 0.5 * c)
    cells = jump_cells(c, step)
    assert cells == [(3, 4)]  # c[3] = 0.094 < 0.1 <= c[4] = 0.125
    assert jump_cells(c, 0.2 + np.sqrt(c) / 3) == []
    assert jump_cells(c, 0.3 + 0.5 * c) == []
    split = step.copy()
    split[4] = 0.5 * (step[3] + step[4] + 0.5 * (c[4] - c[3]))  # halfway
    split[5:] = 0.2 + 0.5 * c[5:]
    assert jump_cells(c, split) == [(3, 5)]


def test_the_spline_is_not_fitted_across_a_jump():
    """Responses with a jump of 0.3 at c = 0.3 (lines on both sides): found by
    ``jump_cells``, and given as a cut each piece is fitted alone, so both stay on their
    line (one spline through both misses by 0.14 next to the jump)."""
    c = np.linspace(0, 1, 41)
    br = np.where(c < 0.3, 0.1 + 0.5 * c, 0.4 + 0.5 * c)
    cells = jump_cells(c, br)
    assert cells == [(11, 12)]
    out = _smooth(c, br, 3, cuts=[(c[i], c[j]) for i, j in cells])
    np.testing.assert_allclose(out, br, atol=1e-9)
    assert np.max(np.abs(_smooth(c, br, 3) - br)) > 0.1  # without the cut


class _Lines:
    """A deviator's E and T that do not depend on the others: E(z) = 10 for z < 0.1 and 1
    above, T(z) = z E(z) (pay-as-bid's payment)."""

    calls = 0

    def eps_pay(self, sample, R, g, Z):
        E = np.where(np.asarray(Z) < 0.1, 10.0, 1.0)
        return E[None, :], (np.asarray(Z) * E)[None, :]


class _One:
    def mean(self, X):
        return X.mean(axis=0)


def test_the_step_is_where_the_branches_pay_the_same():
    """Branches z_A = 0.05 (E = 10, T = 0.5) and z_B = 0.2 (E = 1, T = 0.2): utilities
    0.5 - 10 c and 0.2 - c cross at c* = 0.3 / 9 = 1/30 (by hand); the table gets a step
    there, each side on its branch, and the costs of the old cell are gone."""
    costs = np.array([0.0, 0.02, 0.04, 0.06, 0.08])
    bids = np.array([0.05, 0.05, 0.2, 0.2, 0.2])
    x, y, at = sharpen_jump(_Lines(), _One(), None, 0, costs, bids, (1, 2), (0.0, 1.0))
    assert abs(at - 1 / 30) < 1e-12
    assert np.all(np.diff(x) > 0)
    np.testing.assert_allclose(np.interp([at - 1e-6, at + 1e-6], x, y), [0.05, 0.2])
    np.testing.assert_allclose(np.interp([0.01, 0.03, 0.035, 0.05], x, y), [0.05, 0.05, 0.2, 0.2])


def test_a_transient_jump_of_the_first_iterations_is_not_kept():
    """First price, F(c) = c^0.3, 3 sellers (``bne_reference`` "power-0.3-3": its
    equilibrium is smooth, b(c) = c + int_c^1 (1 - F)^2 / (1 - F(c))^2, by quadrature).
    From the truthful start every cost below about 0.05 best-responds with the others'
    lowest bid (an atom), so the first iterations' responses jump there, in the same cell
    for three iterations running; cutting the spline there kept that flat piece raw, and
    the pure method ended at exact epsilon 78% (L-inf 0.063; 12.9% before jumps were
    kept).  Jumps are logged only once the damped step is at its floor (the transient
    over): exact epsilon 9%, L-inf 0.004, no jump."""
    from bne_reference import GAMES
    from test_equilibrium_distributional import _conformance

    from market_sim.games.equilibrium import bne

    conf = _conformance()
    game = GAMES["power-0.3-3"]()
    r = bne(game.mechanism, game.population, np.random.default_rng(0), method="pure")
    assert r.options["jumps"] == [[]]
    assert conf.linf_where_reference_wins(game, r, 0) <= 0.01
    assert conf.exact_relative_gain(game, r, 0) <= 0.15


def test_the_costs_around_a_jump_best_respond_to_the_table_returned():
    """Pay-as-bid, 30 sellers, Beta(2, 5) on [0, 2] (docs/equilibrium.md, "Pay-as-bid on a
    Beta law"), from a table whose jump at about 0.03 is smeared over a ramp (as damped
    iterates leave it).  The costs below the jump sell against rivals of their own branch,
    so their best responses depend on that branch's bids: solved once against the
    smeared table (the old ``_sharpen``), they are not best responses to the table
    returned (mean |BR - b| 0.0018 on this sample; 0.0012-0.0016 on seeds 1, 2), solved
    again against each round's table they are (0.0007; 0.0003-0.0006).  The best
    responses are measured on the very sample ``_sharpen`` draws (same generator state),
    at 8 costs below the step."""
    import copy

    import market_sim.games.equilibrium_pure as pure
    from market_sim.games.equilibrium import _options
    from market_sim.games.equilibrium_game import (
        Oracle,
        Sample,
        best_response,
        prior_weights,
        reports_of,
    )
    from market_sim.games.equilibrium_setup import _setup

    rng = np.random.default_rng(0)
    setup = _setup("pay-as-bid", [("beta:2:5:0:2", 30)], None, rng, {}, None)
    oracle = Oracle(setup.mech)
    opt = _options({"eval_samples": 1024}).for_path(oracle.path, 1)
    law = setup.classes.laws[0]
    c = pure._focused(law, 0.6, 33)
    b = np.interp(c, [0, 0.02, 0.05, 0.6, 2], [0.04, 0.052, 0.2, 0.5, 2])  # the ramp
    state = pure._State([c], [b], [0.6], 0.6)
    i = int(np.searchsorted(c, 0.03))
    trace = pure._Trace(jump_log=[[[(float(c[i - 1]), float(c[i]))]]] * pure._PERSIST)
    drawn = copy.deepcopy(rng)
    steps = pure._sharpen(setup, opt, oracle, state, trace, rng)
    assert len(steps[0]) == 1 and 0.02 < steps[0][0] < 0.03
    markets, per_market = opt.markets(oracle, opt.eval_samples, setup.classes)
    fresh = Sample(setup.classes, markets, per_market, drawn)  # _sharpen's sample
    low = np.linspace(0.0, steps[0][0] - 0.002, 8)
    bids = np.interp(low, state.costs[0], state.bids[0])
    R = reports_of(fresh, setup.classes, state.bidfns())
    br = best_response(
        oracle, fresh, R, 0, low, bids, setup.z_range, 0.6, opt.bid_grid,
        prior_weights(law, low), 6,
    )  # fmt: skip
    assert np.mean(np.abs(br.bids - bids)) <= 0.001
