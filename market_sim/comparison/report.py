"""What a comparison shows (docs/compare.md): ``CompareResult`` and its files
(leaderboard.csv, paired.csv, markets.csv, leaderboard.md, summary.json), the
Markdown tables, the sentences on theory, and the figure (compare.png)."""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from ..files import atomic_write, check_writable_folder, json_plain, save_png
from .scores import TRUSTED, TRUSTED_IR

if TYPE_CHECKING:
    import pandas as pd

FILES = (
    "leaderboard.csv",
    "paired.csv",
    "markets.csv",
    "leaderboard.md",
    "summary.json",
    "compare.png",
)


@dataclass(frozen=True)
class CompareResult:
    """``leaderboard``: one row per mechanism and market size; ``paired``: each
    mechanism minus the baseline, market by market; ``markets``: one row per market,
    mechanism and size; ``settings``: what was compared and how."""

    leaderboard: pd.DataFrame
    paired: pd.DataFrame
    markets: pd.DataFrame
    settings: dict

    def write(self, folder) -> Path:
        """DIR/leaderboard.csv, paired.csv, markets.csv, leaderboard.md, summary.json
        and compare.png, each written atomically."""
        out = Path(folder)
        check_writable_folder(out)
        out.mkdir(parents=True, exist_ok=True)
        for name, df in (
            ("leaderboard.csv", self.leaderboard),
            ("paired.csv", self.paired),
            ("markets.csv", self.markets),
        ):
            data = df.to_csv(index=False).encode()
            atomic_write(out / name, lambda fh, data=data: fh.write(data))
        md = ("# " + self.title() + "\n\n" + self.format() + "\n").encode()
        atomic_write(out / "leaderboard.md", lambda fh: fh.write(md))
        doc = json.dumps(json_plain(self.settings), indent=2).encode() + b"\n"
        atomic_write(out / "summary.json", lambda fh: fh.write(doc))
        plot(self, out / "compare.png")
        return out

    def title(self) -> str:
        s = self.settings
        return (
            f"Mechanisms compared on {s['dist']}: {s['n_markets']} markets of "
            f"{', '.join(str(m) for m in s['n_sellers'])} sellers"
        )

    def format(self) -> str:
        """Markdown tables, one per market size, sorted by the mean objective."""
        parts = []
        for m, lb in self.leaderboard.groupby("n_sellers", sort=True):
            parts.append(_table(lb, int(m), self.settings))
            if "classes" in self.settings:
                parts.append(_class_table(lb, self.settings))
        return "\n\n".join(parts)


def _num(v, digits: int = 4) -> str:
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "n/a"
    if isinstance(v, float) and math.isinf(v):
        return "inf" if v > 0 else "-inf"
    return f"{v:.{digits}g}"


def _ci(lo, hi) -> str:
    return f"[{_num(lo)}, {_num(hi)}]"


def _table(lb: pd.DataFrame, m: int, s: dict) -> str:
    eq = s.get("at", "truth") == "equilibrium" or bool(s.get("bids"))
    head = (
        "| rank | mechanism | objective: Eq. 11, payments (95% CI) | minus baseline (95% CI) "
        "| proxy loss "
        "| payment | bought | empty | max gain | IC | IR | IC rank | seconds |"
    )
    if eq:
        head = head.replace(
            "| seconds |", "| played | BNE epsilon | BNE epsilon / u | BNE L | seconds |"
        )
    rows = [head, "|" + "---|" * (17 if eq else 13)]
    for _, r in lb.iterrows():
        ic = _IC_TEXT.get(r["ic"], f"**{r['ic'].replace('_', ' ').upper()}**")
        ir = _IR_TEXT.get(r["ir"], "**NOT IR**")
        diff = (
            "baseline"
            if r["mechanism"] == s["baseline"]
            else f"{_num(r['diff_mean'])} {_ci(r['diff_ci_low'], r['diff_ci_high'])}"
        )
        rank_ic = "" if math.isnan(r["rank_ic"]) else str(int(r["rank_ic"]))
        rows.append(
            f"| {int(r['rank'])} | {r['mechanism']} | {_num(r['objective_mean'])} "
            f"{_ci(r['objective_ci_low'], r['objective_ci_high'])} | {diff} "
            f"| {_num(r['proxy_loss_mean'])} | {_num(r['payment_mean'])} "
            f"| {_num(r['n_bought_mean'], 4)} | {int(r['n_empty'])} | {_num(r['max_gain'], 3)} "
            f"| {ic} | {ir} | {rank_ic} | "
            + (
                f"{r['played']} | {_num(r['bne_epsilon'], 3)} "
                f"| {_num(r.get('bne_epsilon_relative', math.nan), 3)} "
                f"| {_num(r['bne_relative_loss'], 3)} | "
                if eq
                else ""
            )
            + f"{r['seconds']:.2f} |"
        )
    rows.append("")
    rows.append(_theory(lb) if not eq else _theory_at_equilibrium(lb))
    if eq:
        rows += _uncertified_equilibria(lb)
    played = (
        "At equilibrium: a mechanism neither found IC by the audit nor proved IC by the "
        "library ('IC (proof)': offline and online, built from their names, are not "
        "audited) is played at its symmetric BNE (each seller reports b(c)), with the BNE's "
        "epsilon and relative loss L; the IC ones at truth.  "
        if s.get("at", "truth") == "equilibrium"
        else "At truth: every seller reports its cost (at='truth', the default).  "
    ) + (
        f"Given bids: the sellers of {', '.join(s['bids'])} play the given bid functions.  "
        if s.get("bids")
        else ""
    )
    note = played + (
        f"{m} sellers, {s['n_markets']} markets, mu={_num(s['mu'])}, sigma={_num(s['sigma'])}, "
        f"gamma={_num(s['gamma'])}.  Objective, lower is better: Eq. 11 with the payments "
        "made, mu ||eps||_2 / sum(eps) + sigma / sum(eps) + gamma sum(payments) (mean over "
        f"markets, Student-t 95% CI); minus baseline ({s['baseline']}): paired t 95% CI "
        "over the same markets; proxy loss: Eq. 11 with the virtual costs in place of the "
        "payments; payment: total paid per market; bought: sellers bought per market; "
        "empty: markets where nothing was bought; max gain: the audit's largest gain of a "
        "misreport; IC / IR: the audit's verdicts on the same markets (bold: flagged); "
        "IC rank: rank among the mechanisms audited (or proved) IC and IR; seconds: its runs "
        "and its audit on these markets."
    )
    return note + "\n\n" + "\n".join(rows).rstrip()


