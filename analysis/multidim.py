"""Several private fields: the peers' cost-grid measure against the joint audit (reads results).

One row per (mechanism, budget, replication); the table gives each measure's mean over
replications with the half-width of its 95% t interval.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from .correlation import _t_half_width as _half_width  # the 95% t half-width
from .figures import outside_legend, saved_figure

KEYS = ["mechanism", "budget"]
COLUMNS = [
    "peer_regret",
    "peer_share_gaining",
    "peer_ir_violation",
    "peer_share_ir",
    "joint_share_gaining",
    "joint_mean_gain",
    "joint_max_gain",
    "joint_share_ir",
    "cap_exceeded",
    "joint_share_escaping",
]

COLUMN_MEANINGS = {
    "peer_regret": "MFG-RegretNet's normalised regret: cost alone on a 25-point grid, caps ignored",
    "peer_share_gaining": "share of sellers with a positive regret under that measure",
    "peer_ir_violation": "its normalised IR violation max(0, -u) / (v eps), caps ignored",
    "peer_share_ir": "share of sellers with a positive IR violation under that measure",
    "joint_share_gaining": "share of sellers the joint audit (cost and cap) finds a finite gain "
    "for",
    "joint_mean_gain": "mean gain the joint audit finds (unnormalised; 0 where none)",
    "joint_max_gain": "largest gain the joint audit finds",
    "joint_share_ir": "share of truthful sellers with utility < -1e-9 (caps enforced)",
    "cap_exceeded": "share of truthful sellers whose cap the mechanism exceeds (utility -inf)",
    "joint_share_escaping": "share of sellers whose cap the truth exceeds and who escape by a "
    "misreport (an infinite gain; not in joint_share_gaining)",
    "*_ci": "half-width of the 95% t interval over replications",
}


def summarise(df: pd.DataFrame) -> pd.DataFrame:
    """Per mechanism and budget: each column's mean and 95% t half-width over replications."""
    g = df.groupby(KEYS)
    out = pd.DataFrame(index=g.size().index)
    for col in COLUMNS:
        out[col] = g[col].mean()
        out[f"{col}_ci"] = g[col].agg(_half_width)
    out["replications"] = g.size()
    return out.reset_index()


def plot(df: pd.DataFrame, path=None):
    """Share of sellers gaining (left) and violating IR (right) per mechanism: the peers'
    measure (hollow) against the joint audit (filled), one colour per budget."""
    s = summarise(df)
    mechs = sorted(s.mechanism.unique())
    budgets = sorted(s.budget.unique())
    y = {m: i for i, m in enumerate(mechs)}
    offsets = np.linspace(-0.25, 0.25, len(budgets)) if len(budgets) > 1 else [0.0]
    with saved_figure(path, 2, figsize=(11, 1.4 + 0.55 * len(mechs))) as (fig, ax):
        panels = (
            ("peer_share_gaining", "joint_share_gaining", "share of sellers who gain"),
            ("peer_share_ir", "joint_share_ir", "share of truthful sellers who lose"),
        )
        for a, (peer, joint, title) in zip(ax, panels, strict=True):
            for k, b in enumerate(budgets):
                rows = s[s.budget == b]
                ys = np.array([y[m] for m in rows.mechanism]) + offsets[k]
                a.errorbar(
                    rows[peer],
                    ys,
                    xerr=rows[f"{peer}_ci"],
                    fmt="o",
                    mfc="none",
                    color=f"C{k}",
                    label=f"B={b:g}, cost grid (peers)",
                )
                a.errorbar(
                    rows[joint],
                    ys,
                    xerr=rows[f"{joint}_ci"],
                    fmt="D",
                    color=f"C{k}",
                    label=f"B={b:g}, joint audit",
                )
            a.set_yticks(range(len(mechs)), mechs)
            a.set_ylim(len(mechs) - 0.5, -0.5)
            a.set(
                xlim=(-0.03, 1.03),
                title=title,
                xlabel="share (95% CI over replications)",
                ylabel="mechanism",
            )
            a.grid(axis="x", color="0.9")
        outside_legend(fig, *ax[0].get_legend_handles_labels(), ncols=len(budgets))
        fig.suptitle("The peers' cost-only measure (hollow) against the joint audit (filled)")
    return fig


def section(df, folder):
    from .report import Section

    plot(df, str(folder / "multidim.png"))
    return Section(
        "Several private fields (cost and cap)",
        "MFG-RegretNet's generator (10 sellers, v ~ U[0, 1], cap ~ U[0.1, 5], "
        "|D| ~ U{10..500}). The peers' measure varies the cost alone on a 25-point grid "
        "and ignores caps; the joint audit searches cost and cap together and counts a "
        "privacy loss above the true cap as an unbounded IR violation.",
        tables=[("per mechanism and budget", summarise(df))],
        figures=[("sellers who gain or lose, two measures", "multidim.png")],
    )
