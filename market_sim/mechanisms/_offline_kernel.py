"""Compiled kernels of the exact offline solver (Eq. 11, 003); used by ``offline.solve``.

The numpy solver in ``offline.py`` screens every cell with ~30 full-array passes
(gathers, prefix sums, cubic coefficients) and, with a cap, a vectorised binary
search over the staircase.  Here the same arithmetic runs as scalar loops:

* ``uncapped_best``: one streaming pass over the sorted values, groups of equal
  values and their shifted running sums formed on the fly, each cell screened
  by scalars and its cubic (Eq. 14, 003) solved only when it survives; a
  division-free pre-screen (``_uncapped_keeps_sign``, proved to drop only cells
  the screen drops) keeps the screen itself for the few cells near a root;
* ``capped_best``: the staircase c*(j) by a galloping search that starts from
  the previous answer (c* moves by O(1) per step), fused with the cell screen
  (pre-screened as above, ``_capped_keeps_sign``) and a lower bound of each
  cell's loss against the greedy allocation's (``_capped_loss_floor``);
* ``allocate`` / ``finish``: Eq. 13 (003) written into a caller-owned array and
  its sums, so no m-sized temporaries.

Why numba (and not Cython, C or Rust): the kernel is ~300 lines of scalar loops
over float64 arrays that must stay next to, and testable against, the numpy
reference; numba compiles that Python source as it stands, needs no build step
or compiler at install time (wheels for CPython 3.11-3.13 on the usual
platforms), caches the machine code (``cache=True``), and, being optional at
run time, lets ``solve`` fall back to numpy wherever it is missing.  Every
array is allocated by the caller in numpy, so ``tracemalloc`` sees all memory.

The screen and candidate formulas mirror ``offline._cell_candidates`` and
``offline._staircase`` operation by operation (same prefix sums, same
tolerances), so the kernel picks the reference's cell.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from numba import njit

_JIT: dict[str, Any] = dict(cache=True, error_model="numpy", nogil=True)
_INF = np.inf


@njit(**_JIT)
def _two_sum(s, c, x):
    """(s, c) += x by Knuth's branch-free TwoSum (compensated summation)."""
    t = s + x
    bp = t - s
    return t, c + ((s - (t - bp)) + (x - bp))


@njit(**_JIT)
def _add(s, c, x):
    """One step of Neumaier's compensated sum: (s, c) += x."""
    t = s + x
    if abs(s) >= abs(x):
        c += (s - t) + x
    else:
        c += (x - t) + s
    return t, c


@njit(**_JIT)
def positive_roots(A, p, q):
    """Positive roots (u0 >= u1, NaN when absent) of A u^3 + p u + q (A > 0, q >= 0)."""
    P = p / A
    Qc = q / A
    if not (P < 0 and 4 * P**3 + 27 * Qc**2 <= 0):
        return np.nan, np.nan
    r = 2 * math.sqrt(-P / 3)
    x = 1.5 * Qc / P * math.sqrt(-3 / P)
    x = min(max(x, -1.0), 1.0)
    u0 = r * math.cos(math.acos(x) / 3)
    t = Qc / u0
    u1 = 2 * t / (u0 + math.sqrt(u0 * u0 + 4 * t))
    return (u0 if u0 > 0 else np.nan), (u1 if u1 > 0 else np.nan)


@njit(**_JIT)
def _uncapped_keeps_sign(N, S1, S2, y, y_next, ref, s, scale):
    """True only where ``cell_loss`` of the uncapped cell (N sellers, shifted sums S1, S2,
    lam in (v, v_next], y = v - ref) surely fails its screen; no division.

    In X = N u the cell's g (``_g_changes_sign``) is g(X / N) = (s X^2 + P + W / X) / N with
    W = N S2 - S1^2 (= N^2 V) and P = s W - ref N - S1 (= N p), and the admissible interval
    is [N (y - scale) - S1, N (y_next + scale) - S1]; widened here by N scale on both sides
    it holds the screen's interval whatever the rounding (< 1e-15 N (|ref| + |v_last|),
    and scale = 1e-9 (|ref| + |v_last|)).  Then as in ``_signs_apart``, with the magnitudes
    Pm = s (N S2 + S1^2) + |ref| N + S1 >= |P| and Wm = N S2 + S1^2 >= W bounding every
    rounding of p and q (the screen's V = S2 / N - d1^2 included) and a margin 1e-8 T
    (the screen's tolerance is below 4e-10 T, T = XL XR (Pm + s XR^2 + Wm / XL)):
    g > 0 on all the interval when its lower bound s XL^2 + P + W / XR is above it, and g
    (convex) is < 0 on all of it when both ends are below minus it.  An overflow, an
    infinite end (the last cell) or XL = 0 keeps the cell.
    """
    XL = max(N * (y - 2 * scale) - S1, 0.0)
    XR = N * (y_next + 2 * scale) - S1
    NS2 = N * S2
    S1s = S1 * S1
    W = NS2 - S1s
    P = s * W - ref * N - S1
    Pm = s * (NS2 + S1s) + abs(ref) * N + S1
    return _signs_apart(s, P, W, Pm, NS2 + S1s, XL, XR)


@njit(**_JIT)
def _signs_apart(a, P, Q, Pm, Qm, XL, XR):
    """Whether G(X) = a X^2 + P + Q / X (a > 0, Q >= 0) keeps one sign on [XL, XR] by more
    than 1e-8 M, M = Pm + a XR^2 + Qm / XL (Pm >= |P|, Qm >= |Q|: the magnitudes of the
    terms the caller's screen rounds): its lower bound a XL^2 + P + Q / XR is above
    1e-8 M, or G (convex) is below -1e-8 M at both ends.  Everything is multiplied by
    XL XR > 0 (no division, T = XL XR M); an overflow makes T infinite or a NaN, and
    T <= 1e-100 (an underflow may have lost a term): both say no."""
    a1 = a * XL * XL * XL * XR  # XL XR a XL^2
    a2 = P * XL * XR
    a3 = Q * XL  # XL XR Q / XR
    t2 = a * XL * XR * XR * XR  # XL XR a XR^2 (>= a1 as computed: an overflow of a1 is one of T)
    t3 = Q * XR  # XL XR Q / XL
    T = Pm * XL * XR + t2 + Qm * XR
    margin = 1e-8 * T
    above = a1 + a2 + a3 > margin
    below = (a1 + a2 + t3 < -margin) & (t2 + a2 + a3 < -margin)
    # branch-free: the outcome of each cell is hard to predict
    return (XL > 0) & (T > 1e-100) & (T < _INF) & (above | below)


