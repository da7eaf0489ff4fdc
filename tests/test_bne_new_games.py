"""The conformance table's games nobody tuned for (docs/equilibrium.md, "Conformance";
tests/bne_reference.py, the games added by h48new), re-run by the default
``bne(..., method="auto")``: the cheap three, every setting the default but the
verification's draws.  Each within issue #48's bar by the independent measure: L∞ <= 0.01
to the reference where the reference wins >= 1% and the exact relative gain of the
returned profile (``bne_reference.exact_gain`` against the returned bids' exact report
laws, none of the solver's code) <= 1%; auto picks the distributional method (each
mechanism has an exact ``interim``)."""

from __future__ import annotations

import numpy as np
import pytest
from bne_reference import GAMES

from market_sim.games.equilibrium import bne


@pytest.mark.parametrize("name", ["all-pay-2", "pab-2unit-reserve", "power-reserve-4"])
def test_auto_solves_a_new_game_within_the_bar(name):
    from test_equilibrium_distributional import _conformance

    conf = _conformance()
    game = GAMES[name]()
    r = bne(game.mechanism, game.population, np.random.default_rng(0), samples=256)
    assert r.options["method"] == "distributional"
    assert conf.linf_where_reference_wins(game, r, 0) <= 0.01
    assert conf.exact_relative_gain(game, r, 0) <= 0.01
