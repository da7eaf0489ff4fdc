"""Coalition values, Shapley values and rho-Shapley target rewards (004, Secs. 3-4).

* ``coalition_values(model, shared)``: v(C) = KL(p(theta | s~_C) || p(theta)) (Def. 3.1)
  for every coalition C, as a dict keyed by bitmask (v(empty) = 0).
* ``shapley_values(v, n)``: exact (all 2^n coalitions, n <= 16) or, with
  ``permutations=K``, the unbiased permutation-sampling estimate.
* ``rho_shapley_rewards(phi, v_grand, rho)``: r_i = v(N) (phi_i / max phi)^rho
  (004 Sec. 4; Sim et al. 2020).  A negative phi_i (possible: the Bayesian
  surprise is monotone only in expectation) is refused with a clear error.
* ``rationality_rho(v_single, phi, v_grand)``: the largest rho for which every
  r_i >= v({i}) (Sim et al. 2020, Thm 1): min over phi_i < max of
  log(v_i / v_N) / log(phi_i / max phi).
* ``kl_nearest_neighbour(p, q, k)``: the k-NN KL estimator of Perez-Cruz (2008)
  from samples, for beliefs with no closed-form KL.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from math import factorial

import numpy as np
from scipy.spatial import cKDTree

from ..errors import MarketSimError

__all__ = [
    "coalition_values",
    "shapley_values",
    "rho_shapley_rewards",
    "rationality_rho",
    "kl_nearest_neighbour",
    "members",
]

MAX_EXACT_PARTIES = 16


def members(mask: int, n: int) -> list[int]:
    return [i for i in range(n) if mask >> i & 1]


def coalition_values(model, shared: Sequence, temper: float = 1.0) -> dict[int, float]:
    """v(C) for every non-empty coalition of the parties in ``shared`` (bitmask keys)."""
    n = len(shared)
    if n == 0:
        raise MarketSimError("a collaboration needs at least one party")
    if n > MAX_EXACT_PARTIES:
        raise MarketSimError(
            f"{n} parties: all 2^n coalition values are too many; "
            "use shapley_values(value_fn, n, permutations=...)"
        )
    v = {0: 0.0}
    for mask in range(1, 1 << n):
        v[mask] = model.value([shared[i] for i in members(mask, n)], temper)
    return v


def shapley_values(
    v: dict | Callable[[int], float],
    n: int,
    *,
    permutations: int | None = None,
    rng: np.random.Generator | None = None,
) -> np.ndarray:
    """Shapley values of the game v (a dict or a function of a coalition bitmask)."""
    if not (isinstance(n, (int, np.integer)) and n >= 1):
        raise MarketSimError(f"the number of parties must be an integer >= 1 (got {n!r})")
    value = v.__getitem__ if isinstance(v, dict) else v
    phi = np.zeros(n)
    if permutations is None:
        if n > MAX_EXACT_PARTIES:
            raise MarketSimError(
                f"exact Shapley values for {n} > {MAX_EXACT_PARTIES} parties: "
                "pass permutations= for the sampling estimate"
            )
        weight = [factorial(s) * factorial(n - s - 1) / factorial(n) for s in range(n)]
        for mask in range(1 << n):
            size = bin(mask).count("1")
            vm = value(mask)
            for i in range(n):
                if not mask >> i & 1:
                    phi[i] += weight[size] * (value(mask | 1 << i) - vm)
        return phi
    if rng is None:
        raise MarketSimError("permutation sampling needs rng=")
    if not (isinstance(permutations, (int, np.integer)) and permutations >= 1):
        raise MarketSimError(f"permutations must be an integer >= 1 (got {permutations!r})")
    for _ in range(permutations):
        mask, prev = 0, value(0)
        for i in rng.permutation(n):
            mask |= 1 << int(i)
            cur = value(mask)
            phi[i] += cur - prev
            prev = cur
    return phi / permutations


def _check_rho(rho):
    if not (np.isfinite(rho) and 0.0 <= rho <= 1.0):
        raise MarketSimError(f"rho must be in [0, 1] (got {rho!r})")


def rho_shapley_rewards(phi, v_grand: float, rho: float, *, negative: str = "raise") -> np.ndarray:
    """Target reward values r_i = v(N) (phi_i / max phi)^rho.  ``negative="clip"``
    treats a negative phi_i as 0 (reward 0 for rho > 0) instead of refusing it."""
    _check_rho(rho)
    phi = np.asarray(phi, dtype=float)
    if phi.ndim != 1 or phi.size == 0:
        raise MarketSimError("phi must be a non-empty 1-D array of Shapley values")
    if negative == "clip":
        phi = np.maximum(phi, 0.0)
    if (phi < 0).any():
        raise MarketSimError(
            f"a Shapley value is negative ({phi.min():.3g}): the rho-Shapley "
            "reward is undefined; re-draw the noise or average more repeats"
        )
    if phi.max() <= 0:
        return np.zeros_like(phi)
    return v_grand * (phi / phi.max()) ** rho


def rationality_rho(v_single, phi, v_grand: float) -> float:
    """Largest rho in [0, 1] with v_N (phi_i / phi*)^rho >= v({i}) for every i."""
    v_single, phi = np.asarray(v_single, dtype=float), np.asarray(phi, dtype=float)
    ratio = phi / phi.max()
    out = 1.0
    for vi, r in zip(v_single, ratio, strict=True):
        if vi > v_grand:
            return 0.0  # even rho = 0 (everybody gets v_N) is not rational for i
        if 0 < r < 1 and vi > 0:
            out = min(out, np.log(vi / v_grand) / np.log(r))
    return float(max(out, 0.0))


def kl_nearest_neighbour(p_samples, q_samples, k: int = 1) -> float:
    """KL(P || Q) from samples (Perez-Cruz 2008): with rho_k (nu_k) the distance
    from each P-sample to its k-th nearest other P-sample (Q-sample),
    d/n sum log(nu_k / rho_k) + log(m / (n - 1)).  1-D input is one column."""
    X, Y = (np.asarray(a, dtype=float) for a in (p_samples, q_samples))
    X, Y = (a[:, None] if a.ndim == 1 else a for a in (X, Y))
    if X.ndim != 2 or Y.ndim != 2 or X.shape[1] != Y.shape[1]:
        raise MarketSimError(
            f"samples must be (n, d) arrays of one dimension d (got {X.shape} and {Y.shape})"
        )
    n, d = X.shape
    m = Y.shape[0]
    if n <= k or m < k:
        raise MarketSimError(f"need more than k = {k} samples from each distribution")
    rho = cKDTree(X).query(X, k + 1)[0][:, k]
    nu = cKDTree(Y).query(X, k)[0]
    nu = nu[:, k - 1] if k > 1 else nu
    if (rho <= 0).any() or (nu <= 0).any():
        raise MarketSimError(
            "duplicate samples: the nearest-neighbour KL estimate needs continuous distributions"
        )
    return float(d * np.mean(np.log(nu / rho)) + np.log(m / (n - 1)))
