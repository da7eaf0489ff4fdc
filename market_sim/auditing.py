"""Audit a mechanism's incentives on seeded random markets.

``audit(mechanism, dist, n_sellers, n_markets, rng)`` draws ``n_markets`` markets
of ``n_sellers`` costs from ``dist`` (truthful reports) and, for every seller,
finds the largest gain of a unilateral misreport:

* a grid: the truth plus ``n_grid`` equally spaced reports over the support (the
  lowest moved up by 1e-3 of a step: on a support starting at 0, a report of 0
  leaves the offline problem without an optimum), all
  sellers at once through ``deviations`` / ``deviation_utilities``;
* then, with ``refine=True``, a bounded scalar search (``minimize_scalar``,
  ``method="bounded"``, ``refine_iter`` evaluations) between the neighbours of each
  seller's best grid report.

It also counts IR violations (truthful utility < -tol) and monotonicity
violations (eps_i rising along the sorted own-report grid by more than 1e-9 x the
market's largest eps; for a :class:`~market_sim.mechanisms.myerson.MyersonMechanism`
its own violation list is added).  Randomized mechanisms are audited in
expectation (exact for the built-ins; common random numbers for the generic
Monte Carlo default).

Verdict (recorded in ``summary.json``):

* ``tol = 1e-6 x mean payment``: the mean truthful payment per seller over all
  markets (``tol_factor`` changes the 1e-6);
* per market the largest gain G_k = max over sellers of the best misreport gain;
  ``max_gain = max_k G_k``;  ``max_gain_ci_low/high`` is the 95% t interval of the
  mean of G_k over the markets (needs >= 2 markets);
* ``verdict = "ic"`` iff ``max_gain <= tol``, else ``"not_ic"``.
  ``share_profitable`` is the share of (market, seller) pairs with gain > tol.

CLI: ``market-sim audit --mechanism SPEC --dist SPEC --sellers N --markets K --seed S
--out DIR`` writes DIR/audit.csv, DIR/summary.json and DIR/audit.png.
"""

from __future__ import annotations

import json
import math
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from .distributions import CostDistribution, parse_distribution
from .errors import MarketSimError
from .files import atomic_write, check_writable_folder
from .mechanisms.base import Mechanism, as_mechanism, mechanism_name

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["audit", "AuditResult", "add_parser", "cmd_audit"]

COLUMNS = ["market", "seller", "cost", "truthful_utility", "best_report", "max_gain", "monotone"]
_MONO_TOL = 1e-9


@dataclass
class AuditResult:
    """``table``: one row per market x seller (``COLUMNS``); ``summary``: the verdict
    and its numbers (see the module doc); ``violations``: monotonicity violations
    as (market, seller, low report, high report, eps_low, eps_high)."""

    table: pd.DataFrame
    summary: dict
    violations: list = field(default_factory=list)

    @property
    def verdict(self) -> str:
        return self.summary["verdict"]

    def write(self, folder) -> Path:
        """DIR/audit.csv, DIR/summary.json and DIR/audit.png, each written atomically."""
        out = Path(folder)
        if out.exists() and not out.is_dir():
            raise MarketSimError(f"{folder}: exists and is not a folder")
        out.mkdir(parents=True, exist_ok=True)
        csv = self.table.to_csv(index=False).encode()
        atomic_write(out / "audit.csv", lambda fh: fh.write(csv))
        doc = json.dumps({k: _plain(v) for k, v in self.summary.items()}, indent=2) + "\n"
        atomic_write(out / "summary.json", lambda fh: fh.write(doc.encode()))
        plot(self, out / "audit.png")
        return out

    def format(self) -> str:
        s = self.summary
        rows = [
            ("mechanism", s["mechanism"]),
            ("distribution", s["dist"]),
            ("markets x sellers", f"{s['n_markets']} x {s['n_sellers']}"),
            ("mean payment", f"{s['mean_payment']:.6g}"),
            ("tolerance", f"{s['tol']:.3g}"),
            ("max gain", f"{s['max_gain']:.3g}"),
            (
                "95% CI, mean per-market max gain",
                f"[{_fmt(s['max_gain_ci_low'])}, {_fmt(s['max_gain_ci_high'])}]",
            ),
            ("share profitable", f"{s['share_profitable']:.3g}"),
            ("IR violations", str(s["ir_violations"])),
            ("monotonicity violations", str(s["monotonicity_violations"])),
            ("verdict", s["verdict"]),
        ]
        width = max(len(k) for k, _ in rows)
        return "\n".join(f"{k:<{width}}  {v}" for k, v in rows)


