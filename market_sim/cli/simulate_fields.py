"""``market-sim simulate`` with sellers of several fields (docs/multifield.md): the
Mesa market of ``market_sim.agents.fields``, strategies that misreport any private field."""

from __future__ import annotations

from pathlib import Path

from ..errors import MarketSimError
from ..files import atomic_write
from .simulate_files import check_simulate_out, write_simulate_manifest

# the one-field settings this market does not have: (attribute, flag)
_ONE_FIELD_ONLY = (
    ("data", "--data"),
    ("budget", "--budget"),
    ("release", "--release"),
    ("animate", "--animate"),
    ("new_costs", "--new-costs"),
    ("iron", "--iron"),
    ("privacy", "--privacy"),
)


def run_fields(args, strategy, fraction) -> int:
    """Run FieldMarketModel; write DIR/agents.csv, DIR/model.csv and DIR/manifest.json.
    ``strategy``, ``fraction``: the --strategy values as ``simulate`` reads them."""
    from ..agents.fields import FieldMarketModel
    from ..multifield import as_multifield

    for attr, flag in _ONE_FIELD_ONLY:
        if getattr(args, attr, None) not in (None, False):
            raise MarketSimError(f"{flag} is not available for sellers with several fields")
    if (args.population is None) == (args.dist is None):
        raise MarketSimError("give exactly one of --dist and --population")
    pop = as_multifield(args.population or f"{args.sellers or 20}*{args.dist}")
    if args.sellers is not None and args.sellers != pop.n_sellers:
        raise MarketSimError(
            f"--sellers {args.sellers} conflicts with the population's {pop.n_sellers} "
            "sellers (omit --sellers)"
        )
    share = args.strategic_fraction if args.strategic_fraction is not None else 1.0
    if not isinstance(strategy, dict) and strategy != "truthful" and share < 1:
        strategy = {strategy: share}
    out = Path(args.out)
    check_simulate_out(out)
    settings = dict(mu=args.mu, sigma=args.sigma, gamma=args.gamma)
    model = FieldMarketModel(
        args.mechanism, pop, strategy=strategy, rounds=args.rounds, xi=args.xi, seed=args.seed,
        settings=settings,
    )  # fmt: skip
    model.run_model()
    model_df, agent_df = model.model_frame(), model.agent_frame()
    out.mkdir(parents=True, exist_ok=True)
    for name, frame in (("agents.csv", agent_df), ("model.csv", model_df)):
        data = frame.to_csv(index=False).encode()
        atomic_write(str(out / name), lambda fh, d=data: fh.write(d))
    files = ["agents.csv", "model.csv"]
    write_simulate_manifest(out, args, model, files)
    print(model_df.to_string(index=False))
    print(f"written to {out}: {', '.join(files)}, manifest.json")
    return 0
