"""Bayes-Nash equilibria of any mechanism, and their verification.

``bne(mechanism, population, rng)`` finds one bid function per class of sellers (a
``Population`` or a list of ``(cost law, count)`` classes; i.i.d. within a class) such
that reporting b_g(c) is (nearly) a best response for a seller of class g and cost c
when everyone else plays their class's bid function; ``symmetric_bne`` is the
one-class case.  ``bne_epsilon`` verifies any bid function.

Method (docs/equilibrium.md has the details, the options and the limits): damped
best responses on a cost grid per class, against a quasi-random sample of opponents
or, when the mechanism has an exact ``interim``, against the laws of their reports
(exact utilities), each best response the argmax over a report grid, refined; or
(``method="distributional"``, the default's pick for a mechanism with an exact
``interim``) mixed strategies on a discretised game; a black box (``outcome`` only)
that passes the rank probe is solved there on its rank interim (``equilibrium_rank``;
the default runs it when the pure result on a black box is not certified).  Then
verification at every
evaluation cost up to the support's top, every report of the whole range (below the
cost too) searched: against the returned bids' exact report laws when the mechanism
has an exact ``interim`` (no noise), else on fresh opponents the solver never saw
(searched and measured on the same markets on the ``outcome`` path and a deterministic
mechanism's ``deviations`` path, on a separate sample elsewhere), the largest gains
refined; epsilon (ε̂) with a CI, bnelearn's ℓ̂ and L̂, and distances to a reference bid.
The steps live beside it: ``equilibrium_game`` (the sampled game), ``equilibrium_pure``
(the pure method and the verification), ``equilibrium_distributional`` and
``equilibrium_envelope`` (the distributional method), ``equilibrium_rank`` (a black
box's rank interim), ``equilibrium_setup`` and
``equilibrium_result``.

CLI: ``market-sim bne --mechanism SPEC --dist SPEC --sellers N --out DIR`` or
``--population 1*uniform:1:2+1*uniform:0:2``; writes DIR/bid.csv, summary.json, bne.png.
"""

from __future__ import annotations

import copy
import dataclasses
import math
import time
from typing import Any, NamedTuple

import numpy as np

from ..errors import MarketSimError
from ..execution import Job, check_executor, job_rng, run_jobs
from ..mechanisms.base import mechanism_name
from ..parameters import check_int
from .equilibrium_beliefs import play_beliefs
from .equilibrium_distributional import (
    DistOptions,
    bid_tables,
    live_top,
    solve_distributional,
    truth_relative_epsilon,
)
from .equilibrium_game import (
    EpsilonResult,
    Oracle,
    Sample,
    interim_of,
)
from .equilibrium_pure import (
    _TAIL_RULES,
    _exact_laws,
    _final_rule,
    _iterate,
    _linear,
    _sharpen,
    _start,
    _State,
    _Trace,
    _verify,
)
from .equilibrium_rank import RankInterim, RankSurrogate, rank_interim
from .equilibrium_result import (
    STOPPING_RULES,
    BNEResult,
    ClassBid,
    figure,
    plot,
)
from .equilibrium_setup import (
    CONTEXT_KEYS,
    OPTIONS,
    _as_bidfn,
    _Options,
    _per_class,
    _setup,
)

__all__ = [
    "OPTIONS",
    "STOPPING_RULES",
    "BNEResult",
    "ClassBid",
    "EpsilonResult",
    "METHODS",
    "bne",
    "bne_sweep",
    "symmetric_bne",
    "bne_epsilon",
    "bne_epsilon_by_group",
    "figure",
    "plot",
]


# ---- the entry points ------------------------------------------------------------------
def bne(
    mechanism,
    population,
    rng: np.random.Generator,
    *,
    n_sellers: int | None = None,
    init="truth",
    reference=None,
    bid_max: float | None = None,
    progress: bool = False,
    method: str = "auto",
    **options,
) -> BNEResult:
    """A Bayes-Nash equilibrium of ``mechanism`` (a name, spec, class, instance or object
    with ``outcome``) for sellers in classes: ``population`` a Population (or its spec,
    ``70*uniform:0:1+30*uniform:1:2``), a list of ``(cost law, count)`` pairs, or one cost
    law with ``n_sellers`` (``market_sim.population.as_population``).  One bid function
    per class, numbered as the classes are given.  ``options``: grid, bid_grid,
    samples, deviators, damping, max_iter, br_refine, resample, exact (the solve; the
    automatic ones by path unless given); tol, gain_tol, eps_tol, verify_every,
    verify_tol, patience (the stopping rules, ``STOPPING_RULES``); eval_grid,
    eval_samples, check_grid, refine (the verification); and the market settings mu,
    sigma, gamma, privacy (docs/equilibrium.md).  ``init``: the starting bid function(s)
    ("truth", a function, a list per class or a BNEResult); ``reference``: bid
    function(s) to measure L2 / L∞ distances to.  ``method``: "pure" (bid functions,
    above), "distributional" (mixed strategies on a discretised game, ``DIST_OPTIONS``)
    or "auto" (the default: the one suited to the mechanism and the options given,
    ``_auto``; ``options["method"]`` and ``["method_reason"]`` say which and why).  Same
    ``rng`` state, same result."""
    called = dict(n_sellers=n_sellers, init=init, reference=reference, bid_max=bid_max)
    if method != "pure":
        return _by_method(method, mechanism, population, rng, called, bool(progress), options)
    return _pure(mechanism, population, rng, called, bool(progress), options)


