"""Myerson payments of the offline mechanism (Lemma III.2 / Eq. 8, 003).

    t_i = c_i eps_i(c_i) + int_{c_i}^{c_high} eps_i(z, c_{-i}) dz

Eq. 8 is printed as t_i = -int_{c_i}^inf z d eps_i(z); reports live in the
support, so the integral stops at its top c_high.  Read as a Stieltjes integral
(integration by parts) it is the formula above, the least payment that is IC
and IR (a seller at c_high gets exactly its cost), and that is what we pay,
through every jump of eps_i.  Read with a classical derivative it drops
z0 (eps_i(z0-) - eps_i(z0+)) at each jump z0 > c_i and is neither IC nor IR
(``myerson``; docs/mathematics.md has a market where it pays below cost).

Seller i's allocation eps_i(z) is non-increasing in its own report z (the
exact optimum of a problem with a term gamma psi(z) eps_i is monotone), so the
integrand is positive on [c_i, z*) and 0 beyond a threshold z*.  It is smooth
except where the optimum changes cell (another seller enters or leaves the
active set, or the cap starts to bind): we find those points by a search on
the cell (checked again on each piece's quadrature nodes) and integrate each
smooth piece by Gauss-Legendre after z = a + (b-a)(1 - cos theta)/2, which
also smooths the square-root end of a branch of the optimum that ends in a
fold.  A piece's rule is accepted when its own values show it has resolved the
curve (``quadrature.resolution_error``: the Legendre coefficients of the same
values, no extra evaluation); else the piece is halved (a curve that varies on a
scale far below the piece's width, as with opponents at the floor of a support,
where one rule errs by ~1e-4).  Unbought sellers are paid 0.

Evaluating eps_i(z) is a full solve of a market in which one value moved.
Without a cap this is cheap: the stationary points of the solution family are
the zeros of the continuous function

    phi(lam) = lam - s G(lam) - G(lam)/W(lam),  G = sum ((lam - x)^+)^2, W = sum (lam - x)^+

(Eq. 14, 003), and moving one seller changes phi by at most
delta(lam) = s L^2 + 2 L^2 / (W - L), L = lam - min x.  So the moved market
can only have zeros on the segments of the full market where |phi| <= delta;
those few segments (computed once) are searched exactly for every seller and
every quadrature point, with the others' prefix sums, in O(1) each: by the
compiled ``_offline_kernel.uncapped_rows``, or by its numpy reference
``_UncappedOracle._table`` where numba does not work (same arithmetic; the
tests hold them to 1e-13).

With a cap (k given) the same idea holds in the band width tau as well as the
cut-off lam (``_CappedOracle``): a few cells of the full market near its
optimum are kept, and each evaluation solves their cubics (compiled).  Most
bought sellers are then at the cap; their integrals are one smooth function of
their own cost, interpolated through exact ones (``_smooth_integrals``).  The
re-solving oracle (``method="resolve"``) is kept as the reference.

**Per-seller laws.**  ``dist`` may be a :class:`~market_sim.distributions.SellerLaws`
(sellers of unlike classes): seller i's value is then gamma psi_i of its own law and
its integral runs to the top h_i of its own support (Lemma III.2 / Eq. 8, 003).  The
oracle sees values only, so it is shared; the integrals are taken class by class with
the class's law (one law: the very same calls as before).  A report outside seller i's
own support but inside the hull of the supports is read as the nearest end of its own
support (its message space is its type space; such a report earns exactly what that
end earns, so IC and IR are unchanged).
"""

from __future__ import annotations

import math
import warnings

import numpy as np

from ..distributions import CostDistribution, SellerLaws
from ..errors import MarketSimError
from ..privacy.limit import privacy_cost
from . import offline
from .base import in_own_support as _in_support
from .base import seller_ends as _ends
from .offline import _Groups, _positive_roots, check_params, solve
from .quadrature import gauss_legendre_cos, resolution_error

__all__ = ["OfflineCurves", "offline_payments", "seller_utility"]

_SECTIONS = 15  # points per step of the search for piece ends
_REL_TOL = 1e-15  # piece ends are located to this relative width
_MAX_PIECES = 10_000
_SKIP = 1e-10  # relative width skipped past each change of piece
_TIE = 1e-12  # relative loss difference taken for a tie of two cells
_ABOVE_ZERO = 1e-300  # where the piece that starts at a report of value 0 is named
# A cell where seller i is the only active seller has mean m1 = p and variance 0, taken
# as such: from the prefix sums shifted by the least value ref, m1 = (p - ref) + ref
# rounds a report p below ulp(ref) to 0 (then no KKT point is found, and every such
# report fell back to a full solve: the audit's floor candidates, 1e-300 <= p < 4e-18).


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
        self.kernel = kernel  # the compiled ``uncapped_rows``, or None: numpy ``_table``
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
        """The compiled oracle (``_offline_kernel.uncapped_rows``)."""
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
                if active:  # seller i alone: m1 = p, V = 0 exactly (note at _ABOVE_ZERO)
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
        self.K, self.canonical = K, canonical
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


