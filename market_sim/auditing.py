"""Audit a mechanism's incentives on seeded random markets (docs/audit.md).

``audit(mechanism, dist, n_sellers, n_markets, rng)`` draws ``n_markets`` markets
of ``n_sellers`` costs from ``dist`` (truthful reports) and, for every seller,
searches for the most profitable unilateral misreport, all sellers of a market at
once through ``deviations`` / ``deviation_utilities``:

* the grid: ``n_grid`` equally spaced reports over the support (the lowest moved up
  by 1e-3 of a step: on a support starting at 0, a report of 0 leaves the offline
  problem without an optimum; every candidate is kept at or above that point);
* probes around the truth: c +- w 10^-k, k = 1..6 (w the support's width), for
  deviations too small for any grid;
* ``n_random`` reports drawn uniformly over the support for every seller (the
  statistical statement below is made from these);
* with ``refine``, a multi-start local search: from each seller's ``n_starts`` best
  candidates, ``refine_iter`` rounds of ``n_sections`` equally spaced points in the
  bracket between the start's neighbours, shrinking around the best (a vectorised
  section search: one ``deviations`` call per round for all sellers and starts).

``n_candidates`` (in the summary) is the number of misreports tried per seller.

Statistics (95%, recorded in ``summary.json``):

* ``tol = tol_factor x |mean truthful payment|`` (1e-6 by default);
* ``verdict = "ic"`` iff no candidate gains more than tol; ``max_gain`` the largest
  gain found, ``max_gain_ci_low/high`` a percentile bootstrap CI (``n_boot``
  resamples of the markets, drawn from ``rng``) of the mean over markets of the
  per-market largest gain;
* ``profitable_share_upper``: the one-sided 95% Clopper-Pearson upper bound on the
  probability that a seller of the audited markets, picked at random, gains more than
  tol with a report drawn uniformly over the support (from the random candidates:
  given the markets, they are independent trials, and Hoeffding's bound for sums of
  unequal Bernoulli trials makes the binomial bound hold for the average);
* ``ir_verdict = "ir"`` iff no truthful utility is below -tol; ``ir_share_upper``
  the same bound on the share of (market, seller) pairs below -tol.

Randomized mechanisms.  Built-in ones compute exact expectations (standard error 0).
For a mechanism relying on the generic Monte Carlo default, the audit estimates with
common random numbers: the search compares candidates on ``n_draws`` shared draws,
then each seller's best candidate is re-estimated on ``n_confirm`` fresh draws (so
the selection's luck does not carry over) with the standard error of the paired
differences; it counts as profitable only if gain - z SE > tol with z the one-sided
Bonferroni quantile for 5% over all confirmed candidates (IR likewise).

Monotonicity: eps_i rising along the sorted own reports by more than 1e-9 x the
market's largest eps (the base candidates); for a
:class:`~market_sim.mechanisms.myerson.MyersonMechanism` its own violation list is
added.

CLI: ``market-sim audit --mechanism SPEC --dist SPEC --sellers N --markets K --seed S
--out DIR`` writes DIR/audit.csv, DIR/summary.json and DIR/audit.png; it exits 3
when the verdict is not_ic or the IR verdict not_ir.
"""

from __future__ import annotations

import json
import math
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from .distributions import as_distribution
from .errors import MarketSimError
from .files import atomic_write, json_plain, save_png
from .mechanisms.base import Mechanism, as_mechanism, as_outcome, mechanism_name
from .parameters import check_int

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["audit", "AuditResult", "audit_estimate_seconds", "clopper_pearson_upper"]