def _pure(mechanism, population, rng, called, progress, options, auto=False) -> BNEResult:
    """``bne(..., method="pure")``: the iterations, their last stages (``_last_stages``),
    the verification (``_verified``); with ``auto`` (``method="auto"``), the beliefs
    stage after it when the result asks for it (``_auto_beliefs``)."""
    t0 = time.perf_counter()
    context = {k: options.pop(k) for k in list(options) if k in CONTEXT_KEYS}
    opt = _options(options)
    setup = _setup(mechanism, population, called["n_sellers"], rng, context, called["bid_max"])
    G = len(setup.classes.laws)
    # the interim path knows the others' report laws, not their data
    exact = opt.exact is not False and not getattr(setup.mech, "needs_data", False)
    oracle = Oracle(setup.mech, exact=exact)
    opt = opt.for_path(oracle.path, G, max(setup.classes.counts))
    markets, d = opt.markets(oracle, opt.samples, setup.classes)
    train = (
        None
        if oracle.path == "interim"
        else Sample(setup.classes, markets, d, rng, opt.tilt, oracle.outcome_only)
    )
    state = _start(setup, opt, called["init"])
    trace = _iterate(setup, opt, oracle, train, state, progress, rng)
    solve = _Solve(setup, opt, oracle, state, trace, context, called, progress, t0)
    sharpened = _sharpen(setup, opt, oracle, state, trace, rng)
    jumps, changes = _last_stages(solve, opt, sharpened, rng)
    r = _verified(solve, opt, jumps, changes, rng)
    if auto and _beliefs_wanted(r, options):
        return _auto_beliefs(solve, r, sharpened, options, rng)
    return r


class _Solve(NamedTuple):
    """A pure solve after its iterations: what its last stages and verification read."""

    setup: Any
    opt: Any
    oracle: Oracle
    state: Any
    trace: Any
    context: dict
    called: dict
    progress: bool
    t0: float


def _last_stages(solve: _Solve, opt, sharpened, rng):
    """After the iterations and the jumps made steps (``_sharpen``: ``sharpened``), when
    asked (``opt.beliefs_rounds``), fictitious play in beliefs (``equilibrium_beliefs``),
    whose tables the verification must measure afresh; (jumps per class, the rounds'
    changes)."""
    if not opt.beliefs_rounds:
        return sharpened, []
    solve.trace.final_checks = None
    return play_beliefs(solve.setup, opt, solve.oracle, solve.state, sharpened, rng, solve.progress)


def _verified(solve: _Solve, opt, jumps, changes, rng) -> BNEResult:
    """The solve's tables verified (afresh unless the iterations' last check stands) and
    its result, ``options`` recording how it was called and what its stages did."""
    setup, oracle, state, trace = solve.setup, solve.oracle, solve.state, solve.trace
    references = _per_class(solve.called["reference"], len(setup.classes.laws), "reference")
    solve_calls = oracle.calls  # the solve's (the final verification's apart)
    sampled = Oracle(setup.mech)  # the verification draws opponents on every path
    checks = None if any(jumps) else trace.final_checks
    control = _rank_control(setup)
    # a rank box's gains measured again with its control variate, unless none was found
    controlled = control is not None and any(c.epsilon > 0 for c in checks or ())
    if checks is None or any(r is not None for r in references) or controlled:
        checks = _verify(
            setup, opt, sampled, state.bidfns(), state.costs, state.c_top, state.z_top, rng,
            references, exact=oracle.path == "interim", control=control,
        )  # fmt: skip
    oracle.calls += sampled.calls + (control.calls if control else 0)
    checks = _rank_checked(
        setup, opt, checks, state.bidfns(), state.costs, state.c_top, state.z_top, rng,
        references, oracle, control,
    )  # fmt: skip
    trace.stopped_by = _final_rule(trace, checks, opt, oracle.path)
    seconds = time.perf_counter() - solve.t0
    r = _result(setup, opt, state, trace, checks, oracle, seconds, solve.context)
    called = dict(n_sellers=setup.classes.n, init=_described(solve.called["init"]))
    called["progress"] = solve.progress
    called["reference"] = _described(solve.called["reference"])
    called["method"] = "pure"
    called["jumps"] = jumps
    called["beliefs_changes"] = changes
    called["solve_calls"] = solve_calls
    called["tail_iterates"] = len(trace.tail) if trace.stopped_by in _TAIL_RULES else 0
    return dataclasses.replace(r, options={**r.options, **called})