def _fmt(v) -> str:
    return "n/a" if v is None or not math.isfinite(v) else f"{v:.3g}"


def _plain(v):
    if isinstance(v, (np.floating, float)):
        return float(v) if math.isfinite(v) else None
    if isinstance(v, np.integer):
        return int(v)
    if isinstance(v, np.bool_):
        return bool(v)
    return v


def _exact_utilities(mech) -> bool:
    """Does the mechanism compute utilities its own way (not from ``deviations``)?"""
    return type(mech).deviation_utilities is not Mechanism.deviation_utilities


def _market(mech, costs, lo, hi, grid, rng, refine, refine_iter):
    """Per seller: truthful utility and payment, best report, gain, monotone flag, and
    the violations seen (seller, low, high, eps_low, eps_high)."""
    from scipy.optimize import minimize_scalar

    n = costs.size
    sellers = np.arange(n)
    cand = np.column_stack([costs, np.tile(grid, (n, 1))])  # column 0: the truth
    seed = int(rng.integers(2**63))
    dev = mech.deviations(sellers, cand, costs, np.random.default_rng(seed))
    if _exact_utilities(mech):
        util = mech.deviation_utilities(sellers, cand, costs, costs, np.random.default_rng(seed))
    else:
        util = dev.payments - costs[:, None] * dev.eps
    truth = util[:, 0]
    gain = util - truth[:, None]
    j = np.argmax(gain, axis=1)
    best_gain = gain[sellers, j]
    best_report = np.where(best_gain > 0, cand[sellers, j], costs)

    # monotonicity along the sorted own reports
    order = np.argsort(cand, axis=1, kind="stable")
    eps_sorted = np.take_along_axis(dev.eps, order, axis=1)
    z_sorted = np.take_along_axis(cand, order, axis=1)
    rise = np.diff(eps_sorted, axis=1) > _MONO_TOL * max(float(np.max(dev.eps)), 1e-300)
    violations = [
        (
            int(i),
            float(z_sorted[i, k]),
            float(z_sorted[i, k + 1]),
            float(eps_sorted[i, k]),
            float(eps_sorted[i, k + 1]),
        )
        for i, k in zip(*np.nonzero(rise), strict=True)
    ]
    monotone = ~rise.any(axis=1)

    if refine:
        for i in sellers:
            zs = z_sorted[i]
            k = int(np.searchsorted(zs, cand[i, j[i]]))
            a, b = zs[max(k - 1, 0)], zs[min(k + 1, zs.size - 1)]
            if not b > a:
                continue

            def neg(z, i=i):  # the grid's seed: the same draws (common random numbers)
                return -float(
                    mech.utilities(int(i), [z], costs[i], costs, np.random.default_rng(seed))[0]
                )

            res = minimize_scalar(
                neg,
                bounds=(a, b),
                method="bounded",
                options={"maxiter": refine_iter, "xatol": 1e-10 * (hi - lo)},
            )
            if np.isfinite(res.fun) and -res.fun - truth[i] > best_gain[i]:
                best_gain[i] = -res.fun - truth[i]
                best_report[i] = float(res.x)
    pay = dev.payments[:, 0]
    return truth, pay, best_report, np.maximum(best_gain, 0.0), monotone, violations


