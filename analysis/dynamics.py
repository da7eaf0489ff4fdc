"""Learning dynamics: curves over rounds with 95% CIs over replications, against the
truthful and Bayes-Nash references, and findings computed from the rows (reads
results only, re-runs nothing)."""

from __future__ import annotations

import numpy as np
import pandas as pd

KEYS = ["mechanism", "learner", "m"]
WINDOW = 0.1  # the first / last share of the rounds that "early" / "late" average
N_BINS = 30  # curves average the rounds in about this many bins
TRUTH_SHARE = 0.05  # "reaches truth": late share of bought sellers misreporting <= this
BNE_CLOSE = 0.02  # "reaches the BNE": late mean report/cost within this of the BNE's
IC_TOL = 1e-7  # as scenarios.dynamics: truth is an equilibrium when truth_gain <= this

# quantity -> (axis label, the truthful reference, the BNE column or None)
QUANTITIES = {
    "report_ratio": ("mean report / cost", 1.0, "bne_report_ratio"),
    "bought_report_ratio": ("report / cost, bought sellers", 1.0, "bne_bought_report_ratio"),
    "share_bought_misreporting": ("share of bought sellers misreporting", 0.0, None),
    "avg_external_regret": ("average external regret", 0.0, None),
    "loss_ratio": ("proxy loss / truthful proxy loss", 1.0, "bne_loss_ratio"),
    "payment_ratio": ("payment / truthful payment", 1.0, "bne_payment_ratio"),
}
REGRET_FALLBACK = ("mean_regret", "ex-post regret this round")
# distances of the learners' round from the BNE (summarised, not plotted)
DISTANCES = {
    "bne_linf": "largest |report - b(c)| over costs winning >= 1% at the BNE",
    "bne_action_gap": "largest distance from b(c) to the learner's nearest action, over the "
    "same costs (how close the action set lets a learner get)",
    "bne_utility_gap": "mean utility minus the utility at the BNE (same costs)",
    "collusion_index": "Calvano et al.'s Delta: 0 at the equilibrium, 1 at the sellers' "
    "joint-profit maximum",
    "collusion_index_markup": "the same Delta with 1 at the best common markup",
}


def _action_gap(r) -> str:
    """The sentence part on the action set's distance to b(c), when the summary has it."""
    if "bne_action_gap_late" in r and np.isfinite(r.bne_action_gap_late):
        return f" (its nearest action {_fmt(r.bne_action_gap_late)} away)"
    return ""


def _ci(x) -> float:
    x = np.asarray(x, dtype=float)
    x = x[np.isfinite(x)]
    return float(1.96 * x.std(ddof=1) / np.sqrt(x.size)) if x.size > 1 else np.nan


def _mean(x) -> float:
    x = np.asarray(x, dtype=float)
    x = x[np.isfinite(x)]
    return float(x.mean()) if x.size else np.nan


# ratio -> (numerator, denominator): means over a bin (or window) of a replication,
# then their ratio (a ratio estimator: one round with a tiny truthful loss cannot
# dominate the curve as it would in a mean of per-round ratios)
RATIOS = {
    "loss_ratio": ("proxy_loss", "truthful_proxy_loss"),
    "payment_ratio": ("total_payment", "truthful_payment"),
    "bne_loss_ratio": ("bne_proxy_loss", "truthful_proxy_loss"),
    "bne_payment_ratio": ("bne_payment", "truthful_payment"),
}


def _present(df: pd.DataFrame, col: str) -> bool:
    col = RATIOS.get(col, (col,))[0]
    return col in df and bool(np.isfinite(df[col].to_numpy(dtype=float)).any())


