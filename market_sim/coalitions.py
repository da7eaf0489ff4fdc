"""Coalition search: can a small group of sellers gain by misreporting together?

Unilateral IC (no seller gains alone) does not imply group IC: in a uniform-price
auction the losing seller whose report sets the price can raise it, losing
nothing, and every winner is paid more.  :func:`coalition_search` looks for such
joint misreports in ONE market (truthful reports = ``costs``).

Which coalitions (of 2..k sellers, duplicates tried once):

* ``cut-off``: every window of 2..k consecutive sellers (by cost) in the list of
  the k highest-cost bought and the k lowest-cost unbought sellers (bought:
  eps > 1e-12 x the largest eps at the truth);
* ``price-setter``: each of the ``n_probe`` sellers nearest the cut-off is moved
  alone by +-``probe_step`` x the support width; if that changes another seller's
  utility by more than ``tol`` it is a price setter, and it is grouped with the
  1..k-1 sellers whose utility its move raised most (in markets of more than 256
  sellers, among the 128 on each side of the cut-off);
* ``random``: ``n_random_coalitions`` coalitions of uniform size in 2..k, members
  uniform without replacement.

Which joint misreports (each member's report clipped to the support, the bottom
raised by 1e-9 of its width, where the offline mechanism has no optimum when the
support starts at 0):

* ``common multiplier m``: every member reports m x its cost, for m in ``multipliers``;
* ``seller i x m``: one member reports m x its cost, the others the truth (the
  price-setter pattern: a loser moves, the winners keep their reports);
* ``random``: ``n_random_reports`` joint reports, each member uniform over the support.

A coalition gains when the SUM of its members' true utilities, t_i - c_i eps_i,
rises by more than ``tol`` (side payments among members are allowed, so the sum is
what a coalition can share).  Randomized mechanisms: the utilities are averages
over the same ``mech.n_draws`` seeds for every joint report and the truth (common
random numbers); a gain counts only when its mean minus z x its standard error
exceeds ``tol``, z the one-sided normal quantile at ``alpha`` / (number of joint
reports compared) (Bonferroni).  Deterministic mechanisms run once per report.

Opponent profiles (``profiles=True``, as the audit does): every coalition's joint
reports are tried again with the non-members at each of :func:`opponent_profiles`
(all at the floor, all at the top, all tied with the members' mean report, one at
each end), the same profiles the unilateral audit uses.

``group_ic`` is True when no joint report TRIED gains: it is a search result, not a
proof (the gains of a coalition may sit in a region no candidate reached).

Outcomes come from ``mech.run``; faster paths in ``MEMBER_OUTCOMES`` (exact class
match, so a user subclass falls back to ``run``): the built-in offline mechanism and
``myerson_mechanism`` compute the members' Myerson payments only, pay-as-bid solves each
joint report with the compiled kernel, the mechanisms whose
seller outcome depends on its own report alone (online, posted-price) take all joint
reports in one call, and the private posted price gives exact expectations over its
price draw (no Monte Carlo).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from .errors import MarketSimError
from .mechanisms.base import Mechanism, as_mechanism, mechanism_name

__all__ = [
    "opponent_profiles",
    "interior_profiles",
    "CoalitionResult",
    "CoalitionWitness",
    "coalition_search",
    "DEFAULT_MULTIPLIERS",
    "MEMBER_OUTCOMES",
]

DEFAULT_MULTIPLIERS = (0.5, 0.8, 0.9, 0.97, 0.99, 1.01, 1.03, 1.1, 1.25, 1.5, 2.0)
_BOUGHT = 1e-12  # eps above this x the largest eps counts as bought
_WATCH = 128  # in markets of more than 2 x this many, the probe watches this many a side
_FLOOR = 1e-9  # reports are kept this fraction of the support width above its bottom


@dataclass(frozen=True)
class CoalitionWitness:
    """The best joint misreport found: ``members`` (seller ids), their true ``costs``
    and joint ``reports``; ``gain`` = the rise of the members' summed utility (mean
    over the draws) and its standard error ``gain_se`` (0 when deterministic);
    ``member_gains`` per member; ``move`` (which joint report) and ``chosen_as``
    (cut-off / price-setter / random)."""

    members: tuple[int, ...]
    costs: tuple[float, ...]
    reports: tuple[float, ...]
    gain: float
    gain_se: float
    member_gains: tuple[float, ...]
    move: str
    chosen_as: str

    def as_dict(self) -> dict:
        return {
            "members": list(self.members),
            "costs": list(self.costs),
            "reports": list(self.reports),
            "gain": self.gain,
            "gain_se": self.gain_se,
            "member_gains": list(self.member_gains),
            "move": self.move,
            "chosen_as": self.chosen_as,
        }


@dataclass(frozen=True)
class CoalitionResult:
    """Result of :func:`coalition_search` for one market.

    ``max_gain``: the largest mean gain over every joint report tried (>= 0: the
    truth is one; for a Monte Carlo estimate, the max of noisy means, biased up);
    ``best``: the joint report with the largest lower confidence bound
    ``best_lower`` = gain - z se (the gain itself when deterministic or exact);
    ``group_ic``: ``best_lower`` <= ``tol``; ``witness``: ``best`` when it gains,
    else None.  Counts: ``n_coalitions``, ``n_joint_reports`` (all coalitions),
    ``n_runs`` (mechanism evaluations, draws and probes included).
    ``price_setters``: probed sellers whose move changed another seller's utility
    by more than ``tol``."""

    k: int
    tol: float
    max_gain: float
    best: CoalitionWitness | None
    best_lower: float
    group_ic: bool
    n_coalitions: int
    n_joint_reports: int
    n_runs: int
    price_setters: tuple[int, ...]
    randomized: bool
    n_draws: int
    z: float
    coalitions_by_kind: dict = field(default_factory=dict)
    n_profiles: int = 0

    @property
    def witness(self) -> CoalitionWitness | None:
        return None if self.group_ic else self.best

    def summary(self) -> dict:
        """The keys the audit writes to summary.json."""
        w = self.witness
        return {
            "coalition_size": self.k,
            "coalition_max_gain": self.max_gain,
            "coalition_gain_lower": self.best_lower,
            "group_verdict": "ic" if self.group_ic else "not_ic",
            "coalition_witness": None if w is None else w.as_dict(),
            "coalitions_tried": self.n_coalitions,
            "coalition_reports_tried": self.n_joint_reports,
        }


# ---- outcomes of a few sellers under many report vectors -----------------------------
# (mech, reports (n,), movers (s,), joint (B, s), watch (w,), seed) -> eps, pay (B, w):
# the watched sellers' outcomes when the movers report the rows of joint, every row
# run with a fresh np.random.default_rng(seed) (common random numbers across rows).
MemberOutcomes = Callable[..., tuple[np.ndarray, np.ndarray]]


@dataclass(frozen=True)
class _Path:
    """A batched outcome path; ``exact``: it returns exact expectations over the
    mechanism's draw (a randomized mechanism is then evaluated once, no Monte Carlo)."""

    fn: MemberOutcomes
    exact: bool = False


