"""The ``market-sim`` command.

    market-sim solve --costs costs.csv --dist uniform:0:1 [--mu 1 --sigma 1 --gamma 1] [--k K]
                     [--out sellers.csv | --json]
    market-sim online-stream --dist SPEC --planned-m M < feed.csv
    market-sim simulate --dist SPEC --mechanism M --strategy S --out DIR [--quiet]
    market-sim scenarios
    market-sim run STUDY [--quick] [--workers W] [--executor local|dask] [--out DIR] [--quiet]
    market-sim report DIR [DIR ...] [--out OUT]
    market-sim audit --mechanism SPEC --dist SPEC --sellers N --markets K --seed S --out DIR
                     [--random R] [--coalition K]        (exit 3 when not IC or not IR)
    market-sim bne --mechanism SPEC --dist SPEC --sellers N --seed S --out DIR
    market-sim egta --mechanism SPEC --dist SPEC --sellers N --strategy SPEC --strategy SPEC
                    [--strategy SPEC ...] --samples K --seed S --out DIR
    market-sim demo  [--out demo_output] [--seed 0] [--sellers 200]
    market-sim viz   [--host 127.0.0.1] [--port 8765]      (needs the viz extra)

One vocabulary: ``--out``, ``--sellers``, ``--seed`` and ``--quiet`` (no progress
bars; stdout is unchanged) mean the same on every command; older names (``demo
--out-dir``, ``demo --m``, ``run --no-progress``) still work, unlisted.

User mistakes and failures of the environment (an unwritable ``--out``, any
OSError, an unreachable Dask scheduler) end with one line on stderr and exit
status 2; output paths are checked before any work, and nothing is written when
the input is rejected.  A command expected to run far longer than usual says so
in one warning line with the faster alternative (``market_sim.estimates``).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
from pathlib import Path

import numpy as np

from . import __version__
from .errors import MarketSimError
from .estimates import (
    SLOW_SECONDS,
    capped_offline_seconds,
    data_dependent_round_seconds,
    format_duration,
)
from .files import atomic_write as _atomic_write
from .files import check_writable_file, check_writable_folder

EXIT_USAGE = 2


class _Parser(argparse.ArgumentParser):
    argv: list[str] | None = None  # the command line, for _did_you_mean

    def error(self, message):  # one line, no usage dump
        print(f"market-sim: error: {message}{_did_you_mean(self, message)}", file=sys.stderr)
        sys.exit(EXIT_USAGE)


def _did_you_mean(parser, message: str) -> str:
    """A suggestion, ``(did you mean 'x'?)``, for a misspelt command, choice or option."""
    import difflib
    import re

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


def _number(name, kind, ok, need):
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


def _positive(name):
    return _number(name, float, lambda v: math.isfinite(v) and v > 0, "a finite number > 0")


def _count(name):
    return _number(name, int, lambda v: v >= 1, ">= 1")


_k_value = _number("k", float, lambda v: math.isfinite(v) and v >= 1, ">= 1")


MARKET_SETTINGS = ("mu", "sigma", "gamma", "privacy")


def add_market_settings(parser) -> None:
    """``--mu --sigma --gamma --privacy`` (each > 0, default: the mechanism's own)."""
    for name in MARKET_SETTINGS[:3]:
        parser.add_argument(f"--{name}", type=_positive(name), default=None)
    parser.add_argument(
        "--privacy",
        type=_positive("privacy"),
        default=None,
        help="epsilon of the private mechanisms' price / cut-off choice",
    )


def market_settings(args) -> dict:
    """The market settings given on the command line (see :func:`add_market_settings`)."""
    return {k: getattr(args, k) for k in MARKET_SETTINGS if getattr(args, k, None) is not None}


def build_parser() -> _Parser:
    p = _Parser(
        prog="market-sim",
        description="A testbed for privacy data markets "
        "(offline mechanism of Anjarlekar, Etesami and Srikant; see README).",
    )
    p.add_argument("--version", action="version", version=f"market-sim {__version__}")
    sub = p.add_subparsers(dest="command", required=True, parser_class=_Parser)

    market = _Parser(add_help=False)
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
        type=_positive("mu"),
        default=1.0,
        help="weight of the ||a|| term (generalisation), default 1",
    )
    market.add_argument(
        "--sigma",
        type=_positive("sigma"),
        default=1.0,
        help="weight of the 1/eta term (privacy noise), default 1",
    )
    market.add_argument(
        "--gamma", type=_positive("gamma"), default=1.0, help="weight of the payments, default 1"
    )
    online = _Parser(add_help=False)
    online.add_argument(
        "--rule",
        choices=["fluid", "alg3"],
        default="fluid",
        help="online rule: fluid (exact, any regular law; default) or alg3 "
        "(the paper's printed formulas, needs f_Psi(0) > 0)",
    )

    s = sub.add_parser(
        "solve",
        parents=[market, online],
        help="privacy levels and Myerson payments for reported costs",
        description="Run the offline mechanism (Alg. 2, Eq. 11 of 003, solved "
        "exactly) or the online one (Alg. 3) on the sellers in a CSV and compute "
        "Myerson payments (Eq. 8).",
    )
    s.add_argument(
        "--costs",
        required=True,
        metavar="FILE.csv",
        help="CSV with columns seller_id,cost (one row per seller)",
    )
    s.add_argument(
        "--k",
        type=_k_value,
        default=None,
        help="offline only: cap a_i <= k/m (Remark IV.1); default: no cap",
    )
    s.add_argument(
        "--mechanism",
        choices=["offline", "online"],
        default="offline",
        help="mechanism to run (default offline)",
    )
    s.add_argument(
        "--planned-m",
        type=_count("planned-m"),
        default=None,
        help="online only: the number of sellers the platform plans for "
        "(default: the number of rows)",
    )
    s.add_argument(
        "--n-quad",
        type=int,
        default=32,
        help="Gauss-Legendre nodes per piece of the payment integral (default 32)",
    )
    out = s.add_mutually_exclusive_group()
    out.add_argument(
        "--out",
        metavar="FILE.csv",
        help="write the per-seller table here; the summary goes to stdout",
    )
    out.add_argument(
        "--json", action="store_true", help="print one JSON document {summary, sellers} on stdout"
    )
    s.set_defaults(func=cmd_solve)

    o = sub.add_parser(
        "online-stream",
        parents=[market, online],
        help="answer a live feed of sellers, one CSV line at a time",
        description="Read seller_id,cost lines from stdin (a header line is "
        "optional) and write each decision at once: seller_id,cost,virtual_cost,"
        "eps,payment,utility,error. A bad line gets an error record and the "
        "stream goes on.",
    )
    o.add_argument(
        "--planned-m",
        type=_count("planned-m"),
        required=True,
        help="the number of sellers the platform plans for",
    )
    o.set_defaults(func=cmd_online_stream)

    r = sub.add_parser(
        "run",
        help="run a study's grid into a resumable results folder",
        description="Run every (parameters, replication) task of a study with "
        "reproducible seeds. Each finished task is written to OUT/results/ at "
        "once; running the same command again resumes.",
    )
    r.add_argument(
        "scenario",
        metavar="STUDY",
        help="a name from `market-sim scenarios`, a module (pkg.study or "
        "module:attribute) or a file path/to/study.py",
    )
    r.add_argument("--quick", action="store_true", help="the scenario's small grid (a smoke test)")
    r.add_argument("--seed", type=int, default=0, help="root seed of the study (default 0)")
    r.add_argument(
        "--reps",
        type=_count("reps"),
        default=None,
        help="replications per parameter point (default: the scenario's)",
    )
    r.add_argument(
        "--workers",
        type=_count("workers"),
        default=1,
        help="processes, or Dask workers of a local cluster (default 1)",
    )
    r.add_argument(
        "--executor",
        choices=["local", "dask"],
        default="local",
        help="local process pool (default) or Dask distributed",
    )
    r.add_argument(
        "--address", default=None, help="Dask scheduler address (default: start a LocalCluster)"
    )
    r.add_argument(
        "--set",
        dest="overrides",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="fix a grid parameter for every point, e.g. --set m=1000 (repeatable)",
    )
    r.add_argument("--out", default=None, help="results folder (default results/STUDY)")
    r.add_argument("--quiet", action="store_true", help="no progress bar (stderr)")
    r.add_argument("--no-progress", dest="quiet", action="store_true", help=argparse.SUPPRESS)
    r.set_defaults(func=cmd_run)

    ls = sub.add_parser("scenarios", help="list the studies (built-in and installed)")
    ls.set_defaults(func=cmd_scenarios)

    rep = sub.add_parser(
        "report",
        help="Markdown and HTML report of results folders",
        description="Read RESULTS/results (never re-running anything) and write "
        "report.md, report.html (figures embedded) and the figures into the report "
        "folder. With several RESULTS, one page across the studies with a table of "
        "contents, each study's own report in OUT/<study>/.",
    )
    rep.add_argument("results", nargs="+", help="folders written by `market-sim run`")
    rep.add_argument(
        "--out",
        default=None,
        help="report folder (default: RESULTS/report; needed with several RESULTS)",
    )
    rep.set_defaults(func=cmd_report)

    sim = sub.add_parser(
        "simulate",
        parents=[market],
        help="the agent-based market: strategic sellers over repeated rounds",
        description="Run the Mesa market model and write DIR/agents.csv "
        "(one row per seller and round), DIR/model.csv (one row per round) and "
        "DIR/simulation.png.",
    )
    sim.add_argument(
        "--mechanism",
        default="offline",
        metavar="SPEC",
        help="a registered mechanism (see `market-sim mechanisms`: offline, online, "
        "data-dependent (needs --data), pay-as-bid, posted-price, "
        "private-posted-price, private-cutoff, ...), module:Class or "
        "path/to/file.py:Class, with parameters as :key=value (default offline)",
    )
    sim.add_argument(
        "--privacy",
        type=float,
        default=1.0,
        help="epsilon of the private mechanisms' price / cut-off choice (default 1)",
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
        help="public cap the released total payment is clipped to",
    )
    sim.add_argument(
        "--strategy",
        action="append",
        default=None,
        metavar="SPEC[@FRACTION]",
        help="a registered strategy (see `market-sim strategies`), module:Class or "
        "path/to/file.py:Class, with parameters as :key=value (shade:factor=1.3); "
        "repeat with @FRACTION for a mixed population (shade@0.3 --strategy "
        "best-response@0.2); default truthful",
    )
    sim.add_argument("--sellers", type=_count("sellers"), default=20, help="number of sellers")
    sim.add_argument("--rounds", type=_count("rounds"), default=3, help="number of rounds")
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
        default=1.0,
        help="share of sellers using the strategy; the rest are truthful",
    )
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
    sim.add_argument("--quiet", action="store_true", help="no progress bar (stderr)")
    sim.add_argument("--out", required=True, metavar="DIR", help="output folder")
    sim.set_defaults(func=cmd_simulate)

    for kind in ("mechanisms", "strategies"):
        lst = sub.add_parser(kind, help=f"list the registered {kind} (built-in and third-party)")
        lst.set_defaults(func=cmd_list, kind=kind)
    from .auditing import add_parser as _add_audit

    _add_audit(sub)
    from .egta import add_parser as _add_egta

    _add_egta(sub)

    from .equilibrium import add_parser as _add_bne

    _add_bne(sub)

    d = sub.add_parser(
        "demo",
        help="a small seeded market end to end, with a figure",
        description="Run one seeded market: costs, eps, payments, utilities, "
        "an IC and IR check, and a figure.",
    )
    d.add_argument(
        "--out",
        default="demo_output",
        metavar="DIR",
        help="folder for the figure (default demo_output)",
    )
    d.add_argument("--out-dir", dest="out", default=argparse.SUPPRESS, help=argparse.SUPPRESS)
    d.add_argument("--seed", type=int, default=0, help="random seed (default 0)")
    d.add_argument(
        "--sellers", type=_count("sellers"), default=200, help="number of sellers (default 200)"
    )
    d.add_argument(
        "--m", dest="sellers", type=_count("m"), default=argparse.SUPPRESS, help=argparse.SUPPRESS
    )
    d.set_defaults(func=cmd_demo)

    v = sub.add_parser(
        "viz",
        help="an interactive page for the market (needs the viz extra)",
        description="Serve Mesa's SolaraViz page for the market model: "
        "controls, step/play, live panels.",
    )
    v.add_argument("--host", default="127.0.0.1", help="address to serve on (default 127.0.0.1)")
    v.add_argument(
        "--port",
        type=_number("port", int, lambda v: 0 < v < 65536, "1..65535"),
        default=8765,
        help="port (default 8765)",
    )
    v.set_defaults(func=cmd_viz)
    return p


