"""Additive noise for a scalar query of sensitivity Delta f, as frozen distributions.

* ``Laplace(sensitivity, epsilon)``: scale Delta f / epsilon, epsilon-DP.
* ``AnalyticGaussian(sensitivity, epsilon, delta)``: the smallest sigma with
  Phi(D/(2 s) - e s/D) - e^eps Phi(-D/(2 s) - e s/D) <= delta (Balle and Wang, 2018,
  Thm 8), which is exact: the classical sigma = D sqrt(2 log(1.25/delta))/eps is larger.
* ``TruncatedLaplace(sensitivity, epsilon, delta)``: density B exp(-|x|/lambda) on
  [-A, A] with lambda = D/eps, A = (D/eps) log(1 + (e^eps - 1)/(2 delta)),
  B = 1/(2 lambda (1 - e^(-A/lambda))) (Geng et al., as used in 002); sampled by
  the inverse of its CDF.

Each has ``pdf``, ``cdf``, ``var()``, ``sample(rng, size)`` and ``privacy_delta(eps)``: the
smallest delta for which the mechanism is (eps, delta)-DP at that eps.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from itertools import pairwise
from typing import Any

import numpy as np
from scipy import stats
from scipy.optimize import brentq

from ..errors import MarketSimError


def _check(sensitivity, epsilon, delta=None, delta_max=1.0):
    if not (np.isfinite(sensitivity) and sensitivity > 0):
        raise MarketSimError(f"sensitivity must be a finite number > 0 (got {sensitivity!r})")
    if not (np.isfinite(epsilon) and epsilon > 0):
        raise MarketSimError(f"epsilon must be a finite number > 0 (got {epsilon!r})")
    if delta is not None and not (0 < delta < delta_max):
        raise MarketSimError(f"delta must be in (0, {delta_max:g}) (got {delta!r})")


def _gaussian_delta(sigma, sensitivity, eps):
    """delta(eps) of N(0, sigma^2) noise on a query of sensitivity D (exact)."""
    a, b = sensitivity / (2 * sigma), eps * sigma / sensitivity
    return stats.norm.cdf(a - b) - np.exp(eps) * stats.norm.cdf(-a - b)


class _ScipyNoise:
    """pdf and cdf from the scipy frozen distribution ``_frozen()``."""

    def _frozen(self) -> Any:  # each subclass: its scipy frozen distribution (untyped)
        raise NotImplementedError

    def pdf(self, x):
        return self._frozen().pdf(x)

    def cdf(self, x):
        return self._frozen().cdf(x)

    def var(self) -> float:
        return float(self._frozen().var())


@dataclass(frozen=True)
class Laplace(_ScipyNoise):
    sensitivity: float
    epsilon: float

    def __post_init__(self):
        _check(self.sensitivity, self.epsilon)

    @property
    def scale(self) -> float:
        return self.sensitivity / self.epsilon

    def _frozen(self):
        return stats.laplace(scale=self.scale)

    def sample(self, rng: np.random.Generator, size=None):
        return rng.laplace(0.0, self.scale, size)

    def privacy_delta(self, eps: float) -> float:
        """0 for eps >= epsilon; else 1 - exp((eps - epsilon)/2) (the shifted-Laplace
        hockey stick)."""
        return 0.0 if eps >= self.epsilon else float(1 - np.exp((eps - self.epsilon) / 2))


@dataclass(frozen=True)
class AnalyticGaussian(_ScipyNoise):
    sensitivity: float
    epsilon: float
    delta: float
    sigma: float = field(init=False)

    def __post_init__(self):
        _check(self.sensitivity, self.epsilon, self.delta)

        def f(log_s):
            return _gaussian_delta(np.exp(log_s), self.sensitivity, self.epsilon) - self.delta

        lo, hi = np.log(self.sensitivity) - 20, np.log(self.sensitivity) + 20
        object.__setattr__(self, "sigma", float(np.exp(brentq(f, lo, hi, xtol=1e-14))))

    def _frozen(self):
        return stats.norm(scale=self.sigma)

    def sample(self, rng: np.random.Generator, size=None):
        return rng.normal(0.0, self.sigma, size)

    def privacy_delta(self, eps: float) -> float:
        return float(max(_gaussian_delta(self.sigma, self.sensitivity, eps), 0.0))


@dataclass(frozen=True)
class TruncatedLaplace:
    sensitivity: float
    epsilon: float
    delta: float

    def __post_init__(self):
        _check(self.sensitivity, self.epsilon, self.delta, delta_max=0.5)

    @property
    def lam(self) -> float:
        return self.sensitivity / self.epsilon

    @property
    def bound(self) -> float:
        """A: the support is [-A, A]."""
        return self.lam * np.log1p(np.expm1(self.epsilon) / (2 * self.delta))

    @property
    def _B(self) -> float:
        return 1.0 / (2 * self.lam * -np.expm1(-self.bound / self.lam))

    def pdf(self, x):
        x = np.asarray(x, dtype=float)
        return np.where(np.abs(x) <= self.bound, self._B * np.exp(-np.abs(x) / self.lam), 0.0)

    def cdf(self, x):
        x = np.asarray(x, dtype=float)
        lam, A, B = self.lam, self.bound, self._B
        inner = 0.5 - np.sign(x) * (
            -0.5 + B * lam * np.exp(-np.abs(x) / lam) - B * lam * np.exp(-A / lam)
        )
        return np.where(x <= -A, 0.0, np.where(x >= A, 1.0, inner))

    def ppf(self, u):
        """Inverse of ``cdf`` on [0, 1]."""
        u = np.asarray(u, dtype=float)
        lam, A, B = self.lam, self.bound, self._B
        s = np.where(u < 0.5, -1.0, 1.0)
        tail = np.where(u < 0.5, u, 1.0 - u)  # probability beyond |x| on that side
        # tail = B lam (exp(-|x|/lam) - exp(-A/lam))  =>  |x| = -lam log(tail/(B lam) + e^(-A/lam))
        mag = -lam * np.log(tail / (B * lam) + np.exp(-A / lam))
        return s * np.clip(mag, 0.0, A)

    def sample(self, rng: np.random.Generator, size=None):
        return self.ppf(rng.random(size))

    def var(self) -> float:
        """E x^2 = 2 B int_0^A x^2 e^(-x/lam) dx (the density is symmetric)."""
        lam, r = self.lam, self.bound / self.lam
        return float(2 * self._B * lam**3 * (2 - np.exp(-r) * (r * r + 2 * r + 2)))

    def privacy_delta(self, eps: float, n: int = 20_001) -> float:
        """sup over sets of P(X in S) - e^eps P(X + D in S): the integral of
        (f(x) - e^eps f(x - D))^+, by quadrature between the points where either
        density jumps or has a kink (so the rule only meets smooth pieces)."""
        A, D = self.bound, self.sensitivity
        knots = np.unique(np.clip([-A, -A + D, 0.0, D, A], -A, A))
        total = 0.0
        for a, b in pairwise(knots):
            x = np.linspace(a, b, n)[1:-1]  # open interval: both densities smooth inside
            x = np.concatenate(([a + 1e-15 * (b - a)], x, [b - 1e-15 * (b - a)]))
            gap = np.maximum(self.pdf(x) - np.exp(eps) * self.pdf(x - D), 0.0)
            total += np.trapezoid(gap, x)
        return float(total)
