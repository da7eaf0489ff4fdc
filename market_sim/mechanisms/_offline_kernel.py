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