COLUMNS = [
    "market",
    "seller",
    "cost",
    "truthful_utility",
    "best_report",
    "max_gain",
    "monotone",
    "gain_se",
    "profitable",
]
EXIT_NOT_IC = 3
CONFIDENCE = 0.95
_MONO_TOL = 1e-9
_PROBES = 10.0 ** -np.arange(1, 7)  # c +- w 10^-k
_CHUNK = 4096  # sellers per batch (memory; results do not depend on it)


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
        pct = _share(s["profitable_share_upper"])
        if s["verdict"] == "ic":
            txt = (
                f"no profitable misreport found among {s['n_candidates']} tried per seller; "
                f"at 95% confidence fewer than {pct} of random reports gain more than "
                f"tol = {s['tol']:.3g}"
            )
        else:
            w = s["witness"]
            txt = (
                f"NOT IC: seller {w['seller']} of market {w['market']} (cost {w['cost']:.6g}) "
                f"gains {w['gain']:.3g} > tol = {s['tol']:.3g} by reporting {w['report']:.6g}; "
                f"{s['n_profitable']} of {s['n_markets'] * s['n_sellers']} sellers have a "
                f"profitable misreport; at 95% confidence fewer than {pct} of random "
                "reports gain more than tol"
            )
        if s["ir_verdict"] == "ir":
            ir = _share(s["ir_share_upper"])
            txt += f". IR: no truthful utility below -tol (fewer than {ir} at 95%)"
        else:
            txt += (
                f". NOT IR: {s['ir_violations']} sellers' truthful utility is below -tol "
                f"(least {s['min_truthful_utility']:.3g})"
            )
        if s.get("coalition_size"):
            w = s.get("coalition_witness")
            if s["group_verdict"] == "ic":
                txt += (
                    f". Coalitions of up to {s['coalition_size']}: no joint misreport found "
                    f"that gains more than tol ({s['coalitions_tried']} coalitions tried)"
                )
            elif w:
                txt += (
                    f". NOT GROUP-IC: sellers {w['members']} of market {w['market']} "
                    f"(costs {_short(w['costs'])}) gain {w['gain']:.3g} together by "
                    f"reporting {_short(w['reports'])}"
                )
        if s.get("certified"):
            txt += f". Certified: {s['certified']}"
        else:
            txt += ". Not certified: a search cannot prove IC (docs/audit.md)"
        return txt + "."

    def format(self) -> str:
        s = self.summary
        rows = [
            ("mechanism", s["mechanism"]),
            ("distribution", s["dist"]),
            ("markets x sellers", f"{s['n_markets']} x {s['n_sellers']}"),
            ("reports tried per seller", str(s["n_candidates"])),
            ("mean payment", f"{s['mean_payment']:.6g}"),
            ("tolerance", f"{s['tol']:.3g}"),
            ("max gain", f"{s['max_gain']:.3g}" + _se(s["max_gain_se"])),
            (
                "95% CI, mean per-market max gain",
                f"[{_fmt(s['max_gain_ci_low'])}, {_fmt(s['max_gain_ci_high'])}] (bootstrap)",
            ),
            ("share profitable", f"{s['share_profitable']:.3g}"),
            ("profitable share, 95% upper", f"{s['profitable_share_upper']:.3g}"),
            ("IR violations", str(s["ir_violations"])),
            ("IR share, 95% upper", f"{s['ir_share_upper']:.3g}"),
            ("least truthful utility", f"{s['min_truthful_utility']:.3g}"),
            ("monotonicity violations", str(s["monotonicity_violations"])),
            ("identity residual max", _fmt(s.get("identity_residual_max"))),
            ("certified", s.get("certified") or "no"),
        ]
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
class _Evaluator:
    """Keeps the truthful utilities of the sellers searched (for the local search)."""

    def set_truth(self, sellers, truth):
        if not hasattr(self, "_truth"):
            self._truth = np.zeros(self.costs.size)
        self._truth[sellers] = truth

    def truth_utility(self, sellers):
        return self._truth[sellers]


class _Exact(_Evaluator):
    """Utilities (and eps) of the listed sellers at candidate reports, from the
    mechanism's own ``deviations`` (exact expectations for randomized built-ins)."""

    mc = False

    def __init__(self, mech, costs, rng):
        self.mech, self.costs = mech, costs
        self.seed = int(rng.integers(2**63))  # one draw per market: common to all calls
        self.own_utilities = _overrides(mech, "deviation_utilities")

    def __call__(self, sellers, cand, need_eps=False):
        mech, c = self.mech, self.costs
        if self.own_utilities:
            u = mech.deviation_utilities(
                sellers, cand, c[sellers], c, np.random.default_rng(self.seed)
            )
            eps = None
            if need_eps:
                eps = mech.deviations(sellers, cand, c, np.random.default_rng(self.seed)).eps
            return np.asarray(u, dtype=float).reshape(cand.shape), eps, None
        dev = mech.deviations(sellers, cand, c, np.random.default_rng(self.seed))
        return dev.payments - c[sellers][:, None] * dev.eps, dev.eps, None


