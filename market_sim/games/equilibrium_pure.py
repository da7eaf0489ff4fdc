"""The pure method of ``bne``: damped best responses of bid functions on a cost grid per
class (smoothed by splines on each side of a jump of the bids), their stopping rules,
and the verification on fresh opponents (market_sim.games.equilibrium's module
docstring; docs/equilibrium.md)."""

from __future__ import annotations

import dataclasses
import math
import sys
from dataclasses import dataclass, field

import numpy as np

from ..distributions import tail_costs
from .equilibrium_game import (
    SENTINELS,
    BidFn,
    EpsilonResult,
    Interim,
    Oracle,
    Sample,
    best_response,
    distances,
    eval_costs_for,
    interim_epsilon,
    jump_cells,
    measure,
    prior_weights,
    reports_of,
    search_reports,
    sharpen_jump,
)
from .equilibrium_rank import ControlledOracle, RankSurrogate
from .equilibrium_setup import _as_bidfn, _Options, _per_class, _Schedule, _Setup

#: grid costs each side of a jump solved again (``_around_jump``), the even costs that
#: replace them, and the rounds of refinement of their best responses
_NEAR, _NEAR_COSTS, _NEAR_REFINE = 4, 16, 6


# ---- the solve -----------------------------------------------------------------------
@dataclass
class _State:
    """The bid functions being iterated: per class, the cost grid and the bids, the
    top of the focused cost range, and the report above which nothing is bought."""

    costs: list[np.ndarray]
    bids: list[np.ndarray]
    c_top: list[float]
    z_top: float

    def bidfns(self) -> list[BidFn]:
        return [_linear(x, y) for x, y in zip(self.costs, self.bids, strict=True)]


def _linear(x: np.ndarray, y: np.ndarray) -> BidFn:
    """The linear interpolation of the bids y at the grid costs x."""

    def fn(c):
        return np.interp(c, x, y)

    return fn


def _smooth(
    costs: np.ndarray, br: np.ndarray, knots: int, z_live: float = math.inf, law=None, cuts=()
):
    """The least-squares cubic spline with ``knots`` interior knots through the best
    responses (none: as they are): equilibrium bid functions are smooth, while best
    responses on a finite sample jump, and damped iterations of jumps form atoms.  Only
    the piece of costs whose responses sell (at most ``z_live``, the highest report that
    gets anything) is fitted (uncapped: a cap at the responses' range moved the
    asymmetric first-price bids by 0.05 at the knife edge); above it the responses are
    kept as they are: no smoothing across a reserve or the cost above which a seller
    never sells (issue #48, kinks kept).  Nor across a jump of the responses inside the
    selling range (``cuts``, (cost, cost) cells: the persistent jumps,
    ``_Trace.persistent``; pay-as-bid's cheapest sellers bid low for its large
    allocation, the others far higher): each piece is fitted alone, a piece too short
    for the knots kept as it is.  The spline is in the quantile F(c) (given the
    ``law``): for F(c) = sqrt(c) the bids are smooth in sqrt(c), not in c."""
    sells = br <= z_live
    end = int(np.flatnonzero(sells)[-1]) + 1 if sells.any() else 0  # up to the last seller
    if knots <= 0 or end < knots + 8:
        return br
    out = br.copy()
    at = [
        k
        for lo, hi in cuts
        for k in (int(np.searchsorted(costs, lo, "right")), int(np.searchsorted(costs, hi)))
        if 0 < k < end
    ]
    for piece in np.split(np.arange(end), sorted(set(at))):
        if piece.size >= knots + 8:
            out[piece] = _spline_piece(costs[piece], br[piece], knots, law)
    return out


def _spline_piece(x: np.ndarray, y: np.ndarray, knots: int, law) -> np.ndarray:
    """``_smooth``'s spline through one piece of responses, in the quantile when the law's
    cdf separates the costs (else in the cost); the responses as they are if it fails."""
    from scipy.interpolate import LSQUnivariateSpline

    if law is not None:
        u = np.asarray(law.cdf(x), dtype=float)
        if np.all(np.diff(u) > 0):
            x = u
    t = np.quantile(x, np.linspace(0, 1, knots + 2)[1:-1])
    try:
        return LSQUnivariateSpline(x, y, t, k=3)(x)
    except ValueError:
        return y


def _focused(law, c_top: float, k: int) -> np.ndarray:
    """``k`` costs evenly on [low, c_top], ``k`` by quantile (equal probability under the
    law on [low, c_top]: dense where the sellers are, e.g. at 0 for F(c) = sqrt(c); issue
    #48), low + (c_top - low) 2^-j (j = 6..14: a bid function may rise like sqrt(c) at
    the bottom) when the first quantile cell is under a quarter of an even one, and the
    coarse sentinel costs above c_top."""
    lo, hi = law.support
    coarse = np.linspace(lo, hi, SENTINELS)
    q = np.linspace(0.0, float(law.cdf(c_top)), k)
    by_mass = np.clip(np.asarray(law.ppf(q), dtype=float), lo, c_top)
    even = np.linspace(lo, c_top, k)
    ends = lo + (c_top - lo) * 2.0 ** -np.arange(6, 15)  # where a bid can rise like sqrt(c)
    if not by_mass[1] - lo < (c_top - lo) / (4 * k):  # only for mass piled at the bottom
        ends = ends[:0]  # (on a sample, crowded noisy responses there bias the fit)
    grid = np.concatenate((even, by_mass[np.isfinite(by_mass)], ends, coarse[coarse > c_top]))
    grid = np.unique(grid)
    return grid[np.concatenate(([True], np.diff(grid) > 1e-9 * (hi - lo)))]  # no near-twins


def _start(setup: _Setup, opt: _Options, init) -> _State:
    inits = _per_class(init, len(setup.classes.laws), "init")
    costs, bids = [], []
    for law, b0 in zip(setup.classes.laws, inits, strict=True):
        c = _focused(law, law.support[1], opt.grid)
        b = np.clip(_as_bidfn(b0)(c), *setup.z_range)
        costs.append(c)
        bids.append(np.maximum.accumulate(b))
    return _State(costs, bids, [d.support[1] for d in setup.classes.laws], setup.z_range[1])


def _refocus(setup: _Setup, state: _State, opt: _Options, first: bool) -> None:
    """Focus each class's cost grid on [low, c_top]: above z_top no report gets anything."""
    z_lo, z_hi = setup.z_range
    step = (z_hi - z_lo) / (SENTINELS - 1)
    for g, law in enumerate(setup.classes.laws):
        lo, hi = law.support
        top = float(np.clip(state.z_top + step, lo + (hi - lo) / (SENTINELS - 1), hi))
        if top > state.c_top[g] or (first and top < state.c_top[g]):
            state.c_top[g] = top
            new = _focused(law, top, opt.grid)
            state.bids[g] = np.interp(new, state.costs[g], state.bids[g])
            state.costs[g] = new


