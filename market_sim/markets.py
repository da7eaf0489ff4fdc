"""One market from reported costs: the offline (Alg. 2) or online (Alg. 3, 003) allocation
with Myerson payments, as a per-seller table and a summary.

The library function behind ``market-sim solve`` and ``market-sim demo``.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np

from . import __version__
from .errors import MarketSimError
from .estimates import SLOW_SECONDS, capped_offline_seconds, format_duration
from .privacy.limit import privacy_cost

__all__ = ["read_costs", "run_market", "cutoff_cost"]


def read_costs(path: str):
    """Read and validate a seller_id,cost CSV; returns (ids, costs)."""
    import pandas as pd

    p = Path(path)
    if not p.is_file():
        raise MarketSimError(f"{path}: no such file")
    try:
        df = pd.read_csv(
            p,
            dtype={"seller_id": str},
            encoding="utf-8-sig",
            keep_default_na=False,
            skipinitialspace=True,
        )
    except pd.errors.EmptyDataError:
        raise MarketSimError(f"{path}: the file is empty") from None
    except UnicodeDecodeError:
        raise MarketSimError(f"{path}: not UTF-8 text") from None
    except (pd.errors.ParserError, ValueError) as exc:
        msg = str(exc).splitlines()[0] if str(exc) else exc.__class__.__name__
        raise MarketSimError(f"{path}: not a valid CSV ({msg})") from None
    df.columns = [str(c).strip() for c in df.columns]
    for col in ("seller_id", "cost"):
        if col not in df.columns:
            raise MarketSimError(f"{path}: missing column '{col}' (need seller_id,cost)")
    if len(df) == 0:
        raise MarketSimError(f"{path}: no sellers")
    ids = df["seller_id"].astype(str).str.strip()
    if (ids == "").any():
        raise MarketSimError(f"{path}: empty seller_id on line {int(np.argmax(ids == '')) + 2}")
    dup = ids.duplicated()
    if dup.any():
        raise MarketSimError(f"{path}: duplicate seller_id {ids[dup].iloc[0]!r}")
    raw = df["cost"]
    if pd.api.types.is_numeric_dtype(raw) and not pd.api.types.is_bool_dtype(raw):
        costs = raw.to_numpy(float)
    else:  # something did not parse as a number: find it
        costs = pd.to_numeric(raw.astype(str).str.strip(), errors="coerce").to_numpy(float)
    bad = ~np.isfinite(costs)
    if bad.any():
        i = int(np.argmax(bad))
        raise MarketSimError(
            f"{path}: cost of seller {ids.iloc[i]!r} is not a finite number ({raw.iloc[i]!r})"
        )
    if (costs < 0).any():
        i = int(np.argmax(costs < 0))
        raise MarketSimError(f"{path}: cost of seller {ids.iloc[i]!r} is negative ({costs[i]:g})")
    return ids.to_numpy(), costs


def run_market(
    costs,
    dist,
    *,
    mu,
    sigma,
    gamma,
    k=None,
    n_quad=32,
    mechanism="offline",
    rule="fluid",
    planned_m=None,
    warn=None,
):
    """Run one market; returns (per-seller DataFrame without ids, summary dict).

    ``warn(text)`` is called once, before the payments, when they are expected to
    take far longer than usual (``market_sim.estimates``)."""
    import pandas as pd

    psi = dist.virtual_cost(costs)
    summary = {
        "mechanism": mechanism,
        "distribution": dist.spec,
        "m": int(costs.size),
        "mu": mu,
        "sigma": sigma,
        "gamma": gamma,
    }
    if mechanism == "offline":
        eps, pay, a, eta, cutoff, loss = _offline_market(
            costs, dist, psi, mu=mu, sigma=sigma, gamma=gamma, k=k, n_quad=n_quad, warn=warn
        )
        summary["k"] = k
    else:
        if k is not None:
            raise MarketSimError("--k applies to the offline mechanism only")
        planned = int(planned_m or costs.size)
        eps, pay, a, eta, cutoff, loss = _online_market(
            costs, dist, psi, planned, mu=mu, sigma=sigma, gamma=gamma, rule=rule
        )
        summary.update(rule=rule, planned_m=planned)
    table = pd.DataFrame(
        {
            "cost": costs,
            "virtual_cost": psi,
            "a": a,
            "eps": eps,
            "payment": pay,
            "utility": pay - privacy_cost(costs, eps),  # 0 x inf = 0 (privacy.limit)
        }
    )
    summary.update(
        eta=eta,
        cutoff=cutoff,  # lambda, in gamma * psi units: bought iff gamma psi(c) < cutoff
        cutoff_cost=cutoff_cost(dist, cutoff, gamma),
        proxy_loss=loss,
        n_bought=int(np.count_nonzero(eps)),
        total_payment=float(pay.sum()),
        version=__version__,
    )
    return table, summary


def _offline_market(costs, dist, psi, *, mu, sigma, gamma, k, n_quad, warn):
    """Alg. 2 of 003 with Myerson payments: (eps, payments, a, eta, lambda, proxy loss);
    ``warn`` once first when the capped payments will be slow."""
    from .mechanisms.offline import solve
    from .mechanisms.payments import capped_oracle_compiled, offline_payments

    res = solve(psi, mu=mu, sigma=sigma, gamma=gamma, k=k)
    if warn is not None and k is not None and k < costs.size:
        compiled = capped_oracle_compiled()
        seconds = capped_offline_seconds(costs.size, res.n_bought, compiled=compiled)
        if seconds > SLOW_SECONDS:
            why = "" if compiled else " (without numba each payment re-solves the market)"
            warn(
                f"the capped payments (--k) of {res.n_bought} bought sellers of "
                f"{costs.size} will take {format_duration(seconds)} by the cost model"
                f"{why}; without --k they take seconds"
            )
    eps, pay = offline_payments(costs, dist, mu=mu, sigma=sigma, gamma=gamma, k=k, n_quad=n_quad)
    return eps, pay, res.a, res.eta, res.lam, res.proxy_loss


def _online_market(costs, dist, psi, planned: int, *, mu, sigma, gamma, rule):
    """Alg. 3 of 003 with ``planned`` arrivals: (eps, payments, a, eta, cut-off, proxy loss)."""
    from .mechanisms.offline import proxy_loss_of_eps
    from .mechanisms.online import OnlineMechanism

    mech = OnlineMechanism(dist, planned, mu=mu, sigma=sigma, gamma=gamma, rule=rule)
    eps, pay = mech.eps(costs), mech.payments(costs)
    eta = float(eps.sum())
    a = eps / eta if eta > 0 else np.zeros_like(eps)
    loss = proxy_loss_of_eps(eps, psi, mu=mu, sigma=sigma, gamma=gamma)
    return eps, pay, a, eta, mech.cutoff, loss


def cutoff_cost(dist, cutoff: float, gamma: float) -> float:
    """The cost at which buying stops: the c with gamma psi(c) = cutoff (Eq. 13, 003),
    the top of the support when everybody is bought."""
    if not math.isfinite(cutoff):
        return float(dist.support[1])
    return float(dist.inverse_virtual_cost(np.array(cutoff / gamma)))