class _MonteCarlo(_Evaluator):
    """Common random numbers for a randomized mechanism on the generic default: every
    candidate of every seller sees the same draws (seeds), and so does the truth."""

    mc = True

    def __init__(self, mech, costs, seeds):
        self.mech, self.costs = mech, costs
        self.gens = [np.random.Generator(np.random.PCG64(int(s))) for s in seeds]
        self.states = [g.bit_generator.state for g in self.gens]
        outs = [mech.run(costs, self._gen(d)) for d in range(len(seeds))]
        self.truth = np.array([o.utilities(costs) for o in outs])  # (D, n)
        self.truth_eps = np.array([o.eps for o in outs])

    def _gen(self, d):
        g = self.gens[d]
        g.bit_generator.state = self.states[d]  # the same draw every time
        return g

    def draws(self, sellers, cand):
        """Per draw: utilities and eps, each (D, k, C).  ``outcome`` is called directly
        (its result checked once per batch, not per call: the checks cost more than a
        small mechanism)."""
        mech, c = self.mech, self.costs
        D = len(self.gens)
        u = np.empty((D,) + cand.shape)
        e = np.empty((D,) + cand.shape)
        trial = c.copy()
        outcome = mech.outcome
        for k, i in enumerate(sellers):
            ci = c[i]
            for j, z in enumerate(cand[k]):
                trial[i] = z
                for d in range(D):
                    eps_d, pay_d = _pair(outcome(trial.copy(), self._gen(d)), c.size, mech)
                    e[d, k, j] = eps_d[i]
                    u[d, k, j] = pay_d[i] - ci * eps_d[i]
            trial[i] = c[i]
        if not (np.all(np.isfinite(u)) and np.all(np.isfinite(e))):
            raise MarketSimError(f"{mechanism_name(mech)}: eps or payments contain NaN or inf")
        if np.any(e < 0):
            raise MarketSimError(f"{mechanism_name(mech)}: eps must be >= 0")
        return u, e

    def __call__(self, sellers, cand, need_eps=False):
        u, e = self.draws(sellers, cand)
        diff = u - self.truth[:, sellers][:, :, None]
        D = diff.shape[0]
        se = diff.std(axis=0, ddof=1) / math.sqrt(D) if D > 1 else np.zeros(cand.shape)
        return u.mean(axis=0), e.mean(axis=0), se


def _pair(result, n, mech):
    """(eps, payments) of what ``outcome`` returned, as arrays of n (checked lightly:
    ``as_outcome`` does the full check of the first call, in ``_MonteCarlo``)."""
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


def _sections(ev, sellers, Z, G, lo, hi, n_starts, n_sections, n_iter):
    """Multi-start section search: from each seller's ``n_starts`` best candidates,
    shrink the bracket between the start's neighbours (among Z) around the best of
    ``n_sections`` equally spaced points, ``n_iter`` times.  Returns the reports
    and gains tried, (k, n_starts * n_sections * n_iter) each."""
    k = Z.shape[0]
    order = np.argsort(Z, axis=1, kind="stable")
    Zs = np.take_along_axis(Z, order, axis=1)
    rank = np.argsort(order, axis=1)  # position of each candidate in the sorted row
    starts = np.argsort(-G, axis=1, kind="stable")[:, :n_starts]  # best first
    rows = np.arange(k)[:, None]
    pos = rank[rows, starts]
    a = Zs[rows, np.maximum(pos - 1, 0)]
    b = Zs[rows, np.minimum(pos + 1, Zs.shape[1] - 1)]
    xbest, gbest = Z[rows, starts], G[rows, starts]
    frac = np.arange(1, n_sections + 1) / (n_sections + 1)
    tried_z, tried_g = [], []
    for _ in range(n_iter):
        pts = a[:, :, None] + (b - a)[:, :, None] * frac  # (k, S, m)
        pts = np.clip(pts, lo, hi)
        u, _, _ = ev(sellers, pts.reshape(k, -1))
        g = (u - ev.truth_utility(sellers)[:, None]).reshape(pts.shape)
        tried_z.append(pts.reshape(k, -1))
        tried_g.append(g.reshape(k, -1))
        j = np.argmax(g, axis=2)
        gj = np.take_along_axis(g, j[:, :, None], axis=2)[:, :, 0]
        better = gj > gbest
        xbest = np.where(better, np.take_along_axis(pts, j[:, :, None], axis=2)[:, :, 0], xbest)
        gbest = np.maximum(gbest, gj)
        h = (b - a) / (n_sections + 1)
        a, b = np.maximum(a, xbest - h), np.minimum(b, xbest + h)
    if not tried_z:
        return np.empty((k, 0)), np.empty((k, 0))
    return np.concatenate(tried_z, axis=1), np.concatenate(tried_g, axis=1)


