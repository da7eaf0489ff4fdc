"""The payment oracles of the offline mechanism: seller i's allocation eps_i(z) at its own
report z with the others fixed (``market_sim.mechanisms.payments``' module docstring).

* ``_UncappedOracle``: without a cap, the few segments of Eq. 14 (003) where a moved
  seller can create a stationary point, searched in O(1) per evaluation (compiled
  ``_payment_kernel.uncapped_rows`` or its numpy reference ``_table``);
* ``_CappedOracle``: with a cap (k given), a few cells of the full market near its
  optimum in (tau, lam), their cubics solved per evaluation;
* ``_ResolveOracle``: the whole market solved again (the reference).

Each returns (eps, cell) per (seller, report) row; ``payments`` integrates eps over the
pieces where the cell is constant.
"""

from __future__ import annotations

import math

import numpy as np

from ..errors import MarketSimError
from .offline import _Groups, _positive_roots, solve

_SECTIONS = 15  # points per step of the search for piece ends
_TIE = 1e-12  # relative loss difference taken for a tie of two cells
# Seller alone: a cell where seller i is the only active seller has mean m1 = p and
# variance 0, taken as such: from the prefix sums shifted by the least value ref,
# m1 = (p - ref) + ref rounds a report p below ulp(ref) to 0 (then no KKT point is
# found, and every such report fell back to a full solve: the audit's floor
# candidates, 1e-300 <= p < 4e-18).


def _payment_kernels(solver_kernels):
    """The compiled payment-oracle kernels (module ``_payment_kernel``) when the solver's
    compiled kernels work (``solver_kernels``: ``offline._kernel()``, not None), else None."""
    if solver_kernels is None:
        return None
    from . import _payment_kernel

    return _payment_kernel


def _rows(kernel, xi, p, target, margin_mode, *args):
    """Call a compiled oracle (``uncapped_rows`` / ``capped_rows``) on the rows (xi, p):
    (eps, cell, margin) arrays."""
    n = xi.size
    out = np.empty(n), np.empty(n, np.int64), np.empty(n)
    as_float = lambda a: np.ascontiguousarray(a, dtype=float)  # noqa: E731
    target = np.ascontiguousarray(target, dtype=np.int64)
    kernel(as_float(xi), as_float(p), target, margin_mode, *args, *out)
    return out


#: The cell label of a report of value 0 in a market whose outcome is the zero-cost
#: limit (``offline._zero_cost_limit``): eps_i = +inf there, at that one report.
ZERO_LIMIT = -4

_PSI_ZERO = (
    "no optimum when a seller reports virtual cost 0 (the bottom "
    "of a support that starts at 0) and can absorb all the weight"
)


