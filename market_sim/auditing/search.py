"""The search of one group of sellers (a market or an opponent profile): the candidate
kinds, the jump bisection, the local section search, type gains, monotonicity, and
each seller's own support and tolerance (docs/audit.md)."""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace

import numpy as np

from ..privacy.limit import privacy_cost

_MONO_TOL = 1e-9
_PROBES = 10.0 ** -np.arange(1, 7)  # c +- w 10^-k
_STEPS = np.array([-1e-6, -1e-9, 0.0, 1e-9, 1e-6])  # around another seller's report
_JUMP_RATIO = 4.0  # a secant this many times both neighbours' is a jump
_JUMP_WIDTH = 1e-9  # bisection stops at this fraction of w
_PAY_REL = 1e-12  # the payments' rounding, relative to the seller's largest |payment|


@dataclass(frozen=True)
class _Rows:
    """Each searched seller's own support: (k,) arrays of its bottom, top and lowest
    report tried (populations: the seller's class law, never the pooled support)."""

    lo: np.ndarray
    hi: np.ndarray
    floor: np.ndarray

    @property
    def width(self) -> np.ndarray:
        return self.hi - self.lo

    def col(self, name: str) -> np.ndarray:
        return getattr(self, name)[:, None]

    def clip(self, Z: np.ndarray) -> np.ndarray:
        """Reports (k, ...) kept in each row's [floor, hi]."""
        shape = (-1,) + (1,) * (Z.ndim - 1)
        return np.clip(Z, self.floor.reshape(shape), self.hi.reshape(shape))

    def take(self, idx) -> _Rows:
        return _Rows(self.lo[idx], self.hi[idx], self.floor[idx])


