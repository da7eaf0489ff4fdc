"""Optimal data-independent (eps, delta) noise for a scalar query, by linear programming
(the piecewise-uniform "upper bound" problem of 002).

The noise density is uniform on each cell of width beta of a partition of [-L, L];
p_j is the mass of cell j.  Two grids: ``"centered"`` (cell j centred at j beta, so
one cell straddles 0) and ``"breakpoints"`` (cell edges at the multiples of beta, as
002's own appendix code builds its grid).  Shifting such a density by
t = k beta + r beta (0 <= r < 1) gives, on each cell, the masses of the k and k + 1
shifts mixed in proportions 1 - r and r, so the hockey-stick divergence
sup_S P(X in S) - e^eps P(X + t in S) = sum_j (p_j - e^eps p_{j-k})^+ (at r = 0) is,
for any t, a convex combination of its values at the two neighbouring integer
shifts.  Hence (eps, delta)-DP for all |t| <= Delta f is exactly: for every integer
|k| <= ceil(Delta f / beta), sum_j s_kj <= delta with s_kj >= p_j - e^eps p_{j-k},
s >= 0.  The objective is the expected loss sum_j p_j cbar_j, cbar_j the mean of
c over cell j, computed exactly: the cell is split at 0 and each part integrated
by 16-node Gauss-Legendre, exact for |x|, x^2 and the asymmetric loss (and for any
loss that is a polynomial of degree <= 31 on each side of 0).  ``monotone=True``
adds p non-increasing away from 0 on each side (on the breakpoint grid the two
cells next to 0 are not compared).  Solved by scipy's HiGHS.  (002 does not print
the LP; this is our derivation of it from the description of the mixture of
uniforms.)

``lower_bound=True`` solves the same LP with cbar_j replaced by the least loss
on cell j.  That is a relaxation, so its value bounds from below the expected loss
of *every* (eps, delta)-DP additive noise supported in the grid's span (not only
the piecewise-uniform ones): the cell masses of any such noise satisfy the integer
shift constraints (events that are unions of cells), and E c(X) >= sum_j p_j
min_{cell j} c.  With ``monotone=True`` it needs the breakpoint grid, where the
cell masses of a density monotone about 0 are monotone.  The least loss on a cell
is taken at its point nearest to 0, so the loss must be non-increasing on
(-inf, 0] and non-decreasing on [0, inf) (all three built-in losses are).

002's figures (eps = 3, delta = 0.3, l1, beta = 0.02): the optimum 0.1705 is this
LP on ``grid="breakpoints"``, ``support=1.1`` (0.170517); ``grid="centered"``,
``support=2`` gives 0.164399, and 0.164372 at support 3.  002's 0.1830 for
monotone noise we do not reproduce (the monotone ``lower_bound`` on 0.1705's grid,
0.182690, is nearest), and "0.1830 for any granularity and support" is not a
bound: ``monotone=True``, ``support=2`` gives a verified monotone density with loss
0.166272; and the monotone ``lower_bound`` on [-2, 2] is 0.157643, below the best
non-monotone loss, so these bounds do not show that monotone noise must be worse
(docs/privacy.md).
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
GRIDS = ("centered", "breakpoints")


@dataclass(frozen=True)
class PiecewiseUniformNoise:
    """A mixture of uniforms on [centers_j - beta/2, centers_j + beta/2) with masses p.
    ``expected_loss`` is the exact expected loss of this density, or, for a solution
    of ``optimal_noise(..., lower_bound=True)``, the relaxation's lower bound."""

    centers: np.ndarray
    masses: np.ndarray
    beta: float
    expected_loss: float

    @property
    def edges(self) -> np.ndarray:
        return np.r_[self.centers - self.beta / 2, self.centers[-1] + self.beta / 2]

    def pdf(self, x):
        x = np.asarray(x, dtype=float)
        j = np.floor((x - self.centers[0]) / self.beta + 0.5).astype(int)
        inside = (j >= 0) & (j < self.centers.size)
        return np.where(inside, self.masses[np.clip(j, 0, self.centers.size - 1)] / self.beta, 0.0)

    def sample(self, rng: np.random.Generator, size=None):
        j = rng.choice(self.centers.size, size=size, p=self.masses)
        return self.centers[j] + self.beta * (rng.random(size) - 0.5)

    def hockey_stick(self, epsilon: float, shift: float) -> float:
        """sup_S P(X in S) - e^eps P(X + shift in S), exactly: both densities are constant
        between consecutive points of edges and edges + shift, so the positive part of
        their difference is integrated piece by piece with no quadrature."""
        e = self.edges
        pts = np.unique(np.r_[e, e + shift])
        mid = (pts[:-1] + pts[1:]) / 2
        diff = self.pdf(mid) - np.exp(epsilon) * self.pdf(mid - shift)
        return float(np.sum(np.maximum(diff, 0.0) * np.diff(pts)))


def _cell_means(c, a, b, nodes, weights):
    """mean of c over [a_j, b_j], each cell split at 0 (exact for piecewise polynomials)."""
    cut = np.clip(0.0, a, b)
    total = np.zeros(a.size)
    for lo, hi in ((a, cut), (cut, b)):
        half = (hi - lo) / 2
        x = (lo + hi)[:, None] / 2 + half[:, None] * nodes[None, :]
        total += half * (c(x) @ weights)
    return total / (b - a)


