"""Myerson payments of the offline mechanism (Lemma III.2 / Eq. 8, 003).

    t_i = c_i eps_i(c_i) + int_{c_i}^{c_high} eps_i(z, c_{-i}) dz

Eq. 8 integrates to infinity; reports live in the support, so the integral
stops at its top c_high.  This is the least payment that is IC and IR: a
seller at c_high gets exactly its cost (Eq. 8 with eps_i = 0 beyond c_high
gives the same number when eps_i(c_high) = 0, which is the usual case).

Seller i's allocation eps_i(z) is non-increasing in its own report z (the
exact optimum of a problem with a term gamma psi(z) eps_i is monotone), so the
integrand is positive on [c_i, z*) and 0 beyond a threshold z*.  It is smooth
except where the optimum changes cell (another seller enters or leaves the
active set, or the cap starts to bind): we find those points by a search on
the cell (checked again on each piece's quadrature nodes) and integrate each
smooth piece by Gauss-Legendre after z = a + (b-a)(1 - cos theta)/2, which
also smooths the square-root end of a branch of the optimum that ends in a
fold.  Unbought sellers are paid 0.

Evaluating eps_i(z) is a full solve of a market in which one value moved.
Without a cap this is cheap: the stationary points of the solution family are
the zeros of the continuous function

    phi(lam) = lam - s G(lam) - G(lam)/W(lam),  G = sum ((lam - x)^+)^2, W = sum (lam - x)^+

(Eq. 14, 003), and moving one seller changes phi by at most
delta(lam) = s L^2 + 2 L^2 / (W - L), L = lam - min x.  So the moved market
can only have zeros on the segments of the full market where |phi| <= delta;
those few segments (computed once) are searched exactly for every seller and
every quadrature point, with the others' prefix sums, in O(1) each.
With a cap (k given) we re-solve the whole market per evaluation (exact, but
O(m log m) per point: use it for m up to a few thousand).
"""

from __future__ import annotations

import numpy as np

from ..distributions import CostDistribution
from ..errors import MarketSimError
from .offline import _Groups, _positive_roots, check_params, solve
from .quadrature import gauss_legendre_cos

__all__ = ["offline_payments", "seller_utility"]

_SECTIONS = 15      # points per step of the search for piece ends
_REL_TOL = 1e-15    # piece ends are located to this relative width
_MAX_PIECES = 10_000
_SKIP = 1e-10        # relative width skipped past each change of piece


