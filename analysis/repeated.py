"""Repeated markets under privacy budgets: per mechanism x budget x accountant, how long
sellers stay, how much privacy they sell, what the buyer pays and learns, and how much
tighter than the sum the composed loss is (reads results only, re-runs nothing)."""

from __future__ import annotations

import numpy as np
import pandas as pd

KEYS = ["mechanism", "accountant", "budget", "m"]
LATE = 10  # "late" = the last LATE rounds; "early" = the first LATE


def _ci(x) -> float:
    x = np.asarray(x, dtype=float)
    x = x[np.isfinite(x)]
    return float(1.96 * x.std(ddof=1) / np.sqrt(x.size)) if x.size > 1 else np.nan


def _nanmean(x) -> float:
    x = np.asarray(x, dtype=float)
    x = x[np.isfinite(x)]
    return float(x.mean()) if x.size else np.nan


def per_replication(df: pd.DataFrame) -> pd.DataFrame:
    """One row per key x replication: what the whole run of rounds gave."""
    rows = []
    for key, g in df.groupby(KEYS + ["replication"]):
        g = g.sort_values("round")
        m, last = int(key[3]), g.iloc[-1]
        rounds = int(g["round"].max())
        half = g[g.sellers_in_market <= m / 2]["round"]
        rows.append(
            {
                **dict(zip(KEYS + ["replication"], key, strict=True)),
                "rounds": rounds,
                "in_market_end": float(last.sellers_in_market) / m,
                "half_gone_round": float(half.iloc[0]) if len(half) else np.nan,
                "sales_per_seller": float(last.mean_sales),
                "eps_sold_per_seller": float(last.mean_eps_sum),
                "eps_spent_per_seller": float(last.mean_eps_spent),
                "tightness": float(last.mean_eps_sum / last.mean_eps_spent)
                if last.mean_eps_spent > 0
                else np.nan,
                "payment": float(g.total_payment.sum()),
                "test_error_early": _nanmean(g[g["round"] <= LATE].test_error),
                "test_error_late": _nanmean(g[g["round"] > rounds - LATE].test_error),
                "rounds_without_model": int(g.test_error.isna().sum()),
            }
        )
    return pd.DataFrame(rows)


METRICS = [
    "in_market_end",
    "half_gone_round",
    "sales_per_seller",
    "eps_sold_per_seller",
    "eps_spent_per_seller",
    "tightness",
    "payment",
    "test_error_early",
    "test_error_late",
    "rounds_without_model",
]


def summarise(df: pd.DataFrame) -> pd.DataFrame:
    """Per key: each metric's mean and 95% CI over replications."""
    per = per_replication(df)
    out = []
    for key, g in per.groupby(KEYS):
        row = dict(zip(KEYS, key, strict=True))
        row["rounds"], row["replications"] = int(g.rounds.max()), len(g)
        for c in METRICS:
            row[c], row[f"{c}_ci"] = _nanmean(g[c]), _ci(g[c])
        out.append(row)
    return pd.DataFrame(out)


def _f(v, digits=3) -> str:
    return "n/a" if not np.isfinite(v) else f"{v:.{digits}g}"


def _pm(r, c) -> str:
    ci = r[f"{c}_ci"]
    return _f(r[c]) + (f" ± {_f(ci, 2)}" if np.isfinite(ci) else "")


