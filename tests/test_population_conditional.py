"""Population.conditional_virtual_cost to 1e-9 relative on every target (#47).

The definition (docstring of ``conditional_virtual_cost``): given the data U ~ U[a, b],
psi(c) = c + G(c) / g(c) with G(c) = E Phi((z - rho Phi^-1(U)) / s) and
g(c) = f(c) / phi(z) E phi((z - rho Phi^-1(U)) / s) / s, z = Phi^-1(F(c)),
s = sqrt(1 - rho^2).  Two references that share no code with the closed form:
scipy's adaptive quad in u (the definition as written, its end singularities left to
quad) and mpmath's tanh-sinh quadrature in t = Phi^-1(u) at 20 digits.  A point band
(a feature's value) is the limit a = b: the expectations are values at t.
"""

from __future__ import annotations

import mpmath
import numpy as np
import pytest
from scipy import integrate, stats

from market_sim.population import Population, _bivariate_normal_cdf

mpmath.mp.dps = 20


def _psi_scipy(c, F, f, a, b, rho):
    s = np.sqrt(1 - rho**2)
    z = stats.norm.ppf(F)
    if a == b:
        t = stats.norm.ppf(a)
        G, e = stats.norm.cdf((z - rho * t) / s), stats.norm.pdf((z - rho * t) / s)
    else:
        kw = dict(epsabs=0.0, epsrel=1e-13, limit=400)
        G = integrate.quad(lambda u: stats.norm.cdf((z - rho * stats.norm.ppf(u)) / s), a, b, **kw)[
            0
        ]
        e = integrate.quad(lambda u: stats.norm.pdf((z - rho * stats.norm.ppf(u)) / s), a, b, **kw)[
            0
        ]
        G, e = G / (b - a), e / (b - a)
    return c + G / (f / stats.norm.pdf(z) * e / s)


def _psi_mpmath(c, F, f, a, b, rho):
    rho = mpmath.mpf(rho)
    s = mpmath.sqrt(1 - rho**2)
    z = mpmath.sqrt(2) * mpmath.erfinv(2 * mpmath.mpf(F) - 1)
    ta = -mpmath.inf if a == 0 else mpmath.sqrt(2) * mpmath.erfinv(2 * mpmath.mpf(a) - 1)
    tb = mpmath.inf if b == 1 else mpmath.sqrt(2) * mpmath.erfinv(2 * mpmath.mpf(b) - 1)
    if a == b:
        G = mpmath.ncdf((z - rho * ta) / s)
        e = mpmath.npdf((z - rho * ta) / s)
    else:
        mass = mpmath.ncdf(tb) - mpmath.ncdf(ta)
        G = mpmath.quad(lambda t: mpmath.ncdf((z - rho * t) / s) * mpmath.npdf(t), [ta, tb]) / mass
        e = mpmath.quad(lambda t: mpmath.npdf((z - rho * t) / s) * mpmath.npdf(t), [ta, tb]) / mass
    return float(c + G / (mpmath.mpf(f) / mpmath.npdf(z) * e / s))


@pytest.mark.parametrize("on, rho", [("label", -0.8), ("label_noise", 0.5), (1, -0.8)])
def test_conditional_virtual_cost_matches_two_references(on, rho):
    pop = Population([("uniform:0:1", 2), ("beta:2:5:0:2", 2)], data="synthetic",
                     rho=rho, on=on, label_noise=0.3)  # fmt: skip
    mk = pop.sample(np.random.default_rng(3))
    psi = pop.conditional_virtual_cost(mk)
    laws = [pop.laws[g] for g in mk.group]
    a, b = mk.band
    for i in range(mk.costs.size):
        c = float(mk.costs[i])
        F, f = float(laws[i].cdf(c)), float(laws[i].pdf(c))
        args = (c, F, f, float(a[i]), float(b[i]), rho)
        ref_quad, ref_mp = _psi_scipy(*args), _psi_mpmath(*args)
        assert ref_quad == pytest.approx(ref_mp, rel=1e-10)  # the references agree
        assert psi[i] == pytest.approx(ref_mp, rel=1e-9), (i, on)


@pytest.mark.parametrize("rho", [-0.9, 0.0, 0.95])
def test_bivariate_normal_cdf_against_mpmath(rho):
    s = mpmath.sqrt(1 - mpmath.mpf(rho) ** 2)
    for h, k in ((0, 0), (0, 1.3), (-0.7, 0), (1.2, -0.4), (-2, -3), (3, 2.5), (-6, 1)):
        ref = mpmath.quad(
            lambda x, k=k: mpmath.npdf(x) * mpmath.ncdf((k - rho * x) / s), [-mpmath.inf, h]
        )
        # relative to 1e-12, or absolute to rounding (a far tail: Owen's sum cancels)
        assert _bivariate_normal_cdf(h, k, rho) == pytest.approx(float(ref), rel=1e-12, abs=1e-16)
    assert _bivariate_normal_cdf(np.inf, 0.3, rho) == pytest.approx(stats.norm.cdf(0.3), rel=1e-15)
    assert _bivariate_normal_cdf(-np.inf, 0.3, rho) == 0.0
