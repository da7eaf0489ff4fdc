"""Cost-data correlation (Gaussian copula): test error and payments against rho."""

from __future__ import annotations

import numpy as np

from .figures import outside_legend, saved_figure


def summarise(df):
    g = df.groupby(["target", "mechanism", "rho"])
    out = g[["test_error", "payment", "budget_on_mislabelled", "cost_target_corr"]].mean()
    out["test_error_ci"] = 1.96 * g.test_error.std() / np.sqrt(g.size())
    return out.reset_index()


def plot(df, path=None):
    """Test error (95% CI over replications), payment and weight on mislabelled sellers
    against rho; colour: mechanism, line style: what the cost is tied to."""
    from matplotlib.lines import Line2D

    s = summarise(df)
    mechs = sorted(s.mechanism.unique())
    targets = sorted(s.target.unique())
    styles = {t: ("-" if t == "label_noise" else ":") for t in targets}
    with saved_figure(path, 3, figsize=(15, 4.6)) as (fig, ax):
        for (target, mech), part in s.groupby(["target", "mechanism"]):
            kw = dict(marker="o", ls=styles[target], color=f"C{mechs.index(mech)}")
            ax[0].errorbar(
                part.rho, part.test_error, yerr=part.test_error_ci.fillna(0), capsize=2, **kw
            )
            ax[1].plot(part.rho, part.payment, **kw)
            ax[2].plot(part.rho, part.budget_on_mislabelled, **kw)
        ax[0].set(xlabel="copula ρ", ylabel="test error", title="private model's test error")
        ax[1].set(xlabel="copula ρ", ylabel="Σ ψ(cᵢ) εᵢ", title="expected payment")
        ax[2].set(
            xlabel="copula ρ",
            ylabel="share of the weights a",
            title="weight on mislabelled sellers",
        )
        handles = [Line2D([], [], color=f"C{i}", marker="o", label=m) for i, m in enumerate(mechs)]
        handles += [
            Line2D([], [], color="0.3", ls=styles[t], label=f"cost tied to {t}") for t in targets
        ]
        outside_legend(fig, handles, [h.get_label() for h in handles])
        fig.suptitle("Costs correlated with data (Gaussian copula); error bars: 95% CI")
    return fig


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