def _described(bid) -> str | None:
    """A bid-function argument as ``options`` records it (JSON): "truth", None or its kind."""
    if bid is None or isinstance(bid, str):
        return bid
    if isinstance(bid, (list, tuple)):
        return "[" + ", ".join(str(_described(b)) for b in bid) + "]"
    return getattr(bid, "__name__", type(bid).__name__)


def bne_sweep(
    mechanism,
    settings,
    seed: int,
    *,
    workers: int = 1,
    executor: str = "local",
    address: str | None = None,
    progress: bool = False,
    **common,
) -> list[BNEResult]:
    """One equilibrium per entry of ``settings`` (dicts of :func:`bne`'s arguments:
    ``population``, ``n_sellers``, options, market settings; ``common`` for every entry),
    in their order.  Entry ``s`` is one task (``market_sim.execution``: ``workers``,
    ``executor``, ``address``) solved with its own stream ``job_rng(seed, s)``, so each
    result depends on the root seed and its own setting only: the same on any executor,
    and the same whichever other settings are swept with it."""
    check_executor(workers, executor, address)
    if isinstance(settings, dict) or not all(isinstance(s, dict) for s in settings):
        raise MarketSimError("settings: give a list of dicts of bne's arguments")
    if not isinstance(seed, int | np.integer) or isinstance(seed, bool):
        raise MarketSimError(f"seed must be an integer (got {seed!r})")
    jobs = []
    for i, setting in enumerate(settings):
        kw = {**common, **setting}
        if "population" not in kw:
            raise MarketSimError(f"settings[{i}]: no population (a cost law or a Population)")
        identity = {k: kw[k] for k in sorted(kw)}
        jobs.append(Job(f"bne-{i}", _bne_job, (mechanism, int(seed), identity, kw)))
    where: dict[str, Any] = dict(workers=workers, executor=executor, address=address)
    bar = "bne" if progress else False
    return run_jobs(jobs, progress=bar, preload=("market_sim.games.equilibrium",), **where)


def _bne_job(mechanism, seed: int, identity: dict, kw: dict) -> BNEResult:
    """Task of :func:`bne_sweep`: one equilibrium with the stream of its setting."""
    kw = dict(kw)
    population = kw.pop("population")
    return bne(mechanism, population, job_rng(seed, identity), **kw)


def _options(options: dict) -> _Options:
    names = {f.name for f in dataclasses.fields(_Options)}
    unknown = sorted(set(options) - names)
    if unknown:
        raise MarketSimError(
            f"unknown option {unknown[0]!r} (options: {', '.join(sorted(names))}; market "
            f"settings: {', '.join(CONTEXT_KEYS)})"
        )
    return _Options(**options).checked()


def _result(setup, opt, state, trace, checks, oracle, seconds, context) -> BNEResult:
    classes = tuple(
        ClassBid(law.spec, k, (float(law.support[0]), float(law.support[1])), c, b, ch)
        for law, k, c, b, ch in zip(
            setup.classes.laws, setup.classes.counts, state.costs, state.bids, checks, strict=True
        )
    )
    worst = max(range(len(checks)), key=lambda g: checks[g].epsilon)
    options = {
        **dataclasses.asdict(opt),
        "markets": opt.markets(oracle, opt.samples, setup.classes)[0],
        "path": oracle.path,
        "verification": _verification_label(checks),
        "calls": oracle.calls,
        "cost_top": state.c_top[0],
        "training_gain": trace.gains[trace.best - 1] if trace.gains else math.nan,
        "training_epsilon": trace.epsilons[trace.best - 1] if trace.epsilons else math.nan,
        "best_iteration": trace.best,
        "bid_max": setup.z_range[1],
        # the market settings the mechanism uses (its own field), else as given (None: neither)
        **{k: getattr(setup.mech, k, context.get(k)) for k in CONTEXT_KEYS},
    }
    return BNEResult(
        mechanism=setup.name,
        dist=setup.classes.spec,
        n_sellers=setup.classes.n,
        costs=classes[0].costs,
        bids=classes[0].bids,
        epsilon=checks[worst].epsilon,
        epsilon_ci=checks[worst].epsilon_ci,
        epsilon_relative=max(c.epsilon_relative for c in checks),
        iterations=trace.iterations,
        converged=_certified(trace, checks, opt),
        residual=trace.history[trace.best - 1] if trace.history else math.nan,
        seconds=seconds,
        check=checks[0],
        history=tuple(trace.history),
        options=options,
        support=classes[0].support,
        classes=classes,
        stopped_by=trace.stopped_by,
    )


