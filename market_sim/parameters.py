"""Declared parameters of a study: what ``market-sim run STUDY --set key=value`` accepts.

A study may define ``PARAMS``, a dict from grid parameter to a declaration::

    from market_sim.parameters import Choice, Distribution, Number, Registered

    PARAMS = {
        "mechanism": Registered("mechanism"),   # offline, online, ... or module:Class
        "dist": Distribution(),                  # a spec parse_distribution accepts
        "sellers": Number(int, low=1),
        "gamma": Number(float, low=0, low_open=True),
        "mapping": Choice("independent", "sorted"),
    }

A declaration has ``allowed`` (the allowed values, in words), ``doc`` (what the
parameter means, one line: ``Number(float, low=0, doc="...")``; names that many
studies share have a common meaning, ``COMMON_MEANINGS``) and ``check(value)``,
which raises ``ValueError`` (or ``MarketSimError``) with the reason when the value is
refused.  A plain tuple or list is a :class:`Choice`; any other callable is a check
of its own (it raises to refuse).  The runner checks every ``--set`` value against
its declaration before any task starts, by building what the value names (a
distribution is parsed, a mechanism or strategy is loaded); a refused value is one
line naming the parameter and what it allows.  Parameters without a declaration
are still checked against the type of the grid's values.
"""

from __future__ import annotations

import difflib
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from .errors import MarketSimError

__all__ = [
    "Choice",
    "Number",
    "Distribution",
    "Registered",
    "as_declaration",
    "check_value",
    "meaning",
]

# What the parameters that many studies share mean; a declaration's own ``doc`` wins.
COMMON_MEANINGS = {
    "mechanism": "the platform's mechanism (market-sim mechanisms)",
    "strategy": "the strategic sellers' strategy (market-sim strategies)",
    "learner": "the learning sellers' strategy (market-sim strategies)",
    "dist": "the sellers' cost law",
    "m": "number of sellers",
    "sellers": "number of sellers",
    "rounds": "rounds of the market per task",
    "mu": "weight of the weights' norm (mu*||a|| in Eq. 11, mu*||a||^2 in Eq. 17 of 003)",
    "sigma": "price of the privacy noise, sigma/eta with eta = sum eps (Eq. 11, 003)",
    "gamma": "weight of the expected payments in the buyer's loss (Eq. 11, 003)",
    "reg_lambda": "Lambda, the logistic regression's L2 penalty (Eq. 17, 003)",
    "strategic_fraction": "share of the sellers that play the strategy (the rest are truthful)",
    "new_costs": "redraw the sellers' costs every round (the Bayesian game of a BNE)",
    "measure_regret": "measure each round's ex-post regret of the learners",
    "budget": "each seller's lifetime privacy budget, EPS or EPS:DELTA",
}


def check_int(label: str, v, least: int) -> int:
    """``v`` as an int, refused (one line naming ``label``) unless an integer >= ``least``
    (a float with an integral value counts; a bool does not)."""
    ok = not isinstance(v, bool) and isinstance(v, (int, float, np.integer, np.floating))
    if not ok or not math.isfinite(float(v)) or float(v) != int(v) or int(v) < least:
        raise MarketSimError(f"{label} must be an integer >= {least} (got {v!r})")
    return int(v)


@dataclass(frozen=True)
class Choice:
    """One of a fixed set of values."""

    values: tuple
    doc: str = ""

    def __init__(self, *values, doc: str = ""):
        object.__setattr__(self, "values", tuple(values))
        object.__setattr__(self, "doc", doc)

    @property
    def allowed(self) -> str:
        return "one of " + ", ".join(str(v) for v in self.values)

    def check(self, value) -> None:
        if isinstance(value, bool) or value not in self.values:
            close = difflib.get_close_matches(str(value), [str(v) for v in self.values], n=1)
            raise ValueError(f"did you mean {close[0]!r}?" if close else "")


