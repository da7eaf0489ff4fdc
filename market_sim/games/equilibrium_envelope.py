"""The envelope step: a bid table's payments made to agree with its allocation.

In a Bayes-Nash equilibrium where a class-g seller's report b_g(c) increases with its
cost, its utility u_g(c) = max_z T_g(z) - c E_g(z) is a maximum of functions linear in c,
and the envelope theorem (Milgrom and Segal 2002; Myerson's lemma in the mechanism's
terms) gives

    u_g(c) = u_g(c_top) + int_c^c_top E_g(b_g(t)) dt                          (E1)

so the payment a seller of cost c gets at its own report is

    T_g(b_g(c)) = u_g(c) + c E_g(b_g(c)).                                      (E2)

For a mechanism with an exact ``interim`` (E and T of a report z given, per opponent
class, the probability that one opponent reports below z), E_g(b_g(t)) is what the
table's allocation gives a seller of cost t: its own class's opponents are below it
with probability F_g(t) (the rank: the bids increase), the other classes with their
report laws' probability of a report below b_g(t).  Holding those probabilities fixed,
(E2) is solved for the report z: T(z | below) = u_g(c) + c E_g (the payment rises with
the report: z E for pay-as-bid, E + z - 1 for an all-pay contest).

With one class the allocation F(t) does not depend on the bids at all, so one step maps
any increasing table to the equilibrium of the game (up to the quadrature of (E1) on the
table's costs): revenue equivalence, constructively.  With several classes the others'
probabilities below b_g(t) depend on their bids, and the step is iterated with damping;
``market_sim.games.equilibrium_distributional.bid_tables`` keeps whichever table (before or
after the steps) has the smallest exact relative epsilon, so the step cannot make a
result worse by that measure.  Costs whose seller gets (almost) nothing (E < 1e-4: a
reserve, the costs priced out) keep their bids where (E2) does not fix a report that
never sells (first price: T = z E); where the payment still rises with the report (an
all-pay contest's effort) they move like the others.  u_g(c_top) is the top cost's
best-response utility (``_top_utility``).

**The inverse bids** (``inverse_bid_tables``).  With several classes the damped step
need not converge (on three unlike first-price classes it does not: issue #48), so the
fixed point it seeks is also solved directly.  In a monotone equilibrium let G_h(z) be
the probability that a class-h seller reports below z; the class-g seller who reports z
has the cost c_g(z) = F_g^-1(G_g(z)), and z is its best report, so the derivative of its
utility T(z, G(z)) - c E(z, G(z)) along z is zero (the first-order condition of (E2)):

    sum_h (dT/dG_h - c_g dE/dG_h) G_h'(z) = c_g dE/dz - dT/dz,   g = 1..classes   (E3)

a linear system for G'(z) at every z, with the partial derivatives of the mechanism's
``interim`` (its deviator's E and T given, per opponent class, the probability of a
report below z) by finite differences: no formula of a particular mechanism.  For first
price, dE/dz = 0, dT/dz = E and dT/dG_h = z dE/dG_h = -z m_h E / (1 - G_h), and (E3)
is sum_h m_h G_h' / (1 - G_h) = 1 / (z - c_g), the asymmetric first-price system
(Marshall, Meurer, Richard and Stromquist 1994; Lebrun 1999), m_h the class-g seller's
opponents of class h.  The boundary conditions: every class's lowest cost bids a
common lowest bid b_0 (G(b_0) = 0), and no class's bid meets its cost (c_g(z) < z)
before the top of the bids (the lowest top of the supports, or where selling stops: a
reserve).  b_0 is found by shooting: too low and some c_g(z) meets z below the top, too
high and none does; bisection to ``_SHOOT_TOL`` of the range, the integrations stopped
``_TOP_GAP`` below the top.  The profile's error near the top grows like the error of
b_0: 1e-5 of it costs several percent of epsilon on asym-3, 1e-7 none (asym-3c's b_0
is 1.2e-7 below the reference's; exact epsilon 0.02%).

**Exits** (``_end_of``).  A class's seller of cost c_g(z) who reports z earns u_g = T -
c_g E; where it comes to 0 (event ``broke_even``) under first price, u = (z - c) E,
its cost has met its bid: b_0 was too low.  In an all-pay contest of three or more
unlike classes it is where the class **exits**: its costs above c* = c_g(z_e) make no
effort (the report 1, where they earn 0), and the others go on without it (its G held:
(E3) without its row and column).  The exit is an equilibrium's only if the seller of
cost c* earns less at any report above z_e than at 1: its utility along the others'
play must fall as the report rises past z_e, d/dz u = A_g G' - r_g < 0 (row g of (E3)
with the class gone; first price's slope is E > 0, so it never exits).  The local rule
instead (drop the class where its G' in (E3) reaches 0) is no equilibrium: its seller of
cost c* would then earn more at every report above, up to 1, than at z_e.  Classes tied
with it (like laws split into classes) exit together; with fewer than two sellers left
the run ends ("alone": the last class breaking even as the top nears, too low again).
U[0, 1] + Beta(2, 5) + F = sqrt(c), one seller each: the uniform seller exits at z =
0.891 with 40% of its costs bidding; exact epsilon 11.8% / 6.1% / 0.91% before, 0.01% or
less with exits.  A class that should stop bidding on a range of reports and
bid again above it (a gap: Parreiras and Rubinchik 2010) is not built.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import numpy as np
from scipy.integrate import cumulative_trapezoid, solve_ivp

from ..distributions import law_quantiles
from .equilibrium_game import Classes, Interim

__all__ = ["envelope_step", "inverse_bid_tables"]

#: reports of the range searched for the payment (E2) asks for (then linear in between)
_REPORTS = 2049
#: a cost whose expected eps is below this keeps its bid (nothing to fix a report by)
_LIVE = 1e-4


def envelope_step(
    interim: Callable,
    classes: Classes,
    tables: Sequence[tuple[np.ndarray, np.ndarray]],
    z_range: tuple[float, float],
    damping: float = 1.0,
    cdfs: Sequence[Callable] | None = None,
) -> list[tuple[np.ndarray, np.ndarray]]:
    """One envelope step on every class's table (module doc): the bids b + damping (z_E -
    b), z_E the report that pays what (E1)-(E2) say at the table's allocation, made
    non-decreasing.  The costs of each table are kept."""
    tables = [(np.asarray(c, dtype=float), np.maximum.accumulate(b)) for c, b in tables]
    laws_of = Interim(classes, [c for c, _ in tables], [b for _, b in tables], cdfs)
    counts = np.asarray(classes.counts)
    Z = np.linspace(z_range[0], z_range[1], _REPORTS)  # the reports searched
    below_Z = laws_of.below(Z)  # the top cost's opponents at each (every class alike)
    out = []
    for g, (costs, bids) in enumerate(tables):
        opponents = counts - (np.arange(counts.size) == g)
        below = laws_of.below(bids)
        below[g] = np.clip(np.asarray(classes.laws[g].cdf(costs), dtype=float), 0.0, 1.0)
        E, T = (np.asarray(x, dtype=float) for x in interim(bids, below, opponents))
        own = T[-1] - costs[-1] * E[-1]
        u_top = _top_utility(interim, Z, below_Z, opponents, costs[-1], own)
        target = _envelope_payment(costs, E, T, u_top)
        z_env, found, slope = _report_paying(interim, below, opponents, target, Z)
        move = found & ((E >= _LIVE) | (slope >= _LIVE))
        new = np.where(move, bids + damping * (z_env - bids), bids)
        out.append((costs, np.maximum.accumulate(new)))
    return out


def _top_utility(interim, Z, below_Z, opponents, c_top: float, own: float) -> float:
    """u(c_top) of (E1): the top cost's best-response utility against the table, the
    larger of its own report's ``own`` and the best of the reports ``Z`` (the range's
    ``_REPORTS``; ``below_Z`` the table's report laws below each).  The envelope
    theorem's u is the value max_z T(z) - c E(z), not the table's utility at its own
    report: an all-pay contest's table whose top bid is 0.9993 (a grid's top cell,
    purified) has u(c_top) = -0.0007 where the report 1 earns 0, and (E1) from it put
    every bid 0.0007 low (exact epsilon 6% of u on 4 sellers of Beta(2, 5); issue #48).
    For first price and pay-as-bid the two agree: the top cost earns 0 (E = 0 at or
    above its cost, a loss below)."""
    E, T = (np.asarray(x, dtype=float) for x in interim(Z, below_Z, opponents))
    return max(float(own), float(np.max(T - c_top * E)))


def _envelope_payment(costs: np.ndarray, E: np.ndarray, T: np.ndarray, u_top: float) -> np.ndarray:
    """(E2) at every cost of the table: u(c_top) + int_c^c_top E dt + c E (E1), the
    integral by the trapezoid rule on the table's costs (dense where the law's mass
    is: they are its quantiles), u(c_top) from ``_top_utility``."""
    tail = cumulative_trapezoid(E[::-1], -costs[::-1], initial=0.0)[::-1]
    return u_top + tail + costs * E


def _report_paying(interim, below, opponents, target, Z):
    """Per cost, the lowest report z of the range with T(z | below) >= target (the
    first crossing on the even reports ``Z``, then linear between the two around
    it), whether there is one, and dT/dz there (a cost that never sells is moved only
    where the payment still fixes its report: an all-pay contest's dT/dz is 1, first
    price's E)."""
    n = target.size
    reps = np.repeat(below, Z.size, axis=1)
    _, T = interim(np.tile(Z, n), reps, opponents)
    T = np.asarray(T, dtype=float).reshape(n, Z.size)
    reached = T >= target[:, None]
    j = np.argmax(reached, axis=1)
    found = reached.any(axis=1) & (j > 0)
    j = np.maximum(j, 1)
    rows = np.arange(n)
    t0, t1 = T[rows, j - 1], T[rows, j]
    frac = np.clip((target - t0) / np.maximum(t1 - t0, 1e-300), 0.0, 1.0)
    slope = (t1 - t0) / (Z[j] - Z[j - 1])
    return Z[j - 1] + (Z[j] - Z[j - 1]) * frac, found, slope


# ---- the inverse bids: the system (E3) ---------------------------------------------------
#: bisection on the common lowest bid until the bracket is this share of the bid range
#: (1e-10 before: b_0 moved by 2e-9 on asym-3 and 4e-9 on asym-reserve, the reference's
#: exact gains of the tables alike to 3 digits on every class of asym-2, asym-3 and
#: asym-reserve; 1e-7 raised one of asym-3's 15-fold)
_SHOOT_TOL = 1e-8
#: the integration's relative tolerance (an explicit Runge-Kutta pair)
_RTOL = 1e-7
#: while the bracket on b_0 is wide the bisection integrates looser: rtol this share of
#: the bracket's width (a share of the range), between ``_RTOL`` and ``_LOOSE_RTOL``; a
#: start that far from b_0 is decided by an integration that coarse (asym-3: the same
#: b_0 to the last bit, 34% less CPU), and the final bracket is re-decided at ``_RTOL``
#: (``_shoot``: a wrong loose decision costs a bisection at ``_RTOL``, not a wrong b_0)
_RTOL_PER_WIDTH, _LOOSE_RTOL = 0.1, 1e-4
#: finite-difference steps of the interim's derivatives: in the report (a share of the
#: range, backward: a reserve's jump lies above) and in a probability (central)
_DZ, _DG = 1e-7, 1e-5
#: the shooting's integrations stop this share of the range below the top (the system is
#: stiff at the top, where the costs meet the bids: a new 3-class game took 100 s to the
#: top, 26 s so); b_0 moves by 9e-8 there, by 3.4e-7 from U[1, 2] + U[0, 2]'s closed
#: form (its bids within 2.5e-5); the last integration runs to the top
_TOP_GAP = 1e-3
#: ``_tables_short_of_top``: where the system is singular before the top, the shooting's
#: and the table's end this share of the range below the top (U[0, 1] against Beta(2,
#: 5) in an all-pay contest: exact epsilon 0.87% at 1e-3, 0.009% at 1e-5, 0.007% at
#: 1e-6; 3 of U[0, 1] against one of Beta(5, 2), whose seller earns 0.001: 0.54% at
#: 1e-5, 0.032% at 1e-6, and no contest of the table worse), and the probability left
#: above it from which a class's costs there are an atom
_ATOM_GAP, _ATOM_MASS = 1e-6, 1e-3
#: classes whose sellers' utilities are within this of the one breaking even break even
#: with it (like laws split into classes: one exiting alone left the others to the top
#: with none filled, ties at the report 1)
_TIE = 1e-10
#: bids per table (dense towards the top, where the bids bend, and at b_0, where a class
#: whose density vanishes at its low end has its costs rise steeply: 3 sellers of F =
#: c^0.3 against 2 of Beta(3, 2), the Beta class's costs 0-0.010 in the first cell of
#: 2e-4 above b_0, its bids there 1.4e-4 high: exact epsilon 2.1%; issue #48)
_TABLE_BIDS = 4001


class _NoSolution(Exception):
    """(E3) has no finite solution here (a singular system: not a monotone first-order
    condition of this mechanism)."""


class _InverseBids:
    """The right side of (E3): G'(z) from the interim's derivatives at (z, G(z))."""

    def __init__(self, interim: Callable, classes: Classes, width: float):
        self.interim, self.counts = interim, np.asarray(classes.counts)
        self.quantiles = [_tabulated_ppf(law) for law in classes.laws]
        self.dz = _DZ * width
        self._last: tuple = (math.nan, np.empty(0), np.empty((2, 0)))

    def costs(self, G: np.ndarray) -> np.ndarray:
        """c_g = F_g^-1(G_g) per class (``G`` (classes,) or (classes, points))."""
        return np.array([np.interp(x, u, c) for (u, c), x in zip(self.quantiles, G, strict=True)])

    def __call__(self, z: float, G: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
        """G'(z) from (E3)'s rows of the classes not ``out`` (exited: their G' is 0)."""
        live = np.ones(G.size, dtype=bool) if out is None else ~out
        A, r = self._system(z, G, live)
        try:
            sub = np.linalg.solve(A[np.ix_(live, live)], r[live])
        except np.linalg.LinAlgError as e:
            raise _NoSolution from e
        if not np.all(np.isfinite(sub)):
            raise _NoSolution
        slopes = np.zeros(G.size)
        slopes[live] = sub
        return slopes

    def _system(self, z: float, G: np.ndarray, rows: np.ndarray):
        """(A, r) of (E3) in the rows ``rows`` (the others NaN); remembers each row's
        deviator's E and T at (z, G) (``utility``: the step's last point, where the
        events are evaluated, is its last evaluation)."""
        k = G.size
        c = self.costs(np.clip(G, 0.0, 1.0))
        A, r = np.full((k, k), np.nan), np.full(k, np.nan)
        Z = np.full(2 + 2 * k, float(z))
        Z[1] -= self.dz
        B = np.repeat(G[:, None], Z.size, axis=1)  # unclipped: E > 0 as G_h nears 1
        B[np.arange(k), 2 + 2 * np.arange(k)] += _DG
        B[np.arange(k), 3 + 2 * np.arange(k)] -= _DG
        at = np.full((2, k), np.nan)
        for g in np.flatnonzero(rows):
            opponents = self.counts - (np.arange(k) == g)
            E, T = (np.asarray(x, dtype=float) for x in self.interim(Z, B, opponents))
            dE_dG, dT_dG = (E[2::2] - E[3::2]) / (2 * _DG), (T[2::2] - T[3::2]) / (2 * _DG)
            A[g] = dT_dG - c[g] * dE_dG  # (E3), its row g
            r[g] = c[g] * (E[0] - E[1]) / self.dz - (T[0] - T[1]) / self.dz
            at[:, g] = E[0], T[0]
        self._last = (float(z), G.copy(), at)
        return A, r

    def utility(self, z: float, G: np.ndarray, g: int) -> tuple[float, float]:
        """(u, E) of class g's seller whose cost is c_g(z), reporting z: u = T - c E."""
        last_z, last_G, at = self._last
        E, T = at[:, g]
        if not (last_z == z and np.array_equal(last_G, G) and np.isfinite(E)):
            opponents = self.counts - (np.arange(G.size) == g)
            E, T = (float(np.asarray(x, dtype=float)[0]) for x in self.interim(
                np.array([float(z)]), G[:, None].astype(float), opponents))  # fmt: skip
        c = float(self.costs(np.clip(G, 0.0, 1.0))[g])
        return float(T - c * E), float(E)

    def exit_slopes(self, z: float, G: np.ndarray, leaving: np.ndarray, out: np.ndarray):
        """d/dz of u at the report z of each class ``leaving``'s seller of cost c_g(z)
        when those classes exit at z (the others' G' with them ``out`` too): (E3)'s
        rows, A_g G' - r_g."""
        slopes = self(z, G, out | leaving)
        A, r = self._system(z, G, leaving)
        return A[leaving] @ slopes - r[leaving]


def _tabulated_ppf(law) -> tuple[np.ndarray, np.ndarray]:
    """(probabilities, costs): the law's quantile function on an even grid of
    probabilities and geometric ones towards both ends (a density that vanishes or is
    singular at an end: its quantile function is steep there), for linear interpolation."""
    lo, hi = law.support
    ends = np.geomspace(1e-15, 1e-2, 1500)
    u = np.unique(np.concatenate((np.linspace(0.0, 1.0, 4097), ends, 1.0 - ends)))
    return u, np.maximum.accumulate(np.clip(np.asarray(law.ppf(u), dtype=float), lo, hi))


def _integrate(
    rhs: _InverseBids, b0: float, top: float, dense: bool = False, rtol: float = _RTOL
):  # fmt: skip
    """(E3) from (b0, G = 0) to ``top`` at relative tolerance ``rtol``: the solution
    (a ``_Path``; None if the system became singular) and whether it stopped short of
    ``top``: some class's cost met its bid first (``c_g(z) >= z``: b0 too low), some
    class's probability reached 1 first (its costs all bid below the top: b0 too low too;
    under first price with ``top`` the lowest top of the supports it implies the first,
    but an all-pay seller of costs U[0, 0.5] bids up to the top 1 against a U[0, 1]
    one, far above its costs), or some class's seller came to break even and could not
    exit (``_end_of``).  A singular system counts as met: for first price the row of a
    class whose cost meets its bid is (z - c_g) dE/dG, zero there.  Where a class exits
    the integration goes on without it (its G held: the module doc's exits)."""
    margin = 1e-9 * (top - b0)
    k = rhs.counts.size
    out, z, G, pieces = np.zeros(k, dtype=bool), b0, np.zeros(k), []
    while True:
        try:
            piece = _piece(rhs, z, G, top, out, margin, dense, rtol)
        except _NoSolution:
            return None, True
        pieces.append(piece)
        end = _end_of(rhs, piece, out)
        if isinstance(end, str):
            path = _Path(pieces, out, end)
            return path, path.t[-1] < top - margin
        out = out | end
        z, G = float(piece.t[-1]), piece.y[:, -1].copy()


def _piece(rhs: _InverseBids, z0: float, G0: np.ndarray, top: float, out: np.ndarray,
           margin: float, dense: bool, rtol: float):  # fmt: skip
    """One piece of ``_integrate``: (E3) without the classes ``out`` from (z0, G0) to
    ``top`` or to the first of its events (in this order: a cost meets its bid, a class's
    probability reaches 1, a class's seller breaks even: u = T - c E down to 0)."""

    def diagonal(z, G):
        return float(np.min(z - rhs.costs(np.clip(G, 0.0, 1.0)))) - margin

    def full(z, G):  # a class's costs all reached before the top: b0 too low as well
        return 1.0 - float(np.max(G))

    def broke_even(z, G):  # margin / 2 x E: first price's u = (z - c) E, after the diagonal
        live = np.flatnonzero(~out)
        return min(u - 0.5 * margin * E for u, E in (rhs.utility(z, G, g) for g in live))

    events = (diagonal, full, broke_even)
    for event in events:
        event.terminal = True  # type: ignore[attr-defined]
    sol = solve_ivp(lambda z, G: rhs(z, G, out), (z0, top), G0, method="RK45", rtol=rtol,
                    atol=1e-3 * rtol, events=events, dense_output=dense)  # fmt: skip
    if sol.status < 0:
        raise _NoSolution(sol.message)
    return sol


def _end_of(rhs: _InverseBids, piece, out: np.ndarray) -> np.ndarray | str:
    """Why ``piece`` stopped: "top", "diagonal" (a cost met its bid), "full" (a class's
    probability reached 1), or a seller broke even: "alone" if fewer than two sellers
    would stay without its class (an all-pay contest's end, its last class breaking even
    as the top nears; first price's sellers meet the diagonal first: ``_piece``), else
    the classes that exit there (a mask: it and any class tied with it within ``_TIE``,
    like laws, which break even together; the run goes on without them), or "met" where
    a seller's utility rises as its report rises without them (first price's slope E >
    0; an exiting all-pay class's costs above bid 0 effort, the report 1, and earn 0)."""
    if len(piece.t_events[0]):
        return "diagonal"
    if len(piece.t_events[1]):
        return "full"
    if len(piece.t_events[2]) == 0:
        return "top"
    z, G = float(piece.t[-1]), piece.y[:, -1]
    live = np.flatnonzero(~out)
    u = np.array([rhs.utility(z, G, int(h))[0] for h in live])
    leaving = np.zeros(out.size, dtype=bool)  # with the classes tied to it (like laws)
    leaving[live[u <= u.min() + _TIE]] = True
    if int(rhs.counts[~(out | leaving)].sum()) < 2:
        return "alone"
    try:
        return leaving if np.all(rhs.exit_slopes(z, G, leaving, out) < 0.0) else "met"
    except _NoSolution:
        return "met"


class _Path:
    """``_integrate``'s solution in pieces (``solve_ivp`` results), one per set of
    exited classes: the reports ``t``, ``sol(z)``, the classes ``out`` by the end, the
    reports ``exits`` where they left, and why it ended (``_end_of``)."""

    def __init__(self, pieces: list, out: np.ndarray, end: str):
        self.pieces, self.out, self.end = pieces, out, end
        self.t = np.concatenate([p.t for p in pieces])
        self.exits = np.array([p.t[-1] for p in pieces[:-1]])

    def table_bids(self) -> np.ndarray:
        """``table_bids`` on every piece: each dense at its own ends (a class that exits
        just above b_0, 2 of Beta(5, 2) against 3 of Beta(2, 5), bid on [b_0, b_0 +
        0.003], where the table over the whole range had 60 rows: exact epsilon 2.9%)."""
        return np.unique(np.concatenate([table_bids(p.t[0], p.t[-1]) for p in self.pieces]))

    def sol(self, z: np.ndarray) -> np.ndarray:
        """G at the reports ``z``, each from its piece's dense output."""
        z = np.asarray(z, dtype=float)
        which = np.searchsorted(self.exits, z, side="right")
        G = np.empty((self.pieces[0].y.shape[0], z.size))
        for i, piece in enumerate(self.pieces):
            here = which == i
            if here.any():
                G[:, here] = piece.sol(z[here])
        return G


def inverse_bid_tables(
    interim: Callable, classes: Classes, top: float
) -> list[tuple[np.ndarray, np.ndarray]] | None:
    """Each class's bid table from the inverse bids of (E3) (module doc): b_0 by
    bisection between the highest of the supports' lows and ``top`` (the lowest of their
    tops, or where selling stops), then the solution at b_0 tabulated on
    ``_TABLE_BIDS`` bids; the costs above the last one a class reaches bid the larger
    of their cost and the top bid (they never sell).  None where (E3) has no solution
    (a singular system: not a monotone first-price-like equilibrium) or the shooting
    finds no bracket."""
    lo = max(law.support[0] for law in classes.laws)
    if not top > lo:
        return None
    rhs = _InverseBids(interim, classes, top - lo)
    try:
        high = _shot_b0(rhs, lo, top, _TOP_GAP)
        if high is None:
            return None
        sol, _ = _integrate(rhs, high, top, dense=True)
        if sol is None or sol.end in ("full", "alone"):  # singular, or a class's costs all
            return _tables_short_of_top(rhs, classes, lo, top)  # bid below the top
    except (_NoSolution, ValueError, FloatingPointError):
        return None
    z = sol.table_bids()
    G = np.clip(sol.sol(z), 0.0, 1.0)
    return [
        _table_below_atom(law, z, c, top, 1.0 - G[g, -1], atom=True) if sol.out[g]
        else _table(law, z, c)
        for g, (law, c) in enumerate(zip(classes.laws, rhs.costs(G), strict=True))
    ]  # fmt: skip


def _shot_b0(rhs: _InverseBids, lo: float, top: float, gap: float) -> float | None:
    """b_0 shot with each integration stopped ``gap`` of the range below ``top``
    (``_shoot``); None when even the highest start meets the diagonal: no bracket."""
    short = top - gap * (top - lo)
    high = short - _SHOOT_TOL * (top - lo)
    if _integrate(rhs, high, short)[1]:
        return None
    return _shoot(rhs, lo, high, short, top - lo)


def _tables_short_of_top(rhs: _InverseBids, classes: Classes, lo: float, top: float):
    """The inverse bids where the integration from the b_0 shot to ``_TOP_GAP`` below
    the top ends short of the top (singular there, or a class's costs all reached): the
    system of an all-pay contest of unlike classes (``AllPayContest``: dG_h/dz = 1 / (1 -
    c_g(z)) with one opponent each) blows up as the strong class's cost nears the top of
    its support, which it reaches at the top bid, while the weak class keeps an atom
    there: its costs above some c* make no effort (Amann and Leininger 1996, two
    bidders); a strong class whose costs end at 0.5 against U[0, 1] reaches them all at
    the top bid 1, where the shot b_0 had them reached at 1 - 1e-3.  b_0 is shot
    again to ``_ATOM_GAP`` below the top (shooting to ``_TOP_GAP`` moved b_0 by 1e-3:
    U[0, 1] against Beta(2, 5), one seller each, exact epsilon 0.87% -> 0.009%); the
    costs a class has left there bid the top (its atom) when their probability is at
    least ``_ATOM_MASS``, else rise in quantile from the last bid halfway to the top,
    under the atom (pooled with it the strong class's costs 0.97-1 tied it and gained
    1.7% of u by a report just below; ``_table_below_atom``)."""
    high = _shot_b0(rhs, lo, top, _ATOM_GAP)
    if high is None:
        return None
    sol, _ = _integrate(rhs, high, top - _ATOM_GAP * (top - lo), dense=True)
    if sol is None:
        return None
    z = sol.table_bids()
    G = np.clip(sol.sol(z), 0.0, 1.0)
    left = 1.0 - G[:, -1]
    return [
        _table_below_atom(law, z, c, top, left[g], atom=bool(sol.out[g] or left[g] >= _ATOM_MASS))
        for g, (law, c) in enumerate(zip(classes.laws, rhs.costs(G), strict=True))
    ]


def _table_below_atom(
    law, z: np.ndarray, costs: np.ndarray, top: float, left: float, atom: bool
):  # fmt: skip
    """``_table`` where the costs above the last one reached, ``left`` their probability,
    bid ``top`` (``atom``: ``left`` at least ``_ATOM_MASS``, or the class exited) or rise
    with their quantile from the last bid z[-1] halfway to ``top``
    (``_tables_short_of_top``; reaching the top, the top cost tied the atom there: U[0,
    0.5] against U[0, 1], a gain of 26% of u at c = 0.5); those rows at costs even and
    by quantile."""
    hi = law.support[1]
    costs, bids = _reached(law, z, costs)
    if costs[-1] >= hi:
        return costs, bids
    F0 = 1.0 - left
    by_mass = law_quantiles(law, np.linspace(F0, 1.0, 65)[1:])
    above = np.unique(np.concatenate((np.linspace(costs[-1], hi, 65)[1:], by_mass)))
    above = above[np.isfinite(above) & (above > costs[-1]) & (above <= hi)]
    if not atom:  # up to halfway to the top: the top cost too bids under the atom
        share = np.clip((np.asarray(law.cdf(above), dtype=float) - F0) / left, 0.0, 1.0)
        rise = z[-1] + 0.5 * (top - z[-1]) * share
    else:  # the atom: from just above the last cost reached (read linearly, the next row
        # 1/64 of the support higher spread that much mass under the top: U[0, 0.5]
        # against U[0, 1], the strong seller's cheapest reports there lost to it)
        above = np.concatenate(([costs[-1] + 1e-9 * (hi - law.support[0])], above))
        rise = np.full(above.size, top)
    return np.concatenate((costs, above)), np.concatenate(
        (bids, np.maximum(rise, np.minimum(above, top)))
    )


def table_bids(b0: float, end: float) -> np.ndarray:
    """The bids of an inverse-bid table from b_0 to ``end``: ``_TABLE_BIDS`` dense at
    the top (quadratically), where the bids bend, and a tenth as many dense at b_0
    (cubically), where the costs of a class whose density vanishes at its low end rise
    steeply."""
    s = np.linspace(1.0, 0.0, _TABLE_BIDS)
    return b0 + (end - b0) * np.union1d(1.0 - s**2, s[::-1][: _TABLE_BIDS // 10] ** 3)


def _shoot(rhs: _InverseBids, low: float, high: float, short: float, width: float) -> float:
    """b_0 by bisection of the bracket [low, high] (``low`` meets the diagonal, ``high``
    does not) to ``_SHOOT_TOL`` x ``width``, each start integrated to ``short`` at the
    tolerance its bracket's width asks (``_RTOL_PER_WIDTH``); then the final bracket's
    ends decided loosely are re-decided at ``_RTOL``, and where one was wrong the
    bisection is redone at ``_RTOL`` throughout from the first bracket: the answer is
    always a bracket decided at ``_RTOL``."""
    a, b, exact = _bisect(rhs, low, high, short, width, loose=True)
    if (exact["low"] or _integrate(rhs, a, short)[1]) and (
        exact["high"] or not _integrate(rhs, b, short)[1]
    ):
        return b
    return _bisect(rhs, low, high, short, width, loose=False)[1]


def _bisect(rhs, low: float, high: float, short: float, width: float, loose: bool):
    """``_shoot``'s bisection: (low, high, whether each end was decided at ``_RTOL``);
    ``loose``: each start at the tolerance its bracket's width asks, else at ``_RTOL``."""
    exact = {"low": True, "high": True}  # decided at _RTOL (the ends of the first bracket)
    while high - low > _SHOOT_TOL * width:
        mid = 0.5 * (low + high)
        rtol = _RTOL
        if loose:
            rtol = min(_LOOSE_RTOL, max(_RTOL, _RTOL_PER_WIDTH * (high - low) / width))
        end = "low" if _integrate(rhs, mid, short, rtol=rtol)[1] else "high"
        low, high = (mid, high) if end == "low" else (low, mid)
        exact[end] = rtol <= _RTOL
    return low, high, exact


def _table(law, z: np.ndarray, costs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(costs, bids) of one class from its inverse bids c(z) on the bids ``z``: the
    lowest cost bids z[0] (b_0); the costs above the highest one reached bid the larger
    of their cost and the top bid (they never sell)."""
    hi = law.support[1]
    costs, bids = _reached(law, z, costs)
    if costs[-1] < hi:
        above = np.linspace(costs[-1], hi, 65)[1:]
        costs = np.concatenate((costs, above))
        bids = np.concatenate((bids, np.maximum(above, z[-1])))
    return costs, bids


def _reached(law, z: np.ndarray, costs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(costs, bids) of the costs the inverse bids c(z) reach on the bids ``z``: the
    lowest cost of the support bids z[0] (b_0); a cost reached on several bids, the
    lowest of them."""
    costs = np.maximum.accumulate(np.concatenate(([law.support[0]], costs[1:])))
    costs, first = np.unique(costs, return_index=True)
    return costs, z[first]
