"""New classes: a gain for one seat only, gains only at the top of the support, a
non-monotone allocation with Myerson-looking payments, payments off by a tiny relative
amount, and ``deviations`` that disagree with ``outcome``.

On U[1, 5] with 5 sellers, the linear rule of ``common`` unless said otherwise."""

from __future__ import annotations

import numpy as np

from market_sim.mechanisms.base import Mechanism, Outcome

from .common import U15, Case, LinearMechanism, Witness, drawn_profiles
from .earlier import UniformPrice2

LAW = "uniform:1:5"
PROFILES = drawn_profiles(1.0, 5.0, 5, seed=8)


# ---- one seat ------------------------------------------------------------------------
class SeatThreePayAsBid(LinearMechanism):
    """Seats 0, 1, 2, 4: T(r) (IC, IR).  Seat 3: eps(r), paid r eps(r) + 1: u_c(z) =
    (z - c)(5 - z)/4 + 1, so cost 1 reporting 3 gains (5 - 1)^2/16 = 1 (seat 3 only).
    Not IC; IR."""

    def outcome(self, reports, rng=None):
        r, eps, pay = self.base(reports)
        pay = pay.copy()
        pay[3] = r[3] * eps[3] + 1.0
        return eps, pay


class SeatScaled(LinearMechanism):
    """Seat k gets (k + 1) eps(r) and (k + 1) T(r): each seat a positive multiple of the
    linear rule (IC, IR), unequal across seats."""

    def outcome(self, reports, rng=None):
        _, eps, pay = self.base(reports)
        k = np.arange(1, eps.size + 1)
        return k * eps, k * pay


# ---- the top of the support ----------------------------------------------------------
class TopWindowBonus(LinearMechanism):
    """T(r) + 0.3 for r in [4.996, 5) (1e-3 of the support below the top, the top itself
    excluded): cost 4.9 reporting 4.999 gains 0.3 - 0.099^2/8 = 0.298775.  Not IC; IR."""

    def outcome(self, reports, rng=None):
        r, eps, pay = self.base(reports)
        return eps, pay + 0.3 * ((r >= 4.996) & (r < 5.0))


class TopStepTruthful(LinearMechanism):
    """eps(r) + 0.5 x 1{r < 4.999}: non-increasing, a jump 1e-3 w below the top.  Paid by
    Eq. 8: T(r) + 0.5 (r + (4.999 - r)) 1{r < 4.999} = T(r) + 2.4995 x 1{r < 4.999}
    (the step's share r x 0.5 plus its rent 0.5 (4.999 - r)): IC and IR by Myerson's
    lemma (u_c(c) = rent(c) + 0.5 (4.999 - c)^+ >= 0)."""

    def outcome(self, reports, rng=None):
        r, eps, pay = self.base(reports)
        step = r < 4.999
        return eps + 0.5 * step, pay + 0.5 * 4.999 * step


# ---- non-monotone allocation, Myerson-looking payments -------------------------------
class RisingMyerson(LinearMechanism):
    """eps(r) + 0.5 x 1{3 <= r < 3.5} (rising at 3) paid t = r eps(r) + int_r^5 eps
    (Eq. 8's formula, which is truthful only for a non-increasing eps).  Then u_c(z) -
    u_c(c) = (z - c) eps(z) - int_c^z eps: cost 2.5 reporting 3 gains
    0.5 x 1.0 - int_2.5^3 (5 - y)/4 dy = 0.5 - 0.28125 = 0.21875.  Not IC; IR
    (u_c(c) = int_c^5 eps >= 0)."""

    def outcome(self, reports, rng=None):
        r, eps, pay = self.base(reports)
        window = (r >= 3.0) & (r < 3.5)
        extra_rent = 0.5 * np.clip(3.5 - np.maximum(r, 3.0), 0.0, 0.5)
        return eps + 0.5 * window, pay + r * 0.5 * window + extra_rent


# ---- tiny relative errors ------------------------------------------------------------
class PostedRelative(Mechanism):
    """Posted price 3 (eps 1{r <= 3}) paid 3 (1 + 1e-5 (r - 1)/4): a relative error of at
    most 1e-5 that grows with the own report.  Cost 1 reporting 3 (still bought) gains
    3 x 1e-5 x 2/4 = 1.5e-5.  Not IC; IR."""

    def outcome(self, reports, rng=None):
        r = np.asarray(reports, dtype=float)
        eps = (r <= 3.0).astype(float)
        return eps, 3.0 * eps * (1 + 1e-5 * (r - 1.0) / 4)