def offline_payments(
    costs,
    dist: CostDistribution | SellerLaws,
    *,
    mu: float,
    sigma: float,
    gamma: float,
    k: float | None = None,
    n_quad: int = 32,
    method: str = "auto",
    backend: str = "auto",
):
    """Allocations and Myerson payments of the offline mechanism.

    ``costs`` are the reported costs (truthful reports assumed; pass a
    misreport as the cost to get what that report earns).  Returns
    ``(eps, payments)``, numpy arrays in the input order.  ``method``:
    ``"auto"`` (the pruned oracle, piece ends refined by Illinois, the
    integrals of sellers deep at a cap interpolated; with a cap and no working
    numba, re-solving), ``"pruned"`` (the same, an error without numba under a
    cap), ``"bisect"`` (the pruned oracle, every seller integrated, piece ends
    bisected: the former method) or ``"resolve"`` (re-solve per evaluation,
    bisected: the reference).  ``backend`` (as :func:`offline.solve`'s):
    ``"numpy"`` (no compiled code), ``"numba"`` (an error if numba does not
    work) or ``"auto"``: compiled from ``offline.KERNEL_MIN_M`` sellers on
    without a cap (below, numpy is faster than loading the kernel, 0.4 s once
    per process), and always with a cap (the numpy path re-solves per point).
    Both give the same payments to ~1e-13.
    """
    return _payments(costs, dist, mu, sigma, gamma, k, n_quad, method, None, backend)


def seller_utility(
    i: int,
    report: float,
    true_cost: float,
    costs,
    dist: CostDistribution | SellerLaws,
    *,
    mu: float,
    sigma: float,
    gamma: float,
    k: float | None = None,
    n_quad: int = 32,
    backend: str = "auto",
) -> float:
    """Utility t_i - c_i eps_i of seller ``i`` (true cost ``true_cost``) when it
    reports ``report`` and the others report ``costs[j]``: the IC test.
    For many reports or sellers use :class:`OfflineCurves`."""
    reports = np.array(costs, dtype=float)
    reports[i] = report
    only = np.array([i])
    eps, pay = _payments(reports, dist, mu, sigma, gamma, k, n_quad, "auto", only, backend)
    return float(pay[i] - true_cost * eps[i])


_METHODS = ("auto", "pruned", "bisect", "resolve")


def _check(dist, mu, sigma, gamma, k, n_quad, method, backend):
    check_params(mu, sigma, gamma, k)
    if backend not in ("auto", "numpy", "numba"):
        raise MarketSimError(f"unknown backend {backend!r} (auto, numpy or numba)")
    if not isinstance(dist, CostDistribution | SellerLaws):
        raise MarketSimError(
            "dist must be a CostDistribution (see parse_distribution) or SellerLaws"
        )
    if method not in _METHODS:
        raise MarketSimError(f"unknown payment method {method!r}")
    if int(n_quad) < 2:
        raise MarketSimError("n_quad must be >= 2")


# ---- one law for every seller, or each seller its own (SellerLaws) -------------------
def _virtual(dist, z, sellers=None) -> np.ndarray:
    """psi(z); for SellerLaws psi_i of seller ``sellers[r]`` for row r (all, in order, if None)."""
    if isinstance(dist, CostDistribution):
        return dist.virtual_cost(z)
    return dist.virtual_cost(z, sellers=sellers)


def _class_of(dist, sellers) -> np.ndarray:
    """The law index of each seller (0 for everybody under one law)."""
    if isinstance(dist, CostDistribution):
        return np.zeros(len(sellers), dtype=np.int64)
    return dist.group[np.asarray(sellers, dtype=np.int64)]


def _by_law(dist, sellers) -> list[tuple[CostDistribution, np.ndarray]]:
    """[(law, positions in ``sellers`` of its sellers)]: one entry under one law."""
    if isinstance(dist, CostDistribution):
        return [(dist, np.arange(len(sellers)))]
    g = _class_of(dist, sellers)
    return [(law, np.flatnonzero(g == j)) for j, law in enumerate(dist.laws) if np.any(g == j)]


def _lowest_value(dist, gamma) -> float:
    """gamma psi at the lowest report any seller may make (the oracle's ``floor``)."""
    laws = (dist,) if isinstance(dist, CostDistribution) else dist.laws
    return min(gamma * float(d.virtual_cost(d.support[0])) for d in laws)


def _oracle(psi, mu, sigma, gamma, k, method, floor=np.inf, backend="auto"):
    """(oracle, refine): the eps_i(z) oracle and whether piece ends are refined
    by Illinois (True) or bisected (False)."""
    if method == "resolve":
        return _ResolveOracle(psi, mu, sigma, gamma, k), False
    refine = method != "bisect"
    # sellers with psi = +inf are never bought and do not move anybody's optimum
    x = gamma * psi[np.isfinite(psi)]
    capped = k is not None and k < psi.size
    kern = None
    if backend == "numba" or (backend == "auto" and (capped or psi.size >= offline.KERNEL_MIN_M)):
        kern = offline._kernel()  # None if numba does not work (said once)
        if kern is None and backend == "numba":
            raise MarketSimError(f"backend='numba' is unavailable: {offline._kernel_error}")
    if capped:
        if kern is None:  # no numba, or backend="numpy"
            if method != "auto":
                why = "backend='numpy'" if backend == "numpy" else offline._kernel_error
                raise MarketSimError(
                    f"the pruned payment oracle with a cap needs numba ({why}); "
                    "use method='resolve'"
                )
            return _ResolveOracle(psi, mu, sigma, gamma, k), False
        try:
            return _CappedOracle(kern, x, psi.size, k, mu, sigma, refine, floor), refine
        except MarketSimError:
            raise
        except Exception as exc:  # the capped kernels do not compile (an old numba?)
            if method != "auto":
                raise
            _warn_capped_kernel(exc)
            return _ResolveOracle(psi, mu, sigma, gamma, k), False
    return _UncappedOracle(x, mu, sigma, canonical=refine, floor=floor, kernel=kern), refine


