"""A certified global optimum of Eq. 17 (003) on small markets: branch-and-bound over the
weights (docs/data-dependent.md, "A statement of optimality").

For fixed eta (p = 1, no cap, no realised noise, the mechanism's case) Eq. 17 is

    h(a) = G(a) + q(a),   G(a) = min_w  sum_i a_i l_i(w) + (Lambda/2) ||w||^2,
                          q(a) = mu ||a||^2 + gamma eta psi.a + sigma / eta,

over the simplex {a >= 0, sum a = 1}.  G is **concave**: for each w the bracket is
affine in a, and a pointwise minimum of affine functions is concave.  q is convex, so h
is a difference of convex functions and its minimum need not be at a vertex; but on a
simplex S = conv(v_1, ..., v_m) concavity gives G(V lam) >= sum_j lam_j G(v_j) for
lam in the unit simplex, hence

    LB(S) = min_{lam >= 0, sum lam = 1}  sum_j lam_j G_low(v_j) + q(V lam)  <=  min_S h,

a strictly convex QP in lam (V has independent columns: the v_j span a simplex of
dimension m - 1 in the hyperplane sum a = 1, which misses 0).  G_low(v) <= G(v) is
certified from any w by the Lambda-strong convexity of the bracket phi_v:
G(v) >= phi_v(w) - ||grad phi_v(w)||^2 / (2 Lambda).  The QP is solved exactly by its
support (m <= 8: at most 255 supports) and its value lowered by its Frank-Wolfe gap,
so LB(S) stays a bound even if the linear algebra rounds.  Branch-and-bound
(Horst & Tuy, simplicial partitions) splits the simplex of least bound at the midpoint
of its longest edge; the affine interpolation's error on a simplex of diameter
delta is at most (max curvature of -G) delta^2 / 8, so the bounds converge.  A simplex
whose bound is at least the best value found minus ``tol`` is dropped; the least bound
left (or dropped) is a lower bound L_eta of min h over the whole simplex, and
min_eta L_eta bounds Eq. 17 over the eps_avg grid.  ``certify`` returns that bound, the
best point found and whether it is within ``tol`` of the solver's value.
"""

from __future__ import annotations

import heapq
import itertools
from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy.special import expit

__all__ = ["Certificate", "certify", "CERTIFY_MAX_M", "CERTIFY_TOL"]

CERTIFY_MAX_M = 6  # the largest market measured (docs: the time grows fast with m)
CERTIFY_TOL = 1e-7  # the gap certified: a gain it allows is at most tol / (gamma psi')


@dataclass(frozen=True)
class Certificate:
    """``lower``: a proved lower bound of Eq. 17's minimum over the eps_avg grid;
    ``value``/``eta``/``a``/``w``: the best point known (the solver's, or a better one
    the search found); ``gap``: value - lower; ``certified``: gap <= tol (False when
    the node budget ran out first); ``improved``: the search beat the solver's value by
    more than tol; ``nodes``: simplices examined."""

    certified: bool
    gap: float
    lower: float
    value: float
    eta: float
    a: np.ndarray
    w: np.ndarray
    improved: bool
    nodes: int


def _inner_w(SX, a, lam, w0, iters: int = 40):
    """G(a) from above and below, and its minimiser: Newton on the Lambda-strongly convex
    phi_a(w) = sum a_i l_i(w) + Lambda/2 ||w||^2, G_low = phi - ||grad||^2 / (2 Lambda)."""
    w = w0.copy()
    val = grad = None
    for _ in range(iters):
        t = SX @ w
        val = a @ np.logaddexp(0.0, -t) + 0.5 * lam * w @ w
        g = expit(-t)
        grad = -(SX.T @ (a * g)) + lam * w
        if np.max(np.abs(grad)) <= 1e-11:  # the bound below pays for what is left
            break
        hess = (SX.T * (a * g * (1.0 - g))) @ SX + lam * np.eye(w.size)
        step = np.linalg.solve(hess, -grad)
        s = 1.0
        while s > 1e-10:  # Armijo backtracking (phi is convex: the full step is taken near w*)
            wn = w + s * step
            tn = SX @ wn
            vn = a @ np.logaddexp(0.0, -tn) + 0.5 * lam * wn @ wn
            if vn <= val + 1e-4 * s * grad @ step:
                break
            s *= 0.5
        w = wn
        if s * np.max(np.abs(step)) <= 1e-15 * (1.0 + np.max(np.abs(w))):
            break
    t = SX @ w
    val = a @ np.logaddexp(0.0, -t) + 0.5 * lam * w @ w
    grad = -(SX.T @ (a * expit(-t))) + lam * w
    return float(val), float(val - grad @ grad / (2.0 * lam)), w


def _supports(m: int) -> list[np.ndarray]:
    return [np.array(s) for k in range(1, m + 1) for s in itertools.combinations(range(m), k)]


