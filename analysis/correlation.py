"""Cost-data correlation (Gaussian copula): test error and payments against rho."""

from __future__ import annotations

import numpy as np

from .figures import saved_figure


def summarise(df):
    g = df.groupby(["target", "mechanism", "rho"])
    out = g[["test_error", "payment", "budget_on_mislabelled", "cost_target_corr"]].mean()
    out["test_error_ci"] = 1.96 * g.test_error.std().fillna(0) / np.sqrt(g.size())
    return out.reset_index()


def plot(df, path):
    s = summarise(df)
    with saved_figure(path, 3, figsize=(15, 4)) as (fig, ax):
        for i, ((target, mech), part) in enumerate(s.groupby(["target", "mechanism"])):
            style = "-" if target == "label_noise" else ":"
            kw = dict(marker="o", ls=style, color=f"C{i}", label=f"{mech}, cost ~ {target}")
            ax[0].errorbar(part.rho, part.test_error, yerr=part.test_error_ci, capsize=2, **kw)
            ax[1].plot(part.rho, part.payment, **kw)
            ax[2].plot(part.rho, part.budget_on_mislabelled, **kw)
        ax[0].set(xlabel="copula rho", ylabel="test error", title="private model's test error")
        ax[1].set(xlabel="copula rho", ylabel="sum psi eps", title="expected payment")
        ax[2].set(xlabel="copula rho", ylabel="share of a", title="weight on mislabelled sellers")
        ax[0].legend(fontsize=7)


def section(df, folder):
    from .report import Section

    plot(df, str(folder / "correlation.png"))
    return Section(
        "Correlation between costs and data (Gaussian copula)",
        "rho < 0 with target label_noise makes the mislabelled sellers cheap; the "
        "data-independent (offline) mechanism then buys mostly from them.",
        tables=[("per target, mechanism and rho", summarise(df))],
        figures=[("effect of rho", "correlation.png")],
    )
