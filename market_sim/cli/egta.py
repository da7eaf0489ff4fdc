"""``market-sim egta``: the empirical game of strategies, its equilibria and their regret."""

from __future__ import annotations

from ..distributions import parse_distribution
from ..errors import MarketSimError
from .arguments import (
    add_cost_law,
    add_executor,
    add_market_settings,
    add_output,
    count,
    executor_of,
    market_settings,
    number,
    output_folder,
    population_of,
    resumable,
)
from .settings import warn_if_not_private


def add_parser(subparsers):
    a = subparsers.add_parser(
        "egta",
        help="empirical game of strategies: payoff table, equilibria, regret CIs",
        description="Simulate population mixtures of the given strategies in markets of "
        "N sellers (deviation-preserving reduction to P players, K seeded samples per "
        "profile), find the meta-game's symmetric equilibria by replicator dynamics and "
        "bootstrap their regret; print them, and with --out DIR also write "
        "DIR/payoffs.csv, DIR/equilibria.json, DIR/summary.json and DIR/egta.png, and keep "
        "each finished simulation in DIR/tasks at once, so the same command resumes.",
    )
    a.add_argument(
        "--mechanism",
        required=True,
        metavar="SPEC",
        help="a registered name (offline, online, pay-as-bid, posted-price, ...), "
        "name:key=value, module:attr or path/to/file.py:Class",
    )
    add_cost_law(a, "uniform:1:5", population=True)
    a.add_argument(
        "--sellers",
        type=count("sellers"),
        default=None,
        help="sellers per market (default 20; with --population: its count)",
    )
    a.add_argument(
        "--strategy",
        action="append",
        required=True,
        metavar="SPEC",
        help="a strategy of the meta-game (repeat: at least 2), e.g. shade:factor=1.3 or "
        "bne:DIR/bid.csv (the bid function market-sim bne wrote)",
    )
    a.add_argument(
        "--samples", type=count("samples"), default=10, help="seeds per profile (default 10)"
    )
    a.add_argument("--seed", type=int, default=0, help="random seed (default 0)")
    a.add_argument(
        "--rounds", type=count("rounds"), default=1, help="rounds per market (default 1)"
    )
    a.add_argument(
        "--last-rounds",
        type=count("last-rounds"),
        default=None,
        help="payoff: mean utility over the last R rounds (default: all)",
    )
    a.add_argument(
        "--players",
        type=number("players", int, lambda v: v >= 2, ">= 2"),
        default=4,
        help="reduced players of the DPR (default 4; = sellers for the full game)",
    )
    a.add_argument(
        "--new-costs",
        action="store_true",
        help="draw new costs every round (default: each seller keeps its cost for the run; "
        "needs --rounds R > 1)",
    )
    a.add_argument(
        "--boot", type=count("boot"), default=1000, help="bootstrap resamples (default 1000)"
    )
    add_market_settings(a)
    add_output(a, required=False)
    add_executor(a, "simulations")
    a.set_defaults(func=run)
    return a


def run(args) -> int:
    population = population_of(args)
    if population is None:
        population = parse_distribution(args.dist, iron=args.iron)
        args.sellers = args.sellers or 20
    context = market_settings(args)
    if args.new_costs and args.rounds == 1:
        raise MarketSimError("--new-costs has no effect without --rounds R > 1 (one round)")
    if args.privacy is not None:
        from ..mechanisms.base import as_mechanism
        from ..population import as_population

        pop = as_population(population, args.sellers)
        mech = as_mechanism(args.mechanism, dist=pop.pooled, n_sellers=pop.n_sellers, **context)
        warn_if_not_private(args.privacy, mech, args.mechanism)
    if args.new_costs:
        context["new_costs_each_round"] = True
    out = output_folder(args)
    where = executor_of(args)
    result, stopped = resumable(out, lambda store: _egta(args, population, context, store, where))
    if stopped is not None:
        return stopped
    print(result.format())
    if out is not None:
        result.write(out)
        print(f"written to {out}: payoffs.csv, equilibria.json, summary.json, egta.png")
    return 0


def _egta(args, population, context, store, where):
    from ..games.egta import egta

    return egta(
        args.mechanism,
        population,
        args.sellers,
        args.strategy,
        args.samples,
        seed=args.seed,
        players=args.players,
        rounds=args.rounds,
        last_rounds=args.last_rounds,
        n_boot=args.boot,
        progress=not args.quiet,
        store=store,
        **where,
        **context,
    )