@dataclass
class _Trace:
    """The iteration's record: residuals sup|BR - b| (``history``), the ex-ante gains of
    the responses on their own sample (``gains``) and the relative epsilons measured
    (``epsilons``: exact on the interim path, NaN where not measured), the max over
    classes each; which rule stopped it; on the interim path the best iterate."""

    iterations: int = 0
    stopped_by: str = "max_iter"
    history: list[float] = field(default_factory=list)
    gains: list[float] = field(default_factory=list)
    epsilons: list[float] = field(default_factory=list)
    best: int = 0  # the iteration whose bids are returned
    best_state: tuple | None = None
    final_checks: list | None = None  # a first verification that found no gain at all
    tail: list = field(default_factory=list)  # sampled paths: the tail's iterates
    jump_log: list = field(default_factory=list)  # per iteration and class, the jump cells

    def persistent(self, g: int) -> list[tuple[float, float]]:
        """Class g's jump cells (cost, cost) of the responses in each of the last
        ``_PERSIST`` iterations: on a sample, responses jump here and there from noise
        (first price, 2 sellers: rises of 10-14% of the range), a jump of the game
        stays in its cell."""
        if len(self.jump_log) < _PERSIST:
            return []
        last = [set(log[g]) for log in self.jump_log[-_PERSIST:]]
        return sorted(set.intersection(*last))

    @property
    def converged(self) -> bool:
        return self.stopped_by not in ("max_iter", "stalled")


#: iterations in a row whose responses jump in the same cell for the jump to be the game's
_PERSIST = 3


def _stop_rule(
    opt: _Options, plan: _Schedule, it: int, exact: bool, residual, gain, eps, width
) -> str | None:
    """Which stopping rule fires after iteration ``it`` (None: go on): on a sample only
    from the schedule's ``first_stop`` on (docs/equilibrium.md)."""
    if residual == 0.0:
        return "residual"
    if it == 1 and eps <= (opt.eps_tol if exact else opt.verify_tol):  # the start certified
        return "epsilon" if exact else "verified"
    if it < 5 or (not exact and it < plan.first_stop):
        return None
    if exact:  # the exact epsilon is the criterion (the ex-ante gain is too lax)
        return "epsilon" if eps <= opt.eps_tol else None
    if residual <= opt.tol * width:
        return "residual"
    if gain <= opt.gain_tol:
        return "gain"
    return "verified" if eps <= opt.verify_tol else None  # NaN where not verified


def _width(setup) -> float:
    """The widest class support: the scale of the ``residual`` rule."""
    return max(d.support[1] - d.support[0] for d in setup.classes.laws)


def _iterate(setup, opt, oracle, train, state, progress, rng) -> _Trace:
    """Damped best responses, all classes at once, until a stopping rule fires
    (``_stop_rule``; docs/equilibrium.md, "The method")."""
    from sklearn.isotonic import isotonic_regression  # 0.8 s to import: only when solving
    from tqdm import tqdm

    trace = _Trace()
    exact = oracle.path == "interim"
    width = _width(setup)
    plan = opt.schedule(oracle.path)
    bar = tqdm(total=opt.max_iter, desc="best responses", file=sys.stderr, disable=not progress)
    for it in range(1, opt.max_iter + 1):
        train = _opponents(setup, opt, state, train, it, exact, rng)
        share = 1 if opt.tilt > 1 else plan.share(it)
        sample = train if share == 1 else train.prefix(share)
        rs = _responses(setup, opt, plan, it, oracle, sample, state, exact)
        # one class only: with several, the common lowest bid's knife edge looks like a
        # jump, and cutting there broke the asymmetric first price (exact eps 0.3% -> 18%)
        # jumps of the first iterations are the start's transient (from the truth the
        # cheapest costs answer an atom at the others' lowest bid: F(c) = c^0.3, cut there,
        # exact eps 9% -> 78%): logged once the damped step is at its floor
        # (and only from iterations whose candidates include the current bids: without
        # them the responses are a coarse grid's, steps that look like jumps)
        single = len(rs) == 1 and it + 1 >= 1.0 / opt.damping and it >= plan.current_from
        logged = zip(state.costs, rs, strict=True)
        trace.jump_log.append([_jumps_of(c, r) if single else [] for c, r in logged])
        brs = [
            np.clip(
                # the closest non-decreasing fit (pool adjacent violators)
                isotonic_regression(
                    _smooth(c, r.bids, opt.knots, r.z_live, law, trace.persistent(g))
                ),
                *setup.z_range,
            )
            for g, (c, r, law) in enumerate(zip(state.costs, rs, setup.classes.laws, strict=True))
        ]
        residual = max(float(np.max(np.abs(br - b))) for br, b in zip(brs, state.bids, strict=True))
        gain = max(r.gain for r in rs)
        eps = _epsilon_now(setup, opt, plan, oracle, sample, state, it, rng, residual, trace)
        trace.iterations = it
        trace.history.append(residual)
        trace.gains.append(gain)
        trace.epsilons.append(eps)
        if exact and eps <= min(trace.epsilons):  # the bids before this iteration's update
            trace.best = it
            trace.best_state = ([*state.costs], [*state.bids], [*state.c_top], state.z_top)
        bar.update(1)
        bar.set_postfix(_shown(residual=residual, gain=gain, eps=eps))
        rule = _stop_rule(opt, plan, it, exact, residual, gain, eps, width)
        if rule is not None:
            trace.stopped_by, trace.best = rule, it
            break
        if exact and opt.patience and it - trace.best >= opt.patience:
            trace.stopped_by = "stalled"
            break
        step = max(plan.floor(it, opt.damping), 1.0 / (it + 1))  # fictitious play, floored
        state.bids = [b + step * (br - b) for br, b in zip(brs, state.bids, strict=True)]
        state.z_top = max(r.z_top for r in rs)
        _refocus(setup, state, opt, it == 1)
        if not exact and opt.resample and it > plan.tail_from:  # the tail, averaged
            trace.tail.append(([*state.costs], [b.copy() for b in state.bids]))
    if trace.stopped_by == "max_iter" and trace.tail:
        state.bids = _tail_average(state.costs, trace.tail)
    if trace.stopped_by in ("max_iter", "stalled"):
        trace.best = trace.best or trace.iterations
        if trace.best_state is not None:  # the interim path's best iterate
            state.costs, state.bids, state.c_top, state.z_top = trace.best_state
    bar.close()
    return trace