def _certified(trace: _Trace, checks, opt: _Options) -> bool:
    """Converged: a certifying rule fired and the final verification's epsilon / u is
    within ``verify_tol`` for every class (issue #48: ``converged`` means it)."""
    return trace.converged and all(c.epsilon_relative <= opt.verify_tol for c in checks)


def symmetric_bne(
    mechanism, dist, n_sellers: int, rng: np.random.Generator, **options
) -> BNEResult:
    """The one-class case of :func:`bne`: ``n_sellers`` sellers with i.i.d. costs from
    ``dist`` (a spec or :class:`CostDistribution`); one bid function."""
    n = check_int("n_sellers", n_sellers, 2)
    if isinstance(dist, (list, tuple)) or (isinstance(dist, str) and "*" in dist):
        raise MarketSimError("symmetric_bne takes one cost law; use bne for classes")
    return bne(mechanism, [(dist, n)], rng, **options)


def bne_epsilon(
    mechanism,
    population,
    n_sellers: int | None,
    bid,
    rng: np.random.Generator,
    *,
    reference=None,
    bid_max: float | None = None,
    **options,
) -> EpsilonResult:
    """Epsilon and the metrics of the profile where every seller of class g bids
    ``bid`` (a vectorised function, a list of them per class, a BNEResult or
    "truth"): the best deviation of each evaluation cost is searched over the whole
    report range on one sample and its gain measured on fresh opponents.  For several
    classes, the class with the largest epsilon (``bne_epsilon_by_group`` gives all).
    Options: eval_grid, eval_samples (default 4 x ``samples``), samples, check_grid,
    refine, deviators (the automatic ones by path: ``equilibrium_setup._Options.for_path``;
    on the ``outcome`` and a deterministic mechanism's ``deviations`` path the deviations
    are searched on the fresh markets themselves),
    and the market settings.  A black box that passes the rank probe is also measured
    exactly on its rank interim, each class keeping the larger epsilon (``bne``'s
    ``_rank_checked``)."""
    return max(
        bne_epsilon_by_group(
            mechanism, population, n_sellers, bid, rng, reference=reference,
            bid_max=bid_max, **options,
        ),
        key=lambda e: e.epsilon,
    )  # fmt: skip


def bne_epsilon_by_group(
    mechanism, population, n_sellers, bid, rng, *, reference=None, bid_max=None, **options
) -> list[EpsilonResult]:
    """:func:`bne_epsilon` per class."""
    context = {k: options.pop(k) for k in list(options) if k in CONTEXT_KEYS}
    opt = _options(options)
    if n_sellers is not None:
        n_sellers = check_int("n_sellers", n_sellers, 2)
    setup = _setup(mechanism, population, n_sellers, rng, context, bid_max)
    G = len(setup.classes.laws)
    bidfns = [_as_bidfn(b, setup.z_range) for b in _per_class(bid, G, "bid")]
    refs = _per_class(reference, G, "reference")
    c_tops = [d.support[1] for d in setup.classes.laws]
    oracle = Oracle(setup.mech)
    control = _rank_control(setup)
    opt = opt.for_path(oracle.path, G, controlled=control is not None)  # eval_refine, ...
    exact = _exact_verification(setup.mech, opt.exact)
    z_top = setup.z_range[1]
    checks = _verify(setup, opt, oracle, bidfns, None, c_tops, z_top, rng, refs, exact, control)
    return _rank_checked(
        setup, opt, checks, bidfns, None, c_tops, z_top, rng, refs, oracle, control
    )


