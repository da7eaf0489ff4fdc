"""Sellers with several fields on the command line: ``audit`` and ``compare``.

:class:`JointAuditReport` puts a :class:`~market_sim.joint_audit.JointAudit` in the
one-field audit's shape (``market_sim.auditing.AuditResult``): a table with one row per
market x seller, a summary with the verdicts (``ic`` / ``not_ic``, ``ir`` / ``not_ir``)
and their sentences, a printed table, the exit status (3 when not IC or not IR) and the
files DIR/audit.csv, DIR/summary.json and DIR/audit.png.

:func:`compare_fields` ranks multi-field mechanisms on the same drawn markets
(``joint_audit.compare_jointly``: the same true types, each audited jointly): Student-t
95% intervals of the mean objective (Eq. 11, 003, with the payments made) and payment
over markets, and each mechanism minus the baseline market by market with the paired t
interval, as ``market_sim.comparison`` does for one field; the joint audit's verdicts
fill the IC and IR columns.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np
import pandas as pd

from .comparison import t_interval
from .errors import MarketSimError
from .execution import open_store
from .files import atomic_write, json_plain, save_png
from .joint_audit import TOL, JointAudit, compare_jointly
from .mechanisms.multifield import as_multifield_mechanism
from .multifield import FIELD_OPTIONS, as_multifield

__all__ = [
    "AUDIT_FILES",
    "COMPARE_FILES",
    "EXIT_NOT_IC",
    "FieldCompareResult",
    "JointAuditReport",
    "compare_fields",
    "is_multifield",
]

EXIT_NOT_IC = 3  # the one-field audit's status when a verdict fails
AUDIT_FILES = ("audit.csv", "summary.json", "audit.png")
COMPARE_FILES = ("leaderboard.csv", "paired.csv", "markets.csv", "summary.json", "compare.png")


def is_multifield(population: str | None, mechanisms) -> bool:
    """True when the population spec has a field option (``cap=``, ``size=``,
    ``private=``, ``rho_cap=``, ``rho_size=``) or a mechanism is a registered
    multi-field name: the command then runs the multi-field layer."""
    from .registry import MULTIFIELD_MECHANISMS

    if population is not None:
        keys = {opt.partition("=")[0].strip() for opt in population.split(";")[1:]}
        if keys & set(FIELD_OPTIONS):
            return True
    names = set(MULTIFIELD_MECHANISMS.names())
    return any(isinstance(m, str) and m.partition(":")[0] in names for m in mechanisms)


# ---- the audit -------------------------------------------------------------------------------
@dataclass(frozen=True)
class JointAuditReport:
    """A joint audit in the one-field audit's shape (module docstring)."""

    audit: JointAudit
    population: str
    seed: int | None = None
    table: pd.DataFrame = field(init=False, repr=False)
    summary: dict = field(init=False, repr=False)

    def __post_init__(self):
        object.__setattr__(self, "table", _audit_table(self.audit))
        object.__setattr__(self, "summary", _audit_summary(self.audit, self.population, self.seed))

    @property
    def exit_status(self) -> int:
        """0 when no gain was found and IR held on these markets, else 3."""
        return EXIT_NOT_IC if self.audit.ic_refuted or self.audit.ir_refuted else 0

    def statement(self) -> str:
        a = self.audit
        return (
            f"{a.ic_verdict}. {a.ir_verdict}. Not certified: a search cannot prove IC "
            "(docs/multifield.md)."
        )

    def format(self) -> str:
        s = self.summary
        n_pairs = s["n_markets"] * s["n_sellers"]
        kinds = ", ".join(f"{k} {v}" for k, v in s["candidates_by_kind"].items())
        rows = [
            ("mechanism", s["mechanism"]),
            ("population", s["population"]),
            ("markets x sellers", f"{s['n_markets']} x {s['n_sellers']}"),
            ("private / verified fields", f"{s['private']} / {s['verified'] or '-'}"),
            ("reports tried per seller", f"{s['n_candidates']} ({kinds})"),
            ("opponent profiles tried", f"{len(s['profiles'])} per seller"),
            ("largest gain of a misreport", f"{s['max_gain']:.3g}"),
            ("largest gain, opponent profiles", _gain(s["profile_max_gain"])),
            ("sellers with a profitable misreport", f"{s['n_profitable']} of {n_pairs}"),
            ("sellers escaping an exceeded cap", f"{s['n_escaping']} of {n_pairs}"),
            ("sellers violating IR", f"{s['ir_violations']} of {n_pairs}"),
            ("of them, cap exceeded (unbounded loss)", f"{s['cap_exceeded']} of {n_pairs}"),
            ("least truthful utility", f"{s['min_truthful_utility']:.3g}"),
            ("certified", "no"),
            ("verdict", s["verdict"]),
            ("IR verdict", s["ir_verdict"]),
        ]
        width = max(len(k) for k, _ in rows)
        return "\n".join(f"{k:<{width}}  {v}" for k, v in rows) + "\n" + self.statement()

    def write(self, folder) -> Path:
        """DIR/audit.csv, DIR/summary.json and DIR/audit.png, each written atomically."""
        out = _folder(folder)
        csv = self.table.to_csv(index=False).encode()
        atomic_write(out / "audit.csv", lambda fh: fh.write(csv))
        doc = (json.dumps(json_plain(self.summary), indent=2) + "\n").encode()
        atomic_write(out / "summary.json", lambda fh: fh.write(doc))
        _plot_audit(self.audit, out / "audit.png")
        return out


