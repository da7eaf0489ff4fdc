"""The offline data-independent mechanism (Algorithm 2, Eq. 11 of 003), solved exactly.

Problem (Eq. 11, 003), with x_i = gamma * psi_i:

    min_{a, eta}  mu ||a||_2 + sigma / eta + eta * sum_i a_i x_i
    s.t. a >= 0, sum_i a_i = 1, a_i <= kappa = k/m,  eta > 0,   eps = a * eta.

For fixed ``a`` the best eta is sqrt(sigma / x.a), so the problem is
min_a mu ||a|| + 2 sqrt(sigma x.a): not convex (sqrt of a linear map is
concave), so a local method is not enough.  For fixed eta it is convex in a,
and its KKT conditions give a_i = min(kappa, rho (lam - x_i)^+) (Eq. 13, 003,
plus the cap): sorted by x, the first sellers are at the cap, a middle band is
linear in x, the rest get nothing.  On each "cell" (c capped groups, n active
groups) every sum is a prefix sum, and the stationarity condition in
u = lam - mean(mid x) is the depressed cubic (Eq. 14, 003 when c = 0)

    A u^3 + (s N V - C1 - R m1) u + R V = 0,
    s = sigma/mu^2, N = #mid, m1, V = mean, variance of mid x,
    R = 1 - c_count*kappa, C1 = kappa * sum(capped x), A = s N (1 + c_count kappa^2 N / R^2).

The global minimiser is a KKT point, so it is one of the at most two positive
roots of one of these cubics whose (lam, tau = kappa/rho) is consistent with
the cell.  The cells that can hold a KKT point lie on a monotone staircase
(as tau grows, lam grows and lam - tau falls), found by a vectorised binary
search: O(m log m) in all, dominated by the sort.  The winning root is then
re-solved from exact (two-pass) sums of its cell.

Without a cap (k=None) kappa = 1 and only c = 0 cells matter.

Two backends compute the same thing: the vectorised numpy code below (the
reference) and compiled scalar kernels in ``_offline_kernel`` (numba; one
streaming pass, a galloping staircase search).  ``backend="auto"`` uses the
kernel from ``KERNEL_MIN_M`` sellers on when numba works, else numpy.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass

import numpy as np

from ..errors import MarketSimError
from ..privacy.limit import scaled, weights

__all__ = [
    "OfflineResult",
    "solve",
    "solve_eta_grid",
    "proxy_loss",
    "proxy_loss_of_eps",
    "buyer_loss",
    "check_params",
]


@dataclass(frozen=True)
class OfflineResult:
    """Outcome of the offline mechanism, arrays in the input order.

    ``lam`` is the cut-off of Eq. 13 (003): seller i is bought (eps_i > 0)
    iff gamma * psi_i < lam.  ``n_bought`` counts sellers with eps_i > 0.
    """

    eps: np.ndarray
    a: np.ndarray
    eta: float
    lam: float
    proxy_loss: float
    n_bought: int


def check_params(
    mu: float, sigma: float, gamma: float, k: float | None = None, *, allow_zero: bool = False
) -> None:
    for name, v in (("mu", mu), ("sigma", sigma), ("gamma", gamma)):
        ok = isinstance(v, (int, float, np.floating, np.integer)) and np.isfinite(v)
        if not (ok and (v >= 0 if allow_zero else v > 0)):
            bound = ">= 0" if allow_zero else "> 0"
            raise MarketSimError(f"{name} must be a finite number {bound} (got {v!r})")
    if k is not None and not (np.isfinite(k) and k >= 1):
        raise MarketSimError(f"k must be >= 1 (got {k!r}); a_i <= k/m needs k*m/m >= 1")


_BAD_PSI = "virtual costs must not be NaN or -inf"


def _as_psi(psi, *, check_values: bool = True) -> np.ndarray:
    psi = np.asarray(psi, dtype=float)
    if psi.ndim != 1 or psi.size == 0:
        raise MarketSimError("psi must be a non-empty 1-D array of virtual costs")
    if check_values and (np.isnan(psi).any() or np.isneginf(psi).any()):
        raise MarketSimError(_BAD_PSI)
    return psi


def proxy_loss(a, eta, psi, *, mu, sigma, gamma) -> float:
    """Eq. 11 (003) at (a, eta): mu ||a|| + sigma/eta + gamma eta sum a_i psi_i; at
    eta = +inf (the zero-cost limit) sigma / eta = 0 and eta x 0 = 0."""
    a = np.asarray(a, dtype=float)
    psi = np.asarray(psi, dtype=float)
    lin = float(np.dot(a[a > 0], psi[a > 0]))
    return float(mu * np.linalg.norm(a) + sigma / eta + gamma * float(scaled(lin, eta)))


def proxy_loss_of_eps(eps, psi, *, mu, sigma, gamma) -> float:
    """Eq. 11 (003) of what was bought: eta = sum eps, a = eps / eta (inf if nothing);
    eps_i = +inf entries read as their limit (``privacy.limit.weights``)."""
    a, eta = weights(eps)
    if eta <= 0:
        return np.inf
    return proxy_loss(a, eta, psi, mu=mu, sigma=sigma, gamma=gamma)


def buyer_loss(eps, payments, *, mu: float, sigma: float, gamma: float) -> float:
    """What the buyer loses: Eq. 11 (003) with the payments made in place of the virtual
    costs, mu ||eps|| / eta + sigma / eta + gamma sum t_i, eta = sum eps; inf when
    nothing is bought (the proxy loss with zero virtual costs, plus gamma times the
    payments).  ``compare`` ranks by it (``market_sim.comparison.objective``)."""
    eps = np.asarray(eps, dtype=float)
    data = proxy_loss_of_eps(eps, np.zeros_like(eps), mu=mu, sigma=sigma, gamma=gamma)
    return float(data + gamma * np.sum(payments))


# ---- the cubic -----------------------------------------------------------------
def _positive_roots(A, p, q):
    """Positive roots of A u^3 + p u + q = 0 with A > 0, q >= 0 (NaN when absent).

    With q >= 0 the roots sum to 0 and multiply to -q/A, so there are either
    none or two positive ones; the larger comes from the trigonometric form,
    the smaller from the quadratic left after deflation (no cancellation).
    """
    with np.errstate(all="ignore"):
        P = p / A
        Qc = q / A
        ok = (P < 0) & (4 * P**3 + 27 * Qc**2 <= 0)
        Pm = np.where(ok, P, -1.0)
        r = 2 * np.sqrt(-Pm / 3)
        x = np.clip(1.5 * Qc / Pm * np.sqrt(-3 / Pm), -1.0, 1.0)
        u0 = r * np.cos(np.arccos(x) / 3)
        t = Qc / u0
        u1 = 2 * t / (u0 + np.sqrt(u0 * u0 + 4 * t))
    nan = np.nan
    return np.where(ok & (u0 > 0), u0, nan), np.where(ok & (u1 > 0), u1, nan)


def _newton(A, p, q, u, steps=3):
    for _ in range(steps):
        f = (A * u * u + p) * u + q
        d = 3 * A * u * u + p
        if d == 0:
            break
        u = u - f / d
    return u


# ---- grouping -----------------------------------------------------------------
@dataclass(frozen=True)
class _Groups:
    """Sorted finite values, grouped by equal value, with shifted prefix sums."""

    xs: np.ndarray  # sorted values
    v: np.ndarray  # distinct values (U,)
    w: np.ndarray  # multiplicities (U,)
    start: np.ndarray  # first sorted position of each group
    ref: float  # shift of the prefix sums (their accuracy needs it)
    Nw: np.ndarray  # prefix counts (U+1,)
    S1: np.ndarray  # prefix sums of w (v - ref)
    S2: np.ndarray  # prefix sums of w (v - ref)^2

    @classmethod
    def of(cls, xs: np.ndarray) -> _Groups:
        new = np.empty(xs.size, dtype=bool)
        new[0] = True
        np.not_equal(xs[1:], xs[:-1], out=new[1:])
        if new.all():
            start, v, w = np.arange(xs.size), xs, np.ones(xs.size)
        else:
            start = np.flatnonzero(new)
            v = xs[start]
            w = np.diff(np.append(start, xs.size)).astype(float)
        ref = float(v[0])
        y = v - ref
        zero = np.zeros(1)
        return cls(
            xs,
            v,
            w,
            start,
            ref,
            np.concatenate((zero, np.cumsum(w))),
            np.concatenate((zero, np.cumsum(w * y))),
            np.concatenate((zero, np.cumsum(w * y * y))),
        )

    def stats(self, g0: int, g1: int):
        """Exact count, mean, variance and sum of the values in groups [g0, g1)."""
        end = self.start[g1] if g1 < len(self.start) else self.xs.size
        seg = self.xs[self.start[g0] : end] if g0 < len(self.start) else self.xs[:0]
        if seg.size == 0:
            return 0, 0.0, 0.0, 0.0
        mean = float(np.mean(seg))
        return seg.size, mean, float(np.mean((seg - mean) ** 2)), float(np.sum(seg))

    def value(self, g):
        """v_g for 1-based g, -inf for g = 0 and +inf past the last group."""
        g = np.asarray(g)
        U = len(self.v)
        out = self.v[np.clip(g - 1, 0, U - 1)]
        return np.where(g < 1, -np.inf, np.where(g > U, np.inf, out))


# ---- cells --------------------------------------------------------------------
def _staircase(G: _Groups, Q: float) -> np.ndarray:
    """c*(j), j = 1..U+1: number of capped groups when lam = v_j (v_{U+1} = inf).

    At lam = v_j the band width tau solves sum_g w_g min(tau, d_g) = Q tau with
    d_g = v_j - v_g; the capped groups are those with d_g >= tau, i.e. the c
    with F(d_c) = (N_c - Q) d_c + sum_{c<g<j} w_g d_g <= 0 (monotone in c).
    """
    U = len(G.v)
    j = np.arange(1, U + 2)
    cstar = j - 1  # before the path starts (too few sellers): all active capped
    started = G.Nw[np.minimum(j - 1, U)] > Q * (1 + 1e-12)
    js = j[started & (j <= U)]
    if js.size:
        yj = G.v[js - 1] - G.ref
        lo = np.zeros(js.size, dtype=np.int64)
        hi = js - 1
        while True:
            active = lo < hi
            if not active.any():
                break
            mid = (lo + hi + 1) // 2
            Nc = G.Nw[mid]
            yc = G.v[np.maximum(mid, 1) - 1] - G.ref
            F = (Nc - Q) * (yj - yc) + (G.Nw[js - 1] - Nc) * yj - (G.S1[js - 1] - G.S1[mid])
            ok = F <= 0
            lo = np.where(active & ok, mid, lo)
            hi = np.where(active & ~ok, mid - 1, hi)
        cstar[js - 1] = lo
    if started[-1]:
        cstar[-1] = 0
    return cstar


def _cells(G: _Groups, kappa: float) -> tuple[np.ndarray, np.ndarray]:
    """(c, n) pairs (numbers of capped and of active groups) that may hold a KKT point."""
    U = len(G.v)
    n_all = np.arange(1, U + 1)
    if kappa >= 1.0:
        return np.zeros(U, dtype=np.int64), n_all
    cs = _staircase(G, 1.0 / kappa)
    lo = np.maximum(np.minimum(cs[:-1], cs[1:]) - 1, 0)
    hi = np.minimum(np.maximum(cs[:-1], cs[1:]) + 1, n_all - 1)
    cnt = np.maximum(hi - lo + 1, 0)
    n = np.repeat(n_all, cnt)
    offs = np.arange(n.size) - np.repeat(np.cumsum(cnt) - cnt, cnt)
    return (np.repeat(lo, cnt) + offs).astype(np.int64), n


@dataclass(frozen=True)
class _Candidates:
    """Valid KKT candidates: cell (c, n), root u, cut-off lam, loss / mu."""

    c: np.ndarray
    n: np.ndarray
    u: np.ndarray
    lam: np.ndarray
    loss: np.ndarray


def _cubic_coefficients(Nc, N, m1, V, C1, kappa, s):
    R = 1.0 - Nc * kappa
    with np.errstate(all="ignore"):
        A = s * N * (1 + Nc * kappa**2 * N / R**2)
        p = s * N * V - C1 - R * m1
    return R, A, p, R * V


def _cell_candidates(G: _Groups, c, n, kappa: float, s: float) -> _Candidates:
    """Roots of the cells' cubics that are consistent with their cell.

    A cheap screen first keeps the cells whose admissible u-interval can hold
    a root: there g(u) = A u^2 + p + q/u (= cubic / u) is convex, so a root
    needs g >= 0 at an end and g <= 0 at an end or at its minimum.
    """
    Nc = G.Nw[c]
    N = G.Nw[n] - Nc
    with np.errstate(all="ignore"):
        d1 = (G.S1[n] - G.S1[c]) / N
        V = np.maximum((G.S2[n] - G.S2[c]) / N - d1 * d1, 0.0)
    m1 = d1 + G.ref
    C1 = kappa * (G.S1[c] + G.ref * Nc)
    R, A, p, q = _cubic_coefficients(Nc, N, m1, V, C1, kappa, s)
    v_n, v_next = G.value(n), G.value(n + 1)
    scale = 1e-9 * (np.abs(G.v[0]) + np.abs(G.v[-1]) + 1e-300)
    with np.errstate(all="ignore"):
        uL, uR = v_n - m1, v_next - m1
        if kappa < 1.0:  # band lam - tau in [v_c, v_{c+1}), tau = kappa N u / R
            beta = 1.0 - kappa * N / R
            v_c, v_c1 = G.value(c), G.value(c + 1)
            b0, b1 = (v_c - m1) / beta, (v_c1 - m1) / beta
            inside = (v_c <= m1) & (m1 < v_c1)
            lo_b = np.where(beta > 0, b0, np.where(beta < 0, b1, np.where(inside, -np.inf, np.inf)))
            hi_b = np.where(beta > 0, b1, np.where(beta < 0, b0, np.where(inside, np.inf, -np.inf)))
            uL, uR = np.maximum(uL, lo_b), np.minimum(uR, hi_b)
        uL = np.maximum(uL - scale, 0.0)
        uR = uR + scale
        good = (N > 0) & (R > 0) & (uR > uL)
        gL = np.where(uL > 0, A * uL * uL + p + q / uL, np.where(q > 0, np.inf, p))
        gR = np.where(np.isfinite(uR), A * uR * uR + p + q / uR, np.inf)
        ust3 = q / (2 * A)
        interior = good & (ust3 > uL**3) & (ust3 < uR**3)
    gmin = np.minimum(gL, gR)
    if interior.any():
        ii = np.flatnonzero(interior)
        us = np.cbrt(ust3[ii])
        gmin[ii] = np.minimum(gmin[ii], A[ii] * us * us + p[ii] + q[ii] / us)
    tol = 1e-10 * (np.abs(p) + np.where(np.isfinite(gL), np.abs(gL), 0.0))
    keep = np.flatnonzero(good & (gmin <= tol) & (np.maximum(gL, gR) >= -tol))

    c, n, Nc, N, R, m1, V, C1, A, p, q = (z[keep] for z in (c, n, Nc, N, R, m1, V, C1, A, p, q))
    v_n, v_next = G.value(n), G.value(n + 1)
    v_c, v_c1 = G.value(c), G.value(c + 1)
    out = []
    for u in _positive_roots(A, p, q):
        with np.errstate(all="ignore"):
            lam = m1 + u
            # relative to the cell's own values: a huge value elsewhere (a virtual cost
            # near the top of a support where psi -> inf) must not widen it
            tol = 1e-11 * (np.abs(lam) + np.abs(m1) + 1e-300)
            valid = (u > 0) & (lam > v_n - tol) & (lam <= v_next + tol)
            if kappa < 1.0:
                band = lam - kappa * N * u / R
                valid &= (band >= v_c - tol) & (band < v_c1 + tol)
            rho = R / (N * u)
            norm_a = np.sqrt(Nc * kappa**2 + rho * rho * N * (u * u + V))
            lin = C1 + R * (m1 * u - V) / u
            valid &= lin > 0
            loss = norm_a + 2 * np.sqrt(s * lin)
        out.append((valid, u, lam, loss))
    valid = np.concatenate([o[0] for o in out])
    pick = lambda i: np.concatenate([o[i] for o in out])[valid]  # noqa: E731
    return _Candidates(
        np.concatenate((c, c))[valid], np.concatenate((n, n))[valid], pick(1), pick(2), pick(3)
    )


def _best_candidate(G: _Groups, kappa: float, s: float, chunk: int = 1 << 18) -> _Candidates:
    """The least-loss candidate over all cells, screened ``chunk`` cells at a time so
    that the temporaries of the screen stay small next to the m-sized arrays."""
    c, n = _cells(G, kappa)
    best = None
    for i in range(0, c.size, chunk):
        cand = _cell_candidates(G, c[i : i + chunk], n[i : i + chunk], kappa, s)
        if cand.loss.size:
            j = int(np.argmin(cand.loss))
            if best is None or cand.loss[j] < best.loss[0]:
                best = _Candidates(
                    *(np.array([getattr(cand, f)[j]]) for f in ("c", "n", "u", "lam", "loss"))
                )
    if best is None:
        empty = np.empty(0)
        return _Candidates(empty.astype(np.int64), empty.astype(np.int64), empty, empty, empty)
    return best


def _greedy(G: _Groups, kappa: float):
    """Cheapest feasible allocation of x.a: groups at the cap in x order, the
    marginal group sharing what is left.  Returns (marginal group, its share)."""
    cum = G.Nw[1:] * kappa
    g = min(int(np.searchsorted(cum, 1.0 - 1e-12)), len(G.v) - 1)
    share = (1.0 - G.Nw[g] * kappa) / G.w[g]
    return g, share


def solve(
    psi, *, mu: float, sigma: float, gamma: float, k: float | None = None, backend: str = "auto"
) -> OfflineResult:
    """Global minimiser of Eq. 11 (003) for virtual costs ``psi``.

    ``k`` adds the cap a_i <= k/m (Remark IV.1, 003); ``k=None`` or k >= m
    means no cap.  Sellers with psi = +inf are never bought.  When sellers
    with psi = 0 can take all of the weight and no finite eta does better, the
    problem has no minimiser (the loss tends to mu ||a|| as eta -> inf); the
    outcome is then the limit of the optimum (``_zero_cost_limit``): eps = +inf
    for those sellers, eta = +inf.

    ``backend``: ``"numpy"`` (the vectorised reference), ``"numba"`` (the
    compiled kernel; an error if numba does not work) or ``"auto"`` (the kernel
    from ``KERNEL_MIN_M`` sellers on, numpy below or when numba does not work,
    which is said once by a ``RuntimeWarning``).  Both give the same result to
    rounding (~1e-15 relative).
    """
    check_params(mu, sigma, gamma, k)
    if backend not in ("auto", "numpy", "numba"):
        raise MarketSimError(f"unknown backend {backend!r} (auto, numpy or numba)")
    psi = _as_psi(psi, check_values=False)  # the values: by the kernel's first pass or below
    m = psi.size
    kappa = 1.0 if (k is None or k >= m) else float(k) / m
    if backend == "numba" or (backend == "auto" and m >= KERNEL_MIN_M):
        kern = _kernel()
        if kern is not None:
            return _solve_kernel(kern, psi, float(mu), float(sigma), float(gamma), kappa)
        if backend == "numba":
            raise MarketSimError(f"backend='numba' is unavailable: {_kernel_error}")
    psi = _as_psi(psi)
    x = gamma * psi
    xs = np.sort(x[np.isfinite(x)])
    if xs.size * kappa < 1 - 1e-12:
        raise MarketSimError(
            f"only {xs.size} sellers have a finite virtual cost; the cap a_i <= k/m cannot sum to 1"
        )
    G = _Groups.of(xs)
    s = sigma / mu**2

    g_marg, share = _greedy(G, kappa)
    w_head = G.w[:g_marg]
    lin_greedy = kappa * float(np.dot(w_head, G.v[:g_marg])) + share * G.w[g_marg] * G.v[g_marg]
    if lin_greedy < 0:
        raise MarketSimError(
            "the problem is unbounded below: sellers with negative virtual "
            "cost can absorb all of the weight"
        )
    norm_greedy = np.sqrt(kappa**2 * w_head.sum() + share**2 * G.w[g_marg])
    best_loss = norm_greedy + 2 * np.sqrt(s * lin_greedy)

    cand = _best_candidate(G, kappa, s)
    if lin_greedy == 0 and not (cand.loss.size and cand.loss.min() < best_loss):
        return _zero_cost_limit(x, mu)
    with np.errstate(invalid="ignore"):
        if cand.loss.size and cand.loss.min() < best_loss:
            i = int(np.argmin(cand.loss))
            a = _cell_allocation(G, x, kappa, s, int(cand.c[i]), int(cand.n[i]), float(cand.u[i]))
            lam_cut = a[1]
            a = a[0]
        else:
            v_m = G.v[g_marg]
            a = np.where(x < v_m, kappa, np.where(x == v_m, share, 0.0))
            lam_cut = float(G.v[g_marg + 1]) if g_marg + 1 < len(G.v) else np.inf
    a = a / a.sum()
    bought = a > 0
    lin = float(np.dot(a[bought], x[bought]))
    eta = float(np.sqrt(sigma / lin))
    eps = a * eta
    return OfflineResult(
        eps=eps,
        a=a,
        eta=eta,
        lam=float(lam_cut),
        proxy_loss=proxy_loss(a, eta, psi, mu=mu, sigma=sigma, gamma=gamma),
        n_bought=int(np.count_nonzero(eps)),
    )


def _zero_cost_limit(x: np.ndarray, mu: float) -> OfflineResult:
    """The outcome of Eq. 11 (003) when the w0 sellers of value x = 0 can absorb all the
    weight and no allocation with x.a > 0 does better (docs/mathematics.md, "Reports of
    virtual cost 0").  The infimum mu / sqrt(w0) is then not attained: it is the limit of
    a = uniform on the zero sellers, eta -> inf.  It is also the limit of the optimum of
    every nearby market whose zero values are raised to small positive ones, so it is
    the mechanism's outcome there: eps_i = +inf (the data released without noise) for
    the zero sellers, 0 for the others, eta = +inf, and the cut-off lam the least
    positive value (a seller is bought iff x_i < lam)."""
    zero = x == 0
    w0 = int(np.count_nonzero(zero))
    a = np.where(zero, 1.0 / w0, 0.0)
    above = x[(x > 0) & np.isfinite(x)]
    return OfflineResult(
        eps=np.where(zero, np.inf, 0.0),
        a=a,
        eta=np.inf,
        lam=float(above.min()) if above.size else np.inf,
        proxy_loss=float(mu / np.sqrt(w0)),  # sigma / eta -> 0 and eta x.a = 0
        n_bought=w0,
    )


def _cell_root(Nc, N, m1, V, sum_capped, kappa, s, u_guess):
    """Root u of the cell's cubic (Eq. 14, 003) nearest ``u_guess``, polished by Newton,
    from exact sums of the cell; returns (lam, rho) of Eq. 13 (003)."""
    R, A, p, q = _cubic_coefficients(Nc, N, m1, V, kappa * sum_capped, kappa, s)
    roots = [float(z[0]) for z in _positive_roots(np.array([A]), np.array([p]), np.array([q]))]
    roots = [z for z in roots if np.isfinite(z)]
    u = min(roots, key=lambda z: abs(z - u_guess)) if roots else u_guess
    u = _newton(A, p, q, u)
    return m1 + u, R / (N * u)


def _cell_allocation(G: _Groups, x, kappa, s, c: int, n: int, u_guess: float):
    """Allocation of cell (c, n), re-solved from exact sums; returns (a, lam)."""
    N, m1, V, _ = G.stats(c, n)
    Nc, _, _, sum_capped = G.stats(0, c)
    lam, rho = _cell_root(Nc, N, m1, V, sum_capped, kappa, s, u_guess)
    v_top = G.v[n - 1]
    v_cap = G.v[c - 1] if c > 0 else -np.inf
    with np.errstate(invalid="ignore"):
        a = np.where(
            x <= v_cap,
            kappa,
            np.where(x <= v_top, np.minimum(kappa, rho * np.maximum(lam - x, 0.0)), 0.0),
        )
    return a, lam


# ---- the compiled backend ------------------------------------------------------
#: Smallest m for which ``backend="auto"`` uses the compiled kernel.  Measured
#: (2026-11-24, 2 busy cores): once loaded, the kernel is 5-17x faster than numpy
#: at every m from 10 to 10^4 (0.07 vs 0.4 ms at m = 100), but its first use in a
#: process costs ~0.7 s to import numba and ~0.8 s to load the cached machine
#: code (9-18 s to compile with a cold cache).  Below a few thousand sellers a
#: numpy solve takes 0.4-5 ms, so one-off small markets stay on numpy (and keep
#: their results bit for bit); pass backend="numba" for many small solves.
KERNEL_MIN_M = 4096

_kernel_state = None  # the kernel module once loaded, False once it failed
_kernel_error = ""


def _import_kernel():
    """Import and compile (or load from cache) the kernel; raises if numba fails."""
    from . import _offline_kernel

    _offline_kernel.warm_up()
    return _offline_kernel


def _kernel():
    """The kernel module, or None (with one RuntimeWarning) if numba does not work."""
    global _kernel_state, _kernel_error
    if _kernel_state is None:
        try:
            _kernel_state = _import_kernel()
        except Exception as exc:  # ImportError, or any numba compilation error
            _kernel_state = False
            _kernel_error = f"{type(exc).__name__}: {exc}"
            warnings.warn(
                f"market_sim: the compiled offline solver is unavailable "
                f"({_kernel_error}); using the numpy solver",
                RuntimeWarning,
                stacklevel=3,
            )
    return _kernel_state or None


def _solve_kernel(K, psi, mu, sigma, gamma, kappa) -> OfflineResult:
    """``solve`` by the compiled kernel: same decisions as the numpy path, with the
    sorted values (8m bytes) and the two outputs as the only m-sized arrays."""
    psi = np.ascontiguousarray(psi)  # one compiled signature
    xs = _kernel_sorted_values(K, psi, gamma, kappa)
    s = sigma / mu**2
    if kappa >= 1.0:  # only c = 0 cells: one streaming pass
        best = _kernel_uncapped_best(K, xs, s, kappa)
    else:  # cells next to the staircase
        best = _kernel_capped_best(K, xs, s, kappa)
    if best.lin_greedy < 0:
        raise MarketSimError(
            "the problem is unbounded below: sellers with negative virtual "
            "cost can absorb all of the weight"
        )
    best_loss = best.norm_greedy + 2 * np.sqrt(s * best.lin_greedy)
    found = best.n > 0 and best.loss < best_loss
    if best.lin_greedy == 0 and not found:
        del xs
        return _zero_cost_limit(gamma * psi, mu)
    if found:  # re-solve the winning cell from exact sums
        N, m1, V, _ = K.seg_stats(xs, best.c_end, best.end)
        Nc, _, _, sum_capped = K.seg_stats(xs, 0, best.c_end)
        with np.errstate(all="ignore"):
            lam, rho = _cell_root(Nc, N, m1, V, sum_capped, kappa, s, float(best.u))
    del xs
    return _kernel_allocation(K, psi, mu, sigma, gamma, kappa, best, (lam, rho) if found else None)


@dataclass(frozen=True)
class _KernelBest:
    """The kernel's search: the best cell (n > 0: its marginal group's end ``n``, the
    sorted positions [c_end, end) of its band, root u and loss, values v_cap / v_top at
    the cap's and the band's top) and the greedy allocation (its marginal value v_m,
    share, x.a ``lin_greedy``, norm and cut-off lam)."""

    n: int
    c_end: int
    end: int
    u: float
    loss: float
    v_cap: float
    v_top: float
    share: float
    v_m: float
    lin_greedy: float
    norm_greedy: float
    lam_greedy: float


def _kernel_sorted_values(K, psi, gamma, kappa):
    """The finite values gamma psi, sorted; psi checked in the same pass."""
    m = psi.size
    xs = np.empty(m)
    n_finite, bad = K.scaled_finite(psi, gamma, xs)  # one pass: the checks and gamma psi
    if bad:
        raise MarketSimError(_BAD_PSI)
    xs = xs[:n_finite] if n_finite < m else xs
    xs.sort()
    if xs.size * kappa < 1 - 1e-12:
        raise MarketSimError(
            f"only {xs.size} sellers have a finite virtual cost; the cap a_i <= k/m cannot sum to 1"
        )
    return xs


def _kernel_uncapped_best(K, xs, s, kappa) -> _KernelBest:
    """kappa >= 1: only c = 0 cells, searched in one streaming pass."""
    n, end, u, loss, w0, v1 = K.uncapped_best(xs, s)
    # greedy (offline._greedy): all weight on the lowest group
    share = (1.0 - 0.0 * kappa) / w0
    v_m = float(xs[0])
    return _KernelBest(
        n=n, c_end=0, end=end, u=u, loss=loss, v_cap=-np.inf,
        v_top=float(xs[end - 1]) if n > 0 else np.nan,
        share=share, v_m=v_m,
        lin_greedy=kappa * 0.0 + share * w0 * v_m,
        norm_greedy=np.sqrt(kappa**2 * 0.0 + share**2 * w0),
        lam_greedy=float(v1),
    )  # fmt: skip


def _kernel_capped_best(K, xs, s, kappa) -> _KernelBest:
    """kappa < 1: the cells next to the staircase, those surely worse than the greedy
    allocation skipped."""
    U = K.count_groups(xs)
    v = xs if U == xs.size else np.empty(U)
    Nw, S1, S2 = np.empty(U + 1), np.empty(U + 1), np.empty(U + 1)
    K.group(xs, v, Nw, S1, S2, U != xs.size)
    g = K.greedy_group(Nw, U, kappa)
    wg = float(Nw[g + 1] - Nw[g])
    share = (1.0 - Nw[g] * kappa) / wg
    v_m = float(v[g])
    # as offline._greedy / solve do (np.dot), so that ties break the same way
    lin_greedy = kappa * float(np.dot(np.diff(Nw[: g + 1]), v[:g])) + share * wg * v_m
    norm_greedy = np.sqrt(kappa**2 * Nw[g] + share**2 * wg)
    # cells surely worse than the greedy allocation cannot change the outcome
    cutoff = norm_greedy + 2 * np.sqrt(s * lin_greedy) if lin_greedy >= 0 else np.inf
    c, n, u, loss = K.capped_best(v, Nw, S1, S2, U, kappa, s, float(cutoff))
    return _KernelBest(
        n=n, c_end=int(Nw[c]), end=int(Nw[n]), u=u, loss=loss,
        v_cap=float(v[c - 1]) if c > 0 else -np.inf,
        v_top=float(v[n - 1]) if n > 0 else np.nan,
        share=share, v_m=v_m, lin_greedy=lin_greedy, norm_greedy=norm_greedy,
        lam_greedy=float(v[g + 1]) if g + 1 < U else np.inf,
    )  # fmt: skip


def _kernel_allocation(K, psi, mu, sigma, gamma, kappa, best, root) -> OfflineResult:
    """Allocate by the winning cell's root (lam, rho), or greedily if ``root`` is None,
    and finish: eta, eps and the proxy loss of the normalised allocation."""
    m = psi.size
    a = np.empty(m)
    if root is not None:
        lam, rho = root
        sums = K.allocate(
            psi, gamma, kappa, best.v_cap, best.v_top, float(lam), float(rho), False, 0.0, 0.0, a
        )
        lam_cut = float(lam)
    else:
        sums = K.allocate(
            psi, gamma, kappa, -np.inf, -np.inf, 0.0, 0.0, True, best.v_m, float(best.share), a
        )
        lam_cut = best.lam_greedy
    total, lin_x, lin_psi, norm2 = sums  # of the unnormalised a; a / total sums to 1
    eta = float(np.sqrt(sigma / (lin_x / total)))  # best eta for a: sqrt(sigma / x.a)
    eps = np.empty(m)
    n_bought = K.finish(a, total, eta, eps)
    return OfflineResult(
        eps=eps,
        a=a,
        eta=eta,
        lam=lam_cut,  # Eq. 11 (003) at (a, eta)
        proxy_loss=float(
            mu * np.sqrt(norm2) / total + sigma / eta + gamma * eta * (lin_psi / total)
        ),
        n_bought=int(n_bought),
    )


# ---- the paper's method, kept as a baseline -------------------------------------
def project_capped_simplex(y: np.ndarray, cap: float = 1.0) -> np.ndarray:
    """Exact Euclidean projection of a vector onto {a: 0 <= a <= cap, sum a = 1}.

    a = clip(y - tau, 0, cap) with S(tau) = sum a piecewise linear and
    non-increasing; its breakpoints are y_i and y_i - cap.  S is evaluated at
    all of them by prefix sums, and tau is interpolated in the bracketing piece.
    """
    y = np.asarray(y, dtype=float)
    ys = np.sort(y)
    m = ys.size
    csum = np.concatenate([[0.0], np.cumsum(ys)])
    knots = np.unique(np.concatenate([ys, ys - cap]))

    def S(t):  # sum clip(y - t, 0, cap) at each t
        n_hi = m - np.searchsorted(ys - cap, t, side="right")  # y_i - cap > t: capped
        n_pos = m - np.searchsorted(ys, t, side="right")  # y_i > t: positive
        n_mid = n_pos - n_hi
        mid_sum = csum[m - n_hi] - csum[m - n_pos]
        return n_hi * cap + mid_sum - n_mid * t, n_mid

    s_knots, _ = S(knots)
    j = int(np.searchsorted(-s_knots, -1.0, side="left"))  # first knot with S <= 1
    j = min(max(j, 1), knots.size - 1)
    lo, hi = knots[j - 1], knots[j]
    s_lo, n_mid = S(np.array([0.5 * (lo + hi)]))
    # on (lo, hi), S(t) = S(mid) - n_mid (t - mid)
    mid = 0.5 * (lo + hi)
    tau = mid + (s_lo[0] - 1.0) / n_mid[0] if n_mid[0] > 0 else mid
    a = np.clip(y - tau, 0.0, cap)
    return a / a.sum()


def _project_capped_simplex(Y: np.ndarray, cap: float) -> np.ndarray:
    """Euclidean projection of each row onto {a: 0 <= a <= cap, sum a = 1}."""
    lo = (Y.min(axis=1) - cap)[:, None]
    hi = Y.max(axis=1)[:, None]
    for _ in range(100):  # bisection on the shift
        mid = 0.5 * (lo + hi)
        s = np.clip(Y - mid, 0, cap).sum(axis=1, keepdims=True)
        big = s > 1
        lo = np.where(big, mid, lo)
        hi = np.where(big, hi, mid)
    A = np.clip(Y - 0.5 * (lo + hi), 0, cap)
    return A / A.sum(axis=1, keepdims=True)


def solve_eta_grid(
    psi,
    *,
    mu: float,
    sigma: float,
    gamma: float,
    k: float | None = None,
    n_eta: int = 200,
    eta_max: float | None = None,
    n_iter: int = 500,
) -> OfflineResult:
    """The paper's method (Sec. IV, 003): a grid over eta in (0, L], and projected
    gradient descent over a for each eta.  Approximate; a baseline only.

    The default L is the largest eta any allocation can want,
    sqrt(sigma / (gamma min psi)).
    """
    check_params(mu, sigma, gamma, k)
    psi = _as_psi(psi)
    m = psi.size
    if not np.all(np.isfinite(psi)) or psi.min() <= 0:
        raise MarketSimError("solve_eta_grid needs finite, positive virtual costs")
    cap = 1.0 if (k is None or k >= m) else float(k) / m
    L = eta_max if eta_max is not None else float(np.sqrt(sigma / (gamma * psi.min())))
    etas = np.linspace(L / n_eta, L, n_eta)
    A = np.full((n_eta, m), 1.0 / m)
    step = 1.0 / (mu * np.sqrt(m) + 1e-300)  # ||a|| is sqrt(m)-smooth on the simplex
    lin = gamma * etas[:, None] * psi[None, :]
    for _ in range(n_iter):
        norm = np.linalg.norm(A, axis=1, keepdims=True)
        grad = mu * A / norm + lin
        A = _project_capped_simplex(A - step * grad, cap)
    losses = mu * np.linalg.norm(A, axis=1) + sigma / etas + gamma * etas * (A @ psi)
    b = int(np.argmin(losses))
    a, eta = A[b], float(etas[b])
    x = gamma * psi
    bought = a > 0
    lam = float(x[~bought].min()) if (~bought).any() else np.inf
    return OfflineResult(
        eps=a * eta,
        a=a,
        eta=eta,
        lam=lam,
        proxy_loss=proxy_loss(a, eta, psi, mu=mu, sigma=sigma, gamma=gamma),
        n_bought=int(bought.sum()),
    )
