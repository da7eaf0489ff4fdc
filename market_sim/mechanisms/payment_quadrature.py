"""Adaptive quadrature of an allocation curve's smooth pieces and the search for where a
piece ends (``market_sim.mechanisms.payments``' module docstring): the cos-mapped
Gauss-Legendre rule, halved where its own values show it has not resolved the curve
(``quadrature.resolution_error``), and an Illinois search for the change of cell.
"""

from __future__ import annotations

import numpy as np

from .quadrature import gauss_legendre_cos, resolution_error

_REL_TOL = 1e-15  # piece ends are located to this relative width


def _finite(eps):
    """eps with +inf (at a report of value 0 only, ``ZERO_LIMIT``) read as 0: a quadrature
    node underflows to that one point only in a piece of width ~1e-300, and one point
    does not change an integral (eps_i ~ C / sqrt(z) near it is integrable)."""
    return np.where(np.isinf(eps), 0.0, eps)


_QUAD_RTOL = 1e-13  # a piece is accepted when its rule's estimated error is below this
_QUAD_SAFETY = 10.0  # ``resolution_error`` is within ~3x on algebraic tails (its tests)
_SPLIT_RTOL = 1e-11  # two halves that sum to their parent's rule to this are accepted
_QUAD_DEPTH = 200  # halvings at most (a piece of ~1e-60 of its width is accepted as it is)
_MIN_WIDTH = 1e-12  # relative to its position: an interval this narrow is not halved
_SLIVER_NODES = 12  # the fixed rule on the ~1e-10 wide sliver past each change of piece


def _fixed_rule(eps_of, rows, a, b, n_quad):
    """int_a^b eps by the ``n_quad``-node cos-mapped rule, not halved: the sliver past a
    change of piece, where a solver may flicker between two cells of (nearly) equal eps
    (no estimate converges there; the error is at most its width times that gap), and
    where near the floor of a support eps varies on the sliver's own scale (the rule
    resolves it; the former midpoint rule did not).  As ``_adaptive``'s return."""
    shape, jac = gauss_legendre_cos(n_quad)
    rows, a, b = np.asarray(rows), np.asarray(a, float), np.asarray(b, float)
    z = a[:, None] + (b - a)[:, None] * shape[None, :]
    vals = _finite(eps_of(np.repeat(rows, shape.size), z.ravel()).reshape(z.shape))
    return rows, a, b, (b - a) * (vals @ jac)


def _adaptive(eps_of, rows, a, b, n_quad, values=None):
    """int_a^b eps (one interval per entry of ``rows``) by the cos-mapped Gauss-Legendre
    rule (``quadrature.gauss_legendre_cos``), halved where its own values say it has not
    resolved the curve (``quadrature.resolution_error``: the error estimated from the
    Legendre coefficients of the same n_quad values, no extra evaluation) beyond
    _QUAD_RTOL of the interval's integral or of the whole interval's.  A smooth piece
    (nearly all of them) costs the one rule; structure on a scale far below the
    interval's width (opponents at the floor of a support at 1e-9 of its width: one
    rule there errs by 1e-4) is halved down to its scale.  ``eps_of(rows, z)``
    evaluates; ``values``: eps at the rule's nodes on [a, b] if already known.  Returns
    the accepted sub-intervals (rows, starts, ends, integrals), each a smooth piece."""
    shape, jac = gauss_legendre_cos(n_quad)

    def sample(r, lo, hi):
        z = lo[:, None] + (hi - lo)[:, None] * shape[None, :]
        return _finite(eps_of(np.repeat(r, shape.size), z.ravel()).reshape(z.shape))

    rows, a, b = np.asarray(rows), np.asarray(a, float), np.asarray(b, float)
    vals = sample(rows, a, b) if values is None else _finite(np.asarray(values, float))
    atol, parent, out = None, None, []
    for depth in range(_QUAD_DEPTH + 1):
        if not rows.size:
            break
        width = b - a
        q = width * (vals @ jac)
        atol = _QUAD_RTOL * np.abs(q) if atol is None else atol
        err = _QUAD_SAFETY * width * resolution_error(vals)
        # an interval at the resolution of its reports has nothing left to resolve
        done = (err <= np.maximum(_QUAD_RTOL * np.abs(q), atol)) | ~(
            width > _MIN_WIDTH * (np.abs(a) + np.abs(b))
        )
        if parent is not None:  # halves that sum to their parent's rule: converged (a
            # floor of rounding in eps, e.g. a re-solve per point, is not split forever)
            h = rows.size // 2
            pair = q[:h] + q[h:]
            agree = np.abs(pair - parent) <= np.maximum(_SPLIT_RTOL * np.abs(pair), atol[:h])
            done |= np.concatenate((agree, agree))
        if depth == _QUAD_DEPTH:
            done[:] = True
        out.append((rows[done], a[done], b[done], q[done]))
        split = ~done
        parent = q[split]
        rows, a, b, atol = rows[split], a[split], b[split], atol[split]
        mid = a + 0.5 * (b - a)
        rows, atol = np.concatenate((rows, rows)), np.concatenate((atol, atol))
        a, b = np.concatenate((a, mid)), np.concatenate((mid, b))
        vals = sample(rows, a, b) if rows.size else np.zeros((0, shape.size))
    if not out:
        return np.zeros(0, np.int64), np.zeros(0), np.zeros(0), np.zeros(0)
    cols = zip(*out, strict=True)
    return tuple(np.concatenate(c) for c in cols)


