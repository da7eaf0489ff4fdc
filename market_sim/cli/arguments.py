"""What every subcommand shares: the parser class, argument types, the market options."""

from __future__ import annotations

import argparse
import difflib
import math
import re
import sys

from ..errors import MarketSimError

__all__ = [
    "EXIT_USAGE",
    "Parser",
    "number",
    "positive",
    "count",
    "add_cost_law",
    "population_of",
    "add_market_settings",
    "add_output",
    "add_executor",
    "executor_of",
    "interrupted",
    "resumable",
    "output_folder",
    "market_settings",
    "market_parent",
    "online_parent",
    "print_listing",
    "warn",
]

EXIT_USAGE = 2


class Parser(argparse.ArgumentParser):
    """argparse with one-line errors (exit 2) and a "did you mean" suggestion."""

    argv: list[str] | None = None  # the command line, for _did_you_mean

    def error(self, message):  # one line, no usage dump
        print(f"market-sim: error: {message}{_did_you_mean(self, message)}", file=sys.stderr)
        sys.exit(EXIT_USAGE)


def _did_you_mean(parser, message: str) -> str:
    """A suggestion, ``(did you mean 'x'?)``, for a misspelt command, choice or option."""
    bad = re.search(r"invalid choice: '([^']*)' \(choose from (.*)\)$", message)
    if bad:
        word, known = bad.group(1), re.findall(r"'([^']*)'", bad.group(2))
    else:
        bad = re.search(r"unrecognized arguments: (\S+)", message)
        if not bad or not bad.group(1).startswith("--"):
            return ""
        word = bad.group(1).split("=")[0]
        known = [o for a in _all_actions(_command_parser(parser)) for o in a.option_strings]
    close = difflib.get_close_matches(word, known, n=1)
    return f" (did you mean {close[0]!r}?)" if close else ""


def _command_parser(parser):
    """The parser of the subcommand named on the command line (``parser.argv``), else
    ``parser``: options are suggested from the command that was typed."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for word in getattr(parser, "argv", None) or []:
                if word in action.choices:
                    return action.choices[word]
    return parser


def _all_actions(parser):
    """The options of ``parser`` and of the subcommand parsers under it, without the
    hidden aliases."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():
                yield from _all_actions(sub)
        elif action.help != argparse.SUPPRESS:
            yield action


def number(name, kind, ok, need):
    """argparse type: parse with ``kind``, accept when ``ok(v)``, else say ``need``."""

    def conv(text):
        try:
            v = kind(text)
        except ValueError:
            noun = "an integer" if kind is int else "a number"
            raise argparse.ArgumentTypeError(f"{name} must be {noun} (got {text!r})") from None
        if not ok(v):
            raise argparse.ArgumentTypeError(f"{name} must be {need} (got {text!r})")
        return v

    return conv


def positive(name):
    """argparse type: a finite number > 0."""
    return number(name, float, lambda v: math.isfinite(v) and v > 0, "a finite number > 0")


def count(name):
    """argparse type: an integer >= 1."""
    return number(name, int, lambda v: v >= 1, ">= 1")


MARKET_SETTINGS = ("mu", "sigma", "gamma", "privacy")


def add_market_settings(parser) -> None:
    """``--mu --sigma --gamma --privacy`` (each > 0, default: the mechanism's own)."""
    for name in MARKET_SETTINGS[:3]:
        parser.add_argument(f"--{name}", type=positive(name), default=None)
    parser.add_argument(
        "--privacy",
        type=positive("privacy"),
        default=None,
        help="epsilon of the private mechanisms' price / cut-off choice",
    )


def market_settings(args) -> dict:
    """The market settings given on the command line (see :func:`add_market_settings`)."""
    return {k: getattr(args, k) for k in MARKET_SETTINGS if getattr(args, k, None) is not None}


def add_cost_law(parser, example: str = "uniform:0:1", population: bool = False) -> None:
    """``--dist SPEC`` (required) and ``--iron``; with ``population=True``, exactly one of
    ``--dist`` and ``--population`` (read it with :func:`population_of`)."""
    where = parser
    if population:
        where = parser.add_mutually_exclusive_group(required=True)
        where.add_argument(
            "--population",
            metavar="SPEC",
            help="the sellers: COUNT*LAW[+COUNT*LAW...][;data=...;rho=...;on=...] "
            "(docs/population.md), e.g. 70*uniform:0:1+30*uniform:1:2",
        )
    where.add_argument(
        "--dist",
        required=not population,
        metavar="SPEC",
        help=f"cost distribution, e.g. {example}",
    )
    parser.add_argument("--iron", action="store_true", help="Myerson ironing of the cost law")


def population_of(args):
    """The ``--population`` of the command line as a Population (``--iron`` applied to
    every class), or None when the market was given by ``--dist``."""
    spec = getattr(args, "population", None)
    if spec is None:
        return None
    from ..population import Population

    return Population.parse(spec, iron=getattr(args, "iron", False))


