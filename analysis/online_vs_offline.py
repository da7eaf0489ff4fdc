"""Figure: online/offline proxy-loss ratio vs m, and the xi sweep (reads results only).

    python -m analysis.online_vs_offline results/online_vs_offline.parquet [--out FIG.png]
"""

from __future__ import annotations

import argparse

import numpy as np


def summarise(df):
    """Mean ratio with a 95% normal CI per (dist, m) at xi = 1."""
    full = df[df.xi == 1.0]
    g = full.groupby(["dist", "m"]).ratio
    out = g.agg(["mean", "std", "count"]).reset_index()
    out["ci"] = 1.96 * out["std"].fillna(0) / np.sqrt(out["count"])
    return out


def plot(df, path: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    s = summarise(df)
    fig, ax = plt.subplots(1, 2, figsize=(11, 4))
    for dist, part in s.groupby("dist"):
        ax[0].errorbar(part.m, part["mean"] - 1, yerr=part.ci, marker="o", capsize=3, label=dist)
    ax[0].set(xscale="log", yscale="log", xlabel="number of sellers m",
              ylabel="online / offline proxy loss - 1",
              title="online (fluid rule) vs offline optimum")
    ax[0].legend()
    m_top = df.m.max()
    xs = df[(df.dist == "uniform:0:1") & (df.m == m_top)].groupby("xi").online_loss
    xs = xs.agg(["mean", "std", "count"]).reset_index()
    ax[1].errorbar(xs.xi, xs["mean"], yerr=1.96 * xs["std"].fillna(0) / np.sqrt(xs["count"]),
                   marker="o", capsize=3)
    ax[1].set(xlabel="fraction of planned sellers that arrive, xi", ylabel="online proxy loss",
              title=f"xi sweep (Thm V.1), U[0,1], m = {m_top:g}")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main(argv=None):
    from market_sim.runner import read_results

    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("results")
    ap.add_argument("--out", default="online_vs_offline.png")
    args = ap.parse_args(argv)
    df, _ = read_results(args.results)
    plot(df, args.out)
    print(summarise(df).to_string(index=False))
    print(f"figure written to {args.out}")


if __name__ == "__main__":
    main()