def _least_z(values, lo: float, hi: float, p_max: float) -> float:
    """The least z in [lo, hi] with values(z) >= p_max (values is non-decreasing), found
    by bisection to rounding; hi if values(hi) < p_max."""

    def at(z):
        return float(values(np.array([z]))[0])

    if not at(hi) >= p_max:
        return hi
    if at(lo) >= p_max:
        return lo
    while True:
        mid = 0.5 * (lo + hi)
        if not lo < mid < hi:
            return hi
        lo, hi = (lo, mid) if at(mid) >= p_max else (mid, hi)


def _illinois(f, a, b, todo):
    """Shrink [a, b] (in place, rows ``todo``) to a sign change of f, with
    f(a) >= 0 > f(b), to the width _REL_TOL (|a| + |b|).

    Regula falsi with the Illinois modification (superlinear), a step of at
    least half the target width (so the last steps straddle the root), and a
    bisection whenever two steps did not halve the bracket or f is not finite
    (a branch that ends in a fold).  Returns the rows whose ends did not
    bracket a sign change (left to the caller's bisection).
    """
    if not todo.size:
        return todo
    A, B = a[todo].copy(), b[todo].copy()
    fa, fb = f(todo, A), f(todo, B)
    ok = (fa >= 0) & (fb < 0)
    rows, A, B, fa, fb = todo[ok], A[ok], B[ok], fa[ok], fb[ok]
    last = np.zeros(rows.size, dtype=np.int8)  # +1: A moved last step, -1: B moved
    w1 = np.full(rows.size, np.inf)  # widths one and two steps ago
    w2 = w1.copy()
    grow = np.ones(rows.size)
    live = np.arange(rows.size)
    for _ in range(200):
        w = B[live] - A[live]
        tolw = _REL_TOL * (np.abs(A[live]) + np.abs(B[live]) + 1e-300)
        keep = w > tolw
        live, w, tolw = live[keep], w[keep], tolw[keep]
        if not live.size:
            break
        fA, fB = fa[live], fb[live]
        with np.errstate(all="ignore"):
            z = A[live] - fA * w / (fB - fA)
        mid = A[live] + 0.5 * w
        slow = w > 0.5 * w2[live]
        z = np.where(np.isfinite(z) & np.isfinite(fB) & ~slow, z, mid)
        # f(a) = 0 exactly (a zero, or a plateau of rounding around it) would stall the
        # secant at a: probe just above a, with a step doubling while f stays 0
        zero = fA == 0
        z = np.where(zero, np.minimum(A[live] + grow[live] * tolw, mid), z)
        grow[live] = np.where(zero, 2 * grow[live], 1.0)
        z = np.clip(z, A[live] + 0.5 * tolw, B[live] - 0.5 * tolw)
        fz = f(rows[live], z)
        w2[live], w1[live] = w1[live], w
        in_a = fz >= 0
        # Illinois: the end kept twice in a row has its value halved
        halve_b = in_a & (last[live] == 1)
        halve_a = ~in_a & (last[live] == -1)
        fb[live] = np.where(halve_b, 0.5 * fB, fB)
        fa[live] = np.where(halve_a, 0.5 * fA, fA)
        A[live] = np.where(in_a, z, A[live])
        fa[live] = np.where(in_a, fz, fa[live])
        B[live] = np.where(in_a, B[live], z)
        fb[live] = np.where(in_a, fb[live], fz)
        last[live] = np.where(in_a, 1, -1)
    a[rows], b[rows] = A, B
    return todo[~ok]
