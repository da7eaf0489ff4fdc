"""Myerson payments for any monotone allocation rule.

``myerson_mechanism(allocation, dist)`` turns a black-box allocation
``allocation(reports) -> eps`` into a truthful :class:`Mechanism` by paying

    t_i = r_i eps_i(r) + int_{r_i}^{c_high} eps_i(z, r_-i) dz        (Eq. 8, 003)

integrated to the top ``c_high`` of the cost support (as the built-in offline
mechanism does).  Lemma III.2 (003) makes truth optimal iff each eps_i is
non-increasing in the own report; the mechanism checks that on every own report
it evaluates.

Eq. 8 is printed as t_i = -int_{c_i}^inf z d eps_i(z).  Read as a Stieltjes
integral it is the formula above (integration by parts), the least IC and IR
payment.  Read with a classical derivative it drops z0 (eps_i(z0-) - eps_i(z0+))
at every jump z0 > c_i, and then it is neither IC nor IR: the offline optimum
jumps where it switches active set (docs/mathematics.md has a market where the
literal reading pays 27% less, below the seller's cost).  We pay the Stieltjes
reading, through any jump.

The integral.  A black-box eps_i may jump (a threshold rule), so a fixed
Gauss-Legendre rule can be off by (jump x node spacing).  For a non-increasing
integrand f on a grid z_0 < ... < z_N the integral over [z_k, z_k+1] lies between
h_k f(z_k+1) and h_k f(z_k) (lower and upper Riemann sums), whatever f does in
between.  The method, per seller and vectorised over sellers:

1. start from the requested own reports plus ``n_grid`` equal steps up to c_high;
2. estimate each interval by the integral of the monotone cubic (PCHIP,
   Fritsch-Carlson) interpolant, which stays inside the Riemann bracket;
3. an interval whose secant exceeds 4x both neighbours' is *jump-like*: it is
   bisected until its bracket h_k (f(z_k) - f(z_k+1)) is below ``jump_tol`` x
   the payment scale (a jump is located by bisection, one evaluation per halving);
   any other interval is *smooth*: its error indicator is the largest distance of
   the cubic's integral from those of the quadratics through the interval and its
   left or right neighbour (third order; kinks get refined), and the intervals
   with the largest indicators are bisected until their sum is below ``tol`` x the
   payment scale (the upper Riemann sum of the seller's integral);
4. all new reports of all sellers are evaluated in one batch per round.

``Outcome.info`` reports per seller ``payment_bound``, the rigorous bound
sum_k max(upper_k - est_k, est_k - lower_k) <= sum_k h_k (f(z_k) - f(z_k+1)) that
holds for any non-increasing eps_i (it is first order in the step, so it is large
next to the actual error on smooth pieces), ``payment_error_estimate`` (the sum of
the indicators) and ``evaluations``.  ``max_evals`` caps the evaluations per seller
and call; the bounds then say how far the integral got.

Monotonicity.  Every observed increase of eps_i in the own report, between
neighbouring evaluated reports, larger than ``mono_tol`` x the largest eps
observed, is a :class:`Violation`.  ``outcome`` / ``deviations`` raise
:class:`NonMonotoneAllocation` (first violation and the count) unless
``check_monotone=False``; ``violations(reports)`` lists them all (for the audit).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..distributions import as_distribution
from ..errors import MarketSimError
from .base import Mechanism, Outcome, _deviation_args

__all__ = ["myerson_mechanism", "MyersonMechanism", "NonMonotoneAllocation", "Violation"]

_JUMP_RATIO = 4.0  # secant / max(neighbour secants) beyond which an interval is jump-like
_MIN_WIDTH = 1e-13  # relative to the support width: intervals are not cut below this
_CHUNK = 1 << 20  # numbers per batch of report vectors


class NonMonotoneAllocation(MarketSimError):
    """eps_i increases in seller i's own report: no payment makes such a rule truthful."""


@dataclass(frozen=True)
class Violation:
    """eps of ``seller`` rises from ``eps_low`` at own report ``low`` to ``eps_high``
    at the higher report ``high`` (the others' reports fixed)."""

    seller: int
    low: float
    high: float
    eps_low: float
    eps_high: float

    @property
    def size(self) -> float:
        return self.eps_high - self.eps_low

    def __str__(self) -> str:
        return (
            f"seller {self.seller}: eps {self.eps_low:.6g} at report {self.low:.6g} "
            f"< {self.eps_high:.6g} at report {self.high:.6g}"
        )


