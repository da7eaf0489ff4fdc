"""Audit a mechanism's incentives on seeded random markets (docs/audit.md).

``audit(mechanism, dist, n_sellers, n_markets, rng)`` draws ``n_markets`` markets
(truthful reports) and, for every seller, searches for the most profitable
unilateral misreport, all sellers of a market at once through the mechanism's
``deviations``.  What is searched (counts per kind in ``candidates_by_kind``):

* ``endpoints``: the support's bottom and top, exactly (``floor_report`` is the
  bottom unless the mechanism has no outcome there: then the nearest of c_low +
  w 1e-9, 1e-6, 1e-3 that has one, said in ``floor_note``; w the support's width);
* ``grid``: the ``n_grid`` - 2 inner points of an equally spaced grid;
* ``probes``: c +- w 10^-k, k = 1..6, for deviations too small for any grid;
* ``others``: every other seller's report r_j and r_j +- w 1e-9, +- w 1e-6 (the
  critical points of threshold rules; in a market of more than ``max_others`` + 1
  sellers, the ``max_others`` reports nearest the seller's own in rank);
* ``jumps``: the own allocation's jump points, by bisection (to w 1e-9) between
  adjacent candidates whose eps differ like a jump (a secant 4x both neighbours'),
  up to ``n_jumps`` per seller, then w 1e-6 either side (exact evaluations only);
* ``random``: ``n_random`` reports uniform over the support (the statistical
  statement below is made from these);
* ``local``: with ``refine``, a multi-start section search from the 2 best
  candidates of each seller whose best gain exceeds tol / 10 (a smooth gain above
  tol shows at least 0.19 tol at one of the probes, spaced by factors of 10).

Opponent profiles (``profiles_by_kind``): besides the drawn market, each seller
(all in markets of up to ``max_profile_sellers``, else that many at evenly spaced
cost ranks) is searched (endpoints, grid, others, jumps; no random nor local
candidates) with the others at the floor, at the top, tied with it, and with one
other (the one farthest from that end) at each end: ``coalitions.opponent_profiles``,
which the coalition search uses too.

Tolerance (on the scale of incentives; no transfer that leaves every eps and every
payment difference unchanged can move it): ``tol = tol_factor x w x eps_scale +
tol_abs``, eps_scale the largest truthful eps of the drawn markets.

Verdicts.  ``verdict``: ``not_ic`` iff a seller's best gain is confirmed above tol,
or (exact evaluations) a type pair of adjacent candidates shows a gain above tol
(a seller of cost z_j gains by reporting z_j+1: ``type_gain_max``), or (a
deterministic mechanism) Myerson's identity residual exceeds tol (a proof of
non-IC, docs/audit-certification.md); ``inconclusive`` (Monte Carlo only) when
nothing is confirmed but the budget cannot decide (see below); else ``ic``.
``ir_verdict`` alike from the truthful utilities at the drawn costs, at the top and
the bottom of the support (each seller, the others' reports given) and, for exact
evaluations, in every opponent profile.

Monte Carlo (a ``randomized`` mechanism on the generic default): the search uses
``n_draws`` common draws (a quarter of them in the profiles: it only selects);
each seller's best candidate and its IR quantities are then confirmed on fresh
draws, ``n_confirm`` at first and 4x more (up to ``n_confirm_max``) where the
variance is unstable (one draw carries more than 10% of the sum of squares) or the
confidence bound still allows a gain (IR violation) beyond tol + ``resolution`` x
w x eps_scale.  A gain is confirmed when the sample is stable and mean -
k SE > tol, k = z + max(0, -skew)(2 z^2 + 1) / (6 sqrt D) (the Edgeworth term of
the studentized mean, so that a left-skewed sample, the signature of a rare large
loss, needs more), z the one-sided Bonferroni quantile for 5% over every candidate
confirmed and every escalation stage; a would-be confirmation on an unstable sample
is ``undecided``.  ``detectable_gain`` = tol + (k + 1.645) x the median SE: the
smallest gain the audit would have confirmed with 95% probability at a typical
seller's best candidate.  ``inconclusive`` iff nothing is confirmed and something
is undecided or some seller's upper bound (mean + k SE) still exceeds tol +
``resolution`` x w x eps_scale after ``n_confirm_max`` draws.  IR in expectation:
the same, with the sign and the skew turned.

Statistics (95%): ``max_gain_ci_low/high`` a percentile bootstrap CI (``n_boot``
resamples of the markets) of the mean per-market largest gain;
``profitable_share_upper`` the one-sided Clopper-Pearson bound on the share of
random reports that gain more than tol; ``ir_share_upper`` alike for IR.

CLI: ``market-sim audit`` writes DIR/audit.csv, DIR/summary.json, DIR/audit.png;
it exits 3 when a verdict is not_ic / not_ir, 4 when one is inconclusive.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from .distributions import as_distribution
from .errors import MarketSimError
from .execution import Job, Shared, check_executor, job_rng, run_jobs
from .files import atomic_write, json_plain, save_png
from .mechanisms.base import Mechanism, as_mechanism, as_outcome, mechanism_name
from .parameters import check_int

if TYPE_CHECKING:
    import pandas as pd

__all__ = [
    "audit",
    "AuditResult",
    "AuditWork",
    "audit_work",
    "audit_settings",
    "audit_estimate_seconds",
    "clopper_pearson_upper",
]

COLUMNS = [
    "market",
    "seller",
    "cost",
    "truthful_utility",
    "utility_at_top",
    "utility_at_bottom",
    "best_report",
    "max_gain",
    "profile",
    "monotone",
    "gain_se",
    "profitable",
]
EXIT_NOT_IC = 3
EXIT_INCONCLUSIVE = 4
CONFIDENCE = 0.95
_Z_POWER = 1.6448536269514722  # one-sided 95% normal quantile (power of detectable_gain)
_MONO_TOL = 1e-9
_PROBES = 10.0 ** -np.arange(1, 7)  # c +- w 10^-k
_STEPS = np.array([-1e-6, -1e-9, 0.0, 1e-9, 1e-6])  # around another seller's report
_FLOORS = (0.0, 1e-9, 1e-6, 1e-3)  # the bottom report tried, + w x this, first defined
_JUMP_RATIO = 4.0  # a secant this many times both neighbours' is a jump
_JUMP_WIDTH = 1e-9  # bisection stops at this fraction of w
_TAIL_SHARE = 0.1  # one draw carrying more of the sum of squares: unstable variance
_N_STAGES = 3  # confirmation stages: n_confirm, 4x, 16x (capped by n_confirm_max)
_CHUNK = 4096  # sellers per batch (memory; results do not depend on it)
_LARGE = 256  # larger markets: 2 other sellers' reports per seller, no jumps in profiles


@dataclass
class AuditResult:
    """``table``: one row per market x seller (``COLUMNS``); ``summary``: the verdict
    and its numbers (see the module doc); ``violations``: monotonicity violations
    as (market, seller, low report, high report, eps_low, eps_high)."""

    table: pd.DataFrame
    summary: dict
    violations: list = field(default_factory=list)

    @property
    def verdict(self) -> str:
        return self.summary["verdict"]

    @property
    def ir_verdict(self) -> str:
        return self.summary["ir_verdict"]

    @property
    def passed(self) -> bool:
        """IC and IR (and group-IC when coalitions were audited)."""
        s = self.summary
        return (
            s["verdict"] == "ic"
            and s["ir_verdict"] == "ir"
            and s.get("group_verdict") in (None, "ic")
        )

    @property
    def exit_status(self) -> int:
        """0 passed, 3 a verdict fails, 4 none fails but one is inconclusive."""
        s = self.summary
        if "not_ic" in (s["verdict"], s.get("group_verdict")) or s["ir_verdict"] == "not_ir":
            return EXIT_NOT_IC
        return 0 if self.passed else EXIT_INCONCLUSIVE

    def write(self, folder) -> Path:
        """DIR/audit.csv, DIR/summary.json and DIR/audit.png, each written atomically."""
        out = Path(folder)
        if out.exists() and not out.is_dir():
            raise MarketSimError(f"{folder}: exists and is not a folder")
        out.mkdir(parents=True, exist_ok=True)
        csv = self.table.to_csv(index=False).encode()
        atomic_write(out / "audit.csv", lambda fh: fh.write(csv))
        doc = json.dumps(json_plain(self.summary), indent=2) + "\n"
        atomic_write(out / "summary.json", lambda fh: fh.write(doc.encode()))
        plot(self, out / "audit.png")
        return out

    def statement(self) -> str:
        """What the verdicts mean, in one paragraph."""
        s = self.summary
        parts = [_ic_sentence(s), _ir_sentence(s)]
        if s.get("randomized"):
            parts.append(_detectable_sentence(s))
        if s.get("coalition_size"):
            parts.append(_coalition_sentence(s))
        if s.get("certified"):
            parts.append(f"Certified: {s['certified']}")
            if s["ir_verdict"] == "ir":
                parts.append(
                    "under a truthful mechanism utility falls with the cost, so IR at the "
                    "top of the support is IR for every cost"
                )
        elif s.get("certificate_note"):
            parts.append(f"Not certified: {s['certificate_note']} (a rise between them is "
                         "not excluded)")  # fmt: skip
        else:
            parts.append("Not certified: a search cannot prove IC (docs/audit.md)")
        by_class = _class_sentence(s)
        if by_class:
            parts.append(by_class)
        return ". ".join(p for p in parts if p) + "."

    def format(self) -> str:
        s = self.summary
        kinds = ", ".join(f"{k} {v}" for k, v in s["candidates_by_kind"].items())
        n_pairs = s["n_markets"] * s["n_sellers"]
        rows = [
            ("mechanism", s["mechanism"]),
            ("distribution", s["dist"]),
            ("markets x sellers", f"{s['n_markets']} x {s['n_sellers']}"),
            ("reports tried per seller", f"{s['n_candidates']} ({kinds}, all sellers)"),
            ("opponent profiles tried", str(s["n_profiles"])),
            ("tolerance", f"{s['tol']:.3g} (w x eps_scale {s['incentive_scale']:.3g})"),
            ("largest gain of a misreport", f"{s['max_gain']:.3g}" + _se(s["max_gain_se"])),
            (
                "95% CI, mean per-market max gain",
                f"[{_fmt(s['max_gain_ci_low'])}, {_fmt(s['max_gain_ci_high'])}] (bootstrap)",
            ),
            (
                "sellers with a profitable misreport",
                f"{s['n_profitable']} of {n_pairs} (share {s['share_profitable']:.3g})",
            ),
            (
                "random reports that gain > tol",
                f"{s['n_profitable_random']} of {s['n_random_reports']} (share, 95% upper: "
                f"{s['profitable_share_upper']:.3g})",
            ),
            (
                "type gain max (adjacent reports)",
                f"{_fmt(s.get('type_gain_max'))} (its tol {_fmt(s.get('type_gain_tol'))})",
            ),  # fmt: skip
            (
                "sellers violating IR",
                f"{s['ir_violations']} of {n_pairs} (share, 95% upper: {s['ir_share_upper']:.3g})",
            ),
            ("least truthful utility", f"{s['min_truthful_utility']:.3g}"),
            (
                "least utility at the top / bottom",
                f"{s['min_utility_top']:.3g} / {s['min_utility_bottom']:.3g}",
            ),  # fmt: skip
            ("monotonicity violations", str(s["monotonicity_violations"])),
            ("identity residual max", _fmt(s.get("identity_residual_max"))),
            ("certified", s.get("certified") or s.get("certificate_note") or "no"),
        ]
        if s.get("randomized"):
            rows.append(("detectable gain (95%)", _fmt(s.get("detectable_gain"))))
        for g in s.get("by_class") or []:
            line = f"max gain {g['max_gain']:.3g}, IR violations {g['ir_violations']}"
            rows.append((f"class {g['group']} ({g['law']})", line))
        if s.get("coalition_size"):
            rows += [
                ("coalition size", str(s["coalition_size"])),
                ("coalition max gain", f"{s['coalition_max_gain']:.3g}"),
                ("group verdict", s["group_verdict"]),
            ]
        rows += [("verdict", s["verdict"]), ("IR verdict", s["ir_verdict"])]
        width = max(len(k) for k, _ in rows)
        table = "\n".join(f"{k:<{width}}  {v}" for k, v in rows)
        return table + "\n" + self.statement()


def _ic_sentence(s) -> str:
    pct = _share(s["profitable_share_upper"])
    if s["verdict"] == "ic":
        return (
            f"no profitable misreport found among {s['n_candidates']} tried per seller and "
            f"{s['n_profiles']} opponent profiles; at 95% confidence fewer than {pct} of "
            f"random reports gain more than tol = {s['tol']:.3g}"
        )
    if s["verdict"] == "inconclusive":
        return f"INCONCLUSIVE: {s['verdict_reason']}"
    w = s["witness"]
    if w.get("kind") == "monotone":
        return f"NOT IC: {s['verdict_reason']}"
    if w.get("kind") == "type":
        return (
            f"NOT IC: {s['verdict_reason']}: in market {w['market']} (seller {w['seller']}'s "
            f"{w['profile']} profile) a seller of cost {w['cost']:.6g} gains {w['gain']:.3g} > "
            f"tol = {s['tol']:.3g} by reporting {w['report']:.6g}"
        )
    return (
        f"NOT IC: seller {w['seller']} of market {w['market']} (cost {w['cost']:.6g}, "
        f"others {w['profile']}) gains {w['gain']:.3g} > tol = {s['tol']:.3g} by reporting "
        f"{w['report']:.6g}; {s['n_profitable']} of {s['n_markets'] * s['n_sellers']} sellers "
        f"have a confirmed profitable misreport; at 95% confidence fewer than {pct} of random "
        "reports gain more than tol"
    )


def _ir_sentence(s) -> str:
    if s["ir_verdict"] == "ir":
        ir = _share(s["ir_share_upper"])
        return (
            "IR: no truthful utility below -tol at the drawn costs, the top or the bottom of "
            f"the support (fewer than {ir} at 95%)"
        )
    if s["ir_verdict"] == "inconclusive":
        return f"IR INCONCLUSIVE: {s['ir_reason']}"
    return (
        f"NOT IR: {s['ir_violations']} sellers' truthful utility is below -tol (least "
        f"{s['min_ir_utility']:.3g}, {s['ir_where']})"
    )


def _detectable_sentence(s) -> str:
    if not s.get("monte_carlo"):
        return "Exact expectations: a gain above tol would have been found at the reports tried"
    return (
        f"The confirmation ({s['n_confirm']} to {s['n_confirm_max']} fresh draws) would have "
        f"confirmed a gain of {_fmt(s['detectable_gain'])} at a typical seller's best report "
        f"with 95% probability; smaller gains can be missed"
    )


def _coalition_sentence(s) -> str:
    w = s.get("coalition_witness")
    if s["group_verdict"] == "ic":
        return (
            f"Coalitions of up to {s['coalition_size']}: no joint misreport found that gains "
            f"more than tol ({s['coalitions_tried']} coalitions tried)"
        )
    if w:
        return (
            f"NOT GROUP-IC: sellers {w['members']} of market {w['market']} (costs "
            f"{_short(w['costs'])}) gain {w['gain']:.3g} together by reporting "
            f"{_short(w['reports'])}"
        )
    return ""


def _class_sentence(s) -> str:
    rows = s.get("by_class") or []
    if len(rows) < 2:
        return ""
    return "By class: " + "; ".join(
        f"{g['law']}: max gain {g['max_gain']:.3g}, {g['ir_violations']} IR violations "
        f"({g['ir_violations_at_cost']} at the drawn cost)"
        for g in rows
    )


def _share(p: float) -> str:
    """A probability for the statement: 3.5% or 9.4e-07."""
    return f"{100 * p:.2g}%" if p >= 1e-5 else f"{p:.2g}"


def _short(xs) -> str:
    return "[" + ", ".join(f"{x:.4g}" for x in xs) + "]"


def _se(v) -> str:
    return f" (SE {v:.2g})" if v else ""


def _fmt(v) -> str:
    return "n/a" if v is None or not math.isfinite(v) else f"{v:.3g}"


def clopper_pearson_upper(k: int, n: int, level: float = CONFIDENCE) -> float:
    """One-sided Clopper-Pearson upper bound on a binomial probability from k of n."""
    from scipy import stats

    if n <= 0:
        return 1.0
    if k >= n:
        return 1.0
    return float(stats.beta.ppf(level, k + 1, n - k))


def _bonferroni_z(m: int, level: float = CONFIDENCE) -> float:
    """One-sided normal quantile for a family-wise error 1 - level over m tests."""
    from scipy import stats

    return float(stats.norm.isf((1 - level) / max(int(m), 1)))


def _overrides(mech, name: str) -> bool:
    return getattr(type(mech), name) is not getattr(Mechanism, name)


# ---- evaluating candidates ----------------------------------------------------------
# An evaluator returns, for sellers ``sellers`` and candidate reports ``cand`` (k, C),
# the utilities at the TRUE costs and the eps, per draw: two (D, k, C) arrays (D = 1
# for exact evaluations).  ``reports`` are the others' reports (a market or a profile).
class _Exact:
    """Exact utilities: the mechanism's own ``deviations`` (exact expectations for
    randomized built-ins), or ``outcome`` called once per candidate (the generic
    default, without ``run``'s checks on every call: they cost more than a small
    mechanism; the results are checked once per batch)."""

    mc = False

    def __init__(self, mech, reports, costs, rng):
        self.mech, self.reports, self.costs = mech, reports, costs
        self.seed = int(rng.integers(2**63))  # one draw per market: common to all calls
        self.path = (
            "deviations"
            if _overrides(mech, "deviations")
            else "utilities"
            if _overrides(mech, "deviation_utilities")
            else "outcome"
        )

    def __call__(self, sellers, cand):
        mech, r, c = self.mech, self.reports, self.costs
        if self.path == "outcome":
            u, e = _loop(mech, r, c, sellers, cand, [None])
            return u, e
        dev = mech.deviations(sellers, cand, r, np.random.default_rng(self.seed))
        eps = np.asarray(dev.eps, dtype=float).reshape(cand.shape)
        if self.path == "utilities":
            u = mech.deviation_utilities(sellers, cand, c[sellers], r,
                                         np.random.default_rng(self.seed))  # fmt: skip
            u = np.asarray(u, dtype=float).reshape(cand.shape)
        else:
            u = (
                np.asarray(dev.payments, dtype=float).reshape(cand.shape)
                - c[sellers][:, None] * eps
            )
        if not (np.all(np.isfinite(u)) and np.all(np.isfinite(eps))):
            raise MarketSimError(f"{mechanism_name(mech)}: eps or payments contain NaN or inf")
        return u[None], eps[None]


class _MonteCarlo:
    """Common random numbers for a randomized mechanism on the generic default: every
    candidate of every seller sees the same draws (seeds)."""

    mc = True

    def __init__(self, mech, reports, costs, seeds):
        self.mech, self.reports, self.costs = mech, reports, costs
        self.seeds = [int(s) for s in seeds]

    def __call__(self, sellers, cand):
        return _loop(self.mech, self.reports, self.costs, sellers, cand, self.seeds)


def _loop(mech, reports, costs, sellers, cand, seeds):
    """(D, k, C) utilities at the true costs and eps, ``outcome`` once per seller,
    candidate and draw (a fresh generator per seed: common random numbers)."""
    D = len(seeds)
    u = np.empty((D,) + cand.shape)
    e = np.empty((D,) + cand.shape)
    trial = reports.copy()
    outcome, n = mech.outcome, reports.size
    for k, i in enumerate(sellers):
        ci, keep = costs[i], trial[i]
        for j, z in enumerate(cand[k]):
            trial[i] = z
            for d, s in enumerate(seeds):
                rng = None if s is None else np.random.default_rng(s)
                eps_d, pay_d = _pair(outcome(trial.copy(), rng), n, mech)
                e[d, k, j] = eps_d[i]
                u[d, k, j] = pay_d[i] - ci * eps_d[i]
        trial[i] = keep
    if not (np.all(np.isfinite(u)) and np.all(np.isfinite(e))):
        raise MarketSimError(f"{mechanism_name(mech)}: eps or payments contain NaN or inf")
    if np.any(e < 0):
        raise MarketSimError(f"{mechanism_name(mech)}: eps must be >= 0")
    return u, e


def _pair(result, n, mech):
    """(eps, payments) of what ``outcome`` returned, as arrays of n (checked lightly;
    a malformed result gets ``as_outcome``'s full message)."""
    if isinstance(result, tuple) and len(result) >= 2:
        eps, pay = result[0], result[1]
    elif hasattr(result, "eps") and hasattr(result, "payments"):
        eps, pay = result.eps, result.payments
    else:
        return _pair(as_outcome(result, n, mechanism_name(mech)), n, mech)
    eps, pay = np.asarray(eps, dtype=float).reshape(-1), np.asarray(pay, dtype=float).reshape(-1)
    if eps.size != n or pay.size != n:
        as_outcome(result, n, mechanism_name(mech))  # raises with the full message
    return eps, pay


# ---- the search ---------------------------------------------------------------------
@dataclass(frozen=True)
class _Plan:
    """The search settings (see ``audit``); ``floor``: the lowest report tried."""

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

    @property
    def width(self) -> float:
        return self.hi - self.lo

    @property
    def grid(self) -> np.ndarray:
        return np.linspace(self.floor, self.hi, self.n_grid)[1:-1]


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


def _base(c, others, P: _Plan, rand):
    """The candidates of one group, with their kinds: truth first."""
    k = c.size
    w = P.width
    cols = {
        "truth": c[:, None],
        "endpoints": np.tile([P.floor, P.hi], (k, 1)),
        "grid": np.tile(P.grid, (k, 1)),
        "probes": np.concatenate([c[:, None] - w * _PROBES, c[:, None] + w * _PROBES], axis=1),
        "others": (others[:, :, None] + w * _STEPS).reshape(k, -1),
    }
    if rand is not None:
        cols["random"] = rand
    Z = np.clip(np.concatenate(list(cols.values()), axis=1), P.floor, P.hi)
    Z[:, 0] = c
    return Z, {kd: v.shape[1] for kd, v in cols.items() if kd != "truth"}


def _gains(U, T):
    """Mean gain and its SE over draws: U (D, k, C) against the truth T (D, k)."""
    diff = U - T[:, :, None]
    D = diff.shape[0]
    se = diff.std(axis=0, ddof=1) / math.sqrt(D) if D > 1 else np.zeros(diff.shape[1:])
    return diff.mean(axis=0), se


def _jumps(ev, sellers, Z, E, P: _Plan):
    """Bisection of the own allocation's jumps (eps means E at the reports Z, (k, C)):
    up to ``n_jumps`` per seller, to w 1e-9, then w 1e-6 either side.  Returns the
    reports tried with their utilities and eps per draw (empty when no jump)."""
    order = np.argsort(Z, axis=1, kind="stable")
    z = np.take_along_axis(Z, order, axis=1)
    e = np.take_along_axis(E, order, axis=1)
    dz, de = np.diff(z, axis=1), np.abs(np.diff(e, axis=1))
    with np.errstate(divide="ignore", invalid="ignore"):
        sec = np.where(dz > 0, de / np.where(dz > 0, dz, 1.0), 0.0)
    nb = np.maximum(np.pad(sec[:, :-1], ((0, 0), (1, 0))), np.pad(sec[:, 1:], ((0, 0), (0, 1))))
    scale = np.maximum(e.max(axis=1, keepdims=True), 1e-300)
    jump = (sec > _JUMP_RATIO * nb) & (de > _MONO_TOL * scale) & (dz > 2 * _JUMP_WIDTH * P.width)
    rows = np.nonzero(jump.any(axis=1))[0]
    if rows.size == 0 or P.n_jumps == 0:
        return None
    J = P.n_jumps
    pick = np.argsort(-np.where(jump, de, -1.0), axis=1, kind="stable")[rows, :J]
    pick = np.where(jump[rows[:, None], pick], pick, pick[:, :1])  # pad with the first
    a, b = z[rows[:, None], pick], z[rows[:, None], pick + 1]
    ea, eb = e[rows[:, None], pick], e[rows[:, None], pick + 1]
    who = sellers[rows]
    n_iter = int(min(40, math.ceil(math.log2(max(float((b - a).max()), 1e-300)
                                             / (_JUMP_WIDTH * P.width)))))  # fmt: skip
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
    side = np.clip(np.concatenate([a - 1e-6 * P.width, b + 1e-6 * P.width], axis=1),
                   P.floor, P.hi)  # fmt: skip
    u, es = ev(who, side)
    tried_z.append(side)
    tried_u.append(u)
    tried_e.append(es)
    return rows, np.concatenate(tried_z, 1), np.concatenate(tried_u, 2), np.concatenate(tried_e, 2)


def _sections(ev, sellers, T, Z, G, P: _Plan):
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
        pts = np.clip(a[:, :, None] + (b - a)[:, :, None] * frac, P.floor, P.hi)  # (k, S, m)
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


def _type_gains(Z, U, E, c):
    """Adjacent type gains on the sorted candidates (exact evaluations): a seller of
    cost z_j reporting z_j+1 gains v_j+1 + (z_j+1 - z_j) eps_j+1 - v_j, one of cost
    z_j+1 reporting z_j gains v_j - (z_j+1 - z_j) eps_j - v_j+1, with v(z) = t(z) - z
    eps(z) = u_c(z) + (c - z) eps(z).  Returns the best per seller and its (cost,
    report)."""
    order = np.argsort(Z, axis=1, kind="stable")
    z = np.take_along_axis(Z, order, axis=1)
    e = np.take_along_axis(E, order, axis=1)
    v = np.take_along_axis(U, order, axis=1) + (c[:, None] - z) * e
    dz = np.diff(z, axis=1)
    down = v[:, 1:] + dz * e[:, 1:] - v[:, :-1]  # type z_j reports z_j+1
    up = v[:, :-1] - dz * e[:, :-1] - v[:, 1:]  # type z_j+1 reports z_j
    both = np.concatenate([down, up], axis=1)
    j = np.argmax(both, axis=1)
    rows = np.arange(Z.shape[0])
    m = dz.shape[1]
    jj = j % m
    is_down = j < m
    cost = np.where(is_down, z[rows, jj], z[rows, jj + 1])
    report = np.where(is_down, z[rows, jj + 1], z[rows, jj])
    return both[rows, j], np.column_stack([cost, report])


def _search(ev, sellers, c, others, P: _Plan, rand, tol_terms, certify, targeted=None):
    """Search one group of sellers (one market or one opponent profile); ``targeted``:
    the rows that get the jump bisection (default all)."""
    Z, counts = _base(c, others, P, rand)
    U, E = ev(sellers, Z)
    T = U[:, :, 0]
    G, S = _gains(U, T)
    Em = E.mean(axis=0)
    # this group's tolerance: at most the audit's (its eps_scale covers every market)
    tol_hint = tol_terms[0] * P.width * float(Em[:, 0].max(initial=0.0)) + tol_terms[1]
    Zc, Uc, Ec = Z, U.mean(axis=0), Em  # the exact-path reports (checks, type gains)
    if not ev.mc:
        t = np.arange(sellers.size) if targeted is None else targeted
        jumped = _jumps(ev, sellers[t], Z[t], Em[t], P) if t.size else None
        counts["jumps"] = 0
        if jumped is not None:
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
            Gj, Sj = _gains(padU, T)
            G, S = np.concatenate([G, Gj], axis=1), np.concatenate([S, Sj], axis=1)
    rowsk = np.arange(sellers.size)
    v_top = Uc[:, 2] + (c - P.hi) * Ec[:, 2]  # column 2: the top (``_base``)
    v_bottom = Uc[:, 1] + (c - P.floor) * Ec[:, 1]
    found = _Found(sellers, T, Em[:, 0], c, np.zeros(c.size), np.zeros(c.size), v_top,
                   v_bottom, np.full(c.size, -np.inf), np.column_stack([c, c]),
                   counts=counts)  # fmt: skip
    found.cand_eps = Ec.max(axis=1)
    if not ev.mc:
        found.type_gain, found.type_pair = _type_gains(Zc, Uc, Ec, c)
    if rand is not None:
        r0 = Z.shape[1] - rand.shape[1]
        found.rand_gain, found.rand_se = G[:, r0 : Z.shape[1]], S[:, r0 : Z.shape[1]]
    # monotonicity along the sorted own reports (and Myerson's check, exact only)
    order = np.argsort(Zc, axis=1, kind="stable")
    e_s, z_s = np.take_along_axis(Ec, order, axis=1), np.take_along_axis(Zc, order, axis=1)
    rise = np.diff(e_s, axis=1) > _MONO_TOL * max(float(np.max(Ec)), 1e-300)
    found.mono = np.asarray(~rise.any(axis=1))
    found.violations = [
        (int(r), float(z_s[r, j]), float(z_s[r, j + 1]), float(e_s[r, j]), float(e_s[r, j + 1]))
        for r, j in zip(*np.nonzero(rise), strict=True)
    ]
    if certify and not ev.mc:
        from .certification import myerson_check

        pay = Uc + c[:, None] * Ec  # t = u + c eps
        found.check = myerson_check(Zc, Ec, pay, (P.lo, P.hi), sellers=sellers)
    Zall = Zc if not ev.mc else Z
    if P.refine and P.n_iter > 0 and rand is not None:
        hot = np.nonzero(G.max(axis=1) > tol_hint / 10)[0]  # module doc: probes x 10
        counts["local"] = 0
        if hot.size:
            Zl, Gl = _sections(ev, sellers[hot], T[:, hot], Zall[hot], G[hot], P)
            counts["local"] = Zl.shape[1] * hot.size / sellers.size
            padZ = np.repeat(Zall[:, :1], Zl.shape[1], axis=1)
            padG = np.zeros((c.size, Zl.shape[1]))
            padZ[hot], padG[hot] = Zl, Gl
            Zall = np.concatenate([Zall, padZ], axis=1)
            G = np.concatenate([G, padG], axis=1)
            S = np.concatenate([S, np.zeros_like(padG)], axis=1)
    j = np.argmax(G, axis=1)
    found.best_gain = np.maximum(G[rowsk, j], 0.0)
    found.best_se = np.where(G[rowsk, j] > 0, S[rowsk, j], 0.0)
    found.best_report = np.where(G[rowsk, j] > 0, Zall[rowsk, j], c)
    return found


# ---- one market: the drawn reports and the opponent profiles ------------------------
@dataclass
class _Market:
    """Per seller of one market: the search's results and (Monte Carlo) the stats of
    the confirmation; ``groups``: the report vectors searched (market first)."""

    costs: np.ndarray
    truth: np.ndarray
    top: np.ndarray
    bottom: np.ndarray
    profile_truth: np.ndarray  # least truthful utility over the profiles (exact)
    best_report: np.ndarray
    gain: np.ndarray
    gain_se: np.ndarray
    profile: np.ndarray  # label of the best gain's profile
    best_group: np.ndarray
    type_gain: np.ndarray
    type_pair: np.ndarray
    type_profile: np.ndarray
    type_tol: np.ndarray  # tol_factor x w x the largest eps among the seller's reports + tol_abs
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


def _floor(mech, costs, P0: _Plan, rng, mc) -> tuple[float, str | None]:
    """The lowest report the mechanism has an outcome for, alone and with every other
    seller there too (the floor profile): the support's bottom, else the first of
    c_low + w (1e-9, 1e-6, 1e-3) (the offline mechanism has no optimum at a report of
    0 on a support starting at 0)."""
    note = None
    for f in _FLOORS:
        z = P0.lo + f * P0.width
        try:
            for reports in (costs, np.full(costs.size, z)):
                if mc:
                    trial = reports.copy()
                    trial[0] = z
                    mech.run(trial, np.random.default_rng(0))
                else:
                    _Exact(mech, reports, costs, rng)(np.array([0]), np.array([[z]]))
            return z, note
        except MarketSimError as err:
            note = f"no outcome at a report of {z:.6g} ({err}); lowest report tried c_low + w "
    raise MarketSimError(f"{mechanism_name(mech)}: {note}no outcome near the support's bottom")


def _profile_sellers(costs, cap):
    """All sellers, or ``cap`` of them at evenly spaced cost ranks."""
    n = costs.size
    if n <= cap:
        return np.arange(n)
    order = np.argsort(costs, kind="stable")
    return np.sort(order[np.unique(np.linspace(0, n - 1, cap).round().astype(int))])


def _profile_groups(costs, P: _Plan):
    """(kind, sellers, reports) for every opponent profile, sellers sharing a vector
    grouped (``coalitions.opponent_profiles``, own entry aside)."""
    from .coalitions import opponent_profiles

    groups: dict[tuple, list] = {}
    vectors: dict[tuple, np.ndarray] = {}
    for i in _profile_sellers(costs, P.max_profile_sellers):
        for kind, v in opponent_profiles(costs, (P.floor, P.hi), [i]).items():
            key = (kind, v.tobytes())  # the own entry is replaced by the candidates
            groups.setdefault(key, []).append(int(i))
            vectors[key] = v
    return [(key[0], np.array(s), vectors[key]) for key, s in groups.items()]


def _audit_market(mech, costs, P: _Plan, rng, mc, settings, progress_bar):
    """Search every seller of one market, then its opponent profiles."""
    n, w = costs.size, P.width
    seeds = rng.integers(2**63, size=settings["n_draws"]) if mc else None

    def evaluator(reports, draws=None):
        if mc:
            return _MonteCarlo(mech, reports, costs, seeds[:draws])
        return _Exact(mech, reports, costs, rng)

    rand = np.clip(P.lo + w * (1.0 - rng.random((n, P.n_random))), P.floor, P.hi)  # (lo, hi]
    ev = evaluator(costs)
    parts = []
    cap = P.max_others if n <= _LARGE else min(P.max_others, 2)
    targeted = _profile_sellers(costs, P.max_profile_sellers)
    for a in range(0, n, _CHUNK):
        s = np.arange(a, min(a + _CHUNK, n))
        rows = np.nonzero(np.isin(s, targeted))[0]
        parts.append(_search(ev, s, costs[s], costs[_others(costs, s, cap)], P, rand[s],
                             settings["tol_terms"], True, rows))  # fmt: skip
        progress_bar.update(s.size)
    found = _join(parts)
    mk = _Market(
        costs=costs, truth=found.truth.mean(axis=0), top=found.top, bottom=found.bottom,
        profile_truth=np.full(n, np.inf), best_report=found.best_report.copy(),
        gain=found.best_gain.copy(), gain_se=found.best_se.copy(),
        profile=np.full(n, "market", dtype=object), best_group=np.zeros(n, dtype=int),
        type_gain=found.type_gain.copy(), type_pair=found.type_pair.copy(),
        type_profile=np.full(n, "market", dtype=object), mono=found.mono,
        type_tol=settings["tol_terms"][0] * w * found.cand_eps + settings["tol_terms"][1],
        truth_eps=found.truth_eps, payments=found.truth.mean(axis=0) + costs * found.truth_eps,
        groups=[costs], found=found, profile_counts={}, profile_candidates=0.0, skipped=[],
    )  # fmt: skip
    # the profiles' search only selects (the confirmation draws afresh): a quarter of the draws
    _search_profiles(mk, lambda v: evaluator(v, max(2, settings["n_draws"] // 4)), P, settings)
    if mc:
        mk.stats = _confirm(mech, mk, P, rng, settings)
    return mk


def _join(parts: list[_Found]) -> _Found:
    """The chunks of one market as one _Found."""
    if len(parts) == 1:
        parts[0].check = [parts[0].check]
        return parts[0]
    cat = {k: np.concatenate([getattr(p, k) for p in parts], axis=-1 if k == "truth" else 0)
           for k in ("sellers", "truth", "truth_eps", "best_report", "best_gain", "best_se",
                     "top", "bottom", "type_gain", "type_pair", "mono", "cand_eps")}  # fmt: skip
    out = _Found(**cat)  # type: ignore[arg-type]
    out.rand_gain = np.concatenate([p.rand_gain for p in parts])
    out.rand_se = np.concatenate([p.rand_se for p in parts])
    out.violations = [v for p in parts for v in p.violations]
    out.check = [p.check for p in parts]
    out.counts = parts[0].counts
    return out


def _search_profiles(mk: _Market, evaluator, P: _Plan, settings) -> None:
    """The opponent profiles: a gain there counts as a gain (ex-post IC is for every
    profile of the others' reports); exact evaluations add their truthful utilities
    to the IR check."""
    costs = mk.costs
    total = 0.0
    for kind, sellers, reports in _profile_groups(costs, P):
        values = np.unique(reports)
        if values.size == 1:  # floor, top, tied: one value, tried once
            oth = np.full((sellers.size, 1), values[0])
        else:
            oth = reports[_others(reports, sellers, P.max_others)]
        rows = None if costs.size <= _LARGE else np.empty(0, dtype=int)  # speed
        try:
            f = _search(evaluator(reports), sellers, costs[sellers], oth, P, None,
                        settings["tol_terms"], False, rows)  # fmt: skip
        except MarketSimError as err:
            mk.skipped.append(f"{kind}: {err}")
            continue
        mk.profile_counts[kind] = mk.profile_counts.get(kind, 0) + sellers.size
        total += sum(f.counts.values()) * sellers.size
        mk.groups.append(reports)
        g = len(mk.groups) - 1
        better = f.best_gain > mk.gain[sellers]
        upd = sellers[better]
        mk.gain[upd], mk.gain_se[upd] = f.best_gain[better], f.best_se[better]
        mk.best_report[upd], mk.profile[upd], mk.best_group[upd] = f.best_report[better], kind, g
        f_tol = settings["tol_terms"][0] * P.width * f.cand_eps + settings["tol_terms"][1]
        tb = f.type_gain - f_tol > mk.type_gain[sellers] - mk.type_tol[sellers]
        mk.type_gain[sellers[tb]], mk.type_pair[sellers[tb]] = f.type_gain[tb], f.type_pair[tb]
        mk.type_profile[sellers[tb]], mk.type_tol[sellers[tb]] = kind, f_tol[tb]
        if not mk.found.truth.shape[0] > 1:  # exact: IR under the profile too
            t = f.truth.mean(axis=0)
            mk.profile_truth[sellers] = np.minimum(mk.profile_truth[sellers], t)
    n_pairs = sum(mk.profile_counts.values())
    mk.profile_candidates = total / n_pairs if n_pairs else 0.0


# ---- Monte Carlo confirmation ---------------------------------------------------------
def _moments(x: np.ndarray) -> tuple[float, float, float, bool, int]:
    """(mean, SE, skewness, stable, D) of a sample: stable unless one draw carries more
    than ``_TAIL_SHARE`` of the sum of squared deviations."""
    D = x.size
    m = float(x.mean())
    d = x - m
    ss = float(np.sum(d * d))
    if ss <= 0:
        return m, 0.0, 0.0, True, D
    sd = math.sqrt(ss / (D - 1))
    skew = float(np.mean(d**3)) / (ss / D) ** 1.5
    return m, sd / math.sqrt(D), skew, float(np.max(d * d)) / ss <= _TAIL_SHARE, D


def _confirm(mech, mk: _Market, P: _Plan, rng, settings) -> dict:
    """Fresh draws for each seller's best report (against the truth, in the profile it
    was found in) and for its truthful utility at its cost, the top and the bottom;
    4x more draws for the sellers with an unstable quantity, up to ``n_confirm_max``.
    Returns quantity -> (n, 5) moments (``_moments``)."""
    costs = mk.costs
    n = costs.size
    names = ("gain", "truth", "top", "bottom")
    samples: dict[str, list] = {q: [np.empty(0)] * n for q in names}
    active, D = np.arange(n), settings["n_confirm"]
    for stage in range(_N_STAGES):
        new = _confirm_draws(mech, mk, P, active, rng.integers(2**63, size=D))
        for q in names:
            for k, i in enumerate(active):
                samples[q][i] = np.concatenate([samples[q][i], new[q][:, k]])
        stats = {q: [_moments(x) for x in samples[q]] for q in names}
        unsettled = _unsettled(stats, mk, P, settings)
        unstable = [i for i in active if unsettled[i]]
        size = samples["gain"][0].size if not unstable else samples["gain"][unstable[0]].size
        if not unstable or stage == _N_STAGES - 1 or size >= settings["n_confirm_max"]:
            break
        active, D = np.array(unstable), min(3 * size, settings["n_confirm_max"] - size)
    return {q: np.array(stats[q], dtype=float) for q in names}


def _unsettled(stats, mk: _Market, P: _Plan, settings) -> np.ndarray:
    """Sellers that need more draws: a quantity whose variance is unstable, or whose
    confidence bound still allows a gain (IR violation) beyond tol + the resolution
    (with this market's tol and scale, at most the audit's)."""
    st = {q: np.array(v, dtype=float) for q, v in stats.items()}
    eps_scale = float(mk.truth_eps.max(initial=0.0))
    tol = settings["tol_terms"][0] * P.width * eps_scale + settings["tol_terms"][1]
    margin = settings["resolution"] * (P.width * eps_scale if eps_scale > 0 else P.width)
    n_pairs = settings["n_pairs"]
    g = st["gain"]
    out = g[:, 3] == 0
    out |= g[:, 0] + _critical(g, _bonferroni_z(n_pairs * _N_STAGES), -1) * g[:, 1] > tol + margin
    z_ir = _bonferroni_z(3 * n_pairs * _N_STAGES)
    for q in ("truth", "top", "bottom"):
        x = st[q]
        out |= (x[:, 3] == 0) | (x[:, 0] - _critical(x, z_ir, +1) * x[:, 1] < -tol - margin)
    return out


def _confirm_draws(mech, mk: _Market, P: _Plan, sellers, seeds) -> dict:
    """One batch of fresh draws for ``sellers``: quantity -> (D, k) samples."""
    costs = mk.costs
    c = costs[sellers]
    truth = np.array([mech.run(costs, np.random.default_rng(int(s))).utilities(costs)[sellers]
                      for s in seeds])  # fmt: skip
    in_market = mk.best_group[sellers] == 0
    best = np.where(in_market, mk.best_report[sellers], c)
    cols = np.column_stack([np.full(c.size, P.floor), np.full(c.size, P.hi), best])
    U, E = _loop(mech, costs, costs, sellers, cols, list(seeds))
    gain = U[:, :, 2] - truth
    for k in np.nonzero(~in_market)[0]:
        i = sellers[k]
        pair = np.array([[costs[i], mk.best_report[i]]])
        Ug, _ = _loop(mech, mk.groups[mk.best_group[i]], costs, np.array([i]), pair, list(seeds))
        gain[:, k] = Ug[:, 0, 1] - Ug[:, 0, 0]
    return {
        "gain": gain,
        "truth": truth,
        "bottom": U[:, :, 0] + (c - P.floor) * E[:, :, 0],
        "top": U[:, :, 1] + (c - P.hi) * E[:, :, 1],
    }


# ---- verdicts -----------------------------------------------------------------------
def _tolerance(markets: list[_Market], P: _Plan, settings) -> tuple[float, float]:
    """(tol, eps_scale): tol = tol_factor x w x eps_scale + tol_abs (module doc)."""
    eps_scale = max(float(np.max(m.truth_eps)) for m in markets)
    tol_factor, tol_abs = settings["tol_terms"]
    return tol_factor * P.width * eps_scale + tol_abs, eps_scale


def _critical(stats: np.ndarray, z: float, side: int) -> np.ndarray:
    """k = z + max(0, -side x skew)(2 z^2 + 1) / (6 sqrt D): the studentized mean's
    upper quantile with its Edgeworth term (side +1: testing mean > tol; -1: mean < -tol)."""
    skew, D = stats[:, 2], np.maximum(stats[:, 4], 2)
    return z + np.maximum(0.0, -side * skew) * (2 * z * z + 1) / (6 * np.sqrt(D))


def _decide(markets: list[_Market], tol: float, mc: bool, n_pairs: int, margin: float) -> dict:
    """Per (market, seller): profitable / undecided gains and IR violations, and the
    detectable sizes (Monte Carlo; module doc)."""
    cat = {k: np.concatenate([getattr(m, k) for m in markets])
           for k in ("gain", "gain_se", "truth", "top", "bottom", "profile_truth")}  # fmt: skip
    if not mc:
        ir_low = np.minimum.reduce([cat["truth"], cat["top"], cat["bottom"], cat["profile_truth"]])
        return {
            "profitable": cat["gain"] > tol,
            "undecided": np.zeros(n_pairs, dtype=bool),
            "ir_bad": ir_low < -tol,
            "ir_undecided": np.zeros(n_pairs, dtype=bool),
            "ir_low": ir_low,
            "detectable_gain": tol,
            "detectable_ir": tol,
            "wide_gain": np.zeros(n_pairs, dtype=bool),
            "wide_ir": np.zeros(n_pairs, dtype=bool),
            "z": 0.0,
        }
    st = {q: np.concatenate([m.stats[q] for m in markets]) for q in markets[0].stats}
    z_gain = _bonferroni_z(n_pairs * _N_STAGES)
    g = st["gain"]
    k_gain = _critical(g, z_gain, +1)
    lower = g[:, 0] - k_gain * g[:, 1]
    stable = g[:, 3] > 0
    z_ir = _bonferroni_z(3 * n_pairs * _N_STAGES)
    ir_bad, ir_und, ir_det, ir_low = (np.zeros(n_pairs, dtype=bool), np.zeros(n_pairs, dtype=bool),
                                      [], np.full(n_pairs, np.inf))  # fmt: skip
    wide_ir = np.zeros(n_pairs, dtype=bool)
    for q in ("truth", "top", "bottom"):
        k_ir = _critical(st[q], z_ir, -1)
        upper = st[q][:, 0] + k_ir * st[q][:, 1]
        ok = st[q][:, 3] > 0
        ir_bad |= ok & (upper < -tol)
        ir_und |= ~ok & (upper < -tol)
        # the data allow a violation beyond the resolution: the lower bound is below it
        wide_ir |= st[q][:, 0] - _critical(st[q], z_ir, +1) * st[q][:, 1] < -tol - margin
        ir_det.append((k_ir + _Z_POWER) * st[q][:, 1])
        ir_low = np.minimum(ir_low, st[q][:, 0])
    return {
        "profitable": stable & (lower > tol),
        "undecided": ~stable & (lower > tol),
        "ir_bad": ir_bad,
        "ir_undecided": ir_und,
        "ir_low": ir_low,
        "gain": g[:, 0],
        "gain_se": g[:, 1],
        "truth": st["truth"][:, 0],
        "top": st["top"][:, 0],
        "bottom": st["bottom"][:, 0],
        "wide_gain": g[:, 0] + _critical(g, z_gain, -1) * g[:, 1] > tol + margin,
        "wide_ir": wide_ir,
        "detectable_gain": tol + float(np.median((k_gain + _Z_POWER) * g[:, 1])),
        "detectable_gain_max": tol + float(np.max((k_gain + _Z_POWER) * g[:, 1])),
        "detectable_ir": tol + float(np.median(np.concatenate(ir_det))),
        "z": z_gain,
        "draws_max": int(max(st[q][:, 4].max() for q in st)),
    }


def _verdicts(d: dict, markets, violations, tol, margin, settings, mc, deterministic) -> dict:
    """IC and IR verdicts with their reasons and witnesses (module doc)."""
    n_per = markets[0].costs.size
    gain = d.get("gain", np.concatenate([m.gain for m in markets]))
    type_excess = np.concatenate([m.type_gain - m.type_tol for m in markets])
    type_gain = np.concatenate([m.type_gain for m in markets])
    residual, res_tol = _residual_excess(markets, settings["tol_terms"], settings["width"])
    out: dict = {"verdict_reason": None, "ir_reason": None}
    i_best = int(np.argmax(gain))
    out["verdict"], out["witness"] = "ic", _witness(markets, i_best, gain[i_best], n_per, "seller")
    if d["profitable"].any():
        i = int(np.argmax(np.where(d["profitable"], gain, -np.inf)))
        out["verdict"], out["witness"] = "not_ic", _witness(markets, i, gain[i], n_per, "seller")
        out["verdict_reason"] = "a confirmed profitable misreport"
    elif not mc and type_excess.max() > 0:
        i = int(np.argmax(type_excess))
        out["verdict"], out["witness"] = "not_ic", _witness(markets, i, type_gain[i], n_per, "type")
        out["verdict_reason"] = "a type gain between adjacent reports"
    elif deterministic and violations:
        m, i, low, high, e_low, e_high = max(
            violations, key=lambda v: (v[3] - v[2]) * (v[5] - v[4])
        )
        out["verdict"] = "not_ic"
        out["witness"] = {"market": m, "seller": i, "cost": low, "report": high,
                          "gain": (high - low) * (e_high - e_low), "se": 0.0,
                          "profile": "market", "kind": "monotone"}  # fmt: skip
        out["verdict_reason"] = (
            f"eps rises with the own report (seller {i} of market {m}: {e_low:.6g} at "
            f"{low:.6g}, {e_high:.6g} at {high:.6g}); no payment makes a rising allocation "
            "truthful (Myerson's lemma): a seller of cost one of the two gains by reporting the "
            f"other, the two gains summing to {(high - low) * (e_high - e_low):.3g}"
        )
    elif deterministic and residual > res_tol:
        i = int(np.argmax(type_gain))
        out["verdict"], out["witness"] = "not_ic", _witness(markets, i, type_gain[i], n_per, "type")
        out["verdict_reason"] = (
            f"Myerson's payment identity fails by {residual:.3g} > {res_tol:.3g} (tol at the "
            "largest eps of that seller's reports) at the reports tried "
            "(no monotone allocation explains the payments: a proof of non-IC; the best "
            "adjacent type gain is shown)"
        )
    elif mc and d["undecided"].any():
        out["verdict"] = "inconclusive"
        out["verdict_reason"] = (
            f"{int(d['undecided'].sum())} sellers' best reports would be confirmed "
            f"profitable but their payments' variance did not settle in "
            f"{settings['n_confirm_max']} draws (a heavy tail)"
        )
    elif mc and d["wide_gain"].any():
        out["verdict"] = "inconclusive"
        out["verdict_reason"] = (
            f"no gain confirmed, but at {int(d['wide_gain'].sum())} sellers' best reports the "
            f"draws allow a gain above tol + resolution {settings['resolution']:g} x w x "
            f"eps_scale = {tol + margin:.3g}; more draws (n_confirm) are needed"
        )
    if d["ir_bad"].any():
        out["ir_verdict"] = "not_ir"
    elif mc and d["ir_undecided"].any():
        out["ir_verdict"] = "inconclusive"
        out["ir_reason"] = (
            f"{int(d['ir_undecided'].sum())} sellers' utility would be confirmed below -tol but "
            "its variance did not settle (a heavy tail)"
        )
    elif mc and d["wide_ir"].any():
        out["ir_verdict"] = "inconclusive"
        out["ir_reason"] = (
            f"no IR violation confirmed, but for {int(d['wide_ir'].sum())} sellers the draws "
            f"allow a truthful utility below -{tol + margin:.3g} (at the drawn cost, the top or "
            "the bottom); more draws (n_confirm) are needed"
        )
    else:
        out["ir_verdict"] = "ir"
    out["identity_residual_tol"] = res_tol if math.isfinite(res_tol) else None
    t = int(np.argmax(type_excess))
    out["type_gain_max"] = None if mc else float(type_gain[t])
    out["type_gain_tol"] = None if mc else float(type_gain[t] - type_excess[t])
    return out


def _residual_excess(markets, tol_terms, width) -> tuple[float, float]:
    """The identity residual of the seller where it most exceeds its tolerance (tol at
    the largest eps among its reports), and that tolerance."""
    best = (0.0, math.inf)
    for mk in markets:
        off = 0
        for ch in mk.found.check or []:
            if ch is None:
                continue
            size = ch.residuals.size
            t = tol_terms[0] * width * mk.found.cand_eps[off : off + size] + tol_terms[1]
            j = int(np.argmax(ch.residuals - t))
            if ch.residuals[j] - t[j] > best[0] - best[1]:
                best = (float(ch.residuals[j]), float(t[j]))
            off += size
    return best


def _witness(markets, flat: int, gain: float, n_per: int, kind: str) -> dict:
    m, i = divmod(flat, n_per)
    mk = markets[m]
    if kind == "type":
        cost, report = (float(v) for v in mk.type_pair[i])
        profile = str(mk.type_profile[i])
    else:
        cost, report, profile = float(mk.costs[i]), float(mk.best_report[i]), str(mk.profile[i])
    return {"market": m, "seller": i, "cost": cost, "report": report, "gain": float(gain),
            "se": float(mk.gain_se[i]) if kind == "seller" else 0.0, "profile": profile,
            "kind": kind}  # fmt: skip


def _table(markets: list[_Market], d: dict, groups):
    """One row per market x seller (``COLUMNS``, and ``group`` for a population)."""
    import pandas as pd

    rows = []
    for m, mk in enumerate(markets):
        n = mk.costs.size
        rows.append(pd.DataFrame({
            "market": m, "seller": np.arange(n), "cost": mk.costs, "truthful_utility": mk.truth,
            "utility_at_top": mk.top, "utility_at_bottom": mk.bottom,
            "best_report": mk.best_report, "max_gain": mk.gain, "profile": mk.profile,
            "monotone": mk.mono, "gain_se": mk.gain_se,
        }))  # fmt: skip
    table = pd.concat(rows, ignore_index=True)
    for col in ("gain", "gain_se", "truth", "top", "bottom"):
        if col in d:  # Monte Carlo: the confirmation's estimates
            name = {"gain": "max_gain", "truth": "truthful_utility", "top": "utility_at_top",
                    "bottom": "utility_at_bottom"}.get(col, col)  # fmt: skip
            table[name] = d[col]
    if "gain" in d:
        table["max_gain"] = np.maximum(table["max_gain"].to_numpy(), 0.0)
        table.loc[table["max_gain"] <= 0, "best_report"] = table["cost"]
    table["profitable"] = d["profitable"]
    cols = list(COLUMNS)
    if groups is not None:
        table["group"] = np.concatenate(groups)
        cols.insert(2, "group")
    return table[cols]


def _bootstrap_ci(G: np.ndarray, rng, n_boot: int) -> tuple[float, float]:
    """Percentile bootstrap CI (95%) of the mean of G over resampled markets."""
    if G.size < 2:
        return (math.nan, math.nan)
    idx = rng.integers(0, G.size, size=(int(n_boot), G.size))
    means = G[idx].mean(axis=1)
    a = (1 - CONFIDENCE) / 2
    return float(np.quantile(means, a)), float(np.quantile(means, 1 - a))


# ---- the audit ----------------------------------------------------------------------
@dataclass
class _Source:
    """Where the markets come from: a cost law (one class), a Population, or given costs."""

    spec: str
    dist: Any  # the cost law of a plain source (None for a population)
    lo: float
    hi: float
    n_sellers: int
    population: Any = None
    given: np.ndarray | None = None
    given_data: list | None = None  # with ``given``: each market's (X, y)

    def draw(self, m: int, rng):
        """(costs, class of each seller or None, data or None) of market m."""
        if self.given is not None:
            return self.given[m], None, (None if self.given_data is None else self.given_data[m])
        if self.population is not None:
            mk = self.population.sample(rng)
            return np.asarray(mk.costs, dtype=float), np.asarray(mk.group), mk.data
        return self.dist.sample(self.n_sellers, rng), None, None


def _source(dist, n_sellers, n_markets, costs, data=None) -> _Source:
    """The cost law or Population (``market_sim.population.as_population``), checked;
    ``data``: each given market's (X, y) (with ``costs`` only)."""
    pop = None
    if not _is_plain_law(dist):
        from .population import as_population

        pop = as_population(dist, n_sellers=n_sellers)
        n_sellers, law = pop.n_sellers, None
        lo = min(float(v.support[0]) for v in pop.laws)
        hi = max(float(v.support[1]) for v in pop.laws)
        spec = pop.spec
    else:
        law = as_distribution(dist)
        if n_sellers is None:
            raise MarketSimError("n_sellers is needed with a cost law (or pass a Population)")
        lo, hi = (float(v) for v in law.support)
        spec = law.spec
    n_sellers = check_int("n_sellers", n_sellers, 1)
    if not (math.isfinite(lo) and math.isfinite(hi)):
        raise MarketSimError(f"the audit needs a bounded support (got [{lo}, {hi}])")
    given = None if costs is None else _given_costs(costs, n_markets, n_sellers, lo, hi)
    given_data = None if data is None else _given_data(data, given, n_sellers)
    return _Source(spec, law, lo, hi, n_sellers, pop, given, given_data)


def _given_data(data, given, n_sellers: int) -> list:
    """Each given market's (X, y), one row per seller (``audit(..., costs=, data=)``)."""
    if given is None:
        raise MarketSimError("data= needs costs= (the markets whose sellers hold the data)")
    data = list(data)
    if len(data) != len(given):
        raise MarketSimError(f"data: {len(data)} markets' data for {len(given)} markets")
    for k, pair in enumerate(data):
        if not (isinstance(pair, tuple | list) and len(pair) == 2):
            raise MarketSimError(f"data: market {k}'s data is not a pair (X, y)")
        if len(pair[0]) != n_sellers or len(pair[1]) != n_sellers:
            raise MarketSimError(f"data: market {k} needs one row per seller ({n_sellers})")
    return data


def _is_plain_law(dist) -> bool:
    """A cost law (spec or CostDistribution), not a population (a Population, a spec
    with counts ``70*uniform:0:1+...`` or a list of (law, count) classes)."""
    from .population import Population

    if isinstance(dist, str):
        return "*" not in dist
    return not isinstance(dist, Population | list | tuple)


def _build(mechanism, src: _Source, context):
    """Built from the cost law, or from the population: per-seller laws to the mechanisms
    that take them (offline, online, pay-as-bid), the pooled law to the others."""
    if src.population is not None:
        return as_mechanism(mechanism, population=src.population, **context)
    return as_mechanism(mechanism, dist=src.dist, n_sellers=src.n_sellers, **context)


def _mechanism(mechanism, src: _Source, context):
    """The mechanism, refusing one that needs data on a source without data."""
    mech = _build(mechanism, src, context)
    if getattr(mech, "needs_data", False) and src.given_data is None:
        if src.population is None or not getattr(src.population, "has_data", False):
            raise MarketSimError(
                f"{mechanism_name(mech)} needs the sellers' data: audit it on a population "
                'with data (e.g. --population "100*uniform:0:1;data=synthetic")'
            )
    return mech


def _settings(locals_: dict) -> dict:
    """The keyword settings of ``audit``, checked."""
    s = dict(locals_)
    for name, least in (("n_grid", 2), ("n_random", 1), ("refine_iter", 0), ("n_starts", 1),
                        ("n_sections", 1), ("n_draws", 2), ("n_confirm", 2), ("n_boot", 1),
                        ("max_others", 0), ("n_jumps", 0), ("max_profile_sellers", 0)):  # fmt: skip
        label = "n_random (random reports per seller)" if name == "n_random" else name
        s[name] = check_int(label, s[name], least)
    s["n_confirm_max"] = max(check_int("n_confirm_max", s["n_confirm_max"], 2), s["n_confirm"])
    for name in ("tol_factor", "tol_abs", "resolution"):
        v = s[name]
        if not (isinstance(v, (int, float)) and math.isfinite(v) and v >= 0):
            raise MarketSimError(f"{name} must be a finite number >= 0 (got {v!r})")
    s["tol_terms"] = (float(s["tol_factor"]), float(s["tol_abs"]))
    return s


def audit(
    mechanism,
    dist,
    n_sellers: int | None,
    n_markets: int,
    rng: np.random.Generator,
    *,
    n_grid: int = 33,
    n_random: int = 32,
    refine: bool = True,
    refine_iter: int = 8,
    n_starts: int = 2,
    n_sections: int = 4,
    tol_factor: float = 1e-6,
    tol_abs: float = 1e-9,
    max_others: int = 16,
    n_jumps: int = 2,
    max_profile_sellers: int = 32,
    n_draws: int = 16,
    n_confirm: int = 256,
    n_confirm_max: int = 4096,
    resolution: float = 0.01,
    n_boot: int = 2000,
    coalition_size: int | None = None,
    progress: bool | str = False,
    costs=None,
    workers: int = 1,
    executor: str = "local",
    address: str | None = None,
    on_market=None,
    data=None,
    **context,
) -> AuditResult:
    """IC / IR / monotonicity audit of ``mechanism`` (a name, spec, class, instance or
    object with ``outcome``) on ``n_markets`` markets drawn with ``rng`` from ``dist``:
    a cost law (``n_sellers`` sellers) or a Population (``market_sim.population``;
    ``n_sellers`` None or its size; a data-needing mechanism is built with each
    market's data).  ``context`` (mu, sigma, gamma, privacy, ...) goes to the
    mechanism's construction.  The search, the profiles, the tolerance, the verdicts
    and the statistics: the module doc.  ``coalition_size`` k >= 2 also searches joint
    misreports of up to k sellers (``group_verdict``).  ``costs``, an (n_markets,
    n_sellers) array, audits these markets instead of drawing them (how
    ``market_sim.compare`` audits every mechanism on the same markets); ``data``, with
    it, each market's (X, y) for a data-needing mechanism.  ``on_market``, a callable,
    is called with the number of markets searched, 0 to ``n_markets``
    (``market_sim.estimates.FirstMarketEstimate`` times the first).  ``workers``,
    ``executor``, ``address``: where the markets are searched, one task each
    (``market_sim.execution``; the same result on any of them)."""
    check_executor(workers, executor, address)
    work = audit_work(mechanism, dist, n_sellers, n_markets, rng, settings=_settings(
        {k: v for k, v in locals().items() if k in _SETTINGS}), costs=costs, data=data,
        coalition_size=coalition_size, context=context)  # fmt: skip
    where: dict[str, Any] = dict(workers=workers, executor=executor, address=address)
    label = progress if isinstance(progress, str) else "audit"
    markets = run_jobs(work.jobs(), progress=label if progress else False,
                       preload=_PRELOAD, on_done=on_market, **where)  # fmt: skip
    return work.finish(markets, progress=bool(progress), **where)


_PRELOAD = ("market_sim.auditing",)


@dataclass
class AuditWork:
    """An audit split into tasks: the markets drawn, the mechanism per market, the
    search plan and the root seed of the tasks' streams.  ``jobs()`` searches one
    market each (market m with ``job_rng(root, m)``); ``finish(markets)`` joins their
    results into the AuditResult (tolerance, verdicts, bootstrap, coalitions)."""

    mechanism: Any
    mech: Any
    src: _Source
    settings: dict
    rng: np.random.Generator
    mechs: list
    costs: list
    groups: list | None
    root: int
    coalition_size: int | None

    def jobs(self, prefix: str = "") -> list[Job]:
        s = {k: v for k, v in self.settings.items() if k != "rng"}
        mc = _is_monte_carlo(self.mech)
        shared: dict[int, Shared] = {}  # one copy of each mechanism a worker
        mechs = [shared.setdefault(id(mech), Shared(mech)) for mech in self.mechs]
        plan, settings = Shared(s["plan"]), Shared(s)
        return [
            Job(f"{prefix}audit-{m}", _audit_market_job,
                (mechs[m], self.costs[m], plan, self.root, m, mc, settings))
            for m in range(len(self.costs))
        ]  # fmt: skip

    def finish(self, markets: list, *, progress: bool = False, **where) -> AuditResult:
        result = _result(self.mechanism, self.mech, self.mechs, self.src, markets,
                         self.groups, self.rng, self.settings)  # fmt: skip
        if self.coalition_size is not None:
            result.summary.update(_coalitions(self.mechs, markets, self.coalition_size,
                                              self.root, result.summary["tol"],
                                              self.settings, progress, where))  # fmt: skip
        result.summary["statement"] = result.statement()
        return result


def audit_work(mechanism, dist, n_sellers, n_markets, rng, *, settings, costs=None,
               data=None, coalition_size=None, context=None) -> AuditWork:  # fmt: skip
    """The checked audit, its markets drawn with ``rng`` and split into tasks (see
    :class:`AuditWork`; ``settings`` from ``_settings``)."""
    if not isinstance(rng, np.random.Generator):
        raise MarketSimError("rng must be a numpy.random.Generator")
    n_markets = check_int("n_markets", n_markets, 1)
    src = _source(dist, n_sellers, n_markets, costs, data)
    coalition_size = _coalition_size(coalition_size, src.n_sellers)
    mech = _mechanism(mechanism, src, context or {})
    drawn, groups, mechs = _draw(mech, src, n_markets, rng, settings)
    root = int(rng.integers(2**63))
    return AuditWork(mechanism, mech, src, settings, rng, mechs, drawn, groups, root,
                     coalition_size)  # fmt: skip


def audit_settings(**overrides) -> dict:
    """The audit's search settings: its defaults with ``overrides``, checked."""
    import inspect

    defaults = {k: p.default for k, p in inspect.signature(audit).parameters.items()}
    return _settings({k: overrides.get(k, defaults[k]) for k in _SETTINGS})


_SETTINGS = (
    "n_grid n_random refine refine_iter n_starts n_sections tol_factor tol_abs max_others "
    "n_jumps max_profile_sellers n_draws n_confirm n_confirm_max resolution n_boot"
).split()


def _coalition_size(k, n_sellers):
    if k is None:
        return None
    k = check_int("coalition size", k, 2)
    if k > n_sellers:
        raise MarketSimError(f"coalition size {k} is larger than the market ({n_sellers} sellers)")
    return k


def _plan(src: _Source, settings, floor=None) -> _Plan:
    return _Plan(src.lo, src.hi, src.lo if floor is None else floor, settings["n_grid"],
                 settings["n_random"], bool(settings["refine"]), settings["n_starts"],
                 settings["n_sections"], settings["refine_iter"], settings["max_others"],
                 settings["n_jumps"], settings["max_profile_sellers"])  # fmt: skip


def _draw(mech, src: _Source, n_markets, rng, settings):
    """Every market's costs, classes and mechanism (a data-needing mechanism gets the
    market's data), drawn in order with ``rng``; then the lowest report with an
    outcome (on the first market) and the search plan, into ``settings``."""
    mc = _is_monte_carlo(mech)
    settings["n_pairs"] = n_markets * src.n_sellers
    drawn, groups, mechs = [], [], []
    for m in range(n_markets):
        costs, group, data = src.draw(m, rng)
        drawn.append(costs)
        groups.append(group)
        mechs.append(mech.with_data(*data) if getattr(mech, "needs_data", False) else mech)
    floor, floor_note = _floor(_unchecked(mechs[0]), drawn[0], _plan(src, settings), rng, mc)
    settings["plan"], settings["floor_note"] = _plan(src, settings, floor), floor_note
    return drawn, (None if groups[0] is None else groups), mechs


class _NoBar:
    def update(self, n: int) -> None:
        pass


def _audit_market_job(mech, costs, plan: _Plan, root: int, m: int, mc: bool, settings):
    """Task ``m`` of an audit: search market m with its own stream ``job_rng(root, m)``."""
    return _audit_market(_unchecked(mech), costs, plan, job_rng(root, m), mc, settings, _NoBar())


def _is_monte_carlo(mech) -> bool:
    return bool(getattr(mech, "randomized", False)) and not (
        _overrides(mech, "deviations") or _overrides(mech, "deviation_utilities")
    )


def _unchecked(mech):
    """``myerson_mechanism`` without its raise on a non-monotone rule (gains are still
    measured; the violations are listed by the audit)."""
    from .mechanisms.myerson import MyersonMechanism

    return mech.unchecked() if isinstance(mech, MyersonMechanism) else mech


def _result(mechanism, mech, mechs, src, markets, groups, rng, settings) -> AuditResult:
    """Tolerance, verdicts, the table and the summary."""
    P: _Plan = settings["plan"]
    mc = _is_monte_carlo(mech)
    randomized = bool(getattr(mech, "randomized", False))
    n_pairs = len(markets) * src.n_sellers
    tol, eps_scale = _tolerance(markets, P, settings)
    scale = P.width * eps_scale if eps_scale > 0 else P.width
    margin = settings["resolution"] * scale
    d = _decide(markets, tol, mc, n_pairs, margin)
    d["tol"] = tol
    checks = [ch for mk in markets for ch in (mk.found.check or []) if ch is not None]
    settings["width"] = P.width
    violations = [(m, int(r[0]), *r[1:]) for m, mk in enumerate(markets)
                  for r in mk.found.violations]  # fmt: skip
    n_own = 0
    for m, mk in enumerate(markets):
        own = getattr(mechs[m], "violations", None)
        if callable(own):  # myerson_mechanism's own list
            listed = [(m, x.seller, x.low, x.high, x.eps_low, x.eps_high) for x in own(mk.costs)]
            violations += listed
            n_own += len(listed)
    v = _verdicts(d, markets, violations, tol, margin, settings, mc, not randomized)
    if mc:
        v["witness"]["se"] = float(d["gain_se"][v["witness"]["market"] * src.n_sellers
                                               + v["witness"]["seller"]])  # fmt: skip
    table = _table(markets, d, groups)
    summary = _summary(mechanism, mech, src, markets, table, d, v, tol, eps_scale, settings, rng)
    summary.update(_certificate(mechs[0], checks, summary["n_candidates"]))
    if groups is not None:
        summary["by_class"] = _by_class(table, src, d)
    summary["monotonicity_violations"] = len(violations)
    summary["myerson_monotonicity_violations"] = n_own
    return AuditResult(table, summary, violations)


def _summary(mechanism, mech, src, markets, table, d, v, tol, eps_scale, settings, rng) -> dict:
    """The numbers of summary.json (module doc)."""
    P: _Plan = settings["plan"]
    mc = _is_monte_carlo(mech)
    randomized = bool(getattr(mech, "randomized", False))
    n_pairs = table.shape[0]
    gains = table["max_gain"].to_numpy()
    G = table.groupby("market")["max_gain"].max().to_numpy()
    ci = _bootstrap_ci(G, rng, settings["n_boot"])
    RG = np.concatenate([mk.found.rand_gain for mk in markets], axis=0)
    if mc:
        RS = np.concatenate([mk.found.rand_se for mk in markets], axis=0)
        n_prof_random = int(np.sum(RG - _bonferroni_z(RG.size) * RS > tol))
    else:
        n_prof_random = int(np.sum(RG > tol))
    counts = dict(markets[0].found.counts)
    counts["jumps"] = float(np.mean([mk.found.counts.get("jumps", 0) for mk in markets]))
    counts["local"] = float(np.mean([mk.found.counts.get("local", 0) for mk in markets]))
    profiles: dict[str, int] = {}
    for mk in markets:
        for k, n in mk.profile_counts.items():
            profiles[k] = profiles.get(k, 0) + n
    ir_low = d["ir_low"]
    ir_where = _ir_where(table, d, markets)
    by_kind = {k: int(round(val)) for k, val in counts.items()}
    checks = [ch for mk in markets for ch in (mk.found.check or []) if ch is not None]
    s = {
        "mechanism": mechanism if isinstance(mechanism, str) else mechanism_name(mech),
        "dist": src.spec,
        "n_sellers": src.n_sellers,
        "n_markets": len(markets),
        "seed": None,  # the CLI records its --seed here
        "n_grid": P.n_grid,
        "n_random": P.n_random,
        "n_probes": 2 * int(_PROBES.size),
        "refine": P.refine,
        "n_starts": P.n_starts,
        "n_sections": P.n_sections,
        "refine_iter": P.n_iter,
        "candidates_by_kind": by_kind,
        "n_candidates": int(round(1 + sum(counts.values()))),
        "floor_report": P.floor,
        "floor_note": settings.get("floor_note"),
        "profiles_by_kind": profiles,
        "n_profiles": int(sum(profiles.values())),
        "n_profile_candidates": int(round(np.mean([mk.profile_candidates for mk in markets]))),
        "profiles_skipped": [x for mk in markets for x in mk.skipped],
        "randomized": bool(getattr(mech, "randomized", False)),
        "monte_carlo": mc,
        "n_draws": settings["n_draws"] if mc else None,
        "n_confirm": settings["n_confirm"] if mc else None,
        "n_confirm_max": settings["n_confirm_max"] if mc else None,
        "confirm_draws_max": d.get("draws_max"),
        "confidence": CONFIDENCE,
        "margin_z": d["z"],
        "mean_payment": float(np.mean([mk.payments.mean() for mk in markets])),
        "eps_scale": eps_scale,
        "incentive_scale": P.width * eps_scale,
        "tol_factor": settings["tol_factor"],
        "tol_abs": settings["tol_abs"],
        "tol": tol,
        "resolution": settings["resolution"],
        "max_gain": float(gains.max()),
        "max_gain_se": float(table["gain_se"].iloc[int(gains.argmax())]),
        "mean_max_gain": float(G.mean()),
        "max_gain_ci_low": ci[0],
        "max_gain_ci_high": ci[1],
        "max_gain_ci_method": "percentile bootstrap over markets",
        "share_profitable": float(np.mean(d["profitable"])),
        "n_profitable": int(d["profitable"].sum()),
        "n_undecided": int(d["undecided"].sum()),
        "n_random_reports": int(RG.size),
        "n_profitable_random": n_prof_random,
        "profitable_share_upper": clopper_pearson_upper(n_prof_random, RG.size),
        "detectable_gain": d["detectable_gain"] if randomized else None,
        "detectable_gain_max": d.get("detectable_gain_max") if randomized else None,
        "detectable_ir_violation": d["detectable_ir"] if randomized else None,
        "ir_violations": int(d["ir_bad"].sum()),
        "ir_share_upper": clopper_pearson_upper(int(d["ir_bad"].sum()), n_pairs),
        "min_truthful_utility": float(table["truthful_utility"].min()),
        "min_utility_top": float(table["utility_at_top"].min()),
        "min_utility_bottom": float(table["utility_at_bottom"].min()),
        "min_utility_profiles": None
        if mc
        else float(min(mk.profile_truth.min() for mk in markets)),
        "min_ir_utility": float(ir_low.min()),
        "ir_where": ir_where,
        "monotonicity_violations": 0,
        "identity_residual_max": None,
        "certified": None,
        "certificate_note": None,
        "coalition_size": None,
        "coalition_max_gain": None,
        "group_verdict": None,
        "coalition_witness": None,
        "by_class": None,
    }
    s.update(v)
    if checks:
        s["identity_residual_max"] = max(ch.identity_residual_max for ch in checks)
        s["identity_residual_rel"] = max(ch.identity_residual_rel for ch in checks)
        s["myerson_monotone"] = all(ch.monotone for ch in checks)
    return s


def _ir_where(table, d, markets) -> str:
    """Where the least IR utility is: at the drawn cost, the top, the bottom, a profile."""
    low = float(d["ir_low"].min())
    for col, label in (("truthful_utility", "at the drawn cost"),
                       ("utility_at_top", "at the top of the support"),
                       ("utility_at_bottom", "at the bottom of the support")):  # fmt: skip
        if float(table[col].min()) <= low:
            return label
    return "in an opponent profile"


def _certificate(mech, checks, n_reports) -> dict:
    """``certified`` (the library's offline and online allocations only) or the note
    of ``myerson_mechanism`` (docs/audit-certification.md)."""
    from .certification import certificate_note, certification

    if not checks:
        return {}
    verdicts = {certification(mech, ch) for ch in checks}
    return {
        "certified": verdicts.pop() if len(verdicts) == 1 else None,
        "certificate_note": certificate_note(mech, n_reports),
    }


def _by_class(table, src: _Source, d) -> list[dict]:
    """Gains and IR per class of a population (the ``group`` column)."""
    laws = getattr(src.population, "laws", ())
    rows = []
    for g, part in table.groupby("group"):
        idx = part.index.to_numpy()
        law = laws[int(g)] if int(g) < len(laws) else None
        rows.append({
            "group": int(g),
            "law": getattr(law, "spec", str(law)),
            "n": int(len(part)),
            "max_gain": float(part["max_gain"].max()),
            "n_profitable": int(d["profitable"][idx].sum()),
            "ir_violations": int(d["ir_bad"][idx].sum()),
            "ir_violations_at_cost": int((part["truthful_utility"] < -d["tol"]).sum()),
            "min_truthful_utility": float(part["truthful_utility"].min()),
        })  # fmt: skip
    return rows


def _given_costs(costs, n_markets: int, n_sellers: int, lo: float, hi: float) -> np.ndarray:
    """The markets to audit, checked: (n_markets, n_sellers) finite costs in [lo, hi]."""
    try:
        c = np.array(costs, dtype=float)
    except (TypeError, ValueError):
        raise MarketSimError("costs must be an array of numbers") from None
    if c.shape != (n_markets, n_sellers):
        raise MarketSimError(
            f"costs must have shape (n_markets, n_sellers) = ({n_markets}, {n_sellers}); "
            f"got {c.shape}"
        )
    if not np.all(np.isfinite(c)) or c.min() < lo or c.max() > hi:
        raise MarketSimError(f"costs must be finite and within the support [{lo:g}, {hi:g}]")
    return c


def _coalitions(mechs, markets, k, root, tol, settings, progress, where) -> dict:
    """``coalition_search`` in every market, in the drawn market and the opponent
    profiles (after the unilateral search, so that the tolerance is known), one task
    per market with its own stream ``job_rng(root, ("coalition", m))``; the summary
    keys of the largest coalition gain."""
    P: _Plan = settings["plan"]
    jobs = [Job(f"coalition-{m}", _coalition_job,
                (mechs[m], mk.costs, k, root, m, tol, (P.lo, P.hi), P.floor))
            for m, mk in enumerate(markets)]  # fmt: skip
    found = run_jobs(jobs, progress="coalitions" if progress else False, preload=_PRELOAD,
                     **where)  # fmt: skip
    best, best_m, max_gain, group_ic, tried, reports = None, None, -np.inf, True, 0, 0
    profiles = 0
    for m, res in enumerate(found):
        tried += res.n_coalitions
        reports += res.n_joint_reports
        profiles += res.n_profiles
        group_ic &= res.group_ic
        max_gain = max(max_gain, res.max_gain)
        w = res.witness
        if w is not None and (best is None or w.gain > best.gain):
            best, best_m = w, m
    witness = None if best is None else {"market": best_m, **best.as_dict()}
    return {
        "coalition_size": k,
        "coalition_max_gain": float(max(max_gain, 0.0)),
        "group_verdict": "ic" if group_ic else "not_ic",
        "coalition_witness": witness,
        "coalitions_tried": tried,
        "coalition_reports_tried": reports,
        "coalition_profiles_tried": profiles,
    }


def _coalition_job(mech, costs, k, root, m, tol, support, floor):
    from .coalitions import coalition_search

    return coalition_search(_unchecked(mech), costs, k, job_rng(root, ("coalition", m)),
                            tol=tol, support=support, floor=floor, profiles=True)  # fmt: skip


def plot(result: AuditResult, path) -> None:
    """Three panels: the distribution of the sellers' largest gains (tolerance dashed),
    the profitable reports found against the true cost, and the IR margin (truthful
    utility against the cost, -tol dashed)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import MaxNLocator

    t, s = result.table, result.summary
    tol = max(s["tol"], 1e-300)
    fig, axes = plt.subplots(1, 3, figsize=(15, 4.5))
    ax = axes[0]
    g = t["max_gain"].to_numpy()
    pos = g[g > 0]
    if pos.size:
        bins = np.geomspace(max(pos.min(), tol * 1e-3), max(pos.max(), tol * 10), 40)
        ax.hist(np.clip(pos, bins[0], None), bins=bins, color="tab:blue")
        ax.set_xscale("log")
        ax.yaxis.set_major_locator(MaxNLocator(integer=True))  # counts of sellers
        ax.axvline(s["tol"], color="k", ls="--", lw=1, label=f"tolerance {s['tol']:.2g}")
        ax.legend(loc="upper right")
    else:
        ax.text(0.5, 0.5, "no seller gains anything", transform=ax.transAxes, ha="center")
    ax.set(
        xlabel="largest gain of a misreport (> 0)",
        ylabel="sellers",
        title=f"gains: {int((g == 0).sum())} sellers with none, {s['n_profitable']} > tol",
    )
    ax = axes[1]
    prof = t[t["profitable"]]
    lo = float(t["cost"].min())
    hi = float(t["cost"].max())
    ax.plot([lo, hi], [lo, hi], color="0.6", lw=1, label="truth")
    if len(prof):
        sc = ax.scatter(prof["cost"], prof["best_report"], c=prof["max_gain"], cmap="viridis", s=16)
        fig.colorbar(sc, ax=ax, label="gain")
    else:
        ax.text(0.5, 0.5, "no profitable misreport found", transform=ax.transAxes, ha="center")
    w = s.get("coalition_witness")
    if w:
        ax.scatter(w["costs"], w["reports"], marker="*", s=140, color="tab:red",
                   label=f"coalition, gain {w['gain']:.2g}")  # fmt: skip
    ax.set(
        xlabel="seller's true cost",
        ylabel="profitable report found",
        title=f"verdict {s['verdict']} (max gain {s['max_gain']:.2g})",
    )
    ax.legend(loc="upper left")
    ax = axes[2]
    ax.scatter(
        t["cost"],
        t["truthful_utility"],
        s=10,
        c=np.where(t["truthful_utility"] < -s["tol"], "tab:red", "tab:blue"),
    )
    ax.axhline(-s["tol"], color="k", ls="--", lw=1, label="-tolerance")
    ax.set(
        xlabel="seller's true cost",
        ylabel="truthful utility (IR margin)",
        title=f"IR: {s['ir_verdict']} ({s['ir_violations']} below -tol)",
    )
    ax.legend(loc="lower left")
    fig.suptitle(f"audit of {s['mechanism']} on {s['dist']}: {s['n_markets']} x {s['n_sellers']}")
    fig.tight_layout()

    save_png(fig, path, dpi=90)


def audit_estimate_seconds(
    mechanism, dist, n_sellers: int, n_markets: int, *, n_grid: int = 33, n_random: int = 32,
    refine: bool = True, **context,
) -> float:  # fmt: skip
    """The cost model's seconds of :func:`audit` (``market_sim.estimates.audit_seconds``):
    the drawn market's candidates plus the opponent profiles' (five per seller, each with
    the endpoints, the grid and the other sellers' reports)."""
    from .estimates import audit_seconds

    src = _source(dist, n_sellers, n_markets, None)
    mech = _build(mechanism, src, context)
    n = src.n_sellers
    others = 5 * min(n - 1, 32)
    market = n_grid + 2 * _PROBES.size + others + n_random + (64 if refine else 0)
    profiles = 5 * (n_grid + others / 2) * min(n, 32) / n
    return audit_seconds(mech, n, n_markets, n_candidates=int(market + profiles))
