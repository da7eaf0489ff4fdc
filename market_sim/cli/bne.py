"""``market-sim bne``: Bayes-Nash equilibrium bid functions of a mechanism, one per class."""

from __future__ import annotations

import dataclasses
import math

import numpy as np

from ..distributions import parse_distribution
from ..errors import MarketSimError
from ..games.equilibrium import DIST_OPTIONS, METHODS, OPTIONS, bne
from .arguments import (
    add_cost_law,
    add_market_settings,
    add_output,
    count,
    market_settings,
    number,
    output_folder,
    population_of,
    positive,
)


def at_least(name, least):
    return number(name, int, lambda v: v >= least, f">= {least}")


def share(name):
    return number(name, float, lambda v: 0 < v <= 1, "in (0, 1]")


def nonneg(name):
    return number(name, float, lambda v: math.isfinite(v) and v >= 0, ">= 0")


#: the pure method's options as flags: (flag, its check, help)
_SOLVER_FLAGS = (
    ("grid", at_least("grid", 3), "costs per class on the relevant range"),
    ("bid-grid", at_least("bid-grid", 3), "candidate reports of a best response"),
    ("br-refine", at_least("br-refine", 0), "rounds of evaluated refinement of a response"),
    ("samples", count("samples"), "opponent draws (training)"),
    ("deviators", count("deviators"), "deviating sellers per market (deviations path)"),
    ("damping", share("damping"), "least step towards the best response (1/(t+1) before)"),
    ("tol", positive("tol"), "stop at sup|BR - b| <= tol x support width"),
    ("gain-tol", positive("gain-tol"), "or at an ex-ante gain <= gain-tol x utility"),
    ("max-iter", count("max-iter"), "most iterations"),
    ("knots", at_least("knots", 0), "interior knots of the spline through the responses"),
    ("tilt", nonneg("tilt"), "importance sampling towards high costs (0: off)"),
    ("eval-grid", count("eval-grid"), "cells of evaluation costs (whole range and focus)"),
    ("check-grid", at_least("check-grid", 3), "reports searched in the verification"),
    ("refine", at_least("refine", 0), "rounds of local refinement of the best deviation"),
    (
        "beliefs-rounds",
        at_least("beliefs-rounds", 0),
        "rounds of fictitious play in beliefs after the solve (0: off; docs/equilibrium.md)",
    ),
    ("beliefs-markets", count("beliefs-markets"), "markets observed each belief round"),
    ("beliefs-epoch", count("beliefs-epoch"), "belief rounds before the belief restarts"),
    ("beliefs-workers", count("beliefs-workers"), "processes of the belief rounds"),
)


def add_parser(subparsers):
    a = subparsers.add_parser(
        "bne",
        help="Bayes-Nash equilibrium bid functions of a mechanism (one per class of sellers)",
        description="Damped, spline-smoothed best responses on a cost grid per class "
        "(common random numbers), then the verification: every report of the range "
        "searched on one sample, the gains re-measured on fresh opponents; epsilon with "
        "a 95% interval, the loss l and the relative loss L. Prints them; with --out "
        "DIR also writes DIR/bid.csv, DIR/summary.json and DIR/bne.png.",
    )
    a.add_argument(
        "--mechanism",
        required=True,
        metavar="SPEC",
        help="a registered name (pay-as-bid, offline, posted-price, ...), "
        "name:key=value, module:attr or path/to/file.py:Class",
    )
    add_cost_law(a, population=True)
    a.add_argument("--sellers", type=at_least("sellers", 2), help="sellers (with --dist)")
    a.add_argument("--seed", type=int, default=0, help="random seed (default 0)")
    D = OPTIONS
    for flag, kind, text in _SOLVER_FLAGS:
        default = D[flag.replace("-", "_")]
        shown = "automatic" if default is None else default
        # None unless given: --method distributional has its own defaults (DIST_OPTIONS)
        a.add_argument(f"--{flag}", type=kind, default=None, help=f"{text} (default {shown})")
    a.add_argument(
        "--method",
        choices=METHODS,
        default="auto",
        help="pure: bid functions by damped best responses; distributional: mixed "
        "strategies on a discretised game (all-pay contests, reserves); auto: by the rule "
        "of docs/equilibrium.md, saying which (default auto)",
    )
    a.add_argument("--step", type=positive("step"), default=None,
                   help="distributional: the dual averaging's step (default 1)")  # fmt: skip
    a.add_argument(
        "--resample",
        choices=("yes", "no"),
        default=None,
        help="a fresh opponent sample each iteration (default: automatic, by path)",
    )
    a.add_argument(
        "--eval-samples",
        type=at_least("eval-samples", 2),
        default=None,
        help="opponent draws of each verification sample (default: --samples)",
    )
    add_market_settings(a)
    add_output(a, required=False)
    a.set_defaults(func=run)
    return a


def run(args) -> int:
    population: object = population_of(args)  # one bid function per class
    n = args.sellers  # with --population: checked against it
    if population is None:
        if args.sellers is None:
            raise MarketSimError("--sellers is required with --dist")
        population, n = parse_distribution(args.dist, iron=args.iron), args.sellers
    context = market_settings(args)
    out = output_folder(args)
    names = [*OPTIONS, *DIST_OPTIONS]
    opts = {k: getattr(args, k) for k in names if getattr(args, k, None) is not None}
    if args.resample is not None:
        opts["resample"] = args.resample == "yes"
    result = bne(
        args.mechanism,
        population,
        np.random.default_rng(args.seed),
        n_sellers=n,
        progress=not args.quiet,
        method=args.method,
        **opts,
        **context,
    )
    result = dataclasses.replace(result, options={**result.options, "seed": args.seed})
    print(result.format())
    if out is not None:
        result.write(out)
        print(f"written to {out}: bid.csv, summary.json, bne.png")
    return 0
