"""``market-sim online-stream``: the online mechanism (Alg. 3, 003) answering a live feed."""

from __future__ import annotations

import csv
import sys

import numpy as np

from .arguments import count, market_parent, online_parent


def add_parser(subparsers):
    o = subparsers.add_parser(
        "online-stream",
        parents=[market_parent(), online_parent()],
        help="answer a live feed of sellers, one CSV line at a time",
        description="Read seller_id,cost lines from stdin (a header line is "
        "optional) and write each decision at once: seller_id,cost,virtual_cost,"
        "eps,payment,utility,error. A bad line gets an error record and the "
        "stream goes on.",
    )
    o.add_argument(
        "--planned-m",
        type=count("planned-m"),
        required=True,
        help="the number of sellers the platform plans for",
    )
    o.set_defaults(func=run)
    return o


STREAM_COLUMNS = ["seller_id", "cost", "virtual_cost", "eps", "payment", "utility", "error"]


def run(args) -> int:
    from ..distributions import parse_distribution
    from ..mechanisms.online import OnlineMechanism

    dist = parse_distribution(args.dist, iron=args.iron)
    mech = OnlineMechanism(
        dist, args.planned_m, mu=args.mu, sigma=args.sigma, gamma=args.gamma, rule=args.rule
    )
    out = csv.writer(sys.stdout, lineterminator="\n")
    out.writerow(STREAM_COLUMNS)
    sys.stdout.flush()
    seen: set[str] = set()
    for lineno, row in stream_rows(sys.stdin.buffer):
        _, record = answer_stream_row(mech, row, lineno, seen)
        if record is not None:
            out.writerow(record)
            sys.stdout.flush()
    return 0


def stream_rows(stream):
    """(line number, fields) of each non-empty line of a binary stream, read one
    line at a time (a live feed is answered as it comes); bad lines give None."""

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