@njit(**_JIT)
def _capped_keeps_sign(Nc, N, S1c, S2c, S1n, S2n, ref, kappa, s, y_n, y_next, y_c, y_c1, scale):
    """``_uncapped_keeps_sign`` for a capped cell (c, n) of ``capped_best`` (y = v - ref
    at v_n, v_{n+1}, v_c, v_{c+1}): True only where ``cell_loss`` surely finds no root.

    With R = 1 - Nc kappa, D1 = S1n - S1c, W = N (S2n - S2c) - D1^2, C1 as in cell_loss and
    X = N u, the cell's g times R^2 N is G(X) = a X^2 + P + Q / X with
    a = s (R^2 + Nc kappa^2 N), P = R^2 (s W - N C1 - R (ref N + D1)), Q = R^3 W.  The lam
    interval is N (y_n, y_next] - D1 and the band beta X in [N y_c - D1, N y_c1 - D1],
    beta = (R - kappa N) / R.  Where |beta| >= 1e-5 each end has a rounding below
    1e-11 N (|ref| + |v_last|) (the screen's too), so widening the intersection by
    2 N scale holds the screen's interval (widened by N scale); an empty one is
    rejected as the screen does.  T bounds every term the screen rounds (its tolerance
    is below 4e-10 T, see ``_uncapped_keeps_sign``).  |beta| < 1e-5 keeps the cell.
    """
    if not N > 0:
        return True  # cell_loss: no cell
    R = 1.0 - Nc * kappa
    if not R > 0:
        return True
    Rb = R - kappa * N
    if not abs(Rb) >= 1e-5 * R:
        return False
    D1 = S1n - S1c
    widen = 2 * N * scale
    f = R / Rb
    E0 = (N * y_c - D1) * f  # the band's ends (N y - D1) R / Rb
    E1 = (N * y_c1 - D1) * f
    XL = max(max(N * y_n - D1, min(E0, E1)) - widen, 0.0)
    XR = min(N * y_next - D1, max(E0, E1)) + widen
    D2m = N * (S2n - S2c)
    D1s = D1 * D1
    W = D2m - D1s
    R2 = R * R
    C1 = kappa * (S1c + ref * Nc)
    P = R2 * (s * W - N * C1 - R * (ref * N + D1))
    a = s * (R2 + Nc * kappa * kappa * N)
    Pm = R2 * (s * (D2m + D1s) + N * kappa * (abs(S1c) + abs(ref) * Nc) + R * (abs(ref) * N + D1))
    # an empty interval (as the screen finds it; a NaN keeps the cell) or no sign change
    return (XR <= XL) | _signs_apart(a, P, R2 * R * W, Pm, R2 * R * (D2m + D1s), XL, XR)


@njit(**_JIT)
def _g_changes_sign(A, p, q, uL, uR):
    """Whether g(u) = A u^2 + p + q/u (the cubic over u) changes sign on [uL, uR], to a
    rounding tolerance: its ends and, where inside, its minimum at u^3 = q / (2A)."""
    if uL > 0:
        gL = A * uL * uL + p + q / uL
    else:
        gL = _INF if q > 0 else p
    gR = A * uR * uR + p + q / uR if math.isfinite(uR) else _INF
    gmin = min(gL, gR)
    ust3 = q / (2 * A)
    if ust3 > uL**3 and ust3 < uR**3:
        us = np.cbrt(ust3)
        gmin = min(gmin, A * us * us + p + q / us)
    tol = 1e-10 * (abs(p) + (abs(gL) if math.isfinite(gL) else 0.0))
    return gmin <= tol and max(gL, gR) >= -tol


@njit(**_JIT)
def cell_loss(
    Nc, N, S1c, S2c, S1n, S2n, ref, kappa, s, v_n, v_next, v_c, v_c1, scale, vlast, capped
):
    """(loss / mu, u) of the best KKT point of cell (c, n), (inf, NaN) if none.

    Nc, N: counts of capped and of middle sellers; S1*, S2*: shifted prefix
    sums at c and n; v_n, v_next: the cut-off interval (lam in (v_n, v_next]);
    v_c, v_c1: the band interval of lam - tau (capped cells only).
    """
    if not N > 0:
        return _INF, np.nan
    R = 1.0 - Nc * kappa
    if not R > 0:
        return _INF, np.nan
    d1 = (S1n - S1c) / N
    m1 = d1 + ref
    # screen 1: the admissible u-interval (u = lam - m1) must not be empty
    uL = v_n - m1
    uR = v_next - m1
    if capped:  # band lam - tau in [v_c, v_{c+1}), tau = kappa N u / R
        beta = 1.0 - kappa * N / R
        b0 = (v_c - m1) / beta
        b1 = (v_c1 - m1) / beta
        if beta > 0:
            lo_b, hi_b = b0, b1
        elif beta < 0:
            lo_b, hi_b = b1, b0
        elif v_c <= m1 and m1 < v_c1:
            lo_b, hi_b = -_INF, _INF
        else:
            lo_b, hi_b = _INF, -_INF
        uL = max(uL, lo_b)
        uR = min(uR, hi_b)
    uL = max(uL - scale, 0.0)
    uR = uR + scale
    if not uR > uL:
        return _INF, np.nan
    # cubic coefficients of the cell (Eq. 14, 003, with the cap terms)
    V = max((S2n - S2c) / N - d1 * d1, 0.0)
    C1 = kappa * (S1c + ref * Nc)
    A = s * N * (1 + Nc * kappa**2 * N / R**2)
    p = s * N * V - C1 - R * m1
    q = R * V
    # screen 2: g(u) = A u + p + q/u must change sign on the interval
    if not _g_changes_sign(A, p, q, uL, uR):
        return _INF, np.nan
    # the roots that are consistent with the cell, and their loss / mu
    best, best_u = _INF, np.nan
    u0, u1 = positive_roots(A, p, q)
    for k in range(2):
        u = u0 if k == 0 else u1
        if not u > 0:
            continue
        lam = m1 + u
        tol = 1e-11 * (abs(lam) + abs(m1) + 1e-300)  # local: one huge value must not widen it
        if not (lam > v_n - tol and lam <= v_next + tol):
            continue
        if capped:
            band = lam - kappa * N * u / R
            if not (band >= v_c - tol and band < v_c1 + tol):
                continue
        rho = R / (N * u)
        norm_a = math.sqrt(Nc * kappa**2 + rho * rho * N * (u * u + V))
        lin = C1 + R * (m1 * u - V) / u
        if not lin > 0:
            continue
        loss = norm_a + 2 * math.sqrt(s * lin)
        if loss < best:
            best, best_u = loss, u
    return best, best_u


