"""The red-team corpus (tests/redteam/): each mechanism's truth checked by an exact brute
force from ``outcome`` alone, then ``market_sim.audit`` on it at two seeds.

The brute force (``redteam.brute``) is independent of the audit: a dense grid of own
costs x own reports (each case's critical points added) over the opponent profiles its
proof names.  For a truthful case no grid point may gain more than 1e-9 of the incentive
scale; for a non-IC one the docstring's witness must gain exactly the value proved; IR
alike.  The audit must give a verdict the truth allows (``Case.allowed``); the verdicts
today's audit gets wrong are strict xfails listed in tests/redteam/KNOWN_WRONG.md."""

import numpy as np
import pytest
from redteam import CASES, SEEDS, known_wrong, run_audit
from redteam.brute import brute_force, check_expectation, gain_at, utility_at

from market_sim.distributions import parse_distribution
from market_sim.errors import MarketSimError
from market_sim.population import as_population


def _supports(case):
    """Each seller's own support (a population's sellers: their class's)."""
    if "*" in case.law:
        pop = as_population(case.law)
        return [tuple(map(float, pop.laws[g].support)) for g in pop.group]
    lo, hi = map(float, parse_distribution(case.law).support)
    return [(lo, hi)] * case.n_sellers


def _grids(case, supports):
    """Each seller's own grid: ``n_grid`` points of its support, and every critical point
    of the case (its ``points``, the witnesses' costs and reports), each with neighbours
    w 10^-k either side (k = 2..9): a cost just past a jump is where a wrong price shows."""
    extra = list(case.points)
    for w in (case.gain, case.ir_fail):
        if w is not None:
            extra += [w.cost] + ([w.report] if hasattr(w, "report") else [])
    grids = {}
    for i, (lo, hi) in enumerate(supports):
        steps = (hi - lo) * 10.0 ** -np.arange(2, 10)
        near = [x + sign * steps for x in extra for sign in (-1, 1)]
        own = np.r_[np.linspace(lo, hi, case.n_grid), extra, *near]
        grids[i] = np.unique(own[(own >= lo) & (own <= hi)])
    return grids


def _scale(supports, i, found):
    """Seller i's incentive scale: its own support's width x the largest |eps| it saw
    (plus 1e-12 of its largest payment: the float error of a payment)."""
    lo, hi = supports[i]
    return (hi - lo) * found.eps_max + 1e-12 * found.pay_max


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_truth_by_brute_force(case):
    mech = case.make()
    supports, profiles = _supports(case), list(case.profiles)
    witnesses = [w for w in (case.gain, case.ir_fail) if w is not None]
    profiles += [w.profile for w in witnesses]
    grids = _grids(case, supports)
    found = {i: brute_force(mech, i, profiles, grids[i])
             for i in sorted({*case.brute_sellers, *(w.seller for w in witnesses)})}  # fmt: skip
    for i, f in found.items():
        if case.ic:
            assert f.max_gain <= 1e-9 * _scale(supports, i, f), f
        if case.ir:
            assert f.min_utility >= -1e-9 * _scale(supports, i, f), f
    if not case.ic:
        w, f = case.gain, found[case.gain.seller]
        scale = _scale(supports, w.seller, f)
        g = gain_at(mech, w.seller, w.cost, w.report, w.profile)
        assert g == pytest.approx(w.gain, rel=1e-9, abs=1e-9 * scale)
        assert g > 1e-6 * scale and f.max_gain >= g * (1 - 1e-9)
    if not case.ir:
        w, f = case.ir_fail, found[case.ir_fail.seller]
        scale = _scale(supports, w.seller, f)
        u = utility_at(mech, w.seller, w.cost, w.profile)
        assert u == pytest.approx(w.utility, rel=1e-9, abs=1e-9 * scale)
        assert u < -1e-6 * scale and f.min_utility <= u * (1 - 1e-9)
    if hasattr(mech, "expected"):  # randomized, declared or not (``fresh.UndeclaredRandom``)
        for p in profiles[:1]:
            check_expectation(mech, p)


KNOWN = known_wrong()


def _marks(case, seed):
    why = KNOWN.get((case.name, seed))
    return [pytest.mark.xfail(strict=True, reason=f"today's audit {why}")] if why else []


@pytest.mark.parametrize(
    "case, seed",
    [pytest.param(c, s, marks=_marks(c, s), id=f"{c.name}-{s}") for c in CASES for s in SEEDS],
)
def test_audit_verdict(case, seed):
    if case.refused:
        with pytest.raises(MarketSimError, match=case.refused):
            run_audit(case, seed)
        return
    s = run_audit(case, seed).summary
    ic, ir = case.allowed()
    assert s["verdict"] in ic and s["ir_verdict"] in ir, (s["verdict"], s["ir_verdict"], ic, ir)


def test_known_wrong_names_cases():
    names = {c.name for c in CASES}
    assert {name for name, _ in KNOWN} <= names


def _proof(case) -> str:
    """The docstring that proves the case's truth: its class's, or (a modified library
    instance) its factory's."""
    mech = case.make()
    if type(mech).__module__.startswith("redteam"):
        return type(mech).__doc__ or ""
    make = case.make
    while hasattr(make, "func"):
        make = make.func
    return make.__doc__ or ""


def test_the_corpus_covers_its_classes():
    """At least 40 mechanisms in 12 classes, about half IC and IR, each with a proof
    (a docstring naming its truth) and, when not IC or not IR, its exact witness."""
    assert len(CASES) >= 40 and len({c.cls for c in CASES}) >= 12
    assert 0.4 <= sum(c.ic and c.ir for c in CASES) / len(CASES) <= 0.6
    for c in CASES:
        doc = _proof(c)
        assert ("IC" in doc or "IR" in doc) and len(doc) > 80, c.name
        assert c.ic == (c.gain is None) and c.ir == (c.ir_fail is None), c.name
