"""Individual rationality: truthful utilities and participation (reads results only)."""

from __future__ import annotations

import numpy as np

from .figures import saved_figure


def summarise(df):
    g = df.groupby(["mechanism", "dist", "sellers"])
    out = g.agg(
        min_utility=("min_utility", "min"),
        q01_utility=("q01_utility", "mean"),
        median_utility=("median_utility", "mean"),
        share_negative=("share_negative", "mean"),
        participation=("participation", "mean"),
        rounds=("round", "size"),
    )
    return out.reset_index()


def plot(df, path):
    s = summarise(df)
    with saved_figure(path, 1, figsize=(8, 4)) as (fig, ax):
        labels = [f"{r.mechanism}\n{r.dist}, n={r.sellers}" for r in s.itertuples()]
        ax.bar(
            np.arange(len(s)),
            s.min_utility,
            color=["C3" if v < -1e-9 else "C0" for v in s.min_utility],
        )
        ax.axhline(0, color="k", lw=1)
        ax.set_xticks(np.arange(len(s)), labels, rotation=90, fontsize=6)
        ax.set(ylabel="smallest truthful utility", title="IR: no truthful seller loses")


def section(df, folder):
    from .report import Section

    plot(df, str(folder / "ir.png"))
    return Section(
        "Individual rationality",
        "Truthful sellers, costs redrawn each round; a "
        "seller stays out after a round with negative utility. IR holds where the "
        "smallest utility is >= -1e-9 and participation is 1.",
        tables=[("per mechanism", summarise(df))],
        figures=[("smallest truthful utility", "ir.png")],
    )
