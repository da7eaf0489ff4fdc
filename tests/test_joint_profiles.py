"""The joint audit's adversarial opponent profiles (joint_audit.opponent_profiles)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import numpy as np
import pytest

from market_sim.joint_audit import audit_types, opponent_profiles
from market_sim.mechanisms.base import Outcome
from market_sim.mechanisms.multifield import MultiFieldMechanism, PostedPricePerUnit
from market_sim.multifield import MultiFieldPopulation

POP = MultiFieldPopulation.parse("5*uniform:0:1;cap=uniform:0.1:5;size=integers:10:500")


@dataclass(frozen=True)
class FloorTrap(MultiFieldMechanism):
    """A posted price per unit with caps (truthful, PostedPricePerUnit's proof), except
    when every other seller reports the cost 0: then seller i sells nothing and is paid
    its reported cap.

    *Truth.*  Costs are drawn from U[0, 1], so a drawn market has all others at cost 0
    with probability 0: there the mechanism is the posted price and no report gains.
    Against others all at cost 0 (the ``floor`` profile and the mixed corner with the
    cost at the floor), seller i's utility is its reported cap with eps = 0 (never above
    its cap): the truth gets cap_i, the best report the cap support's top 5, a gain of
    exactly 5 - cap_i.  Any other profile leaves at least one other above 0: no gain."""

    name: ClassVar[str] = "floor-trap"
    report_fields: ClassVar[tuple[str, ...]] = ("cost", "cap")

    def outcome(self, reports, rng=None) -> Outcome:
        base = PostedPricePerUnit().outcome(reports)
        c = reports["cost"]
        others_at_zero = (c <= 0).sum(axis=-1, keepdims=True) - (c <= 0) == c.shape[-1] - 1
        eps = np.where(others_at_zero, 0.0, base.eps)
        return Outcome(eps, np.where(others_at_zero, reports["cap"], base.payments))


def test_the_profiles_find_a_gain_no_drawn_market_shows():
    types = POP.draw(2, np.random.default_rng(1))
    settings = dict(field_grid=5, joint_grid=3, local_steps=1)
    drawn = audit_types(FloorTrap(), POP, types, np.random.default_rng(2), **settings)
    assert not drawn.ic_refuted and drawn.max_gain == 0
    found = audit_types(
        FloorTrap(), POP, types, np.random.default_rng(2), profiles=True, **settings
    )
    assert found.ic_refuted and found.ic_witness.profile in ("floor", "corner:cost=floor,cap=top")
    expected = 5.0 - types["cap"]  # the closed form of the docstring, every seller
    assert found.profile_regret["floor"] == pytest.approx(expected)
    assert found.profile_regret["corner:cost=floor,cap=top"] == pytest.approx(expected)
    for label in ("top", "tied", "one_at_top", "band_50", "corner:cost=top,cap=floor"):
        assert np.all(found.profile_regret[label] == 0), label
    w = found.ic_witness
    assert w.gain == pytest.approx(5.0 - w.true["cap"]) and "opponent profile" in w.describe()
    calm = audit_types(
        PostedPricePerUnit(), POP, types, np.random.default_rng(2), profiles=True, **settings
    )
    assert not calm.ic_refuted and "and 10 opponent profiles per seller" in calm.ic_verdict


def test_the_profiles_are_what_their_names_say():
    types = POP.draw(3, np.random.default_rng(0))
    lo_c, hi_c = POP.support("cost")
    lo_k, hi_k = POP.support("cap")
    seller = 2
    profiles = opponent_profiles(POP, ("cost", "cap"), types, seller)
    others = np.delete(np.arange(5), seller)
    assert len(profiles) == 4 + 1 + 2 + 3  # corners, tied, one at each end, bands
    for prof in profiles.values():
        assert np.array_equal(prof[:, seller], types[:, seller])  # its own: the truth
        assert np.array_equal(prof["size"], types["size"])  # verified fields stay true
    assert np.all(profiles["floor"]["cost"][:, others] == lo_c)
    assert np.all(profiles["floor"]["cap"][:, others] == lo_k)
    assert np.all(profiles["corner:cost=top,cap=floor"]["cost"][:, others] == hi_c)
    assert np.all(profiles["corner:cost=top,cap=floor"]["cap"][:, others] == lo_k)
    tied = profiles["tied"]
    assert np.all(tied["cap"][:, others] == types["cap"][:, seller : seller + 1])
    band = profiles["band_25"]["cap"][:, others]
    assert band == pytest.approx(np.full(band.shape, lo_k + 0.25 * (hi_k - lo_k)))
    for m in range(3):  # one other moved: the one of highest cost, to the floor
        moved = np.flatnonzero(profiles["one_at_floor"][m] != types[m])
        assert list(moved) == [others[np.argmax(types["cost"][m, others])]]
        assert profiles["one_at_floor"][m, moved[0]]["cost"] == lo_c
