"""One seller's huge allocation setting everyone's tolerance.

Seller 0 is bought at eps = 1e5 whatever anyone reports and paid 5e5: its utility
1e5 (5 - c) >= 0 does not depend on its report (IC and IR for it), yet an audit whose
tolerance scales with the largest eps of the market gets a tolerance of 1e5 x what the
other sellers' incentives are worth.  The others (U[1, 5], linear rule of ``common``)
are judged on their own scale: w x their own eps <= 4."""

from __future__ import annotations

from .common import RANDOM, Case, IRWitness, LinearMechanism, Witness, drawn_profiles

LAW = "uniform:1:5"
PROFILES = drawn_profiles(1.0, 5.0, 5, seed=1)
HUGE = 1e5


class Hijack(LinearMechanism):
    """Seller 0: eps 1e5, paid 5e5 (constant).  Others: T(r) (IC, IR: ``common``).
    IC and IR."""

    def others(self, r, eps, pay):
        return pay

    def outcome(self, reports, rng=None):
        r, eps, pay = self.base(reports)
        pay = self.others(r, eps, pay).copy()
        eps = eps.copy()
        eps[0], pay[0] = HUGE, 5.0 * HUGE
        return eps, pay


class HijackFee(Hijack):
    """Others: T(r) - 0.2 (a constant: IC).  u_c(c) = (5 - c)^2/8 - 0.2 < 0 for
    c > 5 - sqrt(1.6) = 3.735 (32% of the support), -0.2 = -0.05 w at the top.  Not IR."""

    def others(self, r, eps, pay):
        return pay - 0.2


class HijackShade(Hijack):
    """Others: T(r) + 0.1 r eps(r).  Gain of cost c reporting z:
    -(z - c)^2/8 + 0.1 (z eps(z) - c eps(c)); at c = 1, z = 1.25 (its maximiser,
    -(z - 1)/4 + 0.1 (5 - 2z)/4 = 0): -1/128 + 0.1 (1.171875 - 1) = 0.009375.  Not IC;
    IR (0.1 r eps >= 0)."""

    def others(self, r, eps, pay):
        return pay + 0.1 * r * eps


class HijackShadeLottery(HijackShade):
    """HijackShade plus 0.05 X to each seller, X ~ N(0, 1) drawn per seller and round:
    E[pay] = HijackShade's, so the same expected gain 0.009375 (cost 1, report 1.25).
    Not IC in expectation; IR in expectation."""

    randomized = True
    n_draws = 16

    def outcome(self, reports, rng=None):
        eps, pay = self.expected(reports)
        return eps, pay + 0.05 * rng.standard_normal(len(pay))

    def expected(self, reports):
        return super().outcome(reports)


PROFILES3 = drawn_profiles(1.0, 5.0, 3, seed=1)
SHADE = Witness(1, 1.0, 1.25, PROFILES[0], 0.009375)
CASES = [
    Case("hijack-truthful", "tolerance hijack", Hijack, LAW, True, True, PROFILES,
         brute_sellers=(0, 1)),
    Case("hijack-fee", "tolerance hijack", HijackFee, LAW, True, False, PROFILES,
         ir_fail=IRWitness(1, 5.0, PROFILES[0], -0.2), brute_sellers=(0, 1)),
    Case("hijack-shade", "tolerance hijack", HijackShade, LAW, False, True, PROFILES,
         gain=SHADE, brute_sellers=(0, 1)),
    Case("hijack-shade-lottery", "tolerance hijack", HijackShadeLottery, LAW, False, True,
         PROFILES3, gain=Witness(1, 1.0, 1.25, PROFILES3[0], 0.009375), brute_sellers=(0, 1),
         **RANDOM,
         verdicts=("not_ic", "inconclusive"), ir_verdicts=("ir", "inconclusive")),
]  # fmt: skip
