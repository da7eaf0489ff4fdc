"""A referee's report on a mechanism's incentive claims: the peers' regret protocols
beside the audit's, on the same markets (issue #52, item 3).

Learned mechanisms state their incentive compatibility as a regret measured by a
search from the truthful report.  The protocols compared here, all on the same drawn
markets (the others truthful), seller by seller:

* ``gradient ascent`` (FL-Market's check): from the truth, ``steps`` steps of size
  ``step`` along the utility's derivative in the own report (here a central finite
  difference of width ``fd_width`` × the support, since a black box or an ONNX network
  gives no gradient; the same ascent a framework's autograd would take, up to that
  difference), one start; the regret is the best utility seen minus the truthful one.
* ``25-point grid`` (MFG-RegretNet's check): the best of ``grid_points`` evenly spaced
  reports over the support.
* ``audit``: :func:`market_sim.audit` on the same markets (``costs=``): its grid,
  probes, random reports, local search and jumps, and besides the drawn others' truthful
  reports its opponent profiles (others at the floor, at the top, tied, ...), with a
  confirmed witness.  Ex-post IC is a statement about every profile of the others'
  reports, so the audit's regret can exceed the peers' even where their search over the
  own report is as good: the witness names the profile (``market``: the drawn others).

Each row gives the largest and mean regret over sellers, the share of sellers with a
regret above the audit's tolerance, and the IR violations (truthful utility below minus
the tolerance); ``ratio`` is the audit's largest regret over the protocol's (how much a
protocol under-reports).  A ``claimed`` regret (what the mechanism's training
measured) is printed beside them when given.  Nothing here certifies anything: a larger
search can only find more (docs/audit.md says what no finite search covers).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from .auditing import audit
from .distributions import as_distribution
from .errors import MarketSimError
from .mechanisms.base import as_mechanism, mechanism_name

__all__ = ["RefereeReport", "referee", "gradient_ascent_regret", "grid_regret"]


@dataclass(frozen=True)
class RefereeReport:
    """``table``: one row per protocol (protocol, max_regret, mean_regret,
    share_above_tol, ir_violations, ratio); ``witness``: the audit's; ``tolerance``:
    the largest of the audit's tolerances."""

    mechanism: str
    table: pd.DataFrame
    witness: dict | None
    claimed: float | None
    tolerance: float

    def format(self) -> str:
        t = self.table.copy()
        lines = [f"referee's report: {self.mechanism} (tolerance {self.tolerance:.3g})"]
        if self.claimed is not None:
            lines.append(f"regret its training measured (claimed): {self.claimed:.4g}")
        lines.append(t.to_string(index=False, float_format=lambda x: f"{x:.4g}"))
        if self.witness:
            w = self.witness
            lines.append(
                f"audit witness: seller {w['seller']} of market {w['market']} (cost "
                f"{w['cost']:.6g}) gains {w['gain']:.4g} by reporting {w['report']:.6g}, "
                f"the others at profile '{w.get('profile', 'market')}'"
            )
        return "\n".join(lines)


def _utilities(mech, sellers, cand, costs, reports, rng) -> np.ndarray:
    return np.asarray(mech.deviation_utilities(sellers, cand, costs, reports, rng), dtype=float)


def gradient_ascent_regret(
    mech, costs: np.ndarray, support, rng, *, steps=100, step=0.1, fd_width=1e-4
) -> np.ndarray:
    """Per seller of one market: the best utility seen on a gradient ascent from the
    truth (module doc) minus the truthful utility (>= 0)."""
    lo, hi = support
    h = fd_width * (hi - lo)
    n = costs.size
    sellers = np.arange(n)
    r = costs.copy()
    u0 = _utilities(mech, sellers, costs[:, None], costs, costs, rng)[:, 0]
    best = u0.copy()
    for _ in range(int(steps)):
        cand = np.column_stack([np.clip(r - h, lo, hi), r, np.clip(r + h, lo, hi)])
        u = _utilities(mech, sellers, cand, costs, costs, rng)
        best = np.maximum(best, u[:, 1])
        width = cand[:, 2] - cand[:, 0]
        grad = np.divide(u[:, 2] - u[:, 0], width, out=np.zeros(n), where=width > 0)
        r = np.clip(r + step * grad, lo, hi)
    u_end = _utilities(mech, sellers, r[:, None], costs, costs, rng)[:, 0]
    return np.maximum(np.maximum(best, u_end) - u0, 0.0)


def grid_regret(mech, costs: np.ndarray, support, rng, *, points: int = 25) -> np.ndarray:
    """Per seller of one market: the best of ``points`` evenly spaced reports over the
    support minus the truthful utility (>= 0)."""
    lo, hi = support
    n = costs.size
    grid = np.broadcast_to(np.linspace(lo, hi, int(points)), (n, int(points)))
    cand = np.column_stack([costs, grid])
    u = _utilities(mech, np.arange(n), cand, costs, costs, rng)
    return np.maximum(u[:, 1:].max(axis=1) - u[:, 0], 0.0)


def _row(protocol: str, regret: np.ndarray, truthful: np.ndarray, tol, top: float) -> dict:
    return {
        "protocol": protocol,
        "max_regret": float(regret.max()),
        "mean_regret": float(regret.mean()),
        "share_above_tol": float(np.mean(regret > tol)),
        "ir_violations": float(np.mean(truthful < -tol)),
        "ratio": float(top / regret.max()) if regret.max() > 0 else np.inf if top > 0 else 1.0,
    }


def referee(
    mechanism,
    dist,
    n_sellers: int,
    n_markets: int,
    rng: np.random.Generator,
    *,
    claimed: float | None = None,
    steps: int = 100,
    step: float = 0.1,
    grid_points: int = 25,
    **audit_kwargs,
) -> RefereeReport:
    """The peers' protocols and the audit on the same ``n_markets`` markets of
    ``n_sellers`` sellers with costs from ``dist`` (module doc)."""
    if not isinstance(rng, np.random.Generator):
        raise MarketSimError("rng must be a numpy.random.Generator")
    law = as_distribution(dist)
    mech = as_mechanism(mechanism, dist=law, n_sellers=n_sellers)
    costs = np.vstack([law.sample(n_sellers, rng) for _ in range(int(n_markets))])
    result = audit(mech, law, n_sellers, n_markets, rng, costs=costs, **audit_kwargs)
    table = result.table
    # each seller's own tolerance where the audit reports one, else its common one
    tol = table["tol"].to_numpy(dtype=float) if "tol" in table else float(result.summary["tol"])
    audit_regret = table["max_gain"].to_numpy(dtype=float).clip(min=0.0)
    truthful = table["truthful_utility"].to_numpy(dtype=float)
    peers: dict[str, list[np.ndarray]] = {"gradient ascent": [], f"{grid_points}-point grid": []}
    for c in costs:
        peers["gradient ascent"].append(
            gradient_ascent_regret(mech, c, law.support, rng, steps=steps, step=step)
        )
        peers[f"{grid_points}-point grid"].append(
            grid_regret(mech, c, law.support, rng, points=grid_points)
        )
    top = float(audit_regret.max())
    rows = [_row(p, np.concatenate(v), truthful, tol, top) for p, v in peers.items()]
    rows.append(_row("audit (with opponent profiles)", audit_regret, truthful, tol, top))
    return RefereeReport(
        mechanism_name(mech),
        pd.DataFrame(rows),
        result.summary.get("witness"),
        claimed,
        float(np.max(tol)),
    )
