"""Asymptotics: proxy loss against m, the fitted log-log slope with a bootstrap
CI next to the theory, and the limit for costs bounded away from 0 (reads
results only).

Theory: -1/4 for U[0, 1] (Thm IV.5 / Lemma IX.2 of 003).  More generally, if
F(c) ~ c^k near 0 then psi is of the order of c as well, and buying the n
cheapest sellers evenly costs about mu n^(-1/2) + 2 sqrt(sigma gamma (n/m)^(1/k));
balancing the two terms gives n ~ m^(1/(k+1)) and a loss of order
m^(-1/(2(k+1))): -1/4 for k = 1 (uniform), -1/6 for k = 2 (Beta(2, 2)).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from .figures import outside_legend, saved_figure

THEORY_SLOPE = {"uniform:0:1": -1 / 4, "beta:2:2:0:1": -1 / 6}


def fit_slope(df: pd.DataFrame, *, n_boot: int = 2000, seed: int = 0, min_m: int = 1000):
    """(slope, lo, hi): OLS of log mean loss on log m over m >= min_m; the 95%
    CI resamples replications within each m (percentile bootstrap)."""
    part = df[df.m >= min_m]
    groups = [g.proxy_loss.to_numpy() for _, g in part.groupby("m")]
    ms = np.log(np.sort(part.m.unique()).astype(float))
    if len(ms) < 2:
        return np.nan, np.nan, np.nan
    slope = np.polyfit(ms, np.log([g.mean() for g in groups]), 1)[0]
    rng = np.random.default_rng(seed)
    boots = [
        np.polyfit(ms, np.log([rng.choice(g, g.size).mean() for g in groups]), 1)[0]
        for _ in range(n_boot)
    ]
    lo, hi = np.percentile(boots, [2.5, 97.5])
    return float(slope), float(lo), float(hi)


def summarise(df):
    g = df.groupby(["dist", "m"])
    out = g.agg(
        proxy_loss=("proxy_loss", "mean"),
        sd=("proxy_loss", "std"),
        reps=("proxy_loss", "size"),
        limit=("limit", "first"),
        n_bought=("n_bought", "mean"),
        solve_seconds=("solve_seconds", "mean"),
    )
    out["ci"] = 1.96 * out.sd / np.sqrt(out.reps)
    return out.drop(columns="sd").reset_index()


def slopes(df):
    rows = []
    for dist, part in df.groupby("dist"):
        slope, lo, hi = fit_slope(part)
        rows.append(
            dict(
                dist=dist,
                slope=slope,
                ci_low=lo,
                ci_high=hi,
                theory=THEORY_SLOPE.get(dist, np.nan),
                limit=part.limit.iloc[0],
                loss_at_largest_m=part[part.m == part.m.max()].proxy_loss.mean(),
            )
        )
    return pd.DataFrame(rows)


def plot(df, path=None):
    """Proxy loss against m (95% CI over replications), with the theory's rate as a
    dashed line; costs bounded away from 0 (right) net of their limit."""
    s = summarise(df)
    with saved_figure(path, 2, figsize=(12, 4.8)) as (fig, ax):
        for i, (dist, part) in enumerate(s.groupby("dist")):
            bounded = part.limit.iloc[0] > 0
            a = ax[1] if bounded else ax[0]
            y = part.proxy_loss - part.limit if bounded else part.proxy_loss
            slope = THEORY_SLOPE.get(dist)
            label = dist if slope is None else f"{dist} (theory: slope {_fraction(slope)})"
            a.errorbar(
                part.m, y, yerr=part.ci.fillna(0), marker="o", capsize=3, color=f"C{i}", label=label
            )
            if slope is not None:
                anchor = part.iloc[len(part) // 2]
                ms = part.m.to_numpy(float)
                a.plot(
                    ms,
                    anchor.proxy_loss * (ms / anchor.m) ** slope,
                    "k--",
                    lw=1,
                    label="theory's rate (through the middle point)",
                )
        ax[0].set(
            xscale="log",
            yscale="log",
            xlabel="sellers m",
            ylabel="proxy loss (Eq. 11)",
            title="costs reaching 0: the loss tends to 0",
        )
        ax[1].set(
            xscale="log",
            yscale="log",
            xlabel="sellers m",
            ylabel="proxy loss − 2√(σγψ(c_min))",
            title="costs bounded away from 0: the loss tends to its limit",
        )
        for a in ax:
            if not a.has_data():
                a.set_visible(False)
        outside_legend(fig, ncols=3)
        fig.suptitle("Asymptotics: mean over replications, 95% CI")
    return fig


def _fraction(x: float) -> str:
    """-0.25 -> '−1/4' (the theory's slopes are unit fractions)."""
    return f"−1/{round(-1 / x)}" if x < 0 and abs(-1 / x - round(-1 / x)) < 1e-9 else f"{x:.3g}"


def section(df, folder):
    from .report import Section

    plot(df, str(folder / "asymptotic.png"))
    return Section(
        "Asymptotics m -> infinity (Thm IV.5 of [AES], Thm 3.4 of [SB])",
        "Offline proxy loss per m (mean, 95% CI over replications). The slope is "
        "fitted on m >= 1000 with a bootstrap CI over replications. The theory column "
        "is blank for costs bounded away from 0: no rate is predicted there, the loss "
        "tends to its positive limit.",
        tables=[("fitted slopes and limits", slopes(df)), ("proxy loss per m", summarise(df))],
        figures=[("proxy loss against m", "asymptotic.png")],
    )
