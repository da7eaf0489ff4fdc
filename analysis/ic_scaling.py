"""IC and IR against m: regret, deviations and the buyer's loss with 95% CIs
(reads results only)."""

from __future__ import annotations

import numpy as np
import pandas as pd

KEYS = ["mechanism", "strategy", "strategic_fraction", "m"]


def _ci(x) -> float:
    x = np.asarray(x, dtype=float)
    x = x[np.isfinite(x)]
    return float(1.96 * x.std(ddof=1) / np.sqrt(x.size)) if x.size > 1 else np.nan


def _finite_mean(x) -> float:
    x = np.asarray(x, dtype=float)
    x = x[np.isfinite(x)]
    return float(x.mean()) if x.size else np.nan


def _share_inf(x) -> float:
    return float(np.mean(~np.isfinite(np.asarray(x, dtype=float))))


def summarise(df: pd.DataFrame) -> pd.DataFrame:
    """Last round of each task, then mean and 95% CI over replications (the proxy
    loss over rounds that bought someone; ``p_nobody_bought`` the share that did not)."""
    last = df[df["round"] == df.groupby(KEYS + ["replication"])["round"].transform("max")]
    g = last.groupby(KEYS)
    out = g.agg(
        rel_max_regret=("rel_max_regret", "mean"),
        rel_max_regret_ci=("rel_max_regret", _ci),
        max_regret=("max_regret", "max"),
        share_profitable=("share_profitable", "mean"),
        ir_violations=("ir_violations", "sum"),
        proxy_loss=("proxy_loss", _finite_mean),
        proxy_loss_ci=("proxy_loss", _ci),
        p_nobody_bought=("proxy_loss", _share_inf),
        total_payment=("total_payment", "mean"),
        replications=("replication", "nunique"),
    )
    return out.reset_index()


def online_offline_ratio(table: pd.DataFrame) -> pd.DataFrame:
    """Proxy loss online / offline under the same strategic play."""
    keys = ["strategy", "strategic_fraction", "m"]
    on = table[table.mechanism == "online"].set_index(keys).proxy_loss
    off = table[table.mechanism == "offline"].set_index(keys).proxy_loss
    both = on.index.intersection(off.index)
    return (on[both] / off[both]).rename("online / offline loss").reset_index()


def figure(table: pd.DataFrame, path=None):
    """Regret of truth-telling and the buyer's loss against m (half the sellers
    best-respond); the control (pay-as-bid) dashed, in red."""
    from .figures import CONTROL_COLOR, PALETTE, outside_legend, saved_figure

    sel = table[(table.strategy == "best-response") & (table.strategic_fraction == 0.5)]
    with saved_figure(path, ncols=2, figsize=(11, 4.6)) as (fig, ax):
        others = iter(PALETTE)
        for mech, part in sel.groupby("mechanism"):
            part = part.sort_values("m")
            control = mech == "pay-as-bid"
            kw = dict(
                fmt="o--" if control else "o-",
                color=CONTROL_COLOR if control else next(others),
                label=mech + (" (the negative control)" if control else ""),
            )
            ax[0].errorbar(
                part.m,
                np.maximum(part.rel_max_regret, 1e-16),
                yerr=part.rel_max_regret_ci.fillna(0),
                **kw,
            )
            ax[1].errorbar(part.m, part.proxy_loss, yerr=part.proxy_loss_ci.fillna(0), **kw)
        ax[0].set(
            xscale="log",
            yscale="log",
            xlabel="sellers m",
            ylabel="largest regret / mean payment (floor 1e-16)",
            title="regret of truth-telling",
        )
        ax[1].set(
            xscale="log",
            yscale="log",
            xlabel="sellers m",
            ylabel="proxy loss",
            title="the buyer's loss",
        )
        outside_legend(fig)
        fig.suptitle("IC and IR against m, half the sellers best-responding; 95% CI")
    return fig


def section(df, folder):
    from .report import Section

    table = summarise(df)
    figure(table, folder / "ic_scaling.png")
    return Section(
        "IC and IR against m",
        "Regret of truth-telling on a sample of sellers, relative to the mean payment "
        "of a bought seller (last round; mean and 95% CI over replications). The "
        "offline, online and private cut-off mechanisms keep it at rounding level at "
        "every m (the private cut-off within its approximate-IC bound); pay-as-bid, "
        "the control, stays clearly positive.",
        tables=[
            ("by mechanism, strategy, strategic fraction and m", table),
            ("online / offline proxy loss under strategic play", online_offline_ratio(table)),
        ],
        figures=[("regret and loss against m", "ic_scaling.png")],
    )
