"""From the markets' searches to the verdicts: each seller against its own tolerance,
the witnesses, the reasons (docs/audit.md)."""

from __future__ import annotations

import math

import numpy as np

from .search import _Market
from .statistics import _N_STAGES, _Z_POWER, _bonferroni_z, _critical


def _tolerance(markets: list[_Market]) -> tuple[float, float]:
    """(tol, eps_scale) for the summary: the largest per-seller tolerance used (each
    seller is judged against its own, ``_tol``) and the largest finite truthful eps (a
    seller of cost 0 at the zero-cost limit has eps = +inf: evaluate's module doc)."""
    tol = max(float(max(m.tol.max(), m.gain_tol.max(), m.type_tol.max())) for m in markets)
    eps = [m.truth_eps[np.isfinite(m.truth_eps)] for m in markets]
    return tol, max(float(np.max(e, initial=0.0)) for e in eps)


def _cat(markets, key: str) -> np.ndarray:
    return np.concatenate([getattr(m, key) for m in markets])


def _decide(markets: list[_Market], mc: bool, n_pairs: int, resolution: float) -> dict:
    """Per (market, seller), each against its own tolerance: profitable / undecided
    gains and IR violations, and the detectable sizes (Monte Carlo; module doc)."""
    gain_tol, tol = _cat(markets, "gain_tol"), _cat(markets, "tol")
    margin = resolution * np.concatenate([m.found.scale for m in markets])
    base = {"gain_tol": gain_tol, "tol": tol, "margin": margin}
    if not mc:
        ir_margin = np.concatenate([m.ir.margin for m in markets])
        return base | {
            "profitable": _cat(markets, "gain") > gain_tol,
            "undecided": np.zeros(n_pairs, dtype=bool),
            "ir_bad": ir_margin < 0,
            "ir_undecided": np.zeros(n_pairs, dtype=bool),
            "ir_low": np.concatenate([m.ir.utility for m in markets]),
            "ir_margin": ir_margin,
            "detectable_gain": None,
            "detectable_ir": None,
            "wide_gain": np.zeros(n_pairs, dtype=bool),
            "wide_ir": np.zeros(n_pairs, dtype=bool),
            "z": 0.0,
        }
    return base | _decide_mc(markets, n_pairs, gain_tol, tol, margin)


def _decide_mc(markets, n_pairs, gain_tol, tol, margin) -> dict:
    """The Monte Carlo half of ``_decide``: the confirmation's statistics."""
    st = {q: np.concatenate([m.stats[q] for m in markets]) for q in markets[0].stats}
    z_gain = _bonferroni_z(2 * n_pairs * _N_STAGES)
    g, x = st["gain"], st["explore"]
    k_gain = _critical(g, z_gain, +1)
    lower = g[:, 0] - k_gain * g[:, 1]
    stable = g[:, 3] > 0
    # the fresh report only raises doubt: a gain or a heavy tail there is not excluded
    x_lower = x[:, 0] - _critical(x, z_gain, +1) * x[:, 1]
    x_wide = (x[:, 0] + _critical(x, z_gain, -1) * x[:, 1] > tol + margin) | (x_lower > tol)
    # a heavy tail at a fresh report: rare large payments the search's few draws could
    # not weigh, so its choice of best report is no evidence (a rare prize)
    x_wide |= x[:, 5] > 0
    # a seller none of whose quantities varied over its draws (the truth, the top, the
    # bottom, a fresh report, the best misreport): the draws saw none of the declared
    # randomness, so their SE 0 bounds nothing; an outcome rarer than 1 in D draws (a
    # prize) is excluded neither in weight nor in size
    blind = np.all([st[q][:, 1] == 0 for q in st], axis=0)
    z_ir = _bonferroni_z(3 * n_pairs * _N_STAGES)
    ir_bad, ir_und = np.zeros(n_pairs, dtype=bool), np.zeros(n_pairs, dtype=bool)
    wide_ir, ir_det, ir_low = np.zeros(n_pairs, dtype=bool), [], np.full(n_pairs, np.inf)
    for q in ("truth", "top", "bottom"):
        k_ir = _critical(st[q], z_ir, -1)
        upper = st[q][:, 0] + k_ir * st[q][:, 1]
        ok = st[q][:, 3] > 0
        ir_bad |= ok & (upper < -tol)
        ir_und |= ~ok & (upper < -tol)
        # the data allow a violation beyond the resolution: the lower bound is below it
        wide_ir |= st[q][:, 0] - _critical(st[q], z_ir, +1) * st[q][:, 1] < -tol - margin
        ir_det.append(tol + (k_ir + _Z_POWER) * st[q][:, 1])
        ir_low = np.minimum(ir_low, st[q][:, 0])
    detectable = gain_tol + (k_gain + _Z_POWER) * g[:, 1]
    return {
        "profitable": stable & (lower > gain_tol),
        "undecided": ~stable & (lower > gain_tol),
        "ir_bad": ir_bad,
        "ir_undecided": ir_und,
        "ir_low": ir_low,
        "ir_margin": ir_low + tol,
        "gain": g[:, 0],
        "gain_se": g[:, 1],
        "truth": st["truth"][:, 0],
        "top": st["top"][:, 0],
        "bottom": st["bottom"][:, 0],
        "wide_gain": (g[:, 0] + _critical(g, z_gain, -1) * g[:, 1] > gain_tol + margin) | x_wide,
        "blind": blind,
        "wide_ir": wide_ir,
        "detectable_gain": float(np.max(detectable)),  # at every seller's best report
        "detectable_gain_median": float(np.median(detectable)),
        "detectable_ir": float(np.median(np.concatenate(ir_det))),
        "z": z_gain,
        "draws_max": int(max(st[q][:, 4].max() for q in st)),
        "draws_total": int(sum(m.stats["gain"][:, 4].sum() for m in markets)),
    }


