"""One market: the drawn reports, then the opponent profiles (targeted and interior,
``market_sim.coalitions``), each judged against its own tolerance."""

from __future__ import annotations

import numpy as np

from ..errors import MarketSimError
from ..mechanisms.base import mechanism_name
from ..privacy.limit import privacy_cost
from .evaluate import _Exact, _MonteCarlo, _streams
from .montecarlo import _confirm
from .search import _IR, _Found, _Market, _others, _Plan, _search

_FLOORS = (0.0, 1e-9, 1e-6, 1e-3)  # the bottom report tried, + w x this, first defined
_CHUNK = 4096  # sellers per batch (memory; results do not depend on it)
_INTERIOR = ("k_at_end", "k_near_point", "pair_tied", "band")
_SHARE = 3  # markets sharing one interior design (each: every 3rd profile of a kind
# whose profiles do not depend on the market's stratum)
_LARGE = 256  # larger markets: 2 other sellers' reports per seller, no jumps in profiles


def _floor(mech, costs, P0: _Plan, rng, mc) -> tuple[float, str | None]:
    """The lowest report the mechanism has an outcome for (as a fraction f of each
    seller's own width above its own bottom), alone and with every other seller there
    too (the floor profile): f = 0, else the first of 1e-9, 1e-6, 1e-3.  The offline
    mechanism's outcome at a report of 0 on a support starting at 0 (psi = 0) is the
    zero-cost limit, eps = +inf with a finite payment, which exact evaluations accept
    (``evaluate``'s module doc): its floor is the bottom itself."""
    note = None
    R0 = P0.rows(np.arange(costs.size))
    for f in _FLOORS:
        z = R0.lo + f * R0.width
        try:
            for reports in (costs, z):
                trial = reports.copy()
                trial[0] = z[0]
                if mc:
                    mech.run(trial, np.random.default_rng(0))
                else:
                    _Exact(mech, trial, costs, rng)(np.array([0]), np.array([[z[0]]]))
            return f, note
        except MarketSimError as err:
            note = (f"no outcome at a report of {z[0]:.6g} ({err}); lowest report tried c_low "
                    "+ w ")  # fmt: skip
    raise MarketSimError(f"{mechanism_name(mech)}: {note}no outcome near the support's bottom")


def _profile_sellers(costs, cap):
    """All sellers, or ``cap`` of them at evenly spaced cost ranks."""
    n = costs.size
    if n <= cap:
        return np.arange(n)
    order = np.argsort(costs, kind="stable")
    return np.sort(order[np.unique(np.linspace(0, n - 1, cap).round().astype(int))])


def _profile_groups(costs, P: _Plan, rng=None, stratum=None):
    """(kind, sellers, reports) for every opponent profile, sellers sharing a vector
    grouped (``coalitions.opponent_profiles``, own entry aside; each other seller
    within its own support)."""
    from ..coalitions import interior_profiles, opponent_profiles

    R = P.rows(np.arange(costs.size))
    groups: dict[tuple, list] = {}
    vectors: dict[tuple, np.ndarray] = {}
    for i in _profile_sellers(costs, P.max_profile_sellers):
        for kind, v in opponent_profiles(costs, (R.floor, R.hi), [i], rng=rng).items():
            key = (kind, v.tobytes())  # the own entry is replaced by the candidates
            groups.setdefault(key, []).append(int(i))
            vectors[key] = v
    out = [(key[0], np.array(s), vectors[key]) for key, s in groups.items()]
    if rng is not None and P.interior:  # shared vectors: every profiled seller at once
        searched = _profile_sellers(costs, P.max_profile_sellers)
        design = interior_profiles(costs, (R.floor, R.hi), rng, stratum=stratum)
        # the markets share the design: market m searches every k_near_point profile (a
        # Latin design over the markets) and the others j with j = m mod s
        m, K = (0, 1) if stratum is None else stratum
        s = max(1, min(K, _SHARE))
        out += [(kind, searched, v) for j, (kind, v) in enumerate(design)
                if kind == "k_near_point" or j % s == m % s]  # fmt: skip
    return out


