"""``market-sim viz``: Mesa's interactive page for the market (needs the viz extra)."""

from __future__ import annotations

import os

from ..errors import MarketSimError
from .arguments import number


def add_parser(subparsers):
    v = subparsers.add_parser(
        "viz",
        help="an interactive page for the market (needs the viz extra)",
        description="Serve Mesa's SolaraViz page for the market model: "
        "controls, step/play, live panels.",
    )
    v.add_argument("--host", default="127.0.0.1", help="address to serve on (default 127.0.0.1)")
    v.add_argument(
        "--port",
        type=number("port", int, lambda v: 0 < v < 65536, "1..65535"),
        default=8765,
        help="port (default 8765)",
    )
    v.set_defaults(func=run)
    return v


def run(args) -> int:
    os.environ.setdefault("SOLARA_TELEMETRY_MIXPANEL_ENABLE", "False")  # before solara loads
    try:
        from .. import viz
    except ImportError as exc:
        raise MarketSimError(
            f"market-sim viz needs the viz extra: pip install "
            f"'market_sim[viz]' (missing: {exc.name or exc})"
        ) from None
    viz.serve(args.host, args.port)
    return 0