def _simplex_qp(H, g, supports, first=None):
    """(lam, a lower bound of the minimum) of 1/2 lam'H lam + g'lam on the unit simplex,
    H positive definite: the support whose KKT system has lam >= 0 and no negative
    reduced cost, then the value minus its Frank-Wolfe gap (a valid bound at any lam)."""
    m = g.size
    best = None
    for S in ([] if first is None else [first]) + supports:
        k = S.size
        K = np.zeros((k + 1, k + 1))
        K[:k, :k] = H[np.ix_(S, S)]
        K[:k, k] = -1.0
        K[k, :k] = 1.0
        sol = np.linalg.solve(K, np.r_[-g[S], 1.0])
        lam = np.zeros(m)
        lam[S] = sol[:k]
        if lam.min() < -1e-12:
            continue
        lam = np.maximum(lam, 0.0)
        lam /= lam.sum()
        reduced = H @ lam + g
        if reduced.min() >= sol[k] - 1e-10 * (1.0 + abs(sol[k])):
            best = lam
            break
    if best is None:  # rounding: fall back to the best vertex
        best = np.eye(m)[int(np.argmin(0.5 * np.diag(H) + g))]
    grad = H @ best + g
    value = 0.5 * best @ H @ best + g @ best
    return best, float(value - (grad @ best - grad.min()))


@dataclass
class _EtaSearch:
    """Branch-and-bound over the weights at one eta (module docstring)."""

    SX: np.ndarray
    c: np.ndarray  # gamma eta psi
    const: float  # sigma / eta
    mu: float
    lam: float
    supports: list

    def q(self, a) -> float:
        return float(self.mu * a @ a + self.c @ a + self.const)

    def bound(self, V, G_low, first=None):
        """(LB(S), the QP's point a = V lam, its support) of the simplex with vertices
        V's columns (``first``: a support to try first, the parent's)."""
        H = 2.0 * self.mu * (V.T @ V)
        lam_, low = _simplex_qp(H, V.T @ self.c + G_low, self.supports, first)
        return low + self.const, V @ lam_, np.flatnonzero(lam_ > 0)

    def point(self, a, w0):
        """h(a) from above and the inner minimiser."""
        up, _, w = _inner_w(self.SX, a, self.lam, w0)
        return up + self.q(a), w


def _search_eta(ev: _EtaSearch, m: int, d: int, best: list, tol: float, max_nodes: int):
    """Branch-and-bound at one eta against the incumbent ``best`` = [value, a, w]
    (updated in place when a better point is found): (lower bound of min h, nodes)."""
    V = np.eye(m)
    G_low = np.empty(m)
    w0 = np.zeros(d)
    for j in range(m):
        G_low[j] = _inner_w(ev.SX, V[:, j], ev.lam, w0)[1]
    lb, a, sup = ev.bound(V, G_low)
    heap = [(lb, 0, V, G_low, a, sup)]
    floor, count, nodes = np.inf, itertools.count(1), 0
    while heap:
        lb, _, V, G_low, a, sup = heapq.heappop(heap)
        if lb >= best[0] - tol or nodes >= max_nodes:
            floor = min(floor, lb)
            break
        nodes += 1
        val, w = ev.point(a, best[2] if best[2] is not None else w0)
        if val < best[0]:
            best[:] = [val, a, w]
        i, j = max(itertools.combinations(range(m), 2),
                   key=lambda e: float(np.sum((V[:, e[0]] - V[:, e[1]]) ** 2)))  # fmt: skip
        mid = 0.5 * (V[:, i] + V[:, j])
        g_mid = _inner_w(ev.SX, mid, ev.lam, w)[1]
        for k in (i, j):
            Vc, Gc = V.copy(), G_low.copy()
            Vc[:, k], Gc[k] = mid, g_mid
            lbc, ac, supc = ev.bound(Vc, Gc, sup)
            if lbc >= best[0] - tol:
                floor = min(floor, lbc)
            else:
                heapq.heappush(heap, (lbc, next(count), Vc, Gc, ac, supc))
    if heap:
        floor = min(floor, min(h[0] for h in heap))
    return floor, nodes


def certify(
    SX,
    psi,
    etas,
    *,
    mu: float,
    sigma: float,
    gamma: float,
    reg_lambda: float,
    value: float,
    eta: float,
    a,
    w,
    tol: float = CERTIFY_TOL,
    max_nodes: int = 20_000,
) -> Certificate:
    """Branch-and-bound over the weights at every eta of ``etas`` against the solver's
    point (``value`` at ``eta``, ``a``, ``w``) for the signed rows ``SX`` (y_i x_i) and
    virtual costs ``psi`` (module docstring).  ``tol``: the gap certified;
    ``max_nodes``: the budget per eta (past it the bound left is still valid, but the
    gap may exceed tol)."""
    SX = np.asarray(SX, dtype=float)
    m, d = SX.shape
    best: list[Any] = [float(value), np.asarray(a, dtype=float), np.asarray(w, dtype=float)]
    best_eta, lower, nodes = float(eta), np.inf, 0
    supports = _supports(m)
    for e in np.asarray(etas, dtype=float):
        ev = _EtaSearch(SX, gamma * e * np.asarray(psi, float), sigma / e, mu, reg_lambda, supports)
        before = best[0]
        low, n = _search_eta(ev, m, d, best, tol, max_nodes)
        lower, nodes = min(lower, low), nodes + n
        if best[0] < before:
            best_eta = float(e)
    gap = best[0] - lower
    return Certificate(
        certified=bool(gap <= tol),
        gap=float(gap),
        lower=float(lower),
        value=best[0],
        eta=best_eta,
        a=best[1],
        w=best[2],
        improved=bool(best[0] < value - tol),
        nodes=nodes,
    )
