"""Cost-data correlation (Gaussian copula): what the dependence changes, against rho.

Rows per (data, target, rho, replication) and mechanism: ``offline`` (believes costs
independent of the data), ``oracle`` (psi_i given the data; not defined at |rho| = 1)
and ``data_dependent``.  The price of believing in independence is the paired
difference of Eq. 11 (payments expected given the data) between offline and the oracle,
>= 0 in every market because the oracle minimises that very objective.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from .figures import outside_legend, saved_figure

KEYS = ["data", "target", "mechanism", "rho"]
COLUMNS = ["test_error", "payment", "payment_true", "objective", "budget_on_mislabelled"]

# What every column of the report's tables means (printed with the report).
COLUMN_MEANINGS = {
    "rho": "the copula's latent correlation between the cost and the target (what --set rho asks)",
    "accuracy": "the private model's test accuracy, 1 - test_error, mean over replications",
    "accuracy_ci": "half-width of the 95% t interval of accuracy over replications",
    "test_error": "share of test rows misclassified by the private model (Alg. 1, 003), "
    "mean over replications of the mean over noise draws",
    "test_error_ci": "half-width of the 95% t interval of test_error over replications",
    "payment": "sum psi_i eps_i with the marginal psi: what a platform believing costs "
    "independent of the data expects to pay",
    "payment_true": "sum psi_i(c_i | data) eps_i: the expected Myerson payment under the true "
    "conditional law",
    "objective": "Eq. 11 (003) with payment_true",
    "budget_on_mislabelled": "share of the weights a on mislabelled sellers",
    "realised_rank_corr": "Spearman correlation of cost and target in the drawn markets "
    "(mean over replications)",
    "spearman_of_rho": "the Gaussian copula's Spearman correlation for a continuous target, "
    "(6/pi) arcsin(rho/2); a binary target (label, label_noise) is attenuated further",
    "mechanism_a, mechanism_b": "the two mechanisms of a paired difference",
    "accuracy_diff": "accuracy of a minus accuracy of b, paired by replication (same market, "
    "same noise draws): mean",
    "accuracy_diff_ci": "half-width of its 95% t interval over replications",
    "objective_diff": "objective of a minus objective of b, paired by replication: mean",
    "objective_diff_ci": "half-width of its 95% t interval over replications",
    "replications": "number of paired replications",
}


def _t_half_width(values) -> float:
    """Half-width of the 95% t interval of the mean of ``values`` (NaN below 2 values)."""
    from scipy import stats

    v = np.asarray(values, dtype=float)
    v = v[np.isfinite(v)]
    if v.size < 2:
        return np.nan
    return float(stats.t.ppf(0.975, v.size - 1) * v.std(ddof=1) / np.sqrt(v.size))


def spearman_of_rho(rho):
    """Spearman's rho of a bivariate normal with correlation ``rho`` (Pearson 1907):
    (6/pi) arcsin(rho/2); the rank correlation a Gaussian copula gives two continuous
    margins.  It is below |rho| except at 0 and +-1."""
    return 6 / np.pi * np.arcsin(np.asarray(rho, dtype=float) / 2)


def _frame(df: pd.DataFrame) -> pd.DataFrame:
    """Rows of runs before the study had a data column were all synthetic."""
    return df if "data" in df else df.assign(data="synthetic")


def summarise(df) -> pd.DataFrame:
    """Per data, target, mechanism and rho: accuracy and test error with 95% t intervals,
    the other columns' means, and the realised rank correlation beside rho's Spearman."""
    df = _frame(df).assign(accuracy=lambda d: 1 - d.test_error)
    g = df.groupby(KEYS)
    out = g[[c for c in ["accuracy"] + COLUMNS if c in df]].mean()
    out.insert(1, "accuracy_ci", g.accuracy.agg(_t_half_width))
    out.insert(3, "test_error_ci", g.test_error.agg(_t_half_width))
    if "cost_target_corr" in df:
        out["realised_rank_corr"] = g.cost_target_corr.mean()
    out = out.reset_index()
    out["spearman_of_rho"] = spearman_of_rho(out.rho)
    return out


def paired_differences(df) -> pd.DataFrame:
    """Every pair of mechanisms (a, b) per data, target and rho: accuracy and Eq. 11 of a
    minus b, paired by replication (the same market and noise draws), mean and 95% t
    interval half-width."""
    df = _frame(df).assign(accuracy=lambda d: 1 - d.test_error)
    values = [c for c in ("accuracy", "objective") if c in df]
    wide = df.pivot_table(
        index=["data", "target", "rho", "replication"], columns="mechanism", values=values
    )
    mechs = sorted(df.mechanism.unique())
    rows = []
    for (data, target, rho), part in wide.groupby(level=["data", "target", "rho"]):
        for i, a in enumerate(mechs):
            for b in mechs[i + 1 :]:
                row = dict(data=data, target=target, rho=rho, mechanism_a=a, mechanism_b=b)
                for col in values:
                    if (col, a) not in part or (col, b) not in part:
                        continue
                    diff = (part[(col, a)] - part[(col, b)]).dropna()
                    row[f"{col}_diff"] = float(diff.mean()) if len(diff) else np.nan
                    row[f"{col}_diff_ci"] = _t_half_width(diff)
                    row["replications"] = len(diff)
                if "replications" in row and row["replications"] > 0:
                    rows.append(row)
    return pd.DataFrame(rows)


def column_meanings(*tables: pd.DataFrame) -> pd.DataFrame:
    """The meaning of every column of ``tables`` that has one (COLUMN_MEANINGS)."""
    cols = dict.fromkeys(c for t in tables for c in t.columns)
    names = [k for k in COLUMN_MEANINGS if any(c in cols for c in k.split(", "))]
    return pd.DataFrame({"column": names, "meaning": [COLUMN_MEANINGS[k] for k in names]})


def price_of_independence(df) -> pd.DataFrame:
    """Per (data, target, rho): Eq. 11 of offline minus the oracle's, paired by
    replication (mean, 95% CI half-width, smallest), relative to the oracle's, and the
    test-error difference."""
    df = _frame(df)
    if "objective" not in df or "oracle" not in set(df.mechanism):
        return pd.DataFrame()
    wide = df.pivot_table(
        index=["data", "target", "rho", "replication"],
        columns="mechanism",
        values=["objective", "test_error"],
    ).dropna()
    gap = wide[("objective", "offline")] - wide[("objective", "oracle")]
    rel = gap / wide[("objective", "oracle")]
    err = wide[("test_error", "offline")] - wide[("test_error", "oracle")]
    frame = pd.DataFrame({"gap": gap, "relative_gap": rel, "test_error_gap": err})
    g = frame.groupby(level=["data", "target", "rho"])
    out = g.mean()
    out["gap_ci"] = 1.96 * g.gap.std() / np.sqrt(g.size())
    out["relative_gap_ci"] = 1.96 * g.relative_gap.std() / np.sqrt(g.size())
    out["gap_min"] = g.gap.min()
    return out.reset_index()


def audits(df) -> pd.DataFrame:
    """The audit's verdicts per data, target, rho and mechanism audited (replication 0),
    with the mean truthful payment of a seller in the audited markets (runs before it was
    recorded lack that column)."""
    df = _frame(df)
    if "audit_ic" not in df:
        return pd.DataFrame()
    done = df[df.audit_ic.notna()]
    cols = ["data", "target", "rho", "mechanism", "audit_ic", "audit_ir", "audit_max_gain"]
    return done[cols + [c for c in ["audit_type_gain", "audit_mean_payment"] if c in done]]


def audit_summary(df) -> pd.DataFrame:
    """Per mechanism audited: cases, how many IC and IR, the largest gain and where,
    the largest gain relative to the mean truthful payment, and the largest gain between
    adjacent types (the audit's other evidence of non-IC)."""
    v = audits(df)
    if v.empty:
        return v
    rows = []
    for mech, part in v.groupby("mechanism"):
        top = part.loc[part.audit_max_gain.idxmax()]
        rel = part.audit_max_gain / part.audit_mean_payment if "audit_mean_payment" in part else []
        rows.append(
            dict(
                mechanism=mech,
                cases=len(part),
                ic=int((part.audit_ic == "ic").sum()),
                ir=int((part.audit_ir == "ir").sum()),
                max_gain=float(top.audit_max_gain),
                where=f"{top.data}, {top.target}, rho={top.rho:g}",
                max_gain_over_payment=float(np.max(rel)) if len(rel) else np.nan,
                max_type_gain=float(part.audit_type_gain.max())
                if "audit_type_gain" in part
                else np.nan,
            )
        )
    return pd.DataFrame(rows)


def theory(df) -> str:
    """The oracle minimises Eq. 11 given the data, so offline's gap is never below 0."""
    gaps = price_of_independence(df)
    if gaps.empty:
        return ""
    worst = float(gaps.gap_min.min())
    ok = worst >= -1e-9 * max(1.0, float(_frame(df).objective.abs().max()))
    return (
        f"Theory check: offline's Eq. 11 minus the oracle's is >= 0 in every market "
        f"(smallest {worst:.3g}): {'holds' if ok else 'FAILS'}."
    )


def plot(df, path=None):
    """Accuracy, payment expected given the data, the price of independence and the
    weight on mislabelled sellers against rho; colour: mechanism, style: data and target.
    A run of one rho draws bars instead (:func:`bar_plot`)."""
    from matplotlib.lines import Line2D

    s = summarise(df)
    if s.rho.nunique() == 1:
        return bar_plot(df, path)
    gaps = price_of_independence(df)
    mechs = sorted(s.mechanism.unique())
    cases = sorted({(d, t) for d, t in zip(s.data, s.target, strict=True)})
    styles = dict(zip(cases, ["-", ":", "--", "-."] * 2, strict=False))
    markers = dict(zip(cases, "osD^v<>", strict=False))
    with saved_figure(path, 4, figsize=(19, 4.6)) as (fig, ax):
        for (data, target, mech), part in s.groupby(["data", "target", "mechanism"]):
            kw = dict(
                marker=markers[(data, target)],
                ls=styles[(data, target)],
                color=f"C{mechs.index(mech)}",
            )
            ax[0].errorbar(
                part.rho, part.accuracy, yerr=part.accuracy_ci.fillna(0), capsize=2, **kw
            )
            ax[1].plot(
                part.rho, part.payment_true if "payment_true" in part else part.payment, **kw
            )
            if part.budget_on_mislabelled.notna().any():
                ax[3].plot(part.rho, part.budget_on_mislabelled, **kw)
        for (data, target), part in gaps.groupby(["data", "target"]) if len(gaps) else []:
            ax[2].errorbar(
                part.rho,
                part.relative_gap,
                yerr=part.relative_gap_ci.fillna(0),
                marker=markers[(data, target)],
                ls=styles[(data, target)],
                color="0.25",
                capsize=2,
            )
        ax[0].set(xlabel="copula ρ", ylabel="accuracy", title="private model's test accuracy")
        ax[1].set(
            xlabel="copula ρ", ylabel="Σ ψᵢ(cᵢ | data) εᵢ", title="payment expected given the data"
        )
        ax[2].set(
            xlabel="copula ρ",
            ylabel="(offline − oracle) / oracle",
            title="Eq. 11 lost by believing independence",
        )
        ax[3].set(
            xlabel="copula ρ",
            ylabel="share of the weights a",
            title="weight on mislabelled sellers",
        )
        handles = [Line2D([], [], color=f"C{i}", marker="o", label=m) for i, m in enumerate(mechs)]
        handles += [
            Line2D(
                [],
                [],
                color="0.3",
                ls=styles[c],
                marker=markers[c],
                label=f"{c[0]}, cost tied to {c[1]}",
            )
            for c in cases
        ]
        outside_legend(fig, handles, [h.get_label() for h in handles])
        fig.suptitle("Costs correlated with data (Gaussian copula); error bars: 95% CI")
    return fig


def bar_plot(df, path=None):
    """One rho: accuracy (95% t interval), payment expected given the data and the weight on
    mislabelled sellers as bars per mechanism, one group per data and target."""
    s = summarise(df)
    cases = sorted({(d, t) for d, t in zip(s.data, s.target, strict=True)})
    mechs = sorted(s.mechanism.unique())
    width = 0.8 / len(mechs)
    panels = [
        ("accuracy", "accuracy_ci", "private model's test accuracy"),
        ("payment_true", None, "payment expected given the data"),
        ("budget_on_mislabelled", None, "weight on mislabelled sellers"),
    ]
    with saved_figure(path, 3, figsize=(15, 4.6)) as (fig, ax):
        for k, mech in enumerate(mechs):
            part = s[s.mechanism == mech].set_index(["data", "target"]).reindex(cases)
            x = np.arange(len(cases)) + (k - (len(mechs) - 1) / 2) * width
            for axis, (col, ci, _) in zip(ax, panels, strict=True):
                if col not in part or part[col].isna().all():
                    continue
                err = part[ci].fillna(0) if ci else None
                axis.bar(x, part[col], width, yerr=err, capsize=2, color=f"C{k}", label=mech)
        labels = [f"{d}, cost tied to {t}" for d, t in cases]
        for axis, (col, _, title) in zip(ax, panels, strict=True):
            axis.set(xticks=np.arange(len(cases)), title=title, ylabel=col)
            axis.set_xticklabels(labels, rotation=15, ha="right")
        handles, names = ax[0].get_legend_handles_labels()
        outside_legend(fig, handles, names)
        fig.suptitle(
            f"Costs correlated with data, copula ρ = {s.rho.iloc[0]:g}; error bars: 95% CI"
        )
    return fig


def section(df, folder):
    from .report import Section

    plot(df, str(folder / "correlation.png"))
    summary, pairs = summarise(df), paired_differences(df)
    tables = [("per data, target, mechanism and rho", summary)]
    if len(pairs):
        tables.append(("paired differences between mechanisms (same markets, same noise)", pairs))
    gaps = price_of_independence(df)
    if len(gaps):
        tables.append(("the price of believing costs independent of the data", gaps))
    verdicts = audits(df)
    if len(verdicts):
        tables.append(("the audit's verdicts on smaller markets of the same population", verdicts))
        tables.append(("the audit's verdicts per mechanism", audit_summary(df)))
    tables.append(("what each column means", column_meanings(*(t for _, t in tables))))
    return Section(
        "Correlation between costs and data (Gaussian copula)",
        "rho < 0 with target label_noise makes the mislabelled sellers cheap; the "
        "data-independent (offline) mechanism then buys mostly from them. The oracle knows "
        "each seller's cost law given its data. rho is the copula's latent correlation: the "
        "rank correlation it gives a continuous target is (6/pi) arcsin(rho/2) "
        "(spearman_of_rho), and a binary target (label, label_noise) shows less "
        "(realised_rank_corr, measured in the drawn markets). " + theory(df),
        tables=tables,
        figures=[("effect of rho", "correlation.png")],
    )
