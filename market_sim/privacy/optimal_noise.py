"""Optimal data-independent (eps, delta) noise for a scalar query, by linear programming
(the piecewise-uniform "upper bound" problem of 002).

The noise density is uniform on each interval of width beta of a partition of
[-L, L] (interval j centred at j beta); p_j is its mass.  Shifting such a density
by t = k beta + r beta (0 <= r < 1) gives, on each interval, the masses of k and
k + 1 shifts mixed in proportions 1 - r and r, so the hockey-stick divergence
sup_S P(X in S) - e^eps P(X + t in S) = sum_j (p_j - e^eps p_{j-k})^+ (at r = 0) is,
for any t, a convex combination of its values at the two neighbouring integer
shifts.  Hence (eps, delta)-DP for all |t| <= Delta f is exactly: for every integer
|k| <= ceil(Delta f / beta), sum_j s_kj <= delta with s_kj >= p_j - e^eps p_{j-k},
s >= 0.  The objective is the expected loss sum_j p_j cbar_j, cbar_j the mean of
c over interval j.  ``monotone=True`` adds p non-increasing away from 0 on each
side.  Solved by scipy's HiGHS.  (002 does not print the LP; this is our
derivation of it from the description of the mixture-of-uniforms solution.)
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy import sparse
from scipy.optimize import linprog

from ..errors import MarketSimError
from .noise import _check

LOSSES = {
    "l1": lambda x: np.abs(x),
    "l2": lambda x: x * x,
    "asymmetric": lambda x: np.abs(x) + (x > 0) * np.abs(x),
}


@dataclass(frozen=True)
class PiecewiseUniformNoise:
    """A mixture of uniforms on [centers_j - beta/2, centers_j + beta/2) with masses p."""

    centers: np.ndarray
    masses: np.ndarray
    beta: float
    expected_loss: float

    def pdf(self, x):
        x = np.asarray(x, dtype=float)
        j = np.floor((x - self.centers[0]) / self.beta + 0.5).astype(int)
        inside = (j >= 0) & (j < self.centers.size)
        return np.where(inside, self.masses[np.clip(j, 0, self.centers.size - 1)] / self.beta, 0.0)

    def sample(self, rng: np.random.Generator, size=None):
        j = rng.choice(self.centers.size, size=size, p=self.masses)
        return self.centers[j] + self.beta * (rng.random(size) - 0.5)


def optimal_noise(
    sensitivity: float,
    epsilon: float,
    delta: float,
    *,
    loss="l1",
    beta: float = 0.05,
    support: float | None = None,
    monotone: bool = False,
) -> PiecewiseUniformNoise:
    """The (eps, delta)-DP piecewise-uniform noise of least expected ``loss``
    ('l1', 'l2', 'asymmetric' = |x| + 1[x > 0]|x|, or a vectorised callable)."""
    _check(sensitivity, epsilon, delta)
    if not (np.isfinite(beta) and beta > 0):
        raise MarketSimError(f"beta must be a finite number > 0 (got {beta!r})")
    c = LOSSES.get(loss) if isinstance(loss, str) else loss
    if c is None or not callable(c):
        raise MarketSimError(f"loss must be one of {', '.join(LOSSES)} or a function")
    L = 4 * sensitivity if support is None else float(support)
    n_half = int(np.ceil(L / beta))
    if not (n_half >= 1 and 2 * n_half + 1 <= 20_001):
        raise MarketSimError("support / beta gives no interval or more than 20001 intervals")
    centers = beta * np.arange(-n_half, n_half + 1)
    N = centers.size
    # mean of the loss on each interval (Gauss-Legendre, 16 nodes: exact for polynomials)
    nodes, weights = np.polynomial.legendre.leggauss(16)
    cbar = (c(centers[:, None] + 0.5 * beta * nodes[None, :]) @ weights) / 2
    K = int(np.ceil(sensitivity / beta - 1e-12))
    shifts = [k for k in range(-K, K + 1) if k != 0]
    # variables: p (N), then s_k (N each); constraints s_kj - p_j + e^eps p_{j-k} >= 0
    n_var = N * (1 + len(shifts))
    rows, cols, vals = [], [], []
    ee = np.exp(epsilon)
    r = 0
    for i, k in enumerate(shifts):
        j = np.arange(N)
        jk = j - k
        ok = (jk >= 0) & (jk < N)
        # -s_kj + p_j - e^eps p_{j-k} <= 0
        rows += [r + j, r + j, (r + j)[ok]]
        cols += [N * (1 + i) + j, j, jk[ok]]
        vals += [-np.ones(N), np.ones(N), -ee * np.ones(ok.sum())]
        r += N
    A_ub = sparse.csr_matrix(
        (np.concatenate(vals), (np.concatenate(rows), np.concatenate(cols))), shape=(r, n_var)
    )
    b_ub = np.zeros(r)
    budget = sparse.kron(sparse.eye(len(shifts)), np.ones((1, N)))  # sum_j s_kj <= delta
    A_ub = sparse.vstack([A_ub, sparse.hstack([sparse.csr_matrix((len(shifts), N)), budget])])
    b_ub = np.concatenate([b_ub, np.full(len(shifts), delta)])
    if monotone:  # p non-increasing away from the centre interval on both sides
        mid = n_half
        hi = np.r_[np.arange(mid + 1, N), np.arange(mid - 1, -1, -1)]
        lo = np.r_[np.arange(mid, N - 1), np.arange(mid, 0, -1)]
        t = np.arange(hi.size)
        M = sparse.csr_matrix(
            (np.r_[np.ones(t.size), -np.ones(t.size)], (np.r_[t, t], np.r_[hi, lo])),
            shape=(t.size, n_var),
        )  # p_hi - p_lo <= 0
        A_ub = sparse.vstack([A_ub, M])
        b_ub = np.concatenate([b_ub, np.zeros(t.size)])
    A_eq = sparse.hstack([sparse.csr_matrix(np.ones((1, N))), sparse.csr_matrix((1, n_var - N))])
    cost = np.concatenate([cbar, np.zeros(n_var - N)])
    res = linprog(
        cost, A_ub=A_ub.tocsr(), b_ub=b_ub, A_eq=A_eq, b_eq=[1.0], bounds=(0, None), method="highs"
    )
    if res.status != 0:
        raise MarketSimError(f"the noise LP failed: {res.message}")
    p = np.maximum(res.x[:N], 0.0)
    p /= p.sum()
    return PiecewiseUniformNoise(
        centers=centers, masses=p, beta=float(beta), expected_loss=float(p @ cbar)
    )
