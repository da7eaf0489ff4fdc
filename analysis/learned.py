"""A learned mechanism against offline, at truth and at equilibrium (reads results).

One row per (at, replication): means over the task's markets.  The table gives each
measure's mean over replications with the half-width of its 95% t interval; the paired
difference of the objectives (learned minus offline, same markets) is what the revelation
principle speaks of: it may be negative at truth (a network that is not IC can beat the
best Bayes-IC mechanism there) and cannot be negative in expectation at an exact
equilibrium.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from .correlation import _t_half_width as _half_width  # the 95% t half-width
from .figures import saved_figure

KEYS = ["network", "at"]
COLUMNS = [
    "objective_learned",
    "objective_offline",
    "objective_difference",
    "payment_learned",
    "payment_offline",
    "seller_utility_learned",
    "seller_utility_offline",
    "negative_utility_share",
    "min_utility_learned",
    "regret_ascent",
    "regret_grid",
    "regret_audit",
    "bne_epsilon_relative",
]
REGRETS = {
    "regret_ascent": "gradient ascent from truth (FL-Market)",
    "regret_grid": "25-point grid (MFG-RegretNet)",
    "regret_audit": "audit, with opponent profiles",
}

COLUMN_MEANINGS = {
    "at": "truth: every seller reports its cost; equilibrium: every seller bids the "
    "network's symmetric BNE b(c) (offline at truth, its equilibrium)",
    "objective_learned": "the network's Eq. 11 (003) with its payments, mean over markets",
    "objective_offline": "the offline mechanism's, same markets",
    "objective_difference": "learned minus offline, paired by market (negative: the "
    "network is better)",
    "objective_difference_ci": "half-width of its 95% interval over all the markets of all "
    "replications (pooled from each task's count, mean and sd: _pooled_half_width)",
    "payment_learned": "the network's total payment per market",
    "payment_offline": "the offline mechanism's (Myerson) total payment per market",
    "seller_utility_learned": "a seller's mean utility t - c eps under the network",
    "seller_utility_offline": "the same under offline at truth",
    "negative_utility_share": "share of sellers whose utility under the network is below "
    "-1e-9 (IR violations at truth)",
    "min_utility_learned": "the most negative utility under the network (least over markets)",
    "regret_ascent, regret_grid, regret_audit": "the largest regret over the audited "
    "markets' sellers by each protocol (market_sim.referee); at truth only",
    "bne_epsilon_relative": "the solver's verified epsilon of the BNE over the utility "
    "(at equilibrium only): how far b is from an exact equilibrium",
    "bne_converged": "whether a certifying stopping rule of the solver fired",
    "objective_mu, objective_sigma, objective_gamma": "the Eq. 11 weights both mechanisms "
    "were built and scored with (by default the ones the network was trained on)",
    "*_ci": "half-width of the 95% t interval over replications",
}


def summarise(df: pd.DataFrame) -> pd.DataFrame:
    """Per network and ``at``: each column's mean and 95% t half-width over replications."""
    g = df.groupby(KEYS)
    out = pd.DataFrame(index=g.size().index)
    for col in (c for c in COLUMNS if c in df):
        out[col] = g[col].mean()
        out[f"{col}_ci"] = g[col].agg(_half_width)
    if {"markets", "objective_difference_sd"} <= set(df):
        out["objective_difference_ci"] = g.apply(_pooled_half_width, include_groups=False)
    if "bne_converged" in df:
        out["bne_converged"] = g["bne_converged"].agg(
            lambda v: bool(np.all(v.dropna() > 0)) if v.notna().any() else np.nan
        )
    out["replications"] = g.size()
    return out.reset_index()


def _pooled_half_width(part: pd.DataFrame) -> float:
    """Half-width of the 95% (normal) interval of the mean paired difference over all the
    markets of ``part``'s tasks: each task gives its markets' count, mean and standard
    deviation, and the markets are independent draws (at equilibrium, given the one BNE
    every task plays), so the pooled variance is the tasks' within sums of squares plus
    their between sum, over N - 1."""
    n = part["markets"].to_numpy(dtype=float)
    mean = part["objective_difference"].to_numpy(dtype=float)
    sd = np.nan_to_num(part["objective_difference_sd"].to_numpy(dtype=float))
    total = n.sum()
    if total < 2 or not np.isfinite(mean).all():
        return np.nan
    grand = float(np.sum(n * mean) / total)
    ss = float(np.sum((n - 1) * sd**2 + n * (mean - grand) ** 2))
    return float(1.959963984540054 * np.sqrt(ss / (total - 1) / total))


def plot(df: pd.DataFrame, path=None):
    """Left: the objective difference (learned minus offline) at truth and at equilibrium,
    with its 95% interval; right: the network's regret at truth by each protocol."""
    s = summarise(df)
    with saved_figure(path, 2, figsize=(11, 4)) as (fig, ax):
        ats = list(s["at"])
        ax[0].errorbar(
            range(len(ats)),
            s["objective_difference"],
            yerr=s["objective_difference_ci"].fillna(0.0),
            fmt="o",
            capsize=4,
        )
        ax[0].axhline(0.0, color="0.5", lw=1)
        nets = [Path(str(n)).stem for n in s.network]
        ax[0].set_xticks(range(len(ats)), [f"{a}\n({n})" for a, n in zip(ats, nets, strict=True)])
        ax[0].set_xlim(-0.5, len(ats) - 0.5)
        ax[0].set(
            title="objective: learned minus offline (Eq. 11)",
            xlabel="sellers play",
            ylabel="paired difference (95% CI)",
        )
        truth = s[s["at"] == "truth"]
        names = [k for k in REGRETS if k in s and truth[k].notna().any()]
        values = [float(truth[k].max()) for k in names] if len(truth) else []
        ax[1].bar(range(len(names)), values, color=[f"C{i}" for i in range(len(names))])
        ax[1].set_xticks(
            range(len(names)), [REGRETS[k].replace(" (", "\n(") for k in names], fontsize=8
        )
        ax[1].set(
            title="the network's largest regret at truth",
            xlabel="protocol",
            ylabel="largest regret (mean over replications)",
        )
    return fig


def section(df, folder):
    from .report import Section

    plot(df, str(folder / "learned.png"))
    return Section(
        "A learned mechanism against offline",
        "Both mechanisms on the same markets. At truth every seller reports its cost; at "
        "equilibrium every seller bids the network's symmetric BNE (offline, being IC, at "
        "truth). The revelation principle allows the network to beat offline only where "
        "the sellers do not respond to it; the BNE's epsilon says how exact the "
        "equilibrium played is.",
        tables=[("per network and play", summarise(df))],
        figures=[("objective difference and regrets", "learned.png")],
    )