def add_output(parser, quiet: str = "no progress bar (stderr)", *, required: bool = True) -> None:
    """``--out DIR`` and ``--quiet``; with ``required=False`` the command prints its
    table and verdict lines and writes nothing when ``--out`` is not given."""
    help = "output folder" if required else "also write the files to this folder "
    help += "" if required else "(default: print only, write nothing)"
    parser.add_argument("--out", required=required, metavar="DIR", help=help)
    parser.add_argument("--quiet", action="store_true", help=quiet)


def add_executor(parser, what: str = "tasks") -> None:
    """``--workers W --executor local|dask --address tcp://HOST:PORT`` (market_sim.execution;
    read them with :func:`executor_of`)."""
    parser.add_argument(
        "--workers",
        type=count("workers"),
        default=1,
        help=f"processes running the {what}, or Dask workers of a local cluster (default 1)",
    )
    parser.add_argument(
        "--executor",
        choices=["local", "dask"],
        default=None,
        help="local process pool (default) or Dask distributed (default with --address)",
    )
    parser.add_argument(
        "--address",
        default=None,
        metavar="tcp://HOST:PORT",
        help="Dask scheduler address (default: start a LocalCluster)",
    )


def executor_of(args) -> dict:
    """``workers``, ``executor``, ``address`` keywords from :func:`add_executor`'s options
    (an address means the Dask executor)."""
    executor = args.executor or ("dask" if args.address else "local")
    if args.address and executor != "dask":
        raise MarketSimError("--address needs --executor dask (or leave --executor out)")
    return {"workers": args.workers, "executor": executor, "address": args.address}


def interrupted(store) -> int:
    """After Ctrl-C: say where the finished tasks are and how to resume; exit status 130."""
    print(
        f"market-sim: interrupted; finished tasks are in {store}; run the same command to resume",
        file=sys.stderr,
    )
    return 130


def resumable(out, call):
    """``call(store)`` with DIR/tasks as its store (None without --out): (its result,
    None), or after Ctrl-C with a store (None, exit status) having said how to resume."""
    store = None if out is None else out / "tasks"
    try:
        return call(store), None
    except KeyboardInterrupt:
        if store is None:
            raise
        return None, interrupted(store)


def output_folder(args):
    """``--out`` as a Path, checked writable before any work; None when not given."""
    if getattr(args, "out", None) is None:
        return None
    from pathlib import Path

    from ..files import check_writable_folder

    out = Path(args.out)
    check_writable_folder(out)
    return out


def market_parent() -> Parser:
    """The options of a market with Eq. 11's weights: ``--dist --iron --mu --sigma --gamma``
    (defaults 1)."""
    market = Parser(add_help=False)
    market.add_argument(
        "--dist",
        required=True,
        metavar="SPEC",
        help="cost distribution, e.g. uniform:0:1, truncnorm:MEAN:SD:LOW:HIGH, "
        "beta:A:B:LOW:HIGH, truncexpon:SCALE:LOW:HIGH, empirical:FILE.csv",
    )
    market.add_argument(
        "--iron", action="store_true", help="use Myerson ironing if the distribution is not regular"
    )
    market.add_argument(
        "--mu",
        type=positive("mu"),
        default=1.0,
        help="weight of the ||a|| term (generalisation), default 1",
    )
    market.add_argument(
        "--sigma",
        type=positive("sigma"),
        default=1.0,
        help="weight of the 1/eta term (privacy noise), default 1",
    )
    market.add_argument(
        "--gamma", type=positive("gamma"), default=1.0, help="weight of the payments, default 1"
    )
    return market


def online_parent() -> Parser:
    """``--rule fluid|alg3`` of the online mechanism."""
    online = Parser(add_help=False)
    online.add_argument(
        "--rule",
        choices=["fluid", "alg3"],
        default="fluid",
        help="online rule: fluid (exact, any regular law; default) or alg3 "
        "(the paper's printed formulas, needs f_Psi(0) > 0)",
    )
    return online


def print_listing(rows, width: int = 22, registry=None) -> None:
    """``name  first sentence  [origin]`` per registered name (origin only when not built
    in); with ``registry``, one warning line per entry point a built-in name hides."""
    for name, doc, origin in rows:
        print(f"{name:{width}s} {doc}" + ("" if origin == "built-in" else f"  [{origin}]"))
    for e in registry.shadowed() if registry is not None else ():
        warn(
            f"the {e.origin} {e.name!r} ({e.target}) is hidden by the {registry.kind} of "
            f"the same name; rename it, or use {e.target!r} as the {registry.kind}"
        )


def warn(text: str) -> None:
    """One warning line on stderr."""
    print(f"market-sim: warning: {text}", file=sys.stderr, flush=True)
