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

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from ..distributions import as_distribution
from ..errors import MarketSimError
from ..execution import Job, Shared, check_executor, open_store, run_jobs
from ..mechanisms.base import as_mechanism, mechanism_name
from ..parameters import check_int
from ..population import Population, as_population

# The scores and the report live in modules of their own (docs/architecture.md); the names
# the command line, the docs and the tests use stay importable from here.
from .report import FILES as FILES
from .report import CompareResult
from .report import _failed_properties as _failed_properties
from .report import _uncertified_equilibria as _uncertified_equilibria
from .report import _zoom_on_crowd as _zoom_on_crowd
from .report import axis_scale as axis_scale
from .report import plot as plot
from .scores import (
    LEVEL,
    TRUSTED,
    TRUSTED_IR,
    _against_offline,
    _class_summary,
    _draw_markets,
    _leaderboard_row,
    _market_frame,
    _minimises_eq11,
    _paired_rows,
    _rank,
    _report_range,
    _score_markets,
    objective,
    t_interval,
)
from .scores import _paired as _paired

__all__ = ["compare", "CompareResult", "objective", "t_interval", "LEVEL"]


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
    from ..mechanisms.offline import check_params

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
    from .. import auditing

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


def _check_at(at) -> None:
    if at not in AT:
        raise MarketSimError(f"at must be one of {', '.join(AT)} (got {at!r})")


def _trusted(specs, built, labels) -> set[str]:
    """The labels of mechanisms the library proves IC for every report (the classes of
    ``certification.certified_classes``, deterministic), built here from a name: the
    object is the library's own, unmodified (an instance or class the caller passed may
    be modified, and is not trusted)."""
    from ..certification import certified_classes

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
    from ..agents import as_strategy

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
    from ..games.equilibrium import bne

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