def per_replication(df: pd.DataFrame, keys: list[str], cols: list[str]) -> pd.DataFrame:
    """Per ``keys`` x replication: the mean of each column over its rows (finite values
    only), the ratios of ``RATIOS`` as ratios of such means."""
    raw = sorted(
        {c for c in cols if c not in RATIOS} | {x for c in cols if c in RATIOS for x in RATIOS[c]}
    )
    raw = [c for c in raw if c in df]
    out = (
        df[raw].replace([np.inf, -np.inf], np.nan).groupby([df[k] for k in keys + ["replication"]])
    )
    out = out.mean()
    for c in cols:
        if c in RATIOS:
            a, b = RATIOS[c]
            if a in out and b in out:
                num, den = out[a].to_numpy(dtype=float), out[b].to_numpy(dtype=float)
                ok = np.isfinite(num) & np.isfinite(den) & (den > 0)
                out[c] = np.where(ok, num / np.where(ok, den, 1.0), np.nan)
    return out[[c for c in cols if c in out]]


def quantities(df: pd.DataFrame) -> dict:
    """The plotted quantities present with data (the ex-post regret stands in for
    the external regret when the model did not measure it)."""
    out = {}
    for col, spec in QUANTITIES.items():
        if _present(df, col):
            out[col] = spec
        elif col == "avg_external_regret":
            alt, label = REGRET_FALLBACK
            if _present(df, alt):
                out[alt] = (label, 0.0, None)
    return out


def _over_replications(per_rep: pd.DataFrame, keys: list[str]) -> pd.DataFrame:
    """Mean and 95% CI (normal approximation; NaN from one replication) over the
    replications of ``per_rep``, with their number."""
    g = per_rep.groupby(keys)
    out = g.mean()
    sd, n = g.std(ddof=1), g.count()
    for c in per_rep.columns:
        out[f"{c}_ci"] = 1.96 * sd[c] / np.sqrt(n[c])  # NaN from one replication
    out["replications"] = g.size()
    return out