def _audit_market(mech, costs, P: _Plan, rng, mc, settings, progress_bar, stratum=0):
    """Search every seller of one market, then its opponent profiles."""
    n = costs.size
    R = P.rows(np.arange(n))
    # the market's draws, one stream per seed shared by its evaluators (``_streams``)
    seeds = _streams(rng.integers(2**63, size=settings["n_draws"])) if mc else None

    def evaluator(reports, draws=None):
        if mc:
            return _MonteCarlo(mech, reports, costs, seeds[:draws])
        return _Exact(mech, reports, costs, rng, settings.get("deviations_note") is not None)

    rand = R.clip(R.col("lo") + R.col("width") * (1.0 - rng.random((n, P.n_random))))  # (lo, hi]
    ev = evaluator(costs)
    parts = []
    cap = P.max_others if n <= _LARGE else min(P.max_others, 2)
    targeted = _profile_sellers(costs, P.max_profile_sellers)
    for a in range(0, n, _CHUNK):
        s = np.arange(a, min(a + _CHUNK, n))
        rows = np.nonzero(np.isin(s, targeted))[0]
        parts.append(_search(ev, s, costs[s], costs[_others(costs, s, cap)], P, R.take(s),
                             rand[s], settings["tol_terms"], True, rows))  # fmt: skip
        progress_bar.update(s.size)
    mk = _new_market(costs, _join(parts), mc)
    if not mc and _certified_here(mech, mk):
        # the market's own check certifies the library's own, unmodified mechanism: a
        # proof for every profile of the others (docs/audit-certification.md), which no
        # search of profiles can add to; none is searched here (``profiles_certified``)
        mk.profiles_certified = True
        return mk
    # the profiles' search only selects (the confirmation draws afresh): an eighth of the draws
    draws = max(2, settings["n_draws"] // 8)
    strat = (stratum, settings.get("n_markets", 1))  # the markets share one Latin design
    _search_profiles(mk, lambda v: evaluator(v, draws), P, settings, rng, strat)
    if mc:
        mk.stats = _confirm(mech, mk, P, rng, settings)
    return mk


def _certified_here(mech, mk: _Market) -> bool:
    """Whether this market's checks certify ``mech`` (``certification.certification``:
    the library's own unmodified offline or online mechanism, monotone on every report
    tried, Myerson's identity within its tolerance), each chunk's check alike."""
    from ..certification import CERTIFIED, certification

    found_checks: list = mk.found.check if isinstance(mk.found.check, list) else []
    checks = [ch for ch in found_checks if ch is not None]
    return bool(checks) and all(certification(mech, ch) == CERTIFIED for ch in checks)


def _new_market(costs, found: _Found, mc: bool) -> _Market:
    """One market's record from its drawn-market search."""
    n = costs.size
    ir = _IR.empty(n)
    if not mc:
        ir.add(np.arange(n), found, "market", costs)
    return _Market(
        costs=costs, truth=found.truth.mean(axis=0), top=found.top, bottom=found.bottom,
        best_report=found.best_report.copy(), gain=found.best_gain.copy(),
        gain_se=found.best_se.copy(), gain_tol=found.tol.copy(), tol=found.tol.copy(),
        profile=np.full(n, "market", dtype=object), best_group=np.zeros(n, dtype=int),
        type_gain=found.type_gain.copy(), type_pair=found.type_pair.copy(),
        type_profile=np.full(n, "market", dtype=object), type_tol=found.tol.copy(), ir=ir,
        mono=found.mono, truth_eps=found.truth_eps,
        payments=found.truth.mean(axis=0) + privacy_cost(costs, found.truth_eps),
        groups=[costs], found=found, profile_counts={}, profile_candidates=0.0, skipped=[],
    )  # fmt: skip


def _join(parts: list[_Found]) -> _Found:
    """The chunks of one market as one _Found."""
    if len(parts) == 1:
        parts[0].check = [parts[0].check]
        return parts[0]
    keys = ("sellers", "truth", "truth_eps", "best_report", "best_gain", "best_se", "top",
            "bottom", "type_gain", "type_pair", "mono", "cand_eps", "tol", "scale")  # fmt: skip
    cat = {k: np.concatenate([getattr(p, k) for p in parts], axis=-1 if k == "truth" else 0)
           for k in keys}  # fmt: skip
    out = _Found(**cat)  # type: ignore[arg-type]
    for k in ("rand_gain", "rand_se", "rand_tol", "own_low", "own_at"):
        vals = [getattr(p, k) for p in parts]
        setattr(out, k, None if vals[0] is None else np.concatenate(vals))
    out.violations = [v for p in parts for v in p.violations]
    out.check = [p.check for p in parts]
    out.counts = parts[0].counts
    return out


def _search_profiles(mk: _Market, evaluator, P: _Plan, settings, rng=None, stratum=None) -> None:
    """The opponent profiles: a gain there counts as a gain (ex-post IC is for every
    profile of the others' reports), judged against that profile's tolerance; exact
    evaluations add every own-type utility seen there to the IR evidence.  The interior
    design is searched (exact evaluations: by the sellers without a witness yet)
    coarsely (``_Plan.coarse``), and again in full by the sellers whose coarse gain is
    within reach of their tolerance (over tol / 10)."""
    costs = mk.costs
    total = 0.0
    mc = mk.found.truth.shape[0] > 1
    for kind, sellers, reports in _profile_groups(costs, P, rng, stratum):
        interior = kind in _INTERIOR
        if interior and not mc:  # a seller with an exact witness needs no more profiles
            sellers = sellers[mk.gain[sellers] <= mk.gain_tol[sellers]]
        if sellers.size == 0:
            continue
        values = np.unique(reports)
        if values.size == 1:  # floor, top, tied: one value, tried once
            oth = np.full((sellers.size, 1), values[0])
        else:
            oth = reports[_others(reports, sellers, P.max_others)]
        try:
            bar = mk.gain[sellers] if mc else None
            f = _profile_search(evaluator(reports), sellers, costs, oth, P, settings, interior,
                                bar)  # fmt: skip
        except MarketSimError as err:
            mk.skipped.append(f"{kind}: {err}")
            continue
        mk.profile_counts[kind] = mk.profile_counts.get(kind, 0) + sellers.size
        mk.groups.append(reports)
        for part, who in f:
            total += sum(part.counts.values()) * who.size
            _take_profile(mk, part, who, kind, len(mk.groups) - 1, mc)
    n_pairs = sum(mk.profile_counts.values())
    mk.profile_candidates = total / n_pairs if n_pairs else 0.0


def _profile_search(ev, sellers, costs, oth, P: _Plan, settings, interior: bool, bar=None):
    """One profile's search: [(found, sellers)].  Targeted profiles (exact
    evaluations): every candidate kind with the jump bisection (markets up to
    ``_LARGE``).  Interior ones, and every profile of a Monte Carlo search (it only
    selects what the confirmation draws afresh): the coarse plan, then the full one (no
    bisection) for the sellers within reach (a coarse gain 2 SE above tol / 10); Monte
    Carlo: and whose coarse gain already beats ``bar``, their best gain so far (as
    ``_take_profile`` chooses; a seller whose coarse gain in this profile is below its
    best elsewhere is searched no further here: 9 in 10 of the lottery's full profile
    searches, run on the noise of their 2 draws)."""
    terms = settings["tol_terms"]
    if not interior and not ev.mc:
        rows = None if costs.size <= _LARGE else np.empty(0, dtype=int)
        return [(_search(ev, sellers, costs[sellers], oth, P, P.rows(sellers), None, terms,
                         False, rows), sellers)]  # fmt: skip
    none = np.empty(0, dtype=int)
    Pc = P.coarse()
    f = _search(ev, sellers, costs[sellers], oth, Pc, Pc.rows(sellers), None, terms, False, none)
    near = (f.best_gain - 2.0 * f.best_se > f.tol / 10) | (f.type_gain > f.tol / 10)
    if bar is not None:
        near &= f.best_gain > bar
    if not near.any():
        return [(f, sellers)]
    hot = sellers[near]
    full = _search(ev, hot, costs[hot], oth[near], P, P.rows(hot), None, terms, False, none)
    return [(f, sellers), (full, hot)]


def _take_profile(mk: _Market, f: _Found, sellers, kind: str, g: int, mc: bool) -> None:
    """Keep a profile's results where they exceed their tolerance by more than the
    market's (gains and type gains, each against its own group's tolerance)."""
    better = (f.best_gain > 0) & (f.best_gain - f.tol > mk.gain[sellers] - mk.gain_tol[sellers])
    if mc:  # Monte Carlo: the search only selects; compare the gains
        better = f.best_gain > mk.gain[sellers]
    upd = sellers[better]
    mk.gain[upd], mk.gain_se[upd] = f.best_gain[better], f.best_se[better]
    mk.best_report[upd], mk.profile[upd], mk.best_group[upd] = f.best_report[better], kind, g
    mk.gain_tol[upd] = f.tol[better]
    tb = f.type_gain - f.tol > mk.type_gain[sellers] - mk.type_tol[sellers]
    mk.type_gain[sellers[tb]], mk.type_pair[sellers[tb]] = f.type_gain[tb], f.type_pair[tb]
    mk.type_profile[sellers[tb]], mk.type_tol[sellers[tb]] = kind, f.tol[tb]
    if not mc:  # exact: IR under the profile too
        mk.ir.add(sellers, f, f"others {kind}", mk.costs)