class _UncappedOracle:
    """eps_i when seller i (truthful value x_i = gamma psi_i) reports value p >= x_i
    (or p >= ``floor``: the segments kept allow for the lower reports)."""

    sections = _SECTIONS  # vectorised: many points per step of the piece search

    def __init__(
        self,
        x: np.ndarray,
        mu: float,
        sigma: float,
        canonical: bool = True,
        floor: float = np.inf,
        kernel=None,
    ):
        self.mu, self.sigma = mu, sigma
        # the compiled ``uncapped_rows`` (given the solver's kernels), or None: numpy ``_table``
        self.kernel = _payment_kernels(kernel)
        self.canonical = canonical
        self.s = sigma / mu**2
        G = _Groups.of(np.sort(x))
        self.G = G
        U = len(G.v)
        n = np.arange(1, U + 1)
        N = G.Nw[n]
        d1 = G.S1[n] / N
        V = np.maximum(G.S2[n] / N - d1 * d1, 0.0)
        m1 = d1 + G.ref
        v_n, v_next = G.value(n), G.value(n + 1)
        s = self.s
        with np.errstate(all="ignore"):
            uL, uR = v_n - m1, v_next - m1
            phi = lambda u: m1 - np.where(V > 0, V / u, 0.0) - s * N * (u * u + V)  # noqa: E731
            phiL = np.where(uL > 0, phi(uL), np.where(V > 0, -np.inf, m1))
            phiR = np.where(np.isfinite(uR), phi(uR), -np.inf)
            ust = np.cbrt(V / (2 * s * N))
            inside = (ust > uL) & (ust < uR)
            phimax = np.where(inside, phi(ust), np.maximum(phiL, phiR))
            phimin = np.minimum(phiL, phiR)
            # a seller may also move down to ``floor`` (a report below its own)
            Lr = v_next - min(G.v[0], floor)
            WL = N * uL
            delta = np.where(WL > Lr, s * Lr * Lr + 2 * Lr * Lr / (WL - Lr), np.inf)
        slack = 1e-9 * (np.abs(phimin) + np.abs(phimax) + np.abs(m1))
        keep = ~((phimin > delta + slack) | (phimax < -delta - slack))
        self.K = n[keep]
        if floor < G.v[0]:  # a seller moved below everybody may be bought alone (n = 0)
            self.K = np.concatenate(([0], self.K))
        K = self.K
        self.vn, self.vnext = G.value(K).astype(float), G.value(K + 1).astype(float)
        self.NwK, self.S1K, self.S2K = G.Nw[K], G.S1[K], G.S2[K]
        # a seller whose true value lies above every kept bounded segment (x_i > v_n) is
        # in none of their sums, so its eps_i(p) does not depend on x_i (``OfflineCurves``
        # shares one curve among such sellers).  The unbounded top segment (everybody
        # bought, lam > max x) is left out: its root would buy those sellers too, and it is
        # kept only because the bound delta is infinite there.
        finite = np.isfinite(self.vnext)
        self.independent_above = float(self.vn[finite].max()) if finite.any() else np.inf
        # sellers of value 0 in the full market (their limit outcome, ``_zero_limit``)
        self.w0 = float(G.w[0]) if G.v[0] == 0 else 0.0

    def _run(self, xi, p, target, margin_mode):
        """The compiled oracle (``_payment_kernel.uncapped_rows``)."""
        consts = (self.vn, self.vnext, self.NwK, self.S1K, self.S2K, self.G.ref, self.s)
        return _rows(self.kernel.uncapped_rows, xi, p, target, margin_mode, self.canonical,
                     *consts, self.sigma, _TIE)  # fmt: skip

    def _table(self, xi: np.ndarray, p: np.ndarray):
        """Per row (seller value xi reporting p) and label: losses, eps_i, slack.

        Column 0 is "seller i not bought" (the best such KKT point over all
        segments), column 1 + j is segment K[j] with seller i active.  Returns
        (loss, strict, eps, slack), each (rows, 1 + |K|): ``loss`` is the least
        loss of a root valid up to the rounding tolerance (inf if none),
        ``strict`` the same over roots valid exactly (lam inside its segment,
        lam > p for an active seller) and ``eps`` eps_i of that strict root (of
        the tolerant one if none, or always with ``canonical`` off).  ``slack`` >= 0
        exactly when a strict root exists: its least margin to the cell's bounds, -inf
        if no root exists.
        """
        G, s, K = self.G, self.s, self.K
        xi = xi[:, None]
        p = p[:, None]
        v_n, v_next = self.vn[None, :], self.vnext[None, :]
        inside = xi <= v_n  # seller i is in the full market's active set of segment K
        yi, yp = np.where(np.isfinite(xi), xi - G.ref, 0.0), p - G.ref
        N0 = self.NwK[None, :] - inside
        S10 = self.S1K[None, :] - inside * yi
        S20 = self.S2K[None, :] - inside * yi * yi
        rows = xi.shape[0]
        shape = (rows, 1 + K.size)
        loss_t, loss_s = np.full(shape, np.inf), np.full(shape, np.inf)
        eps_t, eps_s = np.zeros(shape), np.zeros(shape)
        slack = np.full(shape, -np.inf)
        for active in (False, True):
            N, S1, S2 = (N0 + 1, S10 + yp, S20 + yp * yp) if active else (N0, S10, S20)
            lo = np.maximum(v_n, p) if active else v_n
            hi = v_next if active else np.minimum(v_next, p)
            with np.errstate(all="ignore"):
                d1 = S1 / N
                V = np.maximum(S2 / N - d1 * d1, 0.0)
                m1 = d1 + G.ref
                if active:  # seller i alone: m1 = p, V = 0 exactly (note "Seller alone" above)
                    alone = N0 == 0
                    m1, V = np.where(alone, p, m1), np.where(alone, 0.0, V)
                A = s * N
                good = (N > 0) & (hi > lo)
                # Eq. 14 (003): A u^3 + (A V - m1) u + V = 0, u = lam - mean of the active x
                roots = _positive_roots(
                    np.where(good, A, 1.0), np.where(good, A * V - m1, 1.0), np.where(good, V, 0.0)
                )
            for u in roots:
                with np.errstate(all="ignore"):
                    lam = m1 + u
                    tol = 1e-11 * (np.abs(lam) + np.abs(m1) + 1e-300)  # as offline
                    lin = m1 - V / u
                    valid = good & (u > 0) & (lam > lo - tol) & (lam <= hi + tol) & (lin > 0)
                    # Eq. 11 (003) at the root, over mu
                    loss = np.sqrt(u * u + V) / (np.sqrt(N) * u) + 2 * np.sqrt(s * lin)
                    margin = np.minimum(np.minimum(lam - lo, hi - lam), np.minimum(lin, u))
                    # (not masked by ``good``: the branch is continued past its segment)
                    margin = np.where((N > 0) & np.isfinite(margin), margin, -np.inf)
                    lt = np.where(valid, loss, np.inf)
                    ls = np.where(valid & (margin >= 0), loss, np.inf)
                    if active:  # Eq. 13 (003): eps_i = eta rho (lam - p)
                        e = np.sqrt(self.sigma / lin) * np.maximum(lam - p, 0.0) / (N * u)
                if not active:
                    loss_t[:, 0] = np.minimum(loss_t[:, 0], lt.min(axis=1))
                    loss_s[:, 0] = np.minimum(loss_s[:, 0], ls.min(axis=1))
                    continue
                bt, bs = lt < loss_t[:, 1:], ls < loss_s[:, 1:]
                loss_t[:, 1:] = np.where(bt, lt, loss_t[:, 1:])
                eps_t[:, 1:] = np.where(bt, e, eps_t[:, 1:])
                loss_s[:, 1:] = np.where(bs, ls, loss_s[:, 1:])
                eps_s[:, 1:] = np.where(bs, e, eps_s[:, 1:])
                slack[:, 1:] = np.maximum(slack[:, 1:], margin)
        if self.canonical:
            eps_t = np.where(np.isfinite(loss_s), eps_s, eps_t)
        return loss_t, loss_s, eps_t, slack

    def _pick(self, loss_t, loss_s):
        """The optimal column per row: among exactly valid roots unless a root
        valid only up to the tolerance is better by more than rounding (then
        two adjacent cells describe one KKT point, and the one that contains
        it exactly is named, so the label does not flicker near a piece end)."""
        if not self.canonical:  # the former rule: least tolerant loss, "not bought" first
            return np.argmin(loss_t, axis=1)
        best_t = loss_t.min(axis=1)
        best_s = loss_s.min(axis=1)
        use_s = best_s <= best_t + _TIE * np.abs(best_t)
        return np.where(use_s, np.argmin(loss_s, axis=1), np.argmin(loss_t, axis=1))

    def eps(self, sellers, xi: np.ndarray, p: np.ndarray):
        """Vectorised over sellers: arrays xi (truthful values) and p (reported);
        ``sellers`` (their indices) is not needed here.

        Returns (eps_i, cell): cell identifies the smooth piece eps_i is on
        (-1 when seller i is not bought)."""
        if self.kernel is not None:
            e, col, _ = self._run(xi, p, np.zeros(xi.size, np.int64), False)
        else:
            loss_t, loss_s, eps, _ = self._table(xi, p)
            j = self._pick(loss_t, loss_s)
            e = np.where(j > 0, eps[np.arange(xi.shape[0]), j], 0.0)
            col = np.where(e > 0, 2 * j - 1, -1)
            # a report with psi = +inf is never bought, even when nobody else is there
            lost = ~(np.isfinite(loss_t.min(axis=1)) | np.isposinf(p))
            col = np.where(lost, np.where(p > 0, -2, -3), col)
        zl = self._zero_limit(xi, p)
        if zl is not None:  # rows whose moved market has sellers of value 0
            rows, deg, ek, ck = zl
            e[rows] = np.where(deg, np.where(p[rows] == 0, np.inf, 0.0), ek)
            col[rows] = np.where(deg, np.where(p[rows] == 0, ZERO_LIMIT, -1), ck)
        if np.any(col == -3):  # (cannot happen: a row with no KKT point at p = 0 is a limit)
            raise MarketSimError(_PSI_ZERO)
        for r in np.flatnonzero(col == -2):
            e[r], col[r] = self._resolve(xi[r], p[r])
        return e, col

    def _zero_limit(self, xi, p):
        """The rows whose moved market has w0 >= 1 sellers of value 0, with, per row,
        whether its outcome is the zero-cost limit (``offline._zero_cost_limit``: no
        KKT point beats the infimum 1 / sqrt(w0) of loss / mu, as ``solve`` decides)
        and eps_i, cell by the numpy table (these rows are rare).  None if no row."""
        w0 = self.w0 - (xi == 0) + (p == 0)
        rows = np.flatnonzero(w0 >= 1)
        if not rows.size:
            return None
        loss_t, loss_s, eps, _ = self._table(xi[rows], p[rows])
        deg = ~(loss_t.min(axis=1) < 1.0 / np.sqrt(w0[rows]))
        j = self._pick(loss_t, loss_s)
        ek = np.where(j > 0, eps[np.arange(rows.size), j], 0.0)
        return rows, deg, ek, np.where(ek > 0, 2 * j - 1, -1)

    def _resolve(self, xi: float, p: float) -> tuple[float, int]:
        """(eps_i, cell) of one row by an exact solve of the moved market, for a row where
        no kept segment has a root valid to the tolerance: where seller i is within
        ~1e-10 of marginal at an extreme sigma / mu^2 (1e16), the variance of the few
        active values, from prefix sums, loses most of its digits and the two branches
        (i active, i not) both miss their segment.  Labelled by the segment holding lam."""
        xs = self.G.xs
        j = int(np.searchsorted(xs, xi))
        moved = np.concatenate((np.delete(xs, min(j, xs.size - 1)), [p]))
        res = solve(moved, mu=self.mu, sigma=self.sigma, gamma=1.0)
        e = float(res.eps[-1])
        if not e > 0:
            return 0.0, -1
        holds = (self.vn <= res.lam) & (res.lam <= self.vnext)
        if not holds.any():
            raise RuntimeError("payment oracle found no KKT point; please report this market")
        return e, 2 * (int(np.argmax(holds)) + 1) - 1

    def margin(self, xi: np.ndarray, p: np.ndarray, cell: np.ndarray) -> np.ndarray:
        """A function of p, continuous where cell ``cell`` (from :meth:`eps`) has a
        root, >= 0 where that cell is the optimum and < 0 where it is not:
        min(slack of the cell, least loss of the other cells - loss of the cell),
        over exactly valid roots.  Its zero is the change of piece (``_illinois``)."""
        w0 = self.w0 - (xi == 0) + (p == 0)
        deg = np.flatnonzero(w0 >= 1)  # the zero-cost limit competes (``_zero_limit``)
        if self.kernel is None:
            return self._margin_table(xi, p, cell, w0)
        out = self._run(xi, p, cell, True)[2]
        if deg.size:
            out[deg] = self._margin_table(xi[deg], p[deg], cell[deg], w0[deg])
        return out

    def _margin_table(self, xi, p, cell, w0):
        """:meth:`margin` by the numpy table, the zero-cost limit's loss 1 / sqrt(w0)
        among the other cells' (rows with w0 >= 1)."""
        _, loss_s, _, slack = self._table(xi, p)
        limit = np.where(w0 >= 1, 1.0 / np.sqrt(np.maximum(w0, 1.0)), np.inf)
        rows = np.arange(xi.shape[0])
        j = (cell + 1) // 2
        own = loss_s[rows, j]
        loss_s[rows, j] = np.inf
        with np.errstate(invalid="ignore"):
            other = np.minimum(loss_s.min(axis=1), limit)
            gap = np.where(np.isfinite(own), other - own, -np.inf)
        sl = slack[rows, j]
        return np.where(sl < 0, sl, np.minimum(sl, gap))


