"""New classes: randomized mechanisms IC in expectation but not ex post, budget-balanced
looking transfers, truthful mechanisms with discontinuities (true negatives), and IR
exactly at 0.

On U[1, 5], the linear rule of ``common`` unless said otherwise."""

from __future__ import annotations

from functools import partial

import numpy as np

from market_sim.mechanisms.base import Mechanism

from .common import RANDOM, Case, IRWitness, LinearMechanism, Witness, drawn_profiles

LAW = "uniform:1:5"
PROFILES = drawn_profiles(1.0, 5.0, 5, seed=9)
PROFILES3 = drawn_profiles(1.0, 5.0, 3, seed=9)


# ---- IC in expectation, not ex post --------------------------------------------------
class SplitLottery(LinearMechanism):
    """With probability q (per seller and draw) pay-as-bid, r eps(r); otherwise
    r eps(r) + 2 rent(r).  E[pay] = r eps + 2 (1 - q) rent.  At q = 1/2 that is T(r):
    IC and IR in expectation, though the pay-as-bid realisation rewards over-reporting
    ex post.  At q = 0.6, E[pay] = T(r) - 0.2 rent(r): E[u_c(z)] - E[u_c(c)] =
    -(z - c)^2/8 + 0.2 ((5 - c)^2 - (5 - z)^2)/8; cost 1 reporting 5/3 (the maximiser)
    gains -1/18 + 11/90 = 1/15.  Not IC; IR (u_c(c) = 0.8 rent(c) >= 0)."""

    randomized = True
    n_draws = 16

    def __init__(self, q: float):
        self.q = q

    def outcome(self, reports, rng=None):
        r, eps, _ = self.base(reports)
        bid = rng.random(r.size) < self.q
        return eps, r * eps + 2.0 * self.rule.rent(r) * (~bid)

    def expected(self, reports):
        r, eps, _ = self.base(reports)
        return eps, r * eps + 2.0 * (1 - self.q) * self.rule.rent(r)


# ---- budget-balanced-looking transfers -----------------------------------------------
class Cyclic(LinearMechanism):
    """T(r_i) + a (r_{i+1} - r_{i-1}) + lump (indices mod n), a = 0.1.  The cyclic
    transfers sum to 0 and do not depend on the own report: IC.  With lump = a w = 0.4
    they are >= 0 after the lump (IR); with lump = 0 seller 0 of cost 5 with r_1 = 1 and
    r_4 = 5 gets 0 + 0.1 (1 - 5) = -0.4 (not IR)."""

    def __init__(self, lump: float):
        self.lump = lump

    def outcome(self, reports, rng=None):
        r, eps, pay = self.base(reports)
        return eps, pay + 0.1 * (np.roll(r, -1) - np.roll(r, 1)) + self.lump


class MeanRelative(LinearMechanism):
    """T(r_i) + a (r_i - mean(r)) + a w, a = 0.1: the transfers sum to n a w and look
    balanced around the mean, but the own report moves them by a (1 - 1/n) = 0.08 per
    unit: cost 2 reporting 2.32 (the maximiser) gains 0.08 x 0.32 - 0.32^2/8 = 0.0128.
    Not IC; IR (a (r_i - mean) >= -a w)."""

    def outcome(self, reports, rng=None):
        r, eps, pay = self.base(reports)
        return eps, pay + 0.1 * (r - r.mean()) + 0.4


# ---- truthful with discontinuities ---------------------------------------------------
class MultiStepPosted(Mechanism):
    """eps = 1{r <= 2} + 0.5 x 1{r <= 3.5}, paid 2 x 1{r <= 2} + 1.75 x 1{r <= 3.5}: two
    posted prices; u_c(z) = (2 - c) 1{z <= 2} + 0.5 (3.5 - c) 1{z <= 3.5}, each term
    maximised by the truth.  IC and IR (0 exactly above 3.5)."""

    def outcome(self, reports, rng=None):
        r = np.asarray(reports, dtype=float)
        a, b = (r <= 2.0).astype(float), (r <= 3.5).astype(float)
        return a + 0.5 * b, 2.0 * a + 1.75 * b


