"""What every red-team mechanism is built from: the case record and the linear Myerson rule.

The linear rule on a support [lo, hi] (width w) at allocation scale s:

    eps(r)  = s (hi - r) / w                       (non-increasing)
    rent(r) = int_r^hi eps = s (hi - r)^2 / (2 w)
    T(r)    = r eps(r) + rent(r)                   (Myerson's payment, Eq. 8 of AES)

A seller of cost c reporting z gets u_c(z) = T(z) - c eps(z), and

    u_c(c) - u_c(z) = int_c^z (eps(y) - eps(z)) dy = s (z - c)^2 / (2 w) >= 0   (IC)
    u_c(c) = rent(c) >= 0, = 0 exactly at the top                             (IR)

Each case's docstring computes its gain as a bonus minus this loss.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from market_sim.mechanisms.base import Mechanism


@dataclass(frozen=True)
class Linear:
    """The linear Myerson rule on [lo, hi] at scale s (module doc)."""

    lo: float = 1.0
    hi: float = 5.0
    s: float = 1.0

    @property
    def w(self) -> float:
        return self.hi - self.lo

    def eps(self, r):
        return self.s * (self.hi - np.asarray(r, dtype=float)) / self.w

    def rent(self, r):
        return self.s * (self.hi - np.asarray(r, dtype=float)) ** 2 / (2 * self.w)

    def T(self, r):
        r = np.asarray(r, dtype=float)
        return r * self.eps(r) + self.rent(r)

    def loss(self, c, z):
        """u_c(c) - u_c(z) under T alone: s (z - c)^2 / (2 w)."""
        return self.s * (z - c) ** 2 / (2 * self.w)


U15 = Linear(1.0, 5.0)


class LinearMechanism(Mechanism):
    """A mechanism on a ``Linear`` rule: subclasses add to ``base``'s payments."""

    rule: Linear = U15

    def base(self, reports):
        r = np.asarray(reports, dtype=float)
        return r, self.rule.eps(r), self.rule.T(r)


@dataclass(frozen=True)
class Witness:
    """A profitable misreport, exactly: seller ``seller`` of cost ``cost`` reports
    ``report`` while the others report ``profile`` (the seller's own entry ignored)."""

    seller: int
    cost: float
    report: float
    profile: tuple
    gain: float


@dataclass(frozen=True)
class IRWitness:
    """A negative truthful utility: seller ``seller`` of cost ``cost``, others ``profile``."""

    seller: int
    cost: float
    profile: tuple
    utility: float


@dataclass(frozen=True)
class Case:
    """One mechanism of the corpus and its truth (proved in the mechanism's docstring).

    ``ic``/``ir``: the truth (ex post for deterministic mechanisms, in expectation for
    randomized ones); ``gain``/``ir_fail``: its exact witnesses when false.
    ``profiles``: the opponent profiles the proof says matter (full report vectors), on
    which the brute force runs with ``points`` added to each seller's own grid.
    ``verdicts``/``ir_verdicts``: what the audit may rightly say (``inconclusive`` only
    where a finite search or sample honestly cannot decide; never ``ic`` of a non-IC
    mechanism).  ``n_sellers``/``n_markets``/``settings``: the audit's run in the test.
    ``refused``: the audit must refuse the mechanism in one line (``MarketSimError``
    with this text): a wrong declaration is wrong input, not something to give a
    verdict on."""

    name: str
    cls: str
    make: Callable[[], Mechanism]
    law: str
    ic: bool
    ir: bool
    profiles: tuple
    gain: Witness | None = None
    ir_fail: IRWitness | None = None
    points: tuple = ()
    n_sellers: int = 5
    n_markets: int = 3
    settings: dict = field(default_factory=dict)
    verdicts: tuple = ()
    ir_verdicts: tuple = ()
    brute_sellers: tuple = (0,)
    n_grid: int = 161
    refused: str = ""  # the audit must refuse it (MarketSimError) with this message

    def allowed(self) -> tuple[tuple, tuple]:
        ic = self.verdicts or (("ic",) if self.ic else ("not_ic",))
        ir = self.ir_verdicts or (("ir",) if self.ir else ("not_ir",))
        return ic, ir

    @property
    def randomized(self) -> bool:
        return bool(getattr(self.make(), "randomized", False))


# a randomized case's audit in the test: small (each candidate costs n_draws outcomes and the
# confirmation up to n_confirm_max), with profiles of as many sellers
RANDOM = dict(n_sellers=3, n_markets=2, settings=dict(n_grid=9, n_random=8, n_confirm_max=1024))


def drawn_profiles(law_lo: float, law_hi: float, n: int, k: int = 6, seed: int = 0) -> tuple:
    """k uniform profiles of n reports (a seeded sample of ordinary markets) and the
    corner profiles (all at lo, all at hi)."""
    rng = np.random.default_rng(seed)
    drawn = [tuple(rng.uniform(law_lo, law_hi, n)) for _ in range(k)]
    return (*drawn, (law_lo,) * n, (law_hi,) * n)


def population_profiles(law: str, seed: int, *corners: tuple, k: int = 6) -> tuple:
    """k seeded samples of the population ``law`` (ordinary markets, each seller in its
    own class) and the given ``corners`` (full report vectors)."""
    from market_sim.population import as_population

    pop = as_population(law)
    rng = np.random.default_rng(seed)
    return (*[tuple(pop.sample(rng).costs) for _ in range(k)], *corners)
