"""New classes (issue #54, fourth round): a high-frequency ripple (a thousand periods
over the support, each 1/8 of the grid's spacing), and a price set by the reports with
the own one among them.

On U[1, 5] (w = 4) with 5 sellers, the linear rule of ``common``: under T alone a
seller of cost c reporting z loses (z - c)^2 / 8.  The ripple's phase is
theta(r) = 2 pi K (r - 1) / w with K = 1000 periods (period w / K = 0.004)."""

from __future__ import annotations

import numpy as np

from market_sim.mechanisms.base import Mechanism

from .common import U15, Case, LinearMechanism, Witness, drawn_profiles

LAW = "uniform:1:5"
PROFILES = drawn_profiles(1.0, 5.0, 5, seed=13)
K = 1000  # periods of the ripple over the support
PERIOD = U15.w / K


def theta(r):
    """The ripple's phase 2 pi K (r - lo) / w."""
    return 2.0 * np.pi * K * (np.asarray(r, dtype=float) - U15.lo) / U15.w


# ---- high-frequency ripple -----------------------------------------------------------
RIPPLE_PAY = 1e-3  # the payment ripple's amplitude
# the allocation ripple's amplitude: half of the largest that keeps eps non-increasing,
# s / (2 pi K) (eps' = -s / w + a 2 pi K cos(theta) / w)
RIPPLE_EPS = U15.s / (4.0 * np.pi * K)


class RipplePay(LinearMechanism):
    """T(r) + d (1 + sin theta(r)), d = 1e-3: a payment ripple of period 0.004 (1/31 of
    the 33-point grid's spacing).  A seller of cost c = 3.003 (theta = 2 pi 500.75: a
    trough, sin = -1) reporting z = c + 0.002 = 3.005 (theta = 2 pi 501.25: the next
    crest, sin = +1) gains 2 d - 0.002^2 / 8 = 0.0019995, whatever the others report.
    Not IC; IR (u_c(c) = rent(c) + d (1 + sin) >= 0)."""

    def outcome(self, reports, rng=None):
        r, eps, pay = self.base(reports)
        return eps, pay + RIPPLE_PAY * (1.0 + np.sin(theta(r)))


class RippleAllocation(LinearMechanism):
    """With x = 5 - r and phi(x) = 2 pi K x / w (theta(r) = 2 pi K - phi: sin theta =
    -sin phi), eps(r) = s x / w - a sin phi(x), a = s / (4 pi K), paid by Eq. 8 in
    closed form: t(r) = r eps(r) + int_r^5 eps = r eps(r) + s x^2 / (2 w) - a (w / (2 pi
    K)) (1 - cos phi(x)).  eps is non-increasing in r (d eps / dx = (s - a 2 pi K cos
    phi) / w >= s / (2 w)) and >= 0 (sin phi <= phi: eps >= (s - 2 pi K a) x / w =
    s x / (2 w)), so Myerson's lemma makes it IC, and IR (u_c(c) = int_c^5 eps >= 0),
    although eps and t wiggle a thousand times over the support."""

    def outcome(self, reports, rng=None):
        r = np.asarray(reports, dtype=float)
        x = U15.hi - r
        phi = 2.0 * np.pi * K * x / U15.w
        eps = U15.s * x / U15.w - RIPPLE_EPS * np.sin(phi)
        rent = U15.s * x**2 / (2 * U15.w) - RIPPLE_EPS * PERIOD / (2 * np.pi) * (1 - np.cos(phi))
        return eps, r * eps + rent


# ---- a price set by the reports, the own one included --------------------------------
def _median(x) -> float:
    return float(np.median(np.asarray(x, dtype=float)))


class MedianOfAllPrice(Mechanism):
    """Each seller sells one unit (eps = 1) iff its report is at most p = the median of
    all five reports, and is paid p.  The own report moves the price: with the others at
    (2, 3, 4, 4.5), a seller of cost 1 truthfully sets p = median(1, 2, 3, 4, 4.5) = 3
    and gets 3 - 1 = 2; reporting 4 it sets p = median(2, 3, 4, 4, 4.5) = 4, is still
    bought (4 <= 4) and gets 3: a gain of 1.  Not IC; IR (bought only when c <= r <= p,
    truthful utility p - c >= 0)."""

    def outcome(self, reports, rng=None):
        r = np.asarray(reports, dtype=float)
        price = _median(r)
        eps = (r <= price).astype(float)
        return eps, price * eps


class MedianOfOthersPrice(Mechanism):
    """The twin: seller i's price p_i is the median of the OTHER four reports (the mean
    of their middle two), bought iff r_i <= p_i and paid p_i.  A posted price the own
    report cannot move: u_c(z) = (p_i - c) 1{z <= p_i} is maximised by z = c (IC) and
    is >= 0 (IR)."""

    def outcome(self, reports, rng=None):
        r = np.asarray(reports, dtype=float)
        n = r.size
        others = np.broadcast_to(r, (n, n))[~np.eye(n, dtype=bool)].reshape(n, n - 1)
        price = np.median(others, axis=1)
        eps = (r <= price).astype(float)
        return eps, price * eps


TROUGH = U15.lo + PERIOD * 500.75  # 3.003: theta = 2 pi 500.75
CREST = U15.lo + PERIOD * 501.25  # 3.005
MEDIAN_PROFILE = (1.0, 2.0, 3.0, 4.0, 4.5)
CASES = [
    Case("ripple-pay", "high-frequency ripple", RipplePay, LAW, False, True, PROFILES,
         gain=Witness(0, TROUGH, CREST, PROFILES[0],
                      2 * RIPPLE_PAY - U15.loss(TROUGH, CREST)),
         points=(TROUGH, CREST)),
    Case("ripple-allocation", "high-frequency ripple", RippleAllocation, LAW, True, True,
         PROFILES, points=(TROUGH, CREST)),
    Case("median-of-all-price", "price from the reports, own included", MedianOfAllPrice,
         LAW, False, True, (*PROFILES, MEDIAN_PROFILE),
         gain=Witness(0, 1.0, 4.0, MEDIAN_PROFILE, 1.0), points=MEDIAN_PROFILE),
    Case("median-of-others-price", "price from the reports, own included",
         MedianOfOthersPrice, LAW, True, True, (*PROFILES, MEDIAN_PROFILE),
         points=MEDIAN_PROFILE, brute_sellers=(0, 2)),
]  # fmt: skip