class _UncappedOracle:
    """eps_i when seller i (truthful value x_i = gamma psi_i) reports value p >= x_i."""

    sections = _SECTIONS  # vectorised: many points per step of the piece search

    def __init__(self, x: np.ndarray, mu: float, sigma: float):
        self.mu, self.sigma = mu, sigma
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
            Lr = v_next - G.v[0]
            WL = N * uL
            delta = np.where(WL > Lr, s * Lr * Lr + 2 * Lr * Lr / (WL - Lr), np.inf)
        slack = 1e-9 * (np.abs(phimin) + np.abs(phimax) + np.abs(m1))
        keep = ~((phimin > delta + slack) | (phimax < -delta - slack))
        self.K = n[keep]

    def eps(self, sellers, xi: np.ndarray, p: np.ndarray):
        """Vectorised over sellers: arrays xi (truthful values) and p (reported);
        ``sellers`` (their indices) is not needed here.

        Returns (eps_i, cell): cell identifies the smooth piece eps_i is on
        (-1 when seller i is not bought)."""
        G, s, K = self.G, self.s, self.K
        xi = xi[:, None]
        p = p[:, None]
        v_n, v_next = G.value(K)[None, :], G.value(K + 1)[None, :]
        inside = xi <= v_n  # seller i is in the full market's active set of segment K
        yi, yp = xi - G.ref, p - G.ref
        N0 = G.Nw[K][None, :] - inside
        S10 = G.S1[K][None, :] - inside * yi
        S20 = G.S2[K][None, :] - inside * yi * yi
        best_loss = np.full(xi.shape[0], np.inf)
        best_eps = np.zeros(xi.shape[0])
        best_cell = np.full(xi.shape[0], -1, dtype=np.int64)
        for active in (False, True):
            N, S1, S2 = (N0 + 1, S10 + yp, S20 + yp * yp) if active else (N0, S10, S20)
            lo = np.maximum(v_n, p) if active else v_n
            hi = v_next if active else np.minimum(v_next, p)
            with np.errstate(all="ignore"):
                d1 = S1 / N
                V = np.maximum(S2 / N - d1 * d1, 0.0)
                m1 = d1 + G.ref
                A = s * N
                good = (N > 0) & (hi > lo)
                roots = _positive_roots(np.where(good, A, 1.0), np.where(good, A * V - m1, 1.0),
                                        np.where(good, V, 0.0))
            for u in roots:
                with np.errstate(all="ignore"):
                    lam = m1 + u
                    tol = 1e-11 * (np.abs(lam) + np.abs(G.v[-1]))
                    lin = m1 - V / u
                    valid = good & (u > 0) & (lam > lo - tol) & (lam <= hi + tol) & (lin > 0)
                    loss = np.sqrt(u * u + V) / (np.sqrt(N) * u) + 2 * np.sqrt(s * lin)
                    loss = np.where(valid, loss, np.inf)
                    if active:
                        eps_i = np.sqrt(self.sigma / lin) * np.maximum(lam - p, 0.0) / (N * u)
                    else:
                        eps_i = np.zeros_like(loss)
                j = np.argmin(loss, axis=1)
                rows = np.arange(loss.shape[0])
                lj = loss[rows, j]
                better = lj < best_loss
                best_loss = np.where(better, lj, best_loss)
                best_eps = np.where(better, eps_i[rows, j], best_eps)
                best_cell = np.where(better, 2 * j + 1 if active else -1, best_cell)
        if not np.all(np.isfinite(best_loss)):
            raise RuntimeError("payment oracle found no KKT point; please report this market")
        return best_eps, np.where(best_eps > 0, best_cell, -1)


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
        m = self.psi.size
        for j, (i, pj) in enumerate(zip(sellers, p)):
            psi = self.psi.copy()
            psi[i] = pj / self.gamma
            res = solve(psi, **self.kw)
            out[j] = res.eps[i]
            at_cap = int(np.count_nonzero(res.a >= self.cap * (1 - 1e-12)))
            cell[j] = res.n_bought * (m + 1) + at_cap if out[j] > 0 else -1
        return out, cell


def offline_payments(costs, dist: CostDistribution, *, mu: float, sigma: float, gamma: float,
                     k: float | None = None, n_quad: int = 32, method: str = "auto"):
    """Allocations and Myerson payments of the offline mechanism.

    ``costs`` are the reported costs (truthful reports assumed; pass a
    misreport as the cost to get what that report earns).  Returns
    ``(eps, payments)``, numpy arrays in the input order.  ``method``:
    ``"auto"`` (the pruned exact oracle without a cap, re-solving with one),
    ``"pruned"`` or ``"resolve"`` (re-solve per evaluation; the reference).
    """
    return _payments(costs, dist, mu, sigma, gamma, k, n_quad, method, None)


def seller_utility(i: int, report: float, true_cost: float, costs, dist: CostDistribution, *,
                   mu: float, sigma: float, gamma: float, k: float | None = None,
                   n_quad: int = 32) -> float:
    """Utility t_i - c_i eps_i of seller ``i`` (true cost ``true_cost``) when it
    reports ``report`` and the others report ``costs[j]``: the IC test."""
    reports = np.array(costs, dtype=float)
    reports[i] = report
    eps, pay = _payments(reports, dist, mu, sigma, gamma, k, n_quad, "auto", np.array([i]))
    return float(pay[i] - true_cost * eps[i])


