"""``market-sim demo``: one seeded market from costs to utilities, with a figure."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from .distributions import parse_distribution
from .errors import MarketSimError
from .files import save_png
from .mechanisms.payments import seller_utility

DEMO_DIST = "uniform:0:1"
DEMO_PARAMS: dict[str, Any] = dict(mu=1.0, sigma=1.0, gamma=0.2)  # keywords of the solvers


def run_demo(out_dir: str = "demo_output", seed: int = 0, m: int = 200) -> dict:
    """Run the demo market, print a summary and write ``offline_market.png``."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from .markets import run_market

    out = Path(out_dir)
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise MarketSimError(f"cannot create {out_dir!r}: {exc.strerror}") from None
    rng = np.random.default_rng(seed)
    dist = parse_distribution(DEMO_DIST)
    costs = dist.sample(m, rng)
    table, summary = run_market(costs, dist, **DEMO_PARAMS)

    print(
        f"market-sim demo: {m} sellers, costs ~ {DEMO_DIST}, seed {seed}, "
        f"mu={DEMO_PARAMS['mu']:g} sigma={DEMO_PARAMS['sigma']:g} gamma={DEMO_PARAMS['gamma']:g}"
    )
    print()
    notes = {  # the cut-off twice: in the units of Eq. 13 (003), and as a cost
        "cutoff": "  (lambda, in gamma*psi units: bought iff gamma*psi(cost) < cutoff)",
        "cutoff_cost": "  (the cost where buying stops: gamma*psi(cost) = cutoff)",
    }
    for key in ("eta", "cutoff", "cutoff_cost", "proxy_loss", "n_bought", "total_payment"):
        v = summary[key]
        text = f"{v:.6g}" if isinstance(v, float) else f"{v}"
        print(f"  {key:<14} {text}{notes.get(key, '')}")
    print()
    bought = table[table.eps > 0].sort_values("cost")
    print(f"  the {min(len(bought), 8)} cheapest bought sellers:")
    print(bought.head(8).to_string(index=True, float_format=lambda v: f"{v:.4g}"))
    print()

    # IR: every truthful seller ends with utility >= 0
    print(f"  IR: min truthful utility = {table.utility.min():.3g} (>= 0 means nobody loses)")
    # IC: best misreport on a grid for the three cheapest bought sellers
    lo, hi = dist.support
    grid = np.linspace(lo, min(hi, lo + 2.0 * (bought.cost.max() - lo)), 41)
    worst_gain = 0.0
    curves = []
    for i in bought.index[:3]:
        c_i = costs[i]
        u = np.array([seller_utility(i, r, c_i, costs, dist, **DEMO_PARAMS) for r in grid])
        u_true = table.utility[i]
        worst_gain = max(worst_gain, float(u.max() - u_true))
        curves.append((i, c_i, u, u_true))
    print(f"  IC: largest gain from a misreport (3 sellers x 41 reports) = {worst_gain:.2e}")

    fig, ax = plt.subplots(1, 3, figsize=(14, 4))
    order = np.argsort(costs)
    ax[0].plot(costs[order], table.eps.to_numpy()[order], ".-")
    ax[0].axvline(summary["cutoff_cost"], color="grey", ls=":", label="cut-off cost")
    ax[0].set(xlabel="cost c_i", ylabel="privacy level eps_i", title="allocation (Eq. 13)")
    ax[0].legend()
    ax[1].plot(costs[order], table.payment.to_numpy()[order], ".-", label="payment t_i")
    ax[1].plot(costs[order], (costs * table.eps)[order], "--", label="privacy cost c_i eps_i")
    ax[1].set(xlabel="cost c_i", title="Myerson payments (Eq. 8)")
    ax[1].legend()
    for i, c_i, u, u_true in curves:
        ax[2].plot(grid, u, label=f"seller {i} (c={c_i:.3f})")
        ax[2].plot([c_i], [u_true], "ko")
    ax[2].set(xlabel="reported cost", ylabel="utility", title="IC: truth (dots) is best")
    ax[2].legend(fontsize=8)
    fig.tight_layout()
    path = out / "offline_market.png"
    save_png(fig, path, dpi=110)
    print(f"\n  figure written to {path}")
    return {"summary": summary, "ic_gain": worst_gain, "figure": str(path)}
