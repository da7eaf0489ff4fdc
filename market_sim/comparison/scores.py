"""The numbers of a comparison (docs/compare.md): Student-t intervals, each market's
scores (Eq. 11 with the payments made, proxy loss, payments, per class), the
leaderboard's rows, the paired differences against the baseline, the ranks."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from ..distributions import as_distribution
from ..errors import MarketSimError
from ..mechanisms.offline import buyer_loss, proxy_loss_of_eps
from ..population import Population
from ..privacy.limit import weights

if TYPE_CHECKING:
    import pandas as pd


LEVEL = 0.95


#: Eq. 11 (003) with the realised payments: mu ||eps|| / eta + sigma / eta + gamma sum t_i,
#: eta = sum eps; inf when nothing is bought (the simulation's ``buyer_loss`` is the same)
objective = buyer_loss


def t_interval(x, level: float = LEVEL) -> tuple[float, float, float]:
    """(mean, low, high): the Student-t interval of the mean of ``x``; (inf, inf, inf)
    or (-inf, ...) when entries are infinite (NaN when both signs are), NaN bounds
    with fewer than 2 values."""
    from scipy import stats

    x = np.asarray(x, dtype=float)
    if x.size == 0:
        return (math.nan, math.nan, math.nan)
    if not np.all(np.isfinite(x)):  # +inf, -inf, or nan when both (or a nan) occur
        up, down = bool(np.any(x == math.inf)), bool(np.any(x == -math.inf))
        bad = np.isnan(x).any() or (up and down)
        mean = math.nan if bad else (math.inf if up else -math.inf)
        return (mean, mean, mean)
    mean = float(x.mean())
    if x.size < 2:
        return (mean, math.nan, math.nan)
    half = float(stats.t.ppf(0.5 + level / 2, x.size - 1) * x.std(ddof=1) / math.sqrt(x.size))
    return (mean, mean - half, mean + half)


# The ic and ir columns of a mechanism the library proves IC and IR, not audited here.
TRUSTED, TRUSTED_IR = "ic (library proof)", "ir (library proof)"


def _bids(bne, costs: np.ndarray, group: np.ndarray) -> np.ndarray:
    """Every seller's report b_g(c) at its cost under its class's bid function."""
    reports = np.empty_like(costs)
    for g in np.unique(group):
        reports[group == g] = bne.bid(costs[group == g], group=int(g))
    return reports


def _against_offline(rows, per, m) -> None:
    """The revelation-principle check: each mechanism's objective minus the offline
    mechanism's, market by market (paired t interval), on the rows of size m."""
    mine = [r for r in rows if r["n_sellers"] == m]
    off = [r["mechanism"] for r in mine if r["eq11_minimiser"]]
    for r in mine:
        if not off:
            r["minus_offline_mean"] = r["minus_offline_ci_high"] = math.nan
            continue
        d = _paired(per[r["mechanism"]], per[off[0]], "objective")
        r["minus_offline_mean"] = d["objective_diff_mean"]
        r["minus_offline_ci_high"] = d["objective_diff_ci_high"]


@dataclass(frozen=True)
class _Markets:
    """The markets every mechanism faces (common random numbers): costs (K, m), each
    market's data, virtual costs under each seller's own law, outcome seeds, audit seed."""

    costs: np.ndarray
    data: list
    psi: np.ndarray
    seeds: np.ndarray
    audit_seed: int


def _draw_markets(pop: Population, n_markets: int, rng) -> _Markets:
    """``n_markets`` markets of ``pop`` (for one class without data: the very draws of
    ``law.sample(m, rng)``), then the outcome seeds and the audit seed."""
    drawn = [pop.sample(rng) for _ in range(n_markets)]
    costs = np.array([mk.costs for mk in drawn])
    seeds = rng.integers(2**63, size=n_markets)
    audit_seed = int(rng.integers(2**63))
    if pop.n_classes == 1:
        psi = pop.laws[0].virtual_cost(costs)
    else:
        psi = np.array([pop.seller_laws.virtual_cost(c) for c in costs])
    return _Markets(costs, [mk.data for mk in drawn], psi, seeds, audit_seed)


