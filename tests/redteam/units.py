"""Unit scaling: the same mechanism in other units must get the same verdict.

``Shade`` on [lo, hi] (w = hi - lo) at allocation scale s pays T(r) + d (r - lo) eps(r)
(``common.Linear``).  Write r = lo + w x, c = lo + w y; every term is s w times a
function of (x, y):

    u_c(r) - u_c(c) = s w [ -(x - y)^2 / 2 + d (x (1 - x) - y (1 - y)) ],

maximised at y = 0, x = d / (1 + 2 d), with gain s w d^2 / (2 (1 + 2 d)).  At d = 0.03:
s w x 4.2453e-4, at report lo + w x 0.0283019.  Not IC in every unit; IR (the extra
term is >= 0).  Without it (d = 0) the mechanism is T: IC and IR in every unit."""

from __future__ import annotations

from functools import partial

from .common import Case, Linear, LinearMechanism, Witness, drawn_profiles

D = 0.03


class Shade(LinearMechanism):
    """T(r) + d (r - lo) eps(r) on ``rule`` (module doc for the gain)."""

    def __init__(self, rule: Linear, d: float = D):
        self.rule, self.d = rule, d

    def outcome(self, reports, rng=None):
        r, eps, pay = self.base(reports)
        return eps, pay + self.d * (r - self.rule.lo) * eps


def _case(name, lo, hi, s, d, law):
    rule = Linear(lo, hi, s)
    profiles = drawn_profiles(lo, hi, 5, seed=2)
    if d == 0:
        return Case(name, "units", partial(Shade, rule, 0.0), law, True, True, profiles)
    x = d / (1 + 2 * d)
    gain = s * rule.w * d**2 / (2 * (1 + 2 * d))
    witness = Witness(0, lo, lo + rule.w * x, profiles[0], gain)
    return Case(name, "units", partial(Shade, rule, d), law, False, True, profiles, gain=witness)


CASES = [
    _case("shade-unit", 0.0, 1.0, 1.0, D, "uniform:0:1"),
    _case("shade-kilo", 1000.0, 1001.0, 1.0, D, "uniform:1000:1001"),
    _case("shade-micro", 0.0, 1e-6, 1.0, D, "uniform:0:1e-6"),
    _case("shade-micro-eps", 0.0, 1.0, 1e-6, D, "uniform:0:1"),
    _case("shade-mega-eps", 1.0, 5.0, 1e6, D, "uniform:1:5"),
    _case("truthful-micro", 0.0, 1e-6, 1.0, 0.0, "uniform:0:1e-6"),
    _case("truthful-kilo-mega-eps", 1000.0, 1001.0, 1e6, 0.0, "uniform:1000:1001"),
]