def optimal_noise(
    sensitivity: float,
    epsilon: float,
    delta: float,
    *,
    loss="l1",
    beta: float = 0.05,
    support: float | None = None,
    monotone: bool = False,
    grid: str = "centered",
    lower_bound: bool = False,
) -> PiecewiseUniformNoise:
    """The (eps, delta)-DP piecewise-uniform noise of least expected ``loss``
    ('l1', 'l2', 'asymmetric' = |x| + 1[x > 0]|x|, or a vectorised callable) on
    [-support, support] (default 4 Delta f) cut into cells of width ``beta``;
    ``grid`` and ``lower_bound``: see the module docstring."""
    c = _checked_loss(sensitivity, epsilon, delta, loss, beta, support, monotone, grid,
                      lower_bound)  # fmt: skip
    L = 4 * sensitivity if support is None else float(support)
    n_half, centers, a, b = _cells(L, beta, grid)
    N = centers.size
    nodes, weights = np.polynomial.legendre.leggauss(16)
    cbar = _cell_means(c, a, b, nodes, weights)
    cost_j = np.asarray(c(np.clip(0.0, a, b)), dtype=float) if lower_bound else cbar
    K = int(np.ceil(sensitivity / beta - 1e-12))
    shifts = [k for k in range(-K, K + 1) if k != 0]
    n_var = N * (1 + len(shifts))  # p (N), then the slack s_k (N each) of every shift
    A_ub, b_ub = _privacy_constraints(N, shifts, epsilon, delta)
    if monotone:
        M = _monotone_rows(N, n_half, grid, n_var)
        A_ub = sparse.vstack([A_ub, M])
        b_ub = np.concatenate([b_ub, np.zeros(M.shape[0])])
    A_eq = sparse.hstack([sparse.csr_matrix(np.ones((1, N))), sparse.csr_matrix((1, n_var - N))])
    cost = np.concatenate([cost_j, np.zeros(n_var - N)])
    res = linprog(
        cost, A_ub=A_ub.tocsr(), b_ub=b_ub, A_eq=A_eq, b_eq=[1.0], bounds=(0, None), method="highs"
    )
    if res.status != 0:
        raise MarketSimError(f"the noise LP failed: {res.message}")
    p = np.maximum(res.x[:N], 0.0)
    p /= p.sum()
    return PiecewiseUniformNoise(
        centers=centers, masses=p, beta=float(beta), expected_loss=float(p @ cost_j)
    )


def _checked_loss(sensitivity, epsilon, delta, loss, beta, support, monotone, grid,
                  lower_bound):  # fmt: skip
    """Refuse bad options in one line; the loss as a function."""
    _check(sensitivity, epsilon, delta)
    if not (np.isfinite(beta) and beta > 0):
        raise MarketSimError(f"beta must be a finite number > 0 (got {beta!r})")
    if grid not in GRIDS:
        raise MarketSimError(f"grid must be one of {', '.join(GRIDS)} (got {grid!r})")
    c = LOSSES.get(loss) if isinstance(loss, str) else loss
    if c is None or not callable(c):
        raise MarketSimError(f"loss must be one of {', '.join(LOSSES)} or a function")
    if lower_bound and monotone and grid != "breakpoints":
        raise MarketSimError("a monotone lower bound needs grid='breakpoints'")
    L = 4 * sensitivity if support is None else float(support)
    if not (np.isfinite(L) and L > 0):
        raise MarketSimError(f"support must be a finite number > 0 (got {support!r})")
    return c


def _cells(L: float, beta: float, grid: str):
    """(n_half, centres, left ends, right ends) of the cells of width ``beta`` on [-L, L]."""
    n_half = int(np.ceil(L / beta - 1e-9))
    if grid == "centered":
        centers = beta * np.arange(-n_half, n_half + 1)
    else:
        centers = beta * (np.arange(-n_half, n_half) + 0.5)
    if not (n_half >= 1 and centers.size <= 20_001):
        raise MarketSimError("support / beta gives no interval or more than 20001 intervals")
    a, b = centers - beta / 2, centers + beta / 2
    if grid == "breakpoints":  # edges exactly at the multiples of beta
        a, b = beta * np.arange(-n_half, n_half), beta * np.arange(-n_half + 1, n_half + 1)
    return n_half, centers, a, b


def _privacy_constraints(N: int, shifts: list[int], epsilon: float, delta: float):
    """(A_ub, b_ub) of (eps, delta)-DP for every shift k of the cells:
    s_kj - p_j + e^eps p_{j-k} >= 0 and sum_j s_kj <= delta."""
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
    budget = sparse.kron(sparse.eye(len(shifts)), np.ones((1, N)))  # sum_j s_kj <= delta
    A_ub = sparse.vstack([A_ub, sparse.hstack([sparse.csr_matrix((len(shifts), N)), budget])])
    return A_ub, np.concatenate([np.zeros(r), np.full(len(shifts), delta)])


def _monotone_rows(N: int, n_half: int, grid: str, n_var: int):
    """Rows p_outer - p_inner <= 0: p non-increasing away from 0 on both sides."""
    if grid == "centered":
        right, left = n_half, n_half  # the centre cell leads both sides
    else:
        right, left = n_half, n_half - 1  # the cells [0, beta) and [-beta, 0)
    outer = np.r_[np.arange(right + 1, N), np.arange(left - 1, -1, -1)]
    inner = np.r_[np.arange(right, N - 1), np.arange(left, 0, -1)]
    t = np.arange(outer.size)
    return sparse.csr_matrix(
        (np.r_[np.ones(t.size), -np.ones(t.size)], (np.r_[t, t], np.r_[outer, inner])),
        shape=(t.size, n_var),
    )
