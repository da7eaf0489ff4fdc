"""Gauss-Legendre on [0, 1] after z = (1 - cos theta)/2, theta in [0, pi].

The map's derivative vanishes at both ends, so an integrand with square-root
behaviour at an end point (an optimum's branch ending in a fold, a density
vanishing at the edge of its support) becomes smooth in theta and the rule
converges fast.  Integrate f over [a, b] as (b - a) * f(a + (b - a) * shape) @ jac.
"""

from __future__ import annotations

import numpy as np


def gauss_legendre_cos(n: int) -> tuple[np.ndarray, np.ndarray]:
    """(shape, jac): nodes in [0, 1] and the weights including the map's derivative."""
    t, w = np.polynomial.legendre.leggauss(int(n))
    theta = 0.5 * np.pi * (t + 1.0)
    return 0.5 * (1.0 - np.cos(theta)), 0.25 * np.pi * np.sin(theta) * w
