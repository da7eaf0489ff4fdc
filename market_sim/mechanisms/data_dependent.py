"""The data-dependent mechanism (Sec. VIII, Eq. 17 and Algorithm 4 of 003; Sec. 4 of 000).

    min_{w, a, eta}  sum_i a_i l_i(w) + 2 b.w / eta + (Lambda/2)||w||^2
                     + mu ||a||^2 + sigma / eta + gamma sum_i psi_i u(a_i eta)
    s.t. a >= 0, sum a = 1, a_i <= k/m,  eps_i = a_i eta,

with l_i(w) = log(1 + exp(-y_i w.x_i)) and u(eps) = eps**p, p >= 1 (the convex
costs of 000; p = 1 is Eq. 17 of 003).  As Algorithm 4 we search eta = m eps_avg
on a grid and solve the (w, a) problem for each eta.

Where we depart from the papers, and why:

* **The noise term.**  Algorithm 4 draws b once and keeps 2 b.w / eta in the
  objective.  Then min_w (2 b.w / eta + Lambda/2 ||w||^2) = -2 ||b||^2 / (Lambda eta^2),
  which goes to -infinity as eta -> 0: the realised noise *rewards* buying less
  privacy (on a grid, see below for when it wins).  The
  cost of noise is already in the objective as sigma / eta (Thm II.4's bound),
  and b has mean zero, so E_b[objective] drops the linear term exactly.  By
  default (``noise=None``) we minimise that expectation, which also keeps the
  allocation independent of the noise that Algorithm 1 later draws.  Passing a
  vector ``noise=b`` gives the literal Eq. 17.
  Whether the literal search really ends at the smallest eps_avg depends on the
  regime.  Completing the square, the literal optimum at eta is
  V(eta) = N(eta) + H(eta) with N(eta) = sigma/eta - 2||b||^2/(Lambda eta^2) and
  H(eta) = min_{w,a} sum a_i l_i(w) + Lambda/2 ||w - w_b||^2 + mu||a||^2 + cost,
  w_b = -2b/(Lambda eta); R(eta) <= H(eta) <= U(eta), R the a-block with zero
  losses and U the a-block with the losses at w_b (``literal_noise_bounds``).  The
  search ends at the bottom eta_0 of the grid if N(eta_0) + U(eta_0) <= N(eta) + R(eta)
  at every other grid point, and not if N(eta_0) + R(eta_0) > N(eta) + U(eta) at some.
  N(eta) < 0 exactly below eta_z = 2||b||^2 / (sigma Lambda) and N rises up to
  2 eta_z, then falls back to 0+, so when H varies little over a grid reaching well
  above eta_z the search ends at eta_0 iff sigma Lambda eta_0 < 2||b||^2
  (||b|| ~ Gamma(d, 1), about d).  On the
  Wisconsin rows (m = 341, d = 30, eps_avg from 0.01, 20 draws of b, mu and gamma over
  the study's grid) the bounds decide every case and agree with that rule: always the
  smallest eps_avg for Lambda <= 0.1 (sigma <= 1000) and for Lambda = 1, sigma <= 100;
  not the smallest for Lambda = 10, sigma = 100 in 19 draws of 20 (docs/data-dependent.md).
* **The projection.**  Algorithm 4 projects a onto {sum a = 1} only, which can
  make weights negative; Eq. 17 asks for 0 <= a_i <= k/m and that is what we
  project onto (exactly).
* **The optimiser.**  Not a fixed-step projected gradient.  For fixed eta and
  mu > 0 the a-block is strongly convex and solved exactly (a capped-simplex
  projection when p = 1, a nested bisection on its KKT conditions otherwise),
  and L-BFGS minimises the w-objective with a eliminated (Danskin's theorem
  gives its gradient).  The joint (w, a) problem is convex when 2 Lambda mu > m
  (Thm VIII.1), reported as ``jointly_convex``; otherwise the optimum is local.
  With mu = 0 (the papers' naive model) the a-block is a linear programme,
  solved greedily inside block-coordinate descent.  ``solve_many`` solves many
  virtual-cost vectors at once by a compiled modified Newton method on the same
  F(w) (``_dd_kernel``), from several starts; ``solve`` (L-BFGS-B) is its reference.
* **The log-weight form** a = e^z of 000 (Eq. 13, Thm 4.1) makes the objective
  convex in (w, z), but its constraint {z : sum e^z = 1} is not a convex set.
  ``parametrisation="log"`` therefore uses a = softmax(z), which satisfies the
  constraint identically, and optimises (w, z) jointly by L-BFGS (no cap; a_i
  can approach but not reach 0).  It is a cross-check of the exact solver.

The allocation depends on the data.  Is eps_i still non-increasing in seller
i's own cost, as Myerson's payments need for IC?  Seller i's report enters the
objective only through the term t u(eps_i), t = gamma psi(c_i).  If (x, x') are
*global* minimisers at (t, t'), adding the two optimality inequalities gives
(t - t') (u(eps_i) - u(eps_i')) <= 0, so eps_i is non-increasing in psi and hence
in c_i (psi is non-decreasing, ironed if need be), for any data and any grid.
The guarantee is only as good as the optimiser: below 2 Lambda mu > m the
problem need not be convex and a local optimum can break it.
``own_cost_response`` and ``monotonicity_violations`` measure it; a violation
is an IC failure to report.  The same term gives the Myerson integral exactly: the
optimal value V is a minimum of functions affine in t with slope u(eps_i), so
dV/dt = u(eps_i) (envelope theorem) although eps_i jumps where the best eps_avg
changes; the mechanism pays by it (``DataDependentMechanism``, payment_rule
"envelope"), and then a seller gains by misreporting r at cost c exactly by the
solver's shortfall at c against the point it found at r (docs/data-dependent.md).
Choosing a from the data also means the DP guarantee of Prop. II.2, which treats a
as fixed, does not cover what the allocation itself reveals.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import numpy as np
from scipy import optimize
from scipy.special import expit, softmax

from ..errors import MarketSimError
from ..learning.hetero_dp import weighted_logistic_fit
from .dd_curved import DEFAULT_PAYMENT_RTOL, curved_tail, psi_ceiling
from .offline import check_params, project_capped_simplex

__all__ = [
    "DataDependentResult",
    "ManyResult",
    "solve",
    "solve_many",
    "objective",
    "own_cost_response",
    "own_cost_outcomes",
    "monotonicity_violations",
    "myerson_payment",
    "PaymentPlan",
    "payment_plan",
    "envelope_tail",
    "curved_tails",
    "literal_noise_bounds",
    "DEFAULT_EPS_AVG_GRID",
]

DEFAULT_EPS_AVG_GRID = np.geomspace(0.01, 10.0, 31)
NEWTON_KAPPAS = (
    2.5,
    5.0,
    10.0,
    20.0,
)  # the extra chains' starts: kappa x the descent direction at w = 0
MERGE_TOL = 1e-7  # an upward chain this close to an earlier one's w stops (it would retrace it)


@dataclass(frozen=True)
class DataDependentResult:
    """Outcome of Eq. 17 (003).  ``profile[j]`` is the optimal value at
    ``eps_avg_grid[j]``; ``w`` is the model the mechanism optimised (noise-free
    unless ``noise`` was given), not the private model Algorithm 1 trains."""

    eps: np.ndarray
    a: np.ndarray
    eta: float
    w: np.ndarray
    objective: float
    eps_avg_grid: np.ndarray
    profile: np.ndarray
    jointly_convex: bool
    w_path: np.ndarray | None = None  # w at each grid point: a warm start for a nearby market


@contextmanager
def _blas_threads(n: int | None) -> Iterator[None]:
    """At most ``n`` BLAS threads inside (None: leave the pool alone).  L-BFGS-B's
    d = 5 steps call BLAS; a multi-threaded OpenBLAS on a busy 2-core machine spends
    ~0.5 ms per step waking threads, 50x the arithmetic (docs/data-dependent.md)."""
    if n is None:
        yield
        return
    from threadpoolctl import threadpool_limits

    with threadpool_limits(limits=n, user_api="blas"):
        yield


def _signed_rows(X, y) -> np.ndarray:
    X = np.asarray(X, dtype=float)
    y = np.asarray(y)
    if X.ndim != 2 or X.shape[0] == 0:
        raise MarketSimError("data: X must be a non-empty 2-D array")
    if y.shape != (X.shape[0],):
        raise MarketSimError(f"data: y has shape {y.shape}, expected ({X.shape[0]},)")
    if not np.all(np.isfinite(X)):
        raise MarketSimError("data: X contains NaN or infinite values")
    labels = set(np.unique(y).tolist())
    if not (labels <= {0, 1} or labels <= {-1, 1}):
        raise MarketSimError(f"data: labels must be in {{0, 1}} or {{-1, 1}}, got {sorted(labels)}")
    norm = np.linalg.norm(X, axis=1).max()
    if norm > 1 + 1e-9:
        raise MarketSimError(f"data: rows must have ||x|| <= 1 (largest is {norm:.6g})")
    return np.where(y > 0, 1.0, -1.0)[:, None] * X


def _losses(SX, w) -> np.ndarray:
    return np.logaddexp(0.0, -(SX @ w))


def _cost(psi, eps, p):
    return psi @ eps**p


def objective(
    w, a, eta, X, y, psi, *, mu, sigma, gamma, reg_lambda, noise=None, cost_exponent: float = 1.0
) -> float:
    """Eq. 17 (003) at (w, a, eta); the linear noise term only when ``noise`` is given."""
    noise = None if noise is None else np.asarray(noise, dtype=float)
    w, a, psi = (np.asarray(v, dtype=float) for v in (w, a, psi))
    return _value(
        _signed_rows(X, y),
        w,
        a,
        eta,
        psi,
        mu=mu,
        sigma=sigma,
        gamma=gamma,
        reg_lambda=reg_lambda,
        noise=noise,
        cost_exponent=cost_exponent,
    )


def _value(SX, w, a, eta, psi, *, mu, sigma, gamma, reg_lambda, noise, cost_exponent):
    val = (
        a @ _losses(SX, w)
        + 0.5 * reg_lambda * w @ w
        + mu * a @ a
        + sigma / eta
        + gamma * _cost(psi, a * eta, cost_exponent)
    )
    if noise is not None:
        val += 2.0 * noise @ w / eta
    return float(val)


def _project_simplex(v: np.ndarray) -> np.ndarray:
    """Euclidean projection onto {a >= 0, sum a = 1}: a = max(v - tau, 0), tau from the
    sorted prefix sums (Held, Wolfe & Crowder 1974); the uncapped case of
    ``project_capped_simplex`` in a few vector operations (it runs in every L-BFGS step)."""
    u = np.sort(v)[::-1]
    tau_k = (np.cumsum(u) - 1.0) / np.arange(1, v.size + 1)
    rho = int(np.flatnonzero(u > tau_k)[-1])  # u[0] > tau_k[0] always
    a = np.maximum(v - tau_k[rho], 0.0)
    return a / a.sum()


def _weights_block(loss, psi, eta, gamma, mu, p, cap):
    """argmin_a sum a_i loss_i + mu ||a||^2 + gamma sum psi_i (eta a_i)^p on the capped simplex."""
    m = loss.size
    if mu == 0 and p == 1:  # a linear programme: fill the cheapest sellers up to the cap
        order = np.argsort(loss + gamma * eta * psi, kind="stable")
        a = np.zeros(m)
        full = int(np.floor(1.0 / cap + 1e-12))
        a[order[:full]] = cap
        if full < m:
            a[order[full]] = 1.0 - full * cap
        return a
    if p == 1:
        target = -(loss + gamma * eta * psi) / (2 * mu)
        return _project_simplex(target) if cap >= 1 else project_capped_simplex(target, cap)
    scale = gamma * psi * p * eta**p  # d/da of gamma psi (eta a)^p = scale a^(p-1)

    def a_of(lam):  # KKT: loss_i + 2 mu a + scale_i a^(p-1) = lam, clipped to [0, cap]
        lo, hi = np.zeros(m), np.full(m, cap)
        for _ in range(60):
            mid = 0.5 * (lo + hi)
            big = loss + 2 * mu * mid + scale * mid ** (p - 1) > lam
            hi, lo = np.where(big, mid, hi), np.where(big, lo, mid)
        return 0.5 * (lo + hi)

    lo = float(loss.min())
    hi = float(np.max(loss + 2 * mu * cap + scale * cap ** (p - 1)))
    for _ in range(60):
        lam = 0.5 * (lo + hi)
        lo, hi = (lam, hi) if a_of(lam).sum() < 1 else (lo, lam)
    a = a_of(0.5 * (lo + hi))
    return a / a.sum()


def _solve_fixed_eta(SX, psi, eta, mu, gamma, lam, p, cap, w0, noise, tol, max_iter):
    """(w, a) for one eta.  With mu > 0 the a-block has a unique minimiser a*(w), so
    F(w) = min_a f(w, a) is differentiable with grad = sum a*_i grad l_i + ... (Danskin)
    and L-BFGS minimises it directly.  With mu = 0, block-coordinate descent."""
    linear = np.zeros(SX.shape[1]) if noise is None else 2.0 * noise / eta
    if mu > 0:

        def F(w):
            margin = SX @ w
            loss = np.logaddexp(0.0, -margin)
            a = _weights_block(loss, psi, eta, gamma, mu, p, cap)
            val = (
                a @ loss
                + mu * a @ a
                + gamma * _cost(psi, a * eta, p)
                + linear @ w
                + 0.5 * lam * w @ w
            )
            return val, -(SX.T @ (a * expit(-margin))) + linear + lam * w

        w = optimize.minimize(
            F,
            w0,
            jac=True,
            method="L-BFGS-B",
            options={"maxiter": 10_000, "gtol": tol, "ftol": 1e-15},
        ).x
        return w, _weights_block(_losses(SX, w), psi, eta, gamma, mu, p, cap)
    a = np.full(SX.shape[0], 1.0 / SX.shape[0])
    w = w0
    for _ in range(max_iter):
        w = weighted_logistic_fit(SX, a, lam, linear=linear, w0=w)
        a_new = _weights_block(_losses(SX, w), psi, eta, gamma, mu, p, cap)
        done = np.max(np.abs(a_new - a)) < tol
        a = a_new
        if done:
            break
    return w, a


def _solve_fixed_eta_log(SX, psi, eta, mu, gamma, lam, p, w0, noise):
    m, d = SX.shape
    linear = np.zeros(d) if noise is None else 2.0 * noise / eta

    def f(v):
        w, z = v[:d], v[d:]
        a = softmax(z)
        margin = SX @ w
        loss = np.logaddexp(0.0, -margin)
        val = a @ loss + linear @ w + 0.5 * lam * w @ w + mu * a @ a + gamma * psi @ (eta * a) ** p
        grad_w = -(SX.T @ (a * expit(-margin))) + linear + lam * w
        grad_a = loss + 2 * mu * a + gamma * psi * p * eta**p * a ** (p - 1)
        grad_z = a * (grad_a - a @ grad_a)  # softmax Jacobian
        return val, np.concatenate([grad_w, grad_z])

    v0 = np.concatenate([w0, np.zeros(m)])
    v = optimize.minimize(
        f,
        v0,
        jac=True,
        method="L-BFGS-B",
        options={"maxiter": 50_000, "gtol": 1e-11, "ftol": 1e-15},
    ).x
    return v[:d], softmax(v[d:])


def _checked_market(X, y, psi, mu, sigma, gamma, k, reg_lambda, cost_exponent):
    """(signed rows, psi) after the input checks shared by ``solve`` and
    ``literal_noise_bounds`` (mu = sigma = 0 allowed: the naive model)."""
    check_params(mu, sigma, gamma, k, allow_zero=True)
    SX = _signed_rows(X, y)
    m = SX.shape[0]
    psi = np.asarray(psi, dtype=float)
    if psi.shape != (m,) or not np.all(np.isfinite(psi)):
        raise MarketSimError(f"psi must be {m} finite virtual costs, one per row")
    if not (np.isfinite(reg_lambda) and reg_lambda > 0):
        raise MarketSimError("reg_lambda must be > 0")
    if not (np.isfinite(cost_exponent) and cost_exponent >= 1):
        raise MarketSimError("cost_exponent must be >= 1 (a convex cost u(eps) = eps**p)")
    return SX, psi


def solve(
    X,
    y,
    psi,
    *,
    mu: float,
    sigma: float,
    gamma: float,
    reg_lambda: float,
    k: float | None = None,
    eps_avg_grid=None,
    noise=None,
    cost_exponent: float = 1.0,
    parametrisation: str = "simplex",
    tol: float = 1e-9,
    max_iter: int = 200,
    w_start=None,
    blas_threads: int | None = 1,
) -> DataDependentResult:
    """Eq. 17 (003) by Algorithm 4 for rows X (||x|| <= 1), labels y in {0,1} or
    {-1,1}, and virtual costs psi.  See the module docstring for ``noise``.
    ``w_start`` (one w per grid point, e.g. a nearby market's ``w_path``) starts the
    solve at each eta there instead of at the previous eta's w: the same optimum
    to the solver's tolerance, in fewer steps."""
    with _blas_threads(blas_threads):
        return _line_search(
            X,
            y,
            psi,
            mu,
            sigma,
            gamma,
            reg_lambda,
            k,
            eps_avg_grid,
            noise,
            cost_exponent,
            parametrisation,
            tol,
            max_iter,
            w_start,
        )


def _line_search(
    X,
    y,
    psi,
    mu,
    sigma,
    gamma,
    reg_lambda,
    k,
    eps_avg_grid,
    noise,
    cost_exponent,
    parametrisation,
    tol,
    max_iter,
    w_start,
) -> DataDependentResult:
    """Algorithm 4's search over eps_avg, one (w, a) solve per grid point."""
    SX, psi = _checked_market(X, y, psi, mu, sigma, gamma, k, reg_lambda, cost_exponent)
    m, d = SX.shape
    if parametrisation not in ("simplex", "log"):
        raise MarketSimError("parametrisation must be 'simplex' or 'log'")
    noise = None if noise is None else np.asarray(noise, dtype=float)
    if noise is not None:
        if noise.shape != (d,):
            raise MarketSimError(f"noise must be a vector of length {d}")
    grid = DEFAULT_EPS_AVG_GRID if eps_avg_grid is None else np.asarray(eps_avg_grid, float)
    if grid.ndim != 1 or grid.size == 0 or not np.all(np.isfinite(grid)) or grid.min() <= 0:
        raise MarketSimError("eps_avg_grid must be a non-empty list of positive numbers")
    cap = 1.0 if (k is None or k >= m) else float(k) / m
    if parametrisation == "log" and cap < 1:
        raise MarketSimError("parametrisation='log' has no cap; use k=None")
    if w_start is not None:
        w_start = np.asarray(w_start, dtype=float)
        if w_start.shape != (grid.size, d):
            raise MarketSimError(f"w_start must have shape ({grid.size}, {d}), one w per eps_avg")
    kw = dict(
        mu=mu,
        sigma=sigma,
        gamma=gamma,
        reg_lambda=reg_lambda,
        noise=noise,
        cost_exponent=cost_exponent,
    )
    w = np.zeros(d)
    best: tuple[float, np.ndarray, np.ndarray, float] | None = None
    profile = []
    path = []
    for j, eps_avg in enumerate(grid):
        eta = m * float(eps_avg)
        if w_start is not None:
            w = w_start[j]
        if parametrisation == "log":
            w, a = _solve_fixed_eta_log(
                SX, psi, eta, mu, gamma, reg_lambda, cost_exponent, w, noise
            )
        else:
            w, a = _solve_fixed_eta(
                SX, psi, eta, mu, gamma, reg_lambda, cost_exponent, cap, w, noise, tol, max_iter
            )
        val = _value(SX, w, a, eta, psi, **kw)
        profile.append(val)
        path.append(w)
        if best is None or val < best[0]:
            best = (val, w, a, eta)
    assert best is not None  # the grid is non-empty (checked above)
    val, w, a, eta = best
    return DataDependentResult(
        eps=a * eta,
        a=a,
        eta=eta,
        w=w,
        objective=val,
        eps_avg_grid=grid.copy(),
        profile=np.array(profile),
        jointly_convex=bool(2 * reg_lambda * mu > m),
        w_path=np.array(path),
    )


@dataclass(frozen=True)
class ManyResult:
    """Eq. 17 (003) for B virtual-cost vectors on the same data: row b of each array is
    problem b's (``eps`` (B, m), ``eta`` (B,), ``objective`` (B,), ``profile`` (B, J),
    ``w`` (B, d)); ``n_reference``: rows solved by the scipy reference instead."""

    eps: np.ndarray
    eta: np.ndarray
    objective: np.ndarray
    profile: np.ndarray
    w: np.ndarray
    n_reference: int = 0
    certified_optimum: np.ndarray | None = None  # (B,) bool per row, None: not asked
    gap_bound: np.ndarray | None = None  # (B,) objective - a proved lower bound


def solve_many(
    X,
    y,
    psi_rows,
    *,
    mu: float,
    sigma: float,
    gamma: float,
    reg_lambda: float,
    eps_avg_grid=None,
    kappas=NEWTON_KAPPAS,
    tol: float = 1e-10,
    max_iter: int = 200,
    certify: bool = False,
    certify_tol: float | None = None,
) -> ManyResult:
    """``solve`` (p = 1, no cap, no noise, mu > 0) for every row of ``psi_rows`` by the
    compiled multi-start Newton solver (``_dd_kernel``): each eta's w-problem from the
    reference's start (w = 0 at the first eta, then the previous eta's w), from w = 0
    down the grid, and from kappa x the descent direction at w = 0 (the direction of
    L-BFGS-B's first step from there), the best objective kept per eta.  Below
    2 Lambda mu > m the problem has local optima, and no start set is proved to reach
    the reference's; docs/data-dependent.md gives the measured rate (it never ended
    worse on the instances tried; the test checks fresh ones).  Jointly convex (one
    optimum): the reference's chain only.  A row whose solve stalls is redone by
    ``solve`` and the better objective kept; without numba every row is."""
    SX, _ = _checked_market(X, y, np.zeros(len(X)), mu, sigma, gamma, None, reg_lambda, 1.0)
    m, d = SX.shape
    P = np.asarray(psi_rows, dtype=float)
    if P.ndim != 2 or P.shape[1] != m or not np.all(np.isfinite(P)):
        raise MarketSimError(f"psi_rows must be a (B, {m}) array of finite virtual costs")
    if not mu > 0:
        raise MarketSimError("solve_many needs mu > 0 (use solve for the naive model)")
    grid = DEFAULT_EPS_AVG_GRID if eps_avg_grid is None else np.asarray(eps_avg_grid, float)
    if grid.ndim != 1 or grid.size == 0 or not np.all(np.isfinite(grid)) or grid.min() <= 0:
        raise MarketSimError("eps_avg_grid must be a non-empty list of positive numbers")
    etas = m * grid
    B = P.shape[0]
    W, A = np.empty((B, d)), np.empty((B, m))
    best, profile, ok = np.zeros(B, dtype=np.int64), np.empty((B, grid.size)), np.zeros(B, bool)
    kernel = _kernel()
    if kernel is not None and B:
        convex = 2 * reg_lambda * mu > m
        ks = np.zeros(0) if convex else np.asarray(kappas, dtype=float)
        kernel.solve_rows(SX, gamma * P, etas, float(mu), float(sigma), float(reg_lambda), ks,
                          not convex, tol, tol, max_iter, MERGE_TOL, W, A, best, profile,
                          ok)  # fmt: skip
    eps = A * etas[best][:, None]
    redo = np.flatnonzero(~ok)
    for b in redo:
        ref = solve(X, y, P[b], mu=mu, sigma=sigma, gamma=gamma, reg_lambda=reg_lambda,
                    eps_avg_grid=grid)  # fmt: skip
        if not ok[b] and kernel is not None and profile[b].min() <= ref.objective:
            continue  # the kernel's stalled point is still the better one
        eps[b], W[b], profile[b] = ref.eps, ref.w, ref.profile
        best[b] = int(np.argmin(ref.profile))
    objective = profile[np.arange(B), best]
    if not certify:
        return ManyResult(eps, etas[best], objective, profile, W, int(redo.size))
    cert = _certify_rows(SX, gamma, P, etas, mu, sigma, reg_lambda, eps, objective, etas[best],
                         W, profile, certify_tol)  # fmt: skip
    return ManyResult(eps, cert[1], cert[2], profile, W, int(redo.size), cert[3], cert[4])


def _certify_rows(SX, gamma, P, etas, mu, sigma, lam, eps, objective, eta, W, profile, tol):
    """``dd_certify.certify`` on every row (in place: a row the search improved gets the
    better point): (eps, eta, objective, certified, gap)."""
    from .dd_certify import CERTIFY_TOL, certify

    tol = CERTIFY_TOL if tol is None else tol
    B = P.shape[0]
    ok, gap, eta = np.zeros(B, bool), np.empty(B), eta.copy()
    objective = objective.copy()
    for b in range(B):
        c = certify(SX, P[b], etas, mu=mu, sigma=sigma, gamma=gamma, reg_lambda=lam,
                    value=objective[b], eta=eta[b], a=eps[b] / eta[b], w=W[b], tol=tol)  # fmt: skip
        ok[b], gap[b] = c.certified, c.gap
        if c.improved:
            eps[b], eta[b], objective[b], W[b] = c.a * c.eta, c.eta, c.value, c.w
            j = int(np.argmin(np.abs(etas - c.eta)))
            profile[b, j] = min(profile[b, j], c.value)
    return eps, eta, objective, ok, gap


_kernel_state: object = None


def _kernel():
    """The compiled solver module, or None (one RuntimeWarning) if numba does not work."""
    global _kernel_state
    if _kernel_state is None:
        try:
            from . import _dd_kernel

            _kernel_state = _dd_kernel
        except Exception as exc:  # ImportError, or a numba compilation error
            import warnings

            _kernel_state = False
            warnings.warn(
                f"market_sim: the compiled data-dependent solver is unavailable ({exc}); "
                "using the scipy reference",
                RuntimeWarning,
                stacklevel=3,
            )
    return _kernel_state or None


def own_cost_response(
    i: int,
    X,
    y,
    costs,
    virtual_cost,
    report_grid,
    *,
    warm_start: bool = False,
    w_start=None,
    blas_threads: int | None = 1,
    **kw,
) -> np.ndarray:
    """eps_i when seller i reports each value of ``report_grid`` (others fixed).
    With ``warm_start`` each report's solve starts from the previous report's
    ``w_path`` (the first from ``w_start``, if given): only psi_i changed, so the
    optimum moved little.  Only where the optimum is unique (2 Lambda mu > m) is that
    the same allocation to the solver's tolerance; below it a warm start can end in
    another local optimum, and eps_i would depend on the order of the solves."""
    return own_cost_outcomes(i, X, y, costs, virtual_cost, report_grid, warm_start=warm_start,
                             w_start=w_start, blas_threads=blas_threads, **kw)[0]  # fmt: skip


def own_cost_outcomes(
    i: int,
    X,
    y,
    costs,
    virtual_cost,
    report_grid,
    *,
    warm_start: bool = False,
    w_start=None,
    blas_threads: int | None = 1,
    **kw,
) -> tuple[np.ndarray, np.ndarray]:
    """``own_cost_response``'s eps_i and the optimal value of Eq. 17 at each report
    (the value's derivative in gamma psi_i is eps_i: the envelope payments use it)."""
    costs = np.array(costs, dtype=float)
    if not 0 <= i < costs.size:
        raise MarketSimError(f"seller index {i} out of range")
    eps, value = [], []
    start = w_start if warm_start else None
    with _blas_threads(blas_threads):
        for r in np.asarray(report_grid, dtype=float):
            costs[i] = r
            res = solve(X, y, virtual_cost(costs), w_start=start, blas_threads=None, **kw)
            eps.append(res.eps[i])
            value.append(res.objective)
            if warm_start:
                start = res.w_path
    return np.array(eps), np.array(value)


def monotonicity_violations(
    i: int, X, y, costs, virtual_cost, report_grid, *, tol: float = 1e-6, **kw
) -> np.ndarray:
    """Reports on the increasing ``report_grid`` where eps_i *rose* by more than
    ``tol`` (relative to max eps_i): each is a failure of Myerson's monotonicity."""
    reports = np.sort(np.asarray(report_grid, dtype=float))
    eps = own_cost_response(i, X, y, costs, virtual_cost, reports, **kw)
    rise = np.diff(eps) > tol * max(eps.max(), 1e-300)
    return reports[1:][rise]


def myerson_payment(
    i: int, X, y, costs, dist, *, payment_rtol: float = DEFAULT_PAYMENT_RTOL, **kw
) -> float:
    """t_i = c_i eps_i(c_i) + int_{c_i}^{c_max} eps_i(z) dz (Lemma III.2, 003) for seller i
    of cost law ``dist`` (a CostDistribution or spec; c_max its top), the integral by the
    mechanism's rule (``payment_plan``, ``envelope_tail``: Eq. 17's value between psi's
    breaks and the ironing intervals' ends, exact; on curved pieces the adaptive rule
    of ``dd_curved`` to ``payment_rtol`` of each piece's integral), solved by ``solve``.
    IC only where eps_i is monotone; check with ``monotonicity_violations``."""
    from ..distributions import as_distribution

    if "n_nodes" in kw:
        raise MarketSimError(
            "myerson_payment no longer takes n_nodes: curved pieces are integrated to "
            "payment_rtol (docs/data-dependent.md, Payments)"
        )
    law = as_distribution(dist)
    costs = law.check_in_support(np.asarray(costs, dtype=float))
    if not 0 <= i < costs.size:
        raise MarketSimError(f"seller index {i} out of range")
    grid = kw.get("eps_avg_grid")
    eps_min = float(np.min(DEFAULT_EPS_AVG_GRID if grid is None else grid))
    ceiling = psi_ceiling([law], kw["mu"], kw["gamma"], kw["reg_lambda"], eps_min)
    psi = np.minimum(law.virtual_cost(costs), ceiling)
    base = solve(X, y, psi, **kw)
    if kw["gamma"] == 0:  # the report does not enter Eq. 17: eps_i is constant
        return float(law.support[1] * base.eps[i])
    plan = payment_plan(law)
    node_eps, node_val = own_cost_outcomes(i, X, y, psi, _as_psi, plan.x, **kw)

    def at(x):  # seller i's eps_i, Eq. 17's value and no certificate at virtual costs x
        e, v = own_cost_outcomes(i, X, y, psi, _as_psi, x, **kw)
        return e, v, np.full(e.size, np.nan)

    tails = curved_tails(plan, law, kw["gamma"], at, ceiling, payment_rtol)
    c = costs[i : i + 1]
    tail = envelope_tail(plan, kw["gamma"], c, psi[i : i + 1], np.array([base.objective]),
                         node_eps, node_val, tails)  # fmt: skip
    return float(c[0] * base.eps[i] + tail[0])


def _as_psi(x):
    """Virtual costs given directly (the payment nodes are solved at psi values)."""
    return np.asarray(x, dtype=float)


def literal_noise_bounds(
    X,
    y,
    psi,
    noise,
    *,
    mu: float,
    sigma: float,
    gamma: float,
    reg_lambda: float,
    k: float | None = None,
    eps_avg_grid=None,
    cost_exponent: float = 1.0,
) -> tuple[np.ndarray, np.ndarray, str]:
    """Bounds (lower, upper) on min_{w, a} of the literal Eq. 17 (realised ``noise`` b)
    at each point of ``eps_avg_grid``, and a verdict on where Algorithm 4's line search
    ends: ``"smallest"`` (upper at the first point <= lower at every other point),
    ``"not smallest"`` (lower at the first point > upper at some other point) or
    ``"undecided"``.  Both bounds are exact: N(eta) plus the a-block with zero losses
    (lower) or with the losses at w_b = -2b/(Lambda eta) (upper); see the module doc."""
    SX, psi = _checked_market(X, y, psi, mu, sigma, gamma, k, reg_lambda, cost_exponent)
    m, d = SX.shape
    b = np.asarray(noise, dtype=float)
    if b.shape != (d,) or not np.all(np.isfinite(b)):
        raise MarketSimError(f"noise must be a finite vector of length {d}")
    grid = DEFAULT_EPS_AVG_GRID if eps_avg_grid is None else np.asarray(eps_avg_grid, float)
    if grid.ndim != 1 or grid.size < 2 or not np.all(np.isfinite(grid)) or grid.min() <= 0:
        raise MarketSimError("eps_avg_grid must hold at least two positive numbers")
    grid = np.sort(grid)
    cap = 1.0 if (k is None or k >= m) else float(k) / m
    p = float(cost_exponent)
    lows: list[float] = []
    ups: list[float] = []
    for eps_avg in grid:
        eta = m * float(eps_avg)
        noise_part = sigma / eta - 2.0 * (b @ b) / (reg_lambda * eta**2)  # N(eta)
        for losses, out in (
            (np.zeros(m), lows),
            (_losses(SX, -2.0 * b / (reg_lambda * eta)), ups),
        ):
            a = _weights_block(losses, psi, eta, gamma, mu, p, cap)
            out.append(noise_part + a @ losses + mu * a @ a + gamma * _cost(psi, a * eta, p))
    lower, upper = np.array(lows), np.array(ups)
    if upper[0] <= lower[1:].min():
        verdict = "smallest"
    elif lower[0] > upper[1:].min():
        verdict = "not smallest"
    else:
        verdict = "undecided"
    return lower, upper, verdict


# ---- Myerson's integral between psi's breaks (the envelope payments) ------------------
FLAT, AFFINE, CURVED = 0, 1, 2  # a piece's kind: psi constant, affine, or neither


@dataclass(frozen=True)
class PaymentPlan:
    """How int_r^{top} eps_i(z) dz is assembled for one cost law (docs/data-dependent.md,
    Payments).  The support is cut at psi's breaks (where a mixture's part begins or
    ends) and at the ironing intervals' ends into pieces on which psi is continuous:
    ``FLAT`` (ironed: psi, hence eps_i, constant), ``AFFINE`` (int eps_i dz = Delta V /
    (gamma psi'), exact) or ``CURVED`` (an adaptive rule to a stated tolerance,
    ``dd_curved.curved_tail``: its solves depend on the others' reports, so it has no
    fixed nodes here).  Eq. 17 is solved at the virtual costs ``x`` (one-sided limits at
    the pieces' ends); piece k's nodes are x[start[k]:stop[k]], standing for the reports
    ``z``.  ``line`` is psi at each piece's start on an affine piece (psi = line +
    slope (z - a))."""

    support: tuple[float, float]
    a: np.ndarray
    b: np.ndarray
    kind: np.ndarray
    slope: np.ndarray
    line: np.ndarray
    start: np.ndarray
    stop: np.ndarray
    x: np.ndarray
    z: np.ndarray


def _cuts(dist) -> np.ndarray:
    """The support's ends, psi's breaks and the ironing intervals' ends, sorted."""
    lo, hi = dist.support
    ends = [e for a, b, _ in dist.iron_intervals for e in (a, b)]
    inner = [c for c in (*dist.breaks, *ends) if lo < c < hi]
    return np.unique(np.r_[lo, inner, hi])


def _piece_kind(dist, a: float, b: float) -> tuple[int, float, float, float]:
    """(kind, psi at a or the flat value, slope, flat value) of psi on (a, b)."""
    for ia, ib, value in dist.iron_intervals:
        if ia <= a and b <= ib:
            return FLAT, value, 0.0, value
    u = a + (b - a) * np.linspace(0.05, 0.95, 19)
    psi = dist.virtual_cost(u)
    if not np.all(np.isfinite(psi)):
        return CURVED, np.nan, np.nan, np.nan
    slope = (psi[-1] - psi[0]) / (u[-1] - u[0])
    line = psi[0] + slope * (a - u[0])
    affine = np.max(np.abs(psi - line - slope * (u - a))) <= 1e-12 * (1.0 + np.abs(psi).max())
    if affine and slope <= 1e-12 * (1.0 + abs(line)) / (b - a):
        return FLAT, line, 0.0, line
    return (AFFINE, line, slope, np.nan) if affine else (CURVED, np.nan, np.nan, np.nan)


def payment_plan(dist) -> PaymentPlan:
    """The pieces and Eq. 17's fixed solve points for ``dist`` (see ``PaymentPlan``): one
    node per flat piece (its constant), the two ends of an affine piece (the start of
    the first one only if psi at the support's bottom is off its line), none on a
    curved piece (``curved_tails`` solves there)."""
    cuts = _cuts(dist)
    cols: dict[str, list] = {k: [] for k in ("kind", "slope", "line", "start", "stop")}
    xs: list[np.ndarray] = []
    zs: list[np.ndarray] = []
    for k, (a, b) in enumerate(zip(cuts[:-1], cuts[1:], strict=True)):
        kind, line, slope, flat = _piece_kind(dist, float(a), float(b))
        if kind == FLAT:
            z, x = np.array([a]), np.array([flat])
        elif kind == AFFINE:
            at_a = float(dist.virtual_cost(a))
            need_a = k > 0 or abs(at_a - line) > 1e-12 * (1.0 + abs(line))
            z = np.array([a, b]) if need_a else np.array([b])
            x = line + slope * (z - a)
        else:
            z = x = np.zeros(0)
        n0 = sum(v.size for v in xs)
        xs.append(x)
        zs.append(z)
        for key, v in zip(cols, (kind, slope, line, n0, n0 + x.size), strict=True):
            cols[key].append(v)
    return PaymentPlan(
        (float(cuts[0]), float(cuts[-1])),
        cuts[:-1].astype(float),
        cuts[1:].astype(float),
        np.array(cols["kind"], dtype=np.int64),
        np.array(cols["slope"], dtype=float),
        np.array(cols["line"], dtype=float),
        np.array(cols["start"], dtype=np.int64),
        np.array(cols["stop"], dtype=np.int64),
        np.concatenate(xs),
        np.concatenate(zs),
    )


def curved_tails(plan: PaymentPlan, dist, gamma, solve, ceiling, rtol=DEFAULT_PAYMENT_RTOL):
    """{piece k: ``dd_curved.CurvedTail``} for each curved piece of ``plan`` (seller i of
    law ``dist``, the others' reports fixed inside ``solve``, see ``curved_tail``)."""
    pieces = np.flatnonzero(plan.kind == CURVED)
    ends = [(float(plan.a[k]), float(plan.b[k])) for k in pieces]
    return {
        int(k): curved_tail(dist, a, b, gamma, solve, ceiling, rtol)
        for k, (a, b) in zip(pieces, ends, strict=True)
    }


def _piece_integrals(plan: PaymentPlan, gamma, node_eps, node_val, tails) -> np.ndarray:
    """int of eps_i over each whole piece: eps times the length (flat), Delta V /
    (gamma psi') (affine: V's change between the piece's own ends, never across a
    break), the adaptive rule's total (curved, ``tails``)."""
    out = np.empty(plan.a.size)
    for k in range(plan.a.size):
        s, e = plan.start[k], plan.stop[k]
        if plan.kind[k] == FLAT:
            out[k] = node_eps[s] * (plan.b[k] - plan.a[k])
        elif plan.kind[k] == AFFINE:
            out[k] = (
                (node_val[e - 1] - node_val[s]) / (gamma * plan.slope[k]) if e - s == 2 else np.nan
            )
        else:
            out[k] = tails[k].total
    return out


def envelope_tail(plan: PaymentPlan, gamma, r, psi_r, value_r, node_eps, node_val, tails):
    """int_r^{top} eps_i(z) dz for reports r (virtual costs psi_r, Eq. 17's value value_r
    at each), Eq. 17's eps_i and value at the plan's nodes and the curved pieces'
    ``curved_tails``: the part of r's own piece plus the whole pieces above it
    (``_piece_integrals``).  A jump of psi adds nothing; an ironed piece adds its
    constant eps_i times the length."""
    r = np.atleast_1d(np.asarray(r, dtype=float))
    psi_r, value_r = np.asarray(psi_r, dtype=float), np.asarray(value_r, dtype=float)
    whole = _piece_integrals(plan, gamma, node_eps, node_val, tails)
    above = np.r_[np.cumsum(whole[::-1])[::-1][1:], 0.0]  # the pieces after piece k
    k = np.clip(np.searchsorted(plan.a, r, side="right") - 1, 0, plan.a.size - 1)
    kind, s, e = plan.kind[k], plan.start[k], plan.stop[k]
    out = np.empty(r.shape)
    flat, aff = kind == FLAT, kind == AFFINE
    out[flat] = node_eps[s[flat]] * (plan.b[k[flat]] - r[flat])
    ka = k[aff]
    line = plan.line[ka] + plan.slope[ka] * (r[aff] - plan.a[ka])
    on_line = np.abs(psi_r[aff] - line) <= 1e-12 * (1.0 + np.abs(psi_r[aff]))
    v0 = np.where(on_line, value_r[aff], node_val[s[aff]])  # off its line only at a start
    out[aff] = (node_val[e[aff] - 1] - v0) / (gamma * plan.slope[ka])
    for n in np.flatnonzero(kind == CURVED):
        out[n] = tails[int(k[n])].tail(r[n], value_r[n])[0]
    out = out + above[k]
    return np.where(r >= plan.support[1], 0.0, out)