@njit(**_JIT)
def uncapped_best(xs, s):
    """Best cell without a cap (c = 0) in one pass over sorted finite ``xs``.

    Returns (n, end, u, loss, w0, v1): the cell's number of groups, its number
    of sellers, root and loss / mu (n = 0 if no cell holds a KKT point), the
    multiplicity of the lowest value and the next distinct value (greedy).
    """
    m = xs.size
    ref = xs[0]
    vlast = xs[m - 1]
    scale = 1e-9 * (abs(ref) + abs(vlast) + 1e-300)
    Nn = 0.0
    S1 = 0.0
    S2 = 0.0
    best, best_u, best_n, best_end = _INF, np.nan, 0, 0
    w0, v1 = 0.0, _INF
    i = 0
    n = 0
    while i < m:
        v = xs[i]
        j = i + 1
        while j < m and xs[j] == v:
            j += 1
        w = float(j - i)
        y = v - ref
        wy = w * y
        Nn += w
        S1 += wy
        S2 += wy * y
        n += 1
        v_next = xs[j] if j < m else _INF
        if n == 1:
            w0, v1 = w, v_next
        if not _uncapped_keeps_sign(Nn, S1, S2, y, v_next - ref, ref, s, scale):
            loss, u = cell_loss(
                0.0, Nn, 0.0, 0.0, S1, S2, ref, 1.0, s, v, v_next, -_INF, -_INF, scale, vlast,
                False,
            )  # fmt: skip
            if loss < best:
                best, best_u, best_n, best_end = loss, u, n, j
        i = j
    return best_n, best_end, best_u, best, w0, v1


@njit(**_JIT)
def scaled_finite(psi, gamma, out):
    """out[:k] = the finite values of gamma psi in order; returns (k, whether some psi is
    NaN or -inf) in one pass (``offline._as_psi`` and ``solve``'s filter, fused)."""
    k = 0
    bad = False
    for i in range(psi.size):
        p = psi[i]
        if math.isnan(p) or p == -_INF:
            bad = True
        x = gamma * p
        if math.isfinite(x):
            out[k] = x
            k += 1
    return k, bad


@njit(**_JIT)
def count_groups(xs):
    """Number of distinct values of sorted ``xs``."""
    U = 1
    for i in range(1, xs.size):
        if xs[i] != xs[i - 1]:
            U += 1
    return U


@njit(**_JIT)
def group(xs, v, Nw, S1, S2, fill_v):
    """Distinct values v, prefix counts Nw and shifted prefix sums S1, S2 of w (v - v_0)^p."""
    m = xs.size
    ref = xs[0]
    Nw[0] = 0.0
    S1[0] = 0.0
    S2[0] = 0.0
    i = 0
    g = 0
    while i < m:
        x = xs[i]
        j = i + 1
        while j < m and xs[j] == x:
            j += 1
        w = float(j - i)
        y = x - ref
        wy = w * y
        if fill_v:
            v[g] = x
        Nw[g + 1] = Nw[g] + w
        S1[g + 1] = S1[g] + wy
        S2[g + 1] = S2[g] + wy * y
        g += 1
        i = j
    return g


@njit(**_JIT)
def _F(mid, yj, Nj1, S1j1, v, Nw, S1, Q, ref):
    """Staircase test at lam = v_j: capped groups 1..mid are consistent iff F <= 0."""
    Nc = Nw[mid]
    yc = v[mid - 1] - ref
    return (Nc - Q) * (yj - yc) + (Nj1 - Nc) * yj - (S1j1 - S1[mid])


@njit(**_JIT)
def cstar(j, guess, v, Nw, S1, U, Q, ref):
    """c*(j) of ``offline._staircase``: a galloping search from ``guess``, then bisection."""
    if not Nw[j - 1] > Q * (1 + 1e-12):
        return j - 1  # the path has not started: every active group is capped
    if j == U + 1:
        return 0
    yj = v[j - 1] - ref
    Nj1 = Nw[j - 1]
    S1j1 = S1[j - 1]
    top = j - 1
    g = min(max(guess, 0), top)
    if g == 0 or _F(g, yj, Nj1, S1j1, v, Nw, S1, Q, ref) <= 0:
        lo, hi, step = g, top, 1
        while True:  # gallop up
            t = lo + step
            if t > hi:
                break
            if _F(t, yj, Nj1, S1j1, v, Nw, S1, Q, ref) <= 0:
                lo = t
                step *= 2
            else:
                hi = t - 1
                break
    else:
        lo, hi, step = 0, g - 1, 1
        while True:  # gallop down
            t = g - step
            if t <= 0:
                break
            if _F(t, yj, Nj1, S1j1, v, Nw, S1, Q, ref) <= 0:
                lo = t
                break
            hi = t - 1
            step *= 2
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if _F(mid, yj, Nj1, S1j1, v, Nw, S1, Q, ref) <= 0:
            lo = mid
        else:
            hi = mid - 1
    return lo


@njit(**_JIT)
def _capped_loss_floor(Nc, N, S1c, ref, kappa, v_band):
    """A lower bound of the loss / mu (Eq. 11, 003, at eta's optimum) of every allocation
    of cell (c, n): Nc sellers at kappa, N in the band sharing R = 1 - Nc kappa, each of
    value >= v_band (the band's lowest value).  ||a||^2 >= Nc kappa^2 + R^2 / N (equal
    shares) and x.a >= kappa sum_capped + R v_band, so the loss sqrt(||a||^2) +
    2 sqrt(s x.a) is at least the returned pair's norm + 2 sqrt(s lin)."""
    R = 1.0 - Nc * kappa
    norm = math.sqrt(Nc * kappa * kappa + R * R / N)
    lin = kappa * (S1c + ref * Nc) + R * v_band
    return norm, lin


@njit(**_JIT)
def capped_lam_end(v, Nw, U, Q, s):
    """An upper bound of the cut-off lam of every KKT point with the cap (+inf if none).

    At a KKT point (``payments._CappedOracle``'s (C) and (Psi)), sum_j D_j = Q tau and
    lam = s sum D^2 + sum d D / (Q tau) >= s sum D^2 >= s Q^2 tau^2 / M (Cauchy-Schwarz
    over the M sellers).  Its Nc capped sellers (x <= lam - tau) have R = 1 - Nc kappa
    > 0, so Nc <= floor(Q) < q = floor(Q) + 1 and lam - tau < x_(q), the q-th least
    value: tau > lam - x_(q).  So t = lam - x_(q) > 0 has x_(q) + t > a t^2 with
    a = s Q^2 / M, i.e. t < (1 + sqrt(1 + 4 a x_(q))) / (2 a), and lam < x_(q) + that."""
    M = Nw[U]
    q = math.floor(Q * (1.0 + 1e-9)) + 1.0  # (a Q = m / k rounded below an integer)
    if not q <= M:
        return _INF
    g = 0
    while Nw[g + 1] < q:  # the group holding the q-th least value (one pass at most)
        g += 1
    xq = v[g]
    a = s * Q * Q / M
    disc = 1.0 + 4.0 * a * xq
    if not disc >= 0:
        return xq
    return xq + (1.0 + math.sqrt(disc)) / (2.0 * a)


