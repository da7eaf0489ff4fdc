"""``market-sim bne``: a symmetric Bayes-Nash equilibrium bid function of a mechanism."""

from __future__ import annotations

import dataclasses
import inspect
import math
from pathlib import Path

import numpy as np

from ..distributions import parse_distribution
from ..equilibrium import symmetric_bne
from ..files import check_writable_folder
from .arguments import (
    add_cost_law,
    add_market_settings,
    add_output,
    count,
    market_settings,
    number,
    positive,
)


def add_parser(subparsers):
    def at_least(name, least):
        return number(name, int, lambda v: v >= least, f">= {least}")

    def share(name):
        return number(name, float, lambda v: 0 < v <= 1, "in (0, 1]")

    def nonneg(name):
        return number(name, float, lambda v: math.isfinite(v) and v >= 0, ">= 0")

    a = subparsers.add_parser(
        "bne",
        help="a symmetric Bayes-Nash equilibrium bid function of a mechanism",
        description="Iterated damped best responses on a cost grid (common random "
        "numbers), then epsilon: the largest expected gain of a deviation, re-measured "
        "on fresh opponents, with a 95%% t interval. Writes DIR/bid.csv, "
        "DIR/summary.json and DIR/bne.png.",
    )
    a.add_argument(
        "--mechanism",
        required=True,
        metavar="SPEC",
        help="a registered name (pay-as-bid, offline, posted-price, ...), "
        "name:key=value, module:attr or path/to/file.py:Class",
    )
    add_cost_law(a)
    a.add_argument("--sellers", type=at_least("sellers", 2), required=True, help="sellers")
    a.add_argument("--seed", type=int, default=0, help="random seed (default 0)")
    D = {k: p.default for k, p in inspect.signature(symmetric_bne).parameters.items()}
    for flag, kind, text in (
        ("grid", at_least("grid", 3), "costs on the relevant range"),
        ("bid-grid", at_least("bid-grid", 3), "candidate reports"),
        ("refine", at_least("refine", 0), "reports tried around each best one (epsilon search)"),
        ("samples", count("samples"), "opponent draws"),
        ("deviators", count("deviators"), "deviating sellers per sampled market"),
        (
            "temperature",
            nonneg("temperature"),
            "start temperature of the logit response (0: argmax)",
        ),
        ("min-temperature", nonneg("min-temperature"), "final temperature"),
        ("cooling", share("cooling"), "temperature factor per iteration"),
        ("damping", share("damping"), "least step towards the best response (1/(t+1) before)"),
        ("tol", positive("tol"), "stop at sup|BR - b| <= tol x support width"),
        (
            "gain-tol",
            positive("gain-tol"),
            "or at an ex-ante best-response gain <= gain-tol x utility",
        ),
        ("max-iter", count("max-iter"), "most iterations"),
        ("eval-grid", at_least("eval-grid", 2), "costs where epsilon is measured"),
    ):
        default = D[flag.replace("-", "_")]
        a.add_argument(f"--{flag}", type=kind, default=default, help=f"{text} (default {default})")
    a.add_argument(
        "--eval-samples",
        type=at_least("eval-samples", 2),
        default=None,
        help="fresh opponent draws for epsilon (default: 4 x --samples)",
    )
    add_market_settings(a)
    add_output(a)
    a.set_defaults(func=run)
    return a


def run(args) -> int:
    dist = parse_distribution(args.dist, iron=args.iron)
    context = market_settings(args)
    out = Path(args.out)
    check_writable_folder(out)
    result = symmetric_bne(
        args.mechanism,
        dist,
        args.sellers,
        np.random.default_rng(args.seed),
        grid=args.grid,
        bid_grid=args.bid_grid,
        refine=args.refine,
        samples=args.samples,
        deviators=args.deviators,
        temperature=args.temperature,
        min_temperature=args.min_temperature,
        cooling=args.cooling,
        damping=args.damping,
        tol=args.tol,
        gain_tol=args.gain_tol,
        max_iter=args.max_iter,
        eval_grid=args.eval_grid,
        eval_samples=args.eval_samples,
        progress=not args.quiet,
        **context,
    )
    result = dataclasses.replace(result, options={**result.options, "seed": args.seed})
    result.write(out)
    print(result.format())
    print(f"written to {out}: bid.csv, summary.json, bne.png")
    return 0
