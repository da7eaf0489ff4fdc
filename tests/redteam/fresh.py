"""Twists nobody tuned for (issue #54, the fourth red team): a window around another
seller's report that excludes the tie itself, an IR failure confined to an interior
band of one population class, and randomness a mechanism does not declare.

Linear rule of ``common`` (u_c(c) - u_c(z) = s (z - c)^2 / (2 w), rent(c) = s (hi -
c)^2 / (2 w)) on U[1, 5] (w = 4) or on [1, 3] (w = 2)."""

from __future__ import annotations

import numpy as np

from .common import (
    RANDOM,
    U15,
    Case,
    IRWitness,
    Linear,
    LinearMechanism,
    Witness,
    drawn_profiles,
    population_profiles,
)

LAW = "uniform:1:5"
PROFILES = drawn_profiles(1.0, 5.0, 5, seed=11)
NEAR = 1e-7  # the window's width, 2.5e-8 of the support


class NearTieBonus(LinearMechanism):
    """T(r) plus a bonus of 0.5 to a seller whose report is within (0, 1e-7] above some
    other seller's report: an exact tie gets nothing.  A seller of cost c reporting z =
    r_j + 1e-8 (r_j another's report, within 1 of c) gains 0.5 - (z - c)^2 / 8 >= 0.375:
    not IC.  The truthful utility is rent(c) >= 0 plus a bonus >= 0: IR."""

    def outcome(self, reports, rng=None):
        r, eps, pay = self.base(reports)
        d = r[:, None] - r[None, :]  # d[i, j] = r_i - r_j
        near = (d > 0) & (d <= NEAR)
        return eps, pay + 0.5 * near.any(axis=1)


_C0, _R1 = PROFILES[0][0], PROFILES[0][1]
_NEAR_REPORT = _R1 + 1e-8
_NEAR_GAIN = 0.5 - U15.loss(_C0, _NEAR_REPORT)


POP = "3*uniform:1:2+2*uniform:2:3"  # class 0: sellers 0..2 on [1, 2]; class 1: 3, 4 on [2, 3]
L13 = Linear(1.0, 3.0)
BAND = (2.4, 2.5)  # inside class 1's support only


class ClassBandFee(LinearMechanism):
    """The linear rule on [1, 3] (w = 2) minus a fee of 0.2 on reports in [2.4, 2.5], an
    interior band of class 1's support [2, 3] that class 0 ([1, 2]) never reaches.
    Class 0: the rule alone on its own support, IC and IR.  Class 1: a seller of cost c in
    the band has u = (3 - c)^2 / 4 - 0.2 < 0 (at most 0.09 - 0.2): not IR (cost 2.45:
    0.075625 - 0.2 = -0.124375); reporting 2.51 escapes the fee at a loss of (2.51 -
    c)^2 / 4: cost 2.45 gains 0.2 - 0.0009 = 0.1991: not IC.  Outside the band class 1's
    costs are IC (the fee only lowers band reports) and IR."""

    rule = L13

    def outcome(self, reports, rng=None):
        r, eps, pay = self.base(reports)
        return eps, pay - 0.2 * ((r >= BAND[0]) & (r <= BAND[1]))


POP_PROFILES = population_profiles(POP, 12, (1.0,) * 3 + (2.45,) * 2, (2.0,) * 3 + (3.0,) * 2)


class UndeclaredRandom(LinearMechanism):
    """Declares ``randomized = False`` but pays T(r) + 0.4 (u - 1/2), u uniform: drawn
    from the generator it is given, or from its own (seeded) one when given none, as an
    exact audit calls it.  In expectation T(r): IC and IR (``expected``; the truth of a
    randomized mechanism).  Called twice on the same reports it answers differently, so
    one call is no exact evaluation: a search of single calls read its noise (up to 0.2)
    as gains and its top's u - 1/2 < 0 as IR failures (``not_ic``, ``not_ir`` on both
    seeds before).  The audit refuses it in one line: the declaration is wrong input,
    and ``randomized = True`` audits it in expectation."""

    randomized = False

    def __init__(self):
        self.own = np.random.default_rng(2026)

    def outcome(self, reports, rng=None):
        r, eps, pay = self.base(reports)
        u = (self.own if rng is None else rng).random()
        return eps, pay + 0.4 * (u - 0.5)

    def expected(self, reports):
        r, eps, pay = self.base(reports)
        return eps, pay


CASES = [
    Case("near-tie-bonus", "a window around another's report", NearTieBonus, LAW, False,
         True, PROFILES, gain=Witness(0, _C0, _NEAR_REPORT, PROFILES[0], _NEAR_GAIN),
         points=(_R1, _NEAR_REPORT)),
    Case("class-band-fee", "population: an interior band of one class", ClassBandFee, POP,
         False, False, POP_PROFILES, gain=Witness(3, 2.45, 2.51, POP_PROFILES[0], 0.1991),
         ir_fail=IRWitness(3, 2.45, POP_PROFILES[0], -0.124375), points=BAND,
         brute_sellers=(0, 3), n_sellers=5, n_markets=3),
    Case("undeclared-random", "randomness not declared", UndeclaredRandom, LAW, True, True,
         drawn_profiles(1.0, 5.0, 3, seed=13), **RANDOM,
         refused="declares randomized = False, but outcome gave different results"),
]  # fmt: skip


# a power-law tail on 10^-4 strata: each decade of the prize carries 0.1 of the mean
_LEVELS = ((1e-2, 10.0), (1e-3, 100.0), (1e-4, 1000.0))
_BASE = 0.2 / (1.0 - sum(p for p, _ in _LEVELS))  # paid back on every other draw


class DecadeTail(LinearMechanism):
    """T(r) plus, for a report >= 4, a draw X: 10, 100 or 1000 with probabilities 1e-2,
    1e-3, 1e-4 (u < 1e-4: 1000; u < 1.1e-3: 100; u < 1.11e-2: 10), else -0.2 / 0.9889
    (= -0.20224...).  Each decade carries 0.1 of E[X] = 0.3 - 0.2 = 0.1, so a sample of
    D draws misses about a third of the mean for D ~ 10^3 and most of it below 100: the
    gain lives in the tail.  A seller of cost c < 4 reporting 4 gains 0.1 - (4 - c)^2 / 8
    in expectation (cost 3.5: 0.06875): not IC.  IR: u_c(c) = rent(c) >= 0 for c < 4
    and rent(c) + 0.1 for c >= 4."""

    randomized = True

    def outcome(self, reports, rng=None):
        r, eps, pay = self.base(reports)
        u = rng.random()
        x = -_BASE
        edge = 0.0
        for p, prize in reversed(_LEVELS):  # the rarest first: u in [edge, edge + p)
            if edge <= u < edge + p:
                x = prize
            edge += p
        return eps, pay + x * (r >= 4.0)

    def expected(self, reports):
        r, eps, pay = self.base(reports)
        return eps, pay + 0.1 * (r >= 4.0)


_TAIL_PROFILES = drawn_profiles(1.0, 5.0, 3, seed=14)
CASES.append(
    Case(
        "decade-tail",
        "gain in a power-law tail",
        DecadeTail,
        LAW,
        False,
        True,
        _TAIL_PROFILES,
        **RANDOM,
        gain=Witness(0, 3.5, 4.0, _TAIL_PROFILES[0], 0.1 - U15.loss(3.5, 4.0)),
        points=(4.0,),
        verdicts=("not_ic", "inconclusive"),
        ir_verdicts=("ir", "inconclusive"),
    )  # fmt: skip
)