def _pchip_slopes(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Fritsch-Carlson slopes (as scipy's PchipInterpolator): the cubic Hermite
    interpolant with them is monotone wherever the data are."""
    h = np.diff(x)
    delta = np.diff(y) / h
    d = np.zeros_like(y)
    if h.size == 1:
        return np.full_like(y, delta[0])
    w1, w2 = 2 * h[1:] + h[:-1], h[1:] + 2 * h[:-1]
    same = (np.sign(delta[:-1]) * np.sign(delta[1:])) > 0
    with np.errstate(divide="ignore", invalid="ignore"):
        d[1:-1] = np.where(same, (w1 + w2) / (w1 / delta[:-1] + w2 / delta[1:]), 0.0)
    for end, (h0, h1, d0, d1) in (
        (0, (h[0], h[1], delta[0], delta[1])),
        (-1, (h[-1], h[-2], delta[-1], delta[-2])),
    ):
        s = ((2 * h0 + h1) * d0 - h0 * d1) / (h0 + h1)
        if np.sign(s) != np.sign(d0):
            s = 0.0
        elif np.sign(d0) != np.sign(d1) and abs(s) > 3 * abs(d0):
            s = 3 * d0
        d[end] = s
    return d


def _quad_integral(x0, x1, x2, y0, y1, y2, a, b):
    """int_a^b of the quadratic through (x0, y0), (x1, y1), (x2, y2)."""

    def basis(p, q, xr):  # int_a^b (x - p)(x - q) dx / ((xr - p)(xr - q))
        P, Q = p - a, q - a
        w = b - a
        return (w**3 / 3 - (P + Q) * w**2 / 2 + P * Q * w) / ((xr - p) * (xr - q))

    return y0 * basis(x1, x2, x0) + y1 * basis(x0, x2, x1) + y2 * basis(x0, x1, x2)


class _Seller:
    """The adaptive grid of one seller's integral over [min anchor, top]."""

    def __init__(self, z: np.ndarray, f: np.ndarray):
        self.z, self.f = z, f
        self.evals = 0
        self.done = False

    def intervals(self):
        """(estimate, lower, upper, indicator, jump-like) per interval."""
        z, f = self.z, self.f
        h = np.diff(z)
        lower, upper = h * np.minimum(f[1:], f[:-1]), h * np.maximum(f[1:], f[:-1])
        d = _pchip_slopes(z, f)
        herm = h * (f[:-1] + f[1:]) / 2 + h * h * (d[:-1] - d[1:]) / 12
        est = np.clip(herm, lower, upper)
        sec = np.abs(np.diff(f)) / h
        nb = np.maximum(np.r_[0.0, sec[:-1]], np.r_[sec[1:], 0.0])
        jump = (sec > _JUMP_RATIO * nb) & (upper > lower)
        # smooth pieces: distance of the cubic from the quadratics through the
        # interval and its left / right neighbour (a third-order error indicator)
        other = h * (f[:-1] + f[1:]) / 2  # one interval alone: the trapezoid
        if h.size >= 2:
            a, b = z[:-1], z[1:]
            left = _quad_integral(z[:-2], z[1:-1], z[2:], f[:-2], f[1:-1], f[2:], a[1:], b[1:])
            right = _quad_integral(z[:-2], z[1:-1], z[2:], f[:-2], f[1:-1], f[2:], a[:-1], b[:-1])
            dev = np.zeros(h.size)
            dev[1:] = np.abs(est[1:] - left)
            dev[:-1] = np.maximum(dev[:-1], np.abs(est[:-1] - right))
        else:
            dev = np.abs(est - other)
        ind = np.where(jump, upper - lower, dev)
        return est, lower, upper, ind, jump


class MyersonMechanism(Mechanism):
    """A black-box allocation with Myerson payments (Eq. 8, 003; see module doc)."""

    myerson_payments = True

    def __init__(
        self,
        allocation,
        dist,
        *,
        name: str | None = None,
        vectorized: bool = False,
        tol: float = 1e-8,
        jump_tol: float = 1e-12,
        mono_tol: float = 1e-9,
        n_grid: int = 16,
        max_evals: int = 20_000,
        check_monotone: bool = True,
    ):
        if not callable(allocation):
            raise MarketSimError("allocation must be a function reports -> eps")
        dist = as_distribution(dist)
        for label, v in (("tol", tol), ("jump_tol", jump_tol), ("mono_tol", mono_tol)):
            if not (np.isfinite(v) and v > 0):
                raise MarketSimError(f"{label} must be a finite number > 0 (got {v!r})")
        if int(n_grid) < 1 or int(max_evals) < int(n_grid):
            raise MarketSimError("need n_grid >= 1 and max_evals >= n_grid")
        self.allocation, self.dist, self.vectorized = allocation, dist, bool(vectorized)
        # a per-instance name shadowing the ClassVar (mypy allows only class-level ones)
        self.name = name or getattr(allocation, "__name__", "") or "myerson"  # type: ignore[misc]
        self.tol, self.jump_tol, self.mono_tol = float(tol), float(jump_tol), float(mono_tol)
        self.n_grid, self.max_evals = int(n_grid), int(max_evals)
        self.check_monotone = bool(check_monotone)

    def __repr__(self) -> str:
        return f"MyersonMechanism({self.name!r}, dist={self.dist.spec!r})"

    def unchecked(self) -> MyersonMechanism:
        """This mechanism with the monotonicity check off (payments of a non-monotone
        rule are then Eq. 8 evaluated anyway, with no truthfulness behind them)."""
        out = object.__new__(type(self))
        out.__dict__.update(self.__dict__, check_monotone=False)
        return out

    # ---- evaluating the allocation --------------------------------------------------
    def _alloc(self, R: np.ndarray) -> np.ndarray:
        """eps for each row of R (B, m), checked."""
        B, m = R.shape
        who = f"allocation {self.name!r}"
        if self.vectorized:
            rows = max(1, _CHUNK // max(m, 1))
            parts = [
                np.asarray(self.allocation(R[s : s + rows]), dtype=float) for s in range(0, B, rows)
            ]
            for p, s in zip(parts, range(0, B, rows), strict=True):
                if p.shape != R[s : s + rows].shape:
                    raise MarketSimError(
                        f"{who} returned shape {p.shape} for a batch of "
                        f"shape {R[s : s + rows].shape} (vectorized=True)"
                    )
            E = np.concatenate(parts) if parts else np.empty((0, m))
        else:
            E = np.empty((B, m))
            for b in range(B):
                e = np.asarray(self.allocation(R[b].copy()), dtype=float)
                if e.shape != (m,):
                    raise MarketSimError(f"{who} returned shape {e.shape} for {m} reports")
                E[b] = e
        if not np.all(np.isfinite(E)):
            raise MarketSimError(f"{who} returned NaN or inf eps")
        if np.any(E < 0):
            raise MarketSimError(f"{who} returned a negative eps ({E[E < 0][0]:g})")
        return E

    def _own(self, reports, sellers, z) -> np.ndarray:
        """eps_{sellers[b]} when seller sellers[b] alone reports z[b]."""
        R = np.repeat(reports[None, :], z.size, axis=0)
        rows = np.arange(z.size)
        R[rows, sellers] = z
        return self._alloc(R)[rows, sellers]

    # ---- the payment integral -------------------------------------------------------
    def _tails(self, reports, sellers, anchors, eps_anchors, raise_on_violation):
        """int_a^top eps_i for each anchor a of each seller (rows of ``anchors``).

        Returns (tails like anchors, bound per seller, estimate per seller,
        evaluations per seller, violations)."""
        lo, top = self.dist.support
        h_min = _MIN_WIDTH * max(top - lo, 1e-300)
        grids: list[_Seller | None] = []
        need_s, need_z = [], []
        for k, (a, fa) in enumerate(zip(anchors, eps_anchors, strict=True)):
            inside = a < top
            if not inside.any():
                grids.append(None)
                continue
            a0 = a[inside].min()
            z = np.unique(np.r_[a[inside], np.linspace(a0, top, self.n_grid + 1)])
            f = np.full(z.size, np.nan)
            pos = np.searchsorted(z, a[inside])
            f[pos] = fa[inside]
            g = _Seller(z, f)
            grids.append(g)
            miss = np.flatnonzero(np.isnan(f))
            need_s.append(np.full(miss.size, k))
            need_z.append(miss)
        self._fill(reports, sellers, grids, need_s, need_z)
        while True:
            if raise_on_violation:
                found = self._violations(sellers, grids)
                if found:
                    raise NonMonotoneAllocation(
                        f"{self.name}: eps increases in the own report ({found[0]}; "
                        f"{len(found)} violation{'s' if len(found) > 1 else ''} seen): "
                        "not truthful with any payments (Lemma III.2, 003)"
                    )
            new_s, new_z = [], []
            for k, g in enumerate(grids):
                if g is None or g.done:
                    continue
                est, lower, upper, ind, jump = g.intervals()
                scale = max(float(np.sum(upper)), 1e-300)
                h = np.diff(g.z)
                wide = h > 2 * h_min
                cut = jump & (ind > self.jump_tol * scale) & wide
                smooth = ~jump
                err = float(np.sum(ind[smooth]))
                if err > self.tol * scale:
                    cut |= smooth & (ind > self.tol * scale / ind.size) & wide
                budget = self.max_evals - g.evals
                if not cut.any() or budget <= 0:
                    g.done = True
                    continue
                idx = np.flatnonzero(cut)
                if idx.size > budget:  # the worst first
                    idx = idx[np.argsort(-ind[idx])[:budget]]
                mid = 0.5 * (g.z[idx] + g.z[idx + 1])
                g.z = np.insert(g.z, idx + 1, mid)
                g.f = np.insert(g.f, idx + 1, np.nan)
                miss = np.flatnonzero(np.isnan(g.f))
                new_s.append(np.full(miss.size, k))
                new_z.append(miss)
            if not new_s:
                break
            self._fill(reports, sellers, grids, new_s, new_z)
        violations = self._violations(sellers, grids)
        tails = np.zeros(anchors.shape)
        bound = np.zeros(len(grids))
        estimate = np.zeros(len(grids))
        evals = np.zeros(len(grids), dtype=int)
        for k, g in enumerate(grids):
            if g is None:
                continue
            est, lower, upper, ind, _ = g.intervals()
            cum = np.r_[np.cumsum(est[::-1])[::-1], 0.0]  # int from z_j to top
            inside = anchors[k] < top
            tails[k, inside] = cum[np.searchsorted(g.z, anchors[k][inside])]
            bound[k] = float(np.sum(np.maximum(upper - est, est - lower)))
            estimate[k] = float(np.sum(ind))
            evals[k] = g.evals
        return tails, bound, estimate, evals, violations

    def _fill(self, reports, sellers, grids, need_s, need_z):
        """Evaluate the missing values of all grids in one batch."""
        if not need_s:
            return
        ks, js = np.concatenate(need_s), np.concatenate(need_z)
        if ks.size == 0:
            return
        z = np.array([grids[k].z[j] for k, j in zip(ks, js, strict=True)])
        f = self._own(reports, sellers[ks], z)
        for k, j, v in zip(ks, js, f, strict=True):
            grids[k].f[j] = v
            grids[k].evals += 1

    def _violations(self, sellers, grids) -> list[Violation]:
        scale = max([float(g.f.max()) for g in grids if g is not None] + [1e-300])
        out = []
        for k, g in enumerate(grids):
            if g is None:
                continue
            up = np.flatnonzero(np.diff(g.f) > self.mono_tol * scale)
            out += [
                Violation(
                    int(sellers[k]),
                    float(g.z[j]),
                    float(g.z[j + 1]),
                    float(g.f[j]),
                    float(g.f[j + 1]),
                )
                for j in up
            ]
        return out

    # ---- the Mechanism interface ------------------------------------------------------
    def outcome(self, reports, rng=None) -> Outcome:
        r = np.asarray(reports, dtype=float).reshape(-1)
        if r.size == 0:
            raise MarketSimError("no reports")
        eps = self._alloc(r[None, :])[0]
        sellers = np.arange(r.size)
        tails, bound, est, evals, _ = self._tails(
            r, sellers, r[:, None], eps[:, None], self.check_monotone
        )
        pay = r * eps + tails[:, 0]  # Eq. 8, 003
        return Outcome(
            eps,
            pay,
            {
                "payment_bound": bound,
                "payment_error_estimate": est,
                "evaluations": int(evals.sum()) + 1,
            },
        )

    def deviations(self, sellers, candidates, reports, rng=None) -> Outcome:
        """Vectorised: all candidates of all sellers in one batch, then one adaptive
        integral per seller whose grid contains every candidate (so the eps at the
        candidates are reused and each tail is a partial sum)."""
        sellers, cand, reports = _deviation_args(sellers, candidates, reports)
        flat_s = np.repeat(sellers, cand.shape[1])
        eps = self._own(reports, flat_s, cand.ravel()).reshape(cand.shape)
        tails, bound, est, evals, _ = self._tails(reports, sellers, cand, eps, self.check_monotone)
        return Outcome(
            eps,
            cand * eps + tails,
            {
                "payment_bound": bound,
                "payment_error_estimate": est,
                "evaluations": int(evals.sum()) + cand.size,
            },
        )

    def violations(self, reports, rng=None) -> list[Violation]:
        """Every observed increase of eps_i in the own report, over the reports the
        payment integrals of all sellers evaluate (the others at ``reports``)."""
        r = np.asarray(reports, dtype=float).reshape(-1)
        eps = self._alloc(r[None, :])[0]
        return self._tails(r, np.arange(r.size), r[:, None], eps[:, None], False)[4]


def myerson_mechanism(
    allocation,
    dist,
    *,
    name: str | None = None,
    vectorized: bool = False,
    tol: float = 1e-8,
    max_evals: int = 20_000,
    **options,
) -> MyersonMechanism:
    """A truthful :class:`Mechanism` from a monotone allocation ``allocation(reports) ->
    eps`` (with ``vectorized=True`` it also takes a (B, m) batch and returns (B, m)):
    Myerson payments (Eq. 8, 003) integrated adaptively to the top of ``dist``'s
    support, error bounds in ``Outcome.info``.  ``options``: ``jump_tol``,
    ``mono_tol``, ``n_grid``, ``check_monotone`` (see :class:`MyersonMechanism`)."""
    return MyersonMechanism(
        allocation, dist, name=name, vectorized=vectorized, tol=tol, max_evals=max_evals, **options
    )
