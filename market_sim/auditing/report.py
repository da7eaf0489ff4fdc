"""The audit's result: the table, the summary, the sentences that state each verdict's
guarantee, the figure."""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from ..errors import MarketSimError
from ..files import atomic_write, json_plain, save_png
from ..mechanisms.base import mechanism_name
from .evaluate import _is_monte_carlo
from .search import _PROBES, _Market, _Plan
from .statistics import CONFIDENCE, _bonferroni_z, _bootstrap_ci, clopper_pearson_upper

if TYPE_CHECKING:
    import pandas as pd


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
    "tol",
    "profitable",
]
EXIT_NOT_IC = 3
EXIT_INCONCLUSIVE = 4


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
            parts.append(
                f"Certified: {s['certified']} (the library's own mechanism, unmodified: "
                "truthful for every report and every profile of the others, not only those "
                "tried)"
            )
            if s["ir_verdict"] == "ir":
                parts.append(
                    "under a truthful mechanism utility falls with the cost, so IR at the "
                    "top of the support is IR for every cost"
                )
        elif (s.get("certificate_note") or "").startswith("not the library"):
            parts.append(f"Not certified: {s['certificate_note']}")
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


_TOL_WORDS = "its tolerance (1e-6 x its own support width x its largest eps; at most {:.3g})"


def _ic_sentence(s) -> str:
    pct = _share(s["profitable_share_upper"])
    tol = _TOL_WORDS.format(s["tol"])
    if s["verdict"] == "ic" and s.get("monte_carlo"):
        return (
            f"no gain above {tol} confirmed on fresh draws, at each seller's best of the "
            f"{s['n_candidates']} reports tried per seller (in the drawn markets and "
            f"{_profiles_words(s)}) and at a fresh random one, and at 95% family-wise none "
            f"larger than its tol + {_share(s['resolution'])} of its own incentive scale there; at "
            "95% confidence fewer "
            f"than {pct} of uniformly random reports show a gain above their tol on the "
            f"search's {s['n_draws']} draws (what those draws see, not a bound on smaller "
            "gains: the detectable gain below). Not excluded: a gain under the detectable "
            "gain, inside a window narrower than the spacing of the reports tried, or under "
            "profiles of the others not searched (docs/audit.md)"
        )
    if s["verdict"] == "ic":
        return (
            f"no seller gains more than {tol} at any of the {s['n_candidates']} reports tried "
            f"per seller (exactly), in the drawn markets and {_profiles_words(s)}; at 95% "
            f"confidence fewer than {pct} of uniformly random reports gain more. Not "
            "excluded: a gain inside a window narrower than the spacing of the reports "
            "tried, or under profiles of the others not searched (docs/audit.md)"
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
            f"its tol {w['tol']:.3g} by reporting {w['report']:.6g}"
        )
    proof = "confirmed on fresh draws at 95% family-wise" if s.get("monte_carlo") else "exact"
    return (
        f"NOT IC: seller {w['seller']} of market {w['market']} (cost {w['cost']:.6g}, "
        f"others {w['profile']}) gains {w['gain']:.3g} > its tol {w['tol']:.3g} by reporting "
        f"{w['report']:.6g} ({proof}); {s['n_profitable']} of "
        f"{s['n_markets'] * s['n_sellers']} sellers have a confirmed profitable misreport"
    )


def _profiles_words(s) -> str:
    """The opponent profiles searched, and the markets whose own check certified the
    mechanism (no profile searched there: the certificate covers every profile)."""
    words = f"{s['n_profiles']} opponent profiles"
    k = s.get("profiles_certified") or 0
    if k:
        words += (f" (none in the {k} of {s['n_markets']} markets whose own check certified "
                  "the library's unmodified mechanism: no search adds to that proof)")  # fmt: skip
    return words