@dataclass(frozen=True)
class Number:
    """An ``int`` or ``float`` in [low, high] (an end is open when ``*_open``)."""

    kind: type = float
    low: float | None = None
    high: float | None = None
    low_open: bool = False
    high_open: bool = False
    doc: str = ""

    @property
    def allowed(self) -> str:
        noun = "an integer" if self.kind is int else "a number"
        bounds = []
        if self.low is not None:
            bounds.append(f"{'>' if self.low_open else '>='} {self.low:g}")
        if self.high is not None:
            bounds.append(f"{'<' if self.high_open else '<='} {self.high:g}")
        return noun + (" " + " and ".join(bounds) if bounds else "")

    def check(self, value) -> None:
        """Raise ValueError (no message: ``allowed`` says it all) when out of range."""
        ok = not isinstance(value, bool) and isinstance(value, (int, float))
        ok = ok and (self.kind is not int or isinstance(value, int)) and math.isfinite(value)
        if ok and self.low is not None:
            ok = value > self.low if self.low_open else value >= self.low
        if ok and self.high is not None:
            ok = value < self.high if self.high_open else value <= self.high
        if not ok:
            raise ValueError()


_DIST_SPECS = (
    "uniform:LOW:HIGH, truncnorm:MEAN:SD:LOW:HIGH, beta:A:B:LOW:HIGH, "
    "truncexpon:SCALE:LOW:HIGH or empirical:FILE.csv"
)


@dataclass(frozen=True)
class Distribution:
    """A cost distribution spec; checked by parsing it (``parse_distribution``)."""

    doc: str = ""

    @property
    def allowed(self) -> str:
        return f"a cost distribution ({_DIST_SPECS}, optionally +iron)"

    def check(self, value) -> None:
        from .distributions import parse_distribution

        if not isinstance(value, str):
            raise ValueError("not a text spec")
        try:
            parse_distribution(value)
        except MarketSimError as exc:
            raise ValueError(str(exc).split("; use one of")[0]) from None


@dataclass(frozen=True)
class Registered:
    """A name or spec of a registry (``"mechanism"`` or ``"strategy"``), or
    ``module:Class`` / ``path/to/file.py:Class``; checked by loading it."""

    kind: str
    doc: str = ""

    def _registry(self):
        from . import registry

        regs = {"mechanism": registry.MECHANISMS, "strategy": registry.STRATEGIES}
        if self.kind not in regs:
            raise MarketSimError(f"Registered({self.kind!r}): use 'mechanism' or 'strategy'")
        return regs[self.kind]

    @property
    def allowed(self) -> str:
        names = ", ".join(self._registry().names())
        return f"a registered {self.kind} ({names}) or module:Class"

    def check(self, value) -> None:
        if not isinstance(value, str):
            raise ValueError("not a name")
        try:
            name, _ = self._registry().parse(value)
            self._registry().load(name)
        except MarketSimError as exc:
            raise ValueError(str(exc).split(" (known:")[0].removeprefix(f"{self.kind}: ")) from None


@dataclass(frozen=True)
class _Custom:
    fn: Callable[[Any], object]
    doc: str = ""

    @property
    def allowed(self) -> str:
        doc = (getattr(self.fn, "__doc__", None) or "").strip().splitlines()
        name = getattr(self.fn, "__name__", "its check")
        return doc[0].rstrip(".") if doc else f"accepted by {name}"

    def check(self, value) -> None:
        self.fn(value)


def meaning(key: str, decl) -> str:
    """The one-line meaning of parameter ``key``: its declaration's ``doc``, else the
    common meaning of that name, else ''."""
    doc = getattr(decl, "doc", "") or ""
    return doc or COMMON_MEANINGS.get(key, "")


def as_declaration(decl):
    """A declaration from what a study's ``PARAMS`` holds (see the module docstring)."""
    if isinstance(decl, (tuple, list)):
        return Choice(*decl)
    if hasattr(decl, "check") and hasattr(decl, "allowed"):
        return decl
    if callable(decl):
        return _Custom(decl)
    raise MarketSimError(
        f"PARAMS: {decl!r} is not a declaration (a tuple of choices, Number, "
        f"Distribution, Registered or a function that raises)"
    )


def check_value(key: str, value, decl) -> None:
    """Refuse ``value`` of parameter ``key`` in one line when ``decl`` refuses it."""
    decl = as_declaration(decl)
    try:
        decl.check(value)
    except (ValueError, TypeError, MarketSimError) as exc:
        reason = " ".join(str(exc).split())
        why = f"; {reason}" if reason else ""
        raise MarketSimError(f"--set {key}={value!r}: {key} must be {decl.allowed}{why}") from None
