"""Collaborative ML (agents): rewards, rationality and welfare against rho (reads results only)."""

from __future__ import annotations

from .figures import saved_figure


def summarise(df):
    per_task = df.groupby(["rho", "parties", "spread", "strategy", "task"]).agg(
        welfare=("welfare", "first"),
        share_rational=("share_rational", "first"),
        mean_eps=("eps", "mean"),
        min_reward=("reward", "min"),
        negative_shapley=("negative_shapley", "first"),
    )
    out = per_task.groupby(["rho", "parties", "spread", "strategy"]).mean()
    return out.reset_index()


def plot(df, path):
    s = summarise(df)
    with saved_figure(path, 3, figsize=(15, 4)) as (fig, ax):
        for j, ((n, spread, strat), part) in enumerate(
            s.groupby(["parties", "spread", "strategy"])
        ):
            kw = dict(
                marker="o",
                color=f"C{j % 10}",
                ls="-" if strat == "truthful" else "--",
                label=f"{n} parties, spread {spread:g}, {strat}",
            )
            ax[0].plot(part.rho, part.welfare, **kw)
            ax[1].plot(part.rho, part.share_rational, **kw)
            ax[2].plot(part.rho, part.mean_eps, **kw)
        ax[0].set(xlabel="rho", ylabel="sum of reward values", title="group welfare")
        ax[1].set(xlabel="rho", ylabel="share", title="parties whose reward beats going alone")
        ax[2].set(xlabel="rho", ylabel="epsilon", title="mean chosen epsilon")
        ax[0].legend(fontsize=6)


def section(df, folder):
    from .report import Section

    plot(df, str(folder / "collaborative.png"))
    return Section(
        "Collaborative ML with strategic parties",
        "Group welfare falls as rho grows (rewards spread apart); rationality "
        "can fail for rho above the bound of Sim et al. (2020, Thm 1); strategic "
        "parties trade privacy cost against reward when choosing epsilon.",
        tables=[("means per rho, parties, spread and strategy", summarise(df))],
        figures=[("welfare, rationality and privacy against rho", "collaborative.png")],
    )