def _exact_verification(mech, exact: bool | None) -> bool:
    """Whether a verification measures against the bids' exact report laws: the
    mechanism has an exact ``interim``, the sellers no data, and ``exact`` is not False
    (``bne``'s rule for its interim path; docs/equilibrium.md, "Verification")."""
    return (
        exact is not False
        and not getattr(mech, "needs_data", False)
        and (interim_of(mech) is not None)
    )


# ---- the second method: distributional strategies -----------------------------------------
#: ``bne``'s methods: "pure" (damped best responses of bid functions), "distributional"
#: (mixed strategies on a discretised game, ``market_sim.games.equilibrium_distributional``),
#: "auto" (for a mechanism with an exact ``interim``, or a black box that passes the rank
#: probe and is not truthful on its rank interim, the distributional one, and the pure one
#: too when its tables' exact epsilon is above verify_tol; else the pure one; the better
#: verified one is returned; docs/equilibrium.md, "Which method")
METHODS = ("pure", "distributional", "auto")
#: the distributional method's options (besides the verification's ``_VERIFY_KEYS``)
DIST_OPTIONS = {f.name: f.default for f in dataclasses.fields(DistOptions)}
_VERIFY_KEYS = ("samples", "eval_grid", "eval_samples", "check_grid", "refine", "deviators")


def _by_method(method, mechanism, population, rng, called, progress, options) -> BNEResult:
    """``bne`` with ``method`` "distributional" or "auto"."""
    if method not in METHODS:
        raise MarketSimError(f"method must be one of {', '.join(METHODS)} (got {method!r})")
    if method == "distributional":
        return _distributional(mechanism, population, rng, called, progress, options)
    return _auto(mechanism, population, rng, called, progress, options)


def _split_options(options: dict) -> tuple[DistOptions, _Options, dict]:
    """The distributional solver's options, the verification's and the market settings;
    an option of the pure method only is refused (one line)."""
    context = {k: options[k] for k in options if k in CONTEXT_KEYS}
    rest = {k: v for k, v in options.items() if k not in CONTEXT_KEYS}
    known = set(DIST_OPTIONS) | set(_VERIFY_KEYS)
    unknown = sorted(set(rest) - known)
    if unknown:
        where = "applies to method='pure' only" if unknown[0] in OPTIONS else "is unknown"
        raise MarketSimError(
            f"option {unknown[0]!r} {where} (method='distributional' takes: "
            f"{', '.join(sorted(known))})"
        )
    dopt = DistOptions(**{k: v for k, v in rest.items() if k in DIST_OPTIONS}).checked()
    return dopt, _options({k: v for k, v in rest.items() if k in _VERIFY_KEYS}), context


def _distributional(mechanism, population, rng, called, progress, options) -> BNEResult:
    """``bne(..., method="distributional")``: mixed strategies by dual averaging on the
    discretised game, each class's mean bid per cost node as its bid function, verified
    by the pure solver's verification (``_verify``: fresh opponents playing the mean
    bids, every report of the range searched)."""
    t0 = time.perf_counter()
    if not (isinstance(called["init"], str) and called["init"] == "truth"):
        raise MarketSimError("init applies to method='pure' only")
    dopt, vopt, context = _split_options(options)
    setup = _setup(mechanism, population, called["n_sellers"], rng, context, called["bid_max"])
    laws = setup.classes.laws
    references = _per_class(called["reference"], len(laws), "reference")
    control = _rank_control(setup)  # the box probed once: for the solve and the verification
    rank = RankSurrogate(setup.mech, control) if dopt.rank_interim and control is not None else None
    solved_on = rank or setup.mech
    sol = solve_distributional(solved_on, setup.classes, setup.z_range, rng, dopt, progress)
    chosen = bid_tables(solved_on, setup.classes, sol, setup.z_range)
    tables = chosen.tables
    c_tops = [live_top(s, law.support) for s, law in zip(sol.strategies, laws, strict=True)]
    oracle = Oracle(setup.mech)
    # the verification's automatic settings
    auto = vopt.for_path(oracle.path, len(laws), controlled=control is not None)
    automatic = ("eval_refine", "eval_samples", "eval_grid", "check_grid")
    vopt = dataclasses.replace(vopt, **{k: getattr(auto, k) for k in automatic})
    bidfns = [_linear(c, b) for c, b in tables]
    exact = _exact_verification(setup.mech, None)
    checks = _verify(
        setup, vopt, oracle, bidfns, [c for c, _ in tables], c_tops, setup.z_range[1], rng,
        references, exact, control,
    )  # fmt: skip
    oracle.calls += sol.calls + (control.calls if control else 0)
    checks = _rank_checked(
        setup, vopt, checks, bidfns, [c for c, _ in tables], c_tops, setup.z_range[1], rng,
        references, oracle, control,
    )  # fmt: skip
    state = _State([c for c, _ in tables], [b for _, b in tables], c_tops, setup.z_range[1])
    trace = _Trace(sol.iterations, sol.stopped_by, list(sol.history), best=sol.iterations)
    r = _result(setup, vopt, state, trace, checks, oracle, time.perf_counter() - t0, context)
    recorded = {
        **dataclasses.asdict(dopt),
        **{k: getattr(vopt, k) for k in _VERIFY_KEYS},
        "verify_tol": vopt.verify_tol,
        "method": "distributional",
        "path": "rank interim" if rank else sol.path,
        "verification": _verification_label(checks),
        "calls": oracle.calls,
        "rank_interim": rank is not None,
        "utility_loss": sol.utility_loss,
        "knot_every": chosen.knot_every,
        "envelope_steps": chosen.envelope_steps,
        "inverse_bids": chosen.inverse_bids,
        "training_epsilon": chosen.exact_epsilon,
        "spread": [s.live_spread for s in sol.strategies],
        "mixed": [s.mixed for s in sol.strategies],
        "bid_max": setup.z_range[1],
        "n_sellers": setup.classes.n,
        "init": "truth",
        "reference": _described(called["reference"]),
        "progress": progress,
        **{k: r.options[k] for k in CONTEXT_KEYS},
    }
    # certified by the dynamic's rule, or on the interim path by the tables' exact epsilon
    # (the envelope step: the dynamic's grid game need not converge for them to be exact)
    rule = sol.stopped_by
    if rule != "utility_loss" and chosen.exact_epsilon <= vopt.verify_tol:
        rule = "tables_epsilon"
    converged = rule != "max_iter" and r.epsilon_relative <= vopt.verify_tol
    return dataclasses.replace(
        r, converged=converged, residual=sol.utility_loss, options=recorded, stopped_by=rule
    )


