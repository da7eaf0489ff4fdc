"""004's synthetic experiment: valuation vs epsilon, reward vs rho, tempering vs noise
(reads results only)."""

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
        out[f"{c}_se"] = g[c].std() / np.sqrt(g.size())
    return out.reset_index()


def _band(ax, x, y, se, label, color):
    se = np.nan_to_num(np.asarray(se, dtype=float))  # no band from one replication
    ax.plot(x, y, marker="o", color=color, label=label)
    ax.fill_between(x, y - se, y + se, color=color, alpha=0.2)


def plot(df, path=None):
    s = summarise(df)
    at = s[s.rho == FIG_RHO] if (s.rho == FIG_RHO).any() else s[s.rho == s.rho.iloc[0]]
    with saved_figure(path, 3, figsize=(15, 4)) as (fig, ax):
        g = df[df.rho == at.rho.iloc[0]].groupby("eps_1")
        names = {"v_1": "value alone v₁", "phi_1": "Shapley value φ₁", "r_1": "reward r₁"}
        for j, col in enumerate(names):
            _band(
                ax[0],
                g[col].mean().index,
                g[col].mean(),
                g[col].std() / np.sqrt(g.size()),
                names[col],
                f"C{j}",
            )
        ax[0].set(
            xscale="log",
            xlabel="party 1's privacy level ε₁",
            ylabel="nats",
            title=f"(a) party 1's value and reward (ρ = {at.rho.iloc[0]:g})",
        )
        mid = s[s.eps_1 == sorted(s.eps_1.unique())[len(s.eps_1.unique()) // 2]]
        for j, col in enumerate(("r_1", "r_2", "r_3")):
            ax[1].plot(mid.rho, mid[col], marker="o", color=f"C{j}", label=f"party {j + 1}")
        ax[1].plot(mid.rho, mid.v_grand, "k--", label="grand coalition v(N)")
        ax[1].set(
            xlabel="ρ",
            ylabel="target reward value",
            title=f"(b) ρ-Shapley rewards (ε₁ = {mid.eps_1.iloc[0]:.3g})",
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
            xlabel="party 1's privacy level ε₁",
            ylabel="-KL(grand || reward)",
            title="(c) party 1's reward against the grand posterior",
        )
        for a in ax:
            a.legend(fontsize=7)
    return fig


def section(df, folder):
    from .report import Section

    plot(df, str(folder / "collaborative_tradeoff.png"))
    return Section(
        "Collaborative ML: privacy trade-offs and reward control ([SZH], Sec. 6)",
        "Party 1 varies its (2, eps)-Renyi DP level; the others keep eps = 0.5. "
        "Its value alone, Shapley value and reward rise with eps (a); higher rho "
        "spreads rewards apart (b); at the same target, likelihood tempering gives "
        "a reward closer to the grand coalition's posterior than noise addition (c).",
        tables=[("means per rho and eps_1", summarise(df))],
        figures=[("the three panels", "collaborative_tradeoff.png")],
    )
