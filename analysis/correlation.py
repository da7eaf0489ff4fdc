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


def _frame(df: pd.DataFrame) -> pd.DataFrame:
    """Rows of runs before the study had a data column were all synthetic."""
    return df if "data" in df else df.assign(data="synthetic")


def summarise(df) -> pd.DataFrame:
    df = _frame(df)
    g = df.groupby(KEYS)
    out = g[[c for c in COLUMNS + ["cost_target_corr"] if c in df]].mean()
    out["test_error_ci"] = 1.96 * g.test_error.std() / np.sqrt(g.size())
    return out.reset_index()


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
    """Test error, payment expected given the data, the price of independence and the
    weight on mislabelled sellers against rho; colour: mechanism, style: data and target."""
    from matplotlib.lines import Line2D

    s = summarise(df)
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
                part.rho, part.test_error, yerr=part.test_error_ci.fillna(0), capsize=2, **kw
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
        ax[0].set(xlabel="copula ρ", ylabel="test error", title="private model's test error")
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


def section(df, folder):
    from .report import Section

    plot(df, str(folder / "correlation.png"))
    tables = [("per data, target, mechanism and rho", summarise(df))]
    gaps = price_of_independence(df)
    if len(gaps):
        tables.append(("the price of believing costs independent of the data", gaps))
    verdicts = audits(df)
    if len(verdicts):
        tables.append(("the audit's verdicts on smaller markets of the same population", verdicts))
        tables.append(("the audit's verdicts per mechanism", audit_summary(df)))
    return Section(
        "Correlation between costs and data (Gaussian copula)",
        "rho < 0 with target label_noise makes the mislabelled sellers cheap; the "
        "data-independent (offline) mechanism then buys mostly from them. The oracle knows "
        "each seller's cost law given its data. " + theory(df),
        tables=tables,
        figures=[("effect of rho", "correlation.png")],
    )
