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
    the denser density: it finds no gain, which agrees with any coarser epsilon, so the
    coarser density is not evaluated (before: an evaluation per density, two)."""
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


@pytest.mark.parametrize(
    ("by_cells", "evaluated", "cells", "agreed"),
    [
        ({66: 0.0}, [66], 66, True),  # no gain at 66: agrees with any 33, not evaluated
        ({66: 1e-4}, [66], 66, True),  # within the 1e-4 slack of any coarser epsilon
        ({66: 0.02, 33: 0.019}, [66, 33], 66, True),  # 0.02 <= 1.1 x 0.019 + 1e-4
        ({66: 0.05, 33: 0.01, 132: 0.0501}, [66, 33, 132], 132, True),
        ({66: 0.05, 33: 0.01, 132: 0.09}, [66, 33, 132], 132, False),  # rounds spent
    ],
)
def test_the_coarser_density_is_evaluated_only_when_it_can_matter(
    by_cells, evaluated, cells, agreed
):
    """``_refined``'s decisions are the rule's (the denser epsilon / u at most 10% and 1e-4
    above the coarser), each checked by hand above; the coarser density is evaluated
    only when the denser epsilon / u exceeds 1e-4 (at most that agrees with any
    epsilon >= 0)."""
    from market_sim.games.equilibrium_game import EpsilonResult
    from market_sim.games.equilibrium_pure import _refined

    calls: list[int] = []

    def at(n):
        calls.append(n)
        e = by_cells[n]
        z = np.zeros(1)
        return EpsilonResult(e, (e, e), e, z, z, z, z)

    r = _refined(at, 33, 2)
    assert calls == evaluated
    assert (r.eval_cells, r.agreed, r.epsilon_relative) == (cells, agreed, by_cells[cells])