def _rank_control(setup) -> RankInterim | None:
    """The black box's rank interim (``equilibrium_rank``), or None: a mechanism with its
    own ``interim``, sellers with data, a box that fails the rank probe.  The
    verification's control variate (``_verify``, ``equilibrium_rank.ControlledOracle``)
    and ``_rank_checked``'s exact check; for the distributional method also what it
    solves (``RankSurrogate``, unless ``rank_interim=False``): only the solve and the
    tables' choice see it there, the verification asks the box itself.  A one-vector
    box's table costs 4097 x n outcome calls (16,388 at 4 sellers, where its sampled
    verification makes about 0.5 M)."""
    if interim_of(setup.mech) is not None or setup.classes.data is not None:
        return None
    return rank_interim(setup.mech, setup.classes, setup.z_range)


def _rank_checked(
    setup, opt, checks, bidfns, state_costs, c_tops, z_top, rng, references, oracle, interim
) -> list[EpsilonResult]:
    """``checks``, or per class the larger (by relative epsilon) of it and the exact
    verification against the box's rank interim, for a black box that passes the rank
    probe (``interim``: ``_rank_control``'s).  The sampled verification's maximum is
    conservative on average only: on a first-price black box it printed 0.93 of the
    exact epsilon on one seed in 20 (issue #48), and a rank box's exact one is the
    truth.  It never lowers a number: a box that fooled the probe keeps its sampled one
    (``tests/test_equilibrium_rank.py``).  Skipped when the bids fall (no exact report
    laws).  Its win rates come from the box (``RankSurrogate.outcome``); ``oracle.calls``
    updated."""
    if interim is None or _exact_laws(setup, bidfns, state_costs, c_tops) is None:
        return checks
    box = RankSurrogate(setup.mech, interim)
    before = interim.calls
    ranked = _verify(
        dataclasses.replace(setup, mech=box), opt, Oracle(box), bidfns, state_costs,
        c_tops, z_top, rng, references, exact=True,
    )  # fmt: skip
    oracle.calls += interim.calls - before
    noise = _FLOAT_NOISE * (setup.z_range[1] - setup.z_range[0])
    return [
        dataclasses.replace(r, verification="rank interim")
        if r.epsilon > s.epsilon + noise and r.epsilon_relative > s.epsilon_relative
        else s
        for s, r in zip(checks, ranked, strict=True)
    ]


#: a gain this small (times the report range) is rounding, not a deviation's
_FLOAT_NOISE = 1e-12


def _verification_label(checks) -> str:
    """How the classes' epsilons were measured ("exact", "sampled", "rank interim"; the
    distinct ones, joined)."""
    return ", ".join(dict.fromkeys(ch.verification for ch in checks))


