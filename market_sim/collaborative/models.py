"""Bayesian models with sufficient statistics, shared under Renyi DP (004, Sec. 2).

A party with data D computes its sufficient statistic (SS) s(D) and shares
``SharedStatistic(n, s + z, noise_var)`` with z ~ N(0, noise_var I),
noise_var = 0.5 (order / epsilon) Delta_2^2: the Gaussian mechanism is
(order, epsilon)-Renyi DP (Mironov 2017).  Neighbouring datasets differ in one
record (n is shared, so replace-one), and Delta_2 comes from documented data bounds.

The mediator's DP noise-aware posterior p(theta | shared SS) integrates the
noise out (004, App. A.3); how each model does it:

* ``BernoulliModel`` (Beta prior): p(s~ | theta) = sum_s Binom(s; n, theta)
  N(s~ - s; 0, noise_var), exact; the posterior lives on a fine theta grid and
  every KL is a quadrature on that grid.
* ``GaussianMeanModel`` (known data variance, Gaussian prior, |x| <= bound):
  s~ ~ N(n theta, n var + noise_var) exactly, so the posterior is Gaussian.
* ``LinearRegressionModel`` (known noise variance, prior N(0, I/alpha),
  ||x|| <= x_bound, |y| <= y_bound): X'y~ ~ N(S theta, var S + noise_var I) given
  S = X'X is integrated exactly, while S enters as its shared, PSD-projected
  perturbation: partly noise-aware, in closed form.  The seed runs MCMC over
  the latent exact S instead (Bernstein and Sheldon, 2019); we do not.  So
  noise addition (004 Sec. 5.1) is refused for it (``noise_aware = False``):
  extra noise on the plug-in S is read as data, and the value does not fall
  to 0 as the noise grows; tempering is fine.

``posterior(shared, temper=kappa)`` is the normalised posterior
p(theta) prod_i p(s~_i | theta)^kappa of 004 Eq. (1) *as written*: the
likelihood of the shared (perturbed) SS is tempered.  004 App. E.3 implements
it by scaling n, s~ and Delta by kappa, which matches Eq. (1) without DP noise
but not with it (the noise variance would scale by kappa^2, not kappa); we
follow the equation.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np
from scipy import special, stats

from ..errors import MarketSimError

__all__ = [
    "SharedStatistic",
    "GaussianBelief",
    "GridBelief",
    "BernoulliModel",
    "GaussianMeanModel",
    "LinearRegressionModel",
    "rdp_noise_variance",
]


def rdp_noise_variance(sensitivity: float, epsilon: float, order: float = 2.0) -> float:
    """Variance of the Gaussian mechanism that is (order, epsilon)-Renyi DP."""
    if not (np.isfinite(epsilon) and epsilon > 0):
        raise MarketSimError(f"epsilon must be a finite number > 0 (got {epsilon!r})")
    if not (np.isfinite(order) and order > 1):
        raise MarketSimError(f"the Renyi order must be > 1 (got {order!r})")
    return 0.5 * order / epsilon * sensitivity**2


@dataclass(frozen=True)
class SharedStatistic:
    """What a party gives the mediator: n, its perturbed SS and the noise variance."""

    n: int
    value: np.ndarray
    noise_var: float

    def with_extra_noise(self, tau: float, zeta: np.ndarray) -> SharedStatistic:
        """004 Sec. 5.1: add sqrt(tau noise_var) zeta; the noise variance becomes (1 + tau) x."""
        return SharedStatistic(
            self.n, self.value + np.sqrt(tau * self.noise_var) * zeta, (1.0 + tau) * self.noise_var
        )


# ---- beliefs -------------------------------------------------------------------------
@dataclass(frozen=True)
class GaussianBelief:
    mean: np.ndarray
    cov: np.ndarray

    def kl(self, other: GaussianBelief) -> float:
        """KL(self || other), closed form."""
        d = self.mean.size
        L = np.linalg.cholesky(other.cov)
        A = np.linalg.solve(L, self.cov)
        trace = np.trace(np.linalg.solve(L.T, A))
        diff = np.linalg.solve(L, self.mean - other.mean)
        logdet_other = 2 * np.log(np.diag(L)).sum()
        logdet_self = np.linalg.slogdet(self.cov)[1]
        return float(0.5 * (trace + diff @ diff - d + logdet_other - logdet_self))

    def sample(self, rng: np.random.Generator, size: int) -> np.ndarray:
        return rng.multivariate_normal(self.mean, self.cov, size=size)


@dataclass(frozen=True)
class GridBelief:
    """A density on a fixed grid of a scalar parameter (quadrature weights ``w``)."""

    theta: np.ndarray
    w: np.ndarray
    log_density: np.ndarray

    def kl(self, other: GridBelief) -> float:
        p = np.exp(self.log_density)
        return float(np.sum(self.w * p * (self.log_density - other.log_density)))

    def sample(self, rng: np.random.Generator, size: int) -> np.ndarray:
        mass = self.w * np.exp(self.log_density)
        cdf = np.cumsum(mass / mass.sum())
        return self.theta[np.minimum(np.searchsorted(cdf, rng.random(size)), cdf.size - 1)][:, None]


def _check_shared(shared, dim) -> list:
    out = list(shared)
    for s in out:
        if not isinstance(s, SharedStatistic):
            raise MarketSimError("coalition members must be SharedStatistic objects")
        if np.shape(s.value) != (dim,):
            raise MarketSimError(
                f"shared statistic has shape {np.shape(s.value)}, the model needs ({dim},)"
            )
    return out


def _check_temper(kappa):
    if not (0.0 <= kappa <= 1.0):
        raise MarketSimError(f"the tempering factor must be in [0, 1] (got {kappa!r})")


class Belief(Protocol):
    """What ``value`` needs of a prior or posterior."""

    def kl(self, other: Any) -> float: ...


class _Model:
    """Shared pieces: ``share`` perturbs a party's SS; ``value`` is the Bayesian
    surprise KL(posterior || prior) of 004 Def. 3.1."""

    dim: int
    sensitivity: float
    noise_aware: bool = True  # the DP noise on every SS block is integrated out
    prior: Belief

    def sufficient_statistic(self, data) -> tuple[np.ndarray, int]:
        """(s(D), n) of a party's data (each model)."""
        raise NotImplementedError

    def posterior(self, shared: Sequence[SharedStatistic], temper: float = 1.0) -> Belief:
        """The tempered noise-aware posterior of Eq. (1) (each model)."""
        raise NotImplementedError

    def share(
        self, data, epsilon: float, rng: np.random.Generator, order: float = 2.0
    ) -> SharedStatistic:
        ss, n = self.sufficient_statistic(data)
        var = rdp_noise_variance(self.sensitivity, epsilon, order)
        return SharedStatistic(n, ss + rng.normal(0.0, np.sqrt(var), ss.shape), var)

    def value(self, shared: Sequence[SharedStatistic], temper: float = 1.0) -> float:
        return self.posterior(shared, temper).kl(self.prior)


