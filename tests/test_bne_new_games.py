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


def test_the_table_has_an_auto_column_only_when_auto_ran():
    """``--methods auto`` rows get their own column, each cell naming the method auto
    returned; a failing cell is marked ✗ (L∞ 0.02 > 0.01), an infinite exact epsilon
    (sellers losing on average) too; the CPU lines name every game and method."""
    from test_equilibrium_distributional import _conformance

    conf = _conformance()
    row = dict(game="g", cls=0, law="uniform:0:1", count=2, mechanism="first-price",
               linf=0.001, eps_verified=0.002, eps_exact=0.001, seconds=1.0, cpu=0.5,
               stopped_by="tables_epsilon")  # fmt: skip
    auto = dict(row, method="auto", chosen="distributional")
    pure = dict(row, method="pure", chosen="pure", linf=0.02)
    lossy = dict(row, game="h", method="pure", chosen="pure", eps_exact=float("inf"))
    table = conf.markdown([auto, pure, lossy])
    assert "auto: L∞" in table.splitlines()[0]
    g = next(line for line in table.splitlines() if line.startswith("| g |"))
    assert g.endswith("✓ (distributional) |") and "0.0200 / 0.20% / 0.10% / 1.0 ✗" in g
    h = next(line for line in table.splitlines() if line.startswith("| h |"))
    assert "inf% / 1.0 ✗" in h
    assert "auto: L∞" not in conf.markdown([pure])
    assert "- g / auto: 0.5 CPU s, 1.0 s wall, returned distributional" in conf.cpu_lines(
        [auto, pure]
    )
