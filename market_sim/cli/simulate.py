"""``market-sim simulate``: the agent-based market, strategic sellers over repeated rounds."""

from __future__ import annotations

import sys
from pathlib import Path

from ..errors import MarketSimError
from .arguments import add_output, count, market_parent, population_of, warn
from .settings import check_needs, warn_if_not_private
from .simulate_files import check_simulate_out, ledger_line, write_outputs


def add_parser(subparsers):
    sim = subparsers.add_parser(
        "simulate",
        parents=[market_parent()],
        help="the agent-based market: strategic sellers over repeated rounds",
        description="Run the Mesa market model and write DIR/agents.csv "
        "(one row per seller and round), DIR/model.csv (one row per round) and "
        "DIR/simulation.png.",
    )
    _add_market_options(sim)
    _add_privacy_options(sim)
    _add_seller_options(sim)
    _add_output_options(sim)
    add_output(sim)
    sim.set_defaults(func=run)
    return sim


def _add_market_options(sim) -> None:
    """Who sells and under which mechanism: --population, --mechanism."""
    sim._option_string_actions["--dist"].required = False  # or --population
    sim.add_argument("--population", metavar="SPEC", help="the sellers (docs/population.md)")
    sim.add_argument(
        "--mechanism",
        default="offline",
        metavar="SPEC",
        help="a registered mechanism (see `market-sim mechanisms`: offline, online, "
        "data-dependent (needs data), pay-as-bid, posted-price, "
        "private-posted-price, private-cutoff, ...), module:Class or "
        "path/to/file.py:Class, with parameters as :key=value (default offline)",
    )


def _add_privacy_options(sim) -> None:
    """The privacy of the price choice and of the released statistics, and the sellers'
    lifetime budgets: --privacy, --release, --payment-bound, --budget, --accountant."""
    sim.add_argument(
        "--privacy",
        type=float,
        default=None,
        help="epsilon of a private mechanism's price / cut-off choice (default 1)",
    )
    sim.add_argument(
        "--release",
        metavar="NOISE:EPS[:DELTA]",
        default=None,
        help="publish each round's total payment and number bought with noise "
        "(laplace:1, gaussian:1:1e-5 or truncated-laplace:1:0.01; each statistic "
        "spends EPS); needs --payment-bound",
    )
    sim.add_argument(
        "--payment-bound",
        type=float,
        default=None,
        help="public cap the released total payment is clipped to (needs --release)",
    )
    sim.add_argument(
        "--budget",
        metavar="EPS[:DELTA]",
        default=None,
        help="each seller's lifetime privacy budget: its composed loss stays <= EPS "
        "(at DELTA in (0, 1); EPS alone: pure DP); allocations are capped, sellers "
        "whose budget is spent leave, and DIR/ledger.csv shows per seller what was "
        "spent under every accountant (docs/ledger.md)",
    )
    sim.add_argument(
        "--accountant",
        default=None,
        metavar="NAME",
        help="how a seller's sales compose (each as randomized response at its eps, the "
        "worst eps-DP mechanism): basic (the sum), rdp or pld "
        "(pld needs the accounting extra); default basic; needs --budget",
    )


def _add_seller_options(sim) -> None:
    """How the sellers behave and arrive: --strategy, --sellers, --rounds, --seed, --xi,
    --strategic-fraction, --new-costs."""
    sim.add_argument(
        "--strategy",
        action="append",
        default=None,
        metavar="SPEC[@FRACTION]",
        help="a registered strategy (see `market-sim strategies`), module:Class or "
        "path/to/file.py:Class, with parameters as :key=value (shade:factor=1.3), or "
        "bne:DIR/bid.csv (play the bid function market-sim bne wrote); "
        "repeat with @FRACTION for a mixed population (shade@0.3 --strategy "
        "best-response@0.2); default truthful",
    )
    sim.add_argument("--sellers", type=count("sellers"), help="number of sellers (default 20)")
    sim.add_argument("--rounds", type=count("rounds"), default=3, help="number of rounds")
    sim.add_argument("--seed", type=int, default=0, help="random seed (default 0)")
    sim.add_argument(
        "--xi",
        type=float,
        default=1.0,
        help="probability that a seller arrives in a round (default 1)",
    )
    sim.add_argument(
        "--strategic-fraction",
        type=float,
        default=None,
        help="share of sellers using the strategy; the rest are truthful (default 1; "
        "needs one --strategy without @FRACTION)",
    )
    sim.add_argument(
        "--new-costs",
        action="store_true",
        help="redraw every seller's cost each round (the Bayesian game a BNE solves); "
        "default: costs drawn once",
    )


def _add_output_options(sim) -> None:
    """What is measured and written besides the rounds: --data, --animate, --no-regret."""
    sim.add_argument(
        "--data",
        action="store_true",
        help="give each seller a synthetic data point; the platform trains the "
        "private model (Alg. 1) and reports its test error",
    )
    sim.add_argument(
        "--animate",
        action="store_true",
        help="also write DIR/simulation.gif: reports vs costs and eps, round by round",
    )
    sim.add_argument(
        "--no-regret",
        action="store_true",
        help="do not measure each seller's regret (faster at large m)",
    )