def _score_markets(mech, markets: _Markets, pop: Population, mu, sigma, gamma, bne=None) -> dict:
    """Each market's objective, proxy loss (Eq. 11 with each seller's own psi_i at the
    true costs), payment, number bought, and with several classes each class's part of
    them, when every seller reports its cost (or, given ``bne``, its equilibrium bid)."""
    K = markets.costs.shape[0]
    obj, loss, pay, bought = (np.empty(K) for _ in range(4))
    classes = pop.n_classes if pop.n_classes > 1 else 0
    by_class = {k: np.empty((K, classes)) for k in ("objective", "payment", "n_bought")}
    for k in range(K):
        run = mech if markets.data[k] is None else mech.with_data(*markets.data[k])
        reports = markets.costs[k] if bne is None else _bids(bne, markets.costs[k], pop.group)
        out = run.run(reports, np.random.default_rng(int(markets.seeds[k])))
        obj[k] = objective(out.eps, out.payments, mu=mu, sigma=sigma, gamma=gamma)
        loss[k] = proxy_loss_of_eps(out.eps, markets.psi[k], mu=mu, sigma=sigma, gamma=gamma)
        pay[k] = float(np.sum(out.payments))
        bought[k] = int(np.count_nonzero(out.eps > 0))
        if classes:
            parts = _class_parts(out, pop.group, classes, obj[k] - gamma * pay[k], gamma)
            for key, v in parts.items():
                by_class[key][k] = v
    scores = dict(objective=obj, proxy_loss=loss, payment=pay, n_bought=bought)
    return scores | ({"class": by_class} if classes else {})


def _class_parts(out, group, classes: int, data_loss: float, gamma: float) -> dict:
    """Class j's part of a market's objective: its share of the eps bought times the data
    terms of Eq. 11, plus gamma times its payments (the parts add up to the objective;
    all inf when nothing is bought); its payments and number bought."""
    a, eta = weights(out.eps)  # the shares a (eps_i = +inf: their limit, privacy.limit)
    pay_j = np.bincount(group, weights=out.payments, minlength=classes)
    share = (
        np.bincount(group, weights=a, minlength=classes) if eta > 0 else np.full(classes, math.inf)
    )
    with np.errstate(invalid="ignore"):
        part = np.where(np.isfinite(data_loss), share * data_loss, math.inf) + gamma * pay_j
    n_j = np.bincount(group, weights=out.eps > 0, minlength=classes)
    return dict(objective=part, payment=pay_j, n_bought=n_j)


def _report_range(pop: Population):
    """The law whose support the audit searches: the one law, else the pooled law (the
    hull of the classes), else a uniform law on the hull (classes with a gap)."""
    if pop.n_classes == 1:
        return pop.laws[0]
    try:
        return pop.pooled
    except MarketSimError:
        lo, hi = pop.seller_laws.support
        return as_distribution(f"uniform:{lo!r}:{hi!r}")


def _market_frame(m: int, label: str, scores: dict) -> pd.DataFrame:
    import pandas as pd

    K = scores["objective"].size
    cols = {"n_sellers": m, "market": np.arange(K), "mechanism": label}
    cols |= {k: scores[k] for k in ("objective", "proxy_loss", "payment", "n_bought")}
    for key, v in scores.get("class", {}).items():
        cols |= {f"class{j}_{key}": v[:, j] for j in range(v.shape[1])}
    return pd.DataFrame(cols)


