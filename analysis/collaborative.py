"""Collaborative ML with parties as agents: rewards, rationality and welfare against rho
(reads results only)."""

from __future__ import annotations

from .figures import outside_legend, saved_figure


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


def plot(df, path=None):
    """Welfare, rationality and the chosen epsilon against rho; colour: parties and
    spread of privacy preferences, line style: strategy."""
    from matplotlib.lines import Line2D

    s = summarise(df)
    groups = sorted({(n, spread) for n, spread in zip(s.parties, s.spread, strict=True)})
    styles = {"truthful": "-", "strategic": "--"}
    with saved_figure(path, 3, figsize=(15, 4.6)) as (fig, ax):
        for (n, spread, strat), part in s.groupby(["parties", "spread", "strategy"]):
            kw = dict(
                marker="o",
                color=f"C{groups.index((n, spread)) % 10}",
                ls=styles.get(strat, ":"),
            )
            ax[0].plot(part.rho, part.welfare, **kw)
            ax[1].plot(part.rho, part.share_rational, **kw)
            ax[2].plot(part.rho, part.mean_eps, **kw)
        ax[0].set(xlabel="ρ", ylabel="sum of reward values", title="group welfare")
        ax[1].set(xlabel="ρ", ylabel="share", title="parties whose reward beats going alone")
        ax[2].set(xlabel="ρ", ylabel="ε", title="mean chosen ε")
        handles = [
            Line2D([], [], color=f"C{i % 10}", marker="o", label=f"{n} parties, spread {sp:g}")
            for i, (n, sp) in enumerate(groups)
        ]
        handles += [
            Line2D([], [], color="0.3", ls=styles.get(st, ":"), label=st)
            for st in sorted(s.strategy.unique())
        ]
        outside_legend(fig, handles, [h.get_label() for h in handles], ncols=len(handles))
        fig.suptitle("Collaborative ML with strategic parties (mean over replications)")
    return fig


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
