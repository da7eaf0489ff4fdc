"""Reference games for the BNE solvers, each with a bid profile proved to be an equilibrium.

Import from tests as ``from bne_reference import ...`` (pytest puts ``tests/`` on the
path; no package), or ``from tests.bne_reference import ...`` from the repository root.
Every reference here is checked by ``exact_gain`` (tests/test_bne_reference.py): the exact
best response of each class's seller at many costs, against the others' exact report
laws, gains at most ~1e-5 of the ex-ante utility.

The games (procurement: a seller of cost c reporting z has utility T(z) - c E(z)):

* **k-unit first price** (pay-as-bid for k units): the k lowest reports sell one unit at
  their report.  n i.i.d. sellers, cost law F on [lo, hi]: a seller bidding as if its
  cost were x sells iff x < Y, Y the k-th lowest of the n - 1 others' costs, survival
  S(t) = P(fewer than k of the others below t) = sum_{j<k} C(n-1, j) F^j (1-F)^(n-1-j).
  Utility (b(x) - c) S(x); the first-order condition at x = c, d/dc [b S] = -c f_Y =
  c S', integrates (b S -> 0 at the top) to

      b(c) = c + int_c^hi S(t) dt / S(c)                                      (1)

  (k = 1: S = (1 - F)^(n-1), the issue's formula).  b is increasing and (b(x) - c) S(x)
  is single-peaked at x = c (its x-derivative is (c - x) S'(x) ... sign of c - x), so
  (1) is a BNE (Krishna, Auction Theory, Prop. 2.2 mirrored).  Closed forms: U[0, 1]:
  b = c + (1 - c)/n; F = sqrt(c), n = 3: int_c^1 (1 - sqrt t)^2 dt = 1/6 - c + 4/3
  c^(3/2) - c^2/2, so b(c) = c + (1/6 - c + 4/3 c^1.5 - c^2/2) / (1 - sqrt c)^2.
* **A reserve r** (a report above r never sells): (1) with the integral to r for c < r
  (b(r) = r: the marginal type), truth above r (any report above r is a best response
  there: it never sells).  The bid function has a kink at r (slope 0 on the left:
  b(c) = r - O((r - c)^2); slope 1 on the right).
* **All-pay procurement contest** (``AllPayContest``): the lowest report wins a prize
  of 1 (eps = 1, paid 1); every seller pays the effort 1 - z (payment z - 1): T(z) =
  P(win) + z - 1, E(z) = P(win).  It is the mirror image (v = 1 - c, z = 1 - beta) of
  the all-pay auction with values v, where u = v P(win) - beta.  Its symmetric BNE with
  values U[0, 1] is beta(v) = (n-1)/n v^n (Krishna, Ch. 2.5), so here, costs U[0, 1]:

      z(c) = 1 - (n-1)/n (1 - c)^n.                                             (2)

  Any cost law F on [0, 1] (n i.i.d. sellers): with increasing reports a seller of
  cost c wins with probability P(c) = (1 - F(c))^(n-1), and one bidding as if its cost
  were x earns u(x; c) = P(x) (1 - c) - (1 - z(x)).  The envelope condition (u(c; c) =
  u(1; 1) + int_c^1 P, u(1; 1) = 0: z(1) = 1) gives

      z(c) = 1 - (1 - c) P(c) + int_c^1 P(t) dt,                                (3)

  increasing (z' = -(1 - c) P' >= 0), and d/dx u(x; c) = P'(x) (x - c) (>= 0 below c,
  <= 0 above, P' <= 0): mimicking x = c is a best response among the reports z(x),
  which fill [z(0), 1] (z continuous, z(1) = 1); a report of [0, z(0)) wins as often as
  z(0) (always) and pays more effort, so (3) is a BNE.  U[0, 1]: (3) is (2).
* **Asymmetric first price** (one unit, classes h with laws F_h and counts n_h, a
  common lowest bid, optionally a reserve): the inverse bids phi_h(b) of a BNE solve
  the first-order conditions  sum_h m_h^(g) f_h(phi_h) phi_h' / (1 - F_h(phi_h)) =
  1 / (b - phi_g),  m^(g)_h = n_h - [h = g].  In u_h = F_h(phi_h) and y_h =
  u_h' / (1 - u_h):  y_g = S - 1/(b - phi_g),  S = sum_g n_g / (b - phi_g) / (N - 1),
  u_g' = (1 - u_g) y_g (no density needed, so laws with f(lo) = 0 are fine).  Solved
  from the common lowest bid b_0 (phi_h(b_0) = lo_h) by shooting: b_0 too low and
  some phi_g meets the diagonal before the top T (the reserve, or the common top of
  the supports); too high and none has at T.  Bisection on b_0 to 1e-13; validated
  on the closed form of U[1, 2] + U[0, 2] (``asymmetric_first_price_bid``) and on the
  symmetric (1).
* **An all-pay contest of two unlike sellers** (one of each law on [0, h], h <= 1).  In the
  mirror image (value v = 1 - c, effort e = 1 - z) a seller's utility is v P(win) - e,
  and in the BNE (Amann and Leininger 1996: unique, increasing efforts, one common top
  effort e_top; the weak seller makes no effort with positive probability) the
  effort laws H_i(e) = P(effort_i <= e) have H_j'(e) = 1 / v_i(e), v_i(e) = 1 -
  F_i^-1(1 - H_i(e)) the value of seller i making effort e (the first-order condition
  v_i h_j = 1 on [0, e_top]).  Integrated downward from (e_top, H = 1) in effort (not
  upward in the report from a common lowest report, as the solver's inverse bids do),
  with e_top shot by bisection so that the first H to reach 0 does so at effort 0:
  that seller's costs fill [z_top, 1), the other's H(0) is its atom at the report 1.
  Each seller's utility v P(win) - e is then constant in the effort over [0, e_top]
  where the other's H rises at rate 1 / v, so no effort there gains, and efforts above
  e_top win as often as e_top and cost more: a BNE (``exact_gain`` checks it).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import ClassVar

import numpy as np
from scipy import integrate, stats

from market_sim.distributions import CostDistribution, as_distribution, law_quantiles
from market_sim.mechanisms.base import Mechanism

__all__ = [
    "AllPayContest",
    "FirstPriceReserve",
    "Profile",
    "all_pay_law_profile",
    "all_pay_profile",
    "asymmetric_profile",
    "exact_gain",
    "symmetric_bid_quad",
    "symmetric_profile",
    "sqrt_law_bid",
    "uniform_bid",
    "GAMES",
]


# ---- mechanisms the library does not have -------------------------------------------
class FirstPriceReserve(Mechanism):
    """k-unit first price with a reserve: the k lowest reports at most ``reserve`` sell
    one unit each at their report (ties by index).  ``batched``; exact ``interim``."""

    name: ClassVar[str] = "first-price-reserve"
    batched: ClassVar[bool] = True

    def __init__(self, k: int = 1, reserve: float = math.inf):
        self.k, self.reserve = int(k), float(reserve)

    def outcome(self, reports, rng=None):
        R = np.atleast_2d(np.asarray(reports, dtype=float))
        rank = np.argsort(np.argsort(R, axis=1, kind="stable"), axis=1, kind="stable")
        eps = ((rank < self.k) & (R <= self.reserve)).astype(float)
        return (eps[0], (R * eps)[0]) if np.ndim(reports) == 1 else (eps, R * eps)

    def interim(self, z, below, counts):
        z = np.asarray(z, dtype=float)
        E = _fewer_than(self.k, np.asarray(below, dtype=float), counts) * (z <= self.reserve)
        return E, z * E


class AllPayContest(Mechanism):
    """All-pay procurement contest (module doc, (2)): the lowest report wins eps = 1 and
    a prize of 1; every seller pays the effort 1 - z.  ``batched``; exact ``interim``."""

    name: ClassVar[str] = "all-pay-contest"
    batched: ClassVar[bool] = True

    def outcome(self, reports, rng=None):
        R = np.atleast_2d(np.asarray(reports, dtype=float))
        eps = (np.argsort(np.argsort(R, axis=1, kind="stable"), axis=1) < 1).astype(float)
        pay = eps + R - 1.0
        return (eps[0], pay[0]) if np.ndim(reports) == 1 else (eps, pay)

    def interim(self, z, below, counts):
        z = np.asarray(z, dtype=float)
        E = _fewer_than(1, np.asarray(below, dtype=float), counts)
        return E, E + z - 1.0


def _fewer_than(k: int, below: np.ndarray, counts: Sequence[int]) -> np.ndarray:
    """P(fewer than k of the opponents report below z): per class h, counts[h]
    independent opponents each below with probability below[h] (K,)."""
    pmf = np.zeros((below.shape[1], k))
    pmf[:, 0] = 1.0
    for p, m in zip(below, counts, strict=True):
        for _ in range(int(m)):
            pmf[:, 1:] = pmf[:, 1:] * (1 - p)[:, None] + pmf[:, :-1] * p[:, None]
            pmf[:, 0] *= 1 - p
    return pmf.sum(axis=1)


# ---- profiles -----------------------------------------------------------------------
@dataclass(frozen=True)
class Profile:
    """A reference equilibrium: per class its law, count and bid function ``bids[h]``
    (vectorised), and ``below[h](z)``, the exact probability that a class-h seller
    reports below z; the mechanism that defines the game."""

    name: str
    laws: tuple[CostDistribution, ...]
    counts: tuple[int, ...]
    bids: tuple[Callable, ...]
    below: tuple[Callable, ...]
    mechanism: Mechanism
    kind: str  # "first-price" or "all-pay"
    k: int = 1
    reserve: float = math.inf

    @property
    def population(self) -> list[tuple[str, int]]:
        return [(law.spec, n) for law, n in zip(self.laws, self.counts, strict=True)]


def uniform_bid(c, n: int) -> np.ndarray:
    """(1), U[0, 1], one unit: b(c) = c + (1 - c)/n."""
    c = np.asarray(c, dtype=float)
    return c + (1 - c) / n


def sqrt_law_bid(c) -> np.ndarray:
    """(1), F(c) = sqrt(c) on [0, 1], 3 sellers, one unit (module doc's closed form)."""
    c = np.asarray(c, dtype=float)
    s = np.sqrt(c)
    num = 1 / 6 - c + 4 / 3 * c**1.5 - c**2 / 2
    with np.errstate(divide="ignore", invalid="ignore"):
        m = num / (1 - s) ** 2
    # near c = 1: (1 - sqrt t)^2 ~ (1 - t)^2 / 4, so the markup ~ (1 - c) / 3
    return np.where(c < 1 - 1e-4, c + m, c + (1 - c) / 3)


def _survival(law: CostDistribution, n: int, k: int) -> Callable:
    """S(t) = P(fewer than k of the n - 1 others' costs below t), vectorised."""

    def S(t):
        F = np.asarray(law.cdf(t), dtype=float)
        return stats.binom.cdf(k - 1, n - 1, F)

    return S


def symmetric_bid_quad(c, law, n: int, k: int = 1, reserve: float | None = None) -> np.ndarray:
    """(1) at the costs ``c`` by adaptive quadrature (``scipy.integrate.quad`` at 1e-12),
    one cost at a time: slow, the check of the tables ``symmetric_profile`` uses."""
    law = as_distribution(law)
    top = law.support[1] if reserve is None else min(float(reserve), law.support[1])
    S = _survival(law, n, k)

    def one(x):
        s = float(S(x))
        if x >= top or s < 1e-14:
            return x
        return x + integrate.quad(lambda t: float(S(t)), x, top, epsabs=1e-13, epsrel=1e-12,
                                  limit=200)[0] / s  # fmt: skip

    return np.vectorize(one, otypes=[float])(np.asarray(c, dtype=float))


def symmetric_profile(
    law, n: int, k: int = 1, reserve: float | None = None, name: str = ""
) -> Profile:
    """(1) for n i.i.d. sellers of ``law`` (a spec or law), k units, an optional reserve:
    the integral cumulated over a fine table of costs (8-point Gauss-Legendre per cell;
    ``symmetric_bid_quad`` checks it), the bids linearly interpolated."""
    law = as_distribution(law)
    top = law.support[1] if reserve is None else min(float(reserve), law.support[1])
    costs, bids = _symmetric_table(law, _survival(law, n, k), top)
    bid, below = _read_in_quantile(law, costs, bids, truth_above=top)
    mech = FirstPriceReserve(k, math.inf if reserve is None else float(reserve))
    label = name or f"first price k={k}, {n} x {law.spec}" + (
        f", reserve {reserve:g}" if reserve is not None else ""
    )
    return Profile(label, (law,), (n,), (bid,), (below,), mech, "first-price", k, mech.reserve)


def _symmetric_table(law, S, top, points: int = 8001):
    """(costs, bids) of (1) on a fine grid (``_survival_tail``), truth above the top."""
    c, tail, Sc = _survival_tail(law, S, top, points)
    with np.errstate(divide="ignore", invalid="ignore"):
        bids = np.where(Sc > 1e-14, c + tail / Sc, c)
    return _truthful_above(law, top, c, bids)


def _truthful_above(law, top, c, bids):
    """The table extended by truth on (top, hi] (a reserve below the support's top)."""
    hi = law.support[1]
    if top < hi:
        above = np.linspace(top, hi, 200)[1:]
        c, bids = np.concatenate((c, above)), np.concatenate((bids, above))
    return c, bids


def _survival_tail(law, S, top, points: int = 8001):
    """(costs, int_c^top S, S(c)) on a fine grid of costs up to ``top`` (the law's
    quantiles, 1000 more geometric from 1e-15 to 1e-2 towards each end, and an even
    grid): the integral cumulated over the cells, each cell's by Gauss-Legendre of 8
    points.  The geometric ones: the table is read linearly in the cost, and where
    the density is singular the bid is not (F = sqrt(c), first price, 3 sellers: the
    bid rises like sqrt(c) above b(0); read between the quantiles 0 and 1/8000 the
    table gave a gain above 1e-5 of u at costs under 1e-8)."""
    lo, hi = law.support
    tail = np.geomspace(1e-15, 1e-2, 1000)
    by_mass = law_quantiles(law, np.concatenate((np.linspace(0, 1, points), tail, 1 - tail)))
    by_mass = by_mass[np.isfinite(by_mass)]
    c = np.unique(np.concatenate((np.clip(by_mass, lo, top), np.linspace(lo, top, points))))
    x, w = np.polynomial.legendre.leggauss(8)
    a, b = c[:-1], c[1:]
    mid, half = 0.5 * (a + b), 0.5 * (b - a)
    t = mid[:, None] + half[:, None] * x[None, :]
    St = S(t)
    cell = (St * w[None, :]).sum(axis=1) * half
    tail = np.concatenate((np.cumsum(cell[::-1])[::-1], [0.0]))  # int_c^top S
    return c, tail, S(c)


def _below_from_table(law, costs, bids) -> Callable:
    """P(b(C) < z) for C from ``law`` and b the table (costs, bids) linearly
    interpolated (flat beyond its ends): F(b^-1(z)) with b^-1 the inverse of that
    piecewise-linear function, exact where the bids rise strictly (issue #48: the
    interpolation of F itself between the table's costs, used before, put a curved
    law's report law off in a coarse first cell: Beta(1, 3), a 36-cost table, the
    exact gain at c = 0 read 1.41% of u where 4 M i.i.d. draws give 1.00%).  A flat
    piece of the table is an atom of the reports: at its bid a tie counts half,
    (F(sup{c : b(c) < z}) + F(sup{c : b(c) <= z})) / 2, a symmetric tie-break between
    two sellers (ties among three or more, of probability O(atom mass^2), are read as
    independent halves).  Before, ``np.interp`` on the repeated bids read the whole atom
    as below, a tie as a loss, and the gain of undercutting an atom twice its size
    (issue #48: 2-unit first price with a reserve of 0.7, 4 sellers on Beta(0.5, 2), the
    distributional method's tables with an atom at 0.6925: 0.23% of u where the
    mechanism's tie rule gives 0.12%, what the solver printed)."""
    c = np.asarray(costs, dtype=float)
    b = np.maximum.accumulate(np.asarray(bids, dtype=float))

    def sup_cost(z, side):
        # sup{c : b(c) < z} ("left") or sup{c : b(c) <= z} ("right") of the
        # interpolated table: the cell where b crosses z, read linearly
        n_below = np.searchsorted(b, z, side=side)  # table bids below (at most) z
        j = np.clip(n_below, 1, b.size - 1)
        b0, b1, c0, c1 = b[j - 1], b[j], c[j - 1], c[j]
        t = np.clip(np.divide(z - b0, b1 - b0, out=np.zeros_like(z), where=b1 > b0), 0, 1)
        return np.where(n_below == b.size, c[-1], np.where(n_below == 0, c[0], c0 + t * (c1 - c0)))

    def below(z):
        z = np.asarray(z, dtype=float)
        tie_half = 0.5 * sum(np.asarray(law.cdf(sup_cost(z, s)), dtype=float)
                             for s in ("left", "right"))  # fmt: skip
        return np.where(z < b[0], 0.0, np.where(z > b[-1], 1.0, tie_half))

    return below


def all_pay_profile(n: int = 4) -> Profile:
    """(2): the all-pay procurement contest, n sellers with costs U[0, 1]."""
    law = as_distribution("uniform:0:1")

    def bid(c):
        c = np.asarray(c, dtype=float)
        return 1 - (n - 1) / n * (1 - c) ** n

    def below(z):  # P(z(c) < z) = P(c < 1 - ((1 - z) n / (n - 1))^(1/n))
        z = np.asarray(z, dtype=float)
        x = np.clip((1 - z) * n / (n - 1), 0.0, None)
        return np.clip(1 - x ** (1 / n), 0.0, 1.0)

    return Profile(
        f"all-pay contest, {n} x uniform:0:1", (law,), (n,), (bid,), (below,), AllPayContest(),
        "all-pay",
    )  # fmt: skip


def all_pay_law_profile(law, n: int, name: str = "") -> Profile:
    """(3): the all-pay procurement contest, n i.i.d. sellers of ``law`` on [0, 1], its
    equilibrium by quadrature (``_survival_tail``; checked against (2) on U[0, 1])."""
    law = as_distribution(law)
    lo, hi = law.support
    if lo < 0 or hi > 1:
        raise ValueError("the all-pay contest's reports live on [0, 1]")
    c, tail, P = _survival_tail(law, _survival(law, n, 1), hi)
    bids = 1.0 - (1.0 - c) * P + tail  # (3)
    bid, below = _read_in_quantile(law, c, np.maximum.accumulate(bids))
    return Profile(
        name or f"all-pay contest, {n} x {law.spec}", (law,), (n,), (bid,), (below,),
        AllPayContest(), "all-pay",
    )  # fmt: skip


def _read_in_quantile(law, costs, bids, truth_above=math.inf) -> tuple[Callable, Callable]:
    """A reference table's bid function and report law, read linearly in the quantile
    u = F(c) between its rows, not in the cost: an equilibrium bid is smooth in u, and
    where the density is singular it is not in c (F = sqrt(c), all-pay, 8 sellers: b(c)
    ~ b(0) + 7 sqrt(c); read linearly in c between the rows of 8001 quantiles it was
    off by 5e-6 at c = 8e-6, a gain of 4e-4 of u).  The report law is then exactly the
    inverse read linearly in u (``_below_from_table`` with the identity for the law).
    Above ``truth_above`` (a reserve) the bid is the cost and the report law the law."""
    u = np.clip(np.asarray(law.cdf(costs), dtype=float), 0.0, 1.0)
    u, first = np.unique(u, return_index=True)
    b = np.asarray(bids, dtype=float)[first]
    below_u = _below_from_table(as_distribution("uniform:0:1"), u, b)

    def bid(c):
        c = np.asarray(c, dtype=float)
        return np.where(c > truth_above, c, np.interp(np.asarray(law.cdf(c), dtype=float), u, b))

    def below(z):
        z = np.asarray(z, dtype=float)
        return np.where(z > truth_above, np.asarray(law.cdf(z), dtype=float), below_u(z))

    return bid, below


# ---- the asymmetric ODE ----------------------------------------------------------------
def _ode(laws, counts, b0, top, dense=True, rtol=1e-12):
    """Integrate u_h' = (1 - u_h) y_h from (b0, u = 0) towards ``top``; returns the
    solution and whether some class met the diagonal b = phi_g first."""
    N = sum(counts)
    n = np.asarray(counts, dtype=float)

    ppfs = [_fast_ppf(law) for law in laws]

    def phis(u):
        return np.array([f(min(max(x, 0.0), 1.0)) for f, x in zip(ppfs, u, strict=True)])

    def rhs(b, u):
        gap = np.maximum(b - phis(u), 1e-300)
        S = float(np.sum(n / gap)) / (N - 1)
        return (1 - np.clip(u, 0, 1)) * (S - 1 / gap)

    def diagonal(b, u):
        return float(np.min(b - phis(u))) - 1e-9 * (top - b0)

    diagonal.terminal = True  # type: ignore[attr-defined]
    sol = integrate.solve_ivp(
        rhs, (b0, top), np.zeros(len(laws)), method="DOP853", rtol=rtol, atol=1e-3 * rtol,
        events=diagonal, dense_output=dense,
    )  # fmt: skip
    hit = sol.t[-1] < top - 1e-9 * (top - b0)  # met the diagonal (or stiff there) first
    return sol, hit


def _fast_ppf(law: CostDistribution) -> Callable[[float], float]:
    """The law's quantile function as a cheap scalar function (uniform and beta laws
    in closed form / ``scipy.special.betaincinv``; else the law's own)."""
    from scipy import special

    lo, hi = law.support
    kind, _, rest = law.spec.partition(":")
    if kind == "uniform":
        return lambda u: lo + (hi - lo) * u
    if kind == "beta":
        a, b = (float(x) for x in rest.split(":")[:2])
        return lambda u: lo + (hi - lo) * float(special.betaincinv(a, b, u))
    return lambda u: float(law.ppf(u))


def asymmetric_profile(
    laws: Sequence, counts: Sequence[int], reserve: float | None = None, name: str = ""
) -> Profile:
    """The one-unit first-price BNE of classes ``laws`` x ``counts`` (all supports with the
    same top, a reserve below every top, or tops above the lowest one: those costs never
    sell and bid truthfully), by shooting on the common lowest bid (module doc).  Each
    class's bid function from the inverse bids on a dense table; the profile is an
    equilibrium only if ``exact_gain`` says so (tests/test_bne_reference.py)."""
    laws = tuple(as_distribution(x) for x in laws)
    counts = tuple(int(m) for m in counts)
    his = {law.support[1] for law in laws}
    top = min(his) if reserve is None else min(float(reserve), *his)
    lo_b, hi_b = max(law.support[0] for law in laws), top
    # the integrations stop 1e-5 of the range below the top: the system is stiff where
    # the costs meet the bids (a class whose support reaches above the top meets them
    # there with mass left: the run to the top at rtol 1e-12 did not end in 10 minutes)
    short = top - 1e-5 * (top - lo_b)
    for _ in range(60):  # bisection on the common lowest bid
        mid = 0.5 * (lo_b + hi_b)
        if _ode(laws, counts, mid, short, dense=False, rtol=1e-10)[1]:
            lo_b = mid
        else:
            hi_b = mid
        if hi_b - lo_b < 1e-13:
            break
    b0 = hi_b
    sol, _ = _ode(laws, counts, b0, short)
    grid = b0 + (sol.t[-1] - b0) * (1 - np.linspace(1, 0, 20001) ** 2)  # dense at the top
    # and dense at the bottom (a law whose density vanishes at its low end, Beta(3, 1):
    # its cost F^-1(u) rises steeply from the common lowest bid)
    grid = np.union1d(grid, b0 + (sol.t[-1] - b0) * np.linspace(0, 1, 4001)[:400] ** 3)
    U = np.clip(sol.sol(grid), 0.0, 1.0)
    bids, belows = [], []
    for h, law in enumerate(laws):
        u = np.maximum.accumulate(U[h])
        c = np.asarray(law.ppf(u), dtype=float)
        c[u <= 0] = law.support[0]
        bids.append(_bid_from_inverse(law, grid, c, top))
        belows.append(_below_interp(law, grid, u))
    mech = FirstPriceReserve(1, math.inf if reserve is None else float(reserve))
    label = name or " + ".join(f"{m} x {law.spec}" for law, m in zip(laws, counts, strict=True))
    return Profile(
        label, laws, counts, tuple(bids), tuple(belows), mech, "first-price", 1, mech.reserve
    )


def _bid_from_inverse(law, b_grid, c_grid, top) -> Callable:
    lo, hi = law.support
    c_grid, keep = np.unique(c_grid, return_index=True)
    b_grid = b_grid[keep]

    def bid(c):
        c = np.asarray(c, dtype=float)
        inside = np.interp(c, c_grid, b_grid)
        return np.where(c >= c_grid[-1], np.maximum(c, top if c_grid[-1] < hi else c), inside)

    return bid


def _below_interp(law, b_grid, u) -> Callable:
    """P(report < z) from the inverse bids on the bids ``b_grid``; above them the
    class's mass reached so far, or its cost law's where its costs bid truthfully."""

    def below(z):
        z = np.asarray(z, dtype=float)
        inside = np.interp(z, b_grid, u, left=0.0, right=u[-1])
        truthful = np.asarray(law.cdf(z), dtype=float)
        return np.where(z > b_grid[-1], np.maximum(inside, truthful), inside)

    return below


# ---- the all-pay contest of two unlike sellers ------------------------------------------
def asymmetric_all_pay_profile(laws: Sequence, name: str = "") -> Profile:
    """(module doc, the last item): the all-pay contest's BNE of one seller of each of
    the two ``laws`` on [0, h] (h <= 1), by the downward integration in effort shot on the top
    effort (bisection to 1e-13); each seller's bid function and report law read in the
    quantile from a table of 20,001 efforts dense at both ends."""
    laws = tuple(as_distribution(x) for x in laws)
    if len(laws) != 2 or any(law.support[0] != 0.0 or law.support[1] > 1.0 for law in laws):
        raise ValueError("two laws on [0, h], h <= 1 (a common top effort)")
    ppfs = [_fast_ppf(law) for law in laws]

    def value(i: int, H: float) -> float:  # v_i at the effort quantile H: 1 - F_i^-1(1 - H)
        return 1.0 - ppfs[i](min(max(1.0 - H, 0.0), 1.0))

    def rhs(e, H):  # H_j' = 1 / v_i: seller j's effort density keeps i indifferent
        return np.array([1.0 / max(value(1, H[1]), 1e-300), 1.0 / max(value(0, H[0]), 1e-300)])

    def empty(e, H):
        return float(min(H))

    empty.terminal = True  # type: ignore[attr-defined]

    def run(e_top: float, dense: bool = False):
        return integrate.solve_ivp(
            rhs, (e_top, 0.0), np.ones(2), method="DOP853", rtol=1e-12, atol=1e-15,
            events=empty, dense_output=dense,
        )  # fmt: skip

    lo_e, hi_e = 0.0, 1.0  # too little effort: both H > 0 at effort 0; too much: one empties first
    while hi_e - lo_e > 1e-13:
        mid = 0.5 * (lo_e + hi_e)
        if run(mid).t[-1] > 0.0:
            hi_e = mid
        else:
            lo_e = mid
    sol = run(hi_e, dense=True)
    e_end = float(sol.t[-1])  # effort 0 to the bisection's precision
    s = np.linspace(0.0, 1.0, 20001)
    e = np.union1d(e_end + (hi_e - e_end) * s**2, hi_e - (hi_e - e_end) * s**2)
    e = np.unique(np.clip(e, e_end, hi_e))  # rounding put one just outside the solution
    H = np.clip(sol.sol(e), 0.0, 1.0)
    bids, belows = [], []
    for i, law in enumerate(laws):
        costs = np.clip(law_quantiles(law, 1.0 - H[i]), 0.0, law.support[1])  # 1 - v_i
        z = 1.0 - e
        if H[i, 0] > 1e-9:  # its atom: the costs above its last effort report 1
            above = np.linspace(costs[0], law.support[1], 2001)[1:]
            costs, z = np.concatenate((costs, above)), np.concatenate((z, np.ones(above.size)))
        order = np.argsort(costs, kind="stable")
        bid, below = _read_in_quantile(law, costs[order], np.maximum.accumulate(z[order]))
        bids.append(bid)
        belows.append(below)
    label = name or f"all-pay contest, {laws[0].spec} + {laws[1].spec}"
    return Profile(label, laws, (1, 1), tuple(bids), tuple(belows), AllPayContest(), "all-pay")


class _ContestGap(ValueError):
    """A class whose first-order condition asks it to bid less than nothing (x_g < 0)
    while it has costs left and has not broken even: the equilibrium has a gap in its
    efforts (Parreiras and Rubinchik 2010), which this reference does not build."""


class _Contest:
    """The all-pay contest of classes (module doc, the last item) in the report z, the
    hazards x_g = s - r_g in closed form; ``run`` one integration from b_0 with its
    exits, as pieces."""

    def __init__(self, laws, counts):
        self.laws, self.n = laws, np.asarray(counts, dtype=float)
        self.ppfs = [_fast_ppf(law) for law in laws]

    def parts(self, z, G, out):
        G = np.clip(G, 0.0, 1.0)
        c = np.array([ppf(float(x)) for ppf, x in zip(self.ppfs, G, strict=True)])
        W = np.prod((1.0 - G) ** self.n) / np.maximum(1.0 - G, 1e-300)  # P(win) per class
        r = 1.0 / np.maximum((1.0 - c) * W, 1e-300)
        live = ~out
        s = float(np.sum(self.n[live] * r[live]) / (self.n[live].sum() - 1.0))
        return c, W, r, s

    def rhs(self, out):
        def f(z, G):
            _, _, r, s = self.parts(z, G, out)
            return (1.0 - np.clip(G, 0.0, 1.0)) * np.where(out, 0.0, np.maximum(s - r, 0.0))

        return f

    def run(self, b0: float, top: float, dense: bool = False):
        """(pieces, exited classes, the end: "top", "full", "gap" (a class's x_g down to
        0 with costs left: ``_ContestGap``), "alone" or "met")."""
        out, z, G, pieces = np.zeros(len(self.laws), dtype=bool), b0, np.zeros(len(self.laws)), []
        while True:

            def full(z, G):
                return 1.0 - 1e-12 - float(np.max(G))

            def broke_even(z, G, out=out):  # u_g = (1 - c_g) W_g - (1 - z)
                c, W, _, _ = self.parts(z, G, out)
                return float(np.min(np.where(out | (G < 1e-12), 1.0, (1 - c) * W - (1 - z))))

            def gap(z, G, out=out):
                _, _, r, s = self.parts(z, G, out)
                return float(np.min(np.where(out | (G > 1.0 - 1e-9), 1.0, s - r)))

            full.terminal = broke_even.terminal = gap.terminal = True  # type: ignore[attr-defined]
            sol = integrate.solve_ivp(self.rhs(out.copy()), (z, top), G, method="DOP853",
                                      rtol=1e-12, atol=1e-15, events=(full, broke_even, gap),
                                      dense_output=dense)  # fmt: skip
            pieces.append(sol)
            ends = {"full": sol.t_events[0], "gap": sol.t_events[2]}
            for label, hits in ends.items():
                if len(hits):
                    return pieces, out, label
            if not len(sol.t_events[1]):
                return pieces, out, "top"
            z, G = float(sol.t[-1]), sol.y[:, -1].copy()
            c, W, r, _ = self.parts(z, G, out)
            u = np.where(out | (G < 1e-12), np.inf, (1 - c) * W - (1 - z))
            gone = out | (u <= u.min() + 1e-10)  # with the classes tied to it (like laws)
            if self.n[~gone].sum() < 2:
                return pieces, out, "alone"
            if np.any(self.parts(z, G, gone)[3] <= r[gone & ~out]):  # u would rise: no exit
                return pieces, out, "met"
            out = gone


def all_pay_contest_profile(laws: Sequence, counts: Sequence[int], name: str = "") -> Profile:
    """(module doc, the last item): the all-pay contest's BNE of classes of sellers
    (``laws`` on [0, h], h <= 1, ``counts``), every class bidding from the common top
    effort and exiting, its costs above then making no effort (the report 1), where its
    seller breaks even; b_0 shot by bisection (to 1e-13) so that the run first ends
    within 1e-10 of the report 1; each class's bid function and report law read in the
    quantile from a table of 20,001 reports per piece.  ``_ContestGap`` where a class
    would need a gap in its efforts."""
    laws = tuple(as_distribution(x) for x in laws)
    if any(law.support[0] != 0.0 or law.support[1] > 1.0 for law in laws):
        raise ValueError("laws on [0, h], h <= 1 (a common top effort)")
    contest, top = _Contest(laws, counts), 1.0 - 1e-10
    lo_b, hi_b = 0.0, 1.0  # too low: a class full or the last breaking even before the
    while hi_b - lo_b > 1e-13:  # top; too high: the top reached, or a class's x_g at 0
        mid = 0.5 * (lo_b + hi_b)
        pieces, _, end = contest.run(mid, top)
        low = end in ("full", "alone", "met") and pieces[-1].t[-1] < top - 1e-12
        lo_b, hi_b = (mid, hi_b) if low else (lo_b, mid)
    pieces, out, end = contest.run(hi_b, top, dense=True)
    if end == "gap" and pieces[-1].t[-1] < 1.0 - 1e-6:  # not the end's degeneracy
        raise _ContestGap(f"a class's efforts have a gap at the report {pieces[-1].t[-1]:.6f}")
    s = np.linspace(0.0, 1.0, 20001)
    z = np.unique(np.concatenate([
        np.clip(a + (b - a) * np.union1d(s**2, 1.0 - s**2), a, b)
        for a, b in ((p.t[0], p.t[-1]) for p in pieces)
    ]))  # fmt: skip
    which = np.searchsorted([p.t[-1] for p in pieces[:-1]], z, side="right")
    G = np.empty((len(laws), z.size))
    for i, p in enumerate(pieces):
        G[:, which == i] = p.sol(z[which == i])
    G = np.clip(G, 0.0, 1.0)
    bids, belows = [], []
    for g, law in enumerate(laws):
        costs, zg = np.clip(law_quantiles(law, G[g]), 0.0, law.support[1]), z
        if out[g] or G[g, -1] < 1.0 - 1e-3:  # its atom: the costs above make no effort,
            above = np.linspace(costs[-1], law.support[1], 2001)  # from just above the last
            above[0] += 1e-12  # (an exit jumps there from its last report to 1)
            costs, zg = np.concatenate((costs, above)), np.concatenate((z, np.ones(above.size)))
        elif costs[-1] < law.support[1]:  # the class that fills at 1, its last costs (1e-8
            # of Beta(2, 5)'s mass spans 0.984-1) rising under the others' atoms at 1
            above = np.linspace(costs[-1], law.support[1], 2001)[1:]
            share = (np.asarray(law.cdf(above), dtype=float) - G[g, -1]) / (1.0 - G[g, -1])
            rise = z[-1] + 0.5 * (1.0 - z[-1]) * np.clip(share, 0.0, 1.0)
            costs, zg = np.concatenate((costs, above)), np.concatenate((z, rise))
        order = np.argsort(costs, kind="stable")
        bid, below = _read_in_quantile(law, costs[order], np.maximum.accumulate(zg[order]))
        bids.append(bid)
        belows.append(below)
    label = name or "all-pay contest, " + " + ".join(
        f"{law.spec} x {n}" for law, n in zip(laws, counts, strict=True)
    )
    return Profile(label, laws, tuple(int(n) for n in counts), tuple(bids), tuple(belows),
                   AllPayContest(), "all-pay")  # fmt: skip


# ---- the exact best-response check ---------------------------------------------------
def _eps_pay(p: Profile, g: int, z: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Class g's deviator's exact E(z), T(z) against the profile's report laws (ties
    have probability 0 for continuous strictly increasing bids)."""
    counts = np.array(p.counts) - (np.arange(len(p.counts)) == g)
    below = np.stack([np.asarray(fn(z), dtype=float) for fn in p.below])
    win = np.ones(z.size)
    if p.k == 1:
        for q, m in zip(below, counts, strict=True):
            win *= (1 - q) ** m
    else:
        win = _fewer_than(p.k, below, counts)
    if p.kind == "all-pay":
        return win, win + z - 1.0
    E = win * (z <= p.reserve)
    return E, z * E


@dataclass(frozen=True)
class Gain:
    """Per class: the largest exact gain of a deviation over the grid of costs, the
    cost where it is, and the ex-ante utility (prior-weighted) of the profile."""

    gain: float
    at_cost: float
    utility: float

    @property
    def relative(self) -> float:
        """gain / utility; where the profile's sellers lose on average (utility <= 0: an
        all-pay contest bid badly) any positive gain is infinitely relative (a negative
        ratio read as passing a bar of 1% before)."""
        if self.utility <= 0:
            return math.inf if self.gain > 0 else 0.0
        return self.gain / self.utility


def exact_gain(p: Profile, g: int = 0, costs: int = 401, reports: int = 4001) -> Gain:
    """The exact best response of a class-g seller at ``costs`` costs (quantiles and an
    even grid, and 48 quantiles geometric from 1e-15 to 1e-2 towards each end: a law
    singular at an end has its sellers there, and all-pay on F = sqrt(c), 8 sellers, had
    a gain of 2.9% of u at c = 1e-9 where 1001 quantiles found 0.34%) over every report
    of [lowest cost, top] (``reports`` reports and the bids, then three rounds of a
    41-point local grid around the best), against the others' exact report laws."""
    law = p.laws[g]
    lo, hi = law.support
    q = (np.arange(costs) + 0.5) / costs
    tail = np.geomspace(1e-15, 1e-2, 48)
    ends = law_quantiles(law, np.concatenate((tail, 1 - tail)))
    ends = np.clip(ends[np.isfinite(ends)], lo, hi)
    c = np.unique(np.concatenate((law.ppf(q), lo + (hi - lo) * q, ends)))
    z_lo = min(x.support[0] for x in p.laws)
    z_hi = max(x.support[1] for x in p.laws)
    b = np.asarray(p.bids[g](c), dtype=float)
    Z = np.unique(np.concatenate((np.linspace(z_lo, z_hi, reports), b)))
    E, T = _eps_pay(p, g, Z)
    U = T[None, :] - c[:, None] * E[None, :]
    k = np.argmax(U, axis=1)
    best = U[np.arange(c.size), k]
    at = Z[k]
    h = np.full(c.size, (z_hi - z_lo) / (reports - 1))
    for _ in range(3):
        P = np.clip(at[:, None] + h[:, None] * np.linspace(-1, 1, 41)[None, :], z_lo, z_hi)
        E2, T2 = _eps_pay(p, g, P.ravel())
        U2 = (T2 - np.repeat(c, 41) * E2).reshape(c.size, 41)
        j = np.argmax(U2, axis=1)
        better = U2[np.arange(c.size), j] > best
        best = np.where(better, U2[np.arange(c.size), j], best)
        at = np.where(better, P[np.arange(c.size), j], at)
        h = h / 10
    Eb, Tb = _eps_pay(p, g, b)
    ub = Tb - c * Eb
    gains = best - ub
    # the ex-ante utility: the mean over 20,001 equal-mass quantiles (the midpoint rule in
    # u).  The density times the spacing over the costs above, used before, is no
    # quadrature where the density is singular: with the tail costs, F = sqrt(c) and a
    # pure-method all-pay profile, u read 1.3% low (0.004031 where 200,001 quantiles
    # give 0.004083, 20,001 0.004087, 1,001 0.004018; the verification 0.004079), and
    # NaN for the arcsine law, whose quantile 1 - 1e-15 is the cost 1.0, where the
    # density is infinite
    by_mass = np.asarray(law.ppf((np.arange(20001) + 0.5) / 20001), dtype=float)
    Em, Tm = _eps_pay(p, g, np.asarray(p.bids[g](by_mass), dtype=float))
    util = float(np.mean(Tm - by_mass * Em))
    i = int(np.argmax(gains))
    return Gain(float(gains[i]), float(c[i]), util)