def _ir_sentence(s) -> str:
    if s["ir_verdict"] == "ir":
        ir = _share(s["ir_share_upper"])
        if s.get("monte_carlo"):
            return (
                "IR: no own-type utility below minus its tolerance confirmed on fresh draws "
                "at the drawn costs and the top and bottom of each seller's own support, and "
                f"at 95% family-wise none below minus its tol + {_share(s['resolution'])} of "
                f"its own incentive scale there (fewer than {ir} of sellers at 95%)"
            )
        where = ("at the drawn costs, the top and bottom of each seller's own support and "
                 "every report tried taken as a type, in the drawn markets and the opponent "
                 "profiles searched")  # fmt: skip
        return (
            f"IR: no own-type utility below minus its tolerance {where} (fewer than {ir} of "
            "sellers at 95%)"
        )
    if s["ir_verdict"] == "inconclusive":
        return f"IR INCONCLUSIVE: {s['ir_reason']}"
    w = s.get("ir_witness") or {}
    typ = w.get("type")
    at = f" (a seller of cost {typ:.6g})" if typ is not None and math.isfinite(typ) else ""
    return (
        f"NOT IR: {s['ir_violations']} sellers have an own-type utility below minus their tol "
        f"(least {s['min_ir_utility']:.3g}{at}, {s['ir_where']}, seller {w.get('seller')} of "
        f"market {w.get('market')})"
    )