def capped_oracle_compiled() -> bool:
    """Whether capped payments use the compiled oracle (numba works) rather than
    re-solving the market per point (``market_sim.estimates``)."""
    return offline._kernel() is not None and not _capped_kernel_warned


_capped_kernel_warned = False


def _warn_capped_kernel(exc: Exception) -> None:
    global _capped_kernel_warned
    if not _capped_kernel_warned:
        _capped_kernel_warned = True
        warnings.warn(
            f"market_sim: the compiled capped payment oracle failed ({type(exc).__name__}: "
            f"{exc}); payments with a cap re-solve the market per point",
            RuntimeWarning,
            stacklevel=4,
        )


def _payments(costs, dist, mu, sigma, gamma, k, n_quad, method, only, backend):
    _check(dist, mu, sigma, gamma, k, n_quad, method, backend)
    costs = _in_support(dist, np.asarray(costs, dtype=float).ravel(), "cost")
    if costs.size == 0:
        raise MarketSimError("no sellers")
    psi = _virtual(dist, costs)
    eps = solve(psi, mu=mu, sigma=sigma, gamma=gamma, k=k, backend=backend).eps
    pay = np.zeros_like(eps)
    bought = np.flatnonzero(eps > 0)
    if only is not None:
        bought = np.intersect1d(bought, only)
    if bought.size == 0:
        return eps, pay
    oracle, refine = _oracle(psi, mu, sigma, gamma, k, method, backend=backend)
    integral = np.empty(bought.size)
    for law, where in _by_law(dist, bought):  # each class up to the top of its own support
        sellers = bought[where]
        integral[where] = _law_integrals(
            oracle, refine, method, sellers, gamma * psi[sellers], costs[sellers],
            eps[sellers], law, gamma, n_quad,
        )  # fmt: skip
    pay[bought] = privacy_cost(costs[bought], eps[bought]) + integral
    return eps, pay


def _finite(eps):
    """eps with +inf (at a report of value 0 only, ``ZERO_LIMIT``) read as 0: a quadrature
    node underflows to that one point only in a piece of width ~1e-300, and one point
    does not change an integral (eps_i ~ C / sqrt(z) near it is integrable)."""
    return np.where(np.isinf(eps), 0.0, eps)


def _law_integrals(oracle, refine, method, sellers, x, costs, eps, law, gamma, n_quad):
    """int_{c_i}^{h} eps_i for ``sellers`` (truthful values x, costs, eps) of one law."""

    def integrals(rows):
        return _integrate(
            oracle, refine, sellers[rows], x[rows], costs[rows], law, gamma, n_quad, record=False
        )[0]

    integral = np.empty(sellers.size)
    # sellers deep at the cap: integrals interpolated in the cost (see _smooth_integrals)
    deep = (x < getattr(oracle, "smooth_below", -np.inf)) & np.isfinite(eps)
    if method in ("auto", "pruned") and np.count_nonzero(deep) > _SMOOTH_MIN:
        rows = np.flatnonzero(deep)
        integral[rows] = _smooth_integrals(lambda r: integrals(rows[r]), costs[rows], eps[rows])
        rest = np.flatnonzero(~deep)
    else:
        rest = np.arange(sellers.size)
    if rest.size:
        integral[rest] = integrals(rest)
    return integral


_SMOOTH_MIN = 64  # fewer sellers deep at the cap are integrated one by one
_SMOOTH_NODES = 12  # exact integrals an interval is interpolated through ...
_SMOOTH_CHECKS = 4  # ... and held-out sellers it is checked against
_SMOOTH_TOL = 1e-14  # relative to each held-out seller's payment


