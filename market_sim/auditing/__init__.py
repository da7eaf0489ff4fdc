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
candidates) with the others at their floor, at their top, tied with it, and with one
other (the one farthest from that end) at its end (``coalitions.opponent_profiles``),
and in a space-filling design of interior profiles shared by every seller (k others
at an end, k near a point, one tied pair, bands: ``coalitions.interior_profiles``;
no jumps there), which the coalition search uses too.  A market whose own check
certifies the mechanism (``certification.certification``: the library's own,
unmodified offline or online mechanism) searches none: the certificate covers every
profile (``profiles_certified`` counts these markets; the statement says so).

Each seller on its own support (its class law's in a population) and against its
own tolerance (``search._tol``): tol_i = tol_factor x w_i x its largest eps among its
own reports + 1e-12 x its largest |payment| (+ tol_abs, 0 by default); no other
seller's allocation moves it and no absolute floor breaks scale invariance.

Verdicts.  ``verdict``: ``not_ic`` iff a seller's best gain is confirmed above its
tol, or (exact evaluations) a type pair of adjacent candidates shows a gain above
its tol (``type_gain_max``), or (a deterministic mechanism) eps rises with the own
report or Myerson's identity residual exceeds its tol (proofs of non-IC,
docs/audit-certification.md); ``inconclusive`` (Monte Carlo only) when nothing is
confirmed but the draws cannot decide (see below); else ``ic``.  ``ir_verdict``
from every own-type utility seen: the drawn cost, the top and the bottom of the own
support and (exact evaluations) every report tried read as a type, in the market
and every profile (``ir_witness``).  A user's ``deviations`` is checked against
``outcome`` first (``deviations_note``; ``outcome`` is audited when they disagree).

Monte Carlo (a ``randomized`` mechanism on the generic default): the search uses
``n_draws`` common draws (an eighth of them, at least 2, in the profiles: it only selects;
in the drawn market the last three quarters only for the truth and the candidates that
could still be best, or (random reports) still gain: ``search._screened``);
each seller's best misreport (never the truth: confirmed against itself it would
have SE 0 by construction), one fresh uniform report and its IR quantities are then
confirmed on fresh draws, ``n_confirm`` (64) at first and 2x to 4x more per seller, in
at most 4 stages (up to ``n_confirm_max``; only the quantities unsettled:
``montecarlo._confirm``) where the
variance is unstable (one draw carries more than 10% of the sum of squares) or the
confidence bound still allows a gain (IR violation) beyond tol + ``resolution`` x the
seller's incentive scale, or (the best misreport) its detectable gain is not within
it.  A gain is confirmed when the sample is stable and mean - k SE > tol, k = z +
max(0, -skew)(2 z^2 + 1) / (6 sqrt D) (the Edgeworth term of the studentized mean), z
the one-sided Bonferroni
quantile for 5% over both reports of every seller and every escalation stage.
``detectable_gain`` = max over sellers of tol + (k + 1.645) SE: a gain that large at
any seller's best report would have been confirmed with 95% probability, if the
payments there vary as in the draws taken.  ``inconclusive`` iff nothing is
confirmed and something is undecided, or a bound still allows a gain beyond tol +
the resolution after ``n_confirm_max`` draws, or the fresh report's sample is
constant but for a few draws carrying its variance (rare large payments).

Statistics (95%): ``max_gain_ci_low/high`` a percentile bootstrap CI (``n_boot``
resamples of the markets) of the mean per-market largest gain;
``profitable_share_upper`` the one-sided Clopper-Pearson bound on the share of
random reports that gain more than tol; ``ir_share_upper`` alike for IR.

CLI: ``market-sim audit`` writes DIR/audit.csv, DIR/summary.json, DIR/audit.png;
it exits 3 when a verdict is not_ic / not_ir, 4 when one is inconclusive.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..distributions import as_distribution
from ..errors import MarketSimError
from ..execution import Job, Shared, check_executor, job_rng, run_jobs
from ..mechanisms.base import as_mechanism, mechanism_name
from ..parameters import check_int
from .evaluate import _deviations_disagree, _is_monte_carlo, _undeclared_randomness
from .opponents import _audit_market, _floor
from .report import (  # noqa: F401
    COLUMNS,
    EXIT_INCONCLUSIVE,
    EXIT_NOT_IC,
    AuditResult,
    _by_class,
    _certificate,
    _summary,
    _table,
    plot,
)
from .search import _PROBES, _Plan
from .statistics import CONFIDENCE, clopper_pearson_upper  # noqa: F401
from .verdicts import _decide, _ir_witness, _tolerance, _verdicts

__all__ = [
    "audit",
    "AuditResult",
    "AuditWork",
    "audit_work",
    "audit_settings",
    "audit_estimate_seconds",
    "clopper_pearson_upper",
    "COLUMNS",
]


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

    def ends(self) -> np.ndarray:
        """(n, 2): each seller's own support (a population: its class law's)."""
        if self.population is None:
            return np.tile([self.lo, self.hi], (self.n_sellers, 1))
        laws = self.population.laws
        return np.array([[float(v) for v in laws[int(g)].support] for g in self.population.group])

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
        from ..population import as_population

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
    from ..population import Population

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
    tol_abs: float = 0.0,
    max_others: int = 16,
    n_jumps: int = 2,
    max_profile_sellers: int = 32,
    n_draws: int = 16,
    n_confirm: int = 64,
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


