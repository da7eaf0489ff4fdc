"""The ``market-sim`` command.

    market-sim solve --costs costs.csv --dist uniform:0:1 [--mu 1 --sigma 1 --gamma 1] [--k K]
                     [--out sellers.csv | --json]
    market-sim online-stream --dist SPEC --planned-m M < feed.csv
    market-sim simulate --dist SPEC --mechanism M --strategy S --out DIR [--quiet]
    market-sim scenarios
    market-sim run STUDY [--quick] [--workers W] [--executor local|dask] [--out DIR] [--quiet]
    market-sim report DIR [DIR ...] [--out OUT]
    market-sim audit --mechanism SPEC --dist SPEC --sellers N --markets K --seed S [--out DIR]
                     [--random R] [--coalition K]        (exit 3 when not IC or not IR)
    market-sim compare --mechanism SPEC --mechanism SPEC [...] --dist SPEC --sellers N [N ...]
                       --markets K --seed S [--baseline NAME] [--out DIR]
    market-sim bne --mechanism SPEC --dist SPEC --sellers N --seed S [--out DIR]
    market-sim egta --mechanism SPEC --dist SPEC --sellers N --strategy SPEC --strategy SPEC
                    [--strategy SPEC ...] --samples K --seed S [--out DIR]
    market-sim train --sellers N --dist SPEC --out DIR --seed S --iterations N  (neural extra)
    market-sim mechanisms | strategies
    market-sim demo  [--out demo_output] [--seed 0] [--sellers 200]
    market-sim viz   [--host 127.0.0.1] [--port 8765]      (needs the viz extra)

``audit``, ``compare``, ``egta``, ``bne`` and ``psro`` print their answer; ``--out DIR``
also writes their files (without it nothing is written).

One vocabulary: ``--out``, ``--sellers``, ``--seed`` and ``--quiet`` (no progress
bars; stdout is unchanged) mean the same on every command; older names (``demo
--out-dir``, ``demo --m``, ``run --no-progress``) still work, unlisted.

User mistakes and failures of the environment (an unwritable ``--out``, any
OSError, an unreachable Dask scheduler) end with one line on stderr and exit
status 2; output paths are checked before any work, and nothing is written when
the input is rejected.  A command expected to run far longer than usual says so
in one warning line with the faster alternative (``market_sim.estimates``).

Nothing a command starts outlives it: SIGTERM ends it as Ctrl-C does (exit 130, pool
stopped, finished tasks kept for a resume), and a pool worker whose command is gone
(even by SIGKILL) ends itself within a second (``execution.exit_with``); Dask's
local clusters stop with their command too (``tests/test_process_cleanup.py``).

The package is thin: one module per subcommand (``market_sim/cli/<name>.py``), each with
``add_parser(subparsers)`` and ``run(args) -> int`` that parses, calls one library
function and prints; shared argument types are in ``arguments``.  A new subcommand is its
own module plus one entry in ``COMMANDS``.  Nothing in the library imports this package.
"""

from __future__ import annotations

import importlib
import os
import signal
import sys

from .. import __version__
from ..errors import MarketSimError
from .arguments import EXIT_USAGE, Parser

__all__ = ["COMMANDS", "build_parser", "main"]

# The subcommands, in the order of ``market-sim --help``: modules of this package.
COMMANDS = (
    "solve",
    "online_stream",
    "run",
    "scenarios",
    "report",
    "simulate",
    "mechanisms",
    "strategies",
    "audit",
    "compare",
    "fields",
    "referee",
    "train",
    "egta",
    "psro",
    "bne",
    "demo",
    "viz",
)


def build_parser() -> Parser:
    p = Parser(
        prog="market-sim",
        description="A testbed for privacy data markets "
        "(offline mechanism of Anjarlekar, Etesami and Srikant; see README).",
    )
    p.add_argument("--version", action="version", version=f"market-sim {__version__}")
    sub = p.add_subparsers(dest="command", required=True, parser_class=Parser)
    for name in COMMANDS:
        importlib.import_module(f"{__name__}.{name}").add_parser(sub)
    return p


def _os_error(exc: OSError) -> str:
    """One line for an OSError: the file (or files) and the system's reason."""
    what = exc.strerror or str(exc) or type(exc).__name__
    names = [n for n in (exc.filename, exc.filename2) if n is not None]
    where = " -> ".join(str(n) for n in names)
    return " ".join(f"{where}: {what}".split()) if where else " ".join(what.split())


def main(argv=None) -> int:
    parser = build_parser()
    argv = list(sys.argv[1:] if argv is None else argv)
    parser.argv = argv  # for the suggestions of _did_you_mean
    args = parser.parse_args(argv)
    args.argv = argv
    previous = _stop_on_sigterm()
    try:
        return args.func(args)
    except MarketSimError as exc:
        print(f"market-sim: error: {' '.join(str(exc).split())}", file=sys.stderr)
        return EXIT_USAGE
    except BrokenPipeError:  # e.g. `market-sim demo | head`: the reader left; no message
        try:
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, sys.stdout.fileno())
        except (OSError, ValueError):
            pass
        return 1
    except OSError as exc:  # the environment, not the code: a file, a disk, a network
        print(f"market-sim: error: {_os_error(exc)}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        print("market-sim: interrupted", file=sys.stderr)
        return 130
    finally:
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)


def _interrupt(signum, frame):
    raise KeyboardInterrupt


def _stop_on_sigterm():
    """SIGTERM ends a command as Ctrl-C does (its pool stopped, finished tasks kept, how
    to resume printed), instead of killing it where it stands.  The previous handler,
    or None where none can be set (not the main thread)."""
    try:
        return signal.signal(signal.SIGTERM, _interrupt)
    except ValueError:
        return None