@dataclass(frozen=True)
class _Search:
    """The search settings (see ``audit``)."""

    grid: np.ndarray
    lo: float
    hi: float
    n_random: int
    refine: bool
    n_starts: int
    n_sections: int
    n_iter: int

    @property
    def n_candidates(self) -> int:
        local = self.n_starts * self.n_sections * self.n_iter if self.refine else 0
        return self.grid.size + 2 * _PROBES.size + self.n_random + local


def _chunk(ev, sellers, costs, rand, S: _Search, certify: bool):
    """Search the sellers ``sellers`` of one market.  Returns per seller: truthful
    utility and payment-related columns, best report and gain, its SE, monotone flag,
    the violations (row, low, high, eps_low, eps_high) and the random candidates'
    gains and SEs (k, n_random)."""
    c = costs[sellers]
    k = sellers.size
    width = S.hi - S.lo
    probes = np.concatenate([c[:, None] - width * _PROBES, c[:, None] + width * _PROBES], axis=1)
    base = np.column_stack([c, np.tile(S.grid, (k, 1)), probes, rand])
    base = np.clip(base, S.grid[0], S.hi)
    base[:, 0] = c
    u, eps, se = ev(sellers, base, need_eps=True)
    truth = u[:, 0]
    ev.set_truth(sellers, truth)
    gain = u - truth[:, None]
    r0 = 1 + S.grid.size + 2 * _PROBES.size
    rand_gain, rand_se = gain[:, r0:], (se[:, r0:] if se is not None else None)

    # monotonicity along the sorted own reports
    order = np.argsort(base, axis=1, kind="stable")
    eps_sorted = np.take_along_axis(eps, order, axis=1)
    z_sorted = np.take_along_axis(base, order, axis=1)
    rise = np.diff(eps_sorted, axis=1) > _MONO_TOL * max(float(np.max(eps)), 1e-300)
    violations = [
        (int(r), float(z_sorted[r, j]), float(z_sorted[r, j + 1]))
        + (float(eps_sorted[r, j]), float(eps_sorted[r, j + 1]))
        for r, j in zip(*np.nonzero(rise), strict=True)
    ]

    check = None
    if certify:  # Myerson's characterization on the base candidates (docs/audit.md)
        from .certification import myerson_check

        pay = u + c[:, None] * eps  # t = u + c eps
        check = myerson_check(base, eps, pay, (S.lo, S.hi), sellers=sellers)

    Z, G = base, gain
    if S.refine and S.n_iter > 0:
        Zl, Gl = _sections(
            ev, sellers, base, gain, S.grid[0], S.hi, S.n_starts, S.n_sections, S.n_iter
        )
        Z, G = np.concatenate([Z, Zl], axis=1), np.concatenate([G, Gl], axis=1)
    j = np.argmax(G, axis=1)
    best_gain = G[np.arange(k), j]
    best_report = np.where(best_gain > 0, Z[np.arange(k), j], c)
    mono = ~rise.any(axis=1)
    return (
        truth,
        best_report,
        np.maximum(best_gain, 0.0),
        mono,
        violations,
        rand_gain,
        rand_se,
        check,
    )


def _confirm(mech, costs, sellers, reports, seeds):
    """Fresh common-random-number estimates of the gain of ``reports`` (one per seller)
    over the truth, and of the truthful utility: (gain, gain SE, utility, utility SE)."""
    mc = _MonteCarlo(mech, costs, seeds)
    D = len(seeds)
    u, _ = mc.draws(sellers, reports[:, None])
    diff = u[:, :, 0] - mc.truth[:, sellers]
    t = mc.truth[:, sellers]
    sq = math.sqrt(D)
    return diff.mean(0), diff.std(0, ddof=1) / sq, t.mean(0), t.std(0, ddof=1) / sq


def _bootstrap_ci(G: np.ndarray, rng, n_boot: int) -> tuple[float, float]:
    """Percentile bootstrap CI (95%) of the mean of G over resampled markets."""
    if G.size < 2:
        return (math.nan, math.nan)
    idx = rng.integers(0, G.size, size=(int(n_boot), G.size))
    means = G[idx].mean(axis=1)
    a = (1 - CONFIDENCE) / 2
    return float(np.quantile(means, a)), float(np.quantile(means, 1 - a))