def _generic(mech, reports, movers, joint, watch, seed):
    eps = np.empty((joint.shape[0], watch.size))
    pay = np.empty_like(eps)
    row = reports.copy()
    for b in range(joint.shape[0]):
        row[movers] = joint[b]
        out = mech.run(row, np.random.default_rng(seed))
        eps[b], pay[b] = out.eps[watch], out.payments[watch]
    return eps, pay


def _offline(mech, reports, movers, joint, watch, seed):
    """The offline mechanism's payments of the watched sellers only (the others'
    Myerson integrals are skipped), compiled when numba works (the same payments
    as ``outcome`` to ~1e-13)."""
    from .mechanisms import offline
    from .mechanisms.payments import _payments

    backend = "numba" if offline._kernel() is not None else "auto"
    eps = np.empty((joint.shape[0], watch.size))
    pay = np.empty_like(eps)
    row = reports.copy()
    p = mech.params
    for b in range(joint.shape[0]):
        row[movers] = joint[b]
        e, t = _payments(row, mech.dist, p["mu"], p["sigma"], p["gamma"], p["k"], 32, "auto",
                         watch, backend)  # fmt: skip
        eps[b], pay[b] = e[watch], t[watch]
    return eps, pay


def _compiled(mech, reports, movers, joint, watch, seed):
    """A mechanism with an offline-allocation ``backend`` (pay-as-bid): ``_generic`` on a
    copy of it with the compiled kernel when its backend is ``"auto"`` and numba works.
    A joint search runs thousands of small markets, where ``"auto"`` keeps numpy
    (``offline.KERNEL_MIN_M``; ~1 ms a solve at 4 sellers, the kernel ~100x less);
    the same outcomes to rounding (~1e-15)."""
    from dataclasses import replace

    from .mechanisms import offline

    if mech.backend == "auto" and offline._kernel() is not None:
        mech = replace(mech, backend="numba")
    return _generic(mech, reports, movers, joint, watch, seed)