class _Choice(NamedTuple):
    """``_auto_choice``'s pick: the method, why, and the report vectors its rank probe
    evaluated (counted in the result's ``calls``)."""

    method: str
    why: str
    probe_calls: int = 0


def _auto_choice(mechanism, population, called, options) -> _Choice:
    """``method="auto"``'s first pick and why (``METHODS``; docs/equilibrium.md, "Which
    method"): the pure method when the call is the pure method's (an option only it
    reads, or one both read with different meanings: grid, bid_grid, max_iter, eps_tol;
    an ``init``), when the sellers have data, or when the mechanism has no exact
    ``interim`` and fails the rank probe (the distributional method's sampled path costs
    ``markets`` x ``bid_grid`` outcomes per class and iteration); else the distributional
    one, on the mechanism's ``interim`` or on a black box's rank interim
    (``equilibrium_rank``: m + 1 outcomes per report, where the pure method's sampled
    solve makes millions of calls): exact utilities on the grid and the envelope step,
    cheap, and it holds all-pay contests, reserves and singular laws."""
    solver = sorted(set(options) - set(_VERIFY_KEYS) - set(CONTEXT_KEYS))
    own = [k for k in solver if k in DIST_OPTIONS and k not in OPTIONS]
    if own and len(own) == len(solver):
        return _Choice("distributional", f"options only it reads ({', '.join(own)})")
    if solver:
        return _Choice("pure", f"options of the pure method given ({', '.join(solver)})")
    if not (isinstance(called["init"], str) and called["init"] == "truth"):
        return _Choice("pure", "an init given")
    setup = _probe_setup(mechanism, population, called, options)
    if getattr(setup.mech, "needs_data", False):
        return _Choice("pure", NO_INTERIM)
    if interim_of(setup.mech) is not None:
        return _Choice("distributional", "an exact interim")
    counted = _Counting(setup.mech)
    interim = rank_interim(counted, setup.classes, setup.z_range)
    if interim is None:
        return _Choice("pure", NO_INTERIM, counted.calls)
    box = RankSurrogate(counted, interim)
    if truth_relative_epsilon(box, setup.classes, setup.z_range) <= _tol(options):
        return _Choice("pure", RANK_TRUTHFUL, counted.calls)
    return _Choice("distributional", RANK_BOX, counted.calls)


class _Counting:
    """A black box that counts the report vectors it evaluates (a ``(k, n)`` batch
    counts k), for ``calls``; its name and everything else are the box's own."""

    def __init__(self, box):
        self._box, self.calls = box, 0
        self.name = mechanism_name(box)

    def outcome(self, reports, rng=None):
        out = self._box.outcome(reports, rng)
        r = np.asarray(reports)
        self.calls += r.shape[0] if r.ndim == 2 else 1
        return out

    def __getattr__(self, name):
        return getattr(self._box, name)


#: ``_auto_choice``'s reason for the pure method on a mechanism without ``interim``
NO_INTERIM = "no exact interim (the distributional sampled path is slow)"
#: ... and for a black box that passes the rank probe: truthful on its rank interim (the
#: pure method starts at the truth), or not (the distributional method solves that interim)
RANK_TRUTHFUL = "a black box that passes the rank probe and is truthful on its rank interim"
RANK_BOX = "a black box that passes the rank probe (solved on its rank interim)"


def _tol(options: dict) -> float:
    return float(options.get("verify_tol", _Options.verify_tol))


def _probe_setup(mechanism, population, called, options):
    """The market's setup for ``auto``'s decisions, on a generator of its own (the setup
    draws nothing; the caller's rng untouched)."""
    context = {k: options[k] for k in options if k in CONTEXT_KEYS}
    probe = np.random.default_rng(0)
    return _setup(mechanism, population, called["n_sellers"], probe, context, called["bid_max"])


