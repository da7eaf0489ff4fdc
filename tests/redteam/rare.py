"""Rare large prizes (randomized; IC and IR are statements about expected utilities).

On U[1, 5], linear rule of ``common``.  ``expected`` is the closed-form expectation the
brute force uses (``brute.check_expectation`` checks it against ``outcome`` by
simulation)."""

from __future__ import annotations

from functools import partial

from .common import RANDOM, U15, Case, LinearMechanism, Witness, drawn_profiles

LAW = "uniform:1:5"
PROFILES = drawn_profiles(1.0, 5.0, 3, seed=7)


class Prize(LinearMechanism):
    """T(r) plus a prize P with probability p (per seller and draw) to every seller whose
    report is >= ``above`` (``above`` = 1: to everyone).  E[u_c(z)] = T(z) - c eps(z) +
    p P 1{z >= above}.  With above = 4, cost c < 4 reporting 4 gains p P - (4 - c)^2/8
    in expectation: not IC when p P > 0; IR.  With above = 1 the prize does not depend
    on the report: IC and IR."""

    randomized = True
    n_draws = 16

    def __init__(self, p: float, prize: float, above: float):
        self.p, self.prize, self.above = p, prize, above

    def outcome(self, reports, rng=None):
        r, eps, pay = self.base(reports)
        hit = rng.random(r.size) < self.p
        return eps, pay + self.prize * hit * (r >= self.above)

    def expected(self, reports):
        r, eps, pay = self.base(reports)
        return eps, pay + self.p * self.prize * (r >= self.above)


def _case(name, p, prize, above, cost, verdicts):
    make = partial(Prize, p, prize, above)
    if above <= 1.0:
        return Case(name, "rare prize", make, LAW, True, True, PROFILES, **RANDOM,
                    verdicts=verdicts, ir_verdicts=("ir", "inconclusive"))  # fmt: skip
    gain = p * prize - U15.loss(cost, above)
    return Case(name, "rare prize", make, LAW, False, True, PROFILES, **RANDOM,
                gain=Witness(0, cost, above, PROFILES[0], gain), points=(above,),
                verdicts=verdicts, ir_verdicts=("ir", "inconclusive"))  # fmt: skip


# a prize of 10 w with probability 1e-2 (expected 0.4) and of 300 w with probability 1e-4
# (expected 0.12, the issue's): found, or an honest "more draws are needed"
CASES = [
    _case("prize-1e-2", 1e-2, 40.0, 4.0, 3.5, ("not_ic", "inconclusive")),
    _case("prize-1e-4", 1e-4, 1200.0, 4.0, 3.9, ("not_ic", "inconclusive")),
    _case("prize-for-all", 1e-3, 400.0, 1.0, 0.0, ("ic", "inconclusive")),  # IR: below
]
