"""Myerson's integral int_r^b eps_i(z) dz on a piece [a, b] of the support where psi is
curved (neither affine nor flat: a Beta, a truncated normal), to a stated tolerance
(issue 47; docs/data-dependent.md, Payments).

eps_i(z) = V'(x), x = gamma psi(z) (the envelope theorem, V Eq. 17's optimal value as a
function of seller i's coefficient x): non-increasing, smooth between finitely many
jumps (where the best eps_avg changes) and kinks (where a seller enters or leaves the
active set).  The integral is built adaptively from two rules on sub-intervals [u, v]:

* **Chebyshev (Clenshaw-Curtis).**  eps_i at the 17 Chebyshev-Lobatto points of [u, v]
  is interpolated by a Chebyshev series and integrated exactly, indefinitely, so that
  int_r^v is known for every r in [u, v].  The error estimate is the largest difference,
  over r, between the indefinite integrals of the 17-point and the nested 9-point
  interpolants (the error of the cruder one, a bound in practice for the finer one).
* **Envelope bracket.**  int_u^v eps_i dz = int z'(x) dV(x) with z' = 1/(gamma psi')
  and dV = eps_i dx >= 0, so it lies between min z' (V(v) - V(u)) and max z' (V(v) - V(u))
  whatever eps_i does inside (a jump included); the midpoint of the two is used, with
  half their distance as the error bound, ~|z''| (v - u)^2 eps_i gamma psi', which
  shrinks fourfold with each halving (z' taken at the ends: monotone on a short bracket).

An interval whose 17 values drop mostly between two neighbours holds a jump: that pair
becomes a bracket, cut in four by three solves a round until its bound is within
rtol |I| / (2 MAX_BRACKETS); the part kept is the one of largest defect |V's rise -
the trapezoid rule of eps_i in x| (O(h^3) where eps_i is smooth, ~ jump x h at a jump,
~ slope change x h^2 at a kink).  Its smooth sides then get the Chebyshev rule.  While
the errors sum to more than rtol |I| (I the current estimate of the piece's integral),
the intervals of largest error are split until the rest sum to at most half of it:
around a jump as above, around the part of largest defect if the interval is already
KINK_WIDTH times narrower than the piece (a kink), else halved.  The sum of the
estimates is returned as ``error``.  All the solves of a round go to ``solve`` at once.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from numpy.polynomial import chebyshev as cheb

__all__ = [
    "CurvedTail",
    "curved_tail",
    "psi_ceiling",
    "psi_inside",
    "DEFAULT_PAYMENT_RTOL",
]

DEFAULT_PAYMENT_RTOL = 1e-10  # of the piece's integral
N_CC = 17  # Chebyshev-Lobatto points per interval; the 9 of even index are nested
MAX_BRACKETS = 32  # a bracket's share of the tolerance is 1 / (2 MAX_BRACKETS)
BRACKET_CUTS = 4  # a bracket shrinks 4x a round (its bound 16x), for 3 solves
KINK_WIDTH = 64  # an interval this much narrower than the piece still failing: bracketed
MAX_ROUNDS = 120  # rounds of solves before stopping with the error reached
_T = np.cos(np.pi * np.arange(N_CC) / (N_CC - 1))  # from 1 down to -1
_T_CHECK = np.linspace(-1.0, 1.0, 65)  # where the two interpolants' integrals are compared

Solve = Callable[[np.ndarray], tuple[np.ndarray, np.ndarray, np.ndarray]]


@dataclass(frozen=True)
class CurvedTail:
    """int_r^b eps_i for every r of one curved piece [a, b] (others' reports fixed).
    Interval k is [edges[k], edges[k+1]]: a Chebyshev interval (``series[k]``, in
    t in [-1, 1], gives int_z^{edges[k+1]} eps_i at z = mid + half t) or, where that row
    is NaN, a bracket (z' = ``zprime[k]`` times Eq. 17's value's rise).  ``value``:
    Eq. 17's value at the right ends; ``above``: the integral from edges[k+1] to b;
    ``error``: the sum of the intervals' error estimates; ``solves``: Eq. 17 solves
    used; ``gap``: the largest certificate gap among them (NaN: none asked)."""

    edges: np.ndarray
    series: np.ndarray
    zprime: np.ndarray
    value: np.ndarray
    above: np.ndarray
    total: float
    error: float
    solves: int
    gap: float

    def tail(self, r, value_r) -> np.ndarray:
        """int_r^b eps_i for reports r in [a, b] with Eq. 17's value ``value_r`` there."""
        r = np.atleast_1d(np.asarray(r, dtype=float))
        value_r = np.broadcast_to(np.asarray(value_r, dtype=float), r.shape)
        k = np.clip(np.searchsorted(self.edges, r, side="right") - 1, 0, self.edges.size - 2)
        out = np.empty(r.size)
        for n in range(r.size):
            kk = k[n]
            u, v = self.edges[kk], self.edges[kk + 1]
            if np.isnan(self.series[kk, 0]):  # a bracket: z' times V's rise from r
                part = self.zprime[kk] * (self.value[kk] - value_r[n])
            else:
                t = np.clip((2.0 * r[n] - u - v) / (v - u), -1.0, 1.0)
                part = cheb.chebval(t, self.series[kk])
            out[n] = part + self.above[kk]
        return out


def psi_ceiling(laws, mu: float, gamma: float, reg_lambda: float, eps_avg_min: float) -> float:
    """A virtual cost C above which Eq. 17 gives seller i no weight whenever another
    seller j has psi_j <= T, T the largest |psi| of ``laws`` at their 1 - 1e-6 quantile:
    the weights are the simplex projection of -(l + gamma eta psi) / (2 mu), so a_i = 0
    once gamma eta (psi_i - psi_j) >= 2 mu + l_j - l_i, and eta >= eps_avg_min, a loss
    l <= log 2 + ||w|| <= log 2 + sqrt(2 log 2 / Lambda) (Lambda/2 ||w||^2 <= log 2 at
    the optimal w).  So psi_i -> min(psi_i, C) changes nothing there (a_i = 0 and a zero
    cost term on both sides), and keeps Eq. 17 finite and well-scaled where psi is
    infinite or huge (a density vanishing at the top, as a Beta's); C = 10 (1 + T) +
    (2 mu + 2 l_max) / (gamma eps_avg_min)."""
    top = max(abs(float(d.virtual_cost(d.ppf(1.0 - 1e-6)))) for d in laws)
    loss = np.log(2.0) + np.sqrt(2.0 * np.log(2.0) / reg_lambda)
    ceiling = 10.0 * (1.0 + top) + (2.0 * mu + 2.0 * loss) / (max(gamma, 1e-300) * eps_avg_min)
    return float(min(ceiling, 1e300))  # gamma = 0: psi does not enter Eq. 17


def psi_inside(dist, a: float, b: float, ceiling: float) -> Callable[[np.ndarray], np.ndarray]:
    """psi on the piece [a, b], its one-sided limits at the ends (evaluated 1e-12 of the
    width inside), at most ``ceiling`` (``psi_ceiling``; an infinite psi included)."""
    inset = 1e-12 * (b - a)

    def psi(z):
        with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
            v = np.asarray(dist.virtual_cost(np.clip(z, a + inset, b - inset)), dtype=float)
        return np.minimum(np.where(np.isnan(v), ceiling, v), ceiling)

    return psi


def _zprime(dist, a, b, gamma, z) -> np.ndarray:
    """z'(x) = 1 / (gamma psi'(z)), psi' by central differences 1e-6 of the width
    (inside the piece); 0 where psi' is infinite."""
    step, inset = 1e-6 * (b - a), 1e-12 * (b - a)
    up = np.minimum(z + step, b - inset)
    down = np.maximum(z - step, a + inset)
    with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
        d = (dist.virtual_cost(up) - dist.virtual_cost(down)) / (up - down)
        g = 1.0 / (gamma * d)
    return np.where(np.isfinite(g), g, 0.0)


class _Solver:
    """Eq. 17 at seller i's reports z (memoised): eps_i, the value, the gap."""

    def __init__(self, psi, solve: Solve):
        self.psi, self.solve = psi, solve
        self.memo: dict[float, tuple[float, float, float]] = {}

    def run(self, zs) -> None:
        new = np.unique([z for z in zs if z not in self.memo])
        if new.size:
            eps, value, gap = self.solve(self.psi(new))
            for z, e, v, g in zip(new, eps, value, gap, strict=True):
                self.memo[float(z)] = (float(e), float(v), float(g))

    def __call__(self, z, field: int = 0) -> np.ndarray:
        return np.array([self.memo[float(x)][field] for x in np.atleast_1d(z)])


def _bracket_points(lo, hi) -> np.ndarray:
    return np.unique(lo + (hi - lo) * np.arange(BRACKET_CUTS + 1) / BRACKET_CUTS)


def _cc_points(u, v) -> np.ndarray:
    return 0.5 * (u + v) + 0.5 * (v - u) * _T


def _cc_rule(u, v, f) -> tuple[np.ndarray, float, float]:
    """(series of int_z^v eps_i in t, the whole integral, error estimate) from eps_i at
    the 17 Chebyshev-Lobatto points of [u, v] (Clenshaw-Curtis, indefinite)."""
    half = 0.5 * (v - u)

    def antideriv(t, vals, deg):  # -half * int_1^t p(s) ds = int_z^v
        return -half * cheb.chebint(cheb.chebfit(t, vals, deg), lbnd=1.0)

    fine = antideriv(_T, f, N_CC - 1)
    coarse = antideriv(_T[::2], f[::2], (N_CC - 1) // 2)
    err = float(np.max(np.abs(cheb.chebval(_T_CHECK, fine) - cheb.chebval(_T_CHECK, coarse))))
    return fine, float(cheb.chebval(-1.0, fine)), err


def _bracket_rule(g_l, g_h, v_l, v_h) -> tuple[float, float]:
    """(estimate, error bound) of int z' dV on a bracket from z' and V at its ends."""
    rise = v_h - v_l
    return 0.5 * (g_l + g_h) * rise, 0.5 * abs(g_h - g_l) * abs(rise) + 1e-16 * abs(rise)


def _jump_pair(f) -> int | None:
    """The index k (in ascending z) of the neighbours between which eps_i drops by more
    than half its total variation over the 17 points, or None."""
    d = np.abs(np.diff(f[::-1]))
    k = int(np.argmax(d))
    return k if d.sum() > 0 and d[k] > 0.5 * d.sum() else None


@dataclass
class _Build:
    """The state of one adaptive build: intervals waiting for the Chebyshev rule
    (``cc_todo``), evaluated ones (``live``: u, v, series, estimate, error, eps_i at the
    points), brackets (u, lo, hi, v: the jump in [lo, hi], [u, lo] and [hi, v] smooth, to the
    Chebyshev rule once the bracket is settled) and settled brackets (``done``: lo, hi,
    None, z', estimate, error)."""

    dist: object
    a: float
    b: float
    gamma: float
    rtol: float
    solver: _Solver
    cc_todo: list
    live: list
    brackets: list
    done: list
    tol: float = 0.0

    def settle_bracket(self, u, lo, hi, v, force: bool) -> bool:
        """Accept the bracket [lo, hi] (its sides to the Chebyshev rule) if its bound is
        within its share, it cannot be halved, or ``force``; True if accepted."""
        g = _zprime(self.dist, self.a, self.b, self.gamma, np.array([lo, hi]))
        est, err = _bracket_rule(g[0], g[1], *self.solver(np.array([lo, hi]), 1))
        if not (force or err <= 0.5 * self.tol / MAX_BRACKETS or 0.5 * (lo + hi) in (lo, hi)):
            return False
        self.done.append((lo, hi, None, 0.5 * (g[0] + g[1]), est, err))
        self.cc_todo += [(p, q) for p, q in ((u, lo), (hi, v)) if q > p]
        return True

    def split_brackets(self, force: bool) -> None:
        """Each bracket cut in BRACKET_CUTS equal parts at its (now solved) inner points:
        the part of largest ``defects`` keeps the jump (or kink)."""
        keep = []
        for u, lo, hi, v in self.brackets:
            z = _bracket_points(lo, hi)
            k = int(np.argmax(self.defects(z)))
            lo, hi = z[k], z[k + 1]
            if not self.settle_bracket(u, lo, hi, v, force):
                keep.append((u, lo, hi, v))
        self.brackets = keep

    def defects(self, z) -> np.ndarray:
        """|V's rise - the trapezoid rule of eps_i in x| on each part between the solved
        points z (ascending), x = gamma psi: O(h^3) where eps_i is smooth, ~ its jump x h
        at a jump, ~ its slope's change x h^2 at a kink (dV/dx = eps_i)."""
        eps, value = self.solver(z), self.solver(z, 1)
        x = self.gamma * self.solver.psi(np.asarray(z))
        return np.abs(np.diff(value) - 0.5 * (eps[1:] + eps[:-1]) * np.diff(x))

    def chebyshev(self, u, v) -> None:
        """The Chebyshev rule on [u, v] (its points solved)."""
        f = self.solver(_cc_points(u, v))
        series, est, err = _cc_rule(u, v, f)
        self.live.append((u, v, series, est, err, f))
        if not self.tol:  # the first estimate of the piece's integral sets the scale
            self.tol = self.rtol * abs(est)

    def refine(self) -> bool:
        """If the errors sum to more than rtol |I| (I the current estimate), split the
        live intervals of largest error until the rest sum to at most half of it: a
        bracket around a jump between two of its points, else halved.  False if done."""
        errs = np.array([d[4] for d in self.live])
        total = sum(d[3] for d in self.live) + sum(d[4] for d in self.done)
        self.tol = self.rtol * abs(total)
        spent = sum(d[5] for d in self.done)
        splittable = np.array([d[1] - d[0] > 1e-13 * (self.b - self.a) for d in self.live])
        if spent + errs.sum() <= self.tol or not splittable.any():
            return False
        order = np.argsort(-np.where(splittable, errs, -1.0))
        rest = spent + errs.sum()
        picked: list[int] = []
        for j in order:
            if not splittable[j] or (picked and rest <= 0.5 * self.tol):
                break
            picked.append(int(j))
            rest -= errs[j]
        for j in sorted(picked, reverse=True):
            u, v, _, _, _, f = self.live.pop(j)
            zs = _cc_points(u, v)[::-1]
            k = _jump_pair(f)
            if k is None and v - u <= (self.b - self.a) / KINK_WIDTH:  # still failing: a kink
                k = int(np.argmax(self.defects(zs)))
            if k is None:
                self.cc_todo += [(u, 0.5 * (u + v)), (0.5 * (u + v), v)]
                continue
            if not self.settle_bracket(u, zs[k], zs[k + 1], v, False):
                self.brackets.append((u, zs[k], zs[k + 1], v))
        return True

    def round(self, force: bool) -> None:
        """Solve every new point (Chebyshev points, brackets' midpoints) at once."""
        todo, self.cc_todo = self.cc_todo, []
        self.solver.run(np.concatenate([np.zeros(0), *(_cc_points(u, v) for u, v in todo),
                                        *(_bracket_points(lo, hi)[1:-1] for _, lo, hi, _ in
                                          self.brackets)]))  # fmt: skip
        self.split_brackets(force)
        for u, v in todo:
            self.chebyshev(u, v)


def curved_tail(dist, a: float, b: float, gamma: float, solve: Solve, ceiling: float,
                rtol: float = DEFAULT_PAYMENT_RTOL) -> CurvedTail:  # fmt: skip
    """int_r^b eps_i on the curved piece [a, b] of ``dist`` (module docstring), to
    ``rtol`` of the piece's integral.  ``solve(x)`` gives seller i's eps_i, Eq. 17's
    value and the certificate gap (NaN if none) at each virtual cost x of seller i,
    the others' reports fixed; it is called once a round with every new point (psi at
    most ``ceiling``, ``psi_ceiling``).  After
    MAX_ROUNDS rounds what is reached is kept (``error`` says how much)."""
    st = _Build(dist, a, b, gamma, rtol, _Solver(psi_inside(dist, a, b, ceiling), solve), [(a, b)],
                [], [], [])  # fmt: skip
    for _ in range(MAX_ROUNDS):
        st.round(force=False)
        if not (st.cc_todo or st.brackets or st.refine()):
            break
    while st.cc_todo or st.brackets:  # out of rounds: settle what is open
        st.round(force=True)
    return _assemble(st)


def _assemble(st: _Build) -> CurvedTail:
    """The accepted intervals, in order, as a ``CurvedTail``."""
    live = [(u, v, sr, np.nan, est, err) for u, v, sr, est, err, _ in st.live]
    done = sorted(st.done + live, key=lambda d: d[0])
    edges = np.array([d[0] for d in done] + [done[-1][1]])
    series = np.full((len(done), N_CC + 1), np.nan)
    for k, d in enumerate(done):
        if d[2] is not None:
            series[k, : d[2].size] = d[2]
    totals = np.array([d[4] for d in done])
    above = np.r_[np.cumsum(totals[::-1])[::-1][1:], 0.0]
    gaps = [v[2] for v in st.solver.memo.values()]
    return CurvedTail(
        edges=edges,
        series=series,
        zprime=np.array([d[3] for d in done]),
        value=st.solver(edges[1:], 1),
        above=above,
        total=float(totals.sum()),
        error=float(sum(d[5] for d in done)),
        solves=len(st.solver.memo),
        gap=float(np.nanmax(gaps)) if np.any(np.isfinite(gaps)) else np.nan,
    )
