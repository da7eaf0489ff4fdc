"""Empirical game-theoretic analysis (EGTA) of strategies in a MarketModel market.

``egta(mechanism, dist, n_sellers, strategies, samples, seed=...)`` treats a list
of strategy specs as the pure strategies of a symmetric *meta-game*: every one of
the ``n_sellers`` sellers of a :class:`~market_sim.agents.MarketModel` market picks
one of them, and its payoff is its mean utility ``t_i - c_i eps_i``.  The payoff
table is estimated from seeded simulations and the meta-game's equilibria
(population shares) are found with replicator dynamics.

**Reduction.**  The full game has C(N + S - 1, S - 1) profiles.  A
deviation-preserving reduction (DPR; Wiedenbeck & Wellman 2012) keeps
``players`` = n reduced players: the payoff of strategy s in reduced profile
``p`` (counts summing to n) is its payoff in the full N-seller profile where one
seller plays s and the other N - 1 are split as o* = (p - e_s) (N - 1)/(n - 1).
When o* is not integer (e.g. N = 20, n = 4: 19/3 sellers per reduced player) the
payoff is interpolated: o* is a convex combination of integer splits of N - 1
(:func:`dpr_support`), each simulated, and their payoffs are averaged with its
weights.  A payoff linear in the others' counts is then reproduced exactly, as with
an integer ratio (``reduction`` says which: ``exact`` or ``interpolated``).
``players = n_sellers`` is the full game.

**Payoffs (a paired design, every seat).**  The reduced player whose payoff is
wanted is the *deviator*, a group of its own; the other N - 1 sellers are roles in a
fixed strategy order.  Sample k draws a seating (a random permutation of the seller
indices, the deviator's seat running through a random start + k mod N) and a seed,
and uses both in every market (common random numbers: the same seats, the same cost
draws, the same deviator's seat).  Two markets that share the others therefore
differ in the deviator's strategy alone, and every payoff difference that regret and
replicator dynamics use (u_s - u_t against the same others) is a paired comparison.
No seat is favoured by mechanisms that break ties by index: over the samples the
deviator sits in every seat equally often (exactly, when ``samples`` is a multiple
of N) and the others in a uniformly random order.  The payoff of s in a sample is
the deviator's mean utility per round over the last ``last_rounds`` rounds (default:
all ``rounds``; 0 in a round it sat out); the table entry is its mean over the
samples.  Strategies are per-seller policies: a group strategy (``collusion``)
coordinates only the sellers of one run of adjacent seats.

**Equilibria.**  Discrete replicator dynamics
x_s <- x_s f_s(x) / sum_t x_t f_t(x), with f = 1 + (u - u_min)/(u_max - u_min)
(the payoff table rescaled to [1, 2]; the fixed points are those of the
continuous dynamics dx_s/dt = x_s (u_s(x) - x.u(x))), from the centre, from
the neighbourhood of every vertex and from the midpoints of every edge; the
pure profiles are checked too.  u_s(x) is the expected reduced-game payoff of s
when the other n - 1 players draw from x (multinomial).  A mixture's regret is
max_s u_s(x) - sum_s x_s u_s(x) (>= 0; 0 exactly at a Nash equilibrium).
Candidates with regret <= ``regret_tol`` x (payoff range) are kept and
deduplicated; when none qualifies the least-regret one is reported.

**Regret intervals.**  The seed is the unit: each seed's markets give a payoff table
of their own, and the estimate is their mean.  For a fixed mixture x the gains
G_s(x) = u_s(x) - x.u(x) are linear in the table, so their noise is a mean over seeds;
its law is drawn by a Gaussian multiplier bootstrap over the seeds (with a common
chi-square scale: each studentized coordinate is then t with samples - 1 degrees of
freedom, :func:`gain_noise`).  An estimated equilibrium's interval is one-sided,
[0, q] (:func:`regret_upper_bounds`): a band for max_s G_s(x) uniform over the simplex,
so it holds for a mixture chosen from the data.  ``regret_test(mixture)`` of a mixture
fixed in advance tests "it is an equilibrium" (regret 0) with the max-t statistic and
bounds its regret; ``regret_ci(mixture)`` is the two-sided interval from its bounds
(:func:`regret_test`; docs/egta.md has the proofs and the coverage table).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import replace

import numpy as np

from ..execution import check_executor, open_store

# The meta-game, its equilibria, regret intervals, results and simulations live in
# modules of their own (docs/architecture.md); their names stay importable from here.
from .egta_markets import (
    _build_mechanism,
    _check_numbers,
    _check_strategies,
    _population_of,
    _request,
    _run_markets,
    _sample_markets,
    _seeds,
    seat_layout,
)
from .egta_markets import _Pairs as _Pairs
from .egta_markets import _runs as _runs
from .egta_result import EgtaResult, Equilibrium, _reduce
from .egta_result import plot as plot
from .regret_bounds import (
    GainNoise,
    RegretTest,
    equilibrium_regret_bounds,
    gain_noise,
    gains,
    regret_test,
    regret_upper_bounds,
    simplex_grid,
)
from .regret_bounds import _table_regrets as _table_regrets
from .replicator import find_equilibria, replicator_dynamics
from .symmetric_game import (
    SymmetricGame,
    _dpr_plan,
    dpr_exact,
    dpr_game,
    dpr_support,
    linear_game,
)
from .symmetric_game import _compositions as _compositions

__all__ = [
    "SymmetricGame",
    "Equilibrium",
    "EgtaResult",
    "egta",
    "dpr_support",
    "dpr_exact",
    "dpr_game",
    "linear_game",
    "equilibrium_regret_bounds",
    "gains",
    "simplex_grid",
    "GainNoise",
    "gain_noise",
    "regret_upper_bounds",
    "RegretTest",
    "regret_test",
    "seat_layout",
    "find_equilibria",
    "replicator_dynamics",
]


def _with_intervals(result: EgtaResult, found) -> EgtaResult:
    """The result with its equilibria and their one-sided regret intervals [0, q], q from
    the band :func:`regret_upper_bounds` (valid for all of them at once)."""
    game = result.game
    eqs = []
    if found:
        xs = np.array([x for x, _ in found])
        upper = regret_upper_bounds(
            game, result.seed_tables(), xs, n_boot=result.n_boot, seed=result.boot_seed
        )
        for (x, r), q in zip(found, upper, strict=True):
            eqs.append(Equilibrium(game.mixture(x), r, (0.0, max(float(q), r))))
    return replace(result, equilibria=tuple(eqs))


def egta(
    mechanism,
    population,
    n_sellers: int | None = None,
    strategies: Sequence[str] = (),
    samples: int = 10,
    *,
    seed: int | None = None,
    rng: np.random.Generator | None = None,
    players: int = 4,
    rounds: int = 1,
    last_rounds: int | None = None,
    n_boot: int = 1000,
    regret_tol: float = 1e-3,
    progress: bool = False,
    workers: int = 1,
    executor: str = "local",
    address: str | None = None,
    store=None,
    **context,
) -> EgtaResult:
    """Empirical game of ``strategies`` (specs or BNEResults, at least 2) among a
    population's sellers.

    ``mechanism``: a spec, class or instance; ``population``: a
    :class:`~market_sim.population.Population` or its spec (``n_sellers`` from it), or a
    cost law (spec or CostDistribution) with ``n_sellers``; ``players``: reduced players
    of the DPR (capped at N); each needed profile is simulated ``samples`` times for
    ``rounds`` rounds, with ``seed`` (or ``rng``).  ``context`` goes to
    :class:`~market_sim.agents.MarketModel` (mu, sigma, gamma, privacy,
    new_costs_each_round, xi, ...).  ``workers``, ``executor``, ``address``: where the
    simulations run, one task per (profile, sample) (``market_sim.execution``; the same
    table on any of them); ``store``: a folder keeping each finished simulation, so that
    the same call resumes (another call into it is refused).  See the module doc."""
    from ..agents import as_strategy

    t0 = time.perf_counter()
    check_executor(workers, executor, address)
    rng_state = rng.bit_generator.state if isinstance(rng, np.random.Generator) else None
    labels = _check_strategies(strategies)
    built = [as_strategy(s) for s in strategies]  # unknown names fail before any run
    strategies = labels
    pop, dist = _population_of(population, n_sellers, context)
    n, samples, rounds, players, last, n_boot = _check_numbers(
        pop.n_sellers, samples, rounds, players, last_rounds, n_boot, regret_tol
    )
    mech, name = _build_mechanism(mechanism, pop, dist, context)
    if store is not None:
        request = _request(mechanism, pop, strategies, samples, seed, rng_state, players, rounds,
                           last, context)  # fmt: skip
        store = open_store(store, "egta", request)
    seeds, boot_seed, seats, cost_seeds = _seeds(seed, rng, samples, n)
    markets = _sample_markets(pop, seats, cost_seeds)
    model_context = {"measure_regret": False, "agent_views": False, **context}

    reduced, dev, full, weights = _dpr_plan(len(strategies), n, players)
    where = dict(workers=workers, executor=executor, address=address, store=store)
    Y = _run_markets(
        dev, full, built, n, mech, dist, rounds, last, seeds, markets, model_context, progress,
        where,
    )  # fmt: skip
    game = SymmetricGame(strategies, players, reduced, _reduce(weights, reduced, Y.mean(axis=1)))
    result = EgtaResult(
        mechanism=name, dist=dist.spec, n_sellers=n, players=players, samples=samples,
        rounds=rounds, last_rounds=last, strategies=strategies, game=game, full_profiles=full,
        deviator=dev, sample_payoffs=Y, weights=weights, seats=seats, equilibria=(),
        n_boot=n_boot, boot_seed=boot_seed, seconds=0.0, seed=seed,
        context={k: v for k, v in context.items() if isinstance(v, (int, float, str, bool))},
        population=pop.spec, class_laws=tuple(law.spec for law in pop.laws),
        deviator_class=pop.group[seats[:, 0]],
    )  # fmt: skip
    result = _with_intervals(result, find_equilibria(game, regret_tol=regret_tol))
    return replace(result, seconds=time.perf_counter() - t0)