def _verdicts(d: dict, markets, violations, settings, mc, deterministic) -> dict:
    """IC and IR verdicts with their reasons and witnesses (module doc)."""
    n_per = markets[0].costs.size
    gain = d.get("gain", np.concatenate([m.gain for m in markets]))
    type_excess = np.concatenate([m.type_gain - m.type_tol for m in markets])
    type_gain = np.concatenate([m.type_gain for m in markets])
    residual, res_tol = _residual_excess(markets)
    out: dict = {"verdict_reason": None, "ir_reason": None}
    i_best = int(np.argmax(gain))
    out["verdict"], out["witness"] = "ic", _witness(markets, i_best, gain[i_best], n_per, "seller")
    if d["profitable"].any():
        i = int(np.argmax(np.where(d["profitable"], gain, -np.inf)))
        out["verdict"], out["witness"] = "not_ic", _witness(markets, i, gain[i], n_per, "seller")
        out["verdict_reason"] = "a confirmed profitable misreport"
    elif not mc and type_excess.max() > 0:
        i = int(np.argmax(type_excess))
        out["verdict"], out["witness"] = "not_ic", _witness(markets, i, type_gain[i], n_per, "type")
        out["verdict_reason"] = "a type gain between adjacent reports"
    elif deterministic and violations:
        m, i, low, high, e_low, e_high = max(
            violations, key=lambda v: (v[3] - v[2]) * (v[5] - v[4])
        )
        out["verdict"] = "not_ic"
        out["witness"] = {"market": m, "seller": i, "cost": low, "report": high,
                          "gain": (high - low) * (e_high - e_low), "se": 0.0,
                          "profile": "market", "kind": "monotone"}  # fmt: skip
        out["verdict_reason"] = (
            f"eps rises with the own report (seller {i} of market {m}: {e_low:.6g} at "
            f"{low:.6g}, {e_high:.6g} at {high:.6g}); no payment makes a rising allocation "
            "truthful (Myerson's lemma): a seller of cost one of the two gains by reporting the "
            f"other, the two gains summing to {(high - low) * (e_high - e_low):.3g}"
        )
    elif deterministic and residual > res_tol:
        i = int(np.argmax(type_gain))
        out["verdict"], out["witness"] = "not_ic", _witness(markets, i, type_gain[i], n_per, "type")
        out["verdict_reason"] = (
            f"Myerson's payment identity fails by {residual:.3g} > {res_tol:.3g} (tol at the "
            "largest eps of that seller's reports) at the reports tried "
            "(no monotone allocation explains the payments: a proof of non-IC; the best "
            "adjacent type gain is shown)"
        )
    elif mc and (unsettled := _unsettled_ic(d, settings)):
        out["verdict"], out["verdict_reason"] = "inconclusive", unsettled
    out["ir_verdict"], out["ir_reason"] = _ir_verdict(d, mc)
    out["identity_residual_tol"] = res_tol if math.isfinite(res_tol) else None
    t = int(np.argmax(type_excess))
    out["type_gain_max"] = None if mc else float(type_gain[t])
    out["type_gain_tol"] = None if mc else float(type_gain[t] - type_excess[t])
    return out