def _myerson(mech, reports, movers, joint, watch, seed):
    """``myerson_mechanism``: the watched sellers' Myerson integrals only (the same
    computation as its ``outcome``, restricted to them)."""
    eps = np.empty((joint.shape[0], watch.size))
    pay = np.empty_like(eps)
    row = reports.copy()
    for b in range(joint.shape[0]):
        row[movers] = joint[b]
        e = mech._alloc(row[None, :])[0][watch]
        r = row[watch]
        tails = mech._tails(row, watch, r[:, None], e[:, None], mech.check_monotone)[0]
        eps[b], pay[b] = e, r * e + tails[:, 0]  # Eq. 8 (003)
    return eps, pay


def _rows(reports, movers, joint):
    """(B, n) report vectors: ``reports`` with the movers at each row of ``joint``."""
    R = np.repeat(reports[None, :], joint.shape[0], axis=0)
    R[:, movers] = joint
    return R


def _own_report_only(mech, reports, movers, joint, watch, seed):
    """Seller i's outcome depends on r_i alone: all rows in one ``deviations`` call
    (deterministic mechanisms only)."""
    R = _rows(reports, movers, joint)[:, watch]
    out = mech.deviations(watch, R.T, reports)
    return out.eps.T, out.payments.T


def _private_posted_price(mech, reports, movers, joint, watch, seed):
    """Exact expectations over the price draw (the exponential mechanism's law)."""
    pricing = mech.pricing
    p = np.asarray(pricing.prices, dtype=float)
    R = _rows(reports, movers, joint)
    prob = np.array([pricing.price_probabilities(r) for r in R])  # (B, P)
    sold = pricing.eps_level * (R[:, watch, None] <= p)  # (B, w, P)
    return np.einsum("bp,bwp->bw", prob, sold), np.einsum("bp,bwp->bw", prob, sold * p)


def _registry() -> dict[type, _Path]:
    from .mechanisms.builtin import (
        OfflineMechanism,
        PayAsBidMechanism,
        PostedPriceMechanism,
        PrivatePostedPriceMechanism,
    )
    from .mechanisms.myerson import MyersonMechanism
    from .mechanisms.online import OnlineMechanism

    return {
        MyersonMechanism: _Path(_myerson),
        OfflineMechanism: _Path(_offline),
        PayAsBidMechanism: _Path(_compiled),
        OnlineMechanism: _Path(_own_report_only),
        PostedPriceMechanism: _Path(_own_report_only),
        PrivatePostedPriceMechanism: _Path(_private_posted_price, exact=True),
    }


MEMBER_OUTCOMES: dict[type, _Path] = {}  # filled on first use (lazy imports)


def _member_outcomes(mech) -> _Path:
    if not MEMBER_OUTCOMES:
        MEMBER_OUTCOMES.update(_registry())
    return MEMBER_OUTCOMES.get(type(mech), _Path(_generic))


class _Evaluator:
    """Watched sellers' eps and utilities at their true costs for many joint reports,
    one column per draw (common random numbers: the same seeds for every call)."""

    def __init__(self, mech, costs, seeds, path):
        self.mech, self.costs, self.seeds, self.path = mech, costs, seeds, path
        self.reports = costs  # the others' reports (an opponent profile, or the truth)
        self.runs = 0

    def outcomes(self, movers, joint, watch) -> tuple[np.ndarray, np.ndarray]:
        """eps and utilities t - c eps of the watched sellers, each (B, w, D)."""
        shape = (joint.shape[0], watch.size, len(self.seeds))
        eps_out, util = np.empty(shape), np.empty(shape)
        for d, s in enumerate(self.seeds):
            eps, pay = self.path.fn(self.mech, self.reports, movers, joint, watch, s)
            eps_out[:, :, d], util[:, :, d] = eps, pay - self.costs[watch] * eps
        self.runs += joint.shape[0] * len(self.seeds)
        return eps_out, util

    def utilities(self, movers, joint, watch) -> np.ndarray:
        return self.outcomes(movers, joint, watch)[1]