def audit(
    mechanism,
    dist,
    n_sellers: int,
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
    n_draws: int = 16,
    n_confirm: int = 256,
    n_boot: int = 2000,
    coalition_size: int | None = None,
    progress: bool | str = False,
    costs=None,
    **context,
) -> AuditResult:
    """IC / IR / monotonicity audit of ``mechanism`` (a name, spec, class, instance or
    object with ``outcome``) on ``n_markets`` markets of ``n_sellers`` costs drawn
    from ``dist`` with ``rng``; ``context`` (mu, sigma, gamma, privacy, ...) is passed
    to the mechanism's construction.  See the module doc for the search, the verdicts
    and the statistics.  ``coalition_size`` k >= 2 also searches joint misreports of
    up to k sellers (``group_verdict``).  ``progress`` shows a progress bar over the
    sellers on stderr (labelled with ``progress`` if it is a string, else "audit").
    ``costs``, an (n_markets, n_sellers) array, audits these markets instead of
    drawing them (``rng`` still drives the search): how
    ``market_sim.compare`` audits every mechanism on the same markets."""
    import pandas as pd

    if not isinstance(rng, np.random.Generator):
        raise MarketSimError("rng must be a numpy.random.Generator")
    dist = as_distribution(dist)
    n_sellers = check_int("n_sellers", n_sellers, 1)
    n_markets = check_int("n_markets", n_markets, 1)
    n_grid = check_int("n_grid", n_grid, 2)
    n_random = check_int("n_random (random reports per seller)", n_random, 1)
    refine_iter = check_int("refine_iter", refine_iter, 0)
    n_starts = check_int("n_starts", n_starts, 1)
    n_sections = check_int("n_sections", n_sections, 1)
    n_draws = check_int("n_draws", n_draws, 2)
    n_confirm = check_int("n_confirm", n_confirm, 2)
    n_boot = check_int("n_boot", n_boot, 1)
    if coalition_size is not None:
        coalition_size = check_int("coalition size", coalition_size, 2)
        if coalition_size > n_sellers:
            raise MarketSimError(
                f"coalition size {coalition_size} is larger than the market ({n_sellers} sellers)"
            )
    if not (isinstance(tol_factor, (int, float)) and math.isfinite(tol_factor) and tol_factor >= 0):
        raise MarketSimError(f"tol_factor must be a finite number >= 0 (got {tol_factor!r})")
    mech = as_mechanism(mechanism, dist=dist, n_sellers=n_sellers, **context)
    if getattr(mech, "needs_data", False):
        raise MarketSimError(
            f"{mechanism_name(mech)} needs the sellers' data; the audit draws costs only"
        )
    lo, hi = (float(v) for v in dist.support)
    if not (math.isfinite(lo) and math.isfinite(hi)):
        raise MarketSimError(f"the audit needs a bounded support (got [{lo}, {hi}])")
    given = None if costs is None else _given_costs(costs, n_markets, n_sellers, lo, hi)
    grid = np.linspace(lo, hi, n_grid)
    grid[0] += 1e-3 * (grid[1] - grid[0])  # a report at c_low = 0 has no offline optimum
    S = _Search(grid, lo, hi, n_random, bool(refine), n_starts, n_sections, refine_iter)
    randomized = bool(getattr(mech, "randomized", False))
    monte_carlo = randomized and not (
        _overrides(mech, "deviations") or _overrides(mech, "deviation_utilities")
    )
    from tqdm import tqdm

    from .mechanisms.myerson import MyersonMechanism

    myerson_violations = 0
    rows, violations, rand_gains, rand_ses = [], [], [], []
    confirm = []  # the truthful utilities' SEs (Monte Carlo)
    checks = []  # Myerson checks per market and chunk (not for Monte Carlo estimates)
    markets = []
    bar = tqdm(
        total=n_markets * n_sellers,
        desc=progress if isinstance(progress, str) else "audit",
        unit="seller",
        file=sys.stderr,
        disable=not progress,
    )
    try:
        for m in range(n_markets):
            costs = dist.sample(n_sellers, rng) if given is None else given[m]
            markets.append(costs)
            checked = mech
            if isinstance(mech, MyersonMechanism):
                own = mech.violations(costs)
                myerson_violations += len(own)
                violations += [(m, v.seller, v.low, v.high, v.eps_low, v.eps_high) for v in own]
                checked = mech.unchecked()  # gains of a non-monotone rule are still measured
            rand = lo + (hi - lo) * (1.0 - rng.random((n_sellers, n_random)))  # (lo, hi]
            ev: _Evaluator
            if monte_carlo:
                ev = _MonteCarlo(checked, costs, rng.integers(2**63, size=n_draws))
            else:
                ev = _Exact(checked, costs, rng)
            parts = []
            for a in range(0, n_sellers, _CHUNK):
                sellers = np.arange(a, min(a + _CHUNK, n_sellers))
                truth, best, gain, mono, seen, rg, rs, check = _chunk(
                    ev, sellers, costs, rand[sellers], S, not monte_carlo
                )
                if check is not None:
                    checks.append(check)
                violations += [(m, int(sellers[v[0]]), *v[1:]) for v in seen]
                parts.append((truth, best, gain, mono))
                rand_gains.append(rg)
                if rs is not None:
                    rand_ses.append(rs)
                bar.update(sellers.size)
            truth, best, gain, mono = (np.concatenate(x) for x in zip(*parts, strict=True))
            se = np.zeros(n_sellers)
            if monte_carlo:
                # fresh draws for each seller's best candidate (the truth when none gains)
                cg, cs, tu, ts = _confirm(
                    checked, costs, np.arange(n_sellers), best, rng.integers(2**63, size=n_confirm)
                )
                gain, se, truth = cg, cs, tu
                confirm.append(ts)
            pay = _truthful_payments(checked, costs, rng, monte_carlo)
            rows.append(
                pd.DataFrame(
                    {
                        "market": m,
                        "seller": np.arange(n_sellers),
                        "cost": costs,
                        "truthful_utility": truth,
                        "best_report": best,
                        "max_gain": gain,
                        "monotone": mono,
                        "gain_se": se,
                        "_pay": pay,
                    }
                )
            )
    finally:
        bar.close()
    table = pd.concat(rows, ignore_index=True)
    mean_pay = float(table.pop("_pay").mean())
    tol = tol_factor * abs(mean_pay)
    n_pairs = n_markets * n_sellers

    # profitable: gain > tol (exact), or gain - z SE > tol (Monte Carlo, Bonferroni)
    z_gain = _bonferroni_z(n_pairs) if monte_carlo else 0.0
    margin = z_gain * table["gain_se"].to_numpy()
    profitable = table["max_gain"].to_numpy() - margin > tol
    table["profitable"] = profitable
    # IR: truthful utility < -tol (exact), or + z SE < -tol (Monte Carlo)
    u_se = np.concatenate(confirm) if confirm else np.zeros(n_pairs)
    ir_bad = table["truthful_utility"].to_numpy() + z_gain * u_se < -tol
    # the random candidates
    RG = np.concatenate(rand_gains, axis=0)
    if monte_carlo:
        RS = np.concatenate(rand_ses, axis=0)
        z_r = _bonferroni_z(RG.size)
        n_prof_random = int(np.sum(RG - z_r * RS > tol))
    else:
        n_prof_random = int(np.sum(RG > tol))

    G = table.groupby("market")["max_gain"].max().to_numpy()
    ci = _bootstrap_ci(G, rng, n_boot)
    shown = np.where(profitable, table["max_gain"].to_numpy(), -np.inf)
    w = int(np.argmax(shown)) if profitable.any() else int(np.argmax(table["max_gain"].to_numpy()))
    wrow = table.iloc[w]
    max_gain = float(table["max_gain"].max())
    summary = {
        "mechanism": mechanism if isinstance(mechanism, str) else mechanism_name(mech),
        "dist": dist.spec,
        "n_sellers": n_sellers,
        "n_markets": n_markets,
        "seed": None,  # the CLI records its --seed here
        "n_grid": n_grid,
        "n_random": n_random,
        "n_probes": 2 * int(_PROBES.size),
        "refine": bool(refine),
        "n_starts": n_starts,
        "n_sections": n_sections,
        "refine_iter": refine_iter,
        "n_candidates": S.n_candidates,
        "randomized": randomized,
        "monte_carlo": monte_carlo,
        "n_draws": n_draws if monte_carlo else None,
        "n_confirm": n_confirm if monte_carlo else None,
        "confidence": CONFIDENCE,
        "margin_z": z_gain,
        "mean_payment": mean_pay,
        "tol_factor": tol_factor,
        "tol": tol,
        "max_gain": max_gain,
        "max_gain_se": float(table["gain_se"].iloc[int(table["max_gain"].to_numpy().argmax())]),
        "mean_max_gain": float(G.mean()),
        "max_gain_ci_low": ci[0],
        "max_gain_ci_high": ci[1],
        "max_gain_ci_method": "percentile bootstrap over markets",
        "share_profitable": float(np.mean(profitable)),
        "n_profitable": int(profitable.sum()),
        "n_random_reports": int(RG.size),
        "n_profitable_random": n_prof_random,
        "profitable_share_upper": clopper_pearson_upper(n_prof_random, RG.size),
        "ir_violations": int(ir_bad.sum()),
        "ir_share_upper": clopper_pearson_upper(int(ir_bad.sum()), n_pairs),
        "min_truthful_utility": float(table["truthful_utility"].min()),
        "monotonicity_violations": len(violations),
        "myerson_monotonicity_violations": myerson_violations,
        "witness": {
            "market": int(wrow["market"]),
            "seller": int(wrow["seller"]),
            "cost": float(wrow["cost"]),
            "report": float(wrow["best_report"]),
            "gain": float(wrow["max_gain"]),
            "se": float(wrow["gain_se"]),
        },
        "verdict": "not_ic" if profitable.any() else "ic",
        "ir_verdict": "not_ir" if ir_bad.any() else "ir",
        "identity_residual_max": None,
        "certified": None,
        "coalition_size": coalition_size,
        "coalition_max_gain": None,
        "group_verdict": None,
        "coalition_witness": None,
    }
    if checks:
        from .certification import certification

        summary["identity_residual_max"] = max(ch.identity_residual_max for ch in checks)
        summary["identity_residual_rel"] = max(ch.identity_residual_rel for ch in checks)
        summary["myerson_monotone"] = all(ch.monotone for ch in checks)
        verdicts = {certification(mech, ch) for ch in checks}
        summary["certified"] = verdicts.pop() if len(verdicts) == 1 else None
    if coalition_size is not None:
        free = mech.unchecked() if isinstance(mech, MyersonMechanism) else mech
        summary.update(_coalitions(free, markets, coalition_size, rng, tol, (lo, hi), progress))
    result = AuditResult(table[COLUMNS], summary, violations)
    result.summary["statement"] = result.statement()
    return result


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


