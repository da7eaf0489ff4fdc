"""Truthful twins of the traps: the same shapes (a step, a tie, an overridden
``deviations``, tiny units, a relative markup, a bonus at the floor or on the others'
reports) arranged so that the mechanism is IC and IR.  An audit that flags these has a
false positive.  On U[1, 5] with 5 sellers, the linear rule of ``common``."""

from __future__ import annotations

from functools import partial

import numpy as np

from market_sim.mechanisms.base import Outcome

from .common import U15, Case, Linear, LinearMechanism, drawn_profiles
from .earlier import UniformPrice2
from .interior import OneTiedPair, _others
from .units import Shade

LAW = "uniform:1:5"
PROFILES = drawn_profiles(1.0, 5.0, 5, seed=10)


class FallingMyerson(LinearMechanism):
    """eps(r) + 0.5 x 1{r < 3} (a drop at 3: non-increasing) paid by Eq. 8:
    T(r) + 0.5 (r + (3 - r)) 1{r < 3} = T(r) + 1.5 x 1{r < 3}.  IC and IR by Myerson's
    lemma (u_c(c) = rent(c) + 0.5 (3 - c)^+)."""

    def outcome(self, reports, rng=None):
        r, eps, pay = self.base(reports)
        low = r < 3.0
        return eps + 0.5 * low, pay + 1.5 * low


class TieBonusTruthful(OneTiedPair):
    """A bonus of 0.5 when the others' reports have exactly one tie, whatever the own
    report: a transfer that depends on the others only (IC), >= 0 (IR)."""

    def outcome(self, reports, rng=None):
        r, eps, pay = self.base(reports)
        distinct = np.array([np.unique(row).size for row in _others(r)])
        return eps, pay + 0.5 * (distinct == r.size - 2)


class HonestDeviations(LinearMechanism):
    """T(r) + 1, with ``deviations`` overridden by the same closed form (eps and T + 1 at
    each candidate): they agree with ``outcome``.  IC and IR (a lump sum)."""

    def outcome(self, reports, rng=None):
        _, eps, pay = self.base(reports)
        return eps, pay + 1.0

    def deviations(self, sellers, candidates, reports, rng=None):
        cand = np.asarray(candidates, dtype=float)
        return Outcome(U15.eps(cand), U15.T(cand) + 1.0)


class OthersMeanTransfers(LinearMechanism):
    """T(r_i) + 0.1 (mean of the others' reports - 1): a transfer on the others only
    (IC), >= 0 (IR)."""

    def outcome(self, reports, rng=None):
        r, eps, pay = self.base(reports)
        return eps, pay + 0.1 * ((r.sum() - r) / (r.size - 1) - 1.0)


class UniformPriceScaled(UniformPrice2):
    """UniformPrice2 with eps and payments both x (1 + 1e-5): every utility x (1 + 1e-5),
    so the same threshold mechanism: IC and IR."""

    def outcome(self, reports, rng=None):
        win, pay = super().outcome(reports, rng)
        return win * (1 + 1e-5), pay * (1 + 1e-5)


class FloorStep(LinearMechanism):
    """eps(r) + 0.5 at the floor report 1 only (non-increasing), paid T(r) + 0.5 x 1 at
    it (the step's threshold 1 x 0.5; its rent is 0): reporting 1 adds 0.5 (1 - c) <= 0 to
    a seller of cost c >= 1.  IC and IR."""

    def outcome(self, reports, rng=None):
        r, eps, pay = self.base(reports)
        floor = r == 1.0
        return eps + 0.5 * floor, pay + 0.5 * floor


class OpponentTopBonus(LinearMechanism):
    """T(r) + 0.5 when another seller reports >= 4.996, whatever the own report: on the
    others only (IC), >= 0 (IR)."""

    def outcome(self, reports, rng=None):
        r, eps, pay = self.base(reports)
        top = r >= 4.996
        return eps, pay + 0.5 * (top.sum() - top > 0)


TIE = (4.4, 2.0, 2.0, 3.0, 1.5)
TOP = (4.5, 2.0, 3.0, 5.0, 1.5)
CASES = [
    Case("falling-myerson", "non-monotone, Myerson-looking", FallingMyerson, LAW, True, True,
         PROFILES, points=(3.0,)),
    Case("tie-bonus-truthful", "interior opponents", TieBonusTruthful, LAW, True, True,
         (*PROFILES, TIE)),
    Case("honest-deviations", "deviations unlike outcome", HonestDeviations, LAW, True, True,
         PROFILES),
    Case("others-mean-transfers", "budget-balanced look", OthersMeanTransfers, LAW, True,
         True, PROFILES),
    Case("uniform-price-scaled", "tiny relative error", UniformPriceScaled, LAW, True, True,
         (*PROFILES, (3.00001, 2.0, 3.0, 4.0, 4.5)), points=(2.9, 3.0)),
    Case("floor-step", "earlier: endpoints", FloorStep, LAW, True, True, PROFILES,
         points=(1.0,)),
    Case("opponent-top-bonus", "earlier: opponent profiles", OpponentTopBonus, LAW, True,
         True, (*PROFILES, TOP)),
    Case("truthful-micro-eps", "units", partial(Shade, Linear(0.0, 1.0, 1e-6), 0.0),
         "uniform:0:1", True, True, drawn_profiles(0.0, 1.0, 5, seed=10)),
]  # fmt: skip
