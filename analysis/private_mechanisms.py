"""What protecting reports costs: private mechanisms against the exact one (reads results only)."""

from __future__ import annotations

import numpy as np

from .figures import outside_legend, saved_figure


def summarise(df):
    g = df.groupby(["dist", "m", "privacy", "mechanism"])
    out = g.agg(
        loss_ratio=("loss_ratio", "mean"),
        proxy_loss=("proxy_loss", "mean"),
        p_empty=("p_empty", "mean"),
        total_payment=("total_payment", "mean"),
        max_gain=("max_gain", "max"),
        gain_bound=("gain_bound", "min"),
        sensitivity=("sensitivity", "mean"),
    )
    out["loss_ratio_ci"] = 1.96 * g.loss_ratio.std() / np.sqrt(g.size())
    return out.reset_index()


def plot(df, path=None):
    """Expected proxy loss relative to the exact mechanism against the privacy of the
    choice (95% CI over replications), one panel per cost law; colour: m, line style:
    mechanism."""
    from matplotlib.lines import Line2D

    s = summarise(df[df.mechanism != "exact"])
    dists = sorted(s.dist.unique())
    sizes = sorted(s.m.unique())
    styles = {"private-cutoff": "-", "private-posted-price": "--"}
    with saved_figure(path, len(dists), figsize=(6 * len(dists), 4.6)) as (fig, ax):
        ax = np.atleast_1d(ax)
        for a, dist in zip(ax, dists, strict=True):
            part = s[s.dist == dist]
            for (mech, m), line in part.groupby(["mechanism", "m"]):
                a.errorbar(
                    line.privacy,
                    line.loss_ratio,
                    yerr=line.loss_ratio_ci.fillna(0),
                    ls=styles.get(mech, ":"),
                    marker="o",
                    capsize=2,
                    color=f"C{sizes.index(m) % 10}",
                )
            a.axhline(1.0, color="k", lw=1)
            a.set(
                xscale="log",
                xlabel="ε of the private choice",
                ylabel="expected proxy loss / exact",
                title=dist,
            )
        handles = [
            Line2D([], [], color=f"C{i % 10}", marker="o", label=f"m = {m:,}")
            for i, m in enumerate(sizes)
        ]
        handles += [
            Line2D([], [], color="0.3", ls=styles.get(mech, ":"), label=mech)
            for mech in sorted(s.mechanism.unique())
        ]
        outside_legend(fig, handles, [h.get_label() for h in handles], ncols=len(handles))
        fig.suptitle("What protecting the reports costs (1: the exact mechanism); 95% CI")
    return fig


def section(df, folder):
    from .report import Section

    plot(df, str(folder / "private_mechanisms.png"))
    return Section(
        "Private mechanisms against the exact one",
        "Expected proxy loss (Eq. 11 of what is bought, given that something is bought; "
        "p_empty is the probability of buying nothing) relative to the exact "
        "offline mechanism, as the privacy of the reports (epsilon of the "
        "exponential-mechanism choice) varies. max_gain is the largest expected "
        "gain from a misreport found on a report grid; gain_bound the smallest "
        "approximate-truthfulness bound (e^eps - 1) x utility among the sellers tried. "
        "For the exact mechanism max_gain and sensitivity are blank: it is exactly "
        "truthful (no misreport is searched) and draws nothing at random.",
        tables=[("per law, m, epsilon and mechanism", summarise(df))],
        figures=[("loss ratio against epsilon", "private_mechanisms.png")],
    )
