"""The ``market-sim`` command.

    market-sim solve --costs costs.csv --dist uniform:0:1 [--mu 1 --sigma 1 --gamma 1] [--k K]
                     [--out sellers.csv | --json]
    market-sim demo  [--out-dir demo_output] [--seed 0] [--m 200]

User mistakes end with one line on stderr and exit status 2; nothing is
written when the input is rejected.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import tempfile
from pathlib import Path

import numpy as np

from . import __version__
from .errors import MarketSimError

EXIT_USAGE = 2


class _Parser(argparse.ArgumentParser):
    def error(self, message):  # one line, no usage dump
        print(f"market-sim: error: {message}", file=sys.stderr)
        sys.exit(EXIT_USAGE)


def _positive(name):
    def conv(text):
        try:
            v = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{name} must be a number (got {text!r})") from None
        if not (math.isfinite(v) and v > 0):
            raise argparse.ArgumentTypeError(f"{name} must be a finite number > 0 (got {text!r})")
        return v
    return conv


def _k_value(text):
    try:
        v = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"k must be a number (got {text!r})") from None
    if not (math.isfinite(v) and v >= 1):
        raise argparse.ArgumentTypeError(f"k must be >= 1 (got {text!r})")
    return v


def build_parser() -> argparse.ArgumentParser:
    p = _Parser(prog="market-sim", description="A testbed for privacy data markets "
                "(offline mechanism of Fallah et al.; see README).")
    p.add_argument("--version", action="version", version=f"market-sim {__version__}")
    sub = p.add_subparsers(dest="command", required=True, parser_class=_Parser)

    s = sub.add_parser("solve", help="privacy levels and Myerson payments for reported costs",
                       description="Solve the offline mechanism (Alg. 2, Eq. 11 of 003) exactly "
                       "and compute Myerson payments (Eq. 8) for the sellers in a CSV.")
    s.add_argument("--costs", required=True, metavar="FILE.csv",
                   help="CSV with columns seller_id,cost (one row per seller)")
    s.add_argument("--dist", required=True, metavar="SPEC",
                   help="cost distribution, e.g. uniform:0:1, truncnorm:MEAN:SD:LOW:HIGH, "
                   "beta:A:B:LOW:HIGH, truncexpon:SCALE:LOW:HIGH, empirical:FILE.csv")
    s.add_argument("--iron", action="store_true",
                   help="use Myerson ironing if the distribution is not regular")
    s.add_argument("--mu", type=_positive("mu"), default=1.0,
                   help="weight of the ||a|| term (generalisation), default 1")
    s.add_argument("--sigma", type=_positive("sigma"), default=1.0,
                   help="weight of the 1/eta term (privacy noise), default 1")
    s.add_argument("--gamma", type=_positive("gamma"), default=1.0,
                   help="weight of the payments, default 1")
    s.add_argument("--k", type=_k_value, default=None,
                   help="cap a_i <= k/m (Remark IV.1); default: no cap")
    s.add_argument("--mechanism", choices=["offline"], default="offline",
                   help="mechanism to run (default offline)")
    s.add_argument("--n-quad", type=int, default=32,
                   help="Gauss-Legendre nodes for the payment integral (default 32)")
    out = s.add_mutually_exclusive_group()
    out.add_argument("--out", metavar="FILE.csv",
                     help="write the per-seller table here; the summary goes to stdout")
    out.add_argument("--json", action="store_true",
                     help="print one JSON document {summary, sellers} on stdout")
    s.set_defaults(func=cmd_solve)

    d = sub.add_parser("demo", help="a small seeded market end to end, with a figure",
                       description="Run one seeded market: costs, eps, payments, utilities, "
                       "an IC and IR check, and a figure.")
    d.add_argument("--out-dir", default="demo_output", help="folder for the figure")
    d.add_argument("--seed", type=int, default=0, help="random seed (default 0)")
    d.add_argument("--m", type=int, default=200, help="number of sellers (default 200)")
    d.set_defaults(func=cmd_demo)
    return p


# ---- input --------------------------------------------------------------------
def read_costs(path: str):
    """Read and validate a seller_id,cost CSV; returns (ids, costs)."""
    import pandas as pd

    p = Path(path)
    if not p.is_file():
        raise MarketSimError(f"{path}: no such file")
    try:
        df = pd.read_csv(p, dtype={"seller_id": str}, encoding="utf-8-sig",
                         keep_default_na=False, skipinitialspace=True)
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
        raise MarketSimError(f"{path}: cost of seller {ids.iloc[i]!r} is not a finite number "
                             f"({raw.iloc[i]!r})")
    if (costs < 0).any():
        i = int(np.argmax(costs < 0))
        raise MarketSimError(f"{path}: cost of seller {ids.iloc[i]!r} is negative ({costs[i]:g})")
    return ids.to_numpy(), costs


def _atomic_write(path: str, write) -> None:
    """Write through ``write(binary_file)`` to a temporary file, then rename:
    a failure leaves no partial output."""
    target = Path(path)
    if not target.parent.exists():
        raise MarketSimError(f"{path}: folder {str(target.parent)!r} does not exist")
    fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as fh:
            write(fh)
        os.replace(tmp, target)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def _json_value(v):
    if isinstance(v, (float, np.floating)):
        return float(v) if math.isfinite(v) else None
    if isinstance(v, np.integer):
        return int(v)
    return v


# ---- commands -------------------------------------------------------------------
def run_market(costs, dist, *, mu, sigma, gamma, k=None, n_quad=32):
    """Solve one market; returns (per-seller DataFrame without ids, summary dict)."""
    import pandas as pd

    from .mechanisms.offline import solve
    from .mechanisms.payments import offline_payments

    psi = dist.virtual_cost(costs)
    res = solve(psi, mu=mu, sigma=sigma, gamma=gamma, k=k)
    eps, pay = offline_payments(costs, dist, mu=mu, sigma=sigma, gamma=gamma, k=k, n_quad=n_quad)
    table = pd.DataFrame({"cost": costs, "virtual_cost": psi, "a": res.a, "eps": eps,
                          "payment": pay, "utility": pay - costs * eps})
    summary = {
        "mechanism": "offline", "distribution": dist.spec, "m": int(costs.size),
        "mu": mu, "sigma": sigma, "gamma": gamma, "k": k,
        "eta": res.eta, "cutoff": res.lam, "proxy_loss": res.proxy_loss,
        "n_bought": res.n_bought, "total_payment": float(pay.sum()),
        "version": __version__,
    }
    return table, summary


def cmd_solve(args) -> int:
    from .distributions import parse_distribution

    if args.n_quad < 2:
        raise MarketSimError("--n-quad must be >= 2")
    ids, costs = read_costs(args.costs)
    dist = parse_distribution(args.dist, iron=args.iron)
    dist.check_in_support(costs)
    table, summary = run_market(costs, dist, mu=args.mu, sigma=args.sigma, gamma=args.gamma,
                                k=args.k, n_quad=args.n_quad)
    table.insert(0, "seller_id", ids)
    if args.json:
        doc = {"summary": {k: _json_value(v) for k, v in summary.items()},
               "sellers": [{k: _json_value(v) for k, v in row.items()}
                           for row in table.to_dict(orient="records")]}
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
    pacsv.write_csv(pa.Table.from_pandas(table, preserve_index=False), fh,
                    pacsv.WriteOptions(include_header=False,
                                       quoting_style="none" if plain else "needed"))


def cmd_demo(args) -> int:
    from .demo import run_demo

    if args.m < 2:
        raise MarketSimError("--m must be >= 2")
    run_demo(out_dir=args.out_dir, seed=args.seed, m=args.m)
    return 0


def main(argv=None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return args.func(args)
    except MarketSimError as exc:
        print(f"market-sim: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        print("market-sim: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