def _folder(folder) -> Path:
    out = Path(folder)
    if out.exists() and not out.is_dir():
        raise MarketSimError(f"{folder}: exists and is not a folder")
    out.mkdir(parents=True, exist_ok=True)
    return out


def _audit_table(a: JointAudit) -> pd.DataFrame:
    """One row per market x seller: the true fields, the truthful utility (-inf when the
    cap is exceeded), the best report found per private field, the gain (NaN where the
    truth is unbounded below), whether the seller escapes, and whether it gains."""
    if a.types is None or a.best_reports is None:
        raise ValueError("the audit carries no types (built by audit_types)")
    m, n = a.regret.shape
    cols: dict = {"market": np.repeat(np.arange(m), n), "seller": np.tile(np.arange(n), m)}
    for name in a.types.dtype.names or ():
        cols[name] = a.types[name].ravel()
    cols["truthful_utility"] = a.truthful_utility.ravel()
    for name in a.private:
        cols[f"best_{name}"] = a.best_reports[name].ravel()
    cols["max_gain"] = a.regret.ravel()
    if a.profile_regret:  # the largest gain over the opponent profiles (inf: an escape)
        stacked = np.stack([np.where(np.isnan(g), 0.0, g) for g in a.profile_regret.values()])
        cols["profile_max_gain"] = stacked.max(axis=0).ravel()
    cols["cap_exceeded"] = np.isneginf(a.truthful_utility).ravel()
    cols["escaping"] = a.escaping.ravel()
    cols["profitable"] = (np.nan_to_num(a.regret) > TOL).ravel() | a.escaping.ravel()
    return pd.DataFrame(cols)


def _audit_summary(a: JointAudit, population: str, seed) -> dict:
    names = a.types.dtype.names if a.types is not None else a.private
    u = a.truthful_utility
    return {
        "mechanism": a.mechanism,
        "population": str(population),
        "seed": seed,
        "n_markets": a.n_markets,
        "n_sellers": a.n_sellers,
        "private": ", ".join(a.private),
        "verified": ", ".join(f for f in names or () if f not in a.private),
        "candidates_by_kind": {k: v for k, v in a.candidates.items() if k != "total"},
        "n_candidates": a.candidates["total"],
        "profiles": list(a.profile_regret),
        "max_gain": a.max_gain,
        "profile_max_gain": _profile_max_gain(a),
        "n_profitable": int(np.sum(np.nan_to_num(a.regret) > TOL)),
        "share_profitable": a.share_gaining,
        "n_escaping": int(a.escaping.sum()),
        "ir_violations": int(np.sum(u < -TOL)),
        "share_ir_violations": a.share_ir_violations,
        "cap_exceeded": int(np.isneginf(u).sum()),
        "min_truthful_utility": float(u.min()),
        "verdict": "not_ic" if a.ic_refuted else "ic",
        "ir_verdict": "not_ir" if a.ir_refuted else "ir",
        "ic_statement": a.ic_verdict,
        "ir_statement": a.ir_verdict,
        "certified": None,
    }


def _profile_max_gain(a: JointAudit) -> float | None:
    """The largest finite gain over the opponent profiles (None when none was tried)."""
    if not a.profile_regret:
        return None
    gains = np.concatenate([g.ravel() for g in a.profile_regret.values()])
    finite = gains[np.isfinite(gains)]
    return float(finite.max(initial=0.0))


def _gain(v: float | None) -> str:
    return "not tried" if v is None else f"{v:.3g}"