def table_gain(law: CostDistribution, costs, bids, count: int, name: str = "table") -> Gain:
    """``exact_gain`` of one-class first price where all ``count`` sellers bid the table
    (costs, bids) read linearly, against the exact law of the others' reports from the
    table (``_below_from_table``), none of the solver's code."""
    from market_sim.mechanisms.first_price import FirstPrice

    c, b = np.asarray(costs, dtype=float), np.asarray(bids, dtype=float)
    profile = Profile(
        name, (law,), (count,), (lambda x: np.interp(x, c, b),),
        (_below_from_table(law, c, b),), FirstPrice(1), "first-price",
    )  # fmt: skip
    return exact_gain(profile)


def table_relative_epsilon(result) -> float:
    """The exact relative epsilon of a one-class first-price ``BNEResult``'s bid table
    (interpolated): ``table_gain``."""
    cl = result.classes[0]
    return table_gain(as_distribution(cl.dist), cl.costs, cl.bids, cl.count, "solved").relative


# ---- the catalogue ---------------------------------------------------------------------
def _games() -> dict[str, Callable[[], Profile]]:
    return {
        "uniform-4": lambda: symmetric_profile("uniform:0:1", 4),
        "sqrt-3": lambda: symmetric_profile("beta:0.5:1:0:1", 3),
        "reserve-3": lambda: symmetric_profile("uniform:0:1", 3, reserve=0.6),
        "all-pay-4": lambda: all_pay_profile(4),
        "asym-2": lambda: asymmetric_profile(["uniform:1:2", "uniform:0:2"], [1, 1]),
        "asym-3": lambda: asymmetric_profile(
            ["uniform:0:1", "beta:2:1:0:1", "beta:1:2:0:1"], [1, 1, 1]
        ),
        "asym-reserve": lambda: asymmetric_profile(
            ["uniform:0:1", "beta:2:2:0:1"], [1, 2], reserve=0.7
        ),
        "pab-3unit-beta": lambda: symmetric_profile("beta:2:3:0:1", 6, k=3),
        # games added after the solvers were tuned (issue #48, item 5): a power law
        # F(c) = c^0.3 (Beta(0.3, 1): density singular at 0, more than √c), and three
        # unlike classes (Beta(1, 3) not in asym-3)
        "power-0.3-3": lambda: symmetric_profile("beta:0.3:1:0:1", 3),
        "asym-3b": lambda: asymmetric_profile(
            ["uniform:0:1", "beta:2:2:0:1", "beta:1:3:0:1"], [1, 1, 1]
        ),
        "pab-2unit-beta": lambda: symmetric_profile("beta:2:2:0:1", 5, k=2),
        # added after the inverse bids (issue #48): three classes nobody tuned for, one of
        # them with costs above the others' top (its sellers above 1 never sell)
        "asym-3c": lambda: asymmetric_profile(
            ["beta:3:1:0:1", "beta:1:1:0:1", "uniform:0.2:1.2"], [1, 1, 1]
        ),
        # added by h48new (issue #48, "new ones of the same kinds"), none tuned for: a
        # power law with a < 1 at 5 sellers; a reserve on a power law (a kink where the
        # density is singular at the bottom); all-pay on Beta(2, 2) and with 2 sellers;
        # 2-unit pay-as-bid with a reserve; 3 unlike classes with a reserve; 4 classes
        "power-0.15-5": lambda: symmetric_profile("beta:0.15:1:0:1", 5),
        "power-reserve-4": lambda: symmetric_profile("beta:0.4:1:0:1", 4, reserve=0.5),
        "all-pay-beta-3": lambda: all_pay_law_profile("beta:2:2:0:1", 3),
        "all-pay-2": lambda: all_pay_profile(2),
        "pab-2unit-reserve": lambda: symmetric_profile("beta:2:2:0:1", 5, k=2, reserve=0.6),
        "asym-3-reserve": lambda: asymmetric_profile(
            ["uniform:0:1", "beta:2:1:0:1", "beta:1:3:0:1"], [1, 1, 1], reserve=0.65
        ),
        "asym-4": lambda: asymmetric_profile(
            ["uniform:0:1", "beta:2:2:0:1", "beta:1:3:0:1", "beta:3:1:0:1"], [1, 1, 1, 1]
        ),
        # added 2026-11-30 18:00 (issue #48, "new ones of the same kinds"), none tuned for:
        # a reserve where a law with its mass at the bottom is thin (2 units), all-pay on a
        # singular law, a singular class against a Beta class, 3 units of 8 sellers
        "pab-2unit-power-reserve": lambda: symmetric_profile("beta:0.5:2:0:1", 4, k=2, reserve=0.7),
        "all-pay-sqrt-3": lambda: all_pay_law_profile("beta:0.5:1:0:1", 3),
        "asym-power-2": lambda: asymmetric_profile(["beta:0.5:1:0:1", "beta:2:5:0:1"], [2, 1]),
        "power-0.6-k3-8": lambda: symmetric_profile("beta:0.6:1:0:1", 8, k=3),
        # added 2026-11-30 22:25, untuned: reserves on a singular law, on Beta(2, 5) with
        # 3 units of 6, low for 2 sellers, high on Beta(3, 1) with 2 units of 4
        "power-0.3-reserve-3": lambda: symmetric_profile("beta:0.3:1:0:1", 3, reserve=0.2),
        "pab-3unit-beta25-reserve": lambda: symmetric_profile("beta:2:5:0:1", 6, k=3, reserve=0.4),
        "reserve-2-low": lambda: symmetric_profile("uniform:0:1", 2, reserve=0.3),
        "pab-2unit-beta31-reserve": lambda: symmetric_profile("beta:3:1:0:1", 4, k=2, reserve=0.8),
        # added 2026-12-01, untuned: all-pay where the mass is at the bottom and thin at
        # the top, and on a singular law with 5 sellers
        "all-pay-beta25-4": lambda: all_pay_law_profile("beta:2:5:0:1", 4),
        "all-pay-power-5": lambda: all_pay_law_profile("beta:0.4:1:0:1", 5),
        # and twelve more of the kinds, untuned (each passed on first try)
        "asym-3-power": lambda: asymmetric_profile(
            ["beta:0.3:1:0:1", "uniform:0:1", "beta:2:5:0:1"], [1, 1, 2]
        ),
        "asym-3-counts": lambda: asymmetric_profile(
            ["beta:1:2:0:1", "beta:2:1:0:1", "uniform:0:1"], [2, 1, 1]
        ),
        "power-0.2-k2-6": lambda: symmetric_profile("beta:0.2:1:0:1", 6, k=2),
        "power-0.5-2-k2-5": lambda: symmetric_profile("beta:0.5:2:0:1", 5, k=2),
        "pab-4unit-beta-10": lambda: symmetric_profile("beta:2:2:0:1", 10, k=4),
        "pab-2unit-beta15-reserve": lambda: symmetric_profile("beta:1:5:0:1", 5, k=2, reserve=0.3),
        "power-0.5-reserve-2": lambda: symmetric_profile("beta:0.5:1:0:1", 2, reserve=0.4),
        "beta52-reserve-3": lambda: symmetric_profile("beta:5:2:0:1", 3, reserve=0.8),
        "all-pay-beta52-3": lambda: all_pay_law_profile("beta:5:2:0:1", 3),
        "all-pay-beta072-4": lambda: all_pay_law_profile("beta:0.7:2:0:1", 4),
        "all-pay-8": lambda: all_pay_profile(8),
        "all-pay-beta13-2": lambda: all_pay_law_profile("beta:1:3:0:1", 2),
        # then one that failed first (2.1%: the inverse bids' table at b_0)
        "asym-power-beta-5": lambda: asymmetric_profile(["beta:0.3:1:0:1", "beta:3:2:0:1"], [3, 2]),
        # added 2026-12-01 06:00, untuned, two of sixteen failed first: all-pay with 12
        # sellers (3.1%: the steep bottom's chords) and on F = sqrt(c) with 8 (0.34% at
        # 1001 quantiles, 2.9% at c = 1e-9: the singular end read linearly in the cost)
        "all-pay-12": lambda: all_pay_profile(12),
        "all-pay-power-0.5-8": lambda: all_pay_law_profile("beta:0.5:1:0:1", 8),
        # added 2026-12-01 08:30: all-pay contests of two unlike sellers (untuned; the
        # first failed, 1.89%: the inverse bids' system is singular before the top)
        "all-pay-asym-2": lambda: asymmetric_all_pay_profile(["uniform:0:1", "beta:2:5:0:1"]),
        "all-pay-asym-b52": lambda: asymmetric_all_pay_profile(["uniform:0:1", "beta:5:2:0:1"]),
        "all-pay-asym-sqrt": lambda: asymmetric_all_pay_profile(["beta:2:5:0:1", "beta:0.5:1:0:1"]),
        # 09:10, untuned: costs that end at 0.5 against U[0, 1] (19%: the inverse bids ran
        # to the lowest top of the supports, first price's top, not the report range's)
        "all-pay-asym-half": lambda: asymmetric_all_pay_profile(["uniform:0:0.5", "uniform:0:1"]),
        # 2026-12-01 11:00: contests of unlike classes with more than two sellers, each
        # failing first (1.1-2930%: a class exits where its seller breaks even)
        "all-pay-asym-3": lambda: all_pay_contest_profile(
            ["uniform:0:1", "beta:2:5:0:1", "beta:0.5:1:0:1"], [1, 1, 1]
        ),
        "all-pay-asym-u2-b22": lambda: all_pay_contest_profile(
            ["uniform:0:1", "beta:2:2:0:1"], [2, 2]
        ),
        "all-pay-asym-u3-b52": lambda: all_pay_contest_profile(
            ["uniform:0:1", "beta:5:2:0:1"], [3, 1]
        ),
        "all-pay-asym-u2-b25": lambda: all_pay_contest_profile(
            ["uniform:0:1", "beta:2:5:0:1"], [2, 2]
        ),
    }


