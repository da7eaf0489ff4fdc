"""Wisconsin figure (Fig. 2 of 003 / 000) and the correlation table (reads results only)."""

from __future__ import annotations

import numpy as np

from .figures import outside_legend, saved_figure

METHODS = ["ours", "naive", "offline", "non_private"]


def summarise(df):
    """Mean and 95% CI half-width of each metric per (mapping, gamma, method)."""
    g = df.groupby(["mapping", "gamma", "method"])
    out = g[["test_error", "payment", "overall", "eps_avg"]].mean()
    n = g.size()
    for col in ("test_error", "payment", "overall"):
        out[f"{col}_ci"] = 1.96 * g[col].std() / np.sqrt(n)
    return out.reset_index()


def correlation_effect(df):
    """Sorted minus independent mapping, per method: mean over gamma and replications."""
    s = df.groupby(["method", "mapping"])[["test_error", "payment", "overall"]].mean()
    s = s.unstack("mapping")
    out = {}
    for col in ("test_error", "payment", "overall"):
        out[f"{col}_independent"] = s[(col, "independent")]
        out[f"{col}_sorted"] = s[(col, "sorted")]
    import pandas as pd

    return pd.DataFrame(out).reset_index()


def plot(df, path=None):
    """Misclassification, payment and overall error against gamma (95% CI); colour:
    method, line style: how costs are mapped to the rows."""
    from matplotlib.lines import Line2D

    s = summarise(df)
    styles = {"independent": "-", "sorted": ":"}
    panels = [
        ("test_error", "misclassification (test)", "share misclassified"),
        ("payment", "total payment", "Σ ψ(cᵢ) εᵢ (log)"),
        ("overall", "overall error", "misclassification + γ payment"),
    ]
    methods = [m for m in METHODS if m in set(s.method)]
    with saved_figure(path, 3, figsize=(15, 4.8)) as (fig, ax):
        for mapping, style in styles.items():
            for i, method in enumerate(METHODS):
                part = s[(s.mapping == mapping) & (s.method == method)]
                if part.empty:
                    continue
                for a, (col, _, _) in zip(ax, panels, strict=True):
                    if col == "payment" and method == "non_private":
                        continue
                    a.errorbar(
                        part.gamma,
                        part[col],
                        yerr=part[f"{col}_ci"].fillna(0),
                        ls=style,
                        marker="o",
                        color=f"C{i}",
                        capsize=2,
                    )
        for a, (_, title, ylabel) in zip(ax, panels, strict=True):
            a.set(xscale="log", xlabel="γ (weight of payments)", ylabel=ylabel, title=title)
        ax[1].set_yscale("log")
        handles = [
            Line2D([], [], color=f"C{METHODS.index(m)}", marker="o", label=m) for m in methods
        ]
        handles += [
            Line2D([], [], color="0.3", ls=style, label=f"costs {mapping}")
            for mapping, style in styles.items()
            if mapping in set(s.mapping)
        ]
        outside_legend(fig, handles, [h.get_label() for h in handles], ncols=len(handles))
        fig.suptitle(
            "Wisconsin breast cancer, c ~ U[1e-4, 5e-4]; error bars: 95% CI "
            "(the non-private model pays nothing)"
        )
    return fig


def section(df, folder):
    from .report import Section

    plot(df, str(folder / "wisconsin.png"))
    return Section(
        "Wisconsin replication (Fig. 2 of [AES]) and cost-data correlation ([SB])",
        "Hyperparameters chosen on the validation split by misclassification + gamma * payment; "
        "test metrics averaged over noise draws and replications. Payments are expected "
        "Myerson payments sum psi(c_i) eps_i. The non-private model buys no privacy: "
        "its eps_avg is infinite (—). A confidence interval is blank from one split "
        "and one noise draw.",
        tables=[
            ("per gamma and method", summarise(df)),
            ("effect of sorting costs by a feature (mean over gamma)", correlation_effect(df)),
        ],
        figures=[("misclassification, payments and overall error against gamma", "wisconsin.png")],
    )
