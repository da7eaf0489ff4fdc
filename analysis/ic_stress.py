"""IC stress: regret of truth-telling with confidence intervals (reads results only)."""

from __future__ import annotations

import numpy as np


def summarise(df):
    """Per mechanism x strategy x fraction x dist: regret quantiles and the share
    of profitable deviations with a 95% CI (normal approximation over rounds)."""
    g = df.groupby(["mechanism", "strategy", "strategic_fraction", "dist"])
    out = g.agg(
        max_regret=("max_regret", "max"),
        q90_regret=("q90_regret", "mean"),
        share_profitable=("share_profitable_deviation", "mean"),
        share_misreporting=("share_misreporting", "mean"),
        min_utility=("min_utility", "min"),
        rounds=("round", "size"),
    )
    sd = g.share_profitable_deviation.std().fillna(0).to_numpy()
    out["share_profitable_ci"] = 1.96 * sd / np.sqrt(out.rounds.to_numpy())
    return out.reset_index()


def section(df, folder):
    from .report import Section

    return Section(
        "Incentive compatibility under strategic sellers",
        "Regret = best utility on a report grid minus the utility of the report made. "
        "Truthful mechanisms keep it at 0 up to numerical tolerance; pay-as-bid is "
        "the negative control.",
        tables=[("regret summary", summarise(df))],
    )