def findings(df: pd.DataFrame) -> list[str]:
    """What the results say, every number from ``df``."""
    t = summarise(df)
    out = []
    for (mech, budget), part in t.groupby(["mechanism", "budget"]):
        part = part.set_index("accountant")
        if "basic" not in part.index:
            continue
        b = part.loc["basic"]
        pure = ":" not in str(budget) or float(str(budget).split(":")[1]) == 0
        head = (
            f"**{mech}, budget {budget}** (m = {int(b.m)}, {int(b.rounds)} rounds, "
            f"{int(b.replications)} replications): "
        )
        if pure:
            out.append(
                head + f"pure DP, every accountant is the sum; sellers sold "
                f"{_pm(b, 'sales_per_seller')} times, "
                f"{_f(100 * b.in_market_end)}% of them were left at the end."
            )
            continue
        parts = []
        for acc, r in part.iterrows():
            parts.append(
                f"{acc}: {_pm(r, 'sales_per_seller')} sales a seller, "
                f"{_pm(r, 'eps_sold_per_seller')} of eps sold for a composed loss of "
                f"{_pm(r, 'eps_spent_per_seller')} (sum / composed {_f(r.tightness)}), "
                f"{_f(100 * r.in_market_end)}% of sellers left at the end"
                + (
                    f", half gone by round {_f(r.half_gone_round)}"
                    if np.isfinite(r.half_gone_round)
                    else ""
                )
                + f", buyer paid {_pm(r, 'payment')}, test error {_f(r.test_error_early)} "
                f"(first {LATE} rounds) -> {_f(r.test_error_late)} (last {LATE})"
            )
        gain = []
        for acc in ("rdp", "pld"):
            if acc in part.index and b.sales_per_seller > 0:
                gain.append(f"{acc} {_f(part.loc[acc].sales_per_seller / b.sales_per_seller)}x")
        out.append(
            head
            + "; ".join(parts)
            + (". Sales a seller relative to the sum: " + ", ".join(gain) + "." if gain else ".")
        )
    return out


QUANTITIES = {
    "sellers_in_market": "sellers in the market (share)",
    "mean_eps_sum": "eps sold per seller (sum)",
    "test_error": "buyer's test error",
}


def curves(df: pd.DataFrame) -> pd.DataFrame:
    """Per key x round: the mean over replications (the share of sellers in the market)."""
    d = df.copy()
    d["sellers_in_market"] = d.sellers_in_market / d.m
    return d.groupby(KEYS + ["round"])[list(QUANTITIES)].mean().reset_index()


def plot(df: pd.DataFrame, path=None):
    """Rows: quantities; columns: mechanisms; colour: accountant; line style: budget."""
    from matplotlib.lines import Line2D

    from .figures import PALETTE, outside_legend, saved_figure

    c = curves(df)
    mechs = sorted(c.mechanism.unique())
    accs = [a for a in ("basic", "rdp", "pld") if a in set(c.accountant)]
    budgets = sorted(c.budget.unique())
    colour = {a: PALETTE[i] for i, a in enumerate(accs)}
    style = dict(zip(budgets, ["-", "--", ":", "-."] * 4, strict=False))
    with saved_figure(
        path,
        len(mechs),
        figsize=(4.2 * len(mechs) + 1, 2.4 * len(QUANTITIES) + 1),
        nrows=len(QUANTITIES),
        squeeze=False,
    ) as (fig, ax):
        for i, (q, label) in enumerate(QUANTITIES.items()):
            for j, mech in enumerate(mechs):
                a = ax[i, j]
                for (acc, budget), part in c[c.mechanism == mech].groupby(["accountant", "budget"]):
                    part = part.sort_values("round")
                    y = part[q].to_numpy(dtype=float)
                    if np.isfinite(y).any():
                        a.plot(part["round"], y, color=colour[acc], ls=style[budget], lw=1.2)
                a.grid(color="0.92")
                a.set(xlabel="round", ylabel=label, title=mech if i == 0 else "")
                a.title.set_fontsize(9)
                a.yaxis.label.set_fontsize(8)
        handles = [Line2D([], [], color=colour[a], label=a) for a in accs]
        handles += [Line2D([], [], color="0.3", ls=style[b], label=f"budget {b}") for b in budgets]
        outside_legend(fig, handles, [h.get_label() for h in handles], ncols=4)
        fig.suptitle("Repeated markets under privacy budgets: mean over replications")
    return fig


def section(df, folder):
    from .report import Section

    plot(df, str(folder / "repeated.png"))
    text = (
        "Each seller has a lifetime budget (EPS or EPS:DELTA); the platform caps every "
        "allocation at what the seller's ledger still allows (capped sellers are paid by "
        "Myerson's identity for the capped allocation under offline, pro rata under the "
        "posted price), a "
        "seller's cost is c_i times the increase of its composed loss, and sellers whose "
        "budget is spent leave. 'sum / composed' is the basic bound over the "
        "accountant's.\n\n" + "\n\n".join(findings(df))
    )
    return Section(
        "Repeated markets under privacy budgets",
        text,
        tables=[("per mechanism, budget and accountant; 95% CI over replications", summarise(df))],
        figures=[("sellers left, eps sold and test error over rounds", "repeated.png")],
    )