class _CappedOracle:
    """eps_i with the cap a_i <= kappa = k/m, when seller i (true value x_i) reports
    value p, from the few cells of the full market that can hold a KKT point of any
    market in which one seller moved (the pruned oracle with a cap).

    Why the pruning is exact.  By Eq. 13 (003) with the cap (``offline``), a KKT
    point of Eq. 11 (003) is a_j = kappa D_j / tau with d_j = (lam - x_j)^+ and
    D_j = min(tau, d_j): sellers below lam - tau are at the cap, a band below the
    cut-off lam is linear in x.  It satisfies, with Q = 1/kappa and s = sigma/mu^2,

        (C)    S(lam, tau) = sum_j D_j = Q tau                          (sum_j a_j = 1)
        (Psi)  Psi(lam, tau) = lam - s sum_j D_j^2 - sum_j d_j D_j / (Q tau) = 0

    ((Psi) is the stationarity in eta, rho^2 x.a = s ||a||^2 with rho = kappa/tau;
    without capped sellers it is Eq. 14, 003).  Moving one seller's value changes
    one term of each sum: S by at most tau, sum D^2 by at most min(tau, L)^2 and
    sum d D / (Q tau) by at most L/Q, L = lam - the lowest value a seller may
    report.  So a KKT point of any moved market satisfies, in the full market's S
    and Psi,

        (C')   (Q - 1) tau <= S(lam, tau) <= (Q + 1) tau, i.e. tau_lo(lam) <= tau <= tau_hi(lam),
        (Psi') |Psi(lam, tau)| <= s min(tau, L)^2 + L / Q,

    where tau_lo, tau_hi are the full market's band widths (roots of (C)) with Q + 1
    and Q - 1 in place of Q: S/tau is non-increasing in tau, and S increases with
    lam, so both are non-decreasing in lam.  A cell of the full market (c capped
    groups, n groups bought) is the box v_n < lam <= v_{n+1}, v_c <= lam - tau <
    v_{c+1}; there sum D^2 is non-decreasing in lam and tau, and sum d D / (Q tau)
    non-decreasing in lam and non-increasing in tau, so Psi is bounded by its values
    at the box's corners, and a cell is dropped when (C') and (Psi') leave it no
    room.  Also dropped, before: a cut-off with at most Q sellers below it in every
    moved market ((C) then leaves no band: the greedy allocation, which is computed
    for every moved market too), and cut-offs above lam_end, beyond which Psi < 0
    (tau > lam - max x, and sum D^2 >= ((Q - 1) tau)^2 / M by Cauchy-Schwarz).

    Each evaluation solves the cubic of every kept cell (as ``offline.solve``) with
    seller i out, in the band or at the cap, and takes the least loss, or the greedy
    allocation when no cell beats it (as ``solve``).  The kept cells' moments are
    summed exactly once; seller i's move updates them (Welford).  When x_i and p lie
    below every kept cell's band, seller i is at the cap in all of them, S does not
    change, and a KKT point lies on the full market's own staircase: only the cells
    ``solve`` itself would try are solved.  Compiled (numba); without it payments
    with a cap fall back to ``_ResolveOracle``.
    """

    sections = _SECTIONS

    def __init__(self, K, x, m, k, mu, sigma, canonical=True, floor=np.inf):
        self.K, self.canonical = _payment_kernels(K), canonical
        K = self.K
        self.sigma = sigma
        self.kappa = kappa = float(k) / m
        self.s = s = sigma / mu**2
        Q = 1.0 / kappa
        G = _Groups.of(np.sort(x))
        U = len(G.v)
        c, n = _capped_cells(K, G, Q, s, min(G.v[0], floor), x.size < m)
        self.ncells = c.size
        # cells sorted by n, then c descending (``cell_moments`` shares their work)
        order = np.lexsort((-c, n))
        c, n = c[order], n[order]
        val = lambda g: G.v[np.clip(g - 1, 0, U - 1)]  # noqa: E731  v_g, 1-based
        self.lam_lo = val(n)
        self.lam_hi = np.where(n < U, val(n + 1), np.inf)
        self.t_lo = np.where(c > 0, val(c), -np.inf)
        self.t_hi = np.where(c < U, val(c + 1), np.inf)
        self.Nc, self.SC, self.Nb, self.mb, self.M2b = (np.empty(c.size) for _ in range(5))
        K.cell_moments(G.v, G.Nw, c, n, self.Nc, self.SC, self.Nb, self.mb, self.M2b)
        # the cells offline.solve would try (its staircase c*, +-1)
        cstar = {j: K.cstar(j, 0, G.v, G.Nw, G.S1, U, Q, G.ref) for j in {*n, *(n + 1)}}
        cs_a = np.array([cstar[j] for j in n], dtype=np.int64)
        cs_b = np.array([cstar[j + 1] for j in n], dtype=np.int64)
        self.stair = (c >= np.minimum(cs_a, cs_b) - 1) & (c <= np.maximum(cs_a, cs_b) + 1)
        self.vcmin = float(self.t_lo.min()) if c.size else -np.inf
        self.lam_top = float(self.lam_hi.max()) if c.size else -np.inf
        # beyond p_max seller i is bought by no kept cell nor by the greedy allocation
        # (its marginal value is one of the groups g-1..g+2 or the report itself)
        self.v, self.Nw, self.vlast = G.v, G.Nw, float(G.v[-1])
        # the greedy allocation: its group and the exact sums of the values below it
        self.g = g = int(K.greedy_group(G.Nw, U, kappa))
        self.h0 = h0 = max(g - 1, 0)
        w = np.diff(G.Nw)
        self.P = np.array([math.fsum(w[:h] * G.v[:h]) for h in range(h0, min(g + 4, U + 1))])
        # a seller below every kept cell's band is at the cap in all of them: its
        # moved markets differ only by the capped sum (``_smooth_integrals``)
        self.smooth_below = self.vcmin
        # (the report is the marginal value only below group g+2, if there is one)
        top = max(self.lam_top, float(G.v[g + 2]) if g + 2 < U else np.inf)
        self.p_max = top * (1 + 1e-9) + 1e-300 if top > 0 else top * (1 - 1e-9) + 1e-300

    def _run(self, xi, p, target, margin_mode):
        cells = (self.lam_lo, self.lam_hi, self.t_lo, self.t_hi, self.Nc, self.SC, self.Nb,
                 self.mb, self.M2b, self.stair)  # fmt: skip
        market = (self.v, self.Nw, self.g, self.P, self.h0, self.kappa, self.s, self.sigma)
        return _rows(self.K.capped_rows, xi, p, target, margin_mode, self.canonical, *cells,
                     *market, self.vlast, self.vcmin, self.lam_top, _TIE)  # fmt: skip

    def eps(self, sellers, xi, p):
        """(eps_i, cell) as ``_UncappedOracle.eps``; cell -1 when seller i is not bought."""
        e, col, _ = self._run(xi, p, np.zeros(xi.size, np.int64), False)
        # -3: the greedy allocation wins with x.a = 0 (sellers of value 0 absorb all the
        # weight): the zero-cost limit (``offline._zero_cost_limit``), eps_i = +inf for a
        # seller at value 0, else 0
        limit = col == -3
        e[limit] = np.where(p[limit] == 0, np.inf, 0.0)
        col[limit] = np.where(p[limit] == 0, ZERO_LIMIT, -1)
        if np.any(col == -2):
            raise RuntimeError("payment oracle found no KKT point; please report this market")
        return e, col

    def margin(self, xi, p, cell):
        """As ``_UncappedOracle.margin``: >= 0 where piece ``cell`` is the optimum."""
        return self._run(xi, p, cell, True)[2]