def _class_table(lb: pd.DataFrame, s: dict) -> str:
    """Per class (a population's): each mechanism's part of the objective (its share of
    the eps bought times the data terms, plus gamma times its payments; the parts add
    up to the objective), its payments and the number bought, means over the markets."""
    rows = [
        "| mechanism | class | objective part (95% CI) | payment | bought |",
        "|---|---|---|---|---|",
    ]
    for _, r in lb.iterrows():
        for j, cls in enumerate(s["classes"]):
            rows.append(
                f"| {r['mechanism']} | {j}: {cls} | {_num(r[f'class{j}_objective_mean'])} "
                f"{_ci(r[f'class{j}_objective_ci_low'], r[f'class{j}_objective_ci_high'])} "
                f"| {_num(r[f'class{j}_payment_mean'])} | {_num(r[f'class{j}_n_bought_mean'])} |"
            )
    note = f"By class of {s['population']}: means over the same markets."
    return note + "\n\n" + "\n".join(rows)


def _theory(lb: pd.DataFrame) -> str:
    """The check of the theory on this table: the offline mechanism (if compared) should
    rank first among the mechanisms audited IC and IR."""
    off = lb[lb["eq11_minimiser"]]
    if off.empty:
        return "Theory check: no offline mechanism with these weights is compared."
    r = off.iloc[0]
    if r["ic"] == "not_audited":
        return "Theory check: needs the audits (the IC rank is only known with them)."
    n_ic = int(lb["rank_ic"].notna().sum())
    if math.isnan(r["rank_ic"]):
        return f"Theory check: {r['mechanism']} was not audited IC and IR here."
    if r["rank_ic"] == 1:
        return (
            f"Theory check: {r['mechanism']} ranks first of the {n_ic} mechanisms audited "
            "IC and IR, as it should (least expected objective among IC and IR mechanisms)."
        )
    ahead = lb[(lb["rank_ic"] < r["rank_ic"])]["mechanism"].tolist()
    return (
        f"Theory check: {r['mechanism']} ranks {int(r['rank_ic'])} of {n_ic} among the "
        f"mechanisms audited IC and IR, behind {', '.join(ahead)}: in expectation it cannot "
        "be beaten, so this is sampling noise (see the paired intervals) or a mechanism "
        "the audit could not show manipulable."
    )


def _uncertified_equilibria(lb: pd.DataFrame) -> list[str]:
    """One warning line per mechanism played at a BNE the solver did not certify."""
    if "bne_converged" not in lb:
        return []
    out = []
    for _, r in lb.iterrows():
        converged = r["bne_converged"]
        if r["played"] == "equilibrium" and converged is not None and not bool(converged):
            out.append(
                f"Warning: {r['mechanism']}'s BNE is not certified (verified epsilon / "
                f"utility {_num(r['bne_epsilon_relative'], 3)} > the solver's tolerance): its "
                "row is an approximate equilibrium (docs/equilibrium.md)."
            )
    return out