class RankUnits(Mechanism):
    """The lowest report gets eps 1, the 2nd and 3rd get 0.5, ties to the lower index.
    Given the others' sorted reports o1 <= o2 <= o3 <= o4, a seller's eps as a function
    of its own report steps from 1 to 0.5 at o1 and to 0 at o3 (non-increasing); paid by
    Eq. 8: 0.5 o1 + 0.5 o3 at rank 1, 0.5 o3 at rank 2-3, 0 else (every winning report
    at one level pays the same).  IC and IR; at an exact tie either side's outcome is
    a threshold outcome, so a tie gains nothing."""

    def outcome(self, reports, rng=None):
        r = np.asarray(reports, dtype=float)
        n = r.size
        eps, pay = np.zeros(n), np.zeros(n)
        for i in range(n):
            o = np.sort(np.delete(r, i))
            # rank of i: the others strictly below it, and those tied with it of lower index
            below = int((o < r[i]).sum()) + int((r[:i] == r[i]).sum())
            if below == 0:
                eps[i], pay[i] = 1.0, 0.5 * o[0] + 0.5 * o[2]
            elif below <= 2:
                eps[i], pay[i] = 0.5, 0.5 * o[2]
        return eps, pay


class HugeJump(Mechanism):
    """eps = 1e6 x 1{r <= 3}, paid 3e6 x 1{r <= 3}: a posted price in units of 1e6 (u =
    1e6 (3 - c)^+ at the truth, 1e6 (3 - c) or 0 at any report).  IC and IR."""

    def outcome(self, reports, rng=None):
        r = np.asarray(reports, dtype=float)
        eps = 1e6 * (r <= 3.0)
        return eps, 3.0 * eps


# ---- IR exactly at 0 -----------------------------------------------------------------
class BuyAllAt(Mechanism):
    """Every seller bought at eps 1 and paid ``price``, whatever it reports: IC.  At price
    5 (the top) u = 5 - c >= 0, 0 exactly at the top (IR); at price 5 - 4e-4 (1e-4 w
    below) a seller of cost 5 gets -4e-4 (not IR)."""

    def __init__(self, price: float):
        self.price = price

    def outcome(self, reports, rng=None):
        n = len(reports)
        return np.ones(n), np.full(n, self.price)


class Nothing(Mechanism):
    """Nobody is bought or paid: u = 0 at every report.  IC and IR (every inequality an
    equality; no incentive scale at all)."""

    def outcome(self, reports, rng=None):
        n = len(reports)
        return np.zeros(n), np.zeros(n)


UNBAL = (5.0, 1.0, 3.0, 3.0, 5.0)
CASES = [
    Case("split-lottery", "IC in expectation only", partial(SplitLottery, 0.5), LAW, True,
         True, PROFILES3, **RANDOM),
    Case("split-lottery-biased", "IC in expectation only", partial(SplitLottery, 0.6), LAW,
         False, True, PROFILES3, gain=Witness(0, 1.0, 5 / 3, PROFILES3[0], 1 / 15),
         verdicts=("not_ic", "inconclusive"), **RANDOM),
    Case("cyclic-transfers", "budget-balanced look", partial(Cyclic, 0.4), LAW, True, True,
         (*PROFILES, UNBAL)),
    Case("cyclic-unbalanced-ir", "budget-balanced look", partial(Cyclic, 0.0), LAW, True,
         False, (*PROFILES, UNBAL), ir_fail=IRWitness(0, 5.0, UNBAL, -0.4)),
    Case("mean-relative", "budget-balanced look", MeanRelative, LAW, False, True, PROFILES,
         gain=Witness(0, 2.0, 2.32, PROFILES[0], 0.0128)),
    Case("multi-step-posted", "truthful with jumps", MultiStepPosted, LAW, True, True,
         PROFILES, points=(2.0, 3.5)),
    Case("rank-units", "truthful with jumps", RankUnits, LAW, True, True,
         (*PROFILES, (2.0, 2.0, 2.0, 3.0, 3.0), (3.0, 1.0, 3.0, 3.0, 4.0)),
         points=(1.0, 2.0, 3.0, 4.0), n_grid=81),
    Case("huge-jump", "truthful with jumps", HugeJump, LAW, True, True, PROFILES,
         points=(3.0,)),
    Case("buy-all-at-top", "IR at 0", partial(BuyAllAt, 5.0), LAW, True, True, PROFILES),
    Case("buy-all-below-top", "IR at 0", partial(BuyAllAt, 5.0 - 4e-4), LAW, True, False,
         PROFILES, ir_fail=IRWitness(0, 5.0, PROFILES[0], -4e-4)),
    Case("nothing", "IR at 0", Nothing, LAW, True, True, PROFILES),
]  # fmt: skip