def cmd_viz(args) -> int:
    os.environ.setdefault("SOLARA_TELEMETRY_MIXPANEL_ENABLE", "False")  # before solara loads
    try:
        from . import viz
    except ImportError as exc:
        raise MarketSimError(
            f"market-sim viz needs the viz extra: pip install "
            f"'market_sim[viz]' (missing: {exc.name or exc})"
        ) from None
    viz.serve(args.host, args.port)
    return 0


# ---- input --------------------------------------------------------------------
def read_costs(path: str):
    """Read and validate a seller_id,cost CSV; returns (ids, costs)."""
    import pandas as pd

    p = Path(path)
    if not p.is_file():
        raise MarketSimError(f"{path}: no such file")
    try:
        df = pd.read_csv(
            p,
            dtype={"seller_id": str},
            encoding="utf-8-sig",
            keep_default_na=False,
            skipinitialspace=True,
        )
    except pd.errors.EmptyDataError:
        raise MarketSimError(f"{path}: the file is empty") from None
    except UnicodeDecodeError:
        raise MarketSimError(f"{path}: not UTF-8 text") from None
    except (pd.errors.ParserError, ValueError) as exc:
        msg = str(exc).splitlines()[0] if str(exc) else exc.__class__.__name__
        raise MarketSimError(f"{path}: not a valid CSV ({msg})") from None
    df.columns = [str(c).strip() for c in df.columns]
    for col in ("seller_id", "cost"):
        if col not in df.columns:
            raise MarketSimError(f"{path}: missing column '{col}' (need seller_id,cost)")
    if len(df) == 0:
        raise MarketSimError(f"{path}: no sellers")
    ids = df["seller_id"].astype(str).str.strip()
    if (ids == "").any():
        raise MarketSimError(f"{path}: empty seller_id on line {int(np.argmax(ids == '')) + 2}")
    dup = ids.duplicated()
    if dup.any():
        raise MarketSimError(f"{path}: duplicate seller_id {ids[dup].iloc[0]!r}")
    raw = df["cost"]
    if pd.api.types.is_numeric_dtype(raw) and not pd.api.types.is_bool_dtype(raw):
        costs = raw.to_numpy(float)
    else:  # something did not parse as a number: find it
        costs = pd.to_numeric(raw.astype(str).str.strip(), errors="coerce").to_numpy(float)
    bad = ~np.isfinite(costs)
    if bad.any():
        i = int(np.argmax(bad))
        raise MarketSimError(
            f"{path}: cost of seller {ids.iloc[i]!r} is not a finite number ({raw.iloc[i]!r})"
        )
    if (costs < 0).any():
        i = int(np.argmax(costs < 0))
        raise MarketSimError(f"{path}: cost of seller {ids.iloc[i]!r} is negative ({costs[i]:g})")
    return ids.to_numpy(), costs


