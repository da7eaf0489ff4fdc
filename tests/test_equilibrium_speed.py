"""The BNE solver's work counts (issue #48, speed): not timed, counted.  Each test fails
on the code before its fix."""

from __future__ import annotations

import numpy as np
import pytest

from market_sim.games.equilibrium import bne
from market_sim.mechanisms import payments
from market_sim.mechanisms.base import Mechanism, Outcome


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
    each sampled market's payment curves built once, not once per query (the search
    and its three refinement rounds ask a search market four times a density; before,
    each query rebuilt them: 384 builds for 96 markets at samples=128)."""
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


class _CountedPostedPrice(Mechanism):
    """A posted price 0.5 (a report <= 0.5 sells one unit at 0.5), deterministic, whose
    ``deviations`` records how many candidate reports it was asked."""

    name = "counted-posted-price"

    def __init__(self):
        self.asked: list[int] = []

    def outcome(self, reports, rng=None):
        eps = (np.asarray(reports, dtype=float) <= 0.5).astype(float)
        return Outcome(eps, 0.5 * eps)

    def deviations(self, sellers, candidates, reports, rng=None):
        cand = np.atleast_2d(np.asarray(candidates, dtype=float))
        self.asked.append(cand.shape[1])
        eps = (cand <= 0.5).astype(float)
        return Outcome(eps, 0.5 * eps)


def test_a_deterministic_mechanisms_deviations_are_asked_once_per_report():
    """On the ``deviations`` path a report already evaluated against the same sample and
    opponents is taken from memory (the verification asks its denser density's reports
    again at the coarser one): asked again with 3 old reports and 1 new, the mechanism
    is asked only the new one, and the numbers are the ones it gives.  Before, every
    call asked every report of every market."""
    from market_sim.games.equilibrium_game import Oracle, Sample, as_classes, reports_of

    classes, _ = as_classes([("uniform:0:1", 3)])
    mech = _CountedPostedPrice()
    oracle = Oracle(mech)
    assert oracle.path == "deviations"
    sample = Sample(classes, 8, 1, np.random.default_rng(0))
    R = reports_of(sample, classes, [lambda c: np.asarray(c, dtype=float)])
    E1, T1 = oracle.eps_pay(sample, R, 0, np.array([0.2, 0.4, 0.6]))
    n_first = len(mech.asked)
    E2, T2 = oracle.eps_pay(sample, R, 0, np.array([0.6, 0.3, 0.2, 0.4]))
    assert mech.asked[n_first:] == [1] * sample.markets  # 0.3 only, once a market
    np.testing.assert_array_equal(E2[:, [0, 2, 3]], E1[:, [2, 0, 1]])
    np.testing.assert_array_equal(E2[:, 1], 1.0)  # 0.3 <= 0.5 sells
    np.testing.assert_array_equal(T2, 0.5 * E2)
    assert oracle.calls == sample.markets * 4


class _Unpicklable(_CountedPostedPrice):
    """As above, but its pickling state is refused (as an ONNX session's would be rebuilt
    from its file): the solver's per-market objects must not go through it."""

    def __getstate__(self):
        raise AssertionError("a per-market object went through __getstate__")


def test_per_market_objects_share_the_mechanisms_attributes_without_pickling():
    """``Sample.mechanism`` gives each market its own object (a cache of the last market
    stays per market) built from the attributes, not by ``__getstate__`` /
    ``__setstate__``; the objects share the attributes (here the record of asks)."""
    from market_sim.games.equilibrium_game import Oracle, Sample, as_classes, reports_of

    classes, _ = as_classes([("uniform:0:1", 3)])
    mech = _Unpicklable()
    sample = Sample(classes, 4, 1, np.random.default_rng(0))
    R = reports_of(sample, classes, [lambda c: np.asarray(c, dtype=float)])
    Oracle(mech).eps_pay(sample, R, 0, np.array([0.2, 0.7]))
    twins = [sample.mechanism(mech, s) for s in range(sample.markets)]
    assert len({id(t) for t in twins}) == sample.markets and mech not in twins
    assert all(type(t) is _Unpicklable and t.asked is mech.asked for t in twins)
    assert mech.asked == [2] * sample.markets
