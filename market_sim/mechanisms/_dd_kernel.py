"""Compiled Newton solver of Eq. 17 (003) for many virtual-cost vectors on the same data.

For fixed eta, mu > 0, p = 1 and no cap, the weights block of Eq. 17 has the unique
minimiser a*(w) = proj_simplex(-(l(w) + gamma eta psi) / (2 mu)), and the w-objective
F(w) = min_a f(w, a) is C^1 (Danskin) with a piecewise-smooth Hessian: on the active
set S = {a_i > 0}, da_S/dl_S = -(I - 11'/|S|) / (2 mu), so with g_i = -sigma(-t_i),
h_i = sigma(t_i) sigma(-t_i), t_i = s_i.w (s_i = y_i x_i) and q = sum_S g_i s_i,

    grad F = sum_S a_i g_i s_i + Lambda w,
    hess F = sum_S (a_i h_i - g_i^2 / (2 mu)) s_i s_i' + q q' / (2 mu |S|) + Lambda I.

The Hessian is indefinite below Thm VIII.1's 2 Lambda mu > m, so each step is a
modified Newton step (Cholesky of hess + tau I, tau doubled until it factors; Nocedal &
Wright, Alg. 3.3) with an Armijo backtracking line search: a descent method that stops
at a point with max |grad| <= gtol, or a Newton step shorter than xtol on a positive
definite Hessian.  The simplex projection is Michelot's: tau_0 = (sum v - 1) / m, then
tau = (sum_{v > tau} v - 1) / |{v > tau}|, which rises to the exact threshold in at
most m passes.  ``solve_rows`` runs Algorithm 4's search over eta for every row of
``C`` (= gamma psi per problem), one row after another (each row's result depends on
that row alone, so batching changes no number), from several starts (the chains of
its docstring), and keeps the best objective at each eta; rows where a solve did not
converge are flagged for the caller to redo with the scipy reference.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from numba import njit

_JIT: dict[str, Any] = dict(cache=True, error_model="numpy", nogil=True)
_ROUNDING = 1e-13  # relative size of F's rounding error (m ~ 1e2 terms)


@njit(**_JIT)
def _simplex_tau(v):
    """Threshold tau of the projection max(v - tau, 0) onto the simplex (Michelot)."""
    m = v.size
    s = 0.0
    for i in range(m):
        s += v[i]
    tau = (s - 1.0) / m
    for _ in range(m + 1):
        s = 0.0
        k = 0
        for i in range(m):
            if v[i] > tau:
                s += v[i]
                k += 1
        new = (s - 1.0) / k
        if not new > tau:
            break
        tau = new
    return tau


@njit(**_JIT)
def _value(SX, w, c, mu, lam, t, loss, v):
    """F(w) (fills the margins t, the losses and v = -(loss + c) / (2 mu)); returns
    (F, tau)."""
    m, d = SX.shape
    for i in range(m):
        s = 0.0
        for j in range(d):
            s += SX[i, j] * w[j]
        t[i] = s
        li = math.log1p(math.exp(-s)) if s > 0 else -s + math.log1p(math.exp(s))
        loss[i] = li
        v[i] = -(li + c[i]) / (2.0 * mu)
    tau = _simplex_tau(v)
    val = 0.0
    for i in range(m):
        a = v[i] - tau
        if a > 0:
            val += a * (loss[i] + c[i]) + mu * a * a
    ww = 0.0
    for j in range(d):
        ww += w[j] * w[j]
    return val + 0.5 * lam * ww, tau


@njit(**_JIT)
def _grad_hess(SX, w, t, v, tau, mu, lam, g, H, q):
    """Gradient and Hessian of F at the point last evaluated (see the module doc)."""
    m, d = SX.shape
    for p in range(d):
        g[p] = lam * w[p]
        q[p] = 0.0
        for r in range(d):
            H[p, r] = 0.0
        H[p, p] = lam
    k = 0
    for i in range(m):
        a = v[i] - tau
        if a > 0:
            k += 1
            sig = 1.0 / (1.0 + math.exp(t[i]))  # sigma(-t)
            gi = -sig
            coef = a * sig * (1.0 - sig) - gi * gi / (2.0 * mu)
            for p in range(d):
                sp = SX[i, p]
                g[p] += a * gi * sp
                q[p] += gi * sp
                for r in range(p + 1):
                    H[p, r] += coef * sp * SX[i, r]
    for p in range(d):
        for r in range(p + 1):
            H[p, r] += q[p] * q[r] / (2.0 * mu * k)
            H[r, p] = H[p, r]


@njit(**_JIT)
def _cholesky(A, L):
    """L L' = A (lower); False if A is not positive definite."""
    d = A.shape[0]
    for j in range(d):
        s = A[j, j]
        for k in range(j):
            s -= L[j, k] * L[j, k]
        if not s > 0:
            return False
        L[j, j] = math.sqrt(s)
        for i in range(j + 1, d):
            s = A[i, j]
            for k in range(j):
                s -= L[i, k] * L[j, k]
            L[i, j] = s / L[j, j]
    return True


