"""A leaderboard of mechanisms on the same markets (docs/compare.md).

``compare(mechanisms, dist, n_sellers, n_markets, rng)`` draws ``n_markets``
markets of ``n_sellers`` truthful costs from ``dist`` once and runs every mechanism
on exactly those markets (common random numbers): the same cost draws, the same
seed per market for a randomized mechanism's outcome, and the same audit
(``market_sim.auditing.audit`` on the given costs, one audit seed for all, so every
mechanism faces the same random misreports).

The objective of a market is Eq. 11 (003) with the payments the mechanism made in
place of the virtual costs::

    objective = mu ||eps||_2 / sum eps + sigma / sum eps + gamma sum_i t_i

(``proxy_loss`` is Eq. 11 itself, with gamma sum_i psi(c_i) eps_i).  For an IC and IR
mechanism Myerson's identity gives E[sum t_i] >= E[sum psi_i eps_i], with equality
when the highest cost is paid nothing, so E[objective] >= E[proxy loss] >= E[the
offline mechanism's proxy loss] = E[the offline mechanism's objective]: the offline
mechanism minimises the expected objective among IC and IR mechanisms (it minimises
Eq. 11 in every market).

A market where nothing is bought (sum eps = 0) has an infinite loss (no data: the
estimate's variance term sigma / sum eps is unbounded).  Such markets are counted
(``n_empty``) and kept: the mean over all markets is then inf, as is its CI; the
finite mean over the other markets is ``objective_mean_bought``.

Statistics (95%): means over markets with Student-t intervals; paired differences
against the baseline, market by market, with the paired t interval.  A market where
both bought nothing adds nothing to a difference (counted in ``n_both_empty``); one
where only one of them did makes the difference +-inf.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from .distributions import as_distribution
from .errors import MarketSimError
from .execution import Job, Shared, check_executor, open_store, run_jobs
from .files import atomic_write, check_writable_folder, json_plain, save_png
from .mechanisms.base import as_mechanism, mechanism_name
from .mechanisms.offline import buyer_loss, proxy_loss_of_eps
from .parameters import check_int
from .population import Population, as_population
from .privacy.limit import weights

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["compare", "CompareResult", "objective", "t_interval", "LEVEL"]

LEVEL = 0.95
FILES = (
    "leaderboard.csv",
    "paired.csv",
    "markets.csv",
    "leaderboard.md",
    "summary.json",
    "compare.png",
)


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


@dataclass(frozen=True)
class CompareResult:
    """``leaderboard``: one row per mechanism and market size; ``paired``: each
    mechanism minus the baseline, market by market; ``markets``: one row per market,
    mechanism and size; ``settings``: what was compared and how."""

    leaderboard: pd.DataFrame
    paired: pd.DataFrame
    markets: pd.DataFrame
    settings: dict

    def write(self, folder) -> Path:
        """DIR/leaderboard.csv, paired.csv, markets.csv, leaderboard.md, summary.json
        and compare.png, each written atomically."""
        out = Path(folder)
        check_writable_folder(out)
        out.mkdir(parents=True, exist_ok=True)
        for name, df in (
            ("leaderboard.csv", self.leaderboard),
            ("paired.csv", self.paired),
            ("markets.csv", self.markets),
        ):
            data = df.to_csv(index=False).encode()
            atomic_write(out / name, lambda fh, data=data: fh.write(data))
        md = ("# " + self.title() + "\n\n" + self.format() + "\n").encode()
        atomic_write(out / "leaderboard.md", lambda fh: fh.write(md))
        doc = json.dumps(json_plain(self.settings), indent=2).encode() + b"\n"
        atomic_write(out / "summary.json", lambda fh: fh.write(doc))
        plot(self, out / "compare.png")
        return out

    def title(self) -> str:
        s = self.settings
        return (
            f"Mechanisms compared on {s['dist']}: {s['n_markets']} markets of "
            f"{', '.join(str(m) for m in s['n_sellers'])} sellers"
        )

    def format(self) -> str:
        """Markdown tables, one per market size, sorted by the mean objective."""
        parts = []
        for m, lb in self.leaderboard.groupby("n_sellers", sort=True):
            parts.append(_table(lb, int(m), self.settings))
            if "classes" in self.settings:
                parts.append(_class_table(lb, self.settings))
        return "\n\n".join(parts)


def _num(v, digits: int = 4) -> str:
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "n/a"
    if isinstance(v, float) and math.isinf(v):
        return "inf" if v > 0 else "-inf"
    return f"{v:.{digits}g}"


def _ci(lo, hi) -> str:
    return f"[{_num(lo)}, {_num(hi)}]"


def _table(lb: pd.DataFrame, m: int, s: dict) -> str:
    eq = s.get("at", "truth") == "equilibrium" or bool(s.get("bids"))
    head = (
        "| rank | mechanism | objective: Eq. 11, payments (95% CI) | minus baseline (95% CI) "
        "| proxy loss "
        "| payment | bought | empty | max gain | IC | IR | IC rank | seconds |"
    )
    if eq:
        head = head.replace(
            "| seconds |", "| played | BNE epsilon | BNE epsilon / u | BNE L | seconds |"
        )
    rows = [head, "|" + "---|" * (17 if eq else 13)]
    for _, r in lb.iterrows():
        ic = _IC_TEXT.get(r["ic"], f"**{r['ic'].replace('_', ' ').upper()}**")
        ir = _IR_TEXT.get(r["ir"], "**NOT IR**")
        diff = (
            "baseline"
            if r["mechanism"] == s["baseline"]
            else f"{_num(r['diff_mean'])} {_ci(r['diff_ci_low'], r['diff_ci_high'])}"
        )
        rank_ic = "" if math.isnan(r["rank_ic"]) else str(int(r["rank_ic"]))
        rows.append(
            f"| {int(r['rank'])} | {r['mechanism']} | {_num(r['objective_mean'])} "
            f"{_ci(r['objective_ci_low'], r['objective_ci_high'])} | {diff} "
            f"| {_num(r['proxy_loss_mean'])} | {_num(r['payment_mean'])} "
            f"| {_num(r['n_bought_mean'], 4)} | {int(r['n_empty'])} | {_num(r['max_gain'], 3)} "
            f"| {ic} | {ir} | {rank_ic} | "
            + (
                f"{r['played']} | {_num(r['bne_epsilon'], 3)} "
                f"| {_num(r.get('bne_epsilon_relative', math.nan), 3)} "
                f"| {_num(r['bne_relative_loss'], 3)} | "
                if eq
                else ""
            )
            + f"{r['seconds']:.2f} |"
        )
    rows.append("")
    rows.append(_theory(lb) if not eq else _theory_at_equilibrium(lb))
    if eq:
        rows += _uncertified_equilibria(lb)
    played = (
        "At equilibrium: a mechanism neither found IC by the audit nor proved IC by the "
        "library ('IC (proof)': offline and online, built from their names, are not "
        "audited) is played at its symmetric BNE (each seller reports b(c)), with the BNE's "
        "epsilon and relative loss L; the IC ones at truth.  "
        if s.get("at", "truth") == "equilibrium"
        else "At truth: every seller reports its cost (at='truth', the default).  "
    ) + (
        f"Given bids: the sellers of {', '.join(s['bids'])} play the given bid functions.  "
        if s.get("bids")
        else ""
    )
    note = played + (
        f"{m} sellers, {s['n_markets']} markets, mu={_num(s['mu'])}, sigma={_num(s['sigma'])}, "
        f"gamma={_num(s['gamma'])}.  Objective, lower is better: Eq. 11 with the payments "
        "made, mu ||eps||_2 / sum(eps) + sigma / sum(eps) + gamma sum(payments) (mean over "
        f"markets, Student-t 95% CI); minus baseline ({s['baseline']}): paired t 95% CI "
        "over the same markets; proxy loss: Eq. 11 with the virtual costs in place of the "
        "payments; payment: total paid per market; bought: sellers bought per market; "
        "empty: markets where nothing was bought; max gain: the audit's largest gain of a "
        "misreport; IC / IR: the audit's verdicts on the same markets (bold: flagged); "
        "IC rank: rank among the mechanisms audited (or proved) IC and IR; seconds: its runs "
        "and its audit on these markets."
    )
    return note + "\n\n" + "\n".join(rows).rstrip()


def _class_table(lb: pd.DataFrame, s: dict) -> str:
    """Per class (a population's): each mechanism's part of the objective (its share of
    the eps bought times the data terms, plus gamma times its payments; the parts add
    up to the objective), its payments and the number bought, means over the markets."""
    rows = [
        "| mechanism | class | objective part (95% CI) | payment | bought |",
        "|---|---|---|---|---|",
    ]
    for _, r in lb.iterrows():
        for j, cls in enumerate(s["classes"]):
            rows.append(
                f"| {r['mechanism']} | {j}: {cls} | {_num(r[f'class{j}_objective_mean'])} "
                f"{_ci(r[f'class{j}_objective_ci_low'], r[f'class{j}_objective_ci_high'])} "
                f"| {_num(r[f'class{j}_payment_mean'])} | {_num(r[f'class{j}_n_bought_mean'])} |"
            )
    note = f"By class of {s['population']}: means over the same markets."
    return note + "\n\n" + "\n".join(rows)


def _theory(lb: pd.DataFrame) -> str:
    """The check of the theory on this table: the offline mechanism (if compared) should
    rank first among the mechanisms audited IC and IR."""
    off = lb[lb["eq11_minimiser"]]
    if off.empty:
        return "Theory check: no offline mechanism with these weights is compared."
    r = off.iloc[0]
    if r["ic"] == "not_audited":
        return "Theory check: needs the audits (the IC rank is only known with them)."
    n_ic = int(lb["rank_ic"].notna().sum())
    if math.isnan(r["rank_ic"]):
        return f"Theory check: {r['mechanism']} was not audited IC and IR here."
    if r["rank_ic"] == 1:
        return (
            f"Theory check: {r['mechanism']} ranks first of the {n_ic} mechanisms audited "
            "IC and IR, as it should (least expected objective among IC and IR mechanisms)."
        )
    ahead = lb[(lb["rank_ic"] < r["rank_ic"])]["mechanism"].tolist()
    return (
        f"Theory check: {r['mechanism']} ranks {int(r['rank_ic'])} of {n_ic} among the "
        f"mechanisms audited IC and IR, behind {', '.join(ahead)}: in expectation it cannot "
        "be beaten, so this is sampling noise (see the paired intervals) or a mechanism "
        "the audit could not show manipulable."
    )


def _uncertified_equilibria(lb: pd.DataFrame) -> list[str]:
    """One warning line per mechanism played at a BNE the solver did not certify."""
    if "bne_converged" not in lb:
        return []
    out = []
    for _, r in lb.iterrows():
        converged = r["bne_converged"]
        if r["played"] == "equilibrium" and converged is not None and not bool(converged):
            out.append(
                f"Warning: {r['mechanism']}'s BNE is not certified (verified epsilon / "
                f"utility {_num(r['bne_epsilon_relative'], 3)} > the solver's tolerance): its "
                "row is an approximate equilibrium (docs/equilibrium.md)."
            )
    return out


def _theory_at_equilibrium(lb: pd.DataFrame) -> str:
    """The revelation principle on this table: the offline mechanism minimises the
    expected objective among Bayes-IC, interim-IR mechanisms, and every mechanism's BNE
    is one of those (play it for the sellers), so no mechanism's equilibrium objective
    should be significantly below offline's (paired interval entirely below 0)."""
    off = lb[lb["eq11_minimiser"]]
    if off.empty:
        return "Theory check: no offline mechanism with these weights is compared."
    name = off.iloc[0]["mechanism"]
    below = lb[lb["minus_offline_ci_high"] < 0]["mechanism"].tolist()
    if below:
        return (
            f"Theory check: {', '.join(below)} significantly below {name} at equilibrium: "
            "the revelation principle says this cannot be in expectation (an inexact "
            "equilibrium, see its epsilon, or sampling noise)."
        )
    first = f"{name} ranks first and n" if off.iloc[0]["rank"] == 1 else "N"
    return (
        f"Theory check: {first}o mechanism's equilibrium objective is significantly below "
        f"{name}'s, as the revelation principle says."
    )


def _label(spec, mech) -> str:
    """A short name: the spec as given; for ``path/file.py:Class[:k=v]`` the part after
    the file; else the mechanism's name."""
    if isinstance(spec, str):
        if ".py:" in spec:
            return spec.split(".py:", 1)[1]
        if "/" not in spec and not spec.endswith(".py"):
            return spec
    return mechanism_name(mech)


def _sizes(n_sellers) -> list[int]:
    if isinstance(n_sellers, Sequence) and not isinstance(n_sellers, str):
        sizes = [check_int("n_sellers", v, 1) for v in n_sellers]
        if not sizes:
            raise MarketSimError("n_sellers: give at least one market size")
    else:
        sizes = [check_int("n_sellers", n_sellers, 1)]
    if len(set(sizes)) != len(sizes):
        raise MarketSimError(f"n_sellers: a market size is given twice ({sizes})")
    return sorted(sizes)


def compare(
    mechanisms,
    dist,
    n_sellers=None,
    n_markets: int | None = None,
    rng: np.random.Generator | int | None = None,
    *,
    baseline: str | None = None,
    mu: float = 1.0,
    sigma: float = 1.0,
    gamma: float = 1.0,
    privacy: float = 1.0,
    audit: bool | str | Sequence[str] = True,
    n_grid: int = 33,
    n_random: int = 32,
    refine: bool = True,
    refine_iter: int = 8,
    at: str = "truth",
    bne_options: dict | None = None,
    bids: dict | None = None,
    progress: bool = False,
    workers: int = 1,
    executor: str = "local",
    address: str | None = None,
    store=None,
) -> CompareResult:
    """Run ``mechanisms`` (names, ``name:key=value`` specs, ``path/file.py:Class``,
    classes or instances; at least two) on the same ``n_markets`` markets and audit each
    on them (``audit=False`` skips it, a label or list of labels audits those only; at
    ``at="equilibrium"`` ``audit=True`` skips the mechanisms the library proves IC, built
    from their names, whose ic column then says so; ``n_grid``, ``n_random``, ``refine``,
    ``refine_iter`` are the audit's search settings).  The markets are drawn with
    ``rng`` (a Generator or a seed) from ``dist``: a
    :class:`~market_sim.population.Population` (or its spec; ``n_sellers`` then omitted
    or equal to its size), or a cost law with ``n_sellers`` sellers (an int or a list
    of sizes).  With a population every mechanism sees the same costs and data, and
    the results are also given per class.  ``baseline`` (a mechanism's label, default
    the first) is what the paired differences are taken against.  ``bids`` ({mechanism
    label: a BNEResult or ``bne:DIR/bid.csv``}): those mechanisms' sellers play the given
    bid functions (each seller its class's) instead of the truth or a solved equilibrium.
    ``workers``, ``executor``, ``address``: where the tasks run (every market's audit of
    every mechanism, then every mechanism's scores; ``market_sim.execution``: the same
    result on any of them); ``store``: a folder where each finished task is kept, so that
    the same call resumes (another call into it is refused).  See the module doc for the
    objective and the statistics."""
    from .mechanisms.offline import check_params

    check_executor(workers, executor, address)
    start_state = rng.bit_generator.state if isinstance(rng, np.random.Generator) else None
    seed, rng = _generator(rng)
    n_markets = check_int("n_markets", n_markets, 2)
    check_params(mu, sigma, gamma)
    _check_at(at)
    populations = _populations(dist, n_sellers)
    ctx = dict(mu=mu, sigma=sigma, gamma=gamma, privacy=privacy)
    specs, built, labels = _build_mechanisms(mechanisms, populations, ctx)
    baseline = _check_baseline(baseline, labels)
    trusted = _trusted(specs, built, labels)
    audited = _audited(audit, labels, trusted, at)
    given = _given_bids(bids, labels)
    search = dict(n_grid=n_grid, n_random=n_random, refine=refine, refine_iter=refine_iter)
    settings = _settings(labels, specs, populations, n_markets, baseline, ctx,
                         (audited, trusted), search, seed, (at, bne_options, bids))  # fmt: skip
    where: dict[str, Any] = dict(
        workers=workers, executor=executor, address=address, preload=_PRELOAD
    )
    if store is not None:
        store = open_store(store, "compare", {**settings, "rng_state": start_state})
    drawn = {m: _draw_markets(pop, n_markets, rng) for m, pop in populations.items()}
    bne_seeds = {m: int(rng.integers(2**63)) if at == "equilibrium" else 0 for m in populations}
    arms = _arms(populations, labels, built)
    verdicts = _audit_arms(arms, drawn, populations, search, (audited, trusted), where, store,
                           progress)  # fmt: skip
    played = _score_arms(arms, drawn, populations, verdicts, at, bne_seeds, bne_options, ctx,
                         given, where, store, progress)  # fmt: skip
    rows, paired_rows, market_rows = _tables(arms, played, verdicts, populations, labels,
                                             baseline, ctx, n_markets)  # fmt: skip
    return _result(rows, paired_rows, market_rows, baseline, settings)


_PRELOAD = ("market_sim.comparison", "market_sim.auditing")


def _score_arms(arms, drawn, populations, verdicts, at, bne_seeds, bne_options, ctx, given,
                where, store, progress) -> list:  # fmt: skip
    """[((scores, play columns), seconds)] of every (size, label, mechanism) arm: one task
    each on the executor, the markets and population shared once per worker."""
    shared = {m: (Shared(drawn[m]), Shared(populations[m])) for m in populations}
    jobs = [Job(f"{m}/{label}/score", _score_arm, (mech, *shared[m],
                verdicts[m, label]["ic"], at, bne_seeds[m], bne_options, ctx,
                given.get(label)))
            for m, label, mech in arms]  # fmt: skip
    seconds: list[float] = []
    played = run_jobs(jobs, store=store, progress="scores" if progress else False,
                      seconds=seconds, **where)  # fmt: skip
    return list(zip(played, seconds, strict=True))


def _tables(arms, played, verdicts, populations, labels, baseline, ctx, n_markets):
    """(leaderboard rows, paired rows, market frames) from the arms' scores and verdicts."""
    mu, sigma, gamma = ctx["mu"], ctx["sigma"], ctx["gamma"]
    rows, market_rows, paired_rows = [], [], []
    per: dict[int, dict[str, dict]] = {m: {} for m in populations}
    for (m, label, mech), ((scores, play), t) in zip(arms, played, strict=True):
        per[m][label] = scores
        market_rows.append(_market_frame(m, label, scores))
        row = _leaderboard_row(m, label, scores, gamma, n_markets)
        row.update(verdicts[m, label], seconds=t + verdicts[m, label].pop("_seconds", 0.0))
        row.update(play)
        row["eq11_minimiser"] = _minimises_eq11(mech, mu, sigma, gamma)
        row.update(_class_summary(scores))
        rows.append(row)
    for m in populations:
        paired_rows += _paired_rows(m, per[m], labels, baseline)
        _against_offline(rows, per[m], m)
    return rows, paired_rows, market_rows


def _audit_arms(arms, drawn, populations, search, which, where, store, progress) -> dict:
    """{(m, label): verdicts} of every mechanism on the markets of its size: the audits'
    markets, all of them one task each, on the executor (a data-needing mechanism with
    each market's data).  ``which`` = (audited labels, trusted labels): a mechanism not
    audited gets the library's proof if trusted, else the not-audited verdicts.
    ``_seconds``: the audit's time."""
    from . import auditing

    audited, trusted = which
    proof = dict(_NOT_AUDITED, ic=TRUSTED, ir=TRUSTED_IR)
    out = {(m, label): dict(proof if label in trusted else _NOT_AUDITED) for m, label, _ in arms}
    works = {}
    for m, label, mech in arms:
        if label not in audited:
            continue
        mk, pop = drawn[m], populations[m]
        K, n = mk.costs.shape
        settings = auditing.audit_settings(**search)
        data = mk.data if getattr(mech, "needs_data", False) else None
        works[m, label] = auditing.audit_work(
            mech, _report_range(pop), n, K, np.random.default_rng(mk.audit_seed),
            settings=settings, costs=mk.costs, data=data,
        )  # fmt: skip
    jobs = [job for (m, label), w in works.items() for job in w.jobs(f"{m}/{label}/")]
    seconds: list[float] = []
    found = iter(run_jobs(jobs, store=store, progress="audits" if progress else False,
                          seconds=seconds, **where))  # fmt: skip
    times = iter(seconds)
    for key, w in works.items():
        K = len(w.costs)
        markets = [next(found) for _ in range(K)]
        s = w.finish(markets).summary
        out[key] = dict(
            max_gain=s["max_gain"], ir_violations=s["ir_violations"], ic=s["verdict"],
            ir=s["ir_verdict"], _seconds=sum(next(times) for _ in range(K)),
        )  # fmt: skip
    return out


def _score_arm(mech, markets, pop, ic, at, bne_seed, bne_options, ctx, given=None):
    """Task: how the sellers play this mechanism (``given``: a bid function to play) and
    its scores on the markets."""
    play = _play(mech, pop, ic, at, bne_seed, bne_options, ctx, given)
    scores = _score_markets(mech, markets, pop, ctx["mu"], ctx["sigma"], ctx["gamma"],
                            play["bne"])  # fmt: skip
    return scores, _play_columns(play)


# ---- the steps of compare ---------------------------------------------------------------
AT = ("truth", "equilibrium")


# The ic and ir columns of a mechanism the library proves IC and IR, not audited here.
TRUSTED, TRUSTED_IR = "ic (library proof)", "ir (library proof)"
# How the table prints a verdict (anything else is a flagged one, in bold)
_IC_TEXT = {"ic": "IC", "not_audited": "not audited", TRUSTED: "IC (proof)"}
_IR_TEXT = {"ir": "IR", "not_audited": "n/a", TRUSTED_IR: "IR (proof)"}


def _check_at(at) -> None:
    if at not in AT:
        raise MarketSimError(f"at must be one of {', '.join(AT)} (got {at!r})")


def _trusted(specs, built, labels) -> set[str]:
    """The labels of mechanisms the library proves IC for every report (the classes of
    ``certification.certified_classes``, deterministic), built here from a name: the
    object is the library's own, unmodified (an instance or class the caller passed may
    be modified, and is not trusted)."""
    from .certification import certified_classes

    first = next(iter(built.values()))
    return {
        label
        for spec, mech, label in zip(specs, first, labels, strict=True)
        if isinstance(spec, str)
        and type(mech) in certified_classes()
        and not getattr(mech, "randomized", False)
    }


def _audited(audit, labels, trusted: set[str], at: str) -> set[str]:
    """Which mechanisms to audit: ``audit`` True (all; at equilibrium all but the trusted,
    whose verdict the library proves), False (none) or the labels to audit."""
    if audit is True:
        return set(labels) - trusted if at == "equilibrium" else set(labels)
    if audit is False or audit is None:
        return set()
    chosen = [audit] if isinstance(audit, str) else list(audit)
    unknown = [a for a in chosen if a not in labels]
    if unknown:
        raise MarketSimError(
            f"audit: {unknown[0]!r} is not one of the mechanisms compared ({', '.join(labels)})"
        )
    return set(chosen)


def _given_bids(bids, labels) -> dict:
    """``bids`` ({mechanism label: a BNEResult or ``bne:DIR/bid.csv``}) as the ``bne``
    strategy, each checked (a label among the mechanisms', a bid function)."""
    from .agents import as_strategy

    out = {}
    for label, spec in (bids or {}).items():
        if label not in labels:
            raise MarketSimError(f"bids: {label!r} is not a mechanism here ({', '.join(labels)})")
        strategy = as_strategy(spec)
        if not callable(getattr(strategy, "bid", None)):
            raise MarketSimError(
                f"bids: {label}: give a bid function (a BNEResult or bne:DIR/bid.csv), not {spec!r}"
            )
        out[label] = strategy
    return out


def _play(mech, pop: Population, ic, at, bne_seed, bne_options, ctx, given=None) -> dict:
    """How the sellers play: a ``given`` bid function, the truth, or (``at="equilibrium"``
    and not audited IC) the Bayes-Nash equilibrium of the mechanism for the population's
    classes, one solve seed for all mechanisms."""
    if given is not None:
        return {"played": "given bids", "bne": given}
    if at == "truth" or ic in ("ic", TRUSTED):
        return {"played": "truth", "bne": None}
    from .games.equilibrium import bne

    context = {k: ctx[k] for k in ("mu", "sigma", "gamma", "privacy")}
    # the pure method unless asked (its numbers are the ones docs/compare.md shows)
    kw = {"method": "pure", **context, **(bne_options or {})}
    r = bne(mech, pop, np.random.default_rng(bne_seed), **kw)
    return {"played": "equilibrium", "bne": r}


def _play_columns(play) -> dict:
    r = play["bne"] if play["played"] == "equilibrium" else None  # given bids: not verified
    return {
        "played": play["played"],
        "bne_epsilon": math.nan if r is None else r.epsilon,
        "bne_epsilon_ci_high": math.nan if r is None else r.epsilon_ci[1],
        "bne_relative_loss": math.nan if r is None else r.relative_loss,
        "bne_epsilon_relative": math.nan if r is None else r.epsilon_relative,
        "bne_converged": None if r is None else bool(r.converged),
    }


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


_NOT_AUDITED: dict[str, object] = dict(
    max_gain=math.nan, ir_violations=math.nan, ic="not_audited", ir="not_audited"
)


def _generator(rng) -> tuple[int | None, np.random.Generator]:
    """(the seed if ``rng`` is one, the Generator)."""
    if isinstance(rng, (int, np.integer)) and not isinstance(rng, bool):
        return int(rng), np.random.default_rng(int(rng))
    if not isinstance(rng, np.random.Generator):
        raise MarketSimError("rng must be a numpy.random.Generator or an integer seed")
    return None, rng


def _populations(dist, n_sellers) -> dict[int, Population]:
    """{market size: its population}: the population itself, or the cost law ``dist``
    with each size of ``n_sellers`` (one class, no data)."""
    if isinstance(dist, Population) or (isinstance(dist, str) and "*" in dist):
        size = None
        if n_sellers is not None:
            sizes = _sizes(n_sellers)
            if len(sizes) > 1:
                raise MarketSimError("a population has one size: give one n_sellers or none")
            size = sizes[0]
        pop = as_population(dist, size)
        return {pop.n_sellers: pop}
    if n_sellers is None:
        raise MarketSimError("a cost law needs n_sellers (or give a population)")
    law = as_distribution(dist)
    return {m: as_population(law, m) for m in _sizes(n_sellers)}


def _build_mechanisms(mechanisms, populations, ctx):
    """(specs, {size: mechanisms}, labels): every mechanism of each size built from its
    population and checked before any work."""
    specs = list(mechanisms) if not isinstance(mechanisms, str) else [mechanisms]
    if len(specs) < 2:
        raise MarketSimError(f"compare needs at least two mechanisms (got {len(specs)})")
    built = {
        m: [as_mechanism(s, population=pop, **ctx) for s in specs] for m, pop in populations.items()
    }
    first = next(iter(built.values()))
    labels = [_label(s, mech) for s, mech in zip(specs, first, strict=True)]
    seen = set()
    for label in labels:
        if label in seen:
            raise MarketSimError(f"mechanism {label!r} is given twice")
        seen.add(label)
    return specs, built, labels


def _check_baseline(baseline, labels) -> str:
    if baseline is None:
        return labels[0]
    if baseline not in labels:
        raise MarketSimError(
            f"baseline {baseline!r} is not among the mechanisms compared ({', '.join(labels)})"
        )
    return baseline


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


def _arms(populations, labels, built):
    """(size, label, mechanism) for every market size and every mechanism."""
    return [
        (m, label, mech) for m in populations for label, mech in zip(labels, built[m], strict=True)
    ]


def _settings(labels, specs, populations, n_markets, baseline, ctx, which, search, seed, play):
    """The settings recorded with the result; ``which`` = (audited labels, trusted labels),
    ``play`` = (at, bne_options, bids)."""
    audited, trusted = which
    at, bne_options, bids = play
    pops = list(populations.values())
    one = pops[0]
    plain = all(p.is_plain for p in pops)
    settings = {
        "mechanisms": labels,
        "specs": [s if isinstance(s, str) else mechanism_name(s) for s in specs],
        "dist": one.laws[0].spec if plain else one.spec,
        "n_sellers": list(populations),
        "n_markets": n_markets,
        "baseline": baseline,
        **ctx,
        "audit": bool(audited),
        "audited": sorted(audited),
        "trusted": sorted(trusted),
        "audit_search": dict(search),
        "confidence": LEVEL,
        "ci_method": "Student t over markets; paired t for differences",
        "seed": seed,  # an integer rng; the CLI records its --seed here
    }
    if not plain:
        settings["population"] = one.spec
    if one.n_classes > 1:
        settings["classes"] = [f"{c.count}*{c.law.spec}" for c in one.classes]
    settings |= {"at": at, "bne_options": dict(bne_options or {})}
    settings["bids"] = {
        k: v if isinstance(v, str) else type(v).__name__ for k, v in (bids or {}).items()
    }
    return settings


def _result(rows, paired_rows, market_rows, baseline, settings) -> CompareResult:
    import pandas as pd

    lb = pd.DataFrame(rows)
    paired = pd.DataFrame(paired_rows)
    lb = lb.merge(
        paired[
            [
                "n_sellers",
                "mechanism",
                "objective_diff_mean",
                "objective_diff_ci_low",
                "objective_diff_ci_high",
            ]
        ].rename(  # fmt: skip
            columns=lambda c: c.replace("objective_diff", "diff")
        ),
        on=["n_sellers", "mechanism"],
    )
    lb = _rank(lb)
    paired = paired[paired["mechanism"] != baseline].reset_index(drop=True)
    return CompareResult(lb, paired, pd.concat(market_rows, ignore_index=True), settings)


def _minimises_eq11(mech, mu, sigma, gamma) -> bool:
    """The offline mechanism with these weights and no cap: it solves Eq. 11 (003) in
    every market and pays Myerson's payments, so it is the theory's minimiser."""
    from .mechanisms.builtin import OfflineMechanism

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


def plot(result: CompareResult, path) -> None:
    """The loss-payment plane: the data terms of Eq. 11 (mu ||eps|| / sum eps + sigma /
    sum eps) against the payment, 95% CI bars, open markers for mechanisms not audited
    IC and IR, and the line of the baseline's objective (loss + gamma payment = const:
    below it is better); with several market sizes, also the objective against m."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    lb = result.leaderboard
    gamma = float(result.settings["gamma"])
    sizes = sorted(lb["n_sellers"].unique())
    many = len(sizes) > 1
    fig, axes = plt.subplots(1, 2 if many else 1, figsize=(13 if many else 8, 5.5), squeeze=False)
    ax = axes[0, 0]
    tab = [plt.get_cmap("tab20")(i) for i in range(20)]
    colors = tab[::2] + tab[1::2]  # 20 distinct: the strong ten, then the light ten
    markers = "osD^vP*Xh<>p"
    drawn = []  # (x, y, xerr, yerr, style) of the plane's points, for the inset
    for j, name in enumerate(result.settings["mechanisms"]):
        d = lb[lb["mechanism"] == name].sort_values("n_sellers")
        d = d[np.isfinite(d["objective_mean"])]
        if d.empty:
            continue
        col, mk = colors[j % len(colors)], markers[j % len(markers)]
        flag = _failed_properties(d["ic"], d["ir"])
        good = not flag
        x, y = d["payment_mean"].to_numpy(), d["data_loss_mean"].to_numpy()
        style: dict = dict(color=col, marker=mk, mfc=col if good else "white", capsize=3, ms=7)
        xerr = _err(x, d["payment_ci_low"], d["payment_ci_high"])
        yerr = _err(y, d["data_loss_ci_low"], d["data_loss_ci_high"])
        ax.errorbar(x, y, xerr=xerr, yerr=yerr, ls="-" if many else "none",
                    label=name + (f" ({flag})" if flag else ""), **style)  # fmt: skip
        drawn.append((x, y, xerr, yerr, dict(style, ls="-" if many else "none")))
        if many:
            yo = d["objective_mean"].to_numpy()
            axes[0, 1].errorbar(
                d["n_sellers"], yo, yerr=_err(yo, d["objective_ci_low"], d["objective_ci_high"]),
                ls="-", label=name, **style,
            )  # fmt: skip
    vals = lb[np.isfinite(lb["objective_mean"])]
    for axis, column in (("x", "payment_mean"), ("y", "data_loss_mean")):
        scale = axis_scale(vals[column].to_numpy())
        if scale == "symlog":
            positive = vals[column][vals[column] > 0]
            getattr(ax, f"set_{axis}scale")("symlog", linthresh=float(positive.min()))
        elif scale == "log":
            getattr(ax, f"set_{axis}scale")("log")
    base = lb[(lb["mechanism"] == result.settings["baseline"]) & (lb["n_sellers"] == sizes[-1])]
    if len(base) and np.isfinite(base["objective_mean"].iloc[0]):
        level = float(base["objective_mean"].iloc[0])
        (x0, x1), (y0, y1) = ax.get_xlim(), ax.get_ylim()
        xs = np.geomspace(max(x0, 1e-12), x1, 200) if ax.get_xscale() == "log" else None
        xs = np.linspace(x0, x1, 200) if xs is None else xs
        ys = level - gamma * xs
        keep = ys > 0
        ax.plot(xs[keep], ys[keep], ":", color="grey", lw=1,
                label=f"objective of {result.settings['baseline']}")  # fmt: skip
        ax.set_xlim(x0, x1)
        ax.set_ylim(y0, y1)
    _zoom_on_crowd(ax, drawn)
    ax.set(
        xlabel="mean total payment per market",
        ylabel="mean data loss (mu ||eps|| / sum eps + sigma / sum eps)",
        title="loss-payment plane" + (f" (m = {sizes[-1]} on the line)" if many else ""),
    )
    ax.legend(fontsize=7, loc="center left", bbox_to_anchor=(1.01, 0.5))
    if many:
        axes[0, 1].set(xlabel="sellers per market (m)", ylabel="mean objective", xscale="log")
        axes[0, 1].set_title("objective against m")
        axes[0, 1].set_xticks(sizes, [str(m) for m in sizes])
        axes[0, 1].minorticks_off()
    fig.suptitle(result.title(), fontsize=10)
    fig.tight_layout()
    save_png(fig, path, dpi=90)


def _zoom_on_crowd(ax, drawn, crowd: float = 0.1, least: int = 3) -> None:
    """An inset that magnifies the crowd of the loss-payment plane: when ``least`` or more
    points sit within a box of ``crowd`` x the axes around their median (one mechanism
    far off squashes the others even on log axes), redraw them in an empty corner."""
    if not drawn:
        return
    ax.autoscale_view()
    pts = np.vstack([np.column_stack([x, y]) for x, y, *_ in drawn])
    frac = ax.transAxes.inverted().transform(ax.transData.transform(pts))
    centre = np.median(frac, axis=0)
    near = np.all(np.abs(frac - centre) <= crowd / 2, axis=1)
    if near.sum() < least or near.all():
        return
    corners = [(0.56, 0.54), (0.04, 0.54), (0.56, 0.06), (0.04, 0.06)]
    free = [c for c in corners
            if not np.any(np.all((frac >= np.array(c) - 0.02) & (frac <= np.array(c) + 0.44),
                                 axis=1))]  # fmt: skip
    if not free:
        return
    inset = ax.inset_axes([*free[0], 0.4, 0.4])  # linear: the crowd spans little
    k = 0
    for x, y, xerr, yerr, style in drawn:
        keep = near[k : k + len(x)]
        k += len(x)
        if keep.any():
            inset.errorbar(x[keep], y[keep], xerr=xerr[:, keep], yerr=yerr[:, keep], **style)
    inset.tick_params(labelsize=6)
    inset.locator_params(nbins=4)
    ax.indicate_inset_zoom(inset, edgecolor="0.5")


def _failed_properties(ic, ir) -> str:
    """What the legend says of a mechanism's audit: "" (IC and IR), "not IC", "not IR",
    "not IC/IR", "IC inconclusive", "IR inconclusive" or "not audited"."""
    ic = {"ic" if v == TRUSTED else v for v in ic}
    ir = {"ir" if v == TRUSTED_IR else v for v in ir}
    if "not_audited" in ic:
        return "not audited"
    failed = [p for p, seen in (("IC", ic), ("IR", ir)) if f"not_{p.lower()}" in seen]
    if failed:
        return "not " + "/".join(failed)
    unsure = [p for p, seen in (("IC", ic), ("IR", ir)) if seen - {p.lower()}]
    return " and ".join(unsure) + " inconclusive" if unsure else ""


def axis_scale(values) -> str:
    """ "log" when the positive values span more than a factor of 20, or when all but
    one of them crowd into a tenth of the range (an outlier squashes the others into a
    corner of a linear axis); "symlog" for the same with a value <= 0 (0 stays on the
    axis); else "linear"."""
    v = np.sort(np.asarray(values, dtype=float)[np.isfinite(values)])
    if v.size < 2 or v[-1] <= v[0]:
        return "linear"
    span = v[-1] - v[0]
    crowded = v.size >= 3 and min(v[-2] - v[0], v[-1] - v[1]) < 0.1 * span
    if v[0] > 0:
        return "log" if v[-1] > 20 * v[0] or (crowded and v[-1] > 3 * v[0]) else "linear"
    positive = v[v > 0]
    if positive.size and crowded and v[-1] > 20 * positive[0]:
        return "symlog"
    return "linear"


def _err(v, lo, hi) -> np.ndarray | None:
    """Asymmetric error bars from CI bounds (none where a bound is missing)."""
    lo, hi = np.asarray(lo, dtype=float), np.asarray(hi, dtype=float)
    e = np.vstack([v - lo, hi - v])
    return np.where(np.isfinite(e), e, 0.0)