def audit(
    mechanism,
    dist,
    n_sellers: int,
    n_markets: int,
    rng: np.random.Generator,
    *,
    n_grid: int = 33,
    refine: bool = True,
    refine_iter: int = 12,
    tol_factor: float = 1e-6,
    progress: bool = False,
    **context,
) -> AuditResult:
    """IC / IR / monotonicity audit of ``mechanism`` (a name, spec, class, instance or
    object with ``outcome``) on ``n_markets`` markets of ``n_sellers`` costs drawn
    from ``dist`` with ``rng``; ``context`` (mu, sigma, gamma, privacy, ...) is passed
    to the mechanism's construction.  See the module doc for the verdict.  ``progress``
    shows a progress bar over the markets on stderr."""
    import pandas as pd

    if not isinstance(rng, np.random.Generator):
        raise MarketSimError("rng must be a numpy.random.Generator")
    if isinstance(dist, str):
        dist = parse_distribution(dist)
    if not isinstance(dist, CostDistribution):
        raise MarketSimError("dist must be a CostDistribution or a spec like uniform:0:1")
    for label, v, least in (
        ("n_sellers", n_sellers, 1),
        ("n_markets", n_markets, 1),
        ("n_grid", n_grid, 2),
    ):
        if isinstance(v, bool) or not float(v) == int(v) or int(v) < least:
            raise MarketSimError(f"{label} must be an integer >= {least} (got {v!r})")
    mech = as_mechanism(mechanism, dist=dist, n_sellers=int(n_sellers), **context)
    if getattr(mech, "needs_data", False):
        raise MarketSimError(
            f"{mechanism_name(mech)} needs the sellers' data; the audit draws costs only"
        )
    lo, hi = dist.support
    grid = np.linspace(lo, hi, int(n_grid))
    grid[0] += 1e-3 * (grid[1] - grid[0])  # a report at c_low = 0 has no offline optimum
    checked = mech
    myerson_violations = 0
    from .mechanisms.myerson import MyersonMechanism

    rows, violations, per_market = [], [], []
    from tqdm import tqdm

    for k in tqdm(
        range(int(n_markets)), desc="markets", unit="market", file=sys.stderr, disable=not progress
    ):
        costs = dist.sample(int(n_sellers), rng)
        if isinstance(mech, MyersonMechanism):
            own = mech.violations(costs)
            myerson_violations += len(own)
            violations += [(k, v.seller, v.low, v.high, v.eps_low, v.eps_high) for v in own]
            checked = mech.unchecked()  # gains of a non-monotone rule are still measured
        truth, pay, best, gain, monotone, seen = _market(
            checked, costs, lo, hi, grid, rng, refine, int(refine_iter)
        )
        violations += [(k, *v) for v in seen]
        per_market.append(float(gain.max()))
        rows.append(
            pd.DataFrame(
                {
                    "market": k,
                    "seller": np.arange(costs.size),
                    "cost": costs,
                    "truthful_utility": truth,
                    "best_report": best,
                    "max_gain": gain,
                    "monotone": monotone,
                    "_pay": pay,
                }
            )
        )
    table = pd.concat(rows, ignore_index=True)
    mean_pay = float(table.pop("_pay").mean())
    tol = tol_factor * abs(mean_pay)
    G = np.array(per_market)
    if G.size >= 2:
        from scipy import stats

        half = float(stats.t.ppf(0.975, G.size - 1) * G.std(ddof=1) / np.sqrt(G.size))
        ci = (float(G.mean()) - half, float(G.mean()) + half)
    else:
        ci = (math.nan, math.nan)
    max_gain = float(G.max())
    summary = {
        "mechanism": mechanism if isinstance(mechanism, str) else mechanism_name(mech),
        "dist": dist.spec,
        "n_sellers": int(n_sellers),
        "n_markets": int(n_markets),
        "seed": None,  # the CLI records its --seed here
        "n_grid": int(n_grid),
        "refine": bool(refine),
        "randomized": bool(getattr(mech, "randomized", False)),
        "mean_payment": mean_pay,
        "tol_factor": tol_factor,
        "tol": tol,
        "max_gain": max_gain,
        "mean_max_gain": float(G.mean()),
        "max_gain_ci_low": ci[0],
        "max_gain_ci_high": ci[1],
        "share_profitable": float(np.mean(table["max_gain"] > tol)),
        "ir_violations": int(np.sum(table["truthful_utility"] < -tol)),
        "min_truthful_utility": float(table["truthful_utility"].min()),
        "monotonicity_violations": len(violations),
        "myerson_monotonicity_violations": myerson_violations,
        "verdict": "ic" if max_gain <= tol else "not_ic",
    }
    return AuditResult(table, summary, violations)


