"""EGTA's simulations: the seatings, the seeds and the population's draws shared by every
market of a sample (common random numbers), one MarketModel run per (profile, sample) on
``market_sim.execution`` (``market_sim.games.egta``'s module doc, "Payoffs").
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..errors import MarketSimError
from ..execution import Job, Shared, run_jobs
from ..parameters import check_int

_RESERVED = ("strategy", "strategic_fraction", "n_sellers", "rounds", "seed", "rng", "agent_out")


# ---- simulation -------------------------------------------------------------------------------


class _Pairs(Mapping):
    """An ordered {strategy: fraction} whose keys need not be hashable (looked up by identity)."""

    def __init__(self, pairs):
        self._pairs = list(pairs)

    def __getitem__(self, key):
        for k, v in self._pairs:
            if k is key:
                return v
        raise KeyError(key)

    def __iter__(self):
        return (k for k, _ in self._pairs)

    def __len__(self):
        return len(self._pairs)


def seat_layout(deviator: int, full, seats: np.ndarray) -> np.ndarray:
    """The strategy of every seat (seller index), the deviator's seat marked -1: role 0
    is the deviator (playing ``deviator``), roles 1..N-1 the others in strategy order
    (``full`` minus the deviator), and role r sits at seat ``seats[r]``."""
    others = np.asarray(full, dtype=np.int64) - np.eye(len(full), dtype=np.int64)[deviator]
    roles = np.r_[-1, np.repeat(np.arange(len(full)), others)]
    layout = np.empty(roles.size, dtype=np.int64)
    layout[np.asarray(seats)] = roles
    return layout


def _runs(layout: np.ndarray) -> list[tuple[int, int]]:
    """(strategy, length) of the runs of equal entries along the seats."""
    cuts = np.flatnonzero(np.diff(layout)) + 1
    starts = np.r_[0, cuts]
    return [
        (int(layout[a]), int(b - a)) for a, b in zip(starts, np.r_[cuts, layout.size], strict=True)
    ]


def _simulate(dev, full, strategies: list, n, mechanism, dist, rounds, last, seed, market, context):
    """The deviator's mean utility per round over the last ``last`` rounds in the market
    of ``full`` seated by :func:`seat_layout` (``market``: this seed's seating, costs and
    data)."""
    from ..agents import MarketModel

    layout = seat_layout(dev, full, market.seats)
    runs = _runs(layout)
    # every run of seats (the deviator a run of its own) gets a fresh copy of its
    # strategy, built once from its spec (a registry look-up per market is slow)
    mix = _Pairs([(copy.deepcopy(strategies[dev if s < 0 else s]), size / n) for s, size in runs])
    # the population itself (per-seller laws, its data), or with data= the one-law form
    who = {"population": market.population} if "data" not in context else {"dist": dist}
    model = MarketModel(
        n,
        **who,
        market=market.drawn,
        mechanism=mechanism,
        strategy=mix,
        rounds=rounds,
        rng=np.random.default_rng(seed),
        **context,
    )
    if [g.ids.size for g in model.groups] != [size for _, size in runs]:  # pragma: no cover
        raise MarketSimError(f"egta: the market did not build the profile {list(full)}")
    seat, total = int(market.seats[0]), 0.0
    first = rounds - last
    while model.running:
        model.step()
        if model.round > first:
            total += float(model.utility[seat])  # 0 when the seller sat the round out
    return total / last


def _check_strategies(strategies) -> tuple[str, ...]:
    """The strategies' names: a spec as given; a BNEResult (``bid_tables``) ``bne``."""
    if isinstance(strategies, str) or not all(
        isinstance(s, str) or callable(getattr(s, "bid_tables", None)) for s in strategies
    ):
        raise MarketSimError("strategies must be a list of strategy specs (strings) or BNEResults")
    strategies = tuple(s if isinstance(s, str) else "bne" for s in strategies)
    if len(strategies) < 2:
        raise MarketSimError(f"egta needs at least 2 strategies to compare (got {len(strategies)})")
    if len(set(strategies)) != len(strategies):
        raise MarketSimError(f"egta: a strategy is listed twice in {list(strategies)}")
    return strategies


def _check_numbers(n_sellers, samples, rounds, players, last_rounds, n_boot, regret_tol):
    n = check_int("n_sellers", n_sellers, 2)
    samples = check_int("samples", samples, 1)
    rounds = check_int("rounds", rounds, 1)
    players = min(check_int("players", players, 2), n)
    last = rounds if last_rounds is None else check_int("last_rounds", last_rounds, 1)
    if last > rounds:
        raise MarketSimError(f"last_rounds ({last}) exceeds rounds ({rounds})")
    n_boot = check_int("n_boot", n_boot, 1)
    if not (isinstance(regret_tol, (int, float)) and regret_tol >= 0):
        raise MarketSimError(f"regret_tol must be a number >= 0 (got {regret_tol!r})")
    return n, samples, rounds, players, last, n_boot


def _build_mechanism(mechanism, pop, dist, context):
    """The mechanism as MarketModel(population=pop) builds it (each seller's own law to
    those that take them), or from the one law ``dist`` with data= from Python."""
    from ..mechanisms.base import as_mechanism, mechanism_name

    bad = sorted(set(context) & set(_RESERVED))
    if bad:
        raise MarketSimError(f"egta sets {', '.join(bad)} itself; do not pass it")
    mech_context = {k: context[k] for k in ("mu", "sigma", "gamma", "privacy") if k in context}
    mech = as_mechanism(mechanism, dist=dist, n_sellers=pop.n_sellers, **mech_context)
    name = mechanism if isinstance(mechanism, str) else mechanism_name(mech)
    if getattr(mech, "needs_data", False) and "data" not in context and not pop.has_data:
        raise MarketSimError(
            f"mechanism {name} needs the sellers' data: give a population with data "
            "(e.g. 20*uniform:1:5;data=synthetic) or data= from Python"
        )
    if "data" not in context:
        mech = as_mechanism(mechanism, population=pop, **mech_context)
    return mech, name


