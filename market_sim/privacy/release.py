"""Noisy release of the platform's statistics.

``StatisticRelease(noise, epsilon, delta)`` publishes a scalar as
clip(value, lower, upper) + noise calibrated to a declared sensitivity:
Laplace (epsilon-DP), the analytic Gaussian or the truncated Laplace
((epsilon, delta)-DP).  The caller owns the sensitivity; the clip makes a
range bound valid: a statistic clipped to [lower, upper] never moves by more
than upper - lower, whatever one seller does (``sensitivity=None`` uses it).
Releasing k statistics with one ``StatisticRelease`` each costs k epsilon
(and k delta) by basic composition; the result is not clipped again, so a
released value is unbiased for the clipped statistic.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..errors import MarketSimError
from .noise import AnalyticGaussian, Laplace, TruncatedLaplace

NOISES = ("laplace", "gaussian", "truncated-laplace")


@dataclass(frozen=True)
class ReleasedStatistic:
    value: float  # what is published
    clipped: float  # the statistic after clipping, before noise (kept private)
    sensitivity: float
    noise_sd: float  # standard deviation of the added noise


@dataclass(frozen=True)
class StatisticRelease:
    noise: str = "laplace"
    epsilon: float = 1.0
    delta: float | None = None

    def __post_init__(self):
        if self.noise not in NOISES:
            raise MarketSimError(f"noise: unknown {self.noise!r}; use one of {', '.join(NOISES)}")
        if not (np.isfinite(self.epsilon) and self.epsilon > 0):
            raise MarketSimError(f"epsilon must be a finite number > 0 (got {self.epsilon!r})")
        if self.noise == "laplace" and self.delta not in (None, 0, 0.0):
            raise MarketSimError("laplace noise is pure epsilon-DP: leave delta out")
        if self.noise != "laplace" and self.delta is None:
            raise MarketSimError(f"{self.noise} noise needs delta in (0, 1)")

    @classmethod
    def parse(cls, text: str) -> StatisticRelease:
        """From ``"NOISE:EPS[:DELTA]"`` (``laplace:1``, ``gaussian:1:1e-5``)."""
        parts = text.split(":")
        try:
            nums = [float(v) for v in parts[1:]]
        except ValueError:
            raise MarketSimError(
                f"release {text!r}: expected NOISE:EPS[:DELTA] with numbers"
            ) from None
        if len(nums) not in (1, 2):
            raise MarketSimError(f"release {text!r}: expected NOISE:EPS[:DELTA]")
        return cls(parts[0], *nums)

    def mechanism(self, sensitivity: float):
        if self.noise == "laplace":
            return Laplace(sensitivity, self.epsilon)
        assert self.delta is not None  # __post_init__ requires it for the other noises
        if self.noise == "gaussian":
            return AnalyticGaussian(sensitivity, self.epsilon, self.delta)
        return TruncatedLaplace(sensitivity, self.epsilon, self.delta)

    def release(
        self,
        value: float,
        rng: np.random.Generator,
        *,
        lower: float = -np.inf,
        upper: float = np.inf,
        sensitivity: float | None = None,
    ) -> ReleasedStatistic:
        if not lower < upper:
            raise MarketSimError(f"release: need lower < upper (got [{lower!r}, {upper!r}])")
        if sensitivity is None:
            sensitivity = upper - lower
            if not np.isfinite(sensitivity):
                raise MarketSimError("release: give a sensitivity or a finite range [lower, upper]")
        clipped = float(np.clip(value, lower, upper))
        mech = self.mechanism(float(sensitivity))
        noise = float(mech.sample(rng))
        sd = float(np.sqrt(mech.var()))
        return ReleasedStatistic(
            value=clipped + noise, clipped=clipped, sensitivity=float(sensitivity), noise_sd=sd
        )
