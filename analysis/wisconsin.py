"""Wisconsin figure (Fig. 2 of 003 / 000) and the correlation table (reads results only)."""

from __future__ import annotations

import numpy as np

from .figures import saved_figure

METHODS = ["ours", "naive", "offline", "non_private"]


def summarise(df):
    """Mean and 95% CI half-width of each metric per (mapping, gamma, method)."""
    g = df.groupby(["mapping", "gamma", "method"])
    out = g[["test_error", "payment", "overall", "eps_avg"]].mean()
    n = g.size()
    for col in ("test_error", "payment", "overall"):
        out[f"{col}_ci"] = 1.96 * g[col].std().fillna(0) / np.sqrt(n)
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


def plot(df, path: str) -> None:
    s = summarise(df)
    with saved_figure(path, 3, figsize=(15, 4.2)) as (fig, ax):
        panels = [
            ("test_error", "misclassification (test)"),
            ("payment", "total payment"),
            ("overall", "overall error = misclassification + gamma * payment"),
        ]
        for mapping, style in (("independent", "-"), ("sorted", ":")):
            for i, method in enumerate(METHODS):
                part = s[(s.mapping == mapping) & (s.method == method)]
                if part.empty:
                    continue
                for a, (col, _) in zip(ax, panels, strict=True):
                    if col == "payment" and method == "non_private":
                        continue
                    a.errorbar(
                        part.gamma,
                        part[col],
                        yerr=part[f"{col}_ci"],
                        ls=style,
                        marker="o",
                        color=f"C{i}",
                        capsize=2,
                        label=f"{method} ({mapping})" if col == "test_error" else None,
                    )
        for a, (_, title) in zip(ax, panels, strict=True):
            a.set(xscale="log", xlabel="gamma (weight of payments)", title=title)
        ax[1].set_yscale("log")
        ax[0].legend(fontsize=7)
        fig.suptitle("Wisconsin breast cancer, c ~ U[1e-4, 5e-4] (dotted: costs sorted by feature)")


def section(df, folder):
    from .report import Section

    plot(df, str(folder / "wisconsin.png"))
    return Section(
        "Wisconsin replication (Fig. 2 of 003) and cost-data correlation (000)",
        "Hyperparameters chosen on the validation split by misclassification + gamma * payment; "
        "test metrics averaged over noise draws and replications. Payments are expected "
        "Myerson payments sum psi(c_i) eps_i.",
        tables=[
            ("per gamma and method", summarise(df)),
            ("effect of sorting costs by a feature (mean over gamma)", correlation_effect(df)),
        ],
        figures=[("misclassification, payments and overall error against gamma", "wisconsin.png")],
    )