def _tau_above(G, lam: float, Q: float) -> float:
    """Root tau of S(lam, tau) = Q tau for a cut-off lam above every value (inf if none)."""
    U = len(G.v)
    if not G.Nw[U] > Q * (1 + 1e-12):
        return np.inf
    y = lam - G.ref
    lo, hi = 0, U
    while lo < hi:  # the last c with F(d_c) <= 0, as offline._staircase
        mid = (lo + hi + 1) // 2
        Nc = G.Nw[mid]
        F = (Nc - Q) * (y - (G.v[mid - 1] - G.ref)) + (G.Nw[U] - Nc) * y - (G.S1[U] - G.S1[mid])
        lo, hi = (mid, hi) if F <= 0 else (lo, mid - 1)
    den = Q - G.Nw[lo]
    return ((G.Nw[U] - G.Nw[lo]) * y - (G.S1[U] - G.S1[lo])) / den if den > 0 else np.inf


def _sums_at(G, lam, tau, Q):
    """(sum D^2, sum d D / (Q tau), a magnitude for the rounding slack) at each (lam, tau)."""
    L = lam - G.ref
    nb = np.searchsorted(G.v, lam, "left")
    with np.errstate(invalid="ignore"):
        t = lam - tau
    nc = np.minimum(np.searchsorted(G.v, np.where(np.isnan(t), -np.inf, t), "right"), nb)
    Nc = G.Nw[nc]
    Nb = G.Nw[nb] - Nc
    S1b, S2b = G.S1[nb] - G.S1[nc], G.S2[nb] - G.S2[nc]
    with np.errstate(all="ignore"):
        Gb = np.maximum(Nb * L * L - 2 * L * S1b + S2b, 0.0)
        capped = np.where(Nc > 0, Nc * tau * tau, 0.0)
        E = (Nc * L - G.S1[nc]) / Q + np.where(Nb > 0, Gb / (Q * tau), 0.0)
        mag = capped + Nb * L * L + S2b + (Nc * np.abs(L) + np.abs(G.S1[nc])) / Q
    return capped + Gb, E, mag