@njit(**_JIT)
def _newton_direction(H, g, A, L, p):
    """p = -(H + tau I)^-1 g with the least tau in {0, beta 1e-3 2^k} that factors;
    returns whether H itself was positive definite."""
    d = g.size
    beta = 0.0
    dmin = H[0, 0]
    for i in range(d):
        dmin = min(dmin, H[i, i])
        for j in range(d):
            beta += H[i, j] * H[i, j]
    beta = max(math.sqrt(beta), 1e-12)
    tau = 0.0 if dmin > 0 else -dmin + 1e-3 * beta
    pd = True
    for _ in range(80):
        for i in range(d):
            for j in range(d):
                A[i, j] = H[i, j]
            A[i, i] += tau
        if _cholesky(A, L):
            break
        pd = False
        tau = max(2.0 * tau, 1e-3 * beta)
    if tau > 0:
        pd = False
    for i in range(d):  # forward: L y = -g
        s = -g[i]
        for k in range(i):
            s -= L[i, k] * p[k]
        p[i] = s / L[i, i]
    for i in range(d - 1, -1, -1):  # back: L' p = y
        s = p[i]
        for k in range(i + 1, d):
            s -= L[k, i] * p[k]
        p[i] = s / L[i, i]
    return pd


@njit(**_JIT)
def _minimise(SX, w, c, mu, lam, gtol, xtol, max_iter, bufs):
    """Modified Newton with Armijo backtracking from w (updated in place); returns
    (F, converged)."""
    t, loss, v, t2, loss2, v2, w2, g, q, p, H, A, L = bufs
    m, d = SX.shape
    val, tau = _value(SX, w, c, mu, lam, t, loss, v)
    for _ in range(max_iter):
        _grad_hess(SX, w, t, v, tau, mu, lam, g, H, q)
        gmax = 0.0
        for j in range(d):
            gmax = max(gmax, abs(g[j]))
        if gmax <= gtol:
            return val, True
        pd = _newton_direction(H, g, A, L, p)
        slope = 0.0
        pmax = 0.0
        for j in range(d):
            slope += g[j] * p[j]
            pmax = max(pmax, abs(p[j]))
        if pd and pmax <= xtol:
            return val, True
        wmax = 0.0
        for j in range(d):
            wmax = max(wmax, abs(w[j]))
        alpha = 1.0
        accepted = False
        for _ls in range(60):
            for j in range(d):
                w2[j] = w[j] + alpha * p[j]
            val2, tau2 = _value(SX, w2, c, mu, lam, t2, loss2, v2)
            if val2 <= val + 1e-4 * alpha * slope:
                accepted = True
                break
            if pd and alpha == 1.0 and val2 - val <= _ROUNDING * (1.0 + abs(val)):
                accepted = True  # the predicted decrease is below F's rounding
                break
            alpha *= 0.5
            if alpha * pmax <= 1e-15 * (1.0 + wmax):
                break  # a step below w's resolution
        if not accepted:
            return val, gmax <= 1e-6
        for j in range(d):
            w[j] = w2[j]
        for i in range(m):
            t[i] = t2[i]
            loss[i] = loss2[i]
            v[i] = v2[i]
        val, tau = val2, tau2
    return val, False