def _payments(costs, dist, mu, sigma, gamma, k, n_quad, method, only):
    check_params(mu, sigma, gamma, k)
    if not isinstance(dist, CostDistribution):
        raise MarketSimError("dist must be a CostDistribution (see parse_distribution)")
    if method not in ("auto", "pruned", "resolve"):
        raise MarketSimError(f"unknown payment method {method!r}")
    if int(n_quad) < 2:
        raise MarketSimError("n_quad must be >= 2")
    costs = dist.check_in_support(np.asarray(costs, dtype=float).ravel())
    if costs.size == 0:
        raise MarketSimError("no sellers")
    psi = dist.virtual_cost(costs)
    eps = solve(psi, mu=mu, sigma=sigma, gamma=gamma, k=k).eps
    pay = np.zeros_like(eps)
    bought = np.flatnonzero(eps > 0)
    if only is not None:
        bought = np.intersect1d(bought, only)
    if bought.size == 0:
        return eps, pay
    capped = k is not None and k < costs.size
    if method == "pruned" and capped:
        raise MarketSimError("the pruned payment oracle has no cap; use method='resolve'")
    if method == "resolve" or (method == "auto" and (capped or not np.all(np.isfinite(psi)))):
        oracle = _ResolveOracle(psi, mu, sigma, gamma, k)
    else:
        oracle = _UncappedOracle(gamma * psi, mu, sigma)
    xi = gamma * psi[bought]
    lo = costs[bought]
    top = dist.support[1]

    def alloc(idx, z):
        """(eps, cell) of bought sellers idx (positions in ``bought``) reporting z."""
        return oracle.eps(bought[idx], xi[idx], gamma * dist.virtual_cost(z))

    every = np.arange(lo.size)
    _, cell_top = alloc(every, np.full(lo.shape, top))
    cur, cur_cell = lo.copy(), alloc(every, lo)[1]
    integral = np.zeros(lo.shape)
    shape, jac = gauss_legendre_cos(n_quad)
    sections = oracle.sections
    frac = np.arange(1, sections + 1) / (sections + 1)

    def search(a, b, todo):
        """Shrink [a, b] to a change of cell, keeping cell(a) == cur_cell != cell(b)."""
        while todo.size:
            width = b[todo] - a[todo]
            todo = todo[width > _REL_TOL * (np.abs(a[todo]) + np.abs(b[todo]) + 1e-300)]
            if not todo.size:
                return
            z = a[todo, None] + (b[todo] - a[todo])[:, None] * frac[None, :]
            cells = alloc(np.repeat(todo, sections), z.ravel())[1].reshape(z.shape)
            changed = cells != cur_cell[todo, None]
            first = np.where(changed.any(axis=1), changed.argmax(axis=1), sections)
            rows = np.arange(todo.size)
            a_new = np.where(first > 0, z[rows, np.maximum(first - 1, 0)], a[todo])
            b_new = np.where(first < sections, z[rows, np.minimum(first, sections - 1)], b[todo])
            a[todo], b[todo] = a_new, b_new

    skip = _SKIP * (top - dist.support[0])
    pending = np.ones(lo.shape, dtype=bool)  # sellers still integrating (cur_cell >= 0)
    for _ in range(_MAX_PIECES):
        if not pending.any():
            break
        a, b = cur.copy(), np.full(lo.shape, top)
        todo = pending & (cur_cell != cell_top)
        search(a, b, np.flatnonzero(todo))
        end = np.where(todo, a, top)
        unchecked = pending.copy()
        while unchecked.any():
            # integrate [cur, end] if every quadrature node lies in cur's cell; a node
            # in another cell means the search stepped over a piece (cell A, B, A):
            # search again below that node
            ok = np.flatnonzero(unchecked)
            width = end[ok] - cur[ok]
            z = cur[ok, None] + width[:, None] * shape[None, :]
            vals, cells = (v.reshape(z.shape) for v in alloc(np.repeat(ok, shape.size), z.ravel()))
            stray = (cells != cur_cell[ok, None]) & (width[:, None] > 0)
            bad = stray.any(axis=1)
            good = ok[~bad]
            integral[good] += width[~bad] * (vals[~bad] @ jac)
            unchecked[good] = False
            redo = ok[bad]
            if redo.size:
                a[redo] = cur[redo]
                b[redo] = z[bad][np.arange(redo.size), stray[bad].argmax(axis=1)]
                todo[redo] = True
                search(a, b, redo)
                end[redo] = a[redo]
        # the next piece starts just past the change, skipping the ~1e-11 wide zone
        # where a solver may pick either of two cells that give the same eps; the
        # sliver [a, b + skip] is integrated by the midpoint rule.  A seller whose
        # piece ran to the top, or who is unbought from here on (monotonicity), is done
        pending &= todo
        idx = np.flatnonzero(pending)
        if idx.size:
            nxt = np.minimum(b[idx] + skip, top)
            integral[idx] += (nxt - a[idx]) * alloc(idx, 0.5 * (a[idx] + nxt))[0]
            cur[idx] = nxt
            cur_cell[idx] = alloc(idx, nxt)[1]
            pending &= cur_cell >= 0
    else:
        raise RuntimeError("payment integral: too many pieces; please report this market")
    pay[bought] = costs[bought] * eps[bought] + integral
    return eps, pay