def _psi_may_vanish(G, Q, s, l0, l1, t0, t1, lowest):
    """(Psi') on the boxes [l0, l1] x [t0, t1]: can |Psi| <= s min(tau, L)^2 + L/Q there?"""
    G2a, _, ma = _sums_at(G, l0, t0, Q)
    _, Eb, mb = _sums_at(G, l0, t1, Q)
    G2c, _, mc = _sums_at(G, l1, t1, Q)
    _, Ed, md = _sums_at(G, l1, t0, Q)
    with np.errstate(all="ignore"):
        psi_max = l1 - s * G2a - Eb
        psi_min = l0 - s * G2c - Ed
        L = l1 - lowest
        delta = s * np.minimum(t1, L) ** 2 + L / Q
        slack = 1e-9 * (np.abs(l0) + np.abs(l1) + (1 + s) * (ma + mb + mc + md))
    return ~((psi_min > delta + slack) | (psi_max < -delta - slack))


def _capped_cells(K, G, Q, s, lowest, any_inf):
    """Cells (c, n) of the full market that may hold a KKT point of a market in which
    one seller moved (see ``_CappedOracle``), as two arrays."""
    U = len(G.v)
    M = G.Nw[U]
    tau_lo, tau_hi = np.empty(U), np.empty(U)
    K.stair_tau(G.v, G.Nw, G.S1, U, Q + 1.0, True, tau_lo)
    K.stair_tau(G.v, G.Nw, G.S1, U, Q - 1.0, False, tau_hi)
    n = np.arange(1, U + 1)
    l0 = G.v.copy()
    l1 = np.append(G.v[1:], np.inf)
    if Q < (M - 1) * (1 - 1e-9):  # the largest cut-off of a KKT point above every value
        a = s * (Q - 1) ** 2 / M
        disc = 1 + 4 * a * G.v[-1]
        l1[-1] = (
            G.v[-1] + (1 + np.sqrt(disc)) / (2 * a) * (1 + 1e-6) + 1e-12 * abs(G.v[-1])
            if disc >= 0
            else -np.inf
        )
    t0 = tau_lo * (1 - 1e-9)
    t1 = np.append(tau_hi[1:], _tau_above(G, l1[-1], Q - 1.0) if np.isfinite(l1[-1]) else np.inf)
    t1 = t1 * (1 + 1e-9)
    # a band needs more than Q sellers below the cut-off, seller i included
    most = G.Nw[n] + 1.0
    if not any_inf:
        most[-1] = M
    bounded = np.isfinite(l1)
    keep = (most > Q * (1 + 1e-9)) & (l1 >= l0)
    keep &= ~bounded | _psi_may_vanish(G, Q, s, l0, l1, t0, t1, lowest)
    cs, ns = [], []
    for q in np.flatnonzero(keep):
        nn = q + 1
        if bounded[q]:  # lam - tau in [l0 - t1, l1 - t0]
            lo_c = int(np.searchsorted(G.v, l0[q] - t1[q], "right")) if np.isfinite(t1[q]) else 0
            hi_c = int(np.searchsorted(G.v, l1[q] - t0[q], "right"))
        else:
            lo_c, hi_c = 0, nn
        c = np.arange(max(lo_c - 1, 0), min(hi_c + 1, nn) + 1)
        v_c = np.where(c > 0, G.v[np.maximum(c - 1, 0)], -np.inf)
        v_c1 = np.where(c < U, G.v[np.minimum(c, U - 1)], np.inf)
        lo_t = np.maximum(np.maximum(t0[q], l0[q] - v_c1), 0.0)
        hi_t = np.minimum(t1[q], l1[q] - v_c)
        ok = hi_t >= lo_t
        if bounded[q]:
            ok &= _psi_may_vanish(
                G, Q, s, np.full(c.size, l0[q]), np.full(c.size, l1[q]), lo_t, hi_t, lowest
            )
        cs.append(c[ok])
        ns.append(np.full(int(ok.sum()), nn))
    if not cs:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    return np.concatenate(cs).astype(np.int64), np.concatenate(ns).astype(np.int64)