def _auto(mechanism, population, rng, called, progress, options) -> BNEResult:
    """``method="auto"`` (the default): the method ``_auto_choice`` picks, and the other
    one too, the one with the smaller verified relative epsilon returned, when the
    first is unsettled: the distributional one picked for an exact interim with its
    tables' exact relative epsilon (``training_epsilon``) above ``verify_tol``, on the
    mechanism's ``interim`` or on a black box's rank interim.  (Not when a rank box's
    sampled verification alone is above it: on an all-pay box that is the noise of every
    report paying, 0.8-3.7% where the exact epsilon is 0.03%, and the pure method fails
    the game; a box that fooled the probe, ``tests/test_equilibrium_rank.py``'s LazyBonus,
    is returned not certified, its sampled epsilon printed.)  ``options["method_reason"]``
    says which and why (the rule, and both numbers when both ran)."""
    first, why, probe_calls = _auto_choice(mechanism, population, called, options)
    run = {"pure": _auto_pure, "distributional": _auto_distributional}
    r = run[first](mechanism, population, rng, called, progress, options)
    calls = probe_calls + r.options["calls"]  # every report vector this call evaluated
    tol = _tol(options)
    unsettled = {
        "an exact interim": lambda: r.options.get("training_epsilon", math.nan) > tol,
        RANK_BOX: lambda: r.options.get("training_epsilon", math.nan) > tol,
        RANK_TRUTHFUL: lambda: not r.converged,
    }
    if not unsettled.get(why, lambda: False)():
        text = f"{first}: {why}; verified epsilon / utility {r.epsilon_relative:.3g}"
        return dataclasses.replace(r, options={**r.options, "method_reason": text, "calls": calls})
    second = "pure" if first == "distributional" else "distributional"
    other = run[second](mechanism, population, rng, called, progress, options)
    best, worse = (other, r) if other.epsilon_relative < r.epsilon_relative else (r, other)
    text = (
        f"{best.options['method']}: verified epsilon / utility {best.epsilon_relative:.3g} "
        f"against {worse.epsilon_relative:.3g} for {worse.options['method']} (both run: "
        f"{_BOTH_RUN[why]})"
    )
    calls += other.options["calls"]
    return dataclasses.replace(
        best, options={**best.options, "method_reason": text, "calls": calls}
    )


_BOTH_RUN = {
    "an exact interim": "the distributional tables' exact epsilon is above verify_tol",
    RANK_BOX: "the tables' exact epsilon on the box's rank interim is above verify_tol",
    RANK_TRUTHFUL: "the pure result was not certified",
}


def _auto_pure(mechanism, population, rng, called, progress, options) -> BNEResult:
    """The pure method, and after it the beliefs stage when its result asks for it
    (``_beliefs_wanted``, ``_auto_beliefs``)."""
    return _pure(mechanism, population, rng, called, progress, options, auto=True)


def _beliefs_wanted(r: BNEResult, options: dict) -> bool:
    """``method="auto"`` runs the beliefs stage after the pure method when its tables
    jump on a sampled path and its verified epsilon / u is above ``verify_tol`` (and
    ``beliefs_rounds`` was not given: the caller's choice stands)."""
    jumps = any(r.options.get("jumps") or ())
    sampled = r.options.get("path") != "interim"
    asked = "beliefs_rounds" in options
    return not asked and jumps and sampled and r.epsilon_relative > _tol(options)


def _auto_beliefs(solve: _Solve, r: BNEResult, sharpened, options, rng) -> BNEResult:
    """The beliefs stage (``AUTO_EPOCHS`` epochs; docs/equilibrium.md, "Fictitious play
    in beliefs") continued from the pure solve's tables as they were before its
    verification (``sharpened``: its jumps), verified afresh; the better verified of
    the two results returned, ``options["beliefs_reason"]`` saying so.  Its ``seconds``
    and ``calls`` count both."""
    rounds = AUTO_EPOCHS * solve.opt.beliefs_epoch
    opt = dataclasses.replace(solve.opt, beliefs_rounds=rounds)
    solve = solve._replace(state=copy.deepcopy(solve.state))  # r's tables stay r's
    jumps, changes = _last_stages(solve, opt, sharpened, rng)
    b = _verified(solve, opt, jumps, changes, rng)
    best = b if b.epsilon_relative < r.epsilon_relative else r
    text = (
        f"run: the tables jump on a sampled path and the pure result was not certified "
        f"(verified epsilon / u {r.epsilon_relative:.3g}); with {rounds} rounds "
        f"{b.epsilon_relative:.3g}; the {'stage' if best is b else 'pure'} result returned"
    )
    return dataclasses.replace(
        best,
        seconds=b.seconds,  # from the pure solve's start: both
        options={**best.options, "beliefs_reason": text, "calls": b.options["calls"]},
    )


#: ``method="auto"``'s epochs of the beliefs stage when it runs it (``_auto_beliefs``): three
#: of ``beliefs_epoch`` rounds (8: 24 rounds), as pay-as-bid's measured runs
#: (docs/equilibrium.md)
AUTO_EPOCHS = 3


def _auto_distributional(mechanism, population, rng, called, progress, options) -> BNEResult:
    return _distributional(mechanism, population, rng, called, progress, options)
