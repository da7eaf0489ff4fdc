"""IC stress: regret of truth-telling with confidence intervals (reads results only)."""

from __future__ import annotations

import numpy as np
import pandas as pd

from .figures import CONTROL_COLOR, PALETTE, outside_legend, saved_figure

KEYS = ["mechanism", "strategy", "strategic_fraction", "dist"]
CONTROL = "pay-as-bid"  # the negative control: not IC, misreports must pay there
METRICS = {
    "max_regret": "largest regret in a round",
    "share_misreporting": "share of sellers misreporting",
}


def summarise(df):
    """Per mechanism x strategy x fraction x dist: regret quantiles and the share
    of profitable deviations with a 95% CI (normal approximation over rounds;
    blank from a single round)."""
    g = df.groupby(KEYS)
    out = g.agg(
        max_regret=("max_regret", "max"),
        q90_regret=("q90_regret", "mean"),
        share_profitable=("share_profitable_deviation", "mean"),
        share_misreporting=("share_misreporting", "mean"),
        min_utility=("min_utility", "min"),
        rounds=("round", "size"),
    )
    sd = g.share_profitable_deviation.std().to_numpy()
    out["share_profitable_ci"] = 1.96 * sd / np.sqrt(out.rounds.to_numpy())
    return out.reset_index()


def by_replication(df) -> pd.DataFrame:
    """Mean over the rounds of each replication, then mean and 95% CI (normal
    approximation) over replications: the replications are independent markets,
    the rounds of one market are not. The CI is NaN from one replication."""
    per_rep = df.groupby(KEYS + ["replication"])[list(METRICS)].mean()
    g = per_rep.groupby(KEYS)
    out = g.mean()
    n = g.size()
    for col in METRICS:
        out[f"{col}_ci"] = 1.96 * g[col].std() / np.sqrt(n)
    out["replications"] = n
    return out.reset_index()


def plot(df, path=None):
    """Largest regret per round and share misreporting (columns) for every mechanism
    x strategy (rows), one row of panels per cost law; marker: strategic fraction,
    bars: 95% CI over replications. The control's rows are shaded red."""
    t = by_replication(df)
    mechs = sorted(t.mechanism.unique(), key=lambda m: (m == CONTROL, m))
    strategies = sorted(t.strategy.unique())
    fractions = sorted(t.strategic_fraction.unique())
    dists = sorted(t.dist.unique())
    rows = [(m, s) for m in mechs for s in strategies]
    markers = dict(zip(fractions, "os^v", strict=False))
    with saved_figure(
        path,
        len(METRICS),
        figsize=(12, 1.4 + 0.3 * len(rows) * len(dists)),
        nrows=len(dists),
        squeeze=False,
    ) as (fig, ax):
        for i, dist in enumerate(dists):
            for j, (col, name) in enumerate(METRICS.items()):
                _panel(ax[i, j], t[t.dist == dist], col, f"{name}, {dist}", rows, markers)
                ax[i, j].set_xlabel(name + (" (utility)" if col == "max_regret" else ""))
        handles = _legend_handles(strategies, fractions, markers, CONTROL in mechs)
        outside_legend(fig, handles, [h.get_label() for h in handles], ncols=4)
        reps = int(t.replications.min())
        fig.suptitle(
            "IC under strategic sellers: mean over rounds and replications"
            + (", 95% CI over replications" if reps > 1 else " (one replication: no CI)")
        )
    return fig


def _panel(a, part, col: str, title: str, rows: list, markers: dict) -> None:
    """One panel: ``col`` per (mechanism, strategy) row of ``part`` (one cost law), a marker
    per strategic fraction, the control's rows shaded."""
    strategies = sorted({s for _, s in rows})
    fractions = list(markers)
    ypos = {r: i for i, r in enumerate(rows)}
    offsets = np.linspace(-0.2, 0.2, len(fractions)) if len(fractions) > 1 else [0.0]
    control_rows = [ypos[r] for r in rows if r[0] == CONTROL]
    if control_rows:
        a.axhspan(
            min(control_rows) - 0.5, max(control_rows) + 0.5, color=CONTROL_COLOR, alpha=0.1, lw=0
        )
    a.axvline(0, color="k", lw=1)
    for k, frac in enumerate(fractions):
        sel = part[part.strategic_fraction == frac]
        ys = np.array([ypos[(m, s)] for m, s in zip(sel.mechanism, sel.strategy, strict=True)])
        for s_i, strat in enumerate(strategies):
            mask = (sel.strategy == strat).to_numpy()
            if not mask.any():
                continue
            a.errorbar(
                sel[col][mask],
                ys[mask] + offsets[k],
                xerr=sel[f"{col}_ci"][mask].fillna(0),
                fmt=markers[frac],
                color=PALETTE[s_i % len(PALETTE)],
                capsize=2,
                ms=5,
            )
    a.set_yticks(range(len(rows)), [f"{m} · {s}" for m, s in rows], fontsize=8)
    for tick, (m, _) in zip(a.get_yticklabels(), rows, strict=True):
        if m == CONTROL:
            tick.set_color(CONTROL_COLOR)
    a.set_ylim(len(rows) - 0.5, -0.5)
    a.grid(axis="x", color="0.9")
    a.set(ylabel="mechanism · strategy", title=title)
    if col == "share_misreporting":
        a.set_xlim(-0.03, 1.03)


def _legend_handles(strategies: list, fractions: list, markers: dict, control: bool) -> list:
    """A colour per strategy, a marker per strategic fraction, and the control's shade."""
    from matplotlib.lines import Line2D

    handles: list = [
        Line2D([], [], color=PALETTE[i % len(PALETTE)], marker="o", ls="", label=s)
        for i, s in enumerate(strategies)
    ]
    handles += [
        Line2D([], [], color="0.3", marker=markers[f], ls="", label=f"strategic fraction {f:g}")
        for f in fractions
    ]
    if control:
        from matplotlib.patches import Patch

        handles.append(
            Patch(color=CONTROL_COLOR, alpha=0.25, label=f"{CONTROL}: the negative control")
        )
    return handles


def section(df, folder):
    from .report import Section

    plot(df, str(folder / "ic_stress.png"))
    return Section(
        "Incentive compatibility under strategic sellers",
        "Regret = best utility on a report grid minus the utility of the report made. "
        "Truthful mechanisms keep it at 0 up to numerical tolerance for best-responding "
        "sellers, who then report the truth; pay-as-bid is the negative control, "
        "where best responders misreport. Shading or learning sellers pay for their "
        "misreports under every mechanism (their regret is the cost of the misreport). "
        "In the table, a confidence interval needs at least two rounds; in the figure, "
        "at least two replications.",
        tables=[
            ("regret summary", summarise(df)),
            ("mean over replications, 95% CI (the figure)", by_replication(df)),
        ],
        figures=[("regret and misreporting by mechanism x strategy", "ic_stress.png")],
    )