@njit(**_JIT)
def capped_best(v, Nw, S1, S2, U, kappa, s, cutoff):
    """Best cell (c, n) with the cap a_i <= kappa, over the cells next to the staircase.

    Returns (c, n, u, loss); n = 0 if no cell holds a KKT point.  Cells whose loss is
    surely above ``cutoff`` (``_capped_loss_floor``, with a 1e-9 relative margin) are
    skipped: the caller passes the greedy allocation's loss, which it keeps unless a
    cell does better, so a skipped cell can be neither that cell nor the argmin.
    """
    Q = 1.0 / kappa
    ref = v[0]
    vlast = v[U - 1]
    scale = 1e-9 * (abs(ref) + abs(vlast) + 1e-300)
    best, best_u, best_c, best_n = _INF, np.nan, 0, 0
    # cells whose cut-off lies above ``capped_lam_end`` hold no KKT point (a margin of
    # scale, far above cell_loss's 1e-11 tolerance): the loop stops there (on U[0, 1]
    # with k = 5 at about a fifth of the groups)
    lam_end = capped_lam_end(v, Nw, U, Q, s) + scale
    cs_prev = cstar(1, 0, v, Nw, S1, U, Q, ref)
    for n in range(1, U + 1):
        if v[n - 1] > lam_end:
            break
        cs_next = cstar(n + 1, cs_prev, v, Nw, S1, U, Q, ref)
        lo = max(min(cs_prev, cs_next) - 1, 0)
        hi = min(max(cs_prev, cs_next) + 1, n - 1)
        v_n = v[n - 1]
        v_next = v[n] if n < U else _INF
        for c in range(lo, hi + 1):
            Nc = Nw[c]
            v_c = v[c - 1] if c > 0 else -_INF
            if _capped_keeps_sign(
                Nc, Nw[n] - Nc, S1[c], S2[c], S1[n], S2[n], ref, kappa, s,
                v_n - ref, v_next - ref, v_c - ref, v[c] - ref, scale,
            ):  # fmt: skip
                continue
            norm, lin = _capped_loss_floor(Nc, Nw[n] - Nc, S1[c], ref, kappa, v[c])
            if norm + 2 * math.sqrt(s * max(lin, 0.0)) > min(cutoff, best) * (1 + 1e-9):
                continue
            loss, u = cell_loss(
                Nc,
                Nw[n] - Nc,
                S1[c],
                S2[c],
                S1[n],
                S2[n],
                ref,
                kappa,
                s,
                v_n,
                v_next,
                v_c,
                v[c],
                scale,
                vlast,
                True,
            )
            if loss < best:
                best, best_u, best_c, best_n = loss, u, c, n
        cs_prev = cs_next
    return best_c, best_n, best_u, best


@njit(**_JIT)
def greedy_group(Nw, U, kappa):
    """First group whose prefix count reaches 1/kappa (``offline._greedy``)."""
    target = 1.0 - 1e-12
    for g in range(U):
        if Nw[g + 1] * kappa >= target:
            return g
    return U - 1


@njit(**_JIT)
def seg_stats(xs, i0, i1):
    """Count, mean, variance and sum of xs[i0:i1], two passes, compensated sums."""
    n = i1 - i0
    if n <= 0:
        return 0, 0.0, 0.0, 0.0
    s, comp = 0.0, 0.0
    for i in range(i0, i1):
        s, comp = _add(s, comp, xs[i])
    total = s + comp
    mean = total / n
    s, comp = 0.0, 0.0
    for i in range(i0, i1):
        d = xs[i] - mean
        s, comp = _add(s, comp, d * d)
    return n, mean, (s + comp) / n, total


@njit(**_JIT)
def allocate(psi, gamma, kappa, v_cap, v_top, lam, rho, greedy, v_m, share, out):
    """Eq. 13 (003) with the cap, unnormalised: out_i = min(kappa, rho (lam - x_i)^+) for
    x_i <= v_top, kappa for x_i <= v_cap, 0 above (x = gamma psi); or, if ``greedy``,
    kappa below v_m and ``share`` at v_m.  Returns the compensated sums over out_i > 0
    of out_i, out_i x_i, out_i psi_i and out_i^2."""
    s0, c0, s1, c1, s2, c2, s3, c3 = 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0
    for i in range(psi.size):
        p = psi[i]
        x = gamma * p
        if greedy:
            a = kappa if x < v_m else (share if x == v_m else 0.0)
        elif x <= v_cap:
            a = kappa
        elif x <= v_top:
            a = min(kappa, rho * max(lam - x, 0.0))
        else:
            a = 0.0
        out[i] = a
        if a > 0:  # x may be +inf where a = 0
            s0, c0 = _two_sum(s0, c0, a)
            s1, c1 = _two_sum(s1, c1, a * x)
            s2, c2 = _two_sum(s2, c2, a * p)
            s3, c3 = _two_sum(s3, c3, a * a)
    return s0 + c0, s1 + c1, s2 + c2, s3 + c3


@njit(**_JIT)
def finish(a, total, eta, eps):
    """a /= total and eps = a eta in place; returns the number of eps_i != 0."""
    nb = 0
    for i in range(a.size):
        ai = a[i] / total
        a[i] = ai
        e = ai * eta
        eps[i] = e
        nb += e != 0
    return nb


def warm_up():
    """Compile (or load from the cache) every kernel with the types ``solve`` uses."""
    xs = np.array([0.25, 0.5, 0.5, 1.0])
    uncapped_best(xs, 1.0)
    U = count_groups(xs)
    v, Nw, S1, S2 = np.empty(U), np.empty(U + 1), np.empty(U + 1), np.empty(U + 1)
    group(xs, v, Nw, S1, S2, True)
    capped_best(v, Nw, S1, S2, U, 0.5, 1.0, np.inf)
    greedy_group(Nw, U, 0.5)
    seg_stats(xs, 0, 2)
    a, eps = np.empty(xs.size), np.empty(xs.size)
    total = allocate(xs, 1.0, 0.5, 0.25, 0.5, 0.75, 1.0, False, 0.0, 0.0, a)[0]
    finish(a, total, 1.0, eps)
    scaled_finite(xs, 1.0, a)
    frozen = xs.copy()  # a read-only psi (e.g. np.frombuffer) is another numba type
    frozen.flags.writeable = False
    allocate(frozen, 1.0, 0.5, 0.25, 0.5, 0.75, 1.0, False, 0.0, 0.0, a)
    scaled_finite(frozen, 1.0, a)


