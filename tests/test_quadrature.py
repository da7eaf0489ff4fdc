"""The payments' quadrature: the cos-mapped Gauss-Legendre rule, its error estimate from
its own values (``resolution_error``), and the adaptive halving built on it (#47).

Truths are closed forms: int_0^1 e^z = e - 1; int_0^1 z^(1/4) = 4/5; int_0^1 |z - 0.3|
= 0.29; int_0^1 1 / (z + d) = log((1 + d) / d); int_0^w (z + d)^(-1/2) = 2 (sqrt(w + d)
- sqrt(d)).  Cases built to fool an estimate: an algebraic end (z^(1/4), whose
coefficients fall slowly), a kink inside, structure on a scale 1e-9 of the width (one
rule errs by ~1e-4 there, as in the audit's floor profiles)."""

from __future__ import annotations

import numpy as np
import pytest

from market_sim.mechanisms.payments import _adaptive
from market_sim.mechanisms.quadrature import gauss_legendre_cos, resolution_error

CASES = [
    (np.exp, np.e - 1),
    (lambda z: z**0.25, 0.8),
    (lambda z: np.abs(z - 0.3), 0.29),
    (lambda z: 1 / (z + 1e-4), np.log((1 + 1e-4) / 1e-4)),
]


@pytest.mark.parametrize("f, exact", CASES)
def test_the_estimate_bounds_the_error_within_the_safety_factor(f, exact):
    shape, jac = gauss_legendre_cos(32)
    vals = f(shape)
    err = abs(vals @ jac - exact)
    est = float(resolution_error(vals)[0])
    assert err <= 10 * est + 1e-15 * abs(exact)  # _QUAD_SAFETY = 10
    if err > 1e-12:  # an unresolved rule is said to be one
        assert est > 1e-12


def test_an_analytic_integrand_is_accepted_with_no_extra_evaluation():
    calls = []

    def eps_of(rows, z):
        calls.append(z.size)
        return np.exp(z)

    rows, a, b, q = _adaptive(eps_of, np.array([0]), np.array([0.0]), np.array([1.0]), 32)
    assert rows.size == 1 and calls == [32]
    assert q[0] == pytest.approx(np.e - 1, rel=1e-15)


@pytest.mark.parametrize("d", [1e-9, 1e-12])
def test_structure_far_below_the_width_is_halved_down_to_exact(d):
    w = 1e-3

    def eps_of(rows, z):
        return (z + d) ** -0.5

    shape, jac = gauss_legendre_cos(32)
    exact = 2 * (np.sqrt(w + d) - np.sqrt(d))
    one_rule = w * (eps_of(None, w * shape) @ jac)
    assert abs(one_rule - exact) > 1e-6 * exact  # what a fixed rule gives
    rows, a, b, q = _adaptive(eps_of, np.array([0]), np.array([0.0]), np.array([w]), 32)
    assert q.sum() == pytest.approx(exact, rel=1e-12)
    assert a.min() == 0.0 and b.max() == w and np.allclose(np.sort(a)[1:], np.sort(b)[:-1])