def plot(result: AuditResult, path) -> None:
    """Gain of the best misreport against the seller's cost, tolerance dashed."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    t, s = result.table, result.summary
    fig, ax = plt.subplots(figsize=(7, 4.5))
    sc = ax.scatter(t["cost"], t["max_gain"], c=t["market"], cmap="viridis", s=14)
    ax.axhline(s["tol"], color="k", ls="--", lw=1, label=f"tolerance {s['tol']:.2g}")
    pos = t["max_gain"][t["max_gain"] > 0]
    if len(pos):
        ax.set_yscale("symlog", linthresh=max(s["tol"], 1e-300))
    ax.set_ylim(bottom=0)  # gains are >= 0: the truth is a candidate
    ax.set(
        xlabel="seller's true cost",
        ylabel="largest gain of a misreport",
        title=f"IC audit: {s['mechanism']}, {s['dist']} -> {s['verdict']} "
        f"(max gain {s['max_gain']:.2g})",
    )
    fig.colorbar(sc, ax=ax, label="market")
    ax.legend(loc="upper right")
    fig.tight_layout()

    def write(fh):
        fig.savefig(fh, format="png", dpi=100)

    try:
        atomic_write(path, write)
    finally:
        plt.close(fig)


# ---- the command line -----------------------------------------------------------------
def add_parser(subparsers):
    """Register ``market-sim audit``."""
    from .cli import _count, _positive

    a = subparsers.add_parser(
        "audit",
        help="IC / IR / monotonicity audit of a mechanism on seeded markets",
        description="Draw K markets of N truthful sellers, find each seller's best "
        "unilateral misreport (grid plus a bounded search), count IR and monotonicity "
        "violations, and write DIR/audit.csv, DIR/summary.json and DIR/audit.png. "
        "Verdict: ic iff the largest gain <= 1e-6 x the mean payment.",
    )
    a.add_argument(
        "--mechanism",
        required=True,
        metavar="SPEC",
        help="a registered name (offline, online, pay-as-bid, posted-price, "
        "private-posted-price, private-cutoff), name:key=value, module:attr or "
        "path/to/file.py:Class",
    )
    a.add_argument(
        "--dist", required=True, metavar="SPEC", help="cost distribution, e.g. uniform:0:1"
    )
    a.add_argument("--iron", action="store_true", help="Myerson ironing of the cost law")
    a.add_argument("--sellers", type=_count("sellers"), default=20, help="sellers per market")
    a.add_argument("--markets", type=_count("markets"), default=20, help="number of markets")
    a.add_argument("--seed", type=int, default=0, help="random seed (default 0)")
    a.add_argument(
        "--grid",
        type=_number_at_least(2),
        default=33,
        help="own reports per seller on the support (default 33)",
    )
    a.add_argument("--no-refine", action="store_true", help="grid only, no scalar search")
    a.add_argument("--mu", type=_positive("mu"), default=None)
    a.add_argument("--sigma", type=_positive("sigma"), default=None)
    a.add_argument("--gamma", type=_positive("gamma"), default=None)
    a.add_argument(
        "--privacy",
        type=_positive("privacy"),
        default=None,
        help="epsilon of the private mechanisms' price / cut-off choice",
    )
    a.add_argument("--out", required=True, metavar="DIR", help="output folder")
    a.add_argument("--quiet", action="store_true", help="no progress bar (stderr)")
    a.set_defaults(func=cmd_audit)
    return a


def _number_at_least(least):
    from .cli import _count, _number

    return _number("grid", int, lambda v: v >= least, f">= {least}") if least > 1 else _count


def cmd_audit(args) -> int:
    dist = parse_distribution(args.dist, iron=args.iron)
    context = {
        k: getattr(args, k)
        for k in ("mu", "sigma", "gamma", "privacy")
        if getattr(args, k) is not None
    }
    out = Path(args.out)
    check_writable_folder(out)
    result = audit(
        args.mechanism,
        dist,
        args.sellers,
        args.markets,
        np.random.default_rng(args.seed),
        n_grid=args.grid,
        refine=not args.no_refine,
        progress=not args.quiet,
        **context,
    )
    result.summary["seed"] = args.seed
    result.write(out)
    print(result.format())
    print(f"written to {out}: audit.csv, summary.json, audit.png", file=sys.stdout)
    return 0
