"""Gauss-Legendre on [0, 1] after z = (1 - cos theta)/2, theta in [0, pi].

The map's derivative vanishes at both ends, so an integrand with square-root
behaviour at an end point (an optimum's branch ending in a fold, a density
vanishing at the edge of its support) becomes smooth in theta and the rule
converges fast.  Integrate f over [a, b] as (b - a) * f(a + (b - a) * shape) @ jac.

``resolution_error`` judges, from the same n values, whether the rule has resolved
the integrand: the values are the integrand's Legendre series (in the rule's variable
t = 2 theta / pi - 1) of degree n - 1 sampled at the nodes, and an n-node rule errs by
about the size of the series' coefficients of degree 2n.  Where the coefficients decay
geometrically (an integrand analytic around the interval) that error is extrapolated
from the decay between degree n/2 and n - 1; where they do not (structure on a scale
far below the interval's width, an end-point singularity the map does not smooth) the
estimate is the last coefficients themselves, which is large, and the caller splits.
"""

from __future__ import annotations

from functools import cache

import numpy as np


@cache
def gauss_legendre_cos(n: int) -> tuple[np.ndarray, np.ndarray]:
    """(shape, jac): nodes in [0, 1] and the weights including the map's derivative."""
    t, w = np.polynomial.legendre.leggauss(int(n))
    theta = 0.5 * np.pi * (t + 1.0)
    shape, jac = 0.5 * (1.0 - np.cos(theta)), 0.25 * np.pi * np.sin(theta) * w
    shape.flags.writeable = jac.flags.writeable = False
    return shape, jac


_NOISE = 1e-12  # a coefficient this small against the values' size is treated as 0:
# rounding of eps itself (a cubic root, a re-solve), far below the payments' 1e-9


@cache
def _legendre_analysis(n: int) -> np.ndarray:
    """(n, n) matrix: the Legendre coefficients c_0..c_{n-1} (in t) of the integrand
    g(t) = f(z(t)) dz/dt from f at the nodes of ``gauss_legendre_cos(n)`` (discrete
    Legendre transform, exact for g of degree < n)."""
    t, w = np.polynomial.legendre.leggauss(int(n))
    _, jac = gauss_legendre_cos(n)
    g_of_f = jac / w  # dz/dt at the nodes: g = f * jac / w
    P = np.polynomial.legendre.legvander(t, n - 1)  # P[k, j] = P_j(t_k)
    M = (np.arange(n) + 0.5)[:, None] * (P * (w * g_of_f)[:, None]).T
    M.flags.writeable = False
    return M


def resolution_error(values: np.ndarray) -> np.ndarray:
    """Estimated error of the ``gauss_legendre_cos(n)`` rule on [0, 1] from the
    integrand's values at its n nodes (one row of ``values`` per integrand):
    2 max|c_tail| r^2, c_tail the last four Legendre coefficients (fewer when n < 16),
    r = max|c_tail| / max|c_mid| their decay over ~n/2 degrees (r^2 carries the tail
    from degree n to ~2n), r = 1 (no extrapolation) where they do not fall; 0 where the
    last ones are at the values' rounding level.  Times the width for [a, b]."""
    values = np.atleast_2d(values)
    n = values.shape[1]
    c = np.abs(values @ _legendre_analysis(n).T)
    k = max(1, min(4, n // 4))  # coefficients per group (an odd or even one may vanish)
    tail = c[:, n - k :].max(axis=1)
    mid = c[:, n // 2 - k // 2 : n // 2 - k // 2 + k].max(axis=1)
    # coefficients at the rounding level of the values: resolved (error 0, not noise)
    tail = np.where(tail <= _NOISE * c.sum(axis=1), 0.0, tail)
    with np.errstate(invalid="ignore", divide="ignore"):
        r = np.where(tail < mid, tail / mid, 1.0)
    return 2.0 * tail * r * r
