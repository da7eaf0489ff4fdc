"""``market-sim train``: train the learned procurement mechanism (RegretNet) and write it
as ONNX with its training curve (docs/neural.md)."""

from __future__ import annotations

import sys

from ..errors import MarketSimError
from .arguments import add_output, count, number, output_folder, positive


def add_parser(subparsers):
    a = subparsers.add_parser(
        "train",
        help="train a RegretNet-style procurement mechanism (JAX, the neural extra) and "
        "write it as ONNX",
        description="Train allocation and payment networks, symmetric in the sellers, by "
        "RegretNet's augmented Lagrangian (Dütting et al. 2019) on the buyer's objective "
        "(Eq. 11 of 003 with the payments), each seller's regret (misreports by gradient "
        "ascent) and IR violations; write DIR/model.onnx (--mechanism onnx:DIR/model.onnx), "
        "DIR/training.csv and DIR/training.png, and print the regret the training measured. "
        "Needs pip install 'market_sim[neural]'. Exit status 0, 2 on bad input.",
    )
    two = number("sellers", int, lambda v: v >= 2, ">= 2")
    a.add_argument("--sellers", type=two, default=None, help="sellers (default 10)")
    a.add_argument("--dist", default=None, metavar="SPEC",
                   help="cost law (default uniform:0:1)")  # fmt: skip
    a.add_argument("--population", default=None, metavar="SPEC",
                   help="sellers with several fields instead of --dist, e.g. "
                   "'10*uniform:0:1;cap=uniform:0.1:5;size=integers:10:500'")  # fmt: skip
    add_output(a, quiet="no progress lines (stderr)")
    a.add_argument("--seed", type=int, default=0, help="random seed (default 0)")
    a.add_argument("--iterations", type=count("iterations"), default=1000,
                   help="training iterations (default 1000)")  # fmt: skip
    a.add_argument("--batch", type=count("batch"), default=64, help="markets per iteration (64)")
    a.add_argument("--hidden", type=count("hidden"), default=16, help="units per layer (16)")
    a.add_argument("--layers", type=count("layers"), default=2, help="hidden layers (2)")
    a.add_argument("--eps-max", type=positive("eps-max"), default=5.0,
                   help="largest ε a seller can be asked for (default 5)")  # fmt: skip
    a.add_argument("--ascent-steps", type=number("ascent-steps", int, lambda v: v >= 0, ">= 0"),
                   default=5, help="misreport ascent steps per iteration (5)")  # fmt: skip
    a.add_argument("--ascent-starts", type=count("ascent-starts"), default=2,
                   help="misreport starts: the truth and random draws (2)")  # fmt: skip
    a.add_argument("--budget", type=positive("budget"), default=None,
                   help="a budget on the total payment, learned as a constraint")  # fmt: skip
    for name in ("mu", "sigma", "gamma"):
        a.add_argument(f"--{name}", type=positive(name), default=1.0, help=f"{name} (default 1)")
    a.set_defaults(func=run)
    return a


def run(args) -> int:
    import numpy as np

    from ..multifield import MultiFieldPopulation
    from ..neural.outputs import write_training
    from ..neural.training import TrainingConfig, import_jax, train

    sellers = args.sellers
    if args.population is not None and args.dist is not None:
        raise MarketSimError("give one of --dist and --population (the population has its laws)")
    dist = "uniform:0:1" if args.dist is None else args.dist
    if args.population is not None:
        sellers = MultiFieldPopulation.parse(args.population).n_sellers
        if args.sellers not in (None, sellers):
            raise MarketSimError(
                f"--sellers {args.sellers} conflicts with the population's {sellers} sellers "
                "(omit --sellers)"
            )
    config = TrainingConfig(
        n_sellers=10 if sellers is None else sellers, dist=dist,
        population=args.population, iterations=args.iterations, batch=args.batch,
        hidden=args.hidden, layers=args.layers, eps_max=args.eps_max, mu=args.mu,
        sigma=args.sigma, gamma=args.gamma, budget=args.budget,
        ascent_steps=args.ascent_steps, ascent_starts=args.ascent_starts,
    )  # fmt: skip
    config.check()
    import_jax()  # one line when JAX is missing, before any work
    out = output_folder(args)
    every = max(1, args.iterations // 20)

    def progress(row):
        if not args.quiet and (row["iteration"] % every == 0):
            print(f"iteration {row['iteration']}: objective {row['objective']:.4g}, regret "
                  f"{row['mean_regret']:.3g}, IR violation {row['ir_violation']:.3g}",
                  file=sys.stderr)  # fmt: skip

    result = train(config, np.random.default_rng(args.seed), progress)
    paths = write_training(result, out)
    print(f"trained {args.iterations} iterations in {result.seconds:.1f} s; wrote "
          f"{', '.join(str(p) for p in paths.values())}")  # fmt: skip
    claimed, ir = result.claimed_regret, result.claimed_ir_violation
    print(f"claimed regret (mean per seller, training's ascent x4 on a fresh batch): "
          f"{claimed:.6g}; IR violation {ir:.6g}")  # fmt: skip
    return 0