# ---- Gaussian-conjugate models ---------------------------------------------------------
class _GaussianConjugate(_Model):
    """Each shared SS contributes (precision, linear) terms to a Gaussian posterior."""

    prior: GaussianBelief

    def _terms(self, s: SharedStatistic) -> tuple[np.ndarray, np.ndarray]:
        """(precision, linear) terms of one shared SS (each model)."""
        raise NotImplementedError

    def posterior(self, shared: Sequence[SharedStatistic], temper: float = 1.0) -> GaussianBelief:
        _check_temper(temper)
        prec = np.linalg.inv(self.prior.cov)
        lin = prec @ self.prior.mean
        for s in _check_shared(shared, self.dim):
            P, h = self._terms(s)
            prec = prec + temper * P
            lin = lin + temper * h
        cov = np.linalg.inv(prec)
        cov = 0.5 * (cov + cov.T)
        return GaussianBelief(cov @ lin, cov)


@dataclass
class GaussianMeanModel(_GaussianConjugate):
    """x ~ N(theta, data_var), theta ~ N(prior_mean, prior_var), |x| <= bound."""

    data_var: float = 1.0
    prior_mean: float = 0.0
    prior_var: float = 1.0
    bound: float = 3.0
    dim: int = field(default=1, init=False)

    def __post_init__(self):
        for name in ("data_var", "prior_var", "bound"):
            v = getattr(self, name)
            if not (np.isfinite(v) and v > 0):
                raise MarketSimError(f"{name} must be a finite number > 0 (got {v!r})")
        self.sensitivity = 2.0 * self.bound  # replace-one, |x| <= bound
        self.prior = GaussianBelief(np.array([self.prior_mean]), np.array([[self.prior_var]]))

    def sufficient_statistic(self, data):
        x = np.asarray(data, dtype=float).ravel()
        return np.array([np.clip(x, -self.bound, self.bound).sum()]), x.size

    def _terms(self, s):
        V = s.n * self.data_var + s.noise_var
        return np.array([[s.n**2 / V]]), np.array([s.n * s.value[0] / V])