#: name -> a function building the reference Profile (built on demand, once: the
#: asymmetric ODEs take seconds)
GAMES = {name: functools.cache(make) for name, make in _games().items()}


# ---- a sampled best response, for mechanisms without an exact interim -----------------
@dataclass(frozen=True)
class SampledGain:
    """``sampled_gain``'s answer: the largest mean gain over the costs, its standard
    error (on the measuring sample), the cost where it is, the ex-ante utility, and
    per cost the gains."""

    gain: float
    se: float
    at_cost: float
    utility: float
    costs: np.ndarray
    gains: np.ndarray

    @property
    def relative(self) -> float:
        return self.gain / self.utility


def sampled_gain(mech, law, n: int, bid, rng, costs: int = 101, markets: int = 2000,
                 reports: int = 801) -> SampledGain:  # fmt: skip
    """The largest gain of a deviation of one of n i.i.d. sellers (cost law ``law``)
    when the others report ``bid`` of their costs, by plain Monte Carlo (i.i.d. numpy
    draws, not the solver's Sobol nets; the mechanism's own ``deviations``; none of the
    solver's code): each cost's best report is searched on one sample (``reports`` even
    reports on the support, then three rounds of 21 around the best, the bid itself
    among them) and its gain over the bid re-measured on a second, independent sample.
    Costs: ``costs`` quantile midpoints and as many even ones.  The utility is ex-ante
    (prior-weighted, as ``exact_gain``)."""
    lo, hi = law.support
    q = (np.arange(costs) + 0.5) / costs
    c = np.unique(np.clip(np.concatenate((law.ppf(q), lo + (hi - lo) * q)), lo, hi))
    b = np.asarray(bid(c), dtype=float)
    z_lo = lo + 1e-6 * (hi - lo)  # the solver's lowest report (pay-as-bid at 0: eps = inf)
    Z = np.unique(np.concatenate((np.linspace(z_lo, hi, reports), b)))
    search = int(rng.integers(2**63))  # every search round on the same markets
    E, T = _market_means(mech, law, n, bid, Z, search, markets, 1)
    U = T.mean(0)[None, :] - c[:, None] * E.mean(0)[None, :]
    k = np.argmax(U, axis=1)
    at, best = Z[k], U[np.arange(c.size), k]
    h = (hi - lo) / (reports - 1)
    for _ in range(3):
        P = np.clip(at[:, None] + h * np.linspace(-1, 1, 21)[None, :], z_lo, hi)
        E2, T2 = _market_means(mech, law, n, bid, P.ravel(), search, markets, 1)
        U2 = (T2.mean(0) - np.repeat(c, 21) * E2.mean(0)).reshape(c.size, 21)
        j = np.argmax(U2, axis=1)
        better = U2[np.arange(c.size), j] > best
        best = np.where(better, U2[np.arange(c.size), j], best)
        at = np.where(better, P[np.arange(c.size), j], at)
        h = h / 10
    Em, Tm = _market_means(mech, law, n, bid, np.concatenate((at, b)), rng, markets, 1)
    Um = Tm - np.tile(c, 2)[None, :] * Em
    G = Um[:, : c.size] - Um[:, c.size :]
    gains = G.mean(0)
    i = int(np.argmax(gains))
    se = float(G[:, i].std(ddof=1) / math.sqrt(markets))
    w = np.asarray(law.pdf(c), dtype=float) * np.gradient(c)
    util = float(w @ Um[:, c.size :].mean(0) / w.sum())
    return SampledGain(float(gains[i]), se, float(c[i]), util, c, gains)