def _check_args(mech, costs, k, rng, tol, support, multipliers, counts):
    if not isinstance(rng, np.random.Generator):
        raise MarketSimError("rng must be a numpy.random.Generator")
    try:
        c = np.asarray(costs, dtype=float).reshape(-1)
    except (TypeError, ValueError):
        raise MarketSimError("costs must be an array of numbers") from None
    n = c.size
    if not np.all(np.isfinite(c)):
        raise MarketSimError("costs contain NaN or inf")
    if isinstance(k, bool) or not float(k) == int(k) or not 2 <= int(k) <= n:
        raise MarketSimError(f"coalition size must be an integer in 2..{n} sellers (got {k!r})")
    if not (np.isfinite(tol) and tol >= 0):
        raise MarketSimError(f"tol must be a finite number >= 0 (got {tol!r})")
    if support is None:
        dist = getattr(mech, "dist", None)
        if dist is None or not hasattr(dist, "support"):
            raise MarketSimError(
                f"{mechanism_name(mech)} has no cost distribution: pass support=(c_min, c_max)"
            )
        support = dist.support
    lo, hi = (float(v) for v in support)
    if not (np.isfinite(lo) and np.isfinite(hi) and lo < hi):
        raise MarketSimError(f"support must be finite with c_min < c_max (got {support!r})")
    if n and (c.min() < lo or c.max() > hi):
        raise MarketSimError(f"costs must lie in the support [{lo:g}, {hi:g}]")
    m = np.asarray(multipliers, dtype=float).reshape(-1)
    if not np.all(np.isfinite(m) & (m > 0)):
        raise MarketSimError("multipliers must be finite numbers > 0")
    for label, v in counts.items():
        if isinstance(v, bool) or not float(v) == int(v) or int(v) < 0:
            raise MarketSimError(f"{label} must be an integer >= 0 (got {v!r})")
    if m.size == 0 and int(counts["n_random_reports"]) == 0:
        raise MarketSimError("no joint report to try: give multipliers or n_random_reports > 0")
    return c, int(k), (lo, hi), m


def _joint_reports(cm, mem, mult, rng, n_random_reports, lo, floor, hi):
    """The joint reports of one coalition (row 0 the truth) and their labels."""
    rows, labels = [cm.copy()], ["truth"]  # row 0: the baseline, same path and draws
    for m in mult:
        rows.append(m * cm)
        labels.append(f"common multiplier {m:g}")
    for a, i in enumerate(mem):
        for m in mult:
            r = cm.copy()
            r[a] = m * cm[a]
            rows.append(r)
            labels.append(f"seller {i} x {m:g}")
    rand = rng.uniform(lo, hi, size=(int(n_random_reports), mem.size))
    rows += list(rand)
    labels += ["random joint report"] * rand.shape[0]
    joint = np.clip(np.array(rows), floor, hi)
    joint[0] = cm  # the truth exactly, even at a cost below the floor
    return joint, labels[1:]


def opponent_profiles(reports, support, members, rng=None) -> dict[str, np.ndarray]:
    """The others' reports in the targeted profiles of a group ``members`` (one seller
    for the unilateral audit, a coalition here): ``floor`` / ``top``: every other at
    its support's bottom / top (``support`` = (lowest report, c_max), numbers or one per
    seller: each seller's own support); ``tied``: every other at the members' mean
    report (within its own support); ``one_at_floor`` / ``one_at_top``: the others
    truthful but one non-member, the farthest from that end, moved to it.  The members'
    own entries are overwritten by the reports tried.  These are profiles no draw from
    the prior reliably produces (ex-post IC is a statement for every one)."""
    r = np.asarray(reports, dtype=float).reshape(-1)
    lo = np.broadcast_to(np.asarray(support[0], dtype=float), r.shape)
    hi = np.broadcast_to(np.asarray(support[1], dtype=float), r.shape)
    mem = np.asarray(members, dtype=int).reshape(-1)
    out = {
        "floor": lo.copy(),
        "top": hi.copy(),
        "tied": np.clip(np.full(r.size, float(r[mem].mean())), lo, hi),
    }
    rest = np.setdiff1d(np.arange(r.size), mem)
    if rest.size:
        for label, end, far in (("one_at_floor", lo, np.argmax), ("one_at_top", hi, np.argmin)):
            v = r.copy()
            j = rest[far(r[rest])]
            v[j] = end[j]
            out[label] = v
    return out