def _json_value(v):
    if isinstance(v, (float, np.floating)):
        return float(v) if math.isfinite(v) else None
    if isinstance(v, np.integer):
        return int(v)
    return v


# ---- commands -------------------------------------------------------------------
def run_market(
    costs,
    dist,
    *,
    mu,
    sigma,
    gamma,
    k=None,
    n_quad=32,
    mechanism="offline",
    rule="fluid",
    planned_m=None,
    warn=None,
):
    """Run one market; returns (per-seller DataFrame without ids, summary dict).

    ``warn(text)`` is called once, before the payments, when they are expected to
    take far longer than usual (``market_sim.estimates``)."""
    import pandas as pd

    psi = dist.virtual_cost(costs)
    summary = {
        "mechanism": mechanism,
        "distribution": dist.spec,
        "m": int(costs.size),
        "mu": mu,
        "sigma": sigma,
        "gamma": gamma,
    }
    if mechanism == "offline":
        from .mechanisms.offline import solve
        from .mechanisms.payments import capped_oracle_compiled, offline_payments

        res = solve(psi, mu=mu, sigma=sigma, gamma=gamma, k=k)
        if warn is not None and k is not None and k < costs.size:
            compiled = capped_oracle_compiled()
            seconds = capped_offline_seconds(costs.size, res.n_bought, compiled=compiled)
            if seconds > SLOW_SECONDS:
                why = "" if compiled else " (without numba each payment re-solves the market)"
                warn(
                    f"the capped payments (--k) of {res.n_bought} bought sellers of "
                    f"{costs.size} will take {format_duration(seconds)} by the cost model"
                    f"{why}; without --k they take seconds"
                )
        eps, pay = offline_payments(
            costs, dist, mu=mu, sigma=sigma, gamma=gamma, k=k, n_quad=n_quad
        )
        a, eta, cutoff, loss = res.a, res.eta, res.lam, res.proxy_loss
        summary["k"] = k
    else:
        from .mechanisms.offline import proxy_loss_of_eps
        from .mechanisms.online import OnlineMechanism

        if k is not None:
            raise MarketSimError("--k applies to the offline mechanism only")
        planned = int(planned_m or costs.size)
        mech = OnlineMechanism(dist, planned, mu=mu, sigma=sigma, gamma=gamma, rule=rule)
        eps, pay = mech.eps(costs), mech.payments(costs)
        eta = float(eps.sum())
        a = eps / eta if eta > 0 else np.zeros_like(eps)
        cutoff = mech.cutoff
        loss = proxy_loss_of_eps(eps, psi, mu=mu, sigma=sigma, gamma=gamma)
        summary.update(rule=rule, planned_m=planned)
    table = pd.DataFrame(
        {
            "cost": costs,
            "virtual_cost": psi,
            "a": a,
            "eps": eps,
            "payment": pay,
            "utility": pay - costs * eps,
        }
    )
    summary.update(
        eta=eta,
        cutoff=cutoff,  # lambda, in gamma * psi units: bought iff gamma psi(c) < cutoff
        cutoff_cost=cutoff_cost(dist, cutoff, gamma),
        proxy_loss=loss,
        n_bought=int(np.count_nonzero(eps)),
        total_payment=float(pay.sum()),
        version=__version__,
    )
    return table, summary