# ---- a precise sampled best response: many markets, every seller deviating ----------
@dataclass(frozen=True)
class DeviationGains:
    """``deviation_gains``' answer.  Per evaluation cost (``costs``): the best report
    found on the search sample (``best``), the bid (``bids``), and the gain of the one
    over the other re-measured on the measuring sample (``gains``, mean over its markets)
    with its standard error (``se``, over markets: a market's deviators share
    opponents, so their mean is one draw); ``utility`` the ex-ante utility at the bids
    (quantile midpoints of the law) and its standard error; the markets of each
    sample and the deviators per market."""

    costs: np.ndarray
    bids: np.ndarray
    best: np.ndarray
    gains: np.ndarray
    se: np.ndarray
    utility: float
    utility_se: float
    search_markets: int
    markets: int
    deviators: int

    @property
    def at(self) -> int:
        """The index of the largest gain."""
        return int(np.argmax(self.gains))

    @property
    def relative(self) -> float:
        """The largest gain over the ex-ante utility."""
        return float(self.gains[self.at] / self.utility)

    @property
    def relative_ci(self) -> tuple[float, float]:
        """The 95% interval of ``relative`` (the gain's normal interval over the utility;
        the utility's own error, ``utility_se``, is far smaller)."""
        g, s = self.gains[self.at], self.se[self.at]
        return float((g - 1.96 * s) / self.utility), float((g + 1.96 * s) / self.utility)