def interior_profiles(
    reports,
    support,
    rng,
    *,
    k_max: int = 3,
    n_points: int = 2,
    n_bands: int = 2,
    stratum: tuple[int, int] | None = None,
) -> list[tuple[str, np.ndarray]]:
    """A space-filling design of interior profiles of the others' reports, one vector
    per profile shared by every seller searched (each seller's own entry is replaced
    by its candidates), as (kind, reports):

    * ``k_at_end``: the k lowest reports at their floor and the rest at their top, and
      the reverse (k = 1..k_max): k others below (above) every interior point;
    * ``k_near_point``: k others within w 1e-3 of a point p (distinct), the rest at
      their top, for ``n_points`` points p, one uniform in each of as many equal
      parts of the support, or with ``stratum`` (m, K) of n_points K parts over the
      audit's K markets (a Latin design), k = 1..k_max; for k = 2 (n >= 5) a second
      pair at p + 1/2 (mod 1) in the same profile, other sellers: twice the points
      for a pair at no extra profile (a band of 5% of the support holding exactly two
      others was missed at seed 0 by the 6 pair points of a 3-market audit);
    * ``pair_tied``: the reports given, the two closest tied at their mean: exactly
      one tie;
    * ``band``: every report uniform in one of ``n_bands`` equal bands of the support.

    ``support``: (lowest reports, tops), numbers or one per seller."""
    r = np.asarray(reports, dtype=float).reshape(-1)
    n = r.size
    lo = np.broadcast_to(np.asarray(support[0], dtype=float), r.shape)
    hi = np.broadcast_to(np.asarray(support[1], dtype=float), r.shape)
    w = hi - lo
    order = np.argsort(r, kind="stable")
    out: list[tuple[str, np.ndarray]] = []
    for k in range(1, min(k_max, n - 1) + 1):
        for first, rest in ((lo, hi), (hi, lo)):
            v = rest.copy()
            pick = order[:k] if first is lo else order[::-1][:k]
            v[pick] = first[pick]
            out.append(("k_at_end", v))
    m, K = (0, 1) if stratum is None else (int(stratum[0]), max(int(stratum[1]), 1))
    # a Latin design over the audit's K markets (``stratum`` = (m, K)): point j of
    # market m in part j K + m of n_points K equal parts (K = 20: every 2.5%)
    points = (np.arange(n_points) * K + m + rng.random(n_points)) / (n_points * K)
    for p in points:
        for k in range(1, min(k_max, n - 1) + 1):
            v = hi.copy()
            pick = rng.choice(n, size=k, replace=False)
            spread = (np.arange(k) - (k - 1) / 2) * 1e-3
            v[pick] = np.clip(lo[pick] + w[pick] * (p + spread), lo[pick], hi[pick])
            rest = np.setdiff1d(np.arange(n), pick)[:k]
            if k == 2 and n >= 5:  # a second pair at p + 1/2: twice the pair points
                q = (p + 0.5) % 1.0
                v[rest] = np.clip(lo[rest] + w[rest] * (q + spread), lo[rest], hi[rest])
            out.append(("k_near_point", v))
    if n >= 3:
        gaps = np.diff(r[order])
        j = int(np.argmin(gaps))
        v = r.copy()
        v[order[j : j + 2]] = r[order[j : j + 2]].mean()
        out.append(("pair_tied", v))
    for b in range(n_bands):
        u = (b + rng.random(n)) / n_bands
        out.append(("band", lo + w * u))
    return out