def cutoff_cost(dist, cutoff: float, gamma: float) -> float:
    """The cost at which buying stops: the c with gamma psi(c) = cutoff (Eq. 13, 003),
    the top of the support when everybody is bought."""
    if not math.isfinite(cutoff):
        return float(dist.support[1])
    return float(dist.inverse_virtual_cost(np.array(cutoff / gamma)))


def _warn(text: str) -> None:
    print(f"market-sim: warning: {text}", file=sys.stderr, flush=True)


def cmd_solve(args) -> int:
    from .distributions import parse_distribution

    if args.n_quad < 2:
        raise MarketSimError("--n-quad must be >= 2")
    if args.out:
        check_writable_file(args.out)
    ids, costs = read_costs(args.costs)
    dist = parse_distribution(args.dist, iron=args.iron)
    dist.check_in_support(costs)
    if args.mechanism == "offline" and args.planned_m is not None:
        raise MarketSimError("--planned-m applies to the online mechanism only")
    table, summary = run_market(
        costs,
        dist,
        mu=args.mu,
        sigma=args.sigma,
        gamma=args.gamma,
        k=args.k,
        n_quad=args.n_quad,
        mechanism=args.mechanism,
        rule=args.rule,
        planned_m=args.planned_m,
        warn=_warn,
    )
    table.insert(0, "seller_id", ids)
    if args.json:
        doc = {
            "summary": {k: _json_value(v) for k, v in summary.items()},
            "sellers": [
                {k: _json_value(v) for k, v in row.items()}
                for row in table.to_dict(orient="records")
            ],
        }
        sys.stdout.write(json.dumps(doc) + "\n")
        return 0
    lines = "".join(f"{k}: {_json_value(v)}\n" for k, v in summary.items())
    if args.out:
        _atomic_write(args.out, lambda fh: _write_csv(table, fh))
        sys.stdout.write(lines)
    else:
        sys.stdout.flush()
        _write_csv(table, sys.stdout.buffer)
        sys.stdout.buffer.flush()
        sys.stderr.write(lines)
    return 0