def _sharpen(setup, opt, oracle, state: _State, trace: _Trace, rng) -> list[list[float]]:
    """Every jump of the bid tables made a step at the cost where its branches pay the
    same (``sharpen_jump``), after the grid costs around it are solved again
    (``_around_jump``), ``_SHARPEN_ROUNDS`` times, each against the table the last one
    left: the costs around a jump best-respond to each other too (pay-as-bid's cheapest
    sellers: a rival of the lower branch takes much of the allocation), so one re-solve
    against the damped table's bids left them off (issue #48).  The jumps: those of the
    responses in each of the last ``_PERSIST`` iterations (``_Trace.persistent``; the
    damped bids smear a jump over cells, so they are not searched for it), then the
    steps made.  On the interim path against the exact report laws, else on a fresh
    sample of ``eval_samples`` draws, drawn only when there is a jump.  Per class the
    costs of the steps (``options["jumps"]``)."""
    found = [
        [
            (int(np.searchsorted(c, lo, "right")) - 1, int(np.searchsorted(c, hi, "left")))
            for lo, hi in trace.persistent(g)
        ]
        for g, c in enumerate(state.costs)
    ]
    steps: list[list[float]] = [[] for _ in found]
    if not any(found):
        return steps
    fresh = None
    if oracle.path != "interim":
        markets, per_market = opt.markets(oracle, opt.eval_samples, setup.classes)
        fresh = Sample(setup.classes, markets, per_market, rng, placed=oracle.outcome_only)
    for _ in range(_SHARPEN_ROUNDS):
        made = [_steps_of(setup, opt, oracle, fresh, state, g, cl) for g, cl in enumerate(found)]
        steps = [new or old for new, old in zip(made, steps, strict=True)]
        found = [[_step_cell(state.costs[g], at) for at in made[g]] for g in range(len(found))]
        if not any(found):
            break
    return steps


#: rounds of ``_sharpen``: each solves the costs around a jump again against the last
_SHARPEN_ROUNDS = 3


def _step_cell(costs: np.ndarray, at: float) -> tuple[int, int]:
    """The (index, index) cell of the step made at cost ``at`` (its costs at -+ 1e-9)."""
    k = int(np.searchsorted(costs, at))
    return k - 1, k


def _steps_of(setup, opt, oracle, fresh, state: _State, g: int, cells) -> list[float]:
    """Class g's jumps in ``cells`` made steps (from the top), against the current
    table's bids on the ``fresh`` sample (the exact report laws on the interim path);
    the costs of the steps made."""
    sample: Sample | Interim
    R: np.ndarray | None = None
    if fresh is None:
        sample = Interim(setup.classes, state.costs, state.bids, setup.cdfs)
    else:
        sample, R = fresh, reports_of(fresh, setup.classes, state.bidfns())
    steps: list[float] = []
    floors = [0] + [j for _, j in cells[:-1]] if cells else []
    for cell, floor in zip(reversed(cells), reversed(floors), strict=True):  # from the top
        near = _around_jump(setup, opt, oracle, sample, R, g, state, floor, cell)
        if near is None:
            continue
        x, y, near_cell = near
        done = sharpen_jump(oracle, sample, R, g, x, y, near_cell, setup.z_range)
        if done is not None:
            state.costs[g], state.bids[g], at = done
            steps.insert(0, at)
    return steps


def _around_jump(setup, opt, oracle, sample, R, g, state, floor, cell):
    """Class g's table with the grid costs from ``_NEAR`` below the jump ``cell`` (not
    below grid index ``floor``; all of them when the piece below is too short for the
    spline, whose bids are then raw damped responses) to ``_NEAR`` above it replaced by
    best responses on the sample at ``_NEAR_COSTS`` even costs over that range
    (``_NEAR_REFINE`` rounds of refinement, undamped: a damped iterate there averages
    the two branches while the jump moves, and these sellers are few: their bids barely
    move the others'); (costs, bids, the jump's cell in them), or None when those
    responses do not jump."""
    i, j = cell
    costs, bids = state.costs[g], state.bids[g]
    top = int(np.searchsorted(costs, state.c_top[g], "right")) - 1
    first = floor if i - floor + 1 < opt.knots + 8 else max(floor, i - _NEAR)
    x = np.linspace(costs[first], costs[max(j, min(j + _NEAR, top))], _NEAR_COSTS)
    law = setup.classes.laws[g]
    resp = best_response(
        oracle, sample, R, g, x, np.interp(x, costs, bids), setup.z_range, state.z_top,
        opt.bid_grid, prior_weights(law, x), _NEAR_REFINE,
    )  # fmt: skip
    br = np.maximum.accumulate(resp.bids)
    inner = jump_cells(x, br, float(np.ptp(bids[: top + 1])))  # a jump of the whole table's
    if not inner:
        return None
    a, b = inner[0]
    below, above = costs < x[0], costs > x[-1]
    xs = np.concatenate((costs[below], x, costs[above]))
    ys = np.maximum.accumulate(np.concatenate((bids[below], br, bids[above])))
    return xs, ys, (int(below.sum()) + a, int(below.sum()) + b)


def _jumps_of(costs: np.ndarray, response) -> list[tuple[float, float]]:
    """The (cost, cost) cells where the responses that sell jump (``jump_cells``)."""
    br = response.bids
    sells = np.flatnonzero(br <= response.z_live)
    end = int(sells[-1]) + 1 if sells.size else 0
    return [(float(costs[i]), float(costs[j])) for i, j in jump_cells(costs[:end], br[:end])]


def _tail_average(costs: list[np.ndarray], tail: list) -> list[np.ndarray]:
    """Per class the mean of the tail's bid functions at ``costs`` (each iterate's table
    interpolated; a mean of monotone functions is monotone).  Sampled paths stopped by
    ``max_iter``: with fresh opponents each iteration the damped step (floored at
    ``damping``) keeps the last few samples' noise in the bids, and averaging the last
    eighth's iterates (Polyak-Ruppert; the second half's and the last quarter's kept
    the drift of the 2-unit game's iterates, n = 3 on U[1, 3]: L∞ 0.027 and 0.013) removes
    most of it (issue #48: first price, 4 sellers,
    sampled path, the last iterate's exact relative epsilon 1.47%, L∞ 0.0070)."""
    return [
        np.mean([np.interp(c, tc[g], tb[g]) for tc, tb in tail], axis=0)
        for g, c in enumerate(costs)
    ]