def _unsettled_ic(d: dict, settings) -> str | None:
    """Why a randomized mechanism's IC is inconclusive (no gain confirmed, but the draws
    could not exclude one), or None."""
    if d["undecided"].any():
        return (
            f"{int(d['undecided'].sum())} sellers' best reports would be confirmed "
            f"profitable but their payments' variance did not settle in "
            f"{settings['n_confirm_max']} draws (a heavy tail)"
        )
    if d["blind"].any():
        return (
            f"no gain confirmed, but for {int(d['blind'].sum())} sellers none of the "
            f"{d['draws_max']} or fewer fresh draws varied (the truth, the top, the bottom, a "
            "fresh report, the best misreport) although the mechanism is randomized: the "
            "draws saw none of its randomness, so an outcome rarer than one in that many "
            "draws (a rare prize) is not excluded, and a standard error of 0 bounds "
            "nothing; more draws (n_confirm_max) are needed"
        )
    if d["wide_gain"].any():
        return (
            f"no gain confirmed, but for {int(d['wide_gain'].sum())} sellers the fresh draws "
            "allow a gain above its tol + resolution "
            f"{settings['resolution']:g} x its own incentive scale (w x its largest eps) at "
            "its best report or a fresh random one, or show rare large payments there (a "
            "sample constant but for a few draws carrying the variance: outcomes the "
            "search's draws could not weigh); more draws (n_confirm, n_draws) are needed"
        )
    return None


def _ir_verdict(d: dict, mc: bool) -> tuple[str, str | None]:
    """The IR verdict and, when inconclusive, why."""
    if d["ir_bad"].any():
        return "not_ir", None
    if mc and d["ir_undecided"].any():
        return "inconclusive", (
            f"{int(d['ir_undecided'].sum())} sellers' utility would be confirmed below -tol but "
            "its variance did not settle (a heavy tail)"
        )
    if mc and d["wide_ir"].any():
        return "inconclusive", (
            f"no IR violation confirmed, but for {int(d['wide_ir'].sum())} sellers the draws "
            "allow a truthful utility below -(its tol + resolution x its scale) (at the drawn "
            "cost, the top or the bottom); more draws (n_confirm) are needed"
        )
    return "ir", None


def _residual_excess(markets) -> tuple[float, float]:
    """The identity residual of the seller where it most exceeds its tolerance (tol at
    the largest eps among its reports), and that tolerance."""
    best = (0.0, math.inf)
    for mk in markets:
        off = 0
        for ch in mk.found.check or []:
            if ch is None:
                continue
            size = ch.residuals.size
            t = mk.found.tol[off : off + size]
            j = int(np.argmax(ch.residuals - t))
            if ch.residuals[j] - t[j] > best[0] - best[1]:
                best = (float(ch.residuals[j]), float(t[j]))
            off += size
    return best


def _ir_witness(markets, d: dict, n_per: int, mc: bool) -> dict:
    """The seller whose IR margin (utility + its tol) is least: where, which type."""
    flat = int(np.argmin(d["ir_margin"]))
    m, i = divmod(flat, n_per)
    if mc:
        return {"market": m, "seller": i, "utility": float(d["ir_low"][flat]),
                "tol": float(d["tol"][flat]),
                "where": "at the drawn cost, the top or the bottom"}  # fmt: skip
    ir = markets[m].ir
    return {"market": m, "seller": i, "utility": float(ir.utility[i]), "type": float(ir.cost[i]),
            "tol": float(d["tol"][flat]), "where": str(ir.where[i])}  # fmt: skip


def _witness(markets, flat: int, gain: float, n_per: int, kind: str) -> dict:
    m, i = divmod(flat, n_per)
    mk = markets[m]
    if kind == "type":
        cost, report = (float(v) for v in mk.type_pair[i])
        profile, tol = str(mk.type_profile[i]), float(mk.type_tol[i])
        others = None
    else:
        cost, report, profile = float(mk.costs[i]), float(mk.best_report[i]), str(mk.profile[i])
        tol = float(mk.gain_tol[i])
        others = [float(x) for x in np.delete(mk.groups[int(mk.best_group[i])], i)]
    return {"market": m, "seller": i, "cost": cost, "report": report, "gain": float(gain),
            "se": float(mk.gain_se[i]) if kind == "seller" else 0.0, "profile": profile,
            "kind": kind, "tol": tol, "others": others}  # fmt: skip
