"""One-field mechanisms through the joint audit: their own ``deviations`` (an offline
mechanism's payment curves) instead of a whole-market run per candidate, with the same
outcomes; a zero cost where the offline limit sells eps = +inf is above every cap."""

from __future__ import annotations

import numpy as np

from market_sim.joint_audit import _candidate_grid, _candidates, audit_types
from market_sim.mechanisms.base import Mechanism, Outcome
from market_sim.mechanisms.multifield import OneField, as_multifield_mechanism, utilities
from market_sim.multifield import MultiFieldPopulation, records

POP = "6*uniform:0.1:1;cap=uniform:0.1:5;size=integers:10:500"


def test_offline_deviations_equal_whole_market_runs():
    pop = MultiFieldPopulation.parse(POP)
    mech = as_multifield_mechanism("offline", population=pop.population)
    assert isinstance(mech, OneField)
    types = pop.draw(2, np.random.default_rng(1))
    grid, _ = _candidate_grid(pop, pop.private, 5, 3)
    cand = _candidates(types[:, 2], grid, pop.private)  # cap-only rows repeat a cost
    fast = mech.deviations_of(types, 2, cand)
    profiles = np.repeat(types[:, None, :], cand.shape[1], axis=1)
    profiles[:, :, 2] = cand
    slow = mech.run(profiles)
    assert np.allclose(fast.eps, slow.eps[:, :, 2], rtol=1e-6, atol=1e-9)
    assert np.allclose(fast.payments, slow.payments[:, :, 2], rtol=1e-6, atol=1e-9)


class CountingPostedPrice(Mechanism):
    """Posted price 0.5 per unit, eps 1 (truthful); counts whole-market runs."""

    name = "counting-posted-price"
    calls = 0

    def outcome(self, reports, rng=None) -> Outcome:
        type(self).calls += 1
        sells = np.asarray(reports) <= 0.5
        return Outcome(sells * 1.0, sells * 0.5)

    def deviations(self, sellers, candidates, reports, rng=None) -> Outcome:
        sells = np.asarray(candidates, dtype=float) <= 0.5
        return Outcome(sells * 1.0, sells * 0.5)


def test_the_joint_audit_asks_a_one_field_mechanism_for_deviations_not_runs():
    """Before, every candidate of every seller was a whole-market run (6 sellers x 3
    markets x 60+ candidates); now the whole-market runs are the witnesses' only."""
    pop = MultiFieldPopulation.parse(POP)
    CountingPostedPrice.calls = 0
    types = pop.draw(3, np.random.default_rng(0))
    audit = audit_types(OneField(CountingPostedPrice()), pop, types, np.random.default_rng(0),
                        field_grid=9, joint_grid=5, local_steps=4)  # fmt: skip
    assert audit.candidates["total"] > 60
    assert CountingPostedPrice.calls <= 3 * 6  # at most a re-run per seller and market
    assert not audit.ic_refuted  # truthful: eps 1 may exceed a cap, but never by reporting


def test_an_infinite_eps_is_above_every_cap():
    """The offline limit at a zero cost sells eps = +inf: -inf utility, never a gain, and
    not nan (0 x inf) where argmax would pick it."""
    out = Outcome(np.array([np.inf, 1.0]), np.array([0.3, 0.2]))
    u = utilities(out, records(cost=[0.0, 0.1], cap=[5.0, 5.0]))
    assert np.array_equal(u, [-np.inf, 0.2 - 0.1])
    assert np.isneginf(utilities(out, records(cost=[0.0, 0.1]))[0])


def test_offline_on_a_support_reaching_zero_is_audited():
    """It raised ('eps must be finite') at the cost grid's 0 and took minutes per market."""
    pop = MultiFieldPopulation.parse("5*uniform:0:1;cap=uniform:0.1:5;size=integers:10:500")
    mech = as_multifield_mechanism("offline", population=pop.population)
    types = pop.draw(1, np.random.default_rng(2))
    audit = audit_types(mech, pop, types, np.random.default_rng(0),
                        field_grid=9, joint_grid=3, local_steps=0)  # fmt: skip
    assert np.all(np.isfinite(audit.truthful_utility) | np.isneginf(audit.truthful_utility))
    assert audit.candidates["cost"] == 9