def _write_csv(table, fh) -> None:
    """CSV with shortest round-trip floats (pyarrow: ~10x faster than pandas)."""
    import pyarrow as pa
    import pyarrow.csv as pacsv

    plain = not table["seller_id"].str.contains('[,"\r\n]', regex=True).any()
    fh.write((",".join(table.columns) + "\n").encode())
    pacsv.write_csv(
        pa.Table.from_pandas(table, preserve_index=False),
        fh,
        pacsv.WriteOptions(include_header=False, quoting_style="none" if plain else "needed"),
    )


STREAM_COLUMNS = ["seller_id", "cost", "virtual_cost", "eps", "payment", "utility", "error"]


def cmd_online_stream(args) -> int:
    import csv

    from .distributions import parse_distribution
    from .mechanisms.online import OnlineMechanism

    dist = parse_distribution(args.dist, iron=args.iron)
    mech = OnlineMechanism(
        dist, args.planned_m, mu=args.mu, sigma=args.sigma, gamma=args.gamma, rule=args.rule
    )
    out = csv.writer(sys.stdout, lineterminator="\n")
    out.writerow(STREAM_COLUMNS)
    sys.stdout.flush()
    seen: set[str] = set()
    for lineno, row in _stream_rows(sys.stdin.buffer):
        _, record = answer_stream_row(mech, row, lineno, seen)
        if record is not None:
            out.writerow(record)
            sys.stdout.flush()
    return 0