def _plot_audit(a: JointAudit, path) -> None:
    """Two panels: the sellers' largest finite gains, and the truthful utility against
    the cost (sellers whose cap the truth exceeds drawn at the panel's floor, in red)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4.2))
    gains = np.nan_to_num(a.regret).ravel()
    pos = gains[gains > TOL]
    if pos.size:
        left.hist(pos, bins=30, color="tab:blue")
    else:
        left.text(0.5, 0.5, "no seller gains anything", transform=left.transAxes, ha="center")
    left.set(xlabel="largest gain of a misreport (> tol)", ylabel="sellers", title="gains")
    cost = a.types["cost"].ravel() if a.types is not None else np.zeros(gains.size)
    u = a.truthful_utility.ravel()
    finite = np.isfinite(u)
    right.scatter(cost[finite], u[finite], s=8, color="tab:blue", label="truthful utility")
    if not finite.all():
        floor = float(u[finite].min()) if finite.any() else 0.0
        right.scatter(
            cost[~finite],
            np.full((~finite).sum(), floor),
            s=14,
            color="tab:red",
            marker="v",
            label="cap exceeded (-inf)",
        )
    right.axhline(0.0, color="k", lw=0.8, ls="--")
    right.legend(loc="best")
    right.set(xlabel="true cost", ylabel="utility", title=f"IR: {a.mechanism}")
    save_png(fig, path)


# ---- the comparison ---------------------------------------------------------------------------
@dataclass(frozen=True)
class FieldCompareResult:
    """``leaderboard``: one row per mechanism, ranked; ``paired``: each mechanism minus
    the baseline market by market; ``markets``: one row per market and mechanism."""

    leaderboard: pd.DataFrame
    paired: pd.DataFrame
    markets: pd.DataFrame
    settings: dict
    audits: tuple[JointAudit, ...] = field(repr=False)

    def format(self) -> str:
        shown = self.leaderboard.copy()
        lines = [shown.to_string(index=False, float_format=lambda v: f"{v:.4g}")]
        lines.append(
            f"objective: Eq. 11 with the payments made, mean over {self.settings['n_markets']} "
            "markets with its Student-t 95% CI (lower is better); ranked: no gain found "
            "first, then IR, then the objective"
        )
        paired = self.paired.to_string(index=False, float_format=lambda v: f"{v:.4g}")
        lines += [f"minus baseline ({self.settings['baseline']}), paired t 95% CI:", paired]
        lines += [f"{a.mechanism}: {a.ic_verdict}; {a.ir_verdict}" for a in self.audits]
        return "\n".join(lines)

    def write(self, folder) -> Path:
        """DIR/leaderboard.csv, paired.csv, markets.csv and summary.json, atomically."""
        out = _folder(folder)
        for name, frame in zip(
            COMPARE_FILES[:3], (self.leaderboard, self.paired, self.markets), strict=True
        ):
            data = frame.to_csv(index=False).encode()
            atomic_write(out / name, lambda fh, d=data: fh.write(d))
        doc = {
            **self.settings,
            "verdicts": {a.mechanism: [a.ic_verdict, a.ir_verdict] for a in self.audits},
        }
        text = (json.dumps(json_plain(doc), indent=2) + "\n").encode()
        atomic_write(out / "summary.json", lambda fh: fh.write(text))
        _plot_compare(self, out / "compare.png")
        return out


def _plot_compare(result: FieldCompareResult, path) -> None:
    """Two panels, one row per mechanism in the leaderboard's order: the mean objective
    (Eq. 11 with the payments made) with its 95% CI, hollow where the joint audit found a
    gain or an IR violation; and the joint audit's shares of sellers gaining, not IR and
    with the cap exceeded under truth."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    lb = result.leaderboard
    y = np.arange(len(lb))[::-1]
    fig, (left, right) = plt.subplots(1, 2, figsize=(13, 2.4 + 0.6 * len(lb)), sharey=True)
    for yk, (_, row) in zip(y, lb.iterrows(), strict=True):
        good = row["ic"] != "not IC" and row["ir"] != "not IR"
        obj, lo, hi = row["objective"], row["objective_low"], row["objective_high"]
        if np.isfinite(obj):
            err = [[obj - lo if np.isfinite(lo) else 0.0], [hi - obj if np.isfinite(hi) else 0.0]]
            left.errorbar([obj], [yk], xerr=err, fmt="o", color="tab:blue", capsize=3,
                          mfc="tab:blue" if good else "white")  # fmt: skip
    left.set(yticks=y, yticklabels=lb["mechanism"], title="objective (hollow: not IC or not IR)",
             xlabel="mean objective, 95% CI (lower is better)")  # fmt: skip
    h = 0.25
    for j, (col, label) in enumerate((("share_gaining", "sellers gaining"),
                                      ("share_not_ir", "sellers not IR"),
                                      ("cap_exceeded", "cap exceeded under truth"))):  # fmt: skip
        right.barh(y + (1 - j) * h, lb[col].to_numpy(dtype=float), height=h, label=label)
    right.set(xlim=(0, 1), xlabel="share of sellers (joint audit)", title="incentives")
    right.legend(loc="upper center", bbox_to_anchor=(0.5, -0.22), ncol=3, fontsize=8)
    fig.tight_layout()
    save_png(fig, path)


