"""Figure: online/offline proxy-loss ratio vs m, and the xi sweep (reads results only).

market-sim report results/online_vs_offline
"""

from __future__ import annotations

import numpy as np

from .figures import saved_figure


def summarise(df):
    """Mean ratio with a 95% normal CI per (dist, m) at xi = 1."""
    full = df[df.xi == 1.0]
    g = full.groupby(["dist", "m"]).ratio
    out = g.agg(["mean", "std", "count"]).reset_index()
    out["ci"] = 1.96 * out["std"] / np.sqrt(out["count"])
    return out


def plot(df, path=None):
    s = summarise(df)
    with saved_figure(path, 2, figsize=(11, 4)) as (fig, ax):
        for dist, part in s.groupby("dist"):
            ax[0].errorbar(
                part.m, part["mean"] - 1, yerr=part.ci.fillna(0), marker="o", capsize=3, label=dist
            )
        ax[0].set(
            xscale="log",
            yscale="log",
            xlabel="number of sellers m",
            ylabel="online / offline proxy loss - 1",
            title="online (fluid rule) vs offline optimum",
        )
        ax[0].legend()
        m_top = df.m.max()
        xs = df[(df.dist == "uniform:0:1") & (df.m == m_top)].groupby("xi").online_loss
        xs = xs.agg(["mean", "std", "count"]).reset_index()
        ax[1].errorbar(
            xs.xi,
            xs["mean"],
            yerr=1.96 * xs["std"].fillna(0) / np.sqrt(xs["count"]),
            marker="o",
            capsize=3,
        )
        ax[1].set(
            xlabel="fraction of planned sellers that arrive, xi",
            ylabel="online proxy loss",
            title=f"ξ sweep (Thm V.1), U[0,1], m = {int(m_top):,}",
        )
    return fig


def section(df, folder):
    from .report import Section

    plot(df, str(folder / "online_vs_offline.png"))
    return Section(
        "Online vs offline (Thm V.1 of [AES])",
        "Ratio of the online fluid rule's proxy loss to the offline optimum on the "
        "same costs; it tends to 1 as m grows. Right: the online loss when only a "
        "fraction xi of the planned sellers arrives.",
        tables=[("ratio per distribution and m (95% CI)", summarise(df))],
        figures=[("competitive ratio and xi sweep", "online_vs_offline.png")],
    )