def _plan(src: _Source, settings, floor_frac: float = 0.0) -> _Plan:
    """The search plan: each seller's own support (its class law's, in a population)
    and the floor at ``floor_frac`` of its width above its bottom."""
    return _Plan(src.lo, src.hi, src.lo + floor_frac * (src.hi - src.lo), settings["n_grid"],
                 settings["n_random"], bool(settings["refine"]), settings["n_starts"],
                 settings["n_sections"], settings["refine_iter"], settings["max_others"],
                 settings["n_jumps"], settings["max_profile_sellers"], src.ends(),
                 floor_frac)  # fmt: skip


def _draw(mech, src: _Source, n_markets, rng, settings):
    """Every market's costs, classes and mechanism (a data-needing mechanism gets the
    market's data), drawn in order with ``rng``; then the lowest report with an
    outcome (on the first market) and the search plan, into ``settings``."""
    mc = _is_monte_carlo(mech)
    settings["n_pairs"] = n_markets * src.n_sellers
    settings["n_markets"] = n_markets
    drawn, groups, mechs = [], [], []
    for m in range(n_markets):
        costs, group, data = src.draw(m, rng)
        drawn.append(costs)
        groups.append(group)
        mechs.append(mech.with_data(*data) if getattr(mech, "needs_data", False) else mech)
    frac, floor_note = _floor(_unchecked(mechs[0]), drawn[0], _plan(src, settings), rng, mc)
    settings["plan"], settings["floor_note"] = _plan(src, settings, frac), floor_note
    settings["deviations_note"] = _deviations_disagree(  # its own stream: rng untouched
        _unchecked(mechs[0]), drawn[0], settings["plan"], np.random.default_rng(0),
        settings["tol_factor"],
    )  # fmt: skip
    _undeclared_randomness(_unchecked(mechs[0]), drawn[0], settings["plan"])
    return drawn, (None if groups[0] is None else groups), mechs


class _NoBar:
    def update(self, n: int) -> None:
        pass


def _audit_market_job(mech, costs, plan: _Plan, root: int, m: int, mc: bool, settings):
    """Task ``m`` of an audit: search market m with its own stream ``job_rng(root, m)``."""
    return _audit_market(
        _unchecked(mech), costs, plan, job_rng(root, m), mc, settings, _NoBar(), stratum=m
    )


def _unchecked(mech):
    """``myerson_mechanism`` without its raise on a non-monotone rule (gains are still
    measured; the violations are listed by the audit)."""
    from ..mechanisms.myerson import MyersonMechanism

    return mech.unchecked() if isinstance(mech, MyersonMechanism) else mech


def _result(mechanism, mech, mechs, src, markets, groups, rng, settings) -> AuditResult:
    """Tolerance, verdicts, the table and the summary."""
    mc = _is_monte_carlo(mech)
    randomized = bool(getattr(mech, "randomized", False))
    n_pairs = len(markets) * src.n_sellers
    tol, eps_scale = _tolerance(markets)
    d = _decide(markets, mc, n_pairs, settings["resolution"])
    checks = [ch for mk in markets for ch in (mk.found.check or []) if ch is not None]
    violations = [(m, int(r[0]), *r[1:]) for m, mk in enumerate(markets)
                  for r in mk.found.violations]  # fmt: skip
    n_own = 0
    for m, mk in enumerate(markets):
        own = getattr(mechs[m], "violations", None)
        if callable(own):  # myerson_mechanism's own list
            listed = [(m, x.seller, x.low, x.high, x.eps_low, x.eps_high) for x in own(mk.costs)]
            violations += listed
            n_own += len(listed)
    v = _verdicts(d, markets, violations, settings, mc, not randomized)
    v["ir_witness"] = _ir_witness(markets, d, src.n_sellers, mc)
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
    from ..coalitions import coalition_search

    return coalition_search(_unchecked(mech), costs, k, job_rng(root, ("coalition", m)),
                            tol=tol, support=support, floor=floor, profiles=True)  # fmt: skip


def audit_estimate_seconds(
    mechanism, dist, n_sellers: int, n_markets: int, *, n_grid: int = 33, n_random: int = 32,
    refine: bool = True, **context,
) -> float:  # fmt: skip
    """The cost model's seconds of :func:`audit` (``market_sim.estimates.audit_seconds``):
    the drawn market's candidates plus the opponent profiles' (five per seller, each with
    the endpoints, the grid and the other sellers' reports)."""
    from ..estimates import audit_seconds

    src = _source(dist, n_sellers, n_markets, None)
    mech = _build(mechanism, src, context)
    n = src.n_sellers
    others = 5 * min(n - 1, 32)
    market = n_grid + 2 * _PROBES.size + others + n_random + (64 if refine else 0)
    profiles = 5 * (n_grid + others / 2) * min(n, 32) / n
    return audit_seconds(mech, n, n_markets, n_candidates=int(market + profiles))