@njit(**_JIT)
def _buffers(m, d):
    return (
        np.empty(m),
        np.empty(m),
        np.empty(m),
        np.empty(m),
        np.empty(m),
        np.empty(m),
        np.empty(d),
        np.empty(d),
        np.empty(d),
        np.empty(d),
        np.empty((d, d)),
        np.empty((d, d)),
        np.zeros((d, d)),
    )


@njit(**_JIT)
def _descent_direction(SX, c, mu, loss, v, u):
    """u = sum_i a_i s_i / ||.||, the steepest-descent direction of F at w = 0 (all losses
    log 2, a the projection of -(log 2 + c) / (2 mu)); False if it is 0."""
    m, d = SX.shape
    for i in range(m):
        loss[i] = math.log(2.0)
        v[i] = -(loss[i] + c[i]) / (2.0 * mu)
    tau = _simplex_tau(v)
    for r in range(d):
        u[r] = 0.0
    for i in range(m):
        a = v[i] - tau
        if a > 0:
            for r in range(d):
                u[r] += a * SX[i, r]
    norm = 0.0
    for r in range(d):
        norm += u[r] * u[r]
    norm = math.sqrt(norm)
    if not norm > 0:
        return False
    for r in range(d):
        u[r] /= norm
    return True


@njit(**_JIT)
def _lower_bound(c, mu, v):
    """min_a sum a_i c_i + mu ||a||^2 on the simplex: F(w) with the losses and
    Lambda/2 ||w||^2 (both >= 0) dropped, a lower bound on F at every w."""
    m = c.size
    for i in range(m):
        v[i] = -c[i] / (2.0 * mu)
    tau = _simplex_tau(v)
    val = 0.0
    for i in range(m):
        a = v[i] - tau
        if a > 0:
            val += a * c[i] + mu * a * a
    return val


@njit(**_JIT)
def _joins(W_up, reach, k, j, w, tol):
    """Whether upward chain k's w at eta_j is within tol (relative) of an earlier upward
    chain's that reached eta_j (chain 1 runs downwards or not at all)."""
    d = w.size
    for k2 in range(k):
        if k2 == 1 or reach[k2] < j:
            continue
        near = True
        for r in range(d):
            if abs(W_up[k2, j, r] - w[r]) > tol * (1.0 + abs(w[r])):
                near = False
                break
        if near:
            return True
    return False


@njit(**_JIT)
def _run_chain(SX, Cb, etas, mu, sigma, lam, kappas, k, u, gtol, xtol, max_iter, merge_tol,
               best, w, c, v, bufs, profile_b, W_eta, W_up, reach):  # fmt: skip
    """Chain k of ``solve_rows`` on one row (Cb its gamma psi): 0 from w = 0 upwards,
    1 from w = 0 downwards, k >= 2 upwards from kappas[k - 2] u; keeps in profile_b and
    W_eta the best objective and w at each eta.  Returns (best objective found so far,
    False if a solve stalled)."""
    J, m, d = etas.size, Cb.size, w.size
    converged = True
    for r in range(d):
        w[r] = 0.0 if k < 2 else kappas[k - 2] * u[r]
    for jj in range(J):
        j = J - 1 - jj if k == 1 else jj
        eta = etas[j]
        for i in range(m):
            c[i] = Cb[i] * eta
        if (k == 1 or (k > 1 and jj > 0)) and _lower_bound(c, mu, v) + sigma / eta >= best:
            continue  # eta_j cannot beat the best objective found (chain 0's, ...)
        val, conv = _minimise(SX, w, c, mu, lam, gtol, xtol, max_iter, bufs)
        if not conv:
            converged = False
        val += sigma / eta
        best = min(best, val)
        if val < profile_b[j]:
            profile_b[j] = val
            for r in range(d):
                W_eta[j, r] = w[r]
        if k == 1:
            continue
        for r in range(d):
            W_up[k, j, r] = w[r]
        reach[k] = j
        if k >= 2 and _joins(W_up, reach, k, j, w, merge_tol):
            break  # from here on an earlier upward chain's path: nothing new
    return best, converged