def _market_arg(args) -> dict:
    """MarketModel's sellers: --population, or --dist and --sellers."""
    from ..distributions import parse_distribution

    if (args.population is None) == (args.dist is None):
        raise MarketSimError("give exactly one of --dist and --population")
    if args.data and args.population is not None:
        raise MarketSimError("--data with --population: give data in its spec (;data=synthetic)")
    if args.population is not None:
        return dict(n_sellers=args.sellers, population=population_of(args))
    return dict(n_sellers=args.sellers or 20, dist=parse_distribution(args.dist, iron=args.iron))


def _strategy_arg(items):
    """--strategy values -> what MarketModel takes: one spec, or {spec: fraction}."""
    if not items:
        return "truthful", None
    if len(items) == 1 and "@" not in items[0]:
        return items[0], None
    mix = {}
    for item in items:
        spec, sep, frac = item.rpartition("@")
        if not sep or not spec:
            raise MarketSimError(
                f"--strategy {item!r}: a mixed population needs SPEC@FRACTION for every strategy"
            )
        try:
            mix[spec] = float(frac)
        except ValueError:
            raise MarketSimError(f"--strategy {item!r}: {frac!r} is not a fraction") from None
    return mix, 1.0


def _warn_if_slow(model, rounds: int) -> None:
    """One warning line when the cost model (``market_sim.estimates``) expects a long run."""
    from ..estimates import SLOW_SECONDS, format_duration, simulation_seconds

    seconds, faster = simulation_seconds(model, rounds)
    if seconds > SLOW_SECONDS:
        warn(
            f"this simulation will take {format_duration(seconds)} by the cost model "
            f"({model.n_sellers} sellers, {rounds} round{'s' if rounds != 1 else ''} of "
            f"{model.mechanism_name}); faster: {faster}"
        )


# a setting that has no effect without another: (its flag, the flag it needs, why)
_NEEDS = (
    ("accountant", "budget", "the ledger composes nothing without a budget"),
    ("payment_bound", "release", "it only clips the released total payment"),
    ("strategic_fraction", "strategy", "the rest of the sellers are truthful anyway"),
)


def _checked_settings(args):
    """The settings that need another, --budget and --accountant, checked before any work
    (the defaults of the dependent ones set here); the budget."""
    from ..privacy.ledger import ACCOUNTANTS, Budget

    check_needs(args, _NEEDS)
    if args.strategic_fraction is not None and any("@" in s for s in args.strategy or ()):
        raise MarketSimError("--strategic-fraction has no effect with --strategy SPEC@FRACTION")
    args.accountant = args.accountant or "basic"
    args.strategic_fraction = 1.0 if args.strategic_fraction is None else args.strategic_fraction
    if args.accountant not in ACCOUNTANTS:
        raise MarketSimError(
            f"--accountant {args.accountant!r}: one of {', '.join(sorted(ACCOUNTANTS))}"
        )
    if args.budget is None:
        return None
    try:
        return Budget.parse(args.budget)
    except MarketSimError as exc:
        reason = str(exc).removeprefix("budget: ")
        raise MarketSimError(f"--budget {args.budget!r}: {reason}") from None


def run(args) -> int:
    budget = _checked_settings(args)
    strategy, fraction = _strategy_arg(args.strategy)
    from ..joint_report import is_multifield

    if is_multifield(args.population, [args.mechanism]):  # sellers with several fields
        from .simulate_fields import run_fields

        return run_fields(args, strategy, fraction)
    market = _market_arg(args)
    out = Path(args.out)
    check_simulate_out(out)
    model = _model(args, market, strategy, fraction, budget)
    warn_if_not_private(args.privacy, model.base_mechanism, model.mechanism_name)
    _warn_if_slow(model, args.rounds)
    _play(model, args.rounds, args.quiet)
    files, ledger = write_outputs(out, args, model, budget)
    print(model.model_frame().to_string(index=False))
    if ledger is not None:
        print(ledger_line(ledger, args.accountant, budget))
    for name, caveat in _caveats(model):
        print(f"note ({name}): {caveat}")
    print(f"written to {out}: {', '.join(files)}, manifest.json")
    return 0


def _model(args, market: dict, strategy, fraction, budget):
    """The MarketModel the options describe."""
    from ..agents import MarketModel
    from ..privacy.release import StatisticRelease

    return MarketModel(
        **market,
        mechanism=args.mechanism,
        strategy=strategy,
        strategic_fraction=args.strategic_fraction if fraction is None else 1.0,
        rounds=args.rounds,
        mu=args.mu,
        sigma=args.sigma,
        gamma=args.gamma,
        xi=args.xi,
        seed=args.seed,
        data="synthetic" if args.data else None,
        privacy=1.0 if args.privacy is None else args.privacy,
        release=None if args.release is None else StatisticRelease.parse(args.release),
        payment_bound=args.payment_bound,
        measure_regret=not args.no_regret,
        new_costs_each_round=args.new_costs,
        budget=budget,
        accountant=args.accountant,
    )


def _play(model, rounds: int, quiet: bool) -> None:
    """Every round of ``model``, with a progress bar on stderr unless ``quiet``."""
    from tqdm import tqdm

    with tqdm(
        total=rounds, desc="rounds", unit="round", file=sys.stderr, disable=quiet or None
    ) as bar:
        while model.running:
            model.step()
            bar.update(1)


def _caveats(model) -> list[tuple[str, str]]:
    """(strategy name, caveat) of the strategies played that declare one, once each."""
    seen = {g.name: getattr(g.strategy, "caveat", "") for g in model.groups}
    return [(name, text) for name, text in seen.items() if text]