# ---- the capped payment oracle (``payments._CappedOracle``) ---------------------------
@njit(**_JIT)
def stair_tau(v, Nw, S1, U, Q, low_side, out):
    """Band width tau at lam = v_j (j = 1..U, into out[j-1]): the root of
    sum_g w_g min(tau, (v_j - v_g)^+) = Q tau, through c*(j) of ``cstar``.
    Where there is none (at most Q sellers below v_j) out is 0 if ``low_side`` else inf."""
    ref = v[0]
    guess = 0
    for j in range(1, U + 1):
        c = cstar(j, guess, v, Nw, S1, U, Q, ref)
        guess = c
        den = Q - Nw[c]
        if not (Nw[j - 1] > Q * (1 + 1e-12) and den > 0):
            out[j - 1] = 0.0 if low_side else _INF
            continue
        yj = v[j - 1] - ref
        out[j - 1] = ((Nw[j - 1] - Nw[c]) * yj - (S1[j - 1] - S1[c])) / den


@njit(**_JIT)
def cell_moments(v, Nw, cc, cn, Nc, SC, Nb, mb, M2b):
    """Per cell (c = cc[q] capped groups, n = cn[q] groups bought): the count and exact
    sum of the capped values, and the count, mean and sum of squared deviations of the
    band's (compensated sums; cells sorted by n, then c descending, share their work)."""
    K = cc.size
    # compensated prefix sums of w v at the cells' c
    order = np.argsort(cc)
    s, comp, g = 0.0, 0.0, 0
    for t in range(K):
        q = order[t]
        while g < cc[q]:
            s, comp = _add(s, comp, (Nw[g + 1] - Nw[g]) * v[g])
            g += 1
        Nc[q] = Nw[cc[q]]
        SC[q] = s + comp
    q = 0
    while q < K:
        n = cn[q]
        c = cc[q]
        # band c+1..n (1-based groups): two passes
        N = Nw[n] - Nw[c]
        if N > 0:
            s, comp = 0.0, 0.0
            for g in range(c, n):
                s, comp = _add(s, comp, (Nw[g + 1] - Nw[g]) * v[g])
            mean = (s + comp) / N
            s, comp = 0.0, 0.0
            for g in range(c, n):
                d = v[g] - mean
                s, comp = _add(s, comp, (Nw[g + 1] - Nw[g]) * d * d)
            M2 = s + comp
        else:
            mean, M2 = 0.0, 0.0
        Nb[q], mb[q], M2b[q] = N, mean, M2
        q += 1
        # the next cells of this n with fewer capped groups: add groups (Welford)
        while q < K and cn[q] == n and cc[q] < c:
            for g in range(c - 1, cc[q] - 1, -1):
                w = Nw[g + 1] - Nw[g]
                N1 = N + w
                d = v[g] - mean
                mean += d * w / N1
                M2 += d * d * w * N / N1
                N = N1
            c = cc[q]
            Nb[q], mb[q], M2b[q] = N, mean, M2
            q += 1


@njit(**_JIT)
def _polish(A, p, q, u):
    """Newton steps on A u^3 + p u + q, each kept only if it lowers |f|."""
    f = (A * u * u + p) * u + q
    for _ in range(2):
        d = 3 * A * u * u + p
        if d == 0 or f == 0:
            break
        un = u - f / d
        fn = (A * un * un + p) * un + q
        if not abs(fn) < abs(f):
            break
        u, f = un, fn
    return u


@njit(**_JIT)
def _may_hold_root(A, p, q, m1, lo_l, hi_l, lo_t, hi_t, kN_R, vlast):
    """The screen of ``cell_loss`` (and ``offline._cell_candidates``): can A u^3 + p u + q
    have a root u with lam = m1 + u in [lo_l, hi_l] and band = m1 + (1 - kN_R) u in
    [lo_t, hi_t]?  g(u) = A u + p + q/u is convex: a root needs g >= 0 at an end and
    g <= 0 at an end or at its minimum.  Widened as there, so never wrong."""
    scale = 1e-9 * (abs(lo_l) + abs(vlast) + 1e-300)
    uL = lo_l - m1
    uR = hi_l - m1
    beta = 1.0 - kN_R
    b0 = (lo_t - m1) / beta
    b1 = (hi_t - m1) / beta
    if beta > 0:
        uL, uR = max(uL, b0), min(uR, b1)
    elif beta < 0:
        uL, uR = max(uL, b1), min(uR, b0)
    elif not (lo_t <= m1 and m1 < hi_t):
        return False
    uL = max(uL - scale, 0.0)
    uR = uR + scale
    if not uR > uL:
        return False
    return _g_changes_sign(A, p, q, uL, uR)


@njit(**_JIT)
def _report_bounds(st, p, lam_lo, lam_hi, t_lo, t_hi):
    """(lo_t, hi_t, lo_l, hi_l): the cell's bounds on band and lam narrowed by seller i
    reporting p with status st (2 capped: band >= p; 1 band: band <= p <= lam; 0 out:
    lam <= p)."""
    if st == 2:
        return max(t_lo, p), t_hi, lam_lo, lam_hi
    if st == 1:
        return t_lo, min(t_hi, p), max(lam_lo, p), lam_hi
    return t_lo, t_hi, lam_lo, min(lam_hi, p)


@njit(**_JIT)
def _moved_cell(Nc, SC, N, mean, M2, xs_, xi, st, p):
    """The cell's (Nc, SC, N, mean, M2) once seller i leaves its place xs_ (value xi)
    in the full market's cell and joins it at p with status st (Welford both ways)."""
    # seller i leaves its place in the full market's cell ...
    if xs_ == 2:
        Nc -= 1.0
        SC -= xi
    elif xs_ == 1:
        if N <= 1.0:
            N, mean, M2 = 0.0, 0.0, 0.0
        else:
            N1 = N - 1.0
            m1_ = mean - (xi - mean) / N1
            M2 = max(M2 - (xi - mean) * (xi - m1_), 0.0)
            N, mean = N1, m1_
    # ... and joins it at p (Welford)
    if st == 2:
        Nc += 1.0
        SC += p
    elif st == 1:
        N1 = N + 1.0
        d = p - mean
        mean += d / N1
        M2 += d * (p - mean)
        N = N1
    return Nc, SC, N, mean, M2


@njit(**_JIT)
def _root_margins(st, p, lam, band, lam_lo, lam_hi, t_lo, t_hi):
    """The six bound margins of a root: lam - v_n, v_{n+1} - lam, band - v_c,
    v_{c+1} - band, and seller i's two (see ``_capped_column``)."""
    a0, a1, a2, a3 = lam - lam_lo, lam_hi - lam, band - t_lo, t_hi - band
    if st == 2:
        b0, b1 = band - p, _INF
    elif st == 1:
        b0, b1 = p - band, lam - p
    else:
        b0, b1 = p - lam, _INF
    return a0, a1, a2, a3, b0, b1


