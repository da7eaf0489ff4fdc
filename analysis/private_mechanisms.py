"""What protecting reports costs: private mechanisms against the exact one (reads results only)."""

from __future__ import annotations

import numpy as np

from .figures import saved_figure


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
    out["loss_ratio_ci"] = 1.96 * g.loss_ratio.std().fillna(0) / np.sqrt(g.size())
    return out.reset_index()


def plot(df, path):
    s = summarise(df[df.mechanism != "exact"])
    dists = sorted(s.dist.unique())
    with saved_figure(path, len(dists), figsize=(6 * len(dists), 4)) as (fig, ax):
        ax = np.atleast_1d(ax)
        for a, dist in zip(ax, dists, strict=True):
            part = s[s.dist == dist]
            for j, ((mech, m), line) in enumerate(part.groupby(["mechanism", "m"])):
                style = "-" if mech == "private-cutoff" else "--"
                a.errorbar(
                    line.privacy,
                    line.loss_ratio,
                    yerr=line.loss_ratio_ci,
                    ls=style,
                    marker="o",
                    capsize=2,
                    color=f"C{j % 10}",
                    label=f"{mech}, m={m}",
                )
            a.axhline(1.0, color="k", lw=1)
            a.set(
                xscale="log",
                xlabel="epsilon of the private choice",
                ylabel="expected proxy loss / exact",
                title=dist,
            )
        ax[0].legend(fontsize=7)


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
        "approximate-truthfulness bound (e^eps - 1) x utility among the sellers tried.",
        tables=[("per law, m, epsilon and mechanism", summarise(df))],
        figures=[("loss ratio against epsilon", "private_mechanisms.png")],
    )