def _theory_at_equilibrium(lb: pd.DataFrame) -> str:
    """The revelation principle on this table: the offline mechanism minimises the
    expected objective among Bayes-IC, interim-IR mechanisms, and every mechanism's BNE
    is one of those (play it for the sellers), so no mechanism's equilibrium objective
    should be significantly below offline's (paired interval entirely below 0)."""
    off = lb[lb["eq11_minimiser"]]
    if off.empty:
        return "Theory check: no offline mechanism with these weights is compared."
    name = off.iloc[0]["mechanism"]
    below = lb[lb["minus_offline_ci_high"] < 0]["mechanism"].tolist()
    if below:
        return (
            f"Theory check: {', '.join(below)} significantly below {name} at equilibrium: "
            "the revelation principle says this cannot be in expectation (an inexact "
            "equilibrium, see its epsilon, or sampling noise)."
        )
    first = f"{name} ranks first and n" if off.iloc[0]["rank"] == 1 else "N"
    return (
        f"Theory check: {first}o mechanism's equilibrium objective is significantly below "
        f"{name}'s, as the revelation principle says."
    )


# How the table prints a verdict (anything else is a flagged one, in bold)
_IC_TEXT = {"ic": "IC", "not_audited": "not audited", TRUSTED: "IC (proof)"}
_IR_TEXT = {"ir": "IR", "not_audited": "n/a", TRUSTED_IR: "IR (proof)"}


