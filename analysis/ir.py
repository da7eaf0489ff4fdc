"""Individual rationality: truthful utilities and participation (reads results only)."""

from __future__ import annotations

import numpy as np

from .figures import outside_legend, saved_figure

TOL = 1e-9  # the study's tolerance: a utility below -TOL is a loss


def summarise(df):
    g = df.groupby(["mechanism", "dist", "sellers"])
    out = g.agg(
        min_utility=("min_utility", "min"),
        q01_utility=("q01_utility", "mean"),
        median_utility=("median_utility", "mean"),
        share_negative=("share_negative", "mean"),
        worst_share_negative=("share_negative", "max"),
        participation=("participation", "mean"),
        rounds=("round", "size"),
    )
    return out.reset_index()


def _symlog_ticks(top: float) -> list[float]:
    """0, the tolerance and every third power of ten up to ``top``."""
    hi = int(np.ceil(np.log10(max(top, TOL * 10))))
    return [0.0] + [10.0**k for k in range(-9, hi + 1, 3)]


def plot(df, path=None):
    """Per cost law (columns): the smallest truthful utility and the mean median
    utility of each mechanism (top, symmetric log scale, the zero line and the
    tolerance band), and the largest share of truthful sellers who lost in a round
    (bottom). Marker colour: number of sellers."""
    s = summarise(df)
    dists = sorted(s.dist.unique())
    mechs = sorted(s.mechanism.unique())
    sizes = sorted(s.sellers.unique())
    nd = len(dists)
    with saved_figure(
        path,
        nd,
        figsize=(4.6 * nd, 2.2 + 1.2 * len(mechs)),
        nrows=2,
        squeeze=False,
        gridspec_kw=dict(height_ratios=[3, 2]),
    ) as (fig, ax):
        top_u = max(float(s.median_utility.max()), float(s.min_utility.max()), TOL)
        for j, dist in enumerate(dists):
            _law_panels(ax[0, j], ax[1, j], s[s.dist == dist], dist, mechs, sizes, top_u)
        outside_legend(
            fig,
            *ax[0, 0].get_legend_handles_labels(),
            ncols=len(sizes),
        )
        fig.suptitle("IR: no truthful seller loses (diamonds on or right of the zero line)")
    return fig


def _law_panels(up, down, part, dist: str, mechs: list, sizes: list, top_u: float) -> None:
    """One cost law's two panels: utilities (``up``) and the share who lost (``down``)."""
    offsets = np.linspace(-0.18, 0.18, len(sizes)) if len(sizes) > 1 else [0.0]
    y = {m: i for i, m in enumerate(mechs)}
    up.axvspan(-TOL, TOL, color="0.85", lw=0)
    up.axvline(0, color="k", lw=1)
    down.axvline(0, color="k", lw=1)
    for k, n in enumerate(sizes):
        rows = part[part.sellers == n]
        ys = np.array([y[m] for m in rows.mechanism]) + offsets[k]
        lost = rows.min_utility < -TOL
        up.hlines(ys, rows.min_utility, rows.median_utility, color=f"C{k}", lw=1)
        up.plot(rows.median_utility, ys, "o", mfc="none", ms=10, color=f"C{k}",
                label=f"median utility, {n} sellers")  # fmt: skip
        up.plot(rows.min_utility, ys, "D", ms=5, color=f"C{k}",
                label=f"smallest utility, {n} sellers")  # fmt: skip
        if lost.any():
            up.plot(rows.min_utility[lost], ys[lost.to_numpy()], "x", color="r", ms=10)
        down.plot(rows.worst_share_negative, ys, "D", ms=5, color=f"C{k}",
                  label=f"smallest utility, {n} sellers")  # fmt: skip
    up.set_xscale("symlog", linthresh=TOL, linscale=1.5)
    up.set_xticks(_symlog_ticks(top_u))
    up.set_xlim(-2 * TOL, top_u * 3)
    up.set(
        xlabel="truthful utility (symmetric log)",
        ylabel="mechanism",
        title=f"{dist}: utilities (grey: |u| <= 1e-9)",
    )
    down.set(
        xlim=(-0.04, 1.0),
        xlabel="share with utility < -1e-9 (worst round)",
        ylabel="mechanism",
        title=f"{dist}: sellers who lost",
    )
    for a in (up, down):
        a.set_yticks(range(len(mechs)), mechs)
        a.set_ylim(len(mechs) - 0.5, -0.5)
        a.grid(axis="x", color="0.9")


def section(df, folder):
    from .report import Section

    plot(df, str(folder / "ir.png"))
    return Section(
        "Individual rationality",
        "Truthful sellers, costs redrawn each round; a "
        "seller stays out after a round with negative utility. IR holds where the "
        "smallest utility is >= -1e-9 and participation is 1. The median utility "
        "shows the information rents paid; it is 0 where fewer than half the "
        "sellers are bought.",
        tables=[("per mechanism", summarise(df))],
        figures=[("smallest and median truthful utility; share of sellers who lost", "ir.png")],
    )
