"""The earlier rounds' classes (tests/test_audit_attack.py), rebuilt for the corpus.

All on U[1, 5] with the linear rule of ``common`` (w = 4, eps = (5 - r)/4, loss of a
misreport (z - c)^2 / 8 under T alone).  N = 5 sellers."""

from __future__ import annotations

import numpy as np

from .common import U15, Case, IRWitness, LinearMechanism, Witness, drawn_profiles

LAW = "uniform:1:5"
PROFILES = drawn_profiles(1.0, 5.0, 5)


class LumpSum(LinearMechanism):
    """T(r) + 100 to every seller.  The lump sum does not depend on any report, so
    u_c(c) - u_c(z) = (z - c)^2 / 8 >= 0 (IC), and u_c(c) = rent(c) + 100 > 0 (IR)."""

    def outcome(self, reports, rng=None):
        _, eps, pay = self.base(reports)
        return eps, pay + 100.0


class UniformPrice2(LinearMechanism):
    """The 2 lowest reports win (eps 1; ties to the lower index) and are paid the 3rd
    lowest report p.  A winner is paid p whatever it reports below p; reporting above p
    loses (utility 0); so u_c(z) <= max(p - c, 0) = u_c(c) when c < p, and u_c(z) <= 0 =
    u_c(c) otherwise (a seller tied at p: winning pays p - c = 0).  IC and IR (0 exactly
    for losers and for a winner whose cost is p)."""

    def outcome(self, reports, rng=None):
        r = np.asarray(reports, dtype=float)
        order = np.argsort(r, kind="stable")
        win = np.zeros(r.size)
        win[order[:2]] = 1.0
        return win, win * r[order[2]]


class PayAsBidLump(LinearMechanism):
    """eps(r), paid r eps(r) + 2.  u_c(z) = (z - c)(5 - z)/4 + 2, maximised at
    z = (5 + c)/2 with gain (5 - c)^2 / 16: cost 1 reporting 3 gains exactly 1.  Not IC;
    IR (u >= 2)."""

    def outcome(self, reports, rng=None):
        r, eps, _ = self.base(reports)
        return eps, r * eps + 2.0


class HiddenEntryFee(LinearMechanism):
    """T(r) - 0.5 to everyone and 1000 more to seller 0: the transfers do not depend on
    the own report (IC), and 1000 to seller 0 moves no one else's incentives.  Seller 1
    at the top (cost 5): u = rent(5) - 0.5 = -0.5.  Not IR."""

    def outcome(self, reports, rng=None):
        _, eps, pay = self.base(reports)
        pay = pay - 0.5
        pay[0] += 1000.0
        return eps, pay


class TopFee(LinearMechanism):
    """T(r) - 0.01: IC (a constant); u_c(c) = rent(c) - 0.01 < 0 iff c > 5 - sqrt(0.08)
    = 4.717 (7% of the support): -0.01 at the top.  Not IR."""

    def outcome(self, reports, rng=None):
        _, eps, pay = self.base(reports)
        return eps, pay - 0.01


class FloorBonus(LinearMechanism):
    """T(r) + 1 for a report of exactly 1 (the floor): cost 1.5 reporting 1 gains
    1 - 0.5^2/8 = 0.96875.  Not IC (only at the floor); IR."""

    def outcome(self, reports, rng=None):
        r, eps, pay = self.base(reports)
        return eps, pay + (r == 1.0)


class JustUnder(UniformPrice2):
    """UniformPrice2 plus 0.5 to a seller reporting in (r_j - 4e-8, r_j) for some other
    report r_j.  Profile (., 2, 3, 4, 4.5): seller 0 of cost 4.2 loses (utility 0) and,
    reporting 4.5 - 2e-8, still loses and collects 0.5: gain 0.5.  Not IC; IR."""

    def outcome(self, reports, rng=None):
        win, pay = super().outcome(reports, rng)
        r = np.asarray(reports, dtype=float)
        d = r[None, :] - r[:, None]  # d[i, j] = r_j - r_i
        return win, pay + 0.5 * ((d > 0) & (d < 4e-8)).any(axis=1)


class NeedsOneAtTop(LinearMechanism):
    """T(r) + 0.5 when the own report is >= 4.9 and another seller reports >= 4.996.
    Profile (., 2, 3, 5, 1.5): seller 0 of cost 4.5 reporting 4.9 gains
    0.5 - 0.4^2/8 = 0.48.  Not IC ex post (drawn markets almost never have it); IR."""

    def outcome(self, reports, rng=None):
        r, eps, pay = self.base(reports)
        top = r >= 5.0 - 1e-3 * 4
        return eps, pay + 0.5 * ((r >= 4.9) & (top.sum() - top > 0))


JU = (4.2, 2.0, 3.0, 4.0, 4.5)
TOP = (4.5, 2.0, 3.0, 5.0, 1.5)
CASES = [
    Case("lump-sum", "earlier: transfers", LumpSum, LAW, True, True, PROFILES),
    Case("uniform-price-2", "earlier: thresholds", UniformPrice2, LAW, True, True,
         (*PROFILES, (2.0, 2.0, 2.0, 3.0, 3.0), (3.0, 1.0, 3.0, 3.0, 4.0)), points=(2.0, 3.0)),
    Case("pay-as-bid-lump", "earlier: transfers", PayAsBidLump, LAW, False, True, PROFILES,
         gain=Witness(0, 1.0, 3.0, PROFILES[0], 1.0)),
    Case("hidden-entry-fee", "earlier: fees", HiddenEntryFee, LAW, True, False, PROFILES,
         ir_fail=IRWitness(1, 5.0, PROFILES[0], -0.5), brute_sellers=(0, 1)),
    Case("top-fee", "earlier: fees", TopFee, LAW, True, False, PROFILES,
         ir_fail=IRWitness(0, 5.0, PROFILES[0], -0.01)),
    Case("floor-bonus", "earlier: endpoints", FloorBonus, LAW, False, True, PROFILES,
         gain=Witness(0, 1.5, 1.0, PROFILES[0], 1 - U15.loss(1.5, 1.0))),
    Case("just-under", "earlier: thresholds", JustUnder, LAW, False, True, (*PROFILES, JU),
         gain=Witness(0, 4.2, 4.5 - 2e-8, JU, 0.5), points=(4.5 - 2e-8, 4.2)),
    Case("needs-one-at-top", "earlier: opponent profiles", NeedsOneAtTop, LAW, False, True,
         (*PROFILES, TOP), gain=Witness(0, 4.5, 4.9, TOP, 0.5 - U15.loss(4.5, 4.9)),
         points=(4.9, 4.5)),
]  # fmt: skip