def curves(df: pd.DataFrame) -> pd.DataFrame:
    """Per mechanism x learner x m and bin of rounds (about ``N_BINS`` bins): each
    quantity over the bin in each replication (``per_replication``), then mean and
    95% CI over replications.  ``round``: the bin's mean round."""
    cols = list(quantities(df))
    width = max(1, int(np.ceil(df["round"].max() / N_BINS)))
    df = df.assign(bin=(df["round"] - 1) // width)
    per_rep = per_replication(df, KEYS + ["bin"], ["round", *cols])
    out = _over_replications(per_rep, KEYS + ["bin"]).drop(columns="round_ci")
    return out.reset_index()


def _window(df: pd.DataFrame, late: bool) -> pd.DataFrame:
    last = df.groupby(KEYS)["round"].transform("max")
    k = np.maximum(1, np.ceil(WINDOW * last))
    return df[df["round"] > last - k] if late else df[df["round"] <= k]


REFERENCES = [
    "bne_report_ratio",
    "bne_bought_report_ratio",
    "bne_loss_ratio",
    "bne_payment_ratio",
    "bne_epsilon",
]


def references(df: pd.DataFrame) -> pd.DataFrame:
    """Per mechanism x m: ``truth_gain`` and the BNE's report/cost, proxy loss and
    payment relative to truthful over all rounds (NaN for IC mechanisms)."""
    keys = ["mechanism", "m"]
    cols = ["truth_gain"] + [c for c in REFERENCES if _present(df, c)]
    return per_replication(df, keys, cols).groupby(keys).mean().reset_index()


def summarise(df: pd.DataFrame) -> pd.DataFrame:
    """Per mechanism x learner x m: each quantity over the first and the last
    ``WINDOW`` of the rounds of each replication, then mean and 95% CI over
    replications; with the references of the mechanism (``references``)."""
    cols = list(quantities(df)) + [c for c in DISTANCES if _present(df, c)]
    parts = []
    for late in (False, True):
        per_rep = per_replication(_window(df, late), KEYS, cols)
        part = _over_replications(per_rep, KEYS)
        parts.append(part.add_suffix("_late" if late else "_early"))
    table = pd.concat(parts, axis=1).reset_index()
    table = table.rename(columns={"replications_early": "replications"}).drop(
        columns="replications_late"
    )
    table["rounds"] = table.set_index(KEYS).index.map(df.groupby(KEYS)["round"].max())
    order = [f"{c}{s}" for c in cols for s in ("_early", "_ci_early", "_late", "_ci_late")]
    table = table[KEYS + ["rounds", "replications"] + order]
    return table.merge(references(df), on=["mechanism", "m"], how="left")


# the report's tables: (caption, quantities) -- one wide table split by what it is about
TABLES = (
    ("the sellers' reports", ["report_ratio", "bought_report_ratio", "share_bought_misreporting",
                              "bne_report_ratio", "bne_bought_report_ratio"]),
    ("the buyer's loss and payment, relative to truthful sellers on the same costs",
     ["loss_ratio", "payment_ratio", "bne_loss_ratio", "bne_payment_ratio"]),
    ("learning: regret and distance from the BNE",
     ["avg_external_regret", "mean_regret", *DISTANCES, "truth_gain", "bne_epsilon"]),
)  # fmt: skip
SHORT = {
    "report_ratio": "report/cost",
    "bought_report_ratio": "report/cost (bought)",
    "share_bought_misreporting": "bought misreporting",
    "avg_external_regret": "external regret",
    "mean_regret": "ex-post regret",
    "loss_ratio": "loss ratio",
    "payment_ratio": "payment ratio",
    "bne_report_ratio": "BNE report/cost",
    "bne_bought_report_ratio": "BNE report/cost (bought)",
    "bne_loss_ratio": "BNE loss ratio",
    "bne_payment_ratio": "BNE payment ratio",
    "bne_linf": "max |report - b(c)|",
    "bne_action_gap": "max |nearest action - b(c)|",
    "bne_utility_gap": "utility - BNE's",
    "collusion_index": "collusion index",
    "collusion_index_markup": "collusion index (markup)",
    "truth_gain": "gain from misreporting",
    "bne_epsilon": "BNE epsilon",
}


def report_tables(df: pd.DataFrame) -> list[tuple[str, pd.DataFrame]]:
    """``summarise`` as a few narrow tables (caption, table), one per subject: each
    quantity's first and last window as "mean ± 95% CI"; references (the BNE's, the
    gain from misreporting) as one number; columns without data left out."""
    t = summarise(df)
    out = []
    for caption, cols in TABLES:
        table = t[KEYS].copy()
        for c in cols:
            if f"{c}_early" in t:
                for when in ("early", "late"):
                    name = f"{SHORT[c]}, {'first' if when == 'early' else 'last'}"
                    pairs = zip(t[f"{c}_{when}"], t[f"{c}_ci_{when}"], strict=True)
                    table[name] = [_fmt(v, ci) for v, ci in pairs]
            elif c in t and np.isfinite(t[c].to_numpy(dtype=float)).any():
                table[SHORT[c]] = [_fmt(v) for v in t[c]]
        if len(table.columns) > len(KEYS):
            out.append((caption, table))
    when = f"first and last {WINDOW:.0%} of the rounds, mean ± 95% CI over replications"
    runs = ("rounds and replications", t[KEYS + ["rounds", "replications"]])
    return [(f"{caption}; {when}", table) for caption, table in out] + [runs]


def _markup_index(r) -> str:
    """The late Delta against the best common markup, "mean ± CI"."""
    return _fmt(r.collusion_index_markup_late, r.collusion_index_markup_ci_late)


def _fmt(v, ci=np.nan) -> str:
    if not np.isfinite(v):
        return "n/a"
    return f"{v:.3g} ± {ci:.2g}" if np.isfinite(ci) else f"{v:.3g}"


def findings(df: pd.DataFrame) -> list[str]:
    """What the results say, one paragraph per question, every number from ``df``."""
    t = summarise(df)
    m_top = int(t.m.max())
    t = t[t.m == m_top]
    ic = t[t.truth_gain <= IC_TOL]
    non_ic = t[t.truth_gain > IC_TOL]
    # the bought sellers' reports set the payments: compare those when measured
    col = "bought_report_ratio" if "bne_bought_report_ratio" in non_ic else "report_ratio"
    what = (
        "bought sellers' mean report/cost" if col == "bought_report_ratio" else "mean report/cost"
    )
    out: list[str] = []
    _ic_findings(out, ic, m_top)
    _bne_findings(out, non_ic, m_top, col, what)
    _q_learning_findings(out, non_ic, col, what)
    _collusion_findings(out, t, m_top)
    _regret_findings(out, t, m_top)
    return out


def _ic_findings(out: list[str], ic: pd.DataFrame, m_top: int) -> None:
    """Under the IC mechanisms: do the learners reach truth?"""
    share = "share_bought_misreporting"
    lines = []
    for mech, part in ic.groupby("mechanism"):
        parts = []
        for _, r in part.iterrows():
            reached = r[f"{share}_late"] + np.nan_to_num(r[f"{share}_ci_late"]) <= TRUTH_SHARE
            parts.append(
                f"{r.learner} {_fmt(r[f'{share}_early'])} -> "
                f"{_fmt(r[f'{share}_late'], r[f'{share}_ci_late'])} "
                f"(report/cost {_fmt(r.report_ratio_late, r.report_ratio_ci_late)}; "
                f"{'reaches truth' if reached else 'does not reach truth'})"
            )
        lines.append(f"under {mech}: " + "; ".join(parts))
    if lines:
        out.append(
            f"IC mechanisms (no misreport gained more than {IC_TOL:g} against truthful "
            f"others), m = {m_top}: share of bought sellers misreporting, first -> last "
            f"{WINDOW:.0%} of the rounds (mean ± 95% CI over replications; 'reaches truth' "
            f"when the upper end is <= {TRUTH_SHARE:g}): " + "; ".join(lines) + "."
        )


def _bne_findings(out: list[str], non_ic: pd.DataFrame, m_top: int, col: str, what: str) -> None:
    """Under the non-IC mechanisms: where the learners end against the symmetric BNE."""
    bcol = f"bne_{col}"
    lines = []
    for mech, part in non_ic.groupby("mechanism"):
        if bcol not in part or not np.isfinite(part[bcol]).any():
            continue
        bne = float(part[bcol].iloc[0])
        parts = []
        for _, r in part.iterrows():
            gap = r[f"{col}_late"] - bne
            verdict = (
                "at the BNE"
                if abs(gap) <= BNE_CLOSE
                else ("above the BNE" if gap > 0 else "below the BNE")
            )
            dist = ""
            if "bne_linf_late" in r and np.isfinite(r.bne_linf_late):
                dist = (
                    f"; L-inf to the BNE bid {_fmt(r.bne_linf_late, r.bne_linf_ci_late)}"
                    f"{_action_gap(r)}, "
                    f"utility minus the BNE's "
                    f"{_fmt(r.bne_utility_gap_late, r.bne_utility_gap_ci_late)}"
                )
            parts.append(
                f"{r.learner} {_fmt(r[f'{col}_late'], r[f'{col}_ci_late'])} ({verdict}; "
                f"proxy loss x{_fmt(r.loss_ratio_late)}, payment x{_fmt(r.payment_ratio_late)}"
                f"{dist})"
            )
        lines.append(
            f"under {mech} the symmetric BNE gives {bne:.3g} (all sellers: "
            f"{_fmt(float(part.bne_report_ratio.iloc[0]))}; solver epsilon "
            f"{_fmt(float(part.bne_epsilon.iloc[0]))}; proxy loss "
            f"x{_fmt(float(part.bne_loss_ratio.iloc[0]))}, payment "
            f"x{_fmt(float(part.bne_payment_ratio.iloc[0]))} of truthful); the learners end at "
            + "; ".join(parts)
        )
    if lines:
        out.append(
            f"Non-IC mechanisms, m = {m_top}, {what} over the last {WINDOW:.0%} of the "
            f"rounds ('at the BNE' within {BNE_CLOSE:g}): " + "; ".join(lines) + "."
        )


def _q_learning_findings(out: list[str], non_ic: pd.DataFrame, col: str, what: str) -> None:
    """Do the Q-learners overbid together beyond the BNE?"""
    bcol = f"bne_{col}"
    is_q = non_ic.learner.str.startswith("q-learning")
    q = non_ic[is_q]
    if len(q) and bcol in q:
        parts = []
        for _, r in q.iterrows():
            others = non_ic[(non_ic.mechanism == r.mechanism) & ~is_q]
            lo = r[f"{col}_late"] - np.nan_to_num(r[f"{col}_ci_late"])
            above = lo > r[bcol] and r.payment_ratio_late > r.bne_payment_ratio
            top = others[f"{col}_late"].max() if len(others) else np.nan
            verdict = (
                "they overbid together"
                + (
                    ", more than every other learner"
                    if not np.isfinite(top) or r[f"{col}_late"] > top
                    else ", as the other learners do"
                )
                if above
                else "no joint overbidding beyond the BNE"
            )
            parts.append(
                f"under {r.mechanism}, {r.learner} sellers end at {what} "
                f"{_fmt(r[f'{col}_late'], r[f'{col}_ci_late'])} against the BNE's "
                f"{r[bcol]:.3g} and the other learners' highest {_fmt(top)}; the buyer pays "
                f"x{_fmt(r.payment_ratio_late)} of truthful against x{r.bne_payment_ratio:.3g} "
                f"at the BNE: {verdict}"
            )
        out.append(
            "Q-learners (overbidding together: the CI's lower end above the BNE and the "
            "payment above the BNE's): " + "; ".join(parts) + "."
        )
    elif len(non_ic):
        out.append("Q-learners: none in these results.")


def _collusion_findings(out: list[str], t: pd.DataFrame, m_top: int) -> None:
    """Calvano et al.'s collusion index per learner and mechanism."""
    if "collusion_index_late" in t:
        has = t[np.isfinite(t["collusion_index_late"])]
        markup = "collusion_index_markup_late" in t
        parts = [
            f"{r.learner} under {r.mechanism} "
            f"{_fmt(r.collusion_index_late, r.collusion_index_ci_late)}"
            + (f" (markup index {_markup_index(r)})" if markup else "")
            for _, r in has.iterrows()
        ]
        if parts:
            out.append(
                f"Collusion index (Calvano et al.'s Delta of the mean utility, last {WINDOW:.0%} "
                f"of the rounds, m = {m_top}; 0 = the equilibrium, 1 = the sellers' joint-profit "
                "maximum): " + "; ".join(parts) + "."
            )


def _regret_findings(out: list[str], t: pd.DataFrame, m_top: int) -> None:
    """How each learner's regret moves from the first to the last rounds."""
    reg = next((c for c in ("avg_external_regret", "mean_regret") if f"{c}_late" in t), None)
    if reg is not None:
        has = t[np.isfinite(t[f"{reg}_late"]) & np.isfinite(t[f"{reg}_early"])]
        parts = [
            f"{r.learner} under {r.mechanism} {_fmt(r[f'{reg}_early'])} -> "
            f"{_fmt(r[f'{reg}_late'], r[f'{reg}_ci_late'])}"
            for _, r in has.iterrows()
        ]
        name = "average external regret" if reg == "avg_external_regret" else "ex-post regret"
        falls = int((has[f"{reg}_late"] < has[f"{reg}_early"]).sum())
        missing = sorted(set(t.learner) - set(has.learner))
        out.append(
            f"Regret ({name}, first -> last {WINDOW:.0%} of the rounds, m = {m_top}): "
            + "; ".join(parts)
            + f". It falls for {falls} of {len(has)} mechanism x learner pairs"
            + (f" (not measured for {', '.join(missing)})." if missing else ".")
        )


def plot(df: pd.DataFrame, path=None):
    """One row of panels per quantity, one column per mechanism; colour: learner,
    line style: m; bands: 95% CI over replications (a share's clipped to [0, 1]);
    dashed black: the truthful reference, red: the symmetric BNE (non-IC mechanisms;
    line style: m)."""
    from matplotlib.lines import Line2D

    from .figures import CONTROL_COLOR, PALETTE, outside_legend, saved_figure

    c = curves(df)
    refs = references(df)
    qs = quantities(df)
    mechs = sorted(c.mechanism.unique())
    learners = sorted(c.learner.unique())
    sizes = sorted(c.m.unique())
    colour = {lr: PALETTE[i % len(PALETTE)] for i, lr in enumerate(learners)}
    style = dict(zip(sizes, ["-", "--", ":", "-."] * 4, strict=False))
    reps = int(c.replications.min())
    with saved_figure(
        path,
        len(mechs),
        figsize=(3.6 * len(mechs) + 1, 2.3 * len(qs) + 1),
        nrows=len(qs),
        squeeze=False,
    ) as (fig, ax):
        for i, (col, (label, truth, bne_col)) in enumerate(qs.items()):
            for j, mech in enumerate(mechs):
                a = ax[i, j]
                a.axhline(truth, color="k", ls="--", lw=1)
                for (lr, m), part in c[c.mechanism == mech].groupby(["learner", "m"]):
                    part = part.sort_values("round")
                    y = part[col].to_numpy(dtype=float)
                    a.plot(part["round"], y, color=colour[lr], ls=style[m])
                    ci = part[f"{col}_ci"].to_numpy(dtype=float)
                    if np.isfinite(ci).any():
                        lo, hi = y - np.nan_to_num(ci), y + np.nan_to_num(ci)
                        if col.startswith("share"):
                            lo, hi = np.clip(lo, 0, 1), np.clip(hi, 0, 1)
                        a.fill_between(
                            part["round"],
                            lo,
                            hi,
                            color=colour[lr],
                            alpha=0.15,
                            lw=0,
                        )
                if bne_col and bne_col in refs:
                    for _, r in refs[refs.mechanism == mech].iterrows():
                        if np.isfinite(r[bne_col]):
                            a.axhline(r[bne_col], color=CONTROL_COLOR, ls=style.get(r.m, "-"))
                            lo, hi = a.get_ylim()  # keep the reference inside, with a margin
                            pad = 0.05 * (max(hi, r[bne_col]) - min(lo, r[bne_col]))
                            a.set_ylim(min(lo, r[bne_col] - pad), max(hi, r[bne_col] + pad))
                a.grid(color="0.92")
                a.set(xlabel="round", ylabel=label, title=mech if i == 0 else "")
                a.title.set_fontsize(10)
                a.yaxis.label.set_fontsize(8)
        handles = [Line2D([], [], color=colour[lr], label=lr) for lr in learners]
        if len(sizes) > 1:
            handles += [Line2D([], [], color="0.3", ls=style[m], label=f"m = {m}") for m in sizes]
        handles.append(Line2D([], [], color="k", ls="--", label="truthful reference"))
        if any(b and b in refs for _, _, b in qs.values()):
            handles.append(Line2D([], [], color=CONTROL_COLOR, label="symmetric BNE (non-IC only)"))
        outside_legend(fig, handles, [h.get_label() for h in handles], ncols=4)
        fig.suptitle(
            "Learning dynamics: mean over replications per bin of rounds"
            + (f", 95% CI over {reps} replications" if reps > 1 else " (one replication: no CI)")
            + (f", m = {sizes[0]}" if len(sizes) == 1 else "")
        )
    return fig


def section(df, folder):
    from .report import Section

    plot(df, str(folder / "dynamics.png"))
    text = (
        "Every seller learns; each round records the mean report/cost, the share of "
        "bought sellers misreporting, the regret, and the buyer's proxy loss and payment, "
        "also as ratios to the truthful outcome on the same costs; for mechanisms under "
        "which truth is not an equilibrium, the symmetric Bayes-Nash equilibrium played on "
        "the same costs is the second reference.\n\n" + "\n\n".join(findings(df))
    )
    return Section(
        "Learning dynamics",
        text,
        tables=report_tables(df),
        figures=[("learning curves by mechanism, learner and m", "dynamics.png")],
    )