def coalition_search(
    mech,
    costs,
    k: int,
    rng: np.random.Generator,
    *,
    tol: float,
    n_random_coalitions: int = 16,
    multipliers=DEFAULT_MULTIPLIERS,
    n_random_reports: int = 16,
    n_probe: int = 8,
    probe_step: float = 0.02,
    alpha: float = 0.05,
    support=None,
    floor: float | None = None,
    profiles: bool = False,
) -> CoalitionResult:
    """Search one market (truthful reports ``costs``) for coalitions of 2..``k``
    sellers whose joint misreport raises their summed utility by more than ``tol``.

    ``mech``: a Mechanism (or an object with ``outcome``); ``support``: the reports'
    range (default ``mech.dist.support``).  Coalitions, joint reports, the margin
    for randomized mechanisms and the meaning of ``group_ic``: see the module doc.
    All randomness (random coalitions and reports, the draws' seeds) comes from
    ``rng``.  Errors: k < 2 or k > n, tol < 0, a cost outside the support."""
    if not isinstance(mech, Mechanism):
        mech = as_mechanism(mech)
    c, k, (lo, hi), mult = _check_args(
        mech,
        costs,
        k,
        rng,
        tol,
        support,
        multipliers,
        {
            "n_random_coalitions": n_random_coalitions,
            "n_random_reports": n_random_reports,
            "n_probe": n_probe,
        },
    )
    if not (np.isfinite(probe_step) and probe_step > 0):
        raise MarketSimError(f"probe_step must be a number > 0 (got {probe_step!r})")
    if not 0 < alpha < 1:
        raise MarketSimError(f"alpha must be in (0, 1) (got {alpha!r})")
    floor = lo + _FLOOR * (hi - lo) if floor is None else float(floor)
    randomized = bool(getattr(mech, "randomized", False))
    path = _member_outcomes(mech)
    sampled = randomized and not path.exact  # Monte Carlo over the draws
    D = max(int(getattr(mech, "n_draws", 64)), 2) if sampled else 1
    seeds = [int(s) for s in rng.integers(2**63, size=D)]
    ev = _Evaluator(mech, c, seeds, path)
    window = (lo, floor, hi)
    coalitions, setters = _candidate_coalitions(
        ev, c, k, tol, window, n_probe, probe_step, n_random_coalitions, rng
    )
    found = _joint_search(ev, c, coalitions, mult, window, n_random_reports, profiles, rng)
    z = 0.0
    if sampled:
        from scipy.stats import norm

        z = float(norm.ppf(1 - alpha / max(found.gains.size, 1)))
    return _result(found, coalitions, setters, ev, c, k, tol, z, randomized, D)


def _candidate_coalitions(ev, c, k, tol, window, n_probe, probe_step, n_random, rng):
    """The coalitions to try, each with the kind that proposed it (module doc): windows
    around the cut-off, price setters and who gains when they move, random ones; and
    the price setters (sellers whose move changes another's utility beyond ``tol``)."""
    lo, floor, hi = window
    n = c.size
    everyone = np.arange(n)
    # who is bought at the truth
    eps_true = ev.outcomes(everyone[:0], np.empty((1, 0)), everyone)[0][0].mean(axis=1)
    bought = eps_true > _BOUGHT * max(float(eps_true.max()), 1e-300)
    # coalitions around the cut-off: windows over the k highest bought + k lowest unbought
    by_cost = np.argsort(c, kind="stable")
    b_sorted, u_sorted = by_cost[bought[by_cost]], by_cost[~bought[by_cost]]
    edge = np.r_[b_sorted[-k:], u_sorted[:k]]
    coalitions: dict[tuple[int, ...], str] = {}

    def add(members, kind):
        key = tuple(sorted(int(i) for i in members))
        if len(set(key)) == len(key) >= 2:
            coalitions.setdefault(key, kind)

    for s in range(2, k + 1):
        for a in range(edge.size - s + 1):
            add(edge[a : a + s], "cut-off")

    # price setters: move each probed seller alone, see whose utility moves
    near_b, near_u = b_sorted[::-1][:n_probe], u_sorted[:n_probe]
    rank = np.r_[np.arange(near_b.size), np.arange(near_u.size)]  # places from the cut
    probe = np.r_[near_b, near_u][np.argsort(rank, kind="stable")][: int(n_probe)]
    # whose utility is watched: everybody, or in a large market the _WATCH sellers
    # nearest the cut-off on each side (the probe then costs their outcomes only)
    if n <= 2 * _WATCH:
        watch = everyone
    else:
        watch = np.sort(np.r_[b_sorted[-_WATCH:], u_sorted[:_WATCH]])
    setters = []
    step = probe_step * (hi - lo)
    for j in probe:
        moves = np.clip(c[j] + np.array([[step], [-step], [0.0]]), floor, hi)
        moves[2] = c[j]  # the truth, through the same path (differences exact)
        u = ev.utilities(np.array([j]), moves, watch).mean(axis=2)
        du = u[:2] - u[2]
        du[:, watch == j] = 0.0
        if np.abs(du).max() > tol:
            setters.append(int(j))
        for row in du:
            gainers = np.argsort(-row, kind="stable")
            gainers = watch[gainers[row[gainers] > tol][: k - 1]]
            for s in range(1, gainers.size + 1):
                add(np.r_[j, gainers[:s]], "price-setter")

    for _ in range(int(n_random)):
        s = int(rng.integers(2, k + 1))
        add(rng.choice(n, size=s, replace=False), "random")
    return coalitions, setters


