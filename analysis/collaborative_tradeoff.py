"""004, Sec. 6: valuation vs epsilon, reward vs rho, tempering vs noise (reads results only)."""

from __future__ import annotations

import numpy as np

from .figures import saved_figure

FIG_RHO = 0.2  # the rho of panels (a) and (c)


def summarise(df):
    cols = [
        "v_1",
        "phi_1",
        "r_1",
        "r_2",
        "r_3",
        "v_grand",
        "kappa_1",
        "tau_1",
        "similarity_temper",
        "similarity_noise",
        "negative_shapley",
    ]
    g = df.groupby(["rho", "eps_1"])
    out = g[cols].mean()
    for c in ("r_1", "similarity_temper", "similarity_noise"):
        out[f"{c}_se"] = g[c].std().fillna(0) / np.sqrt(g.size())
    return out.reset_index()


def _band(ax, x, y, se, label, color):
    ax.plot(x, y, marker="o", color=color, label=label)
    ax.fill_between(x, y - se, y + se, color=color, alpha=0.2)


def plot(df, path):
    s = summarise(df)
    at = s[s.rho == FIG_RHO] if (s.rho == FIG_RHO).any() else s[s.rho == s.rho.iloc[0]]
    with saved_figure(path, 3, figsize=(15, 4)) as (fig, ax):
        g = df[df.rho == at.rho.iloc[0]].groupby("eps_1")
        for j, col in enumerate(("v_1", "phi_1", "r_1")):
            _band(
                ax[0],
                g[col].mean().index,
                g[col].mean(),
                g[col].std().fillna(0) / np.sqrt(g.size()),
                col,
                f"C{j}",
            )
        ax[0].set(
            xscale="log",
            xlabel="party 1's epsilon",
            ylabel="nats",
            title=f"(a) privacy-valuation and -reward trade-off (rho={at.rho.iloc[0]:g})",
        )
        mid = s[s.eps_1 == sorted(s.eps_1.unique())[len(s.eps_1.unique()) // 2]]
        for j, col in enumerate(("r_1", "r_2", "r_3")):
            ax[1].plot(mid.rho, mid[col], marker="o", color=f"C{j}", label=f"party {j + 1}")
        ax[1].plot(mid.rho, mid.v_grand, "k--", label="v(N)")
        ax[1].set(
            xlabel="rho",
            ylabel="target reward value",
            title=f"(b) rho-Shapley rewards (eps_1={mid.eps_1.iloc[0]:.3g})",
        )
        _band(
            ax[2],
            at.eps_1,
            at.similarity_temper,
            at.similarity_temper_se,
            "likelihood tempering",
            "C0",
        )
        _band(ax[2], at.eps_1, at.similarity_noise, at.similarity_noise_se, "noise addition", "C3")
        ax[2].set(
            xscale="log",
            xlabel="party 1's epsilon",
            ylabel="-KL(grand || reward)",
            title="(c) similarity of party 1's reward to the grand posterior",
        )
        for a in ax:
            a.legend(fontsize=7)


def section(df, folder):
    from .report import Section

    plot(df, str(folder / "collaborative_tradeoff.png"))
    return Section(
        "Collaborative ML: privacy trade-offs and reward control (004, Sec. 6)",
        "Party 1 varies its (2, eps)-Renyi DP level; the others keep eps = 0.5. "
        "Its value alone, Shapley value and reward rise with eps (a); higher rho "
        "spreads rewards apart (b); at the same target, likelihood tempering gives "
        "a reward closer to the grand coalition's posterior than noise addition (c).",
        tables=[("means per rho and eps_1", summarise(df))],
        figures=[("the three panels", "collaborative_tradeoff.png")],
    )