def compare_fields(
    mechanisms,
    population,
    n_markets: int,
    rng: np.random.Generator,
    *,
    baseline: str | None = None,
    mu: float = 1.0,
    sigma: float = 1.0,
    gamma: float = 1.0,
    store=None,
    **settings,
) -> FieldCompareResult:
    """Rank ``mechanisms`` (specs, labels in the table) on the same ``n_markets`` drawn
    markets of ``population`` (module docstring); ``settings`` go to the joint audit;
    ``store``: a folder where each finished mechanism's audit is kept (the same call
    resumes; ``execution.open_store``)."""
    labels = [str(m) for m in mechanisms]
    if len(set(labels)) != len(labels):
        raise MarketSimError("each --mechanism once: the labels must differ")
    baseline = labels[0] if baseline is None else baseline
    if baseline not in labels:
        raise MarketSimError(f"--baseline {baseline!r} is not a --mechanism ({', '.join(labels)})")
    pop = as_multifield(population)
    weights = dict(mu=mu, sigma=sigma, gamma=gamma)
    mechs = [as_multifield_mechanism(m, population=pop.population, **weights) for m in mechanisms]
    if store is not None:
        request = {"mechanisms": labels, "population": pop.spec, "n_markets": n_markets,
                   "rng": rng.bit_generator.state, **weights, **settings}  # fmt: skip
        store = open_store(store, "compare-fields", request)
    result = compare_jointly(mechs, pop, n_markets, rng, **weights, store=store, **settings)
    pairs = zip(result.audits, labels, strict=True)
    audits = tuple(replace(a, mechanism=label) for a, label in pairs)
    per = {
        label: {
            "objective": result.objective[k],
            "payment": result.spend[k],
            "eps": result.eps_bought[k],
        }
        for k, label in enumerate(labels)
    }
    rows = [_leaderboard_row(label, a, per[label]) for label, a in zip(labels, audits, strict=True)]
    rows.sort(key=lambda r: (r["ic"] == "not IC", r["ir"] == "not IR", r["objective"]))
    paired = [_paired_row(label, baseline, per) for label in labels if label != baseline]
    markets = pd.concat(
        [
            pd.DataFrame({"mechanism": label, "market": np.arange(n_markets), **per[label]})
            for label in labels
        ]
    )
    the_settings = {
        "mechanisms": labels,
        "population": pop.spec,
        "n_markets": n_markets,
        "baseline": baseline,
        "mu": mu,
        "sigma": sigma,
        "gamma": gamma,
        "ci_method": "Student t over markets; paired t for differences",
        **settings,
    }
    return FieldCompareResult(
        pd.DataFrame(rows),
        pd.DataFrame(paired, columns=_PAIRED),
        markets.reset_index(drop=True),
        the_settings,
        audits,
    )


_PAIRED = [
    "mechanism",
    "baseline",
    "objective_diff",
    "objective_diff_low",
    "objective_diff_high",
    "payment_diff",
    "payment_diff_low",
    "payment_diff_high",
]


def _leaderboard_row(label: str, a: JointAudit, scores: dict) -> dict:
    obj, obj_lo, obj_hi = t_interval(scores["objective"])
    pay, pay_lo, pay_hi = t_interval(scores["payment"])
    return {
        "mechanism": label,
        **a.verdict_columns(),
        "objective": obj,
        "objective_low": obj_lo,
        "objective_high": obj_hi,
        "payment": pay,
        "payment_low": pay_lo,
        "payment_high": pay_hi,
        "eps": float(np.mean(scores["eps"])),
    }


def _paired_row(label: str, baseline: str, per: dict) -> dict:
    """The differences market by market, ``label`` minus ``baseline``, with the paired t
    interval (the markets are the same: one true-type draw for every mechanism)."""
    row: dict = {"mechanism": label, "baseline": baseline}
    for key in ("objective", "payment"):
        with np.errstate(invalid="ignore"):
            diff = per[label][key] - per[baseline][key]
        mean, lo, hi = t_interval(diff)
        row |= {f"{key}_diff": mean, f"{key}_diff_low": lo, f"{key}_diff_high": hi}
    return row