@dataclass(frozen=True)
class _JointFound:
    """Every joint report tried: its summed gain over the truth and standard error,
    (tried entry, row) of each, and per tried entry (members, joint reports, moves,
    per-member gains, the kind that proposed the coalition); the profiles searched."""

    gains: np.ndarray
    ses: np.ndarray
    where: np.ndarray
    tried: list
    n_profiles: int


def _joint_search(ev, c, coalitions, mult, window, n_random_reports, profiles, rng) -> _JointFound:
    """Joint misreports of every coalition, the others truthful and (``profiles``) at
    the targeted and interior opponent profiles."""
    lo, floor, hi = window
    D = len(ev.seeds)
    gains, ses, where = [], [], []
    tried: list[tuple[np.ndarray, np.ndarray, list[str], np.ndarray, str]] = []
    n_profiles = 0
    interior = interior_profiles(c, (floor, hi), rng) if profiles else []
    for members, kind in coalitions.items():
        mem = np.array(members)
        joint, labels = _joint_reports(c[mem], mem, mult, rng, n_random_reports, lo, floor, hi)
        chosen = [("truthful", c)]
        if profiles:
            chosen += list(opponent_profiles(c, (floor, hi), mem).items()) + interior
        for label, others in chosen:
            ev.reports = others
            U = ev.utilities(mem, joint, mem)  # (B, s, D)
            per_member = (U - U[:1])[1:]  # each joint report against the truth, draw by draw
            total = per_member.sum(axis=1)  # (B, D)
            g = total.mean(axis=1)
            se = total.std(axis=1, ddof=1) / np.sqrt(D) if D > 1 else np.zeros_like(g)
            gains.append(g)
            ses.append(se)
            where.append(np.c_[np.full(g.size, len(tried)), np.arange(g.size)])
            moves = labels if label == "truthful" else [f"{x} (others: {label})" for x in labels]
            tried.append((mem, joint[1:], moves, per_member.mean(axis=2), kind))
        ev.reports = c
        n_profiles += len(chosen) - 1
    return _JointFound(
        np.concatenate(gains), np.concatenate(ses), np.concatenate(where), tried, n_profiles
    )


def _result(found: _JointFound, coalitions, setters, ev, c, k, tol, z, randomized, D):
    """The verdict: the joint report with the largest lower bound G - z SE is the witness;
    group-IC when that bound is at most ``tol``."""
    G, S, W = found.gains, found.ses, found.where
    lower = G - z * S
    best_i = int(np.argmax(lower))
    ci, bi = W[best_i]
    mem, joint, labels, member_gain, chosen_as = found.tried[ci]
    kinds = list(coalitions.values())
    best = CoalitionWitness(
        members=tuple(int(i) for i in mem),
        costs=tuple(float(v) for v in c[mem]),
        reports=tuple(float(v) for v in joint[bi]),
        gain=float(G[best_i]),
        gain_se=float(S[best_i]),
        member_gains=tuple(float(v) for v in member_gain[bi]),
        move=labels[bi],
        chosen_as=chosen_as,
    )
    return CoalitionResult(
        k=k,
        tol=float(tol),
        max_gain=max(float(G.max()), 0.0),
        best=best,
        best_lower=float(lower[best_i]),
        group_ic=bool(lower[best_i] <= tol),
        n_coalitions=len(coalitions),
        n_joint_reports=int(G.size),
        n_runs=ev.runs,
        price_setters=tuple(setters),
        randomized=randomized,
        n_draws=D,
        z=z,
        coalitions_by_kind={kd: kinds.count(kd) for kd in ("cut-off", "price-setter", "random")},
        n_profiles=found.n_profiles,
    )