def _market_means(mech, law, n: int, bid, Z: np.ndarray, seed, markets: int,
                  deviators: int):  # fmt: skip
    """Over ``markets`` i.i.d. markets (numpy's generator seeded ``seed``, so a second
    call with the same seed meets the same markets; a Generator is drawn from as it
    is): per market the mean over its first
    ``deviators`` sellers of their eps and payment at every report of Z (the
    mechanism's ``deviations``; the others report ``bid`` of i.i.d. costs of ``law``).
    Two (markets, Z.size) arrays."""
    lo, hi = law.support
    rng = np.random.default_rng(seed)
    who = np.arange(deviators)
    cand = np.broadcast_to(Z, (deviators, Z.size))
    E, T = np.empty((markets, Z.size)), np.empty((markets, Z.size))
    for s in range(markets):
        costs = np.clip(np.asarray(law.ppf(rng.random(n)), dtype=float), lo, hi)
        out = mech.deviations(who, cand, np.asarray(bid(costs), dtype=float), rng)
        E[s], T[s] = np.asarray(out.eps).mean(0), np.asarray(out.payments).mean(0)
    return E, T


def deviation_gains(mech, law, n: int, bid, costs, rng, *, search_markets: int = 2000,
                    markets: int = 20000, deviators: int | None = None,
                    search_deviators: int = 4, reports: int = 2001,
                    report_top: float | None = None,
                    utility_costs: int = 200) -> DeviationGains:  # fmt: skip
    """The gain of the best deviation of a seller of each of ``costs`` when the n - 1
    others (i.i.d. costs of ``law``) report ``bid`` of their costs, by plain Monte Carlo
    (numpy's i.i.d. draws, the mechanism's own ``deviations``, none of the solver's code),
    precise enough for a game whose utilities are small (pay-as-bid, 30 sellers):

    1. *Search* on ``search_markets`` markets: every seller's utility is linear in its
       cost, U(c, z) = T(z) - c E(z) (T, E the deviator's mean payment and eps at report
       z), so one set of mean curves on ``reports`` even reports from the support's
       bottom to ``report_top`` (default: its top; a report above which nothing sells
       saves time) and 60 geometric ones at the bottom, where pay-as-bid's eps is
       steep, gives every cost's best report; the bid is among the candidates.
    2. *Measure* on ``markets`` fresh markets (another seed): per market the gain
       g(c) = U(c, best) - U(c, bid), its mean and standard error.  Re-measuring removes
       the search's upward bias (the maximum over one sample's noise); the gain of a
       report is a lower bound on the best gain, up to the grid's spacing.

    In each measuring market the first ``deviators`` sellers (default: all n) deviate,
    each against the others: n draws of the game for the price of one market's
    allocation (they share opponents, so the standard error is over markets); in each
    search market ``search_deviators`` (its many reports cost more).  The utility is the ex-ante one
    (the mean of U(c, b(c)) over ``utility_costs`` quantile midpoints of the law, on the
    measuring markets), as ``exact_gain``'s."""
    lo, hi = law.support
    d = n if deviators is None else deviators
    c = np.asarray(costs, dtype=float)
    b = np.asarray(bid(c), dtype=float)
    z_lo = lo + 1e-6 * (hi - lo)  # the solver's lowest report (pay-as-bid at 0: eps = inf)
    top = hi if report_top is None else report_top
    bottom = np.geomspace(z_lo, lo + 0.02 * (hi - lo), 60)
    Z = np.concatenate((bottom, np.linspace(lo, top, reports)))
    Z = np.unique(np.concatenate((np.clip(Z, z_lo, hi), b)))
    search, measure = (int(x) for x in rng.integers(2**63, size=2))
    E, T = _market_means(mech, law, n, bid, Z, search, search_markets, min(search_deviators, n))
    U = T.mean(0)[None, :] - c[:, None] * E.mean(0)[None, :]
    best = Z[np.argmax(U, axis=1)]
    cq = np.asarray(law.ppf((np.arange(utility_costs) + 0.5) / utility_costs), dtype=float)
    bq = np.asarray(bid(cq), dtype=float)
    P, inv = np.unique(np.concatenate((best, b, bq)), return_inverse=True)
    Em, Tm = _market_means(mech, law, n, bid, P, measure, markets, d)
    Um = Tm[:, inv] - np.concatenate((c, c, cq))[None, :] * Em[:, inv]  # (markets, 2k + q)
    G = Um[:, : c.size] - Um[:, c.size : 2 * c.size]
    se = G.std(0, ddof=1) / math.sqrt(markets)
    # per market: the mean over the quantile midpoints (none asked: NaN)
    u_s = Um[:, 2 * c.size :].mean(1) if cq.size else np.full(markets, np.nan)
    return DeviationGains(
        c, b, best, G.mean(0), se, float(u_s.mean()), float(u_s.std(ddof=1) / math.sqrt(markets)),
        search_markets, markets, d,
    )  # fmt: skip