def _leaderboard_row(m: int, label: str, scores: dict, gamma: float, n_markets: int) -> dict:
    obj, pay, loss = scores["objective"], scores["payment"], scores["proxy_loss"]
    o, lo, hi = t_interval(obj)
    p, plo, phi = t_interval(pay)
    dl, dlo, dhi = t_interval(obj - gamma * pay)  # the data terms of Eq. 11
    finite = obj[np.isfinite(obj)]
    return {
        "n_sellers": m,
        "mechanism": label,
        "objective_mean": o,
        "objective_ci_low": lo,
        "objective_ci_high": hi,
        "n_empty": int(n_markets - finite.size),
        "objective_mean_bought": float(finite.mean()) if finite.size else math.nan,
        "proxy_loss_mean": t_interval(loss)[0],
        "data_loss_mean": dl,
        "data_loss_ci_low": dlo,
        "data_loss_ci_high": dhi,
        "payment_mean": p,
        "payment_ci_low": plo,
        "payment_ci_high": phi,
        "n_bought_mean": float(scores["n_bought"].mean()),
    }


def _class_summary(scores: dict) -> dict:
    """Per class j: class{j}_objective_mean (with its CI), class{j}_payment_mean,
    class{j}_n_bought_mean (nothing with one class)."""
    out: dict[str, float] = {}
    by = scores.get("class")
    if not by:
        return out
    for j in range(by["objective"].shape[1]):
        o, lo, hi = t_interval(by["objective"][:, j])
        out |= {
            f"class{j}_objective_mean": o,
            f"class{j}_objective_ci_low": lo,
            f"class{j}_objective_ci_high": hi,
            f"class{j}_payment_mean": t_interval(by["payment"][:, j])[0],
            f"class{j}_n_bought_mean": float(by["n_bought"][:, j].mean()),
        }
    return out


def _paired_rows(m: int, per: dict, labels, baseline) -> list[dict]:
    base = per[baseline]
    return [
        {"n_sellers": m, "mechanism": label, "baseline": baseline}
        | _paired(per[label], base, "objective")
        | _paired(per[label], base, "payment")
        for label in labels
    ]


def _minimises_eq11(mech, mu, sigma, gamma) -> bool:
    """The offline mechanism with these weights and no cap: it solves Eq. 11 (003) in
    every market and pays Myerson's payments, so it is the theory's minimiser."""
    from ..mechanisms.builtin import OfflineMechanism

    return (
        isinstance(mech, OfflineMechanism)
        and mech.k is None
        and (mech.mu, mech.sigma, mech.gamma) == (mu, sigma, gamma)
    )


def _paired(x: dict, base: dict, key: str) -> dict:
    """Paired differences x - base of ``key`` over the markets: a market where both
    are inf (nothing bought) is left out and counted."""
    a, b = x[key], base[key]
    both = np.isinf(a) & np.isinf(b) & (np.sign(a) == np.sign(b))
    d = a[~both] - b[~both]
    mean, lo, hi = t_interval(d)
    out: dict[str, object] = {
        f"{key}_diff_mean": mean,
        f"{key}_diff_ci_low": lo,
        f"{key}_diff_ci_high": hi,
    }
    if key == "objective":
        out["n_pairs"] = int(d.size)
        out["n_both_empty"] = int(both.sum())
        if math.isnan(mean):  # each bought nothing in a market where the other did
            out["verdict"] = "undefined"
        else:
            out["verdict"] = "lower" if hi < 0 else "higher" if lo > 0 else "no difference"
    return out


def _rank(lb: pd.DataFrame) -> pd.DataFrame:
    """Sorted by size, then mean objective (ties at inf: fewer empty markets first, then
    the mean over the others); ``rank`` within the size, ``rank_ic`` among the
    mechanisms audited IC and IR (NaN for the others)."""
    keys = ["n_sellers", "objective_mean", "n_empty", "objective_mean_bought", "mechanism"]
    lb = lb.sort_values(keys, kind="stable")
    lb = lb.reset_index(drop=True)
    lb.insert(0, "rank", lb.groupby("n_sellers").cumcount() + 1)
    ok = lb["ic"].isin(["ic", TRUSTED]) & lb["ir"].isin(["ir", TRUSTED_IR])
    rank_ic = lb[ok].groupby("n_sellers").cumcount() + 1
    lb["rank_ic"] = rank_ic.reindex(lb.index).astype(float)
    return lb