def _detectable_sentence(s) -> str:
    if not s.get("monte_carlo"):
        return "Exact expectations: a gain above its tol at a report tried would have been found"
    return (
        f"The confirmation ({s['n_confirm']} to {s['n_confirm_max']} fresh draws) would have "
        f"confirmed a gain of {_fmt(s['detectable_gain'])} at any seller's best report "
        "with 95% probability if the payments there vary as in the draws taken; an outcome "
        f"rarer than about 3 in the draws taken at a seller's report ({s['n_confirm']} or "
        "more, not their total over sellers) can carry a gain no draw showed"
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
            "monotone": mk.mono, "gain_se": mk.gain_se, "tol": mk.gain_tol,
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


def _random_reports(markets, mc: bool) -> tuple[int, int]:
    """(random reports that gain more than their seller's tol, random reports tried);
    Monte Carlo: by a Bonferroni margin over the search's draws."""
    RG = np.concatenate([mk.found.rand_gain for mk in markets], axis=0)
    RT = np.concatenate([mk.found.rand_tol for mk in markets])
    if mc:
        RS = np.concatenate([mk.found.rand_se for mk in markets], axis=0)
        return int(np.sum(RG - _bonferroni_z(RG.size) * RS > RT[:, None])), int(RG.size)
    return int(np.sum(RG > RT[:, None])), int(RG.size)


def _plan_keys(P: _Plan) -> dict:
    """The search settings, as recorded in the summary."""
    return {
        "n_grid": P.n_grid,
        "n_random": P.n_random,
        "n_probes": 2 * int(_PROBES.size),
        "refine": P.refine,
        "n_starts": P.n_starts,
        "n_sections": P.n_sections,
        "refine_iter": P.n_iter,
    }


def _counts(markets) -> tuple[dict, dict]:
    """Candidates per seller by kind (jumps and local: the mean over markets) and the
    opponent profiles searched by kind (seller x profile pairs)."""
    counts = dict(markets[0].found.counts)
    counts["jumps"] = float(np.mean([mk.found.counts.get("jumps", 0) for mk in markets]))
    counts["local"] = float(np.mean([mk.found.counts.get("local", 0) for mk in markets]))
    profiles: dict[str, int] = {}
    for mk in markets:
        for k, n in mk.profile_counts.items():
            profiles[k] = profiles.get(k, 0) + n
    return counts, profiles


def _summary(mechanism, mech, src, markets, table, d, v, tol, eps_scale, settings, rng) -> dict:
    """The numbers of summary.json (module doc)."""
    P: _Plan = settings["plan"]
    mc = _is_monte_carlo(mech)
    n_pairs = table.shape[0]
    gains = table["max_gain"].to_numpy()
    G = table.groupby("market")["max_gain"].max().to_numpy()
    ci = _bootstrap_ci(G, rng, settings["n_boot"])
    n_prof_random, n_random = _random_reports(markets, mc)
    counts, profiles = _counts(markets)
    ir_low = d["ir_low"]
    s = {
        "mechanism": mechanism if isinstance(mechanism, str) else mechanism_name(mech),
        "dist": src.spec,
        "n_sellers": src.n_sellers,
        "n_markets": len(markets),
        "seed": None,  # the CLI records its --seed here
        **_plan_keys(P),
        "candidates_by_kind": {k: int(round(val)) for k, val in counts.items()},
        "n_candidates": int(round(1 + sum(counts.values()))),
        "floor_report": P.floor,
        "floor_note": settings.get("floor_note"),
        "deviations_note": settings.get("deviations_note"),
        "profiles_by_kind": profiles,
        "n_profiles": int(sum(profiles.values())),
        "n_profile_candidates": int(round(np.mean([mk.profile_candidates for mk in markets]))),
        "profiles_skipped": [x for mk in markets for x in mk.skipped],
        "profiles_certified": int(sum(mk.profiles_certified for mk in markets)),
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
        "incentive_scale": float(max(m.found.scale.max() for m in markets)),
        "tol_min": float(min(m.tol.min() for m in markets)),
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
        "n_random_reports": n_random,
        "n_profitable_random": n_prof_random,
        "profitable_share_upper": clopper_pearson_upper(n_prof_random, n_random),
        "detectable_gain": d["detectable_gain"],
        "confirm_draws_total": d.get("draws_total"),
        "detectable_gain_median": d.get("detectable_gain_median"),
        "detectable_ir_violation": d["detectable_ir"],
        "ir_violations": int(d["ir_bad"].sum()),
        "ir_share_upper": clopper_pearson_upper(int(d["ir_bad"].sum()), n_pairs),
        "min_truthful_utility": float(table["truthful_utility"].min()),
        "min_utility_top": float(table["utility_at_top"].min()),
        "min_utility_bottom": float(table["utility_at_bottom"].min()),
        "min_ir_utility": float(ir_low.min()),
        "ir_where": v["ir_witness"]["where"],
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
    s.update(_myerson_keys(markets))
    return s


def _myerson_keys(markets) -> dict:
    """The summary's keys of Myerson's check (docs/audit-certification.md), if run."""
    checks = [ch for mk in markets for ch in (mk.found.check or []) if ch is not None]
    if not checks:
        return {}
    return {
        "identity_residual_max": max(ch.identity_residual_max for ch in checks),
        "identity_residual_rel": max(ch.identity_residual_rel for ch in checks),
        "myerson_monotone": all(ch.monotone for ch in checks),
    }


def _certificate(mech, checks, n_reports) -> dict:
    """``certified`` (the library's offline and online allocations only) or the note
    of ``myerson_mechanism`` (docs/audit-certification.md)."""
    from ..certification import certificate_note, certification

    if not checks:
        return {}
    from ..certification import certified_classes, unmodified

    verdicts = {certification(mech, ch) for ch in checks}
    why = unmodified(mech) if isinstance(mech, certified_classes()) else None
    note = certificate_note(mech, n_reports)
    if why:  # the library's class, but not the library's object
        note = f"not the library's own object ({why}); a search cannot prove IC"
    return {
        "certified": verdicts.pop() if len(verdicts) == 1 else None,
        "certificate_note": note,
    }


def _by_class(table, src, d) -> list[dict]:
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
            "ir_violations_at_cost": int((part["truthful_utility"] < -d["tol"][idx]).sum()),
            "min_truthful_utility": float(part["truthful_utility"].min()),
        })  # fmt: skip
    return rows


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
        low = max(pos.min(), tol * 1e-3)
        bins = np.geomspace(low, max(pos.max(), tol * 10, low * 10), 40)
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
