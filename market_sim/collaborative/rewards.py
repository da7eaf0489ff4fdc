"""Reward control (004, Sec. 5) and the whole scheme (value -> Shapley -> rho -> reward).

Party i's model reward is a belief about theta whose value KL(reward || prior)
equals its target r_i.  Two controls, both needing no new information from
the parties (DP post-processing, P1):

* ``temper_reward``: the tempered posterior p(theta) prod_j p(s~_j | theta)^kappa
  (Eq. 1), kappa in [0, 1] found by bracketing (Brent): the value is monotone in kappa.
* ``noise_reward``: every shared SS gets extra noise sqrt(tau noise_var_j) zeta_j
  (zeta drawn once), the noise-aware posterior uses (1 + tau) noise_var_j; the
  value is *not* monotone in tau for one draw of zeta, so the smallest root is
  bracketed by a scan over tau before Brent.

``similarity`` is -KL(grand coalition's posterior || reward) (P5).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from scipy.optimize import brentq

from ..errors import MarketSimError
from .valuation import coalition_values, rho_shapley_rewards, shapley_values

__all__ = [
    "ModelReward",
    "Collaboration",
    "temper_reward",
    "noise_reward",
    "collaborate",
    "target_rewards",
    "model_reward",
]

CONTROLS = ("temper", "noise")


@dataclass(frozen=True)
class ModelReward:
    target: float
    attained: float
    control: float  # kappa (temper) or tau (noise)
    mechanism: str
    belief: object
    similarity: float


def _finish(model, grand, target, control, mechanism, belief) -> ModelReward:
    return ModelReward(
        target=float(target),
        attained=float(belief.kl(model.prior)),
        control=float(control),
        mechanism=mechanism,
        belief=belief,
        similarity=-float(grand.kl(belief)),
    )


def _check_target(target, v_grand):
    if not (np.isfinite(target) and target >= 0):
        raise MarketSimError(
            f"the target reward value must be a finite number >= 0 (got {target!r})"
        )
    if target > v_grand * (1 + 1e-9) + 1e-12:
        raise MarketSimError(
            f"target {target:.4g} exceeds the grand coalition's value "
            f"{v_grand:.4g}: no reward can reach it"
        )


def temper_reward(model, shared: Sequence, target: float, *, xtol: float = 1e-12) -> ModelReward:
    grand = model.posterior(shared)
    v_grand = grand.kl(model.prior)
    _check_target(target, v_grand)
    if target >= v_grand:
        return _finish(model, grand, target, 1.0, "temper", grand)
    if target <= 0:
        return _finish(model, grand, target, 0.0, "temper", model.prior)
    kappa = brentq(lambda k: model.value(shared, k) - target, 0.0, 1.0, xtol=xtol)
    return _finish(model, grand, target, kappa, "temper", model.posterior(shared, kappa))


def noise_reward(
    model,
    shared: Sequence,
    target: float,
    rng: np.random.Generator,
    *,
    n_scan: int = 40,
    tau_max: float = 1e12,
) -> ModelReward:
    if not model.noise_aware:
        raise MarketSimError(
            f"noise addition needs a fully noise-aware posterior; "
            f"{type(model).__name__} is not (use likelihood tempering)"
        )
    grand = model.posterior(shared)
    v_grand = grand.kl(model.prior)
    _check_target(target, v_grand)
    if target >= v_grand:
        return _finish(model, grand, target, 0.0, "noise", grand)
    zeta = [rng.standard_normal(np.shape(s.value)) for s in shared]

    def noisy(tau):
        return [s.with_extra_noise(tau, z) for s, z in zip(shared, zeta, strict=True)]

    def gap(tau):
        return model.value(noisy(tau), 1.0) - target

    hi, lo_prev = 1.0, 0.0
    while True:  # scan for the first tau with value <= target, widening the range
        taus = np.concatenate([[lo_prev], np.geomspace(max(lo_prev, hi / 1e4), hi, n_scan)])
        gaps = np.array([gap(t) for t in taus])
        below = np.flatnonzero(gaps <= 0)
        if below.size:
            j = below[0]
            break
        if hi >= tau_max:
            raise MarketSimError("noise addition cannot bring the value down to the target")
        lo_prev, hi = hi, hi * 1e3
    tau = (
        taus[j]
        if gaps[j] == 0 or j == 0
        else brentq(gap, taus[j - 1], taus[j], xtol=1e-12, rtol=1e-10)
    )
    return _finish(model, grand, target, tau, "noise", model.posterior(noisy(tau)))


@dataclass(frozen=True)
class Collaboration:
    values: dict  # v(C) by coalition bitmask
    phi: np.ndarray  # Shapley values
    targets: np.ndarray  # rho-Shapley target rewards
    rewards: list  # ModelReward per party
    rho: float

    @property
    def v_grand(self) -> float:
        return self.values[max(self.values)]

    @property
    def v_single(self) -> np.ndarray:
        return np.array([self.values[1 << i] for i in range(self.phi.size)])


def target_rewards(model, shared: Sequence, rho: float, *, negative: str = "raise"):
    """(v(C) for every coalition, Shapley values, rho-Shapley targets)."""
    values = coalition_values(model, shared)
    phi = shapley_values(values, len(shared))
    targets = rho_shapley_rewards(phi, values[max(values)], rho, negative=negative)
    return values, phi, targets


def model_reward(
    model, shared: Sequence, target: float, control: str, rng: np.random.Generator | None = None
) -> ModelReward:
    """The reward of value ``target`` by ``control`` ("temper" or "noise")."""
    if control not in CONTROLS:
        raise MarketSimError(f"control: unknown {control!r}; use temper or noise")
    if control == "temper":
        return temper_reward(model, shared, target)
    if rng is None:
        raise MarketSimError("noise addition draws noise: pass rng=")
    return noise_reward(model, shared, target, rng)


def collaborate(
    model,
    shared: Sequence,
    rho: float,
    *,
    control: str = "temper",
    rng: np.random.Generator | None = None,
) -> Collaboration:
    """Value every coalition, Shapley values, rho-Shapley targets, then rewards."""
    values, phi, targets = target_rewards(model, shared, rho)
    rewards = [model_reward(model, shared, t, control, rng) for t in targets]
    return Collaboration(values=values, phi=phi, targets=targets, rewards=rewards, rho=float(rho))
