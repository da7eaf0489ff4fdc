"""Gains that need interior or tied opponent profiles (ex-post IC is for every profile).

On U[1, 5] with 5 sellers and the linear rule of ``common``.  Each bonus of 0.5 is paid
for an own report >= 4.5 when the others' reports have a shape no drawn market reliably
has and none of the fixed profiles (all at the floor, at the top, tied with the seller,
one at an end) has.  A seller of cost 4.4 reporting 4.5 in such a profile gains
0.5 - 0.1^2 / 8 = 0.49875.  Not IC; IR (bonuses >= 0)."""

from __future__ import annotations

import numpy as np

from .common import U15, Case, LinearMechanism, Witness, drawn_profiles

LAW = "uniform:1:5"
PROFILES = drawn_profiles(1.0, 5.0, 5, seed=4)
GAIN = 0.5 - U15.loss(4.4, 4.5)


def _others(r):
    """others[i] = the reports of every seller but i."""
    n = r.size
    return np.array([np.delete(r, i) for i in range(n)])


class TwoInBand(LinearMechanism):
    """Bonus when exactly two others report in [2.9, 3.1] (a band 5% of the support)."""

    def outcome(self, reports, rng=None):
        r, eps, pay = self.base(reports)
        o = _others(r)
        band = ((o >= 2.9) & (o <= 3.1)).sum(axis=1) == 2
        return eps, pay + 0.5 * ((r >= 4.5) & band)


class OneTiedPair(LinearMechanism):
    """Bonus when the others' reports have exactly one tie: n - 2 distinct values among
    n - 1 (all tied, or all at one end, are not one tie)."""

    def outcome(self, reports, rng=None):
        r, eps, pay = self.base(reports)
        o = _others(r)
        distinct = np.array([np.unique(row).size for row in o])
        return eps, pay + 0.5 * ((r >= 4.5) & (distinct == r.size - 2))


class ThreeBelow(LinearMechanism):
    """Bonus when exactly three others report below 1.2 (the floor profile has four)."""

    def outcome(self, reports, rng=None):
        r, eps, pay = self.base(reports)
        below = (_others(r) < 1.2).sum(axis=1) == 3
        return eps, pay + 0.5 * ((r >= 4.5) & below)


class BandScaledTruthful(LinearMechanism):
    """eps_i = g_i eps(r_i) and t_i = g_i T(r_i) + h_i, with g_i = 1 + 2 x 1{exactly two
    others in [2.9, 3.1]} and h_i = 0.3 x 1{the others have a tie}: g_i > 0 and h_i >= 0
    depend on the others only, so u_c(z) = g_i (T(z) - c eps(z)) + h_i is g_i times the
    linear rule's plus a constant: IC and IR in every profile."""

    def outcome(self, reports, rng=None):
        r, eps, pay = self.base(reports)
        o = _others(r)
        g = 1.0 + 2.0 * (((o >= 2.9) & (o <= 3.1)).sum(axis=1) == 2)
        h = 0.3 * (np.array([np.unique(row).size for row in o]) < r.size - 1)
        return g * eps, g * pay + h


BAND = (4.4, 3.0, 3.0, 1.5, 4.8)
TIE = (4.4, 2.0, 2.0, 3.0, 1.5)
BELOW = (4.4, 1.1, 1.1, 1.1, 4.0)
EXTRA = (BAND, TIE, BELOW, (4.4, 2.95, 3.05, 2.0, 2.0))
CASES = [
    Case("two-in-band", "interior opponents", TwoInBand, LAW, False, True, (*PROFILES, BAND),
         gain=Witness(0, 4.4, 4.5, BAND, GAIN), points=(4.5,)),
    Case("one-tied-pair", "interior opponents", OneTiedPair, LAW, False, True,
         (*PROFILES, TIE), gain=Witness(0, 4.4, 4.5, TIE, GAIN), points=(4.5,)),
    Case("three-below", "interior opponents", ThreeBelow, LAW, False, True,
         (*PROFILES, BELOW), gain=Witness(0, 4.4, 4.5, BELOW, GAIN), points=(4.5,)),
    Case("band-scaled-truthful", "interior opponents", BandScaledTruthful, LAW, True, True,
         (*PROFILES, *EXTRA)),
]  # fmt: skip