@dataclass(frozen=True)
class _Plan:
    """The search settings (see ``audit``); ``lo``, ``hi``: the pooled support;
    ``floor``: the lowest report tried there; ``ends``: (n, 2) each seller's own
    support; ``floor_frac``: the floor as a fraction of each seller's width."""

    lo: float
    hi: float
    floor: float
    n_grid: int
    n_random: int
    refine: bool
    n_starts: int
    n_sections: int
    n_iter: int
    max_others: int
    n_jumps: int
    max_profile_sellers: int
    ends: np.ndarray | None = None
    floor_frac: float = 0.0
    interior: bool = True
    n_probes: int = _PROBES.size  # c +- w 10^-k: k = 1..6, or (2) k = 1 and 4

    def coarse(self) -> _Plan:
        """The interior design's first pass: every 4th grid point, the probes at w 10^-1
        and 10^-4 (``_search_profiles`` searches again in full where it finds a gain
        within reach of the tolerance)."""
        return replace(self, n_grid=max(3, (self.n_grid - 1) // 4 + 1), n_probes=2)

    @property
    def width(self) -> float:
        return self.hi - self.lo

    def rows(self, sellers=None) -> _Rows:
        """The own supports of ``sellers`` (all when None)."""
        ends = self.ends
        if ends is None:
            n = 1 if sellers is None else np.asarray(sellers).size
            ends = np.tile([self.lo, self.hi], (n, 1))
        elif sellers is not None:
            ends = ends[np.asarray(sellers, dtype=int)]
        lo, hi = ends[:, 0].astype(float), ends[:, 1].astype(float)
        return _Rows(lo, hi, lo + self.floor_frac * (hi - lo))

    def grid(self, R: _Rows) -> np.ndarray:
        frac = np.linspace(0.0, 1.0, self.n_grid)[1:-1]
        return R.col("floor") + (R.col("hi") - R.col("floor")) * frac


@dataclass
class _Found:
    """One group's search (a market or a profile), per seller searched."""

    sellers: np.ndarray
    truth: np.ndarray  # (D, k) truthful utility per draw
    truth_eps: np.ndarray  # (k,)
    best_report: np.ndarray
    best_gain: np.ndarray
    best_se: np.ndarray
    top: np.ndarray  # utility of a seller of cost hi (others given), mean over draws
    bottom: np.ndarray  # ... of cost floor
    type_gain: np.ndarray  # best adjacent type gain per seller
    type_pair: np.ndarray  # (k, 2): (cost, report) of it
    cand_eps: np.ndarray | None = None  # (k,) largest eps over the seller's candidates
    tol: np.ndarray = field(default_factory=lambda: np.empty(0))  # (k,) ``_tol``
    scale: np.ndarray = field(default_factory=lambda: np.empty(0))  # w x own largest eps
    own_low: np.ndarray | None = None  # (k,) least own-type utility over the reports tried
    own_at: np.ndarray | None = None  # (k,) the report (= that type's cost) where it is
    rand_tol: np.ndarray | None = None
    rand_gain: np.ndarray | None = None
    rand_se: np.ndarray | None = None
    violations: list = field(default_factory=list)
    check: object = None
    counts: dict = field(default_factory=dict)
    mono: np.ndarray = field(default_factory=lambda: np.empty(0, dtype=bool))


def _others(reports, sellers, cap):
    """(k, m) indices of the other sellers whose reports become candidates: all, or the
    ``cap`` nearest in rank to the seller's own report."""
    n = reports.size
    if n - 1 <= cap:
        idx = np.tile(np.arange(n), (sellers.size, 1))
        keep = idx != sellers[:, None]
        return idx[keep].reshape(sellers.size, n - 1)
    order = np.argsort(reports, kind="stable")
    rank = np.empty(n, dtype=int)
    rank[order] = np.arange(n)
    h = cap // 2
    start = np.clip(rank[sellers] - h, 0, n - 1 - 2 * h)
    win = start[:, None] + np.arange(2 * h + 1)
    keep = win != rank[sellers][:, None]
    return order[win[keep].reshape(sellers.size, 2 * h)]


def _base(c, others, P: _Plan, R: _Rows, rand):
    """The candidates of one group, with their kinds: truth first; each seller's own
    support (``R``) for its endpoints, grid, probes and the clipping."""
    k = c.size
    w = R.col("width")
    probes = _PROBES[:: _PROBES.size // P.n_probes]  # all, or every 3rd (``coarse``)
    cols = {
        "truth": c[:, None],
        "endpoints": np.column_stack([R.floor, R.hi]),
        "grid": P.grid(R),
        "probes": c[:, None] + np.concatenate([-w * probes, w * probes], axis=1),
        "others": (others[:, :, None] + w[:, :, None] * _STEPS).reshape(k, -1),
    }
    if rand is not None:
        cols["random"] = rand
    Z = R.clip(np.concatenate(list(cols.values()), axis=1))
    Z[:, 0] = c
    return Z, {kd: v.shape[1] for kd, v in cols.items() if kd != "truth"}


def _gains(U, T):
    """Mean gain and its SE over draws: U (D, k, C) against the truth T (D, k); a
    candidate screened out (``_screened``: NaN on the later draws) over its own draws."""
    diff = U - T[:, :, None]
    D = diff.shape[0]
    if D < 2:
        return diff.mean(axis=0), np.zeros(diff.shape[1:])
    if not np.isnan(diff).any():
        return diff.mean(axis=0), diff.std(axis=0, ddof=1) / math.sqrt(D)
    n = np.sum(~np.isnan(diff), axis=0)
    return np.nanmean(diff, axis=0), np.nanstd(diff, axis=0, ddof=1) / np.sqrt(n)


_SCREEN_Z = 3.0  # a candidate whose screening UCB (mean + 3 SE) is below the best LCB


def _screened(ev, sellers, Z, r0):
    """Monte Carlo utilities and eps (D, k, C) of the candidates Z with the draws spent
    where they can change the choice of the report to confirm, in rounds: every
    candidate on the first quarter of the draws (at least 2), then the next quarter
    and the last half only for the candidates still in (``_still_in``: the truth, the
    candidates whose gain could still be the seller's best or positive, the random
    reports, columns ``r0`` on, whose gain could still be positive), judged on all the
    draws they got (NaN on the draws a candidate did not get).  The search only
    selects: the report chosen is confirmed on fresh draws, whose statistics are what
    the audit prints (docs/audit.md)."""
    D = len(ev.seeds)
    cuts = sorted({max(2, D // 4), max(2, D // 2), D})
    if D <= cuts[0]:
        return ev(sellers, Z)
    U = np.full((D,) + Z.shape, np.nan)
    E = np.full_like(U, np.nan)
    keep = np.ones(Z.shape, dtype=bool)
    rows = np.arange(Z.shape[0])[:, None]
    start = 0
    for end in cuts:
        width = int(keep.sum(axis=1).max())
        order = np.argsort(~keep, axis=1, kind="stable")[:, :width]  # the kept columns first
        cols = np.where(np.take_along_axis(keep, order, axis=1), order, 0)  # pad: the truth
        U2, E2 = ev(sellers, np.take_along_axis(Z, cols, axis=1), slice(start, end))
        U[start:end, rows, cols], E[start:end, rows, cols] = U2, E2
        if end < D:
            keep &= _still_in(*_gains(U[:end], U[:end, :, 0]), r0)
        start = end
    return U, E


def _still_in(G, S, r0) -> np.ndarray:
    """(k, C) the candidates that keep drawing (``_screened``): the truth; those whose
    gain could still be the seller's best or positive, mean + 3 SE >= max(0, the best
    mean - 3 SE); the random reports (columns ``r0`` on) whose gain could still be
    positive, mean + 3 SE >= 0 (one dropped shows a loss at 3 SE: it could not count as
    profitable, its LCB below tol there too); and those whose gain did not vary over
    their draws (they bound nothing: an outcome rarer than 1 in 4 draws, a prize)."""
    upper = G + _SCREEN_Z * S
    best_low = np.maximum(np.max(G - _SCREEN_Z * S, axis=1), 0.0)
    keep = (upper >= best_low[:, None]) | (S == 0)
    keep[:, 0] = True
    keep[:, r0:] |= upper[:, r0:] >= 0
    return keep


def _jumps(ev, sellers, Z, E, P: _Plan, R: _Rows):
    """Bisection of the own allocation's jumps (eps means E at the reports Z, (k, C)):
    up to ``n_jumps`` per seller, to w 1e-9, then w 1e-6 either side.  Returns the
    reports tried with their utilities and eps per draw (empty when no jump)."""
    order = np.argsort(Z, axis=1, kind="stable")
    z = np.take_along_axis(Z, order, axis=1)
    e = np.take_along_axis(E, order, axis=1)
    dz = np.diff(z, axis=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        de = np.abs(np.diff(e, axis=1))
        sec = np.where(dz > 0, de / np.where(dz > 0, dz, 1.0), 0.0)
    nb = np.maximum(np.pad(sec[:, :-1], ((0, 0), (1, 0))), np.pad(sec[:, 1:], ((0, 0), (0, 1))))
    scale = np.maximum(_finite_max(e)[:, None], 1e-300)
    wide = dz > 2 * _JUMP_WIDTH * R.col("width")
    limit = np.isinf(e[:, :-1]) | np.isinf(e[:, 1:])  # eps = +inf at 0: no jump to bisect
    jump = (sec > _JUMP_RATIO * nb) & (de > _MONO_TOL * scale) & wide & ~limit
    rows = np.nonzero(jump.any(axis=1))[0]
    if rows.size == 0 or P.n_jumps == 0:
        return None
    J = P.n_jumps
    pick = np.argsort(-np.where(jump, de, -1.0), axis=1, kind="stable")[rows, :J]
    pick = np.where(jump[rows[:, None], pick], pick, pick[:, :1])  # pad with the first
    a, b = z[rows[:, None], pick], z[rows[:, None], pick + 1]
    ea, eb = e[rows[:, None], pick], e[rows[:, None], pick + 1]
    who, Rj = sellers[rows], R.take(rows)
    ratio = float(((b - a) / (_JUMP_WIDTH * Rj.col("width"))).max())
    n_iter = int(min(40, math.ceil(math.log2(max(ratio, 1e-300)))))
    tried_z, tried_u, tried_e = [], [], []
    for _ in range(max(n_iter, 0)):
        mid = (a + b) / 2
        u, em = ev(who, mid)
        tried_z.append(mid)
        tried_u.append(u)
        tried_e.append(em)
        m = em.mean(axis=0)
        left = np.abs(ea - m) >= np.abs(m - eb)  # the bigger change is in [a, mid]
        b, eb = np.where(left, mid, b), np.where(left, m, eb)
        a, ea = np.where(left, a, mid), np.where(left, ea, m)
    wj = 1e-6 * Rj.col("width")
    side = Rj.clip(np.concatenate([a - wj, b + wj], axis=1))
    u, es = ev(who, side)
    tried_z.append(side)
    tried_u.append(u)
    tried_e.append(es)
    return rows, np.concatenate(tried_z, 1), np.concatenate(tried_u, 2), np.concatenate(tried_e, 2)


def _sections(ev, sellers, T, Z, G, P: _Plan, R: _Rows):
    """Multi-start section search: from each seller's ``n_starts`` best candidates,
    shrink the bracket between the start's neighbours (among Z) around the best of
    ``n_sections`` equally spaced points, ``n_iter`` times.  Returns the reports
    and mean gains tried, (k, n_starts * n_sections * n_iter) each."""
    k = Z.shape[0]
    order = np.argsort(Z, axis=1, kind="stable")
    Zs = np.take_along_axis(Z, order, axis=1)
    rank = np.argsort(order, axis=1)  # position of each candidate in the sorted row
    starts = np.argsort(-G, axis=1, kind="stable")[:, : P.n_starts]  # best first
    rows = np.arange(k)[:, None]
    pos = rank[rows, starts]
    a = Zs[rows, np.maximum(pos - 1, 0)]
    b = Zs[rows, np.minimum(pos + 1, Zs.shape[1] - 1)]
    xbest, gbest = Z[rows, starts], G[rows, starts]
    frac = np.arange(1, P.n_sections + 1) / (P.n_sections + 1)
    tried_z, tried_g = [], []
    for _ in range(P.n_iter):
        pts = R.clip(a[:, :, None] + (b - a)[:, :, None] * frac)  # (k, S, m)
        U, _ = ev(sellers, pts.reshape(k, -1))
        g = _gains(U, T)[0].reshape(pts.shape)
        tried_z.append(pts.reshape(k, -1))
        tried_g.append(g.reshape(k, -1))
        j = np.argmax(g, axis=2)
        gj = np.take_along_axis(g, j[:, :, None], axis=2)[:, :, 0]
        better = gj > gbest
        xbest = np.where(better, np.take_along_axis(pts, j[:, :, None], axis=2)[:, :, 0], xbest)
        gbest = np.maximum(gbest, gj)
        h = (b - a) / (P.n_sections + 1)
        a, b = np.maximum(a, xbest - h), np.minimum(b, xbest + h)
    if not tried_z:
        return np.empty((k, 0)), np.empty((k, 0))
    return np.concatenate(tried_z, axis=1), np.concatenate(tried_g, axis=1)


def _type_gains(Z, T, E):
    """Adjacent type gains on the sorted candidates (exact evaluations, payments T): a
    seller of cost z_j reporting z_j+1 gains v_j+1 + (z_j+1 - z_j) eps_j+1 - v_j, one of
    cost z_j+1 reporting z_j gains v_j - (z_j+1 - z_j) eps_j - v_j+1, with v(z) = t(z) -
    z eps(z); each product by privacy.limit's rule (0 x inf = 0: v(0) = t(0); a type
    z > 0 reporting 0 at eps = +inf gains -inf).  Returns the best per seller and its
    (cost, report)."""
    order = np.argsort(Z, axis=1, kind="stable")
    z = np.take_along_axis(Z, order, axis=1)
    e = np.take_along_axis(E, order, axis=1)
    v = np.take_along_axis(T, order, axis=1) - privacy_cost(z, e)
    dz = np.diff(z, axis=1)
    down = v[:, 1:] + privacy_cost(dz, e[:, 1:]) - v[:, :-1]  # type z_j reports z_j+1
    up = v[:, :-1] - privacy_cost(dz, e[:, :-1]) - v[:, 1:]  # type z_j+1 reports z_j
    both = np.concatenate([down, up], axis=1)
    j = np.argmax(both, axis=1)
    rows = np.arange(Z.shape[0])
    m = dz.shape[1]
    jj = j % m
    is_down = j < m
    cost = np.where(is_down, z[rows, jj], z[rows, jj + 1])
    report = np.where(is_down, z[rows, jj + 1], z[rows, jj])
    return both[rows, j], np.column_stack([cost, report])


def _tol(tol_terms, width, eps, pay) -> np.ndarray:
    """Each seller's tolerance on its own scale: tol_factor x its support width x its
    largest eps among its own reports (+ ``_PAY_REL`` x its largest |payment|, the
    payments' rounding; + tol_abs, 0 by default).  No other seller's allocation moves
    it, and scaling costs and payments by s scales it by s (docs/audit.md)."""
    return tol_terms[0] * width * eps + _PAY_REL * pay + tol_terms[1]


def _search(ev, sellers, c, others, P: _Plan, R: _Rows, rand, tol_terms, certify,
            targeted=None):  # fmt: skip
    """Search one group of sellers (one market or one opponent profile); ``R`` their
    own supports; ``targeted``: the rows that get the jump bisection (default all)."""
    Z, counts = _base(c, others, P, R, rand)
    r0 = Z.shape[1] - (0 if rand is None else rand.shape[1])  # the random reports' columns
    U, E = _screened(ev, sellers, Z, r0) if ev.mc else ev(sellers, Z)
    T = U[:, :, 0]
    G, S = _gains(U, T)
    Em = np.nanmean(E, axis=0) if ev.mc else E.mean(axis=0)
    Zc, Uc, Ec = Z, (np.nanmean(U, axis=0) if ev.mc else U.mean(axis=0)), Em  # (checks, type gains)
    if not ev.mc:
        Zc, Uc, Ec, G, S = _with_jumps(ev, sellers, Z, U, E, G, S, P, R, targeted, counts)
    Tc = _payments(ev, sellers, Uc, Ec, c)  # t = u + c eps, or the limit's at eps = +inf
    own = Tc - privacy_cost(Zc, Ec)  # a seller of cost z reporting z (Sec. IR, item 5)
    found = _Found(sellers, T, Em[:, 0], c, np.zeros(c.size), np.zeros(c.size),
                   own[:, 2], own[:, 1],  # columns 2, 1: the top, the floor (``_base``)
                   np.full(c.size, -np.inf), np.column_stack([c, c]), counts=counts)  # fmt: skip
    found.cand_eps = _finite_max(Ec)  # the largest finite eps: +inf is the limit at 0
    pay = np.abs(Tc).max(axis=1)
    found.tol = _tol(tol_terms, R.width, found.cand_eps, pay)
    found.scale = np.where(found.cand_eps > 0, R.width * found.cand_eps,
                           np.where(pay > 0, pay, R.width))  # fmt: skip
    if not ev.mc:
        found.type_gain, found.type_pair = _type_gains(Zc, Tc, Ec)
        j = np.argmin(own, axis=1)
        rows = np.arange(c.size)
        found.own_low, found.own_at = own[rows, j], Zc[rows, j]
    if rand is not None:
        found.rand_gain, found.rand_se = G[:, r0 : Z.shape[1]], S[:, r0 : Z.shape[1]]
        found.rand_tol = found.tol
    _monotone(found, Zc, Ec)
    if certify and not ev.mc:
        from ..certification import myerson_check

        found.check = myerson_check(Zc, Ec, Tc, (P.lo, P.hi), sellers=sellers)
    Zall = Zc if not ev.mc else Z
    if P.refine and P.n_iter > 0 and rand is not None:
        Zall, G, S = _refine(ev, sellers, T, Zall, G, S, P, R, found.tol, counts)
    _best(found, Zall, G, S, c, ev.mc)
    return found


def _finite_max(E) -> np.ndarray:
    """Each row's largest finite eps (0 when none): the scale of a row holding the
    zero-cost limit eps = +inf at a report of 0."""
    return np.where(np.isfinite(E), E, 0.0).max(axis=1)


def _payments(ev, sellers, U, E, c) -> np.ndarray:
    """(k, C) payments: u + c eps, and at eps = +inf (a report of 0, the zero-cost
    limit) the payment the evaluator kept there (u = -inf at c > 0 does not carry it)."""
    with np.errstate(invalid="ignore"):  # -inf + inf at the limit: replaced below
        T = U + privacy_cost(c[:, None], E)
    rows, cols = np.nonzero(np.isposinf(E))
    if rows.size:
        T[rows, cols] = [ev.floor_pay[int(sellers[r])] for r in rows]
    return T


def _with_jumps(ev, sellers, Z, U, E, G, S, P, R, targeted, counts):
    """The jump bisection's reports appended (the truth padding the rows without)."""
    Em = E.mean(axis=0)
    Zc, Uc, Ec = Z, U.mean(axis=0), Em
    t = np.arange(sellers.size) if targeted is None else targeted
    jumped = _jumps(ev, sellers[t], Z[t], Em[t], P, R.take(t)) if t.size else None
    counts["jumps"] = 0
    if jumped is None:
        return Zc, Uc, Ec, G, S
    rows, Zj, Uj, Ej = jumped
    rows = t[rows]
    counts["jumps"] = Zj.shape[1] * rows.size / max(sellers.size, 1)
    pad = np.repeat(Z[:, :1], Zj.shape[1], axis=1)  # the truth: gain 0
    padU = np.repeat(U[:, :, :1], Zj.shape[1], axis=2)
    padE = np.repeat(E[:, :, :1], Zj.shape[1], axis=2)
    pad[rows], padU[:, rows], padE[:, rows] = Zj, Uj, Ej
    Zc = np.concatenate([Z, pad], axis=1)
    Uc = np.concatenate([Uc, padU.mean(axis=0)], axis=1)
    Ec = np.concatenate([Ec, padE.mean(axis=0)], axis=1)
    Gj, Sj = _gains(padU, U[:, :, 0])
    return Zc, Uc, Ec, np.concatenate([G, Gj], axis=1), np.concatenate([S, Sj], axis=1)


def _monotone(found, Zc, Ec) -> None:
    """Monotonicity along each seller's sorted own reports (a rise beyond ``_MONO_TOL``
    of that seller's own largest eps)."""
    order = np.argsort(Zc, axis=1, kind="stable")
    e_s, z_s = np.take_along_axis(Ec, order, axis=1), np.take_along_axis(Zc, order, axis=1)
    scale = np.maximum(_finite_max(Ec)[:, None], 1e-300)
    with np.errstate(invalid="ignore"):  # +inf then +inf (both at 0): no rise
        rise = np.nan_to_num(np.diff(e_s, axis=1), nan=0.0) > _MONO_TOL * scale
    found.mono = np.asarray(~rise.any(axis=1))
    found.violations = [
        (int(r), float(z_s[r, j]), float(z_s[r, j + 1]), float(e_s[r, j]), float(e_s[r, j + 1]))
        for r, j in zip(*np.nonzero(rise), strict=True)
    ]


def _within_reach(G, S, tol) -> np.ndarray:
    """Sellers with a gain within reach of their tolerance: some candidate's gain G
    exceeds tol / 10 by 2 of its standard errors S (exact: S = 0; a smooth gain above
    tol shows 0.19 tol at one of the probes).  Monte Carlo: a gain that stands less
    than 2 SE above tol / 10 in the search's draws is noise to them, which more
    candidates ranked by the same draws cannot sort out (the confirmation decides)."""
    return np.max(G - 2.0 * S, axis=1) > tol / 10


def _refine(ev, sellers, T, Zall, G, S, P, R, tol, counts):
    """The local section search for the sellers with a gain within reach of their
    tolerance (``_within_reach``)."""
    c = Zall[:, 0]
    hot = np.nonzero(_within_reach(G, S, tol))[0]
    counts["local"] = 0
    if hot.size == 0:
        return Zall, G, S
    Zl, Gl = _sections(ev, sellers[hot], T[:, hot], Zall[hot], G[hot], P, R.take(hot))
    counts["local"] = Zl.shape[1] * hot.size / sellers.size
    padZ = np.repeat(c[:, None], Zl.shape[1], axis=1)
    padG = np.zeros((c.size, Zl.shape[1]))
    padZ[hot], padG[hot] = Zl, Gl
    return (np.concatenate([Zall, padZ], axis=1), np.concatenate([G, padG], axis=1),
            np.concatenate([S, np.zeros_like(padG)], axis=1))  # fmt: skip


def _best(found, Zall, G, S, c, mc: bool) -> None:
    """Each seller's best report.  Monte Carlo: always a misreport (the best of the
    candidates other than the truth), so that its confirmation compares two reports
    and its standard error is not 0 by construction (a truth confirmed against itself
    would confirm nothing)."""
    rows = np.arange(c.size)
    if mc and G.shape[1] > 1:
        Gm = np.where(np.abs(Zall - c[:, None]) > 0, G, -np.inf)
        Gm[:, 0] = -np.inf
        j = np.argmax(Gm, axis=1)
        j = np.where(np.isfinite(Gm[rows, j]), j, 0)
        found.best_gain = np.maximum(G[rows, j], 0.0)
        found.best_se = S[rows, j]
        found.best_report = Zall[rows, j]
        return
    j = np.argmax(G, axis=1)
    found.best_gain = np.maximum(G[rows, j], 0.0)
    found.best_se = np.where(G[rows, j] > 0, S[rows, j], 0.0)
    found.best_report = np.where(G[rows, j] > 0, Zall[rows, j], c)


@dataclass
class _Market:
    """Per seller of one market: the search's results and (Monte Carlo) the stats of
    the confirmation; ``groups``: the report vectors searched (market first)."""

    costs: np.ndarray
    truth: np.ndarray
    top: np.ndarray
    bottom: np.ndarray
    best_report: np.ndarray
    gain: np.ndarray
    gain_se: np.ndarray
    gain_tol: np.ndarray  # the tolerance of the group the best gain was found in
    tol: np.ndarray  # each seller's tolerance in the drawn market (``_tol``)
    profile: np.ndarray  # label of the best gain's profile
    best_group: np.ndarray
    type_gain: np.ndarray
    type_pair: np.ndarray
    type_profile: np.ndarray
    type_tol: np.ndarray  # the tolerance of the group the type gain was found in
    ir: _IR  # exact evaluations: the least utility + tol over every own type seen
    mono: np.ndarray
    truth_eps: np.ndarray
    payments: np.ndarray
    groups: list
    found: _Found
    profile_counts: dict
    profile_candidates: float
    skipped: list
    stats: dict = field(
        default_factory=dict
    )  # Monte Carlo: quantity -> (mean, se, skew, stable, D)
    profiles_certified: bool = False  # no profile searched: the market's check certified


@dataclass
class _IR:
    """Per seller, the IR evidence of exact evaluations: the least margin u + tol over
    every own-type utility the audit saw (the drawn cost, the top, the bottom, every
    report tried as a type, in every profile), that utility, its type (cost) and where."""

    margin: np.ndarray
    utility: np.ndarray
    cost: np.ndarray
    where: np.ndarray

    @classmethod
    def empty(cls, n: int) -> _IR:
        return cls(np.full(n, np.inf), np.full(n, np.inf), np.full(n, np.nan),
                   np.full(n, "", dtype=object))  # fmt: skip

    def add(self, sellers, found: _Found, label: str, costs) -> None:
        """The group's own-type utilities of ``sellers`` (exact)."""
        R = (found.truth.mean(axis=0), found.top, found.bottom, found.own_low)
        where = (
            "at the drawn cost",
            "at the top of the own support",
            "at the bottom of the own support",
            "at a report tried, as a type",
        )
        at = (costs[sellers], None, None, found.own_at)
        for u, w, cost in zip(R, where, at, strict=True):
            if u is None:
                continue
            m = u + found.tol
            better = m < self.margin[sellers]
            idx = sellers[better]
            self.margin[idx], self.utility[idx] = m[better], u[better]
            self.cost[idx] = np.nan if cost is None else cost[better]
            self.where[idx] = f"{w} ({label})"