def _stream_rows(stream):
    """(line number, fields) of each non-empty line of a binary stream, read one
    line at a time (a live feed is answered as it comes); bad lines give None."""
    import csv

    for lineno, raw in enumerate(iter(stream.readline, b""), start=1):
        try:
            line = raw.decode("utf-8-sig" if lineno == 1 else "utf-8")
        except UnicodeDecodeError:
            yield lineno, None
            continue
        if not line.strip():
            continue
        try:
            yield lineno, next(csv.reader([line]))
        except csv.Error:
            yield lineno, None


def answer_stream_row(mech, row, lineno, seen):
    """One output record for one input line of online-stream."""

    def error(sid, msg):
        return sid, [sid, "", "", "", "", "", f"line {lineno}: {msg}"]

    if row is None:
        return error("", "not UTF-8 CSV")
    fields = [f.strip() for f in row]
    if lineno == 1 and fields == ["seller_id", "cost"]:
        return None, None  # the optional header
    if len(fields) != 2:
        return error(
            fields[0] if fields else "", f"expected 2 fields seller_id,cost, got {len(fields)}"
        )
    sid, text = fields
    if not sid:
        return error("", "empty seller_id")
    if sid in seen:
        return error(sid, "duplicate seller_id")
    try:
        cost = float(text)
    except ValueError:
        return error(sid, f"cost {text!r} is not a number")
    lo, hi = mech.dist.support
    if not (np.isfinite(cost) and lo <= cost <= hi):
        return error(sid, f"cost {text} is outside the support [{lo:g}, {hi:g}]")
    seen.add(sid)
    c = np.array([cost])
    psi = float(mech.dist.virtual_cost(c)[0])
    eps = float(mech.eps(c)[0])
    pay = float(mech.payments(c)[0])
    return sid, [sid, repr(cost), repr(psi), repr(eps), repr(pay), repr(pay - cost * eps), ""]


