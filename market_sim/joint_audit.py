"""The audit in several dimensions: misreports over every private field jointly.

For a multi-field mechanism (``market_sim.mechanisms.multifield``) and a
:class:`~market_sim.multifield.MultiFieldPopulation`, on ``n_markets`` drawn markets,
each seller alone tries reports while the others report the truth (verified fields are
always the truth).  Its candidates, counted per field:

1. **per field**: a ``field_grid``-point grid over the field's support, the other
   fields at the truth (a cost-only audit is this step for the cost);
2. **joint**: the product of a ``joint_grid``-point grid per private field; it holds
   the support's corners;
3. **local search**: from its best candidate so far, ``local_steps`` rounds of moves
   +-step along each field and one random direction in the joint space, the step
   halved when nothing improves (steps start at a joint grid cell).

A seller's utility of true type (c, cap) is t - c eps, or -inf when eps > cap
(``multifield.utilities``): a misreport that makes the mechanism exceed the true cap is
never a gain, and truth-telling that does is an IR violation of unbounded size; a seller
in that case that finds a report keeping eps within its cap *escapes* (an infinite gain,
an IC violation counted apart from the finite regret).

**Verdicts.**  IC: *not IC* with the largest gain found, its witness re-run exactly
(the profile, the seller, its true type and report, both utilities), or *no gain
found* with what was searched: evidence on these markets and candidates, never a
proof.  IR: *not IR* with the worst truthful utility and its witness, or *IR on these
markets*.  Nothing is certified that was not checked.

:func:`compare_jointly` audits several mechanisms on the same markets and scores them by
Eq. 11 (003); :func:`play_fields` plays one market in rounds with sellers who
best-respond in every private field (the same search against the others' reports).

:func:`grid_regret` is MFG-RegretNet's own measure (``exp_rq/guarantees_eval_baselines``):
the cost alone on a 25-point grid of [0, 1], utilities ignoring caps, regret and IR
normalised by the seller's cost of its allocation.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field, replace
from typing import ClassVar

import numpy as np

from .agents.fields import FieldRound, FieldStrategy
from .errors import MarketSimError
from .mechanisms.base import Outcome, mechanism_name
from .mechanisms.multifield import OneField, as_multifield_mechanism, utilities
from .multifield import MultiFieldPopulation, as_multifield

__all__ = [
    "JointAudit",
    "JointComparison",
    "Witness",
    "joint_audit",
    "audit_types",
    "compare_jointly",
    "grid_regret",
    "PeerMeasure",
    "FieldPlay",
    "play_fields",
    "BestResponseFields",
]

TOL = 1e-9


@dataclass(frozen=True)
class Witness:
    """One seller of one market: its true type, its report, and both utilities (the
    report's re-run on the exact profile)."""

    market: int
    seller: int
    true: dict
    report: dict
    utility_truth: float
    utility_report: float
    profile: str = "market"
    """``market``: the drawn market's truthful others; else the opponent profile's label."""

    @property
    def gain(self) -> float:
        return self.utility_report - self.utility_truth

    def describe(self) -> str:
        def rec(d):
            return "(" + ", ".join(f"{k}={v:.6g}" for k, v in d.items()) + ")"

        who = f"seller {self.seller} of market {self.market}, true {rec(self.true)}"
        if self.profile != "market":
            who += f", against the opponent profile {self.profile}"
        if self.report == self.true:
            return f"{who}, reporting the truth: utility {self.utility_truth:.6g}"
        return (
            f"{who}, reporting {rec(self.report)}: utility {self.utility_truth:.6g} -> "
            f"{self.utility_report:.6g}"
        )


@dataclass(frozen=True)
class JointAudit:
    """What the joint audit found (module docstring)."""

    mechanism: str
    private: tuple[str, ...]
    n_markets: int
    n_sellers: int
    candidates: dict
    """Candidates per seller: per field (the one-field grid), ``joint``, ``local``, ``total``."""
    regret: np.ndarray = field(repr=False)
    """(markets, sellers): the largest gain found over the truth (0 when none; nan where
    the truthful utility is -inf)."""
    truthful_utility: np.ndarray = field(repr=False)
    escaping: np.ndarray = field(repr=False)
    """(markets, sellers): the truth exceeds the seller's cap (an unbounded loss) and a
    report was found that does not: an infinite gain, kept out of ``regret``."""
    ic_witness: Witness | None
    ir_witness: Witness | None
    types: np.ndarray | None = field(default=None, repr=False)
    """(markets, sellers): the true records audited."""
    best_reports: np.ndarray | None = field(default=None, repr=False)
    """(markets, sellers): each seller's best report found (its truth when none gains)."""
    profile_regret: dict = field(default_factory=dict, repr=False)
    """Opponent profile label -> (markets, sellers) the largest gain found there (inf: an
    escape from an exceeded cap; nan: an exceeded cap with no escape found)."""

    @property
    def ic_refuted(self) -> bool:
        return self.ic_witness is not None

    @property
    def ir_refuted(self) -> bool:
        return self.ir_witness is not None

    @property
    def share_gaining(self) -> float:
        return float(np.mean(np.nan_to_num(self.regret) > TOL))

    @property
    def max_gain(self) -> float:
        return float(np.nanmax(self.regret, initial=0.0))

    @property
    def share_ir_violations(self) -> float:
        return float(np.mean(self.truthful_utility < -TOL))

    @property
    def share_cap_exceeded(self) -> float:
        return float(np.mean(np.isneginf(self.truthful_utility)))

    @property
    def share_escaping(self) -> float:
        return float(np.mean(self.escaping))

    def verdict_columns(self) -> dict:
        """The leaderboards' IC and IR columns."""
        return {
            "ic": "not IC" if self.ic_refuted else "no gain found",
            "ir": "not IR" if self.ir_refuted else "IR here",
            "share_gaining": self.share_gaining,
            "max_gain": self.max_gain,
            "share_not_ir": self.share_ir_violations,
            "cap_exceeded": self.share_cap_exceeded,
        }

    @property
    def ic_verdict(self) -> str:
        if self.ic_witness is not None:
            text = f"not IC: {self.ic_witness.describe()} (gain {self.ic_witness.gain:.6g})"
            k = int(self.escaping.sum())
            if k:
                text += (
                    f"; {k} of {self.escaping.size} sellers, whose cap the truth exceeds, "
                    "escape that unbounded loss by a misreport"
                )
            return text
        counts = ", ".join(f"{k} {v}" for k, v in self.candidates.items())
        against = (
            f" and {len(self.profile_regret)} opponent profiles per seller"
            if self.profile_regret
            else ""
        )
        return (
            f"no profitable misreport of {', '.join(self.private)} found among the candidates "
            f"per seller ({counts}) on {self.n_markets} markets of {self.n_sellers} "
            f"sellers{against}: evidence on these markets, not a proof of IC"
        )

    @property
    def ir_verdict(self) -> str:
        w = self.ir_witness
        if w is None:
            return (
                f"IR on these markets: every truthful utility of {self.n_markets} x "
                f"{self.n_sellers} sellers is >= -{TOL:g}"
            )
        unbounded = (
            " (eps above the true cap: an unbounded loss)" if np.isneginf(w.utility_truth) else ""
        )
        return f"not IR: {w.describe()}{unbounded}"


# ---- candidates ----------------------------------------------------------------------------
def _field_grid(pop: MultiFieldPopulation, name: str, points: int) -> np.ndarray:
    lo, hi = pop.support(name)
    grid = np.linspace(lo, hi, points)
    return np.unique(np.round(grid)) if name == "size" else grid


def _candidate_grid(pop, private, field_grid: int, joint_grid: int) -> tuple[list, dict]:
    """Per-field grids (others at the truth: nan marks 'truth') and the joint product."""
    rows: list[tuple] = []
    counts: dict = {}
    for j, name in enumerate(private):
        g = _field_grid(pop, name, field_grid)
        counts[name] = int(g.size)
        for v in g:
            row = [np.nan] * len(private)
            row[j] = v
            rows.append(tuple(row))
    axes = [_field_grid(pop, name, joint_grid) for name in private]
    joint = list(itertools.product(*axes))
    counts["joint"] = len(joint)
    return rows + joint, counts


def _candidates(types_i: np.ndarray, grid: list, private) -> np.ndarray:
    """(markets, K) records for one seller: the grid with nan filled by the truth."""
    m, K = types_i.shape[0], len(grid)
    out = np.repeat(types_i[:, None], K, axis=1)
    g = np.asarray(grid, dtype=float).reshape(K, len(private))
    for j, name in enumerate(private):
        col = np.broadcast_to(g[:, j], (m, K))
        out[name] = np.where(np.isnan(col), out[name], col)
    return out


def _utility_of(mech, types, reports, seller: int, cand: np.ndarray) -> np.ndarray:
    """Seller ``seller``'s utility (true type from ``types``) at each candidate, the others
    reporting ``reports``."""
    m, K = cand.shape
    if isinstance(mech, OneField):  # its deviations: no whole-market run per candidate
        mine = mech.deviations_of(reports, seller, cand)
    else:
        profiles = np.repeat(reports[:, None, :], K, axis=1)
        profiles[:, :, seller] = cand
        out = mech.run(profiles)
        mine = Outcome(out.eps[:, :, seller], out.payments[:, :, seller])
    return utilities(mine, np.broadcast_to(types[:, seller][:, None], (m, K)))


@dataclass(frozen=True)
class _Search:
    """What one seller tries: the mechanism, the fields, the grid and the local search."""

    mech: object
    pop: MultiFieldPopulation
    private: tuple[str, ...]
    grid: list
    cells: int
    steps: int


def _local_search(s: _Search, types, reports, seller, best, best_u, rng):
    """Moves +-step per field and one random direction from the best point, the step
    starting at a joint grid cell and halved when nothing improves."""
    private = s.private
    lo = np.array([s.pop.support(f)[0] for f in private])
    hi = np.array([s.pop.support(f)[1] for f in private])
    step = np.broadcast_to((hi - lo) / max(s.cells - 1, 1), (best.shape[0], len(private))).copy()
    d = len(private)
    for _ in range(s.steps):
        moves = np.concatenate([np.eye(d), -np.eye(d), rng.standard_normal((1, d))])
        x = np.stack([best[f] for f in private], axis=-1)  # (m, d)
        trial = np.clip(x[:, None, :] + moves[None] * step[:, None, :], lo, hi)
        if "size" in private:
            j = private.index("size")
            trial[..., j] = np.round(trial[..., j])
        cand = np.repeat(best[:, None], moves.shape[0], axis=1)
        for j, name in enumerate(private):
            cand[name] = trial[..., j]
        u = _utility_of(s.mech, types, reports, seller, cand)
        k = np.argmax(u, axis=1)
        rows = np.arange(u.shape[0])
        better = u[rows, k] > best_u + TOL
        best = np.where(better, cand[rows, k], best)
        best_u = np.where(better, u[rows, k], best_u)
        step = np.where(better[:, None], step, step / 2)
    return best, best_u


def _best_responses(s: _Search, types, reports, rng):
    """Every seller's best report found against the others' ``reports`` (per market):
    (best reports, their utilities, the truth's utilities), each (markets, sellers)."""
    m, n = types.shape
    best_reports, best_u, u_truth = types.copy(), np.empty((m, n)), np.empty((m, n))
    for i in range(n):
        best_reports[:, i], best_u[:, i], u_truth[:, i] = _best_response_of(
            s, types, reports, i, rng
        )
    return best_reports, best_u, u_truth


def _best_response_of(s: _Search, types, reports, i: int, rng):
    """Seller ``i``'s best report found against the others' ``reports``: (best report,
    its utility, the truth's utility), each (markets,)."""
    rows = np.arange(types.shape[0])
    cand = np.concatenate([types[:, i : i + 1], _candidates(types[:, i], s.grid, s.private)], 1)
    u = _utility_of(s.mech, types, reports, i, cand)  # column 0: the truth
    k = np.argmax(u, axis=1)
    best, b_u = _local_search(s, types, reports, i, cand[rows, k], u[rows, k], rng)
    return best, b_u, u[:, 0]


def _search(mechanism, population, types, private, field_grid, joint_grid, local_steps):
    """The checked mechanism and population, and what each seller tries."""
    mech = as_multifield_mechanism(mechanism)
    if getattr(mech, "randomized", False):
        raise MarketSimError(
            f"{mechanism_name(mech)} is randomized: the joint audit compares exact outcomes "
            "(deterministic mechanisms only)"
        )
    pop = as_multifield(population)
    private = tuple(pop.private if private is None else private)
    for name in private:
        if name not in (types.dtype.names or ()):
            raise MarketSimError(f"private field {name!r} is not in the types")
    grid, counts = _candidate_grid(pop, private, field_grid, joint_grid)
    counts["local"] = local_steps * (2 * len(private) + 1)
    counts["total"] = len(grid) + counts["local"]
    return _Search(mech, pop, private, grid, joint_grid, local_steps), counts


# ---- the audit ---------------------------------------------------------------------------
def _witness(mech, types, market, seller, report, others=None, label="market") -> Witness:
    """Both utilities re-run on the exact profile: the market's truthful reports, or the
    opponent profile ``others`` (the seller's own entry its true type)."""
    own = types[market]
    truth = own.copy() if others is None else others[market].copy()
    truth[seller] = own[seller]
    lie = truth.copy()
    lie[seller] = report
    u_truth = float(utilities(mech.run(truth), own)[seller])
    u_lie = float(utilities(mech.run(lie), own)[seller])
    names = types.dtype.names or ()
    return Witness(
        int(market),
        int(seller),
        {f: float(own[seller][f]) for f in names},
        {f: float(report[f]) for f in names},
        u_truth,
        u_lie,
        label,
    )


def audit_types(
    mechanism,
    population,
    types: np.ndarray,
    rng: np.random.Generator,
    *,
    private: tuple[str, ...] | None = None,
    field_grid: int = 25,
    joint_grid: int = 9,
    local_steps: int = 12,
    profiles: bool = False,
) -> JointAudit:
    """The joint audit on the given true types (markets x sellers records); with
    ``profiles``, each seller also against the adversarial opponent profiles
    (:func:`opponent_profiles`; the grids there, no local search)."""
    search, counts = _search(
        mechanism, population, types, private, field_grid, joint_grid, local_steps
    )
    best_reports, best_u, u_truth = _best_responses(search, types, types, rng)
    unbounded = np.isneginf(u_truth)
    with np.errstate(invalid="ignore"):
        regret = np.where(unbounded, np.nan, np.maximum(best_u - u_truth, 0.0))
    escaping = unbounded & np.isfinite(best_u)
    mech = search.mech
    witness = _ic_witness(mech, types, regret, escaping, best_reports)
    against: dict = {}
    if profiles:
        against, found = _profile_search(replace(search, steps=0), types, rng)
        witness = _stronger(witness, found)
    return JointAudit(
        mechanism_name(mech),
        search.private,
        types.shape[0],
        types.shape[1],
        counts,
        regret,
        u_truth,
        escaping,
        witness,
        _ir_witness(mech, types, u_truth),
        types,
        best_reports,
        against,
    )


def _ic_witness(mech, types, regret, escaping, best_reports) -> Witness | None:
    """The largest finite gain's witness; else an escape from an unbounded loss."""
    r = np.nan_to_num(regret, nan=0.0)
    if np.any(r > TOL):
        j, i = np.unravel_index(np.argmax(r), r.shape)
    elif np.any(escaping):
        j, i = np.unravel_index(np.argmax(escaping), escaping.shape)
    else:
        return None
    w = _witness(mech, types, j, i, best_reports[j, i])
    return w if w.gain > TOL else None


# ---- adversarial opponent profiles -----------------------------------------------------------
def opponent_profiles(pop, private, types: np.ndarray, seller: int) -> dict[str, np.ndarray]:
    """The others' reports (markets, sellers) that no draw reliably produces, for seller
    ``seller`` (its own entry is its truth; the audit overwrites it with the reports
    tried), mirroring the one-field audit's (``coalitions.opponent_profiles``) in every
    private field at once: ``floor`` / ``top``: every other at the support's bottom /
    top in every private field, and the mixed corners (``corner:cost=floor,cap=top``,
    ...); ``tied``: every other's private fields equal to the seller's true ones;
    ``one_at_floor`` / ``one_at_top``: the others truthful but the one whose cost is
    farthest from that end, moved to it in every private field; ``band_25`` /
    ``band_50`` / ``band_75``: every other at that share of each field's support.  The
    others' verified fields stay true."""
    lo = {f: pop.support(f)[0] for f in private}
    hi = {f: pop.support(f)[1] for f in private}

    def at(values: dict) -> np.ndarray:
        prof = types.copy()
        for f, v in values.items():
            prof[f] = np.round(v) if f == "size" else v
        prof[:, seller] = types[:, seller]
        return prof

    out: dict[str, np.ndarray] = {}
    for ends in itertools.product(("floor", "top"), repeat=len(private)):
        label = (
            ends[0]
            if len(set(ends)) == 1
            else "corner:" + ",".join(f"{f}={e}" for f, e in zip(private, ends, strict=True))
        )
        pairs = zip(private, ends, strict=True)
        out[label] = at({f: lo[f] if e == "floor" else hi[f] for f, e in pairs})
    out["tied"] = at({f: types[f][:, seller : seller + 1] for f in private})
    others = np.delete(np.arange(types.shape[1]), seller)
    if others.size:
        cost = types["cost"][:, others]
        for label, end, far in (("one_at_floor", lo, np.argmax), ("one_at_top", hi, np.argmin)):
            prof = types.copy()
            who = others[far(cost, axis=1)]
            for f in private:
                prof[f][np.arange(types.shape[0]), who] = end[f]
            out[label] = prof
    for q in (25, 50, 75):
        out[f"band_{q}"] = at({f: lo[f] + q / 100 * (hi[f] - lo[f]) for f in private})
    return out


def _profile_search(s: _Search, types, rng) -> tuple[dict, Witness | None]:
    """Every seller against every opponent profile: the gains per profile label
    (markets, sellers) and the strongest witness found, re-run exactly."""
    m, n = types.shape
    gains: dict[str, np.ndarray] = {}
    top: tuple = (-np.inf, None)
    for i in range(n):
        for label, prof in opponent_profiles(s.pop, s.private, types, i).items():
            best, b_u, u0 = _best_response_of(s, types, prof, i, rng)
            escape = np.where(np.isfinite(b_u), np.inf, np.nan)
            with np.errstate(invalid="ignore"):
                g = np.where(np.isneginf(u0), escape, np.maximum(b_u - u0, 0.0))
            gains.setdefault(label, np.zeros((m, n)))[:, i] = g
            score = np.where(np.isinf(g), 0.0, np.nan_to_num(g)) + np.isinf(g) * TOL * 2
            j = int(np.argmax(score))
            if score[j] > max(top[0], TOL):
                top = (score[j], (j, i, best[j], prof, label))
    if top[1] is None:
        return gains, None
    j, i, report, prof, label = top[1]
    w = _witness(s.mech, types, j, i, report, prof, label)
    return gains, w if w.gain > TOL else None


def _stronger(a: Witness | None, b: Witness | None) -> Witness | None:
    """The witness with the larger finite gain (an escape, infinite, only when neither
    gain is finite)."""
    found = [w for w in (a, b) if w is not None]
    if not found:
        return None
    return max(found, key=lambda w: (np.isfinite(w.gain), w.gain if np.isfinite(w.gain) else 0))


def _ir_witness(mech, types, u_truth) -> Witness | None:
    if not np.any(u_truth < -TOL):
        return None
    j, i = np.unravel_index(np.argmin(u_truth), u_truth.shape)
    return _witness(mech, types, j, i, types[j, i])


def joint_audit(
    mechanism,
    population,
    n_markets: int = 50,
    rng: np.random.Generator | None = None,
    **settings,
) -> JointAudit:
    """Draw ``n_markets`` markets of ``population`` and audit ``mechanism`` jointly over its
    private fields (module docstring); ``settings`` go to :func:`audit_types`."""
    if not isinstance(rng, np.random.Generator):
        raise TypeError("rng must be a numpy.random.Generator")
    pop = as_multifield(population)
    types = pop.draw(n_markets, rng)
    return audit_types(mechanism, pop, types, rng, **settings)


# ---- several mechanisms on the same markets --------------------------------------------------
@dataclass(frozen=True)
class JointComparison:
    """Every mechanism's joint audit and truthful outcome on the same drawn markets."""

    audits: tuple[JointAudit, ...]
    spend: np.ndarray = field(repr=False)
    """(mechanisms, markets): the total payment under truthful reports."""
    eps_bought: np.ndarray = field(repr=False)
    """(mechanisms, markets): the total eps bought under truthful reports."""
    objective: np.ndarray = field(repr=False)
    """(mechanisms, markets): Eq. 11 (003) with the payments made under truthful reports,
    mu ||eps||_2 / sum eps + sigma / sum eps + gamma sum t (inf when nothing is bought)."""

    def rows(self) -> list[dict]:
        """One row per mechanism, ranked: no gain found before a gain, IR before not IR,
        then by the mean objective (Eq. 11 with the payments made; lower is better)."""
        rows = [
            {
                "mechanism": a.mechanism,
                **a.verdict_columns(),
                "mean_spend": float(self.spend[k].mean()),
                "mean_eps": float(self.eps_bought[k].mean()),
                "objective": float(self.objective[k].mean()),
            }
            for k, a in enumerate(self.audits)
        ]
        return sorted(
            rows,
            key=lambda r: (r["ic"] == "not IC", r["ir"] == "not IR", r["objective"]),
        )


def compare_jointly(
    mechanisms,
    population,
    n_markets: int = 50,
    rng: np.random.Generator | None = None,
    *,
    mu: float = 1.0,
    sigma: float = 1.0,
    gamma: float = 1.0,
    store=None,
    **settings,
) -> JointComparison:
    """Audit each mechanism jointly on the same ``n_markets`` drawn markets (the same true
    types; the same local-search directions: each audit's Generator from one seed), and
    score its truthful outcome by Eq. 11 with the payments made (``buyer_loss``).

    One task per mechanism (``execution.run_jobs``); ``store``: a folder made by
    ``execution.open_store`` where each finished mechanism is kept, so that the same call
    after an interruption runs only the others (the same rng gives the same markets)."""
    from .execution import Job, run_jobs

    if not isinstance(rng, np.random.Generator):
        raise TypeError("rng must be a numpy.random.Generator")
    mechanisms = list(mechanisms)
    mechs = [as_multifield_mechanism(m) for m in mechanisms]
    if not mechs:
        raise MarketSimError("compare needs at least one mechanism")
    pop = as_multifield(population)
    types = pop.draw(n_markets, rng)
    seed = int(rng.integers(2**63))
    weights = dict(mu=mu, sigma=sigma, gamma=gamma)
    args = (pop, types, seed, weights, settings)
    jobs = [
        Job(f"arm-{k}-{mechanism_name(mech)}", _compare_arm, (mech, *args))
        for k, mech in enumerate(mechs)
    ]
    arms = run_jobs(jobs, store=store)
    audits = [
        replace(audit, mechanism=spec) if isinstance(spec, str) else audit
        for spec, (audit, *_) in zip(mechanisms, arms, strict=True)
    ]
    spend, eps, loss = (np.array([arm[j] for arm in arms]) for j in (1, 2, 3))
    return JointComparison(tuple(audits), spend, eps, loss)


def _compare_arm(mech, pop, types, seed: int, weights: dict, settings: dict) -> tuple:
    """One mechanism of :func:`compare_jointly`: (its joint audit, spend, eps bought, Eq. 11
    per market)."""
    from .mechanisms.offline import buyer_loss

    audit = audit_types(mech, pop, types, np.random.default_rng(seed), **settings)
    out = mech.run(types)
    loss = [buyer_loss(e, t, **weights) for e, t in zip(out.eps, out.payments, strict=True)]
    return audit, out.payments.sum(axis=-1), out.eps.sum(axis=-1), np.array(loss)


# ---- sellers who misreport: best-response play ----------------------------------------------
@dataclass(frozen=True)
class FieldPlay:
    """Rounds of one market where strategic sellers best-respond in every private field."""

    mechanism: str
    types: np.ndarray = field(repr=False)
    """(sellers,) the true records."""
    strategic: np.ndarray = field(repr=False)
    """(sellers,) who best-responds (the others report the truth)."""
    reports: np.ndarray = field(repr=False)
    """(rounds, sellers) the records reported."""
    eps: np.ndarray = field(repr=False)
    payments: np.ndarray = field(repr=False)
    utility: np.ndarray = field(repr=False)
    """(rounds, sellers) utilities of the true types; -inf where eps exceeded a true cap."""

    def rows(self) -> list[dict]:
        """Per round: who misreports, the mean utility of the sellers whose cap was
        respected and the smallest utility, caps exceeded, spend and eps bought."""
        lied = np.zeros(self.reports.shape, dtype=bool)
        for name in self.reports.dtype.names or ():
            lied |= self.reports[name] != self.types[name][None, :]
        return [
            {
                "round": r + 1,
                "mechanism": self.mechanism,
                "share_misreporting": float(lied[r].mean()),
                "mean_utility": _finite_mean(self.utility[r]),
                "min_utility": float(self.utility[r].min()),
                "cap_exceeded": float(np.mean(np.isneginf(self.utility[r]))),
                "spend": float(self.payments[r].sum()),
                "eps_bought": float(self.eps[r].sum()),
            }
            for r in range(self.reports.shape[0])
        ]


def _finite_mean(u: np.ndarray) -> float:
    finite = u[np.isfinite(u)]
    return float(finite.mean()) if finite.size else float("nan")


def play_fields(
    mechanism,
    population,
    rounds: int = 5,
    rng: np.random.Generator | None = None,
    *,
    strategic_share: float = 1.0,
    private: tuple[str, ...] | None = None,
    field_grid: int = 9,
    joint_grid: int = 5,
    local_steps: int = 4,
) -> FieldPlay:
    """One drawn market played ``rounds`` times.  Each round every strategic seller (a
    random ``strategic_share`` of them) reports its best report found by the joint
    search (:func:`audit_types`' candidates) against the others' reports of the round
    before, the truth unless another report is strictly better by more than 1e-9; all
    move at once.  The others report the truth."""
    if not isinstance(rng, np.random.Generator):
        raise TypeError("rng must be a numpy.random.Generator")
    if not 0 <= strategic_share <= 1:
        raise MarketSimError(f"strategic_share must be in [0, 1], got {strategic_share!r}")
    pop = as_multifield(population)
    types = pop.draw(1, rng)
    search, _ = _search(mechanism, pop, types, private, field_grid, joint_grid, local_steps)
    n = types.shape[1]
    strategic = rng.permutation(n) < round(strategic_share * n)
    reports, history = types.copy(), []
    for _ in range(int(rounds)):
        best, best_u, u_truth = _best_responses(search, types, reports, rng)
        move = strategic & (best_u[0] > u_truth[0] + TOL)
        reports = np.where(move, best[0], types[0])[None, :]
        out = search.mech.run(reports[0])
        history.append((reports[0], out.eps, out.payments, utilities(out, types[0])))
    stacked = [np.stack(h) for h in zip(*history, strict=True)]
    return FieldPlay(mechanism_name(search.mech), types[0], strategic, *stacked)


@dataclass(frozen=True)
class BestResponseFields(FieldStrategy):
    """The simulation's best response (``market_sim.agents.fields``): each of its sellers
    reports the best report the joint search finds against the others' reports of the
    round before (:func:`play_fields`' step), the truth unless strictly better by 1e-9."""

    name: ClassVar[str] = "best-response"
    field_grid: int = 9
    joint_grid: int = 5
    local_steps: int = 4

    def report(self, round: FieldRound, rng: np.random.Generator) -> np.ndarray:
        types = round.types[None, :]
        search, _ = _search(round.mechanism, round.population, types, None, self.field_grid,
                            self.joint_grid, self.local_steps)  # fmt: skip
        best, best_u, u_truth = _best_responses(search, types, round.last_reports[None, :], rng)
        move = best_u[0] > u_truth[0] + TOL
        return np.where(move, best[0], types[0])[round.mine]


# ---- the peers' measure ----------------------------------------------------------------------
@dataclass(frozen=True)
class PeerMeasure:
    """MFG-RegretNet's regret and IR violation per seller, normalised (module docstring)."""

    regret: np.ndarray = field(repr=False)
    ir_violation: np.ndarray = field(repr=False)


def grid_regret(mechanism, types: np.ndarray, points: int = 25, cap_points: int = 0) -> PeerMeasure:
    """Each seller alone reports a cost on ``points`` evenly spaced in [0, 1] (its other
    fields true); utility t - v eps ignoring caps; regret max(0, best - truthful) and IR
    violation max(0, -truthful), both over v eps if above 1e-5, else over
    max(v clip(cap, 0.1, 5), 0.02) (never below 1e-4), as MFG-RegretNet computes them.

    ``cap_points`` > 0: the product of that cost grid with ``cap_points`` caps evenly
    spaced in [0.1, 5], caps still ignored in the utility: the (v, eps) grid that the
    peers' current ``guarantees_eval_baselines`` uses for CSRA and MFG-Pricing (25 x 12;
    17 x 8 in their RQ1 script)."""
    mech = as_multifield_mechanism(mechanism)
    m, n = types.shape
    v = types["cost"]
    truth = mech.run(types)
    u0 = truth.payments - v * truth.eps
    bid_cap = np.clip(types["cap"], 0.1, 5.0) if "cap" in (types.dtype.names or ()) else 1.0
    denom = np.where(v * truth.eps > 1e-5, v * truth.eps, np.maximum(v * bid_cap, 0.02))
    denom = np.maximum(denom, 1e-4)
    best = u0.copy()
    costs = np.linspace(0.0, 1.0, points)
    caps = np.linspace(0.1, 5.0, cap_points) if cap_points else None
    if caps is not None:
        costs, caps = (a.ravel() for a in np.meshgrid(costs, caps, indexing="ij"))
    for i in range(n):
        profiles = np.repeat(types[:, None, :], costs.size, axis=1)
        profiles["cost"][:, :, i] = costs
        if caps is not None:
            profiles["cap"][:, :, i] = caps
        out = mech.run(profiles)
        u = out.payments[:, :, i] - v[:, i : i + 1] * out.eps[:, :, i]
        best[:, i] = np.maximum(best[:, i], u.max(axis=1))
    return PeerMeasure(np.maximum(best - u0, 0.0) / denom, np.maximum(-u0, 0.0) / denom)
