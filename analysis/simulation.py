"""Figures of one `market-sim simulate` run: simulation.png and simulation.gif.

Both read the frames ``MarketModel`` writes (agents.csv: one row per seller and
round; model.csv: one row per round) and return the drawn ``Figure``.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from .figures import new_figure, save


def _round_colours(agent_df: pd.DataFrame):
    from matplotlib.colors import Normalize

    rounds = agent_df["round"]
    lo, hi = float(rounds.min()), float(rounds.max())
    return Normalize(lo - 0.5, hi + 0.5) if lo == hi else Normalize(lo, hi)


def plot_simulation(agent_df, model_df, path=None, title: str = "", *, data: bool = False):
    """Per seller (top, every round, coloured by round): report, eps and payment
    against the true cost. Per round (bottom): regret, share misreporting, and the
    private model's test error when the sellers hold data (``data``), else the
    buyer's loss (with the payments made; the proxy loss dashed). One axis per unit."""
    fig, ax = new_figure(2, 3, figsize=(15, 8))
    norm = _round_colours(agent_df)
    cmap = "viridis"
    order = agent_df.sort_values("round", kind="stable")  # the last round on top
    kw = dict(c=order["round"], cmap=cmap, norm=norm, s=22, alpha=0.8, edgecolors="none")
    top = ax[0]
    sc = top[0].scatter(order.cost, order.report, **kw)
    lim = [agent_df.cost.min(), agent_df.cost.max()]
    top[0].plot(lim, lim, "k--", lw=1)
    top[0].set(xlabel="true cost c", ylabel="reported cost", title="reports (dashed: the truth)")
    top[1].scatter(order.cost, order.eps, **kw)
    top[1].set(xlabel="true cost c", ylabel="privacy level ε", title="privacy bought")
    top[2].scatter(order.cost, order.payment, **kw)
    top[2].set(xlabel="true cost c", ylabel="payment", title="payments")
    cb = fig.colorbar(sc, ax=list(top), shrink=0.9, pad=0.01)
    cb.set_label("round")
    rounds = sorted(agent_df["round"].unique())
    if len(rounds) <= 12:
        cb.set_ticks(rounds)

    bottom = ax[1]
    r = model_df["round"]
    bottom[0].plot(r, model_df.max_regret, "o-", color="C3", label="largest")
    bottom[0].plot(r, model_df.mean_regret, "s--", color="C0", label="mean")
    bottom[0].legend(fontsize=8, title="over sellers", title_fontsize=8)
    bottom[0].set(xlabel="round", ylabel="regret (utility)", title="regret of the report made")
    if model_df.max_regret.isna().all():
        _note(bottom[0], "regret not measured (--no-regret)")
    bottom[1].plot(r, model_df.share_misreporting, "o-", color="C1")
    bottom[1].set(
        xlabel="round", ylabel="share of sellers", ylim=(-0.03, 1.03), title="share misreporting"
    )
    if data:
        err = model_df["test_error"]
        bottom[2].plot(r, err, "o-", color="C2")
        bottom[2].set(
            xlabel="round",
            ylabel="test error (share misclassified)",
            title="private model's test error",
        )
        if err.isna().any():
            _note(
                bottom[2],
                "missing rounds: the bought sellers' data held one class (no model)",
            )
    else:
        _plot_losses(bottom[2], model_df)
    if len(rounds) <= 12:
        for a in bottom:
            a.set_xticks(rounds)
    if title:
        fig.suptitle(title)
    save(fig, path, dpi=100)
    return fig


def _plot_losses(ax, model_df) -> None:
    """The buyer's loss (Eq. 11 of [AES] with the payments made, what ``compare`` ranks
    by) and, dashed, the proxy loss (Eq. 11 with the virtual costs of the true costs)."""
    r = model_df["round"]
    paid = model_df["buyer_loss"].replace([np.inf, -np.inf], np.nan)
    proxy = model_df.proxy_loss.replace([np.inf, -np.inf], np.nan)
    ax.plot(r, paid, "o-", color="C2", label="with the payments made")
    ax.plot(r, proxy, "s--", color="0.5", label="proxy: virtual costs ψ(c)")
    ax.legend(fontsize=8, title="Eq. 11", title_fontsize=8)
    ax.set(xlabel="round", ylabel="loss (Eq. 11)", title="the buyer's loss")
    if paid.isna().any():
        _note(ax, "missing rounds bought nobody (infinite loss)")


def _note(ax, text: str) -> None:
    ax.text(0.5, 0.02, text, transform=ax.transAxes, ha="center", va="bottom", fontsize=8)


def animate_simulation(agent_df, path, fps: int = 1):
    """A GIF, one frame per round: reports against true costs coloured by the eps
    bought (colour bar), and eps against the true cost; the title names the round."""
    from matplotlib.animation import FuncAnimation, PillowWriter
    from matplotlib.cm import ScalarMappable
    from matplotlib.colors import Normalize

    rounds = sorted(agent_df["round"].unique())
    fig, ax = new_figure(1, 2, figsize=(10, 4.2))
    lo = float(agent_df.cost.min())
    hi = float(max(agent_df.cost.max(), agent_df.report.max()))
    pad = 0.03 * (hi - lo or 1.0)
    eps_top = max(float(agent_df.eps.max()), 1e-12)
    norm = Normalize(0.0, eps_top)
    cb = fig.colorbar(ScalarMappable(norm=norm, cmap="viridis"), ax=ax[0], pad=0.01)
    cb.set_label("privacy level ε bought")

    def frame(k):
        part = agent_df[agent_df["round"] == rounds[k]]
        for a in ax:
            a.clear()
        ax[0].plot([lo, hi], [lo, hi], "k--", lw=1)
        ax[0].scatter(part.cost, part.report, c=part.eps, cmap="viridis", norm=norm, s=30)
        ax[0].set(
            xlim=(lo - pad, hi + pad),
            ylim=(lo - pad, hi + pad),
            xlabel="true cost c",
            ylabel="reported cost",
            title="reports (dashed: the truth)",
        )
        ax[1].vlines(part.cost, 0, part.eps, color="C0", lw=1)
        ax[1].plot(part.cost, part.eps, "o", color="C0", ms=4)
        ax[1].set(
            xlim=(lo - pad, hi + pad),
            ylim=(0, eps_top * 1.05),
            xlabel="true cost c",
            ylabel="privacy level ε",
            title="privacy bought",
        )
        fig.suptitle(f"round {rounds[k]} of {rounds[-1]}")

    anim = FuncAnimation(fig, frame, frames=len(rounds))
    anim.save(path, writer=PillowWriter(fps=fps))
    return fig
