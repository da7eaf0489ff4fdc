"""The joint audit (market_sim.joint_audit) on mechanisms built to fool it, each truth proved
in its docstring and checked against a closed form."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import numpy as np
import pytest

from market_sim.joint_audit import audit_types, grid_regret, joint_audit
from market_sim.mechanisms.base import Outcome
from market_sim.mechanisms.multifield import (
    CSRA,
    CapThreshold,
    FairQueryCaps,
    MultiFieldMechanism,
    VCGProcurement,
)
from market_sim.multifield import MultiFieldPopulation, records

POP = MultiFieldPopulation.parse("4*uniform:0:1;cap=uniform:0.1:5")


@dataclass(frozen=True)
class CapBonus(MultiFieldMechanism):
    """Truthful in cost, not in cap.  A seller reporting (c', k') sells eps = min(k', e) iff
    c' <= T(k') = p min(k', E) / min(k', e), paid T(k') eps = p min(k', E) (E > e).

    *Cost*: with the cap reported truly, the quantity q = min(k, e) and the per-unit
    threshold T(k) are fixed, so it is a threshold rule paying the threshold: no cost
    report gains.  *Cap*: a true (c, k) with k >= e reporting k' >= E sells eps = e <= k
    and is paid p E; the largest utility over all reports is max(0, p E - c e), the
    truth's max(0, p min(k, E) - c e); for k < e any report k' > k exceeds the cap (-inf)
    and k' <= k earns at most the truth's (p - c)+ k.  So the exact regret is
    g(c, k) = [k >= e] (max(0, pE - ce) - max(0, p min(k, E) - ce))."""

    name: ClassVar[str] = "cap-bonus"
    report_fields: ClassVar[tuple[str, ...]] = ("cost", "cap")
    p: float = 0.5
    e: float = 1.0
    E: float = 3.0

    def outcome(self, reports, rng=None):
        q = np.minimum(reports["cap"], self.e)
        paid = self.p * np.minimum(reports["cap"], self.E)
        sells = reports["cost"] * q <= paid
        return Outcome(np.where(sells, q, 0.0), np.where(sells, paid, 0.0))

    def exact_regret(self, c, k):
        best = np.maximum(0.0, self.p * self.E - c * self.e)
        truth = np.maximum(0.0, self.p * np.minimum(k, self.E) - c * self.e)
        return np.where(k >= self.e, best - truth, 0.0)


@dataclass(frozen=True)
class JointOnly(MultiFieldMechanism):
    """A posted price p per unit (eps = min(k', e)) plus a bonus ``bonus`` (eps = 0) to any
    report with c' >= h and k' >= H.  A seller with c < h and k < H gains nothing by
    changing one field (the cost alone keeps k' = k < H, the cap alone keeps c' = c < h:
    both land in the posted price, truthful in each field), but gains
    bonus - (p - c)+ min(k, e) by changing both."""

    name: ClassVar[str] = "joint-only"
    report_fields: ClassVar[tuple[str, ...]] = ("cost", "cap")
    p: float = 0.5
    e: float = 1.0
    h: float = 0.9
    H: float = 4.5
    bonus: float = 2.0

    def outcome(self, reports, rng=None):
        c, k = reports["cost"], reports["cap"]
        extra = (c >= self.h) & (k >= self.H)
        sells = (c <= self.p) & ~extra
        eps = np.where(sells, np.minimum(k, self.e), 0.0)
        return Outcome(eps, self.p * eps + np.where(extra, self.bonus, 0.0))


@dataclass(frozen=True)
class PeakBonus(MultiFieldMechanism):
    """eps = 0 and a payment bonus max(0, 1 - |k' - k0| / w): the best report is k' = k0
    exactly, worth ``bonus``; the truth earns bonus max(0, 1 - |k - k0| / w)."""

    name: ClassVar[str] = "peak-bonus"
    report_fields: ClassVar[tuple[str, ...]] = ("cost", "cap")
    k0: float = 2.3
    w: float = 0.3
    bonus: float = 1.0

    def outcome(self, reports, rng=None):
        pay = self.bonus * np.maximum(0.0, 1 - np.abs(reports["cap"] - self.k0) / self.w)
        return Outcome(np.zeros(reports.shape), pay)


def test_ic_in_cost_alone_is_not_ic_in_cap():
    mech = CapBonus()
    types = POP.draw(30, np.random.default_rng(0))
    cost_only = audit_types(mech, POP, types, np.random.default_rng(1), private=("cost",))
    assert not cost_only.ic_refuted and cost_only.max_gain == 0
    assert "not a proof" in cost_only.ic_verdict
    joint = audit_types(mech, POP, types, np.random.default_rng(1))
    exact = mech.exact_regret(types["cost"], types["cap"])
    assert joint.regret == pytest.approx(exact, abs=1e-9)  # the grid reaches cap >= E
    w = joint.ic_witness
    assert w is not None and joint.ic_verdict.startswith("not IC")
    assert w.gain == pytest.approx(exact.max(), abs=1e-9)
    assert w.report["cap"] >= mech.E and w.true["cap"] >= mech.e
    assert joint.candidates["cost"] == 25 and joint.candidates["cap"] == 25


def test_truthful_in_both_is_not_refuted_and_not_certified():
    """CapThreshold is truthful in cost and cap (proof in its docstring)."""
    a = joint_audit(CapThreshold(k=2), POP, 40, np.random.default_rng(2))
    assert not a.ic_refuted and not a.ir_refuted and a.max_gain == 0
    assert "not a proof of IC" in a.ic_verdict and a.ir_verdict.startswith("IR on these markets")


def test_a_joint_misreport_that_no_single_field_finds():
    mech = JointOnly()
    types = POP.draw(40, np.random.default_rng(3))
    inside = (types["cost"] < mech.h) & (types["cap"] < mech.H)
    truthful = np.maximum(0.0, mech.p - types["cost"]) * np.minimum(types["cap"], mech.e)
    # the per-field grids alone (a one-point joint grid is the lower corner, no local moves)
    single = audit_types(mech, POP, types, np.random.default_rng(4), joint_grid=1, local_steps=0)
    assert np.all(single.regret[inside] == 0)
    joint = audit_types(mech, POP, types, np.random.default_rng(4))
    assert joint.regret[inside] == pytest.approx(mech.bonus - truthful[inside], abs=1e-9)


def test_local_search_climbs_to_an_off_grid_peak():
    mech = PeakBonus()
    types = POP.draw(10, np.random.default_rng(5))
    exact = mech.bonus - mech.outcome(types).payments  # best report k' = k0 exactly
    grid_only = audit_types(mech, POP, types, np.random.default_rng(6), local_steps=0)
    searched = audit_types(mech, POP, types, np.random.default_rng(6), local_steps=12)
    assert np.all(grid_only.regret < exact - 0.05)  # k0 = 2.3 is 0.058 from the grid
    assert np.all(searched.regret <= exact + 1e-12)  # never above the truth
    assert searched.regret == pytest.approx(exact, abs=0.02)


def test_a_needle_is_missed_and_nothing_is_certified():
    """A peak 2e-6 wide, 0.058 away from every grid point: the audit misses it (the truth:
    every seller gains up to 1) and must not claim IC."""
    mech = PeakBonus(w=1e-6)
    a = joint_audit(mech, POP, 5, np.random.default_rng(7), local_steps=4)
    assert not a.ic_refuted
    assert "evidence on these markets, not a proof of IC" in a.ic_verdict


def test_cap_exceeded_is_an_unbounded_ir_violation():
    """costs .1 .2 .3 .4, B = 0.5: VCG buys two at eps 1/2 (test_multifield); seller 0's
    cap is 0.2 < 1/2, so its truthful utility is -inf."""
    types = records(cost=[[0.1, 0.2, 0.3, 0.4]], cap=[[0.2, 1.0, 1.0, 1.0]])
    a = audit_types(VCGProcurement(budget=0.5), POP, types, np.random.default_rng(0))
    w = a.ir_witness
    assert w is not None and w.seller == 0 and w.utility_truth == -np.inf
    assert "unbounded" in a.ir_verdict and a.share_cap_exceeded == pytest.approx(1 / 4)
    assert np.isnan(a.regret[0, 0])  # no finite regret is measured from an unbounded loss
    # ... but reporting a cost above r_(3) = 0.3 takes seller 0 out of the purchase
    # (utility 0 > -inf): an escape, so not IC either, and the verdict says so
    assert a.escaping[0, 0] and a.share_escaping == pytest.approx(1 / 4)
    w = a.ic_witness
    assert w is not None and w.seller == 0 and w.gain == np.inf and w.report["cost"] > 0.3
    assert "escape that unbounded loss" in a.ic_verdict


def test_the_peers_measure_by_hand():
    """FL-Market's FairQuery scale (the largest cap) moves with one seller's cap: the
    cost-only measure cannot see it, the joint audit can.  Peers' normalisation: a
    winner's regret is divided by v eps."""
    types = POP.draw(30, np.random.default_rng(8))
    mech = FairQueryCaps(budget=2.0)
    peer = grid_regret(mech, types)
    assert np.all(peer.regret >= 0) and np.all(peer.ir_violation == 0)
    joint = audit_types(mech, POP, types, np.random.default_rng(9))
    assert joint.ic_refuted
    w = joint.ic_witness
    assert w.report["cap"] != w.true["cap"]


def test_a_private_size_is_searched_on_whole_numbers():
    """CSRA pays in proportion to the reported size too (q_i grows with |D_i|): with the
    size private the audit searches it (whole numbers only) and finds gains from it."""
    pop = MultiFieldPopulation.parse(
        "4*uniform:0:1;cap=uniform:0.1:5;size=integers:10:500;private=cost,cap,size"
    )
    types = pop.draw(6, np.random.default_rng(10))
    a = audit_types(CSRA(budget=5.0), pop, types, np.random.default_rng(11), local_steps=3)
    assert a.private == ("cost", "cap", "size") and a.candidates["size"] == 25
    assert a.ic_refuted and float(a.ic_witness.report["size"]).is_integer()


def test_a_randomized_mechanism_is_refused():
    from market_sim.errors import MarketSimError
    from market_sim.mechanisms.multifield import OneField

    class Coin(CapThreshold):
        randomized = True

    with pytest.raises(MarketSimError, match="randomized"):
        joint_audit(Coin(k=2), POP, 2, np.random.default_rng(0))
    assert OneField(Coin(k=2)).randomized  # a wrapper reports the wrapped flag


def test_compare_jointly_scores_eq_11_on_the_same_markets_and_ranks_the_truthful_first():
    """Eq. 11 (003) with the payments made, by hand: mu ||eps||_2 / sum eps + sigma / sum eps
    + gamma sum t, on the same types the comparison drew (same seed, drawn first)."""
    from market_sim.joint_audit import compare_jointly
    from market_sim.mechanisms.multifield import PostedPricePerUnit

    mechs = ["fair-query-caps:budget=5", PostedPricePerUnit(price=0.6), CapThreshold(k=2)]
    res = compare_jointly(mechs, POP, 6, np.random.default_rng(12), gamma=0.5, local_steps=2)
    types = POP.draw(6, np.random.default_rng(12))
    out = PostedPricePerUnit(price=0.6).run(types)
    eta = out.eps.sum(axis=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        by_hand = np.linalg.norm(out.eps, axis=1) / eta + 1 / eta + 0.5 * out.payments.sum(axis=1)
    by_hand = np.where(eta > 0, by_hand, np.inf)  # nothing bought: inf (buyer_loss)
    assert res.objective[1] == pytest.approx(by_hand)
    rows = res.rows()
    assert rows[-1]["mechanism"] == "fair-query-caps:budget=5"  # not IC in cap: last
    assert rows[-1]["ic"] == "not IC"
    truthful = rows[:2]
    assert truthful[0]["objective"] <= truthful[1]["objective"]


# ---- best-response play ----------------------------------------------------------------
PEERS = MultiFieldPopulation.parse("8*uniform:0:1;cap=uniform:0.1:5;size=integers:10:500")


def test_play_under_a_truthful_mechanism_stays_truthful():
    """cap-threshold is truthful in cost and cap whatever the others report (dominant
    strategy, proof in its docstring): no report is strictly better than the truth, so
    best-responding sellers keep reporting it, and nobody loses."""
    from market_sim.joint_audit import play_fields

    play = play_fields(CapThreshold(k=3), PEERS, 3, np.random.default_rng(13), local_steps=2)
    rows = play.rows()
    assert [r["share_misreporting"] for r in rows] == [0.0, 0.0, 0.0]
    assert all(r["min_utility"] >= 0 for r in rows)


def test_play_records_what_the_mechanism_gives_and_lies_only_where_it_pays():
    from market_sim.joint_audit import play_fields
    from market_sim.mechanisms.multifield import utilities

    mech = CSRA(budget=5.0)
    play = play_fields(mech, PEERS, 2, np.random.default_rng(14), local_steps=2)
    truth = play.types
    for r in range(2):  # every round's numbers are the mechanism's on those reports
        out = mech.run(play.reports[r])
        assert np.array_equal(play.eps[r], out.eps)
        assert np.array_equal(play.utility[r], utilities(out, truth))
    liars = np.flatnonzero(play.reports[0] != truth)
    assert liars.size > 0  # CSRA pays for the reported cap
    for i in liars:  # round 1: each lie beats the truth against truthful others
        lie = truth.copy()
        lie[i] = play.reports[0][i]
        gain = utilities(mech.run(lie), truth)[i] - utilities(mech.run(truth), truth)[i]
        assert gain > 1e-9
    calm = play_fields(mech, PEERS, 1, np.random.default_rng(14), strategic_share=0.0)
    assert np.array_equal(calm.reports[0], calm.types)
