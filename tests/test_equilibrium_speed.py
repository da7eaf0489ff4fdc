"""The BNE solver's work counts (issue #48, speed): not timed, counted.  Each test fails
on the code before its fix."""

from __future__ import annotations

import numpy as np
import pytest

from market_sim.games.equilibrium import bne
from market_sim.mechanisms import payments


@pytest.fixture
def curve_builds(monkeypatch):
    """The report vectors whose offline payment curves were built, one entry a build."""
    built: list[bytes] = []
    original = payments.OfflineCurves

    class Counted(original):  # type: ignore[misc, valid-type]
        def __init__(self, reports, *args, **kwargs):
            built.append(np.asarray(reports, dtype=float).tobytes())
            super().__init__(reports, *args, **kwargs)

    monkeypatch.setattr(payments, "OfflineCurves", Counted)
    return built


def test_an_ic_mechanism_builds_each_markets_payment_curves_once(curve_builds):
    """offline (Myerson payments, IC) at the truth: one iteration, one verification, and
    each sampled market's payment curves built once, not once per query (the search,
    its refinement rounds and the re-measurement ask the same market five times a
    density; before, each query rebuilt them: 12 builds a market)."""
    r = bne("offline", [("uniform:1:5", 3)], np.random.default_rng(0), samples=16)
    assert (r.iterations, r.stopped_by, r.converged) == (1, "verified", True)
    assert len(curve_builds) == len(set(curve_builds))  # no market built twice
    assert r.epsilon <= 1e-9


def test_an_ic_mechanism_is_verified_by_one_evaluation(monkeypatch):
    """uniform-price (dominant-strategy IC) at the truth: one iteration and one
    verification, and in it one evaluation of the deviations' gains (``measure``), at
    the denser density; the coarser density's epsilon is that evaluation's on its own
    costs (before: an evaluation per density, two)."""
    from market_sim.games import equilibrium_pure

    measured: list[int] = []
    original = equilibrium_pure.measure

    def counted(oracle, fresh, R, g, law, costs, *args, **kwargs):
        measured.append(costs.size)
        return original(oracle, fresh, R, g, law, costs, *args, **kwargs)

    monkeypatch.setattr(equilibrium_pure, "measure", counted)
    r = bne("uniform-price", [("uniform:0:1", 3)], np.random.default_rng(0), samples=64)
    assert (r.iterations, r.stopped_by, r.converged) == (1, "verified", True)
    assert len(measured) == 1
    assert r.check.eval_cells == 2 * r.options["eval_grid"] and r.check.agreed
    assert measured[0] == r.check.eval_costs.size
    assert r.epsilon == 0.0
