"""IR failing in a narrow interior window of costs.

Under IC a truthful utility is non-increasing in the cost (u(c) = u(hi) + int_c^hi eps
for a truthful single-parameter mechanism), so an IR failure confined to an interior
window is itself a proof of non-IC: a seller inside the window gains by reporting just
outside it.  Both cases: the linear rule of ``common`` on U[1, 5] minus a fee of 1 for
reports in a window [a, a + v)."""

from __future__ import annotations

from functools import partial

from .common import U15, Case, IRWitness, LinearMechanism, Witness, drawn_profiles

LAW = "uniform:1:5"
PROFILES = drawn_profiles(1.0, 5.0, 5, seed=5)


class FeeWindow(LinearMechanism):
    """T(r) - 1 for r in [a, a + v).  Cost c = a + v/2 in the window: u = rent(c) - 1 < 0
    (rent <= 0.5 for c >= 3): not IR.  The same seller reporting a + v (outside) gains
    1 - (v/2)^2 / 8: not IC."""

    def __init__(self, a: float, v: float):
        self.a, self.v = a, v

    def outcome(self, reports, rng=None):
        r, eps, pay = self.base(reports)
        return eps, pay - 1.0 * ((r >= self.a) & (r < self.a + self.v))


def _case(name, a, v):
    c = a + v / 2
    return Case(name, "IR window", partial(FeeWindow, a, v), LAW, False, False, PROFILES,
                gain=Witness(0, c, a + v, PROFILES[0], 1.0 - U15.loss(c, a + v)),
                ir_fail=IRWitness(0, c, PROFILES[0], float(U15.rent(c)) - 1.0),
                points=(a, c, a + v))  # fmt: skip


CASES = [
    _case("fee-window-1e-3", 3.0, 4e-3),  # 1e-3 of the support
    _case("fee-window-1e-4", 4.0, 4e-4),  # 1e-4 of the support
]