def _shown(**values: float) -> dict[str, str]:
    """The progress bar's numbers: those measured this iteration (no NaN), finite."""
    return {k: f"{v:.2g}" for k, v in values.items() if math.isfinite(v)}


def _epsilon_now(
    setup, opt, plan, oracle, sample, state, it, rng, residual=math.nan, trace=None
) -> float:
    """The relative epsilon of the current bids (max over classes) where it is measured:
    exactly on the interim path at every iteration; on the sampled paths every
    ``verify_every`` iterations once the full sample is used, as the upper 95% bound
    of a verification on fresh opponents (``samples`` draws); else NaN.  At the first
    iteration, when the responses nearly keep the start (an IC mechanism at the truth),
    a verification on a quarter of the draws with the density refinement: if it finds
    no gain at all it is the result's (``trace.final_checks``; issue #48: <= 2 s)."""
    if oracle.path == "interim":
        return _exact_epsilon(setup, opt, oracle, sample, state)
    warm = it >= plan.first_stop
    first = it == 1 and residual <= opt.tol * _width(setup)  # the start nearly kept (IC)
    if not first and not (
        warm and opt.verify_every and it % opt.verify_every == 0 and it < opt.max_iter
    ):
        return math.nan
    quick = dataclasses.replace(opt, eval_samples=opt.samples, eval_refine=0)
    if first:
        few = max(2, opt.samples // 4)
        quick = dataclasses.replace(opt, samples=few, eval_samples=few)
    G = len(setup.classes.laws)
    checks = _verify(
        setup, quick, oracle, state.bidfns(), state.costs, state.c_top, state.z_top, rng, [None] * G
    )
    if first and trace is not None and all(ch.epsilon <= _NO_GAIN * _width(setup) for ch in checks):
        trace.final_checks = checks
    return max(_upper_relative(ch) for ch in checks)


def _upper_relative(check: EpsilonResult) -> float:
    """A verification's epsilon upper 95% bound relative to the utility (0 when the
    bound is 0, infinite when the utility is not positive)."""
    upper = check.epsilon_ci[1]
    if upper <= 0:
        return 0.0
    return upper / check.utility if check.utility > 0 else math.inf


def _final_rule(trace: _Trace, checks: list[EpsilonResult], opt: _Options, path: str) -> str:
    """The stopping rule reported: the iteration's, except on the ``outcome`` path, where
    a run that reached ``max_iter`` is ``verified_final`` when the final verification
    of the bids returned (the tail's average; fresh opponents the solve never saw)
    puts every class's epsilon / u within ``verify_tol``: the test ``converged``
    applies, at no extra call.  There ``verify_every`` is 0 (a check costs about a
    verification) and the responses' ex-ante gain on their own sample stays above
    ``gain_tol``: on Beta(1, 3) 0.26-0.57% at the end of runs whose exact epsilon / u
    is 0.11-0.52% (seeds 0-9), the noise of 512 markets; the verification's upper 95%
    bound (the in-loop ``verified`` rule's test) is 1.3-2.2% there (issue #48)."""
    if path != "outcome" or trace.stopped_by != "max_iter":
        return trace.stopped_by
    if all(ch.epsilon_relative <= opt.verify_tol for ch in checks):
        return "verified_final"
    return trace.stopped_by


#: the rules after which the tail's iterates averaged are returned
_TAIL_RULES = ("max_iter", "verified_final")


#: a gain at most this times the support's width is float noise, not a gain: an IC
#: mechanism's numerically integrated payments (offline: Myerson's integral) leave
#: gains of 1e-18 to 1e-11 at the truth (issue #48: it then verified twice, 91 s for 5 sellers)
_NO_GAIN = 1e-10


def _exact_epsilon(setup, opt, oracle, laws, state) -> float:
    """The interim path's exact relative epsilon of the current bids (the max over the
    classes), at the verification's evaluation costs and the grid costs."""
    out = []
    for g, law in enumerate(setup.classes.laws):
        costs = np.union1d(eval_costs_for(law, state.c_top[g], opt.eval_grid), state.costs[g])
        bids = np.interp(costs, state.costs[g], state.bids[g])
        out.append(
            interim_epsilon(oracle, laws, g, law, costs, bids, setup.z_range, state.z_top, opt)
        )
    return max(out)


def _opponents(setup, opt, state, train, it, exact, rng):
    """This iteration's opponents: on the interim path their report laws (exact); with
    resample a fresh scramble after the first (the damped average cancels its noise)."""
    if exact:
        return Interim(setup.classes, state.costs, state.bids, setup.cdfs)
    if opt.resample and it > 1:
        return Sample(setup.classes, train.markets, train.per_market, rng, opt.tilt, train.placed)
    return train


def _responses(setup, opt, plan, it, oracle, sample, state, exact) -> list:
    """Every class's best responses to the current bids, among the candidate reports of
    iteration ``it``'s phase (``_Schedule``: the outcome path's late iterations try
    the current bids, ``late_sentinels`` and the live range's ends; its first early
    ones not the current bids)."""
    R = None if exact else reports_of(sample, setup.classes, state.bidfns())
    late = plan.late(it)
    return [
        best_response(
            oracle,
            sample,
            R,
            g,
            state.costs[g],
            state.bids[g],
            setup.z_range,
            state.z_top,
            plan.late_bid_grid if late else opt.bid_grid,
            prior_weights(law, state.costs[g]),
            opt.br_refine,
            plan.late_sentinels if late else SENTINELS,
            plan.tries_current(it),
        )  # fmt: skip
        for g, law in enumerate(setup.classes.laws)
    ]


def _verify(
    setup, opt, oracle, bidfns, state_costs, c_tops, z_top, rng, references, exact=False,
    control=None,
):  # fmt: skip
    """Per class, epsilon and the metrics on opponents the solve never saw, at evaluation
    costs refined until two successive densities agree (``_refined``; the density used
    is ``EpsilonResult.eval_cells``).  Each cost's best deviation is searched over every
    report of the range and its gain measured.  With ``exact`` (the mechanism has an
    exact ``interim``, the sellers no data) against the bids' exact report laws
    (``_exact_laws``: one "market", no noise; the epsilon CI is the point), searched
    and measured there, the peaks refined (``_around_peaks``), the win rates on a
    modest fresh sample (``_EXACT_WIN_MARKETS``); when a bid table is not monotone
    (an ``Interim`` needs non-decreasing bids) on fresh markets as below.  Else on
    fresh markets: on most paths searched on one sample and measured on another; on the
    ``outcome`` path, where every report costs a call per market, and on a
    deterministic mechanism's ``deviations`` path, searched and measured on the same
    fresh markets (``_searched_on_fresh``, ``_search_sample``; docs/equilibrium.md,
    "Verification").  ``control``: a black box's rank interim, the sampled gains'
    control variate (``equilibrium_rank.ControlledOracle``; the win rates stay the box's)."""
    laws = _exact_laws(setup, bidfns, state_costs, c_tops) if exact else None
    exact_oracle = None if laws is None else Oracle(setup.mech, exact=True)
    gains_oracle = oracle if laws is not None else _controlled(setup, oracle, control, bidfns,
                                                               state_costs, c_tops)  # fmt: skip
    one_sample = oracle.outcome_only and laws is None
    on_fresh = _searched_on_fresh(oracle) and laws is None
    sampled_search = not on_fresh and laws is None
    search = _search_sample(setup, opt, oracle, bidfns, rng) if sampled_search else None
    refs, tables = _references(references, setup.classes.laws)

    def drawn(samples: int):
        """A fresh sample, the bids' reports there and the references' (for their own
        win rates, against the reference profile; on the ``outcome`` path on the first
        ``_WIN_MARKETS`` markets, a net itself: a win rate only decides >= 1%)."""
        markets, per_market = opt.markets(oracle, samples, setup.classes)
        fresh = Sample(setup.classes, markets, per_market, rng, opt.tilt, one_sample)
        on = fresh.prefix(max(1, fresh.markets // _WIN_MARKETS)) if one_sample else fresh
        R_ref = None if tables is None else (on, reports_of(on, setup.classes, tables))
        return fresh, reports_of(fresh, setup.classes, bidfns), R_ref

    first = drawn(opt.eval_samples if laws is None else _EXACT_WIN_MARKETS)
    out = []
    for g, law in enumerate(setup.classes.laws):

        def at(cells, extra=(), more=(), g=g, law=law, opponents=first):
            fresh, Rf, R_ref = opponents
            dens = opt.eval_grid * 2 ** np.arange(int(round(math.log2(cells / opt.eval_grid))) + 1)
            grids = [eval_costs_for(law, c_tops[g], d, one_sample) for d in dens]
            dense = () if laws is None else _exact_eval_costs(law, c_tops[g], laws, g, setup)
            costs = np.unique(np.concatenate([*grids, dense, np.asarray(extra, dtype=float)]))
            bids = np.clip(bidfns[g](costs), *setup.z_range)
            # on the fresh markets the refinement is the peaks' (``_around_peaks``): at
            # every cost it added 2 columns a round (pay-as-bid, 30 sellers: 66 M calls)
            if laws is not None:
                return _measured_exactly(
                    exact_oracle, laws, setup, opt, g, law, costs, bids, z_top, more, refs[g]
                )
            wins = None if R_ref is None else _win_rates(oracle, *R_ref, g, refs[g](costs))
            on, R_on, rounds = (fresh, Rf, 0) if search is None else (*search, opt.refine)
            z_star = search_reports(
                gains_oracle, on, R_on, g, costs, bids, setup.z_range, z_top, opt.check_grid,
                rounds, more,
            )  # fmt: skip
            own_wins = None if gains_oracle is oracle else _win_rates(oracle, fresh, Rf, g, bids)
            return measure(
                gains_oracle, fresh, Rf, g, law, costs, bids, z_star, refs[g], wins, own_wins
            )

        check = _refined(at, opt.eval_grid, opt.eval_refine)
        if on_fresh or laws is not None:
            step = (setup.z_range[1] - setup.z_range[0]) / (opt.check_grid - 1)
            check = _around_peaks(check, at, step)
        if one_sample:
            check = _until_certifiable(check, at, drawn, opt.eval_refine, opt.verify_tol)
        if laws is not None:
            check = _exact_final(check, at, setup, (exact_oracle, laws), g, bidfns[g],
                                 (oracle, first, refs[g]))  # fmt: skip
        out.append(check)
    if exact_oracle is not None:
        oracle.calls += exact_oracle.calls
    return out


def _controlled(setup, oracle, control, bidfns, state_costs, c_tops):
    """The sampled verification's oracle of the gains: ``oracle`` with a black box's rank
    interim ``control`` as a control variate (``ControlledOracle``) when there is one and
    the bids have exact report laws; else ``oracle`` itself."""
    if control is None:
        return oracle
    report_laws = _exact_laws(setup, bidfns, state_costs, c_tops)
    return oracle if report_laws is None else ControlledOracle(oracle, control, report_laws)


def _references(references, laws):
    """(the references as bid functions, or None per class; tabulated, they may be slow
    and 1-D, when every class has one, else None)."""
    refs = [None if r is None else _as_bidfn(r) for r in references]
    if any(r is None for r in refs):
        return refs, None
    return refs, [_tabulated(r, law) for r, law in zip(refs, laws, strict=True)]


def _searched_on_fresh(oracle) -> bool:
    """Whether the verification searches each cost's best deviation on the fresh markets
    that measure it (one sample): where the oracle remembers the columns evaluated (the
    ``outcome`` path and a deterministic mechanism's own ``deviations``), so the search's
    columns are the measure's.  The same-sample maximum is conservative (the mean of a
    maximum is at least the maximum of the means): noise only raises epsilon.  A separate
    search sample under-reported on the ``deviations`` path (issue #48: pay-as-bid, 30
    sellers, Beta(2, 5), where a cheap seller's gains vary most from market to market;
    its 512 markets x 3 deviators picked reports that lost up to 14% of u on the fresh ones,
    and printed 0.11 where an independent measure finds 0.17 [0.12, 0.22]; a finer
    report grid there, 513 reports and 6 rounds, printed 0.10: not the grid, its noise)."""
    return oracle.outcome_only or (
        oracle.path == "deviations" and not getattr(oracle.mech, "randomized", False)
    )


#: on the exact verification, the fresh markets on which the win rates are measured
#: (the bids' own and a reference's: ``E > 0`` against report laws is no probability)
_EXACT_WIN_MARKETS = 1024

#: ``_exact_laws``: each class's bids tabulated at this many costs evenly and as many by
#: quantile of its law (with the solve's own costs, the support's ends and the live top)
_EXACT_TABLE = 4097


def _exact_laws(setup, bidfns, state_costs, c_tops) -> Interim | None:
    """The opponents' exact report laws under the bid functions (an ``Interim``): each
    class's bids at ``_EXACT_TABLE`` costs evenly and as many by quantile of its law
    (a density singular at an end has its mass there) and 512 quantiles geometric towards
    each end (``tail_costs``: a bid function with structure at the quantile 1e-6 of F =
    sqrt(c), read at the quantiles 1/4096 apart, was another profile, and its 18% gain
    printed as 7.7%), the support's ends, the live top
    and the solve's costs (``state_costs``: a piecewise-linear table's knots, so its
    report law is exact), clipped to the report range; the laws' own cdfs, not the
    solve's tables of them (``tabulated_cdf``: its chords are off by up to h^2 F''/8, 2e-7
    at F = 0.0028 on Beta(2, 5), and an all-pay contest's weak class, u 4.8e-5, printed
    1.12% of u where the profile's exact gain is 0.35%; the error moves a gain either
    way, issue #48).  None when a class's bids fall anywhere by more than 1e-12
    (an ``Interim`` inverts non-decreasing bids): then the sampled verification."""
    costs, bids = [], []
    for g, law in enumerate(setup.classes.laws):
        lo, hi = law.support
        q = np.asarray(law.ppf(np.linspace(0.0, 1.0, _EXACT_TABLE)), dtype=float)
        own = () if state_costs is None else np.asarray(state_costs[g], dtype=float)
        x = np.concatenate((np.linspace(lo, hi, _EXACT_TABLE), q, tail_costs(law, 512, 0.1),
                            [lo, hi, c_tops[g]], own))  # fmt: skip
        x = np.unique(np.clip(x[np.isfinite(x)], lo, hi))
        y = np.clip(np.asarray(bidfns[g](x), dtype=float), *setup.z_range)
        if y.shape != x.shape or not np.all(np.diff(y) >= -1e-12):
            return None
        costs.append(x)
        bids.append(np.maximum.accumulate(y))
    return Interim(setup.classes, costs, bids)  # cdfs None: the laws' own


def _exact_eval_costs(law, c_top: float, laws: Interim, g: int, setup) -> np.ndarray:
    """The exact verification's costs besides ``eval_costs_for``'s (a cost there is a
    row of vector operations, not markets): ``_EXACT_COSTS`` evenly on the support and
    as many of equal probability up to the live top and, where class g bids the top of
    the range from a cost below it (``_bidding_top`` of its exact report laws ``laws``:
    an all-pay class that exits), as many again up to that cost (issue #48:
    3 x Beta(2, 5) + 2 x Beta(5, 2), the Beta(5, 2) class bids below the top on 0.14%
    of its mass, where 29 of the 2,467 costs fell; its gains there are a sawtooth of
    teeth about 2e-4 wide, and it printed 0.366% of u where the independent measure at
    2,001 costs finds 0.389%), and the live range's ends dense
    to w 2^-24 (issue #48: gains in bands the evaluation grid's cells missed, the
    independent measure at 1001 costs found them: power-reserve-4 at c = 7e-7, 0.52%
    where 0.29% was printed; pab-2unit-reserve at c = 0.5992, just under its reserve
    0.6, 0.15% where 0.03% was), and the law's ends dense in probability to the
    quantiles 1e-15 and 1 - 1e-15 (``tail_costs``: all-pay, 8 sellers, F = sqrt(c):
    the gain 2.9% of u at c = 1e-9, the quantile 3e-5, where the costs stopped at
    6e-8 and 1.4% was printed)."""
    lo, hi = law.support
    top = min(c_top, hi)
    q = (np.arange(_EXACT_COSTS) + 0.5) / _EXACT_COSTS * float(law.cdf(top))
    ends = (top - lo) * 2.0 ** -np.arange(2, 25)
    tails = tail_costs(law, _TAIL_COSTS)
    bidding, bid_top = (), _bidding_top(laws, g, setup.z_range[1])
    if lo < bid_top < top:
        bidding = law.ppf((np.arange(_EXACT_COSTS) + 0.5) / _EXACT_COSTS * float(law.cdf(bid_top)))
    x = np.concatenate((np.linspace(lo, hi, _EXACT_COSTS), law.ppf(q), bidding, lo + ends,
                        top - ends, tails[tails <= top]))  # fmt: skip
    return np.clip(x[np.isfinite(x)], lo, hi)


def _bidding_top(laws: Interim, g: int, z_hi: float) -> float:
    """The first cost of class g's table from which it bids the top of the report range
    ``z_hi`` (its support's top when it never does)."""
    x, y = laws.costs[g], laws.bids[g]
    at_top = np.flatnonzero(y >= z_hi - 1e-12 * max(1.0, abs(z_hi)))
    return float(x[at_top[0]]) if at_top.size else float(x[-1])


#: ``_exact_eval_costs``: its costs evenly and by probability, and geometric in the
#: probability towards each end
_EXACT_COSTS, _TAIL_COSTS = 1025, 64

#: the exact verification's search: at least this many reports on the range (and on the
#: live range) and this many more rounds of local refinement than ``refine`` (a round
#: is one report per cost there: the pure method's asym-reserve, a class-0 seller of
#: cost 0.0195 undercutting the other class's lowest bid, printed 0.95% where the
#: independent measure finds 1.09%, the deviation a bracket of 0.0005 short of it)
_EXACT_REPORTS, _EXACT_MORE_ROUNDS = 513, 8
#: and reports geometric just under the range's top and the live top, 2^-9 .. 2^-44 of
#: the range below (an all-pay class that exits bids the top, its atom; a report just
#: under it beats the atoms: 3 of U[0, 1] against one of Beta(5, 2), the gain 5.8e-7 at
#: 5e-9 under the top, 0.026% of u printed where the independent measure finds 0.05%)
_UNDER_TOP = 2.0 ** -np.arange(9, 45)
#: and refined from each cost's this many best local maxima of the reports, not only
#: from the best (``refine_best``: a narrow peak between two reports can beat it)
_EXACT_STARTS = 4


def _measured_exactly(oracle, laws, setup, opt, g, law, costs, bids, z_top, more, ref):
    """Class g's best deviations searched and measured against the exact report laws
    ``laws`` (``search_reports`` with ``refine`` rounds, then ``measure``: one "market"
    of weight 1, so the CI is the point); its win rates are ``_with_win_rates``'."""
    z_lo, z_hi = setup.z_range
    under_tops = [top - (top - z_lo) * _UNDER_TOP for top in (z_hi, z_top) if top > z_lo]
    z_star = search_reports(
        oracle, laws, None, g, costs, bids, setup.z_range, z_top,
        max(opt.check_grid, _EXACT_REPORTS), opt.refine + _EXACT_MORE_ROUNDS,
        np.concatenate((np.asarray(more, dtype=float), *under_tops)), _EXACT_STARTS,
    )  # fmt: skip
    check = measure(oracle, laws, None, g, law, costs, bids, z_star, ref, np.ones(costs.size))
    return dataclasses.replace(check, verification="exact")


def _exact_final(check, at, setup, exact, g, bidfn, wins) -> EpsilonResult:
    """The exact verification's last steps for class g: the screen between the costs
    (``_between_costs``, ``exact``: its oracle and report laws; not on a table,
    ``_read_off_a_table``), then the win rates at the final costs (``_with_win_rates``;
    ``wins``: the oracle, the fresh sample and the reference)."""
    if not _read_off_a_table(setup.mech):
        exact_oracle, laws = exact
        check = _between_costs(check, at, exact_oracle, laws, g, bidfn, setup.z_range)
    oracle, first, ref = wins
    bids = np.clip(bidfn(check.eval_costs), *setup.z_range)
    return _with_win_rates(check, oracle, first, g, setup.classes.laws[g], bids, ref)


def _with_win_rates(check: EpsilonResult, oracle, drawn, g, law, bids, ref) -> EpsilonResult:
    """An exact ``check`` with its win rates (``E > 0`` against report laws is no
    probability) measured once, at its final costs, on the fresh markets ``drawn``
    (``_EXACT_WIN_MARKETS``): the bids' against the bids, a reference's against the
    reference profile when one is given for every class, and the distances to the
    reference on the costs where it (else the bids) wins >= 1%."""
    fresh, R, R_ref = drawn
    own = _win_rates(oracle, fresh, R, g, bids)
    if ref is None:
        return dataclasses.replace(check, win_rates=own)
    costs = check.eval_costs
    wins = own
    if R_ref is not None:  # against the reference profile (on, its reports there)
        wins = _win_rates(oracle, R_ref[0], R_ref[1], g, ref(costs))
    return dataclasses.replace(
        check, win_rates=own, distances=distances(law, costs, bids, wins, ref)
    )


def _search_sample(setup, opt, oracle, bidfns, rng) -> tuple[Sample, np.ndarray]:
    """The sample on which the best deviations are searched (``samples`` draws) and the
    bids' reports there, apart from the fresh one on which their gains are measured:
    where a report is cheap to price (a batch, ``deviations``, ``interim``).  On the
    ``outcome`` path there is none: a separate search spent 0.94 M of the black box's
    2.9 M calls (first price, 4 sellers, 1024 markets x about 770 reports) and, picking
    each cost's deviation by the noise of its own markets, measured less than the exact
    gain (a bump of 0.01 on the bids: printed 0.53% and 0.63% where the exact epsilon / u
    is 0.71%); the same-sample search there is ``_verify``'s."""
    markets, per_market = opt.markets(oracle, opt.samples, setup.classes)
    search = Sample(setup.classes, markets, per_market, rng, opt.tilt)
    return search, reports_of(search, setup.classes, bidfns)


#: on the ``outcome`` path, the fresh markets on which a reference's win rates are
#: measured (they decide the costs where it wins >= 1%, for L2 and L-inf): the black
#: box's verification spent 0.39 M of its 3.5 M calls on them at 4096 markets
_WIN_MARKETS = 256


def _agrees(denser: float, coarser: float) -> bool:
    """A denser evaluation's epsilon / u agrees with a coarser one's: at most 10% (and
    1e-4) above it (issue #48: a denser evaluation must not find more)."""
    return denser <= 1.1 * coarser + 1e-4


def _until_certifiable(check: EpsilonResult, at, drawn, rounds: int, tol: float) -> EpsilonResult:
    """On the ``outcome`` path (one sample searched and measured), ``check`` measured
    again on fresh samples of twice as many markets while its epsilon / u is above
    ``tol`` and that of all the markets and of their first half (a prefix of the net,
    at no cost) disagree (by more than 10% and 1e-4 either way: the gap is noise), at
    most ``rounds`` doublings; the last measured is returned.  Only then: the
    same-sample maximum is at least the exact gain on average, and more markets only
    lower it (less noise to pick), so below ``tol`` they cannot change the verdict."""
    for _ in range(rounds):
        whole, half = check.epsilon_relative, check.epsilon_half / max(check.utility, 1e-300)
        if check.utility <= 0 or whole <= tol or (_agrees(whole, half) and _agrees(half, whole)):
            return check
        markets = drawn(2 * check.eval_markets)
        check = _as_density_of(
            check, at(check.eval_cells, check.eval_costs, check.best_reports, opponents=markets)
        )
    return check


def _as_density_of(check: EpsilonResult, again: EpsilonResult) -> EpsilonResult:
    """``again`` (``check`` evaluated with more costs, reports or markets) reported at
    ``check``'s density: its ``eval_cells`` and whether that agreed (``_refined``)."""
    return dataclasses.replace(again, eval_cells=check.eval_cells, agreed=check.agreed)


#: ``_around_peaks``: the costs of the largest gains refined, and the rounds of halving
_PEAKS, _PEAK_ROUNDS = 2, 4


def _around_peaks(check: EpsilonResult, at, step: float) -> EpsilonResult:
    """Where the search is the fresh markets' own (``_searched_on_fresh``: the ``outcome``
    path and a deterministic mechanism's ``deviations``, whose report columns are
    remembered, so a round costs only its new columns; on the batched path every round
    would evaluate everything again) and on the exact verification (a report is one
    evaluation of the report laws),
    ``check`` evaluated again with, at each of its ``_PEAKS`` largest positive gains,
    the midpoints of the cost to its neighbours added as costs and its best report
    -+ ``step`` / 2^r added as candidate reports, r = 1 .. ``_PEAK_ROUNDS`` (the
    brackets halve each round; nothing is dropped and one sample is searched and
    measured, so epsilon only grows): a gain
    concentrated in a band narrower than the evaluation grid's cells, or at a report
    between the candidate grid's, is measured at its top (issue #48: every seller
    bidding the equilibrium of first price, 4 sellers, U[0, 1], plus a bump of 0.01 of
    width 0.02 at c = 0.3, exact epsilon / u 5.0%: the grid (then 34 cells) printed
    3.6-3.8%; a bump of 0.005 wide 0.01 at c = 0.02, exact 8.4%: 6.3%)."""
    reports: list[float] = []
    for r in range(1, _PEAK_ROUNDS + 1):
        costs, gains, best = check.eval_costs, check.gains, check.best_reports
        peaks = [i for i in np.argsort(gains)[::-1][:_PEAKS] if gains[i] > 0]
        if not peaks:
            return check
        n = costs.size
        new = [0.5 * (costs[i] + costs[j]) for i in peaks for j in (i - 1, i + 1) if 0 <= j < n]
        reports += [best[i] + s * step / 2**r for i in peaks for s in (-1.0, 1.0)]
        check = _as_density_of(check, at(check.eval_cells, np.concatenate((costs, new)), reports))
    return check


#: ``_between_costs``: costs screened inside each cell of the evaluation costs, the
#: largest screened bounds measured, and the rounds
_SCREEN_PER_CELL, _SCREEN_COSTS, _SCREEN_ROUNDS = 16, 256, 3
#: a screened bound counts only above epsilon by this share of it (the fourth digit)
_SCREEN_TOL = 1e-3


def _between_costs(check: EpsilonResult, at, oracle, laws, g, bidfn, z_range) -> EpsilonResult:
    """The exact verification's ``check`` evaluated again with the costs between its
    evaluation costs where a larger gain can hide (issue #48).  A seller's best utility
    V(c) = max_z T(z) - c E(z) is convex in its cost (a maximum of lines), so inside a
    cell (c_i, c_i+1) of the evaluation costs it is at most the chord of V(c_i) and
    V(c_i+1), and the gain V(c) - U(c, b(c)) at most the chord less the utility of the
    bid; and at least the gain of either end's best report.  Both are screened at
    ``_SCREEN_PER_CELL`` costs in each cell (one report each: a vector operation on the
    report laws); where either exceeds epsilon (by ``_SCREEN_TOL`` of it) the
    ``_SCREEN_COSTS`` largest are added to the costs and the ends' best reports and
    the largest gains' to the reports (so the search there finds at least the screen's
    gain and epsilon only grows), up to ``_SCREEN_ROUNDS`` times.  A bid function that
    is a table of steps (the distributional method's) has gains that are a sawtooth in
    the cost: asym-3-power's U[0, 1] class printed 4.8e-5 of u, the independent measure
    at 1001 costs found 5.2e-5, and the screen a gain of 7.3e-5 at c = 0.00407 between
    two costs (it now prints 7.4e-5; a scan at 40,001 costs finds 6.8e-5)."""
    reports: list[float] = []
    for _ in range(_SCREEN_ROUNDS):
        costs, best = check.eval_costs, check.best_reports
        between, bound, left = _screened(check, oracle, laws, g, bidfn, z_range)
        over = np.flatnonzero(bound > check.epsilon * (1.0 + _SCREEN_TOL))
        if over.size == 0:
            return check
        pick = over[np.argsort(bound[over])[::-1][:_SCREEN_COSTS]]
        peaks = np.argsort(check.gains)[::-1][:_PEAKS]
        reports += [*best[left[pick]], *best[left[pick] + 1], *best[peaks]]
        again = at(check.eval_cells, np.concatenate((costs, between[pick])), reports)
        check = _as_density_of(check, again)
    return check


def _read_off_a_table(mech) -> bool:
    """Whether ``mech`` is a one-vector black box read off its rank interim's table of
    reports (``RankSurrogate``), interpolated between them: not screened between costs
    (a posted price's step in E, smeared over a cell of the table, showed as a gain of
    2.2e-5 at a cost 7e-5 under the price, where the box's own utility has none)."""
    return isinstance(mech, RankSurrogate) and not mech.interim.batched


def _screened(check: EpsilonResult, oracle, laws, g, bidfn, z_range):
    """``_between_costs``' screen: the costs inside the cells, per cost the larger of its
    bounds on the gain (the chord's and either end's report's), and its cell's left end."""
    x, z = check.eval_costs, check.best_reports
    V = check.utilities + check.gains  # the best utility found at each cost
    t = np.arange(1, _SCREEN_PER_CELL + 1) / (_SCREEN_PER_CELL + 1)
    left = np.repeat(np.arange(x.size - 1), t.size)
    tt = np.tile(t, x.size - 1)
    c = x[left] + tt * (x[left + 1] - x[left])
    b = np.clip(np.asarray(bidfn(c), dtype=float), *z_range)
    E, T = oracle.eps_pay(laws, None, g, np.concatenate((b, z)))  # each best report once
    Eb, Tb, Ez, Tz = E[0, : c.size], T[0, : c.size], E[0, c.size :], T[0, c.size :]
    ends = np.maximum(Tz[left] - c * Ez[left], Tz[left + 1] - c * Ez[left + 1])
    chord = V[left] + tt * (V[left + 1] - V[left])
    bound = np.maximum(chord, ends) - (Tb - c * Eb)
    return c, bound, left


def _tabulated(fn: BidFn, law) -> BidFn:
    """``fn`` at 513 costs (evenly and by quantile), linearly interpolated: the opponents'
    reports of a reference profile, for its win rates (a closed form by quadrature may
    take one cost at a time)."""
    lo, hi = law.support
    q = np.asarray(law.ppf(np.linspace(0.0, 1.0, 257)), dtype=float)
    x = np.unique(np.clip(np.concatenate((np.linspace(lo, hi, 257), q[np.isfinite(q)])), lo, hi))
    y = np.asarray(fn(x), dtype=float)
    return _linear(x, y)


def _win_rates(oracle, fresh, R, g, bids) -> np.ndarray:
    """Per bid, the share of the fresh markets where it gets anything when the others
    report R (the reference's bids against the reference profile, or the bids')."""
    E = oracle.eps_pay(fresh, R, g, np.asarray(bids, dtype=float))[0]
    return fresh.mean((E > 0).astype(float))


def _refined(at, cells: int, rounds: int) -> EpsilonResult:
    """``at(cells)`` at ``cells`` evaluation cells, then at twice as many (each density's
    costs include the coarser ones, so epsilon can only grow) until two successive
    densities agree: the denser epsilon / u at most 10% (and 1e-4) above the coarser,
    or ``rounds`` doublings (issue #48: a denser evaluation must not find more).  The
    first density is evaluated only when its number can matter: a denser epsilon / u
    of at most 1e-4 agrees with any coarser one (>= 0), so then it is not (issue #48:
    an IC mechanism's verification is one evaluation, not two; every decision and
    number as before)."""
    prev = None if rounds else at(cells)
    for _ in range(rounds):
        nxt = at(2 * cells)
        if prev is None and nxt.epsilon_relative > 1e-4:
            prev = at(cells)
        if prev is None or _agrees(nxt.epsilon_relative, prev.epsilon_relative):
            return dataclasses.replace(nxt, eval_cells=2 * cells, agreed=True)
        prev, cells = nxt, 2 * cells
    assert prev is not None
    return dataclasses.replace(prev, eval_cells=cells, agreed=rounds == 0)
