"""Per-class prices on a population: each seller judged on its own support.

7 sellers on U[0, 1] (class 0, sellers 0..6) and 3 on U[1, 2] (class 1, sellers 7..9),
``7*uniform:0:1+3*uniform:1:2``.  Each mechanism is per seller (``per_seller_laws``)
and reads a report past a seller's own support as that end (``in_own_support``), so a
report outside it gives an outcome of an in-support report: IC and IR are statements on
the own support only."""

from __future__ import annotations

import numpy as np

from market_sim.mechanisms.base import Mechanism, as_mechanism, in_own_support
from market_sim.population import as_population

from .common import Case, IRWitness, population_profiles

LAW = "7*uniform:0:1+3*uniform:1:2"


PROFILES = population_profiles(LAW, 6, (0.0,) * 7 + (1.0,) * 3, (1.0,) * 7 + (2.0,) * 3)


class OwnPsiPrice(Mechanism):
    """docs/extending.md's example at threshold 1.5: seller i bought at eps 1 iff its own
    virtual cost psi_i(r) < 1.5, paid p_i = psi_i^-1(1.5) (0.75 on U[0, 1], psi = 2c;
    1.25 on U[1, 2], psi = 2c - 1).  A posted price per seller: u_c = (p_i - c)^+ at the
    truth and p_i - c or 0 at any report: IC and IR."""

    per_seller_laws = True

    def __init__(self, dist, threshold=1.5):
        self.dist, self.threshold = dist, threshold
        laws = [dist.law(i) for i in range(dist.n_sellers)]
        self.price = np.array([law.inverse_virtual_cost(threshold) for law in laws], float)

    def outcome(self, reports, rng=None):
        r = in_own_support(self.dist, reports)
        eps = np.where(self.dist.virtual_cost(r) < self.threshold, 1.0, 0.0)
        return eps, eps * self.price


class OwnTopPrice(Mechanism):
    """Every seller bought at eps 1 and paid the top of its own support (1 or 2): u =
    top_i - c >= 0 on the own support, whatever is reported (IC, IR; 0 at the own top).
    A seller of class 0 judged at the pooled top 2 would show 1 - 2 = -1: not a cost it
    can have."""

    per_seller_laws = True

    def __init__(self, dist):
        self.dist = dist

    def outcome(self, reports, rng=None):
        in_own_support(self.dist, reports)
        return np.ones(len(reports)), np.asarray(self.dist.high, dtype=float).copy()


class ClassFee(Mechanism):
    """Per seller the linear rule on its own support [lo_i, hi_i] (w_i = 1): eps =
    hi_i - r, t = r eps + (hi_i - r)^2 / 2 (IC and IR, ``common``), minus 0.05 for
    class 1: u = (2 - c)^2 / 2 - 0.05 < 0 for c > 2 - sqrt(0.1) = 1.684; seller 7 at its
    top 2: -0.05.  IC; not IR (class 1 only)."""

    per_seller_laws = True

    def __init__(self, dist):
        self.dist = dist

    def outcome(self, reports, rng=None):
        r = in_own_support(self.dist, reports)
        hi = np.asarray(self.dist.high, dtype=float)
        eps = hi - r
        return eps, r * eps + eps**2 / 2 - 0.05 * (hi > 1.5)


def _make(cls):
    return lambda: as_mechanism(cls, population=as_population(LAW))


CASES = [
    Case("own-psi-price", "population support", _make(OwnPsiPrice), LAW, True, True,
         PROFILES, brute_sellers=(0, 7), n_sellers=10, n_markets=1, points=(0.75, 1.25)),
    Case("own-top-price", "population support", _make(OwnTopPrice), LAW, True, True,
         PROFILES, brute_sellers=(0, 7), n_sellers=10, n_markets=1),
    Case("class-fee", "population support", _make(ClassFee), LAW, True, False, PROFILES,
         ir_fail=IRWitness(7, 2.0, PROFILES[0], -0.05), brute_sellers=(0, 7), n_sellers=10,
         n_markets=1),
]  # fmt: skip