class _ResolveOracle:
    """eps_i by solving the whole market again (exact; O(m log m) per call)."""

    sections = 1  # each point is a full solve: bisect

    def __init__(self, psi, mu, sigma, gamma, k):
        self.psi, self.gamma = psi, gamma
        self.kw = dict(mu=mu, sigma=sigma, gamma=gamma, k=k)
        self.cap = 1.0 if (k is None or k >= psi.size) else k / psi.size

    def eps(self, sellers, xi, p):
        out = np.empty(p.size)
        cell = np.empty(p.size, dtype=np.int64)
        for j, (i, pj) in enumerate(zip(sellers, p, strict=True)):
            if np.isposinf(pj):  # never bought (and maybe nobody else to solve for)
                out[j], cell[j] = 0.0, -1
                continue
            psi = self.psi.copy()
            psi[i] = pj / self.gamma
            res = solve(psi, **self.kw)
            out[j] = res.eps[i]
            # the cell: which sellers are bought and which of them are at the cap.  The
            # sets themselves, not their sizes: seller i may leave the cap as another
            # seller reaches it, and the pieces on either side are different (A, B, A
            # with the same counts would hide B from the piece search)
            bought = np.flatnonzero(res.eps > 0)
            capped = np.flatnonzero(res.a >= self.cap * (1 - 1e-12))
            code = hash((bought.tobytes(), capped.tobytes())) & 0x3FFFFFFFFFFFFFFF
            cell[j] = code if out[j] > 0 else -1
        return out, cell
