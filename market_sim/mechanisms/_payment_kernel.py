"""Compiled kernels of the offline mechanism's payment oracles (``payments._CappedOracle``
and ``payments._UncappedOracle``): seller i's allocation at its own report with the
others fixed, per (seller, report) row, by the same arithmetic as the numpy references
in ``payment_oracles`` (the tests hold them to 1e-13).  They share the solver's scalar
kernels (``_offline_kernel``: cubic roots, cell losses, groups); the oracles reach
them through ``payment_oracles._payment_kernels`` once ``offline._kernel()`` works.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

from ._offline_kernel import (
    _INF,
    _JIT,
    _add,
    _g_changes_sign,
    cstar,
    positive_roots,
)
from ._offline_kernel import greedy_group as greedy_group  # the capped oracle's, re-exported


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