def plot(result: CompareResult, path) -> None:
    """The loss-payment plane: the data terms of Eq. 11 (mu ||eps|| / sum eps + sigma /
    sum eps) against the payment, 95% CI bars, open markers for mechanisms not audited
    IC and IR, and the line of the baseline's objective (loss + gamma payment = const:
    below it is better); with several market sizes, also the objective against m."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    lb = result.leaderboard
    gamma = float(result.settings["gamma"])
    sizes = sorted(lb["n_sellers"].unique())
    many = len(sizes) > 1
    fig, axes = plt.subplots(1, 2 if many else 1, figsize=(13 if many else 8, 5.5), squeeze=False)
    ax = axes[0, 0]
    tab = [plt.get_cmap("tab20")(i) for i in range(20)]
    colors = tab[::2] + tab[1::2]  # 20 distinct: the strong ten, then the light ten
    markers = "osD^vP*Xh<>p"
    drawn = []  # (x, y, xerr, yerr, style) of the plane's points, for the inset
    for j, name in enumerate(result.settings["mechanisms"]):
        d = lb[lb["mechanism"] == name].sort_values("n_sellers")
        d = d[np.isfinite(d["objective_mean"])]
        if d.empty:
            continue
        col, mk = colors[j % len(colors)], markers[j % len(markers)]
        flag = _failed_properties(d["ic"], d["ir"])
        good = not flag
        x, y = d["payment_mean"].to_numpy(), d["data_loss_mean"].to_numpy()
        style: dict = dict(color=col, marker=mk, mfc=col if good else "white", capsize=3, ms=7)
        xerr = _err(x, d["payment_ci_low"], d["payment_ci_high"])
        yerr = _err(y, d["data_loss_ci_low"], d["data_loss_ci_high"])
        ax.errorbar(x, y, xerr=xerr, yerr=yerr, ls="-" if many else "none",
                    label=name + (f" ({flag})" if flag else ""), **style)  # fmt: skip
        drawn.append((x, y, xerr, yerr, dict(style, ls="-" if many else "none")))
        if many:
            yo = d["objective_mean"].to_numpy()
            axes[0, 1].errorbar(
                d["n_sellers"], yo, yerr=_err(yo, d["objective_ci_low"], d["objective_ci_high"]),
                ls="-", label=name, **style,
            )  # fmt: skip
    vals = lb[np.isfinite(lb["objective_mean"])]
    for axis, column in (("x", "payment_mean"), ("y", "data_loss_mean")):
        scale = axis_scale(vals[column].to_numpy())
        if scale == "symlog":
            positive = vals[column][vals[column] > 0]
            getattr(ax, f"set_{axis}scale")("symlog", linthresh=float(positive.min()))
        elif scale == "log":
            getattr(ax, f"set_{axis}scale")("log")
    base = lb[(lb["mechanism"] == result.settings["baseline"]) & (lb["n_sellers"] == sizes[-1])]
    if len(base) and np.isfinite(base["objective_mean"].iloc[0]):
        level = float(base["objective_mean"].iloc[0])
        (x0, x1), (y0, y1) = ax.get_xlim(), ax.get_ylim()
        xs = np.geomspace(max(x0, 1e-12), x1, 200) if ax.get_xscale() == "log" else None
        xs = np.linspace(x0, x1, 200) if xs is None else xs
        ys = level - gamma * xs
        keep = ys > 0
        ax.plot(xs[keep], ys[keep], ":", color="grey", lw=1,
                label=f"objective of {result.settings['baseline']}")  # fmt: skip
        ax.set_xlim(x0, x1)
        ax.set_ylim(y0, y1)
    _zoom_on_crowd(ax, drawn)
    ax.set(
        xlabel="mean total payment per market",
        ylabel="mean data loss (mu ||eps|| / sum eps + sigma / sum eps)",
        title="loss-payment plane" + (f" (m = {sizes[-1]} on the line)" if many else ""),
    )
    ax.legend(fontsize=7, loc="center left", bbox_to_anchor=(1.01, 0.5))
    if many:
        axes[0, 1].set(xlabel="sellers per market (m)", ylabel="mean objective", xscale="log")
        axes[0, 1].set_title("objective against m")
        axes[0, 1].set_xticks(sizes, [str(m) for m in sizes])
        axes[0, 1].minorticks_off()
    fig.suptitle(result.title(), fontsize=10)
    fig.tight_layout()
    save_png(fig, path, dpi=90)


def _zoom_on_crowd(ax, drawn, crowd: float = 0.1, least: int = 3) -> None:
    """An inset that magnifies the crowd of the loss-payment plane: when ``least`` or more
    points sit within a box of ``crowd`` x the axes around their median (one mechanism
    far off squashes the others even on log axes), redraw them in an empty corner."""
    if not drawn:
        return
    ax.autoscale_view()
    pts = np.vstack([np.column_stack([x, y]) for x, y, *_ in drawn])
    frac = ax.transAxes.inverted().transform(ax.transData.transform(pts))
    centre = np.median(frac, axis=0)
    near = np.all(np.abs(frac - centre) <= crowd / 2, axis=1)
    if near.sum() < least or near.all():
        return
    corners = [(0.56, 0.54), (0.04, 0.54), (0.56, 0.06), (0.04, 0.06)]
    free = [c for c in corners
            if not np.any(np.all((frac >= np.array(c) - 0.02) & (frac <= np.array(c) + 0.44),
                                 axis=1))]  # fmt: skip
    if not free:
        return
    inset = ax.inset_axes([*free[0], 0.4, 0.4])  # linear: the crowd spans little
    k = 0
    for x, y, xerr, yerr, style in drawn:
        keep = near[k : k + len(x)]
        k += len(x)
        if keep.any():
            inset.errorbar(x[keep], y[keep], xerr=xerr[:, keep], yerr=yerr[:, keep], **style)
    inset.tick_params(labelsize=6)
    inset.locator_params(nbins=4)
    ax.indicate_inset_zoom(inset, edgecolor="0.5")


def _failed_properties(ic, ir) -> str:
    """What the legend says of a mechanism's audit: "" (IC and IR), "not IC", "not IR",
    "not IC/IR", "IC inconclusive", "IR inconclusive" or "not audited"."""
    ic = {"ic" if v == TRUSTED else v for v in ic}
    ir = {"ir" if v == TRUSTED_IR else v for v in ir}
    if "not_audited" in ic:
        return "not audited"
    failed = [p for p, seen in (("IC", ic), ("IR", ir)) if f"not_{p.lower()}" in seen]
    if failed:
        return "not " + "/".join(failed)
    unsure = [p for p, seen in (("IC", ic), ("IR", ir)) if seen - {p.lower()}]
    return " and ".join(unsure) + " inconclusive" if unsure else ""


def axis_scale(values) -> str:
    """ "log" when the positive values span more than a factor of 20, or when all but
    one of them crowd into a tenth of the range (an outlier squashes the others into a
    corner of a linear axis); "symlog" for the same with a value <= 0 (0 stays on the
    axis); else "linear"."""
    v = np.sort(np.asarray(values, dtype=float)[np.isfinite(values)])
    if v.size < 2 or v[-1] <= v[0]:
        return "linear"
    span = v[-1] - v[0]
    crowded = v.size >= 3 and min(v[-2] - v[0], v[-1] - v[1]) < 0.1 * span
    if v[0] > 0:
        return "log" if v[-1] > 20 * v[0] or (crowded and v[-1] > 3 * v[0]) else "linear"
    positive = v[v > 0]
    if positive.size and crowded and v[-1] > 20 * positive[0]:
        return "symlog"
    return "linear"


def _err(v, lo, hi) -> np.ndarray | None:
    """Asymmetric error bars from CI bounds (none where a bound is missing)."""
    lo, hi = np.asarray(lo, dtype=float), np.asarray(hi, dtype=float)
    e = np.vstack([v - lo, hi - v])
    return np.where(np.isfinite(e), e, 0.0)
