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

import warnings

import numpy as np

from ..distributions import CostDistribution, SellerLaws
from ..errors import MarketSimError
from ..privacy.limit import privacy_cost
from . import offline
from .base import in_own_support as _in_support
from .base import seller_ends as _ends
from .offline import check_params, solve
from .payment_oracles import ZERO_LIMIT, _CappedOracle, _ResolveOracle, _UncappedOracle
from .payment_quadrature import (
    _REL_TOL,
    _SLIVER_NODES,
    _adaptive,
    _finite,
    _fixed_rule,
    _illinois,
    _least_z,
)
from .quadrature import gauss_legendre_cos

__all__ = ["OfflineCurves", "offline_payments", "seller_utility"]

_MAX_PIECES = 10_000
_SKIP = 1e-10  # relative width skipped past each change of piece
_ABOVE_ZERO = 1e-300  # where the piece that starts at a report of value 0 is named


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