def cmd_run(args) -> int:
    import re

    from .runner import parse_overrides, run_scenario

    default = Path(args.scenario).stem if args.scenario.endswith(".py") else args.scenario
    out = args.out or "results/" + re.sub(r"[^\w.-]+", "_", default)
    try:
        res = run_scenario(
            args.scenario,
            out,
            seed=args.seed,
            quick=args.quick,
            reps=args.reps,
            workers=args.workers,
            executor=args.executor,
            address=args.address,
            overrides=parse_overrides(args.overrides),
            progress=not args.quiet,
        )
    except KeyboardInterrupt:
        print(
            f"market-sim: interrupted; finished tasks are in {out}/results; run the same "
            f"command to resume",
            file=sys.stderr,
        )
        return 130
    print(
        f"{res.total} tasks: {res.skipped} already done, {res.ran} run, {res.failed} failed; "
        f"results in {out}/results"
    )
    for reason, count, first in res.failures:  # one line per distinct reason
        noun = "task" if count == 1 else "tasks"
        print(f"{count} {noun} failed: {reason} (first: {first})", file=sys.stderr)
    return 1 if res.failed else 0


def cmd_scenarios(args) -> int:
    from .runner import list_scenarios

    for name, doc, origin in list_scenarios():
        print(f"{name:24s} {doc}" + ("" if origin == "built-in" else f"  [{origin}]"))
    return 0


def cmd_report(args) -> int:
    from market_sim.analysis.report import write_index, write_report

    if len(args.results) > 1 and args.out is None:
        raise MarketSimError("report: --out is needed with several results folders")
    check_writable_folder(args.out or str(Path(args.results[0]) / "report"))
    if len(args.results) > 1:
        path = write_index(args.results, args.out)
    else:
        path = write_report(args.results[0], args.out)
    print(f"report written to {path} (and report.html)")
    return 0


def _parse_release(text):
    from .privacy.release import StatisticRelease

    if text is None:
        return None
    parts = text.split(":")
    try:
        nums = [float(v) for v in parts[1:]]
    except ValueError:
        raise MarketSimError(
            f"--release {text!r}: expected NOISE:EPS[:DELTA] with numbers"
        ) from None
    if len(nums) not in (1, 2):
        raise MarketSimError(f"--release {text!r}: expected NOISE:EPS[:DELTA]")
    return StatisticRelease(parts[0], *nums)


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


def cmd_list(args) -> int:
    from . import registry

    reg = registry.MECHANISMS if args.kind == "mechanisms" else registry.STRATEGIES
    for name, doc, origin in reg.describe():
        print(f"{name:22s} {doc}" + ("" if origin == "built-in" else f"  [{origin}]"))
    return 0


def _check_simulate_out(out: Path) -> None:
    """Before any work: a writable folder that is not a sweep of ``market-sim run``."""
    from .runner import folder_kind

    check_writable_folder(out)
    if folder_kind(out) == "run":
        raise MarketSimError(
            f"{out} holds a sweep of `market-sim run` (its manifest or results); "
            f"choose another --out for a simulation"
        )