@njit(**_JIT)
def _finish_row(SX, Cb, etas, mu, lam, profile_b, W_eta, w, c, t, loss, v, W_out_b, A_out_b):
    """At the best eta of one row: its w into W_out_b, the allocation a = (v - tau)+
    normalised into A_out_b; returns the eta's index."""
    J, m, d = etas.size, Cb.size, w.size
    jb = 0
    for j in range(1, J):
        if profile_b[j] < profile_b[jb]:
            jb = j
    for r in range(d):
        W_out_b[r] = W_eta[jb, r]
        w[r] = W_eta[jb, r]
    for i in range(m):
        c[i] = Cb[i] * etas[jb]
    _, tau = _value(SX, w, c, mu, lam, t, loss, v)
    s = 0.0
    for i in range(m):
        a = v[i] - tau
        A_out_b[i] = a if a > 0 else 0.0
        s += A_out_b[i]
    for i in range(m):
        A_out_b[i] /= s
    return jb


@njit(**_JIT)
def solve_rows(SX, C, etas, mu, sigma, lam, kappas, reverse, gtol, xtol, max_iter, merge_tol,
               W_out, A_out, best_j, profile, ok):  # fmt: skip
    """Algorithm 4 for each row b of C (gamma psi of problem b): the objective at every
    eta (``profile[b]``) is the best over the chains, each a pass through the grid with
    every eta warm-started from the previous one's w: from w = 0 upwards (the
    reference's path), from w = 0 downwards (if ``reverse``), and upwards from kappa u
    for each kappa in ``kappas`` (u: the descent direction at w = 0 and the first eta).
    Chains after the first skip every eta (but an upward chain's first, where its start
    is defined) whose lower bound (``_lower_bound`` + sigma / eta) is not below the best
    objective found so far: the optimum cannot be there.
    An upward chain stops where its w is within ``merge_tol`` (max-norm) of an earlier
    upward chain's at the same eta: from there it would retrace that chain's path.
    At the best eta: w (W_out[b]), a (A_out[b]) and its index (best_j[b]); ``ok[b]``
    False if a solve stalled (the caller redoes the row with the reference)."""
    B, m = C.shape
    d = SX.shape[1]
    J = etas.size
    K = 2 + kappas.size
    bufs = _buffers(m, d)
    t, loss, v = bufs[0], bufs[1], bufs[2]
    c = np.empty(m)
    w = np.empty(d)
    u = np.empty(d)
    W_eta = np.empty((J, d))
    W_up = np.empty((K, J, d))  # the upward chains' w at each eta
    reach = np.empty(K, dtype=np.int64)  # the last eta index each upward chain solved
    for b in range(B):
        ok[b] = True
        for j in range(J):
            profile[b, j] = np.inf
        for i in range(m):
            c[i] = C[b, i] * etas[0]
        has_u = _descent_direction(SX, c, mu, loss, v, u)
        best = np.inf
        for k in range(K):
            reach[k] = -1
            if (k == 1 and not reverse) or (k >= 2 and not has_u):
                continue
            best, conv = _run_chain(
                SX, C[b], etas, mu, sigma, lam, kappas, k, u, gtol, xtol, max_iter,
                merge_tol, best, w, c, v, bufs, profile[b], W_eta, W_up, reach,
            )  # fmt: skip
            if not conv:
                ok[b] = False
        best_j[b] = _finish_row(
            SX, C[b], etas, mu, lam, profile[b], W_eta, w, c, t, loss, v, W_out[b], A_out[b]
        )