@njit(**_JIT)
def _eps_of_status(st, p, lam, eta, rho, kappa):
    """eps_i = eta a_i (Eq. 13, 003) with a_i = kappa at the cap, rho (lam - p)+ in
    the band, 0 out."""
    if st == 2:
        return eta * kappa
    if st == 1:
        return eta * rho * max(lam - p, 0.0)
    return 0.0


@njit(**_JIT)
def _capped_column(
    Nc, SC, N, mean, M2, xs_, xi, st, p, lam_lo, lam_hi, t_lo, t_hi, kappa, s, sigma, vlast, full
):
    """One cell with seller i (true value xi, status xs_ in the full market's cell)
    reporting p with status st (0 out, 1 band, 2 capped).  Returns (tolerant loss,
    strict loss, eps_i of the strict root or else of the tolerant one, eps_i of the
    tolerant one, slack, and the eight margins whose least is the slack, of the root
    with the largest: lam - v_n, v_{n+1} - lam, band - v_c, v_{c+1} - band, seller i's
    two (p - lam out; p - band, lam - p in the band; band - p at the cap), x.a, u).
    Without ``full`` a cell whose bounds leave no room is skipped."""
    lo_t, hi_t, lo_l, hi_l = _report_bounds(st, p, lam_lo, lam_hi, t_lo, t_hi)
    lt, ls, es, et, slack = _INF, _INF, 0.0, 0.0, -_INF
    T = (-_INF, -_INF, -_INF, -_INF, -_INF, -_INF, -_INF, -_INF)
    if not full:
        room = 2e-11 * (abs(lo_l) + abs(mean) + 1e-300)
        if lo_l - hi_l > room or lo_t - hi_t > room:
            return lt, ls, es, et, slack, T
    Nc, SC, N, mean, M2 = _moved_cell(Nc, SC, N, mean, M2, xs_, xi, st, p)
    if not N > 0:
        return lt, ls, es, et, slack, T
    R = 1.0 - Nc * kappa
    if not R > 0:
        return lt, ls, es, et, slack, T
    V = M2 / N
    m1 = mean
    C1 = kappa * SC
    # the cell's cubic (Eq. 14, 003, with the cap terms; as offline._cubic_coefficients)
    A = s * N * (1 + Nc * kappa**2 * N / R**2)
    pc = s * N * V - C1 - R * m1
    q = R * V
    if not full and not _may_hold_root(A, pc, q, m1, lo_l, hi_l, lo_t, hi_t, kappa * N / R, vlast):
        return lt, ls, es, et, slack, T
    u0, u1 = positive_roots(A, pc, q)
    for r in range(2):
        u = u0 if r == 0 else u1
        if not u > 0:
            continue
        u = _polish(A, pc, q, u)
        lam = m1 + u
        band = lam - kappa * N * u / R
        lin = C1 + R * (m1 * u - V) / u
        a0, a1, a2, a3, b0, b1 = _root_margins(st, p, lam, band, lam_lo, lam_hi, t_lo, t_hi)
        margin = min(min(min(a0, a1), min(a2, a3)), min(min(b0, b1), min(lin, u)))
        if not math.isfinite(margin):
            continue
        if margin > slack:
            slack = margin
            T = (a0, a1, a2, a3, b0, b1, lin, u)
        tol = 1e-11 * (abs(lam) + abs(m1) + 1e-300)  # as offline._cell_candidates
        if not (
            lam > lo_l - tol
            and lam <= hi_l + tol
            and band >= lo_t - tol
            and band < hi_t + tol
            and lin > 0
        ):
            continue
        rho = R / (N * u)
        loss = math.sqrt(Nc * kappa**2 + rho * rho * N * (u * u + V)) + 2 * math.sqrt(s * lin)
        eta = math.sqrt(sigma / lin)  # Eq. 13 (003): eps_i = eta a_i
        e = _eps_of_status(st, p, lam, eta, rho, kappa)
        if loss < lt:
            lt, et = loss, e
        if margin >= 0 and loss < ls:
            ls, es = loss, e
    if ls == _INF:
        es = et
    return lt, ls, es, et, slack, T


@njit(**_JIT)
def _greedy_moved(xi, p, v, Nw, U, g, P, h0, kappa, s, sigma):
    """The greedy allocation (``offline._greedy``) of the market in which the seller of
    value xi reports p: (loss / mu, eps_i, 1 if i is at the cap, 2 if marginal, 0 if
    not bought, x.a).  Its marginal value is one of the groups g-1..g+2 of the full
    market or p; P[h - h0] = sum of the values of the groups below group h."""
    target = 1.0 - 1e-12
    vm, w_m, cnt_m, idx = _INF, 0.0, 0.0, -1
    h_lo, h_hi = max(g - 1, 0), min(g + 3, U)
    for h in range(h_lo, h_hi):
        val = v[h]
        cnt = Nw[h + 1] - (1.0 if xi <= val else 0.0) + (1.0 if p <= val else 0.0)
        w = Nw[h + 1] - Nw[h] - (1.0 if xi == val else 0.0) + (1.0 if p == val else 0.0)
        if w > 0 and cnt * kappa >= target:
            vm, w_m, cnt_m, idx = val, w, cnt, h
            break
    if p < vm and p > v[h_lo]:  # p between groups of the window (equal: counted above)
        hp = h_lo + 1
        while hp < h_hi and v[hp] < p:
            hp += 1
        if v[hp - 1] != p:
            cnt = Nw[hp] - (1.0 if xi <= p else 0.0) + 1.0
            if cnt * kappa >= target:
                vm, w_m, cnt_m, idx = p, 1.0, cnt, hp
    if idx < 0 or idx - h0 >= P.size:
        return _INF, 0.0, 0, 0.0
    n_lt = cnt_m - w_m
    below = P[idx - h0] - (xi if xi < vm else 0.0) + (p if p < vm else 0.0)
    share = (1.0 - n_lt * kappa) / w_m
    lin = kappa * below + share * w_m * vm
    norm = math.sqrt(kappa**2 * n_lt + share**2 * w_m)
    loss = norm + 2 * math.sqrt(s * max(lin, 0.0))
    eta = math.sqrt(sigma / lin) if lin > 0 else _INF
    if p < vm:
        return loss, eta * kappa, 1, lin
    if p == vm:
        return loss, eta * share, 2, lin
    return loss, 0.0, 0, lin