def _warn_if_slow_simulation(model, args) -> None:
    """One warning line when the cost model (market_sim.estimates) expects a long run."""
    from .mechanisms.builtin import DataDependentMechanism, OfflineMechanism, PayAsBidMechanism

    mech, m, regret = model.mechanism, model.n_sellers, model.measure_regret
    k = getattr(mech, "k", None)
    if isinstance(mech, (OfflineMechanism, PayAsBidMechanism)) and k is not None and k < m:
        from .mechanisms.payments import capped_oracle_compiled

        compiled = capped_oracle_compiled()
        paid = math.ceil(m / k) if isinstance(mech, OfflineMechanism) else 0  # at least m/k bought
        curves = m if regret else 0
        seconds = args.rounds * capped_offline_seconds(m, paid, curves, compiled=compiled)
        faster = "without the cap k (seconds)"
        if regret and paid:
            quick = args.rounds * capped_offline_seconds(m, paid, compiled=compiled)
            faster += f", or --no-regret ({format_duration(quick)})"
    elif isinstance(mech, DataDependentMechanism):
        per_round = data_dependent_round_seconds(
            m, regret=regret, n_nodes=mech.n_nodes, n_grid=model.n_grid
        )
        seconds = args.rounds * per_round
        faster = "fewer --sellers or --rounds"
        if regret:
            quick = args.rounds * data_dependent_round_seconds(
                m, regret=False, n_nodes=mech.n_nodes, n_grid=model.n_grid
            )
            faster = f"--no-regret ({format_duration(quick)}), or " + faster
    else:
        return
    if seconds > SLOW_SECONDS:
        _warn(
            f"this simulation will take {format_duration(seconds)} by the cost model "
            f"({m} sellers, {args.rounds} round{'s' if args.rounds != 1 else ''} of "
            f"{model.mechanism_name}); faster: {faster}"
        )


def _write_simulate_manifest(out: Path, args, model, files) -> None:
    """OUT/manifest.json: what ran (parameters, seed, version, command, time)."""
    import shlex
    from datetime import UTC, datetime

    from .runner import _code_version

    params = {k: v for k, v in vars(args).items() if k not in ("func", "argv", "command")}
    manifest = {
        "kind": "simulate",
        "command": "market-sim " + shlex.join(getattr(args, "argv", [])),
        "parameters": params,
        "seed": args.seed,
        "mechanism": model.mechanism_name,
        "strategies": list(model.strategy_names),
        "version": _code_version(),
        "time": datetime.now(UTC).isoformat(timespec="seconds"),
        "files": files,
    }
    _atomic_write(
        str(out / "manifest.json"),
        lambda fh: fh.write(json.dumps(manifest, indent=1, default=str).encode()),
    )


def cmd_simulate(args) -> int:
    from .agents import MarketModel
    from .distributions import parse_distribution

    dist = parse_distribution(args.dist, iron=args.iron)
    strategy, fraction = _strategy_arg(args.strategy)
    out = Path(args.out)
    _check_simulate_out(out)
    model = MarketModel(
        args.sellers,
        dist=dist,
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
        privacy=args.privacy,
        release=_parse_release(args.release),
        payment_bound=args.payment_bound,
        measure_regret=not args.no_regret,
    )
    _warn_if_slow_simulation(model, args)
    from tqdm import tqdm

    with tqdm(
        total=args.rounds, desc="rounds", unit="round", file=sys.stderr, disable=args.quiet or None
    ) as bar:
        while model.running:
            model.step()
            bar.update(1)
    model_df, agent_df = model.model_frame(), model.agent_frame()
    out.mkdir(parents=True, exist_ok=True)
    _atomic_write(
        str(out / "agents.csv"), lambda fh: fh.write(agent_df.to_csv(index=False).encode())
    )
    _atomic_write(
        str(out / "model.csv"), lambda fh: fh.write(model_df.to_csv(index=False).encode())
    )
    from market_sim.analysis.simulation import animate_simulation, plot_simulation

    label = args.mechanism if len(args.mechanism) < 40 else model.mechanism_name
    plot_simulation(
        agent_df,
        model_df,
        out / "simulation.png",
        f"{label}, {', '.join(model.strategy_names)}, {args.sellers} sellers",
        data=args.data,
    )
    if args.animate:
        animate_simulation(agent_df, out / "simulation.gif")
    files = ["agents.csv", "model.csv", "simulation.png"] + (
        ["simulation.gif"] if args.animate else []
    )
    _write_simulate_manifest(out, args, model, files)
    print(model_df.to_string(index=False))
    print(f"written to {out}: {', '.join(files)}, manifest.json")
    return 0


def cmd_demo(args) -> int:
    from .demo import run_demo

    if args.sellers < 2:
        raise MarketSimError("--sellers must be >= 2")
    check_writable_folder(args.out)
    run_demo(out_dir=args.out, seed=args.seed, m=args.sellers)
    return 0


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


if __name__ == "__main__":
    sys.exit(main())