def _smooth_integrals(exact, c, eps):
    """int_{c_i}^{c_high} eps_i for sellers whose integral is a smooth function of their
    own cost, from exact integrals (``exact(positions)``) at a few of them.

    A seller at the cap in every cell the oracle keeps (value below ``smooth_below``)
    enters each moved market only through the capped sum minus its value (``offline``:
    the cap term of the cubic), so its integral is one analytic function of its cost
    between changes of the pieces' layout.  Each interval of costs is interpolated
    (Chebyshev basis) through the exact integrals of the sellers nearest the Chebyshev
    points and accepted when those of held-out sellers between them agree to
    _SMOOTH_TOL of their payments; otherwise it is halved.  Interpolating sellers are
    exact, the others within _SMOOTH_TOL."""
    uniq, first, inv = np.unique(c, return_index=True, return_inverse=True)
    e = eps[first]
    out = np.full(uniq.size, np.nan)
    known = np.zeros(uniq.size, dtype=bool)
    todo = [(0, uniq.size)]
    need = _SMOOTH_NODES + _SMOOTH_CHECKS
    while todo:
        plans = []
        for a, b in todo:
            if b - a <= 2 * need:
                plans.append((a, b, np.arange(a, b), None))
                continue
            t = np.cos(np.pi * (np.arange(_SMOOTH_NODES) + 0.5) / _SMOOTH_NODES)[::-1]
            lo, hi = uniq[a], uniq[b - 1]
            pts = 0.5 * (lo + hi) + 0.5 * (hi - lo) * t
            nodes = np.unique(np.clip(np.searchsorted(uniq[a:b], pts), 0, b - a - 1) + a)
            nodes = np.unique(np.concatenate(([a, b - 1], nodes)))
            gaps = np.argsort(np.diff(nodes))[::-1][:_SMOOTH_CHECKS]
            checks = np.setdiff1d((nodes[gaps] + nodes[gaps + 1]) // 2, nodes)
            plans.append((a, b, nodes, checks))
        ask = np.unique(
            np.concatenate(
                [np.concatenate((p[2], p[3] if p[3] is not None else [])) for p in plans]
            ).astype(np.int64)
        )
        ask = ask[~known[ask]]
        if ask.size:
            out[ask] = exact(first[ask])
            known[ask] = True
        todo = []
        for a, b, nodes, checks in plans:
            if checks is None:
                continue
            scale = 2.0 / (uniq[b - 1] - uniq[a])
            mid = 0.5 * (uniq[b - 1] + uniq[a])
            fit = np.polynomial.chebyshev.chebfit(
                (uniq[nodes] - mid) * scale, out[nodes], nodes.size - 1
            )
            val = np.polynomial.chebyshev.chebval((uniq[checks] - mid) * scale, fit)
            pay = uniq[checks] * e[checks] + out[checks]
            if np.all(np.abs(val - out[checks]) <= _SMOOTH_TOL * np.abs(pay)):
                rest = np.arange(a, b)
                rest = rest[~known[rest]]
                out[rest] = np.polynomial.chebyshev.chebval((uniq[rest] - mid) * scale, fit)
            else:
                half = (a + b) // 2
                todo += [(a, half), (half, b)]
    return out[inv]


def _integrate(oracle, refine, sellers, xi, lo, dist, gamma, n_quad, record):
    """int_{lo}^{c_high} eps_i(z) dz for each seller (Eq. 8, 003), piece by piece, and
    segment by segment between the law's ``breaks`` (where psi may jump, so eps_i(z) may
    jump inside one of the oracle's cells: no quadrature rule may straddle them).

    Returns (integral, pieces); with ``record``, pieces = (position, start,
    end, integral, kind) arrays, kind 0 a Gauss-Legendre piece and kind 1 a
    midpoint sliver past a change of piece.
    """
    low, top = dist.support
    edges = [low, *(b for b in getattr(dist, "breaks", ()) if b > lo.min()), top]
    if len(edges) == 2:
        return _integrate_segment(oracle, refine, sellers, xi, lo, dist, gamma, n_quad, record)
    integral, recs = np.zeros(lo.shape), []
    for a, b in zip(edges[:-1], edges[1:], strict=True):
        start = np.clip(lo, a, b)
        part, rec = _integrate_segment(
            oracle, refine, sellers, xi, start, dist, gamma, n_quad, record, span=(a, b)
        )
        integral += part
        if record and rec:
            recs.append(rec)
    if not record:
        return integral, None
    return integral, tuple(np.concatenate(col) for col in zip(*recs, strict=True))


def _integrate_segment(
    oracle, refine, sellers, xi, lo, dist, gamma, n_quad, record, span=None
):  # fmt: skip
    """``_integrate`` on ``span`` (default: the support), where psi is continuous:
    piece after piece, each integrated in its cell, then the change past it."""
    seg = _Segment(oracle, refine, sellers, xi, lo, dist, gamma, span)
    shape, _ = gauss_legendre_cos(n_quad)
    skip = _SKIP * (dist.support[1] - dist.support[0])
    pending = seg.cur_cell >= 0  # sellers still integrating
    for _ in range(_MAX_PIECES):
        if not pending.any():
            break
        a, b = seg.cur.copy(), np.where(seg.cur < seg.z_hi, seg.z_hi, seg.top)
        todo = pending & (seg.cur_cell != seg.cell_top)
        seg.search(a, b, np.flatnonzero(todo))
        end = np.where(todo, a, seg.top)
        seg.integrate_pieces(pending, a, b, end, todo, shape, n_quad, record)
        # the next piece starts just past the change, skipping the ~1e-11 wide zone
        # where a solver may pick either of two cells that give the same eps; the
        # sliver [a, b + skip] is integrated by the midpoint rule.  A seller whose
        # piece ran to the top, or who is unbought from here on (monotonicity), is done
        pending &= todo
        idx = np.flatnonzero(pending)
        if idx.size:
            seg.step_past_change(idx, a, b, skip, record)
            pending &= seg.cur_cell >= 0
    else:
        raise RuntimeError("payment integral: too many pieces; please report this market")
    if not record:
        return seg.integral, None
    # (callers record only for sellers bought at their start, so rec is not empty)
    return seg.integral, tuple(np.concatenate(col) for col in zip(*seg.rec, strict=True))


class _Segment:
    """The state of ``_integrate_segment`` on [bottom, top]: each seller's current
    piece (its start ``cur`` and the oracle's cell ``cur_cell`` there), the integral
    so far and, when recording, the pieces."""

    def __init__(self, oracle, refine, sellers, xi, lo, dist, gamma, span):
        self.oracle, self.refine, self.sellers, self.xi = oracle, refine, sellers, xi
        self.dist, self.gamma = dist, gamma
        self.bottom, self.top = dist.support if span is None else span
        every = np.arange(lo.size)
        _, self.cell_top = self.alloc(every, np.full(lo.shape, self.top))
        # searches start from top, or from where the oracle knows nobody is bought
        self.z_hi = _least_z(self.values, self.bottom, self.top, getattr(oracle, "p_max", np.inf))
        self.cur, self.cur_cell = lo.copy(), self.alloc(every, lo)[1]
        at_limit = np.flatnonzero(self.cur_cell == ZERO_LIMIT)
        if at_limit.size:  # eps_i = +inf at z = 0 only: its piece is the one just above 0
            self.cur_cell[at_limit] = self.alloc(at_limit, lo[at_limit] + _ABOVE_ZERO)[1]
        self.integral = np.zeros(lo.shape)
        self.rec = []

    def values(self, z):
        return self.gamma * self.dist.virtual_cost(z)

    def alloc(self, idx, z):
        """(eps, cell) of sellers idx (positions in ``sellers``) reporting z."""
        return self.oracle.eps(self.sellers[idx], self.xi[idx], self.values(z))

    def eps_of(self, idx, z):
        return self.alloc(idx, z)[0]

    def bisect(self, a, b, todo):
        """Shrink [a, b] to a change of cell, keeping cell(a) == cur_cell != cell(b),
        by sections: ``oracle.sections`` points a step (the former method)."""
        sections = self.oracle.sections
        frac = np.arange(1, sections + 1) / (sections + 1)
        while todo.size:
            width = b[todo] - a[todo]
            todo = todo[width > _REL_TOL * (np.abs(a[todo]) + np.abs(b[todo]) + 1e-300)]
            if not todo.size:
                return
            z = a[todo, None] + (b[todo] - a[todo])[:, None] * frac[None, :]
            cells = self.alloc(np.repeat(todo, sections), z.ravel())[1].reshape(z.shape)
            changed = cells != self.cur_cell[todo, None]
            first = np.where(changed.any(axis=1), changed.argmax(axis=1), sections)
            rows = np.arange(todo.size)
            a_new = np.where(first > 0, z[rows, np.maximum(first - 1, 0)], a[todo])
            b_new = np.where(first < sections, z[rows, np.minimum(first, sections - 1)], b[todo])
            a[todo], b[todo] = a_new, b_new

    def search(self, a, b, todo):
        if self.refine:
            oracle, xi, cur_cell = self.oracle, self.xi, self.cur_cell
            todo = _illinois(
                lambda idx, z: oracle.margin(xi[idx], self.values(z), cur_cell[idx]), a, b, todo
            )
        self.bisect(a, b, todo)

    def integrate_pieces(self, pending, a, b, end, todo, shape, n_quad, record):
        """Integrate [cur, end] of the pending sellers; ``a``, ``b``, ``end`` and
        ``todo`` are updated in place for those whose search is redone."""
        unchecked = pending.copy()
        while unchecked.any():
            # integrate [cur, end] if every quadrature node lies in cur's cell; a node
            # in another cell means the search stepped over a piece (cell A, B, A):
            # search again below that node
            ok = np.flatnonzero(unchecked)
            width = end[ok] - self.cur[ok]
            z = self.cur[ok, None] + width[:, None] * shape[None, :]
            vals, cells = (
                v.reshape(z.shape) for v in self.alloc(np.repeat(ok, shape.size), z.ravel())
            )
            stray = (cells != self.cur_cell[ok, None]) & (width[:, None] > 0)
            bad = stray.any(axis=1)
            good = ok[~bad]
            piece = _adaptive(self.eps_of, good, self.cur[good], end[good], n_quad, vals[~bad])
            np.add.at(self.integral, piece[0], piece[3])
            if record:
                self.rec.append((*piece, np.zeros(piece[0].size, np.int8)))
            unchecked[good] = False
            redo = ok[bad]
            if redo.size:
                a[redo] = self.cur[redo]
                b[redo] = z[bad][np.arange(redo.size), stray[bad].argmax(axis=1)]
                todo[redo] = True
                self.search(a, b, redo)
                end[redo] = a[redo]

    def step_past_change(self, idx, a, b, skip, record):
        """[a, b] (~1e-15 wide, holding the change) by the midpoint rule, [b, b + skip]
        (in the next cell, or where two cells give the same eps) by quadrature; the
        sellers idx then start their next piece at b + skip."""
        top = self.top
        nxt = np.minimum(b[idx] + skip, top)
        sliver = (b[idx] - a[idx]) * _finite(self.alloc(idx, 0.5 * (a[idx] + b[idx]))[0])
        self.integral[idx] += sliver
        after = _fixed_rule(self.eps_of, idx, b[idx], nxt, _SLIVER_NODES)
        np.add.at(self.integral, after[0], after[3])
        if record:
            self.rec.append((idx, a[idx], b[idx], sliver, np.ones(idx.size, np.int8)))
            self.rec.append((*after, np.zeros(after[0].size, np.int8)))
        self.cur[idx] = nxt
        self.cur_cell[idx] = self.alloc(idx, nxt)[1]


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


def _curve_backend(backend: str) -> str:
    """The oracle's backend for a curve: ``"auto"`` is the compiled kernel whatever the
    market's size when numba works (a curve calls its oracle hundreds of times on a few
    rows each, where numpy's per-call overhead dominates: the audit's offline curves
    are ~4x faster compiled, ``benchmarks/bench_audit.py``), else numpy."""
    if backend != "auto":
        return backend
    return "numba" if offline._kernel() is not None else "numpy"


class OfflineCurves:
    """Each seller's allocation curve eps_i(z) (z its own report, the others at
    ``reports``) and the Myerson payment it implies (Eq. 8, 003),

        t_i(z) = z eps_i(z) + int_z^{c_high} eps_i(s) ds,

    built once per seller and reused for any number of candidate reports:
    payments, best responses and regret.  A seller's curve is a list of
    smooth pieces (found as in :func:`offline_payments`) with the integral of
    each; it covers [min(report, candidates asked for), c_high] and grows
    downwards when a lower candidate is asked for.  A candidate z costs one
    oracle call for eps_i(z) and ``n_quad`` for the rest of its piece.
    ``method`` and ``backend`` are :func:`offline_payments`'s; ``dist`` a CostDistribution
    or SellerLaws (each seller's curve then on its own support, module docstring).
    """

    def __init__(
        self,
        reports,
        dist: CostDistribution | SellerLaws,
        *,
        mu: float,
        sigma: float,
        gamma: float,
        k: float | None = None,
        n_quad: int = 32,
        method: str = "auto",
        backend: str = "auto",
    ):
        _check(dist, mu, sigma, gamma, k, n_quad, method, backend)
        self.reports = _in_support(dist, np.asarray(reports, dtype=float).ravel(), "report")
        if self.reports.size == 0:
            raise MarketSimError("no sellers")
        self.dist, self.gamma, self.n_quad = dist, gamma, int(n_quad)
        self.psi = _virtual(dist, self.reports)
        # the market must have an optimum
        solve(self.psi, mu=mu, sigma=sigma, gamma=gamma, k=k, backend=backend)
        floor = _lowest_value(dist, gamma)  # the lowest report
        # the top of each seller's support (one number under one law)
        self._top = dist.support[1] if isinstance(dist, CostDistribution) else _ends(dist)[1]
        self._oracle, self._refine = _oracle(self.psi, mu, sigma, gamma, k, method, floor,
                                             _curve_backend(backend))  # fmt: skip
        self._lo = np.full(self.reports.size, np.inf)  # each curve covers [_lo, c_high]
        # seller -> (starts, ends, kinds, tails: int from each start to c_high)
        self._curve: dict[int, tuple[np.ndarray, ...]] = {}
        # each seller's curve as an index into _store (-1: none), for grouping rows fast
        self._cid = np.full(self.reports.size, -1, dtype=np.int64)
        self._store: list[tuple[np.ndarray, ...]] = []
        # per law, the curve shared by its sellers above the oracle's ``independent_above``:
        # (lo, curve, id)
        self._shared: dict[int, tuple[float, tuple[np.ndarray, ...] | None, int]] = {}

    # ---- building --------------------------------------------------------------
    def _alloc(self, sellers, z):
        return self._oracle.eps(
            sellers, self.gamma * self.psi[sellers], self.gamma * _virtual(self.dist, z, sellers)
        )

    def _build(self, sellers, zlo):
        """(Re)build the curves of ``sellers`` from zlo (one per seller) up.  Sellers
        whose eps_i(z) does not depend on their own true value (the oracle's
        ``independent_above``: unbought sellers far above the cut-off) share one curve
        per law, built once from the lowest zlo among them."""
        above = getattr(self._oracle, "independent_above", np.inf)
        shared = self.gamma * self.psi[sellers] > above
        law = _class_of(self.dist, sellers)
        alone = ~shared
        for j in np.unique(law[shared]):
            mine = shared & (law == j)
            if mine.sum() > 1:
                self._share(int(j), sellers[mine], float(zlo[mine].min()))
            else:
                alone |= mine
        sellers, zlo = sellers[alone], zlo[alone]
        if sellers.size:
            self._build_own(sellers, zlo)

    def _share(self, law: int, rows, lo: float) -> None:
        """Give ``rows`` (sellers of law ``law``) the law's shared curve from lo up."""
        have = self._shared.get(law)
        if have is None or lo < have[0]:
            self._build_own(rows[:1], np.array([lo]))
            have = (lo, self._curve.get(int(rows[0])), int(self._cid[rows[0]]))
            self._shared[law] = have
        self._lo[rows] = have[0]
        if have[1] is None:
            for i in rows:
                self._curve.pop(int(i), None)
            self._cid[rows] = -1
        else:
            self._curve.update(dict.fromkeys(rows.tolist(), have[1]))
            self._cid[rows] = have[2]

    def _build_own(self, sellers, zlo):
        """(Re)build the curves of ``sellers`` from zlo (one per seller) up, each its own."""
        eps0 = self._alloc(sellers, zlo)[0]
        self._lo[sellers] = zlo
        for i in sellers:
            self._curve.pop(int(i), None)
        self._cid[sellers] = -1
        on = eps0 > 0  # not bought at zlo: not bought above it either (eps_i is monotone)
        if not on.any():
            return
        rows = sellers[on]
        pos, start, end, part, kind = self._record_pieces(rows, zlo[on])
        order = np.lexsort((start, pos))
        pos, start, end, part, kind = (x[order] for x in (pos, start, end, part, kind))
        cut = np.flatnonzero(np.diff(pos)) + 1
        for r, s, e, q, kd in zip(
            *(np.split(x, cut) for x in (pos, start, end, part, kind)), strict=True
        ):
            tails = np.cumsum(q[::-1])[::-1]  # int from each piece's start to c_high
            i = int(rows[r[0]])
            self._curve[i] = (s, e, kd, tails)
            self._cid[i] = len(self._store)
            self._store.append(self._curve[i])

    def _record_pieces(self, rows, zlo):
        """``_integrate``'s pieces (position in rows, start, end, integral, kind) of the
        curves of ``rows`` from zlo up, each on its own law's support."""
        recs = []
        for law, where in _by_law(self.dist, rows):
            _, rec = _integrate(
                self._oracle,
                self._refine,
                rows[where],
                self.gamma * self.psi[rows[where]],
                zlo[where],
                law,
                self.gamma,
                self.n_quad,
                record=True,
            )
            recs.append((where[rec[0]], *rec[1:]))
        if len(recs) == 1:
            return recs[0]
        return tuple(np.concatenate(col) for col in zip(*recs, strict=True))

    def _candidates(self, Z, sellers):
        """(Z, sellers) checked: Z of shape (len(sellers), n) in the support(s)."""
        if sellers is None:
            sellers = np.arange(self.reports.size)
        sellers = np.asarray(sellers, dtype=np.int64).ravel()
        Z = np.asarray(Z, dtype=float)
        if Z.ndim != 2 or Z.shape[0] != sellers.size:
            raise MarketSimError(f"Z must have shape ({sellers.size}, n), got {Z.shape}")
        return _in_support(self.dist, Z, "candidate report", sellers), sellers

    def _prepare(self, Z, sellers):
        Z, sellers = self._candidates(Z, sellers)
        if Z.shape[1]:
            zlo = np.minimum(Z.min(axis=1), self.reports[sellers])
            need = zlo < self._lo[sellers]
            if need.any():
                uniq, first = np.unique(sellers[need], return_index=True)
                lo = (
                    np.minimum.reduceat(zlo[need][np.argsort(sellers[need], kind="stable")], first)
                    if uniq.size < need.sum()
                    else zlo[need][first]
                )
                self._build(uniq, lo)
        return Z, sellers

    # ---- the public API --------------------------------------------------------
    def eps_at(self, Z, sellers=None) -> np.ndarray:
        """eps_i(Z[r, j]) for seller i = sellers[r] (all sellers by default), the
        others reporting ``reports``; shape of Z."""
        Z, sellers = self._prepare(Z, sellers)
        return self._eps(Z, sellers)

    def _groups(self, sellers):
        """[(curve, rows)]: the rows of ``sellers`` with a curve, grouped by curve (the
        shared one holds most sellers of a large market)."""
        cid = self._cid[sellers]
        rows = np.flatnonzero(cid >= 0)
        if not rows.size:
            return []
        order = np.argsort(cid[rows], kind="stable")
        rows = rows[order]
        ids, first = np.unique(cid[rows], return_index=True)
        return [
            (self._store[int(c)], part)
            for c, part in zip(ids, np.split(rows, first[1:]), strict=True)
        ]

    def allocation_at(self, Z, sellers=None) -> np.ndarray:
        """eps_i(Z[r, j]) like :meth:`eps_at`, straight from the oracle: no payment
        curve is built (what pay-as-bid needs; one oracle call per entry)."""
        Z, sellers = self._candidates(Z, sellers)
        if Z.size == 0:
            return np.zeros(Z.shape)
        return self._alloc(np.repeat(sellers, Z.shape[1]), Z.ravel())[0].reshape(Z.shape)

    def _eps(self, Z, sellers):
        """eps_i(z) by the oracle; 0 past the curve's end (eps_i is non-increasing), and
        once per distinct z among the sellers sharing a curve."""
        out = np.zeros(Z.shape)
        if not Z.shape[1]:
            return out
        for cur, rows in self._groups(sellers):
            sub = Z[rows]
            end = cur[1][-1]  # bought up to here (a piece may run to the top itself)
            top = self._top if np.ndim(self._top) == 0 else self._top[sellers[rows[0]]]
            rr, cc = np.nonzero((sub < end) | (end >= top))
            if not rr.size:
                continue
            if rows.size > 1:  # a shared curve: eps depends on z only
                zu, inv = np.unique(sub[rr, cc], return_inverse=True)
                vals = self._alloc(np.full(zu.size, sellers[rows[0]]), zu)[0][inv]
            else:
                vals = self._alloc(np.full(rr.size, sellers[rows[0]]), sub[rr, cc])[0]
            out[rows[rr], cc] = vals
        return out

    def payments_at(self, Z, sellers=None) -> np.ndarray:
        """Myerson payment t_i(Z[r, j]) = z eps_i(z) + int_z^{c_high} eps_i (Eq. 8, 003)."""
        Z, sellers = self._prepare(Z, sellers)
        return privacy_cost(Z, self._eps(Z, sellers)) + self._tail(Z, sellers)

    def outcome_at(self, Z, sellers=None) -> tuple[np.ndarray, np.ndarray]:
        """(eps_at(Z), payments_at(Z)), eps evaluated once."""
        Z, sellers = self._prepare(Z, sellers)
        eps = self._eps(Z, sellers)
        return eps, privacy_cost(Z, eps) + self._tail(Z, sellers)

    def utilities(self, Z, true_costs, sellers=None) -> np.ndarray:
        """payments_at(Z) - true_costs[:, None] * eps_at(Z) (true_costs per row of Z)."""
        Z, sellers = self._prepare(Z, sellers)
        c = np.asarray(true_costs, dtype=float).ravel()
        if c.size != sellers.size:
            raise MarketSimError("one true cost per row of Z is needed")
        eps = self._eps(Z, sellers)
        # at a report of value 0 eps = +inf: t = tail, and the cost is -inf unless c = 0
        cost = privacy_cost(np.broadcast_to(c[:, None], Z.shape), eps)
        return privacy_cost(Z, eps) + self._tail(Z, sellers) - cost

    def _rest_of_piece(self, who, start, z, end, whole):
        """int_z^end eps_i on z's Gauss-Legendre piece [start, end] of integral ``whole``.
        The piece was resolved by its rule when the curve was built; [z, end] need not
        be: from a piece start at 0 (the zero-cost limit) eps_i ~ 1 / sqrt(t) varies on
        the scale z, and z + width x node loses z when z << width (one rule on [z, end]
        erred by 5e-6 of the payment at z = 1e-12, 5e-9 at 1e-18).  So z in the first
        half of its piece is integrated as whole - int_start^z (nodes from start keep
        their digits), and ``_adaptive`` judges each rule from its own values (one rule
        where resolved, as before) and halves it where not."""
        near = z - start < end - z
        lo, hi = np.where(near, start, z), np.where(near, z, end)
        rows, _, _, q = _adaptive(
            lambda r, zz: self._alloc(who[r], zz)[0], np.arange(z.size), lo, hi, self.n_quad
        )
        q = np.bincount(rows, weights=q, minlength=z.size)
        return np.where(near, whole - q, q)

    def _tail(self, Z, sellers):
        """int_z^{c_high} eps_i for each entry: the rest of z's piece by Gauss-Legendre
        (the midpoint rule in a sliver), the later pieces from the curve.  Rows that
        share a curve are looked up together, once per distinct z."""
        out = np.zeros(Z.shape)
        ncol = Z.shape[1]
        who, z, st, e, whole, kind, after, back = [], [], [], [], [], [], [], []
        done = 0
        for (s, en, kd, tails), rows in self._groups(sellers):
            zr = Z[rows]
            j = np.searchsorted(s, zr, side="right") - 1  # piece holding z (j >= 0: covered)
            inside = zr < en[j]
            nxt = np.append(tails, 0.0)[j + 1]
            # past the curve's end eps_i = 0 from there on: the tail stays 0
            out[rows] = np.where(inside, nxt, 0.0)
            rr, cc = np.nonzero(inside)
            zs = zr[rr, cc]
            inv = np.arange(zs.size)
            if rows.size > 1:  # a shared curve: the rest of the piece depends on z only
                zs, inv = np.unique(zs, return_inverse=True)
            jz = np.searchsorted(s, zs, side="right") - 1
            who.append(np.full(zs.size, sellers[rows[0]]))
            z.append(zs)
            st.append(s[jz])
            e.append(en[jz])
            whole.append(tails[jz] - np.append(tails, 0.0)[jz + 1])  # int over z's piece
            kind.append(kd[jz])
            after.append(rows[rr] * ncol + cc)
            back.append(done + inv)
            done += zs.size
        if not who:
            return out
        who, z, st, e, whole, kind, after, back = (
            np.concatenate(x) for x in (who, z, st, e, whole, kind, after, back)
        )
        part = np.zeros(z.size)
        shape, jac = gauss_legendre_cos(self.n_quad)
        gl = np.flatnonzero(kind == 0)
        if gl.size:
            part[gl] = self._rest_of_piece(who[gl], st[gl], z[gl], e[gl], whole[gl])
        mid = np.flatnonzero(kind == 1)
        if mid.size:
            part[mid] = (e[mid] - z[mid]) * _finite(
                self._alloc(who[mid], 0.5 * (z[mid] + e[mid]))[0]
            )
        out.ravel()[after] += part[back]
        return out