@njit(**_JIT)
def _capped_table(
    x, z, target, canonical, fast, lam_lo, lam_hi, t_lo, t_hi, Nc, SC, Nb, mb, M2b, stair,
    kappa, s, sigma, vlast, lt, ls, ec, sl, T,
):  # fmt: skip
    """Fill, for one row, each column's tolerant and strict loss, eps_i and slack (see
    ``capped_rows``), and T with the eight margins of column ``target`` (if >= 0)."""
    K = lam_lo.size
    for j in range(lt.size):
        lt[j], ls[j], ec[j], sl[j] = _INF, _INF, 0.0, -_INF
    for t in range(8):
        T[t] = -_INF
    for q in range(K):
        if fast and not stair[q]:
            continue
        if x <= t_lo[q]:
            xs_ = 2
        elif x <= lam_lo[q]:
            xs_ = 1
        else:
            xs_ = 0
        for st in range(3):
            if fast and st != 2:
                continue
            j = 2 * q + st
            is_target = st > 0 and j == target
            a_t, a_s, e_s, e_t, slk, Tc = _capped_column(
                Nc[q], SC[q], Nb[q], mb[q], M2b[q], xs_, x, st, z,
                lam_lo[q], lam_hi[q], t_lo[q], t_hi[q], kappa, s, sigma, vlast, is_target,
            )  # fmt: skip
            if st == 0:
                lt[0] = min(lt[0], a_t)
                ls[0] = min(ls[0], a_s)
                continue
            lt[j], ls[j], sl[j] = a_t, a_s, slk
            ec[j] = e_s if canonical else e_t
            if is_target:
                for t in range(8):
                    T[t] = Tc[t]


@njit(**_JIT)
def _least(a, n):
    """(least value, first index of it) of a[:n]; (inf, 0) if all are inf."""
    best, at = _INF, 0
    for j in range(n):
        if a[j] < best:
            best, at = a[j], j
    return best, at


@njit(**_JIT)
def _approach(t, t2, h, scale):
    """A margin t (t2 a step h further) as the predicted distance to its zero, t / |slope|,
    within +-scale (the scale where it is positive and does not fall; sign kept)."""
    if not t > -_INF:
        return -_INF
    if t == _INF:
        return scale
    if not math.isfinite(t2):  # the root ends (a fold) within the step
        return min(t, scale) if t >= 0 else -scale
    slope = (t2 - t) / h
    if slope < 0:  # falling: about the signed distance to its zero on either side
        return max(min(t / -slope, scale), -scale)
    return scale if t >= 0 else max(t, -scale)


@njit(**_JIT)
def _step_ahead(z, vlast):
    """(z + h, h, scale): the report a step h = 1e-7 scale ahead, for the margins' slopes."""
    scale = abs(z) + abs(vlast) + 1e-300
    h = 1e-7 * scale
    return z + h, h, scale


@njit(**_JIT)
def _greedy_margin(j, ncol, gcol, LG, LG2, cut, lt2, tie, h, scale):
    """The margin of greedy piece j (>= ncol): how far the greedy allocation's loss LG
    stays below every cell's tolerant loss (``cut``; lt2 and LG2 a step h ahead)."""
    best2 = _INF
    for jj in range(ncol):
        best2 = min(best2, lt2[jj])
    cut2 = best2 - tie * abs(best2) if best2 < _INF else _INF
    if j - ncol + 1 != gcol or not LG < _INF:
        return -_INF
    if cut == _INF:
        return _INF
    return _approach(cut - LG, cut2 - LG2, h, scale)


@njit(**_JIT)
def _cell_margin(j, ncol, LG, LG2, ls, ls2, T, T2, tie, h, scale):
    """The margin of cell column j: min of its root's eight margins T and its strict
    loss's gaps to the other columns and to the greedy loss LG (ls2, T2, LG2 a step h
    ahead), each as ``_approach``'s distance."""
    own, own2 = ls[j], ls2[j]
    m = _INF
    for t in range(8):
        m = min(m, _approach(T[t], T2[t], h, scale))
    if own < _INF and own2 < _INF:  # (else the slack above falls to 0 first)
        for jj in range(ncol):
            if jj != j and ls[jj] < _INF:
                m = min(m, _approach(ls[jj] - own, ls2[jj] - own2, h, scale))
        if LG < _INF:
            gap, gap2 = LG - own + tie * abs(own), LG2 - own2 + tie * abs(own2)
            m = min(m, _approach(gap, gap2, h, scale))
    elif own == _INF and m >= 0:
        m = -_INF
    return m


@njit(**_JIT)
def _chosen_column(LG, cut, glin, eg, gcol, ncol, best_t, jt, best_s, js, ec, canonical, tie):
    """(eps_i, column) of a row: the greedy allocation where it beats every cell's
    tolerant loss by more than rounding, else the least strict (``canonical``, within
    ``tie``) or tolerant loss; see ``capped_rows`` for the flags -1, -2, -3."""
    if LG < cut:
        if not glin > 0:
            return 0.0, -3
        return eg, (ncol - 1 + gcol if (gcol > 0 and eg > 0) else -1)
    if best_t == _INF:
        return 0.0, -2
    if canonical and best_s <= best_t + tie * abs(best_t):
        jj = js
    else:
        jj = jt
    e = ec[jj] if jj > 0 else 0.0
    return e, (jj if e > 0 else -1)


@njit(**_JIT)
def capped_rows(
    xi, p, target, margin_mode, canonical, lam_lo, lam_hi, t_lo, t_hi, Nc, SC, Nb, mb, M2b,
    stair, v, Nw, g, P, h0, kappa, s, sigma, vlast, vcmin, lam_top, tie,
    out_eps, out_col, out_margin,
):  # fmt: skip
    """Seller i's eps_i and the label of its smooth piece (or, with ``margin_mode``, a
    margin of piece ``target``: >= 0 where it is the optimum) for each row (true value
    xi, report p); see ``payments._CappedOracle``.  Columns: 0 not bought, 1 + 2q /
    2 + 2q seller i in the band / at the cap of kept cell q, 1 + 2K / 2 + 2K at the cap /
    marginal in the greedy allocation (used only where it beats every cell by more
    than rounding: where it is a KKT point a cell holds it too).  out_col = -2 flags a
    row with no KKT point and no greedy allocation, -3 a greedy optimum with x.a = 0.

    The margin is min(slack of the piece's root, loss gaps to the other columns), each
    term divided by how fast it falls (a step h ahead): near a change of piece it is
    about the distance to it, which regula falsi finds in a few steps."""
    K = lam_lo.size
    ncol = 1 + 2 * K
    U = v.size
    lt, ls, ec, sl = np.empty(ncol), np.empty(ncol), np.empty(ncol), np.empty(ncol)
    lt2, ls2, ec2, sl2 = np.empty(ncol), np.empty(ncol), np.empty(ncol), np.empty(ncol)
    T, T2 = np.empty(8), np.empty(8)
    for r in range(xi.size):
        x, z = xi[r], p[r]
        if z == _INF:  # psi = +inf: never bought
            out_eps[r], out_col[r], out_margin[r] = 0.0, -1, -_INF
            continue
        LG, eg, gcol, glin = _greedy_moved(x, z, v, Nw, U, g, P, h0, kappa, s, sigma)
        if not margin_mode and z > lam_top * (1 + 1e-9) + 1e-300 and gcol == 0:
            out_eps[r], out_col[r] = 0.0, -1  # beyond every kept cut-off
            continue
        fast = x < vcmin and z < vcmin  # seller i at the cap wherever it can be
        j = target[r] if margin_mode else -1
        _capped_table(
            x, z, j, canonical, fast, lam_lo, lam_hi, t_lo, t_hi, Nc, SC, Nb, mb, M2b,
            stair, kappa, s, sigma, vlast, lt, ls, ec, sl, T,
        )  # fmt: skip
        (best_t, jt), (best_s, js) = _least(lt, ncol), _least(ls, ncol)
        cut = best_t - tie * abs(best_t) if best_t < _INF else _INF
        if margin_mode:
            z2, h, scale = _step_ahead(z, vlast)
            LG2 = _greedy_moved(x, z2, v, Nw, U, g, P, h0, kappa, s, sigma)[0]
            fast2 = x < vcmin and z2 < vcmin
            _capped_table(
                x, z2, j, canonical, fast2, lam_lo, lam_hi, t_lo, t_hi, Nc, SC, Nb, mb,
                M2b, stair, kappa, s, sigma, vlast, lt2, ls2, ec2, sl2, T2,
            )  # fmt: skip
            if j >= ncol:  # a greedy piece: the greedy allocation must stay ahead
                out_margin[r] = _greedy_margin(j, ncol, gcol, LG, LG2, cut, lt2, tie, h, scale)
            else:
                out_margin[r] = _cell_margin(j, ncol, LG, LG2, ls, ls2, T, T2, tie, h, scale)
            continue
        out_eps[r], out_col[r] = _chosen_column(
            LG, cut, glin, eg, gcol, ncol, best_t, jt, best_s, js, ec, canonical, tie
        )


