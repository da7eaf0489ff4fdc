"""Gains that live only in a rare tail of the draws, where the search's screening (issue
#54: a candidate's later draws go only where its first ones leave it a chance) could drop
them: on a typical draw the profitable report shows a loss and no variance."""

from __future__ import annotations

import numpy as np

from .common import RANDOM, U15, Case, LinearMechanism, Witness, drawn_profiles

LAW = "uniform:1:5"
PROFILES = drawn_profiles(1.0, 5.0, 3, seed=11)
P, Q = 1.0 / 16, 8.0  # a prize of Q with probability P: P Q = 0.5 in expectation


class BandPrize(LinearMechanism):
    """T(r) plus, for a report in the band [2, 2.5], Q 1{u < P} - ``fee`` (u uniform, per
    seller and draw; P Q = 0.5).  E[u_c(z)] = T(z) - c eps(z) + (0.5 - fee) 1{z in band}.
    With fee = 0.3: cost 1.9 reporting 2 gains 0.2 - 0.1^2 / 8 = 0.19875 in expectation,
    though 15 draws in 16 show it a loss of 0.3 + 0.00125 with no variance.  Not IC; IR
    (E u_c(c) = rent(c) + 0.2 1{c in band} >= 0).  With fee = 0.5 the band's extra has
    mean 0 for every report: IC and IR in expectation (its variance is its only trace)."""

    randomized = True

    def __init__(self, fee: float):
        self.fee = fee

    def outcome(self, reports, rng=None):
        r, eps, pay = self.base(reports)
        band = (r >= 2.0) & (r <= 2.5)
        return eps, pay + band * (Q * (rng.random(r.size) < P) - self.fee)

    def expected(self, reports):
        r, eps, pay = self.base(reports)
        return eps, pay + ((r >= 2.0) & (r <= 2.5)) * (P * Q - self.fee)


class TiePrize(LinearMechanism):
    """T(r) plus, for a report within 1e-6 w of another seller's report (a tie), Q 1{u <
    P} - 0.3 (per seller and draw): E = T + 0.2 1{tied}.  Seller 0 of cost r_1 - 0.1
    reporting r_1 (others as in PROFILES[0]) gains 0.2 - 0.1^2 / 8 = 0.19875 in
    expectation; untied, its reports follow T (IC).  Not IC; IR (E u_c(c) = rent(c) +
    0.2 1{c tied} >= 0)."""

    randomized = True

    def outcome(self, reports, rng=None):
        r, eps, pay = self.base(reports)
        return eps, pay + self._tied(r) * (Q * (rng.random(r.size) < P) - 0.3)

    def expected(self, reports):
        r, eps, pay = self.base(reports)
        return eps, pay + self._tied(r) * (P * Q - 0.3)

    @staticmethod
    def _tied(r):
        gap = np.where(np.eye(r.size, dtype=bool), np.inf, np.abs(r[:, None] - r[None, :]))
        return gap.min(axis=1) <= 1e-6 * U15.w


_R1 = PROFILES[0][1]
CASES = [
    Case("band-prize", "gain in a rare tail", lambda: BandPrize(0.3), LAW, False, True,
         PROFILES, **RANDOM, gain=Witness(0, 1.9, 2.0, PROFILES[0], 0.2 - U15.loss(1.9, 2.0)),
         points=(2.0, 2.5), verdicts=("not_ic", "inconclusive"),
         ir_verdicts=("ir", "inconclusive")),
    Case("band-lottery-fair", "gain in a rare tail", lambda: BandPrize(0.5), LAW, True, True,
         PROFILES, **RANDOM, points=(2.0, 2.5), verdicts=("ic", "inconclusive"),
         ir_verdicts=("ir", "inconclusive")),
    Case("tie-prize", "gain in a rare tail", TiePrize, LAW, False, True, PROFILES, **RANDOM,
         gain=Witness(0, _R1 - 0.1, _R1, PROFILES[0], 0.2 - U15.loss(_R1 - 0.1, _R1)),
         points=(_R1,), verdicts=("not_ic", "inconclusive"),
         ir_verdicts=("ir", "inconclusive")),
]  # fmt: skip
