"""The envelope step (market_sim.games.equilibrium_envelope; docs/equilibrium.md, "The
distributional method", step 6d) against closed forms, and the distributional method on
the games it fixed (issue #48), each measured by an independent exact best response
(tests/bne_reference.py ``exact_gain``: its own E and T, its own report grid)."""

from __future__ import annotations

import numpy as np
import pytest
from bne_reference import GAMES, AllPayContest, uniform_bid

from market_sim.games.equilibrium import bne
from market_sim.games.equilibrium_envelope import envelope_step
from market_sim.games.equilibrium_game import as_classes
from market_sim.mechanisms.first_price import FirstPrice


def _step(mech, spec, n, costs, bids, damping=1.0):
    classes = as_classes([(spec, n)])[0]
    return envelope_step(mech.interim, classes, [(costs, bids)], (0.0, 1.0), damping)[0][1]


def test_one_step_from_truth_is_the_all_pay_equilibrium():
    """All-pay contest, 4 x U[0, 1], from the truthful table b(c) = c: the allocation of
    an increasing table is E(t) = (1 - t)^3 whatever its bids, so (E1) gives u(c) =
    (1 - c)^4 / 4 (u(1) = 0) and (E2) with T = E + z - 1 gives z = u + c E - E + 1 =
    1 - 3/4 (1 - c)^4, the closed form (2) of tests/bne_reference.py.  The only error is
    the trapezoid rule on 401 costs: (1 - c) h^2 / 12 x max E'' <= h^2 / 2 = 3e-6."""
    c = np.linspace(0, 1, 401)
    z = _step(AllPayContest(), "uniform:0:1", 4, c, c.copy())
    live = (1 - c) ** 3 >= 1e-4  # the costs the step moves
    assert np.max(np.abs(z[live] - (1 - 0.75 * (1 - c[live]) ** 4))) < 1e-4


def test_one_step_from_a_wrong_table_is_the_first_price_equilibrium():
    """First price, 3 x U[0, 1], from an increasing but wrong table (b = c^2 + 0.2):
    E(t) = (1 - t)^2, u(c) = (1 - c)^3 / 3, z = u / E + c = c + (1 - c) / 3 (the
    closed form; ``uniform_bid``).  The trapezoid rule's error on int_c^1 (1 - t)^2 dt
    is (1 - c) h^2 / 12 x 2 exactly (E'' = 2), so z errs by h^2 / (6 (1 - c))."""
    c = np.linspace(0, 1, 401)
    z = _step(FirstPrice(1), "uniform:0:1", 3, c, c**2 + 0.2)
    live = (1 - c) ** 2 >= 1e-4
    bound = (1 / 400) ** 2 / (6 * (1 - c[live])) + 1e-9
    assert np.all(np.abs(z[live] - uniform_bid(c[live], 3)) <= bound)


def test_damping_moves_part_of_the_way_and_dead_costs_stay():
    """Half a step lands halfway between the table and the equilibrium (2 x U[0, 1],
    first price: c + (1 - c) / 2; the trapezoid rule is exact on E = 1 - t); the top
    cost sells with probability E = 1 - F(1) = 0 and keeps its bid (made
    non-decreasing)."""
    c = np.linspace(0, 1, 201)
    start = c**2 + 0.2
    z = _step(FirstPrice(1), "uniform:0:1", 2, c, start, damping=0.5)
    live = (1 - c) >= 1e-4
    want = 0.5 * (start + uniform_bid(c, 2))
    assert np.max(np.abs(z[live] - want[live])) < 1e-9
    assert z[-1] == pytest.approx(max(start[-1], z[-2]))


def _exact_relative(game, r) -> float:
    """The independent measure: bne_reference's exact best response against the returned
    bid functions' exact report laws (benchmarks/bne_conformance.py)."""
    from test_equilibrium_distributional import _conformance

    conf = _conformance()
    return max(conf.exact_relative_gain(game, r, g) for g in range(len(game.laws)))


@pytest.mark.parametrize(
    "name, kw",
    [
        # issue #48's misses before the envelope step: exact eps 37.8% (power law), 15.1%
        # (3-unit pay-as-bid); fewer iterations here to keep it short (the all-pay
        # contest, 1.16% before: tests/test_equilibrium_distributional.py)
        ("power-0.3-3", dict(max_iter=1000)),
        ("pab-3unit-beta", dict(max_iter=400)),
    ],
)
def test_distributional_solves_the_symmetric_misses(name, kw):
    """Exact relative eps <= 1% (independent measure) and L∞ <= 0.01 on the costs where
    the reference wins >= 1%; the result says it took an envelope step."""
    from test_equilibrium_distributional import _conformance

    game = GAMES[name]()
    r = bne(game.mechanism, game.population, np.random.default_rng(0),
            method="distributional", samples=256, **kw)  # fmt: skip
    assert _conformance().linf_where_reference_wins(game, r, 0) <= 0.01
    assert _exact_relative(game, r) <= 0.01
    assert r.options["envelope_steps"] == 1