# ---- the uncapped payment oracle (``payments._UncappedOracle``) -----------------------
@njit(**_JIT)
def _uncapped_table(x, z, vn, vnext, NwK, S1K, S2K, ref, s, sigma, canonical, lt, ls, ec, sl):
    """One row of ``payments._UncappedOracle._table`` (same arithmetic, same order):
    per column tolerant and strict loss, eps_i and slack."""
    K = vn.size
    for j in range(K + 1):
        lt[j], ls[j], ec[j], sl[j] = _INF, _INF, 0.0, -_INF
    yi = x - ref if math.isfinite(x) else 0.0
    yp = z - ref
    for q in range(K):
        v_n, v_next = vn[q], vnext[q]
        inside = 1.0 if x <= v_n else 0.0
        N0 = NwK[q] - inside
        S10 = S1K[q] - inside * yi
        S20 = S2K[q] - inside * yi * yi
        es_q, ls_q, lt_q = 0.0, _INF, _INF
        et_q = 0.0
        for act in range(2):
            if act == 1:
                N, S1, S2 = N0 + 1, S10 + yp, S20 + yp * yp
                lo, hi = max(v_n, z), v_next
            else:
                N, S1, S2 = N0, S10, S20
                lo, hi = v_n, min(v_next, z)
            if not (N > 0 and hi > lo):
                continue
            d1 = S1 / N
            V = max(S2 / N - d1 * d1, 0.0)
            m1 = d1 + ref
            if act == 1 and N0 == 0:  # seller i alone: its own value, exactly
                m1, V = z, 0.0
            A = s * N
            # Eq. 14 (003): A u^3 + (A V - m1) u + V = 0, u = lam - mean of the active x
            u0, u1 = positive_roots(A, A * V - m1, V)
            for u in (u0, u1):
                if not u > 0:
                    continue
                lam = m1 + u
                tol = 1e-11 * (abs(lam) + abs(m1) + 1e-300)
                lin = m1 - V / u
                margin = min(min(lam - lo, hi - lam), min(lin, u))
                if not math.isfinite(margin):
                    margin = -_INF
                valid = lam > lo - tol and lam <= hi + tol and lin > 0
                loss = _INF
                if valid:  # Eq. 11 (003) at the root, over mu
                    loss = math.sqrt(u * u + V) / (math.sqrt(N) * u) + 2 * math.sqrt(s * lin)
                strict = loss if margin >= 0 else _INF
                if act == 0:
                    lt[0] = min(lt[0], loss)
                    ls[0] = min(ls[0], strict)
                    continue
                e = 0.0
                if lin > 0:  # Eq. 13 (003): eps_i = eta rho (lam - p)
                    e = math.sqrt(sigma / lin) * max(lam - z, 0.0) / (N * u)
                if loss < lt_q:
                    lt_q, et_q = loss, e
                if strict < ls_q:
                    ls_q, es_q = strict, e
                sl[q + 1] = max(sl[q + 1], margin)
        lt[q + 1], ls[q + 1] = lt_q, ls_q
        ec[q + 1] = es_q if (canonical and ls_q < _INF) else et_q


@njit(**_JIT)
def uncapped_rows(
    xi, p, target, margin_mode, canonical, vn, vnext, NwK, S1K, S2K, ref, s, sigma, tie,
    out_eps, out_col, out_margin,
):  # fmt: skip
    """``payments._UncappedOracle`` compiled: per row (true value xi, report p) eps_i and
    its piece (2 j - 1 for column j, -1 not bought, -2 no KKT point, -3 no KKT point at
    p <= 0), or with ``margin_mode`` the margin of piece ``target`` (>= 0 where it is
    the optimum)."""
    ncol = vn.size + 1
    lt, ls, ec, sl = np.empty(ncol), np.empty(ncol), np.empty(ncol), np.empty(ncol)
    for r in range(xi.size):
        z = p[r]
        _uncapped_table(
            xi[r], z, vn, vnext, NwK, S1K, S2K, ref, s, sigma, canonical, lt, ls, ec, sl
        )
        if margin_mode:
            j = (target[r] + 1) // 2
            own = ls[j]
            if not own < _INF:
                gap = -_INF
            else:
                other = _INF
                for jj in range(ncol):
                    if jj != j:
                        other = min(other, ls[jj])
                gap = other - own
            out_margin[r] = sl[j] if sl[j] < 0 else min(sl[j], gap)
            continue
        (best_t, jt), (best_s, js) = _least(lt, ncol), _least(ls, ncol)
        if not best_t < _INF and z != _INF:
            out_eps[r], out_col[r] = 0.0, (-2 if z > 0 else -3)
            continue
        if not canonical:
            jj = jt
        elif best_s <= best_t + tie * abs(best_t):
            jj = js
        else:
            jj = jt
        e = ec[jj] if jj > 0 else 0.0
        out_eps[r] = e
        out_col[r] = 2 * jj - 1 if e > 0 else -1
