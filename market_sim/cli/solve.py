"""``market-sim solve``: privacy levels and Myerson payments for the sellers in a CSV."""

from __future__ import annotations

import json
import math
import sys

from ..errors import MarketSimError
from ..files import atomic_write, check_writable_file, json_plain
from .arguments import count, market_parent, number, online_parent, warn


def add_parser(subparsers):
    s = subparsers.add_parser(
        "solve",
        parents=[market_parent(), online_parent()],
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
        type=number("k", float, lambda v: math.isfinite(v) and v >= 1, ">= 1"),
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
        type=count("planned-m"),
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
    s.set_defaults(func=run)
    return s


def run(args) -> int:
    from ..distributions import parse_distribution
    from ..markets import read_costs, run_market

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
        warn=warn,
    )
    table.insert(0, "seller_id", ids)
    if args.json:
        doc = {
            "summary": {k: json_plain(v) for k, v in summary.items()},
            "sellers": [
                {k: json_plain(v) for k, v in row.items()}
                for row in table.to_dict(orient="records")
            ],
        }
        sys.stdout.write(json.dumps(doc) + "\n")
        return 0
    lines = "".join(f"{k}: {json_plain(v)}\n" for k, v in summary.items())
    if args.out:
        atomic_write(args.out, lambda fh: _write_csv(table, fh))
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
