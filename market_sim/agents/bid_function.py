"""The ``bne`` strategy: every seller reports b_g(c), a given bid function of its class g.

``bne:path/to/bid.csv`` (or ``bne:DIR``, the folder ``market-sim bne --out DIR`` wrote)
reads the table ``group,cost,bid`` of that command; ``as_strategy(result)`` takes a
:class:`~market_sim.games.equilibrium.BNEResult` in Python.  Between the grid costs the bid is
linear (as ``BNEResult.bid``); the report is clipped to the market's support.  With
several classes each seller plays its class's column; a table of one class is played by
every seller.
"""

from __future__ import annotations

import csv
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import ClassVar

import numpy as np

from ..errors import MarketSimError
from .strategies import Strategy, _clip

__all__ = ["BidFunction", "read_bid_table"]

#: one class's bid function: its grid costs (increasing) and the bids there
Table = tuple[np.ndarray, np.ndarray]


@dataclass
class BidFunction(Strategy):
    """Report a given bid function of the cost, one per class (a BNE's: `market-sim bne`)."""

    name: ClassVar[str] = "bne"
    #: ``bne:VALUE`` (a value without ``key=``) gives this parameter
    spec_argument: ClassVar[str] = "path"
    path: str = ""
    tables: tuple[Table, ...] = field(default=(), repr=False)

    def __post_init__(self):
        if not self.tables:
            if not self.path:
                raise MarketSimError("bne: give the bid table, e.g. bne:DIR/bid.csv")
            self.tables = read_bid_table(self.path)

    @classmethod
    def of_tables(cls, tables) -> BidFunction:
        """From (grid costs, bids) per class (``BNEResult.bid_tables()``)."""
        return cls(tables=tuple(_checked(c, b, f"class {g}") for g, (c, b) in enumerate(tables)))

    def bid(self, costs, group: int = 0) -> np.ndarray:
        """Class ``group``'s bids at ``costs`` (a table of one class: every class's),
        linear between the grid costs; a cost outside the table is an error."""
        grid, bids = self.tables[int(group) if len(self.tables) > 1 else 0]
        c = np.asarray(costs, dtype=float)
        slack = 1e-9 * max(1.0, grid[-1] - grid[0])
        if c.size and (c.min() < grid[0] - slack or c.max() > grid[-1] + slack):
            bad = c.min() if c.min() < grid[0] - slack else c.max()
            raise MarketSimError(
                f"bne: the bid table{_of(int(group), self.tables)} covers costs [{grid[0]:g}, "
                f"{grid[-1]:g}]; a seller's cost is {bad:g} (a bid function for another "
                "cost law?)"
            )
        return np.interp(c, grid, bids)

    def report_all(self, sellers, model):
        groups = self._groups_of(sellers, model)
        out = np.empty(len(sellers))
        for g in range(len(self.tables)):
            mine = groups == g
            out[mine] = self.bid(sellers.cost[mine], g)
        return _clip(model, out)

    def _groups_of(self, sellers, model) -> np.ndarray:
        """Each seller's column of the table: its class, or 0 for a table of one class."""
        if len(self.tables) == 1:
            return np.zeros(len(sellers), dtype=int)
        classes = int(np.max(model.group)) + 1
        if classes != len(self.tables):
            raise MarketSimError(
                f"bne: the bid table has {len(self.tables)} classes, the market {classes} "
                "(give the sellers as a population of as many classes)"
            )
        return np.asarray(model.group)[sellers.ids]


def _of(g: int, tables) -> str:
    return f" of class {g}" if len(tables) > 1 else ""


def read_bid_table(path) -> tuple[Table, ...]:
    """The bid functions of ``market-sim bne``'s bid.csv (columns group, cost, bid; group
    may be left out for one class), one (costs, bids) per class 0, 1, ...; a folder
    means its bid.csv.  Any problem: one line naming the file."""
    p = Path(path)
    p = p / "bid.csv" if p.is_dir() else p
    try:
        with open(p, newline="", encoding="utf-8") as fh:
            rows = list(csv.DictReader(fh))
    except FileNotFoundError:
        raise MarketSimError(f"bne: {p}: no such file (the bid.csv of market-sim bne)") from None
    except (OSError, UnicodeDecodeError, csv.Error) as exc:
        raise MarketSimError(f"bne: {p}: cannot be read as CSV ({exc})") from None
    columns = list(rows[0]) if rows else []
    if "cost" not in columns or "bid" not in columns:
        raise MarketSimError(
            f"bne: {p}: needs the columns cost and bid (and group for several classes, as "
            f"market-sim bne writes: group,cost,bid); has {_listed(columns) or 'no rows'}"
        )
    by_group: dict[int, list[tuple[float, float]]] = {}
    for line, row in enumerate(rows, start=2):
        g, c, b = (_number(p, line, row.get(k, "0")) for k in ("group", "cost", "bid"))
        if g != int(g) or g < 0:
            raise MarketSimError(f"bne: {p}, line {line}: group {g:g} is not a class number")
        by_group.setdefault(int(g), []).append((c, b))
    if sorted(by_group) != list(range(len(by_group))):
        raise MarketSimError(f"bne: {p}: the groups must be 0, 1, ... (got {sorted(by_group)})")
    tables = (np.array(sorted(by_group[g])).T for g in sorted(by_group))
    return tuple(_checked(c, b, f"{p}, group {g}") for g, (c, b) in enumerate(tables))


def _listed(columns) -> str:
    """The first columns of a table, on one line (a garbled file's may be anything)."""
    return ", ".join(repr(str(c))[:40] for c in columns[:6]) + (", ..." if len(columns) > 6 else "")


def _number(path, line: int, text) -> float:
    try:
        x = float(text)
    except (TypeError, ValueError):
        raise MarketSimError(f"bne: {path}, line {line}: {text!r} is not a number") from None
    if not math.isfinite(x):
        raise MarketSimError(f"bne: {path}, line {line}: {text!r} is not a finite number")
    return x


def _checked(costs: np.ndarray, bids: np.ndarray, where) -> Table:
    costs, bids = np.asarray(costs, dtype=float), np.asarray(bids, dtype=float)
    if costs.size < 2 or costs.shape != bids.shape:
        raise MarketSimError(f"bne: {where}: a bid function needs bids at 2 costs or more")
    if np.any(np.diff(costs) <= 0):
        raise MarketSimError(f"bne: {where}: a cost is listed twice")
    return costs, bids