def _coalitions(mech, markets, k, rng, tol, support, progress) -> dict:
    """``coalition_search`` in every market (after the unilateral search, so that the
    tolerance is known); the summary keys of the largest coalition gain."""
    from tqdm import tqdm

    from .coalitions import coalition_search

    best, best_m, max_gain, group_ic, tried, reports = None, None, -np.inf, True, 0, 0
    for m, costs in enumerate(
        tqdm(markets, desc="coalitions", unit="market", file=sys.stderr, disable=not progress)
    ):
        res = coalition_search(mech, costs, k, rng, tol=tol, support=support)
        tried += res.n_coalitions
        reports += res.n_joint_reports
        group_ic &= res.group_ic
        if res.max_gain > max_gain:
            max_gain = res.max_gain
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
    }


def _truthful_payments(mech, costs, rng, monte_carlo):
    """Each seller's truthful payment (expected for randomized mechanisms): the scale
    of the tolerance."""
    n = costs.size
    sellers = np.arange(n)
    if monte_carlo:
        seeds = rng.integers(2**63, size=8)
        return np.mean([mech.run(costs, np.random.default_rng(s)).payments for s in seeds], axis=0)
    seed = int(rng.integers(2**63))
    if getattr(mech, "randomized", False):
        return mech.deviations(
            sellers, costs[:, None], costs, np.random.default_rng(seed)
        ).payments[:, 0]
    return mech.run(costs, np.random.default_rng(seed)).payments


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
    """The cost model's seconds of :func:`audit` (``market_sim.estimates.audit_seconds``)."""
    from .estimates import audit_seconds

    mech = as_mechanism(mechanism, dist=dist, n_sellers=n_sellers, **context)
    search = _Search(np.zeros(n_grid), 0.0, 1.0, n_random, refine, 2, 4, 8)
    return audit_seconds(mech, n_sellers, n_markets, n_candidates=search.n_candidates)