def _seeds(seed, rng, samples: int, n: int):
    """Per-sample seeds of the markets, the bootstrap's seed and the seatings (samples x
    N): a uniform random permutation of the seats per sample, its deviator's seat then
    replaced so that the deviator's seats are spread evenly from a random start,
    start + floor(k N / samples) mod N (every seat equally often when ``samples`` is a
    multiple of N; with fewer samples than seats, every stretch of seats -- a
    population's class is one -- gets its share of them, not a block of consecutive
    seats)."""
    if seed is not None and rng is not None:
        raise MarketSimError("give seed or rng, not both")
    if rng is not None:
        if not isinstance(rng, np.random.Generator):
            raise MarketSimError("rng must be a numpy.random.Generator")
        root = np.random.SeedSequence(int(rng.integers(2**63)))
    else:
        root = np.random.SeedSequence(seed)
    *seeds, boot, seating = root.spawn(samples + 2)
    cost_seeds = root.spawn(samples)
    seat_rng = np.random.default_rng(seating)
    seats = np.array([seat_rng.permutation(n) for _ in range(samples)]).reshape(samples, n)
    dev_seat = (int(seat_rng.integers(n)) + (np.arange(samples) * n) // samples) % n
    for k in range(samples):  # swap the deviator onto its seat
        r = int(np.flatnonzero(seats[k] == dev_seat[k])[0])
        seats[k, [0, r]] = seats[k, [r, 0]]
    return seeds, int(boot.generate_state(1, np.uint64)[0]), seats, cost_seeds


@dataclass(frozen=True)
class _SampleMarket:
    """What sample k shares across its markets: the seating (role r at seat seats[r]) and
    the population's draw (``drawn``: every seat's cost and, with data, its rows)."""

    seats: np.ndarray
    population: Any
    drawn: Any

    @property
    def costs(self) -> np.ndarray:
        return self.drawn.costs

    @property
    def data(self) -> tuple | None:
        """(X, y, X_test, y_test), or None without data."""
        mk = self.drawn
        return None if mk.data is None else (*mk.data, *mk.test)


def _sample_markets(population, seats, cost_seeds) -> list[_SampleMarket]:
    """Per sample, one draw of the population (``pop.sample``) with its own seed."""
    return [
        _SampleMarket(seating, population, population.sample(np.random.default_rng(cs)))
        for seating, cs in zip(seats, cost_seeds, strict=True)
    ]


def _population_of(dist, n_sellers, context):
    """The Population (``as_population``: a cost law needs ``n_sellers``; a population's
    own count wins, a conflicting ``n_sellers`` is an error) and the law the mechanism
    and the model believe in (the pooled law)."""
    from ..population import as_population

    pop = as_population(dist, n_sellers)
    if not pop.is_plain and context.get("new_costs_each_round"):
        raise MarketSimError(
            "new_costs_each_round redraws every cost from one law: with a population of "
            "several classes or with data, each market keeps its draw (leave it out)"
        )
    if pop.has_data and "data" in context:
        raise MarketSimError("give the data through the population or data=, not both")
    return pop, pop.pooled


def _run_markets(dev, full, built, n, mech, dist, rounds, last, seeds, markets, ctx, progress,
                 where):  # fmt: skip
    """sample_payoffs (F x samples): every market under every seed (common random
    numbers: seed k gives every market the same costs and the same seating, so two
    markets with the same others differ in the deviator's strategy alone), one task per
    (profile f, sample k), run where ``where`` says (``market_sim.execution``)."""
    F, K = full.shape[0], len(seeds)
    built, mech, dist, ctx = (Shared(v) for v in (built, mech, dist, ctx))  # one copy a worker
    jobs = [
        Job(f"{f}/{k}", _simulate,
            (int(dev[f]), full[f], built, n, mech, dist, rounds, last, seeds[k], markets[k], ctx))
        for f in range(F)
        for k in range(K)
    ]  # fmt: skip
    Y = run_jobs(jobs, progress="simulations" if progress else False, preload=_PRELOAD, **where)
    return np.array(Y, dtype=float).reshape(F, K)


_PRELOAD = ("market_sim.games.egta_markets", "market_sim.agents")


def _request(mechanism, pop, strategies, samples, seed, rng_state, players, rounds, last,
             context) -> dict:  # fmt: skip
    """What decides an egta's tasks (the store's manifest): a value that is not a plain
    number or string by a digest of its pickle."""
    import hashlib
    import pickle

    from ..mechanisms.base import mechanism_name

    def plain(v):
        if isinstance(v, (int, float, str, bool)) or v is None:
            return v
        try:
            return "pickle-sha256:" + hashlib.sha256(pickle.dumps(v)).hexdigest()[:16]
        except Exception:
            return repr(v)

    return {
        "mechanism": mechanism if isinstance(mechanism, str) else mechanism_name(mechanism),
        "population": pop.spec, "strategies": list(strategies), "samples": samples,
        "seed": seed, "rng_state": rng_state, "players": players, "rounds": rounds,
        "last_rounds": last, "context": {k: plain(v) for k, v in sorted(context.items())},
    }  # fmt: skip