@dataclass
class LinearRegressionModel(_GaussianConjugate):
    """y = x'theta + N(0, noise_var_y), theta ~ N(0, I / alpha), ||x|| <= x_bound, |y| <= y_bound.

    SS = (upper triangle of X'X, X'y); replace-one L2 sensitivity
    2 sqrt(x_bound^4 + x_bound^2 y_bound^2)."""

    d: int = 2
    noise_var_y: float = 1.0
    alpha: float = 1.0
    x_bound: float = 1.0
    y_bound: float = 3.0
    noise_aware = False  # X'X enters as its perturbed value (module doc)

    def __post_init__(self):
        if not (isinstance(self.d, (int, np.integer)) and self.d >= 1):
            raise MarketSimError(f"d must be an integer >= 1 (got {self.d!r})")
        for name in ("noise_var_y", "alpha", "x_bound", "y_bound"):
            v = getattr(self, name)
            if not (np.isfinite(v) and v > 0):
                raise MarketSimError(f"{name} must be a finite number > 0 (got {v!r})")
        self._iu = np.triu_indices(self.d)
        self.dim = len(self._iu[0]) + self.d
        self.sensitivity = 2.0 * np.sqrt(self.x_bound**4 + self.x_bound**2 * self.y_bound**2)
        self.prior = GaussianBelief(np.zeros(self.d), np.eye(self.d) / self.alpha)

    def sufficient_statistic(self, data):
        X, y = data
        X = np.asarray(X, dtype=float)
        y = np.asarray(y, dtype=float).ravel()
        if X.ndim != 2 or X.shape[1] != self.d or X.shape[0] != y.size:
            raise MarketSimError(f"data must be (X with {self.d} columns, y of the same length)")
        norms = np.maximum(1.0, np.linalg.norm(X, axis=1) / self.x_bound)
        X = X / norms[:, None]
        y = np.clip(y, -self.y_bound, self.y_bound)
        return np.concatenate([(X.T @ X)[self._iu], X.T @ y]), y.size

    def _gram(self, s) -> np.ndarray:
        k = len(self._iu[0])
        S = np.zeros((self.d, self.d))
        S[self._iu] = s.value[:k]
        S = S + np.triu(S, 1).T
        vals, vecs = np.linalg.eigh(S)
        return (vecs * np.maximum(vals, 0.0)) @ vecs.T  # PSD projection

    def _terms(self, s):
        S = self._gram(s)
        xy = s.value[len(self._iu[0]) :]
        V = self.noise_var_y * S + s.noise_var * np.eye(self.d)
        if s.noise_var == 0:  # exact SS: the usual conjugate update
            return S / self.noise_var_y, xy / self.noise_var_y
        Vinv_S = np.linalg.solve(V, S)
        return S @ Vinv_S, Vinv_S.T @ xy


# ---- Bernoulli on a grid ---------------------------------------------------------------
@dataclass
class BernoulliModel(_Model):
    """x in {0, 1} ~ Bernoulli(theta), theta ~ Beta(a, b); SS = number of ones (Delta = 1)."""

    a: float = 1.0
    b: float = 1.0
    grid_size: int = 4000
    dim: int = field(default=1, init=False)

    def __post_init__(self) -> None:
        if not (np.isfinite(self.a) and np.isfinite(self.b) and self.a >= 1 and self.b >= 1):
            raise MarketSimError("the Beta prior needs a, b >= 1 (finite density on the grid)")
        self.sensitivity = 1.0
        k = int(self.grid_size)
        theta = (np.arange(k) + 0.5) / k
        self._theta, self._w = theta, np.full(k, 1.0 / k)
        self.prior: GridBelief = self._normalised(stats.beta.logpdf(theta, self.a, self.b))
        self._cache: dict = {}

    def _normalised(self, logp) -> GridBelief:
        logp = logp - special.logsumexp(logp, b=self._w)
        return GridBelief(self._theta, self._w, logp)

    def sufficient_statistic(self, data):
        x = np.asarray(data).ravel()
        if x.size and not np.isin(x, (0, 1)).all():
            raise MarketSimError("Bernoulli data must be 0/1")
        return np.array([float(x.sum())]), x.size

    def log_likelihood(self, s: SharedStatistic) -> np.ndarray:
        """log p(s~ | theta) on the grid, the exact count summed out (cached per statistic)."""
        key = (s.n, float(s.value[0]), float(s.noise_var))
        hit = self._cache.get(key)
        if hit is not None:
            return hit
        if s.noise_var == 0:
            out = stats.binom.logpmf(int(round(s.value[0])), s.n, self._theta)
        else:
            counts = np.arange(s.n + 1)
            log_noise = -0.5 * (s.value[0] - counts) ** 2 / s.noise_var
            keep = log_noise > log_noise.max() - 60  # terms below e^-60 of the largest dropped
            k, log_noise = counts[keep].astype(float), log_noise[keep]
            log_choose = (
                special.gammaln(s.n + 1) - special.gammaln(k + 1) - special.gammaln(s.n - k + 1)
            )
            logb = np.outer(np.log(self._theta), k) + np.outer(np.log1p(-self._theta), s.n - k)
            out = special.logsumexp(logb + (log_choose + log_noise)[None, :], axis=1)
        if len(self._cache) > 4096:
            self._cache.clear()
        self._cache[key] = out
        return out

    def posterior(self, shared: Sequence[SharedStatistic], temper: float = 1.0) -> GridBelief:
        _check_temper(temper)
        logp = self.prior.log_density.copy()
        for s in _check_shared(shared, 1):
            logp = logp + temper * self.log_likelihood(s)
        return self._normalised(logp)
