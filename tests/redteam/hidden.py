"""New classes (issue #54, third round): a bonus on a set of reports of measure zero (a
lattice), a bonus for the rank of the own report among the others', and an expected
gain under payment noise that grows with the misreport.

On U[1, 5] with 5 sellers, the linear rule of ``common``: under T alone a seller of cost
c reporting z loses (z - c)^2 / 8."""

from __future__ import annotations

import numpy as np

from .common import RANDOM, U15, Case, LinearMechanism, Witness, drawn_profiles

LAW = "uniform:1:5"
PROFILES = drawn_profiles(1.0, 5.0, 5, seed=11)


class LatticeBonus(LinearMechanism):
    """T(r) + 0.05 when r is a multiple of 1/64 exactly (64 r an integer: a set of
    measure zero, which no drawn cost hits almost surely).  A seller of cost 2.01 (not
    on the lattice: 64 x 2.01 = 128.64) reporting 2 = 128/64 gains 0.05 - 0.01^2 / 8 =
    0.0499875, whatever the others report.  Not IC; IR (the bonus is >= 0 and T is)."""

    def outcome(self, reports, rng=None):
        r, eps, pay = self.base(reports)
        on = r * 64.0 == np.round(r * 64.0)
        return eps, pay + 0.05 * on


class MedianBonus(LinearMechanism):
    """T(r) + 0.2 to every seller whose report equals the market's upper median
    sorted(r)[n // 2].  With the others at (1.5, 2.0, 4.0, 4.5), a seller of cost 1.8
    (rank 1 of 5: no bonus) reporting 2.1 becomes the median (1.5, 2.0, 2.1, 4.0, 4.5)
    and gains 0.2 - 0.3^2 / 8 = 0.18875.  Not IC; IR (the bonus is >= 0)."""

    def outcome(self, reports, rng=None):
        r, eps, pay = self.base(reports)
        median = np.sort(r)[r.size // 2]
        return eps, pay + 0.2 * (r == median)


MEDIAN_PROFILE = (3.0, 1.5, 2.0, 4.0, 4.5)  # seller 0's own entry is replaced


class NoisyKick(LinearMechanism):
    """T(r) + 0.25 (r - 1) + 2 (r - 1) N per draw (N standard normal, one per seller):
    E[u_c(z)] = T(z) - c eps(z) + 0.25 (z - 1), so cost c reporting z gains 0.25 (z - c)
    - (z - c)^2 / 8 in expectation, largest at z = c + 1: 0.125 (cost 2 reporting 3).
    Not IC (in expectation; the gain is 3% of the support's scale w eps = 4, above the
    audit's 1% resolution); IR (E u_c(c) = rent(c) + 0.25 (c - 1) >= 0).  The noise's
    standard deviation at the best misreport is 2 (z - c) = 2 against the truth, 16x
    the gain: the common draws do not cancel it (it grows with the report), so a
    confirmation needs ~(4 x 2 / 0.125)^2 = 4096 draws to show it: the audit may say
    ``not_ic`` or honestly ``inconclusive``, never ``ic``."""

    randomized = True

    def outcome(self, reports, rng=None):
        r, eps, pay = self.base(reports)
        return eps, pay + (r - 1.0) * (0.25 + 2.0 * rng.standard_normal(r.size))

    def expected(self, reports):
        r, eps, pay = self.base(reports)
        return eps, pay + 0.25 * (r - 1.0)


CASES = [
    Case("lattice-bonus", "measure-zero reports", LatticeBonus, LAW, False, True, PROFILES,
         gain=Witness(0, 2.01, 2.0, PROFILES[0], 0.05 - U15.loss(2.01, 2.0)),
         points=(2.0, 2.01)),
    Case("median-bonus", "rank of the own report", MedianBonus, LAW, False, True,
         (*PROFILES, MEDIAN_PROFILE),
         gain=Witness(0, 1.8, 2.1, MEDIAN_PROFILE, 0.2 - U15.loss(1.8, 2.1)),
         points=(1.5, 2.0, 2.1, 4.0, 4.5)),
    Case("noisy-kick", "gain under growing noise", NoisyKick, LAW, False, True, PROFILES,
         **RANDOM, gain=Witness(0, 2.0, 3.0, PROFILES[0], 0.25 - U15.loss(2.0, 3.0)),
         verdicts=("not_ic", "inconclusive"), ir_verdicts=("ir", "inconclusive")),
]  # fmt: skip