class PostedRelativeOthers(Mechanism):
    """A posted price p_i = 3 (1 + 1e-5 x the mean of the others' reports), bought iff
    r <= p_i and paid p_i: the price moves by a relative 1e-5 with the others' reports
    only.  A posted price to each seller: u_c(z) = (p_i - c) 1{z <= p_i}, maximised by
    the truth (IC), >= 0 (IR).  (Paying p_i while buying iff r <= 3 would not be IC: a
    cost in (3, p_i) gains p_i - c by reporting 3.)"""

    def outcome(self, reports, rng=None):
        r = np.asarray(reports, dtype=float)
        price = 3.0 * (1 + 1e-5 * (r.sum() - r) / (r.size - 1))
        eps = (r <= price).astype(float)
        return eps, price * eps


class UniformPriceMarkup(UniformPrice2):
    """UniformPrice2 with the price raised by a relative 1e-5.  A loser whose cost c lies
    in [p, 1.00001 p) of the price it would set by winning now gains by winning:
    profile (., 2, 3, 4, 4.5), seller 0 of cost 3.00001 loses truthfully (utility 0);
    reporting 2.9 it wins at 3 x 1.00001 = 3.00003: gain 2e-5.  Not IC; IR."""

    def outcome(self, reports, rng=None):
        win, pay = super().outcome(reports, rng)
        return win, pay * (1 + 1e-5)


# ---- deviations that lie -------------------------------------------------------------
class LyingDeviations(LinearMechanism):
    """``outcome`` pays r eps(r) + 2 (PayAsBidLump: cost 1 reporting 3 gains 1; not IC,
    IR); ``deviations`` is overridden to describe the truthful T instead.  The mechanism
    is what ``outcome`` (``run``) pays."""

    def outcome(self, reports, rng=None):
        r, eps, _ = self.base(reports)
        return eps, r * eps + 2.0

    def deviations(self, sellers, candidates, reports, rng=None):
        cand = np.asarray(candidates, dtype=float)
        return Outcome(U15.eps(cand), U15.T(cand) + 2.0)


MARKUP = (3.00001, 2.0, 3.0, 4.0, 4.5)
RISE = (2.5, 2.0, 3.0, 4.0, 4.5)
CASES = [
    Case("seat-three-pay-as-bid", "one seat", SeatThreePayAsBid, LAW, False, True, PROFILES,
         gain=Witness(3, 1.0, 3.0, PROFILES[0], 1.0), brute_sellers=(0, 3)),
    Case("seat-scaled", "one seat", SeatScaled, LAW, True, True, PROFILES,
         brute_sellers=(0, 4)),
    Case("top-window-bonus", "top of the support", TopWindowBonus, LAW, False, True, PROFILES,
         gain=Witness(0, 4.9, 4.999, PROFILES[0], 0.3 - U15.loss(4.9, 4.999)),
         points=(4.996, 4.999)),
    Case("top-step-truthful", "top of the support", TopStepTruthful, LAW, True, True,
         PROFILES, points=(4.999 - 1e-9, 4.999)),
    Case("rising-myerson", "non-monotone, Myerson-looking", RisingMyerson, LAW, False, True,
         PROFILES, gain=Witness(0, 2.5, 3.0, RISE, 0.21875), points=(3.0, 3.5)),
    Case("posted-relative-1e-5", "tiny relative error", PostedRelative, LAW, False, True,
         PROFILES, gain=Witness(0, 1.0, 3.0, PROFILES[0], 1.5e-5), points=(3.0,)),
    Case("posted-relative-others", "tiny relative error", PostedRelativeOthers, LAW, True,
         True, PROFILES, points=(3.0,)),
    Case("uniform-price-markup", "tiny relative error", UniformPriceMarkup, LAW, False, True,
         (*PROFILES, MARKUP), gain=Witness(0, 3.00001, 2.9, MARKUP, 2e-5),
         points=(2.9, 3.0, 3.00001)),
    Case("lying-deviations", "deviations unlike outcome", LyingDeviations, LAW, False, True,
         PROFILES, gain=Witness(0, 1.0, 3.0, PROFILES[0], 1.0)),
]  # fmt: skip
