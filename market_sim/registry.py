"""Registries: names -> classes for mechanisms, strategies and studies.

A registry knows three sources, in this order of precedence:

1. built-in names, stored as ``"module:attribute"`` strings and imported only
   when used (so listing is cheap);
2. Python entry points of the registry's group (``market_sim.mechanisms``,
   ``market_sim.strategies``, ``market_sim.scenarios``), declared by any
   installed package::

       [project.entry-points."market_sim.mechanisms"]
       uniform-price = "mypkg.mech:UniformPrice"

3. names added at run time with ``registry.register(name, obj)`` (or as a
   decorator).

``registry.load(spec)`` also takes a reference that is not registered at all:
``module:attribute`` (an importable module) or ``path/to/file.py[:attribute]``
(a file, imported under a private module name).  Every failure is a
``MarketSimError`` naming what is wrong.
"""

from __future__ import annotations

import difflib
import hashlib
import importlib
import importlib.util
import re
import sys
from collections.abc import Callable
from dataclasses import dataclass
from importlib.metadata import entry_points
from pathlib import Path
from typing import Any

from .errors import MarketSimError

__all__ = [
    "Registry",
    "Entry",
    "load_object",
    "parse_spec",
    "check_params",
    "MECHANISMS",
    "MULTIFIELD_MECHANISMS",
    "FIELD_STRATEGIES",
    "STRATEGIES",
    "SCENARIOS",
]


@dataclass(frozen=True)
class Entry:
    name: str
    target: Any  # "module:attribute" string, or the object itself
    origin: str  # "built-in", "entry point (<dist>)" or "registered"


def _import_file(path: Path):
    """Import a .py file under a stable private name (so pickling by reference works
    in worker processes that import the same file)."""
    path = path.resolve()
    if not path.is_file():
        raise MarketSimError(f"{path}: no such file")
    digest = hashlib.sha256(str(path).encode()).hexdigest()[:12]  # the same in every process
    key = f"_market_sim_user_{digest}_{path.stem}"
    if key in sys.modules:
        return sys.modules[key]
    spec = importlib.util.spec_from_file_location(key, path)
    if spec is None or spec.loader is None:
        raise MarketSimError(f"{path}: cannot be imported as a Python file")
    mod = importlib.util.module_from_spec(spec)
    sys.modules[key] = mod
    try:
        spec.loader.exec_module(mod)
    except Exception as exc:
        del sys.modules[key]
        raise MarketSimError(f"{path} failed to import: {type(exc).__name__}: {exc}") from None
    return mod


def _import_module(name: str):
    try:
        return importlib.import_module(name)
    except ModuleNotFoundError as exc:
        if exc.name and (name == exc.name or name.startswith(exc.name + ".")):
            raise MarketSimError(f"no module named {name!r}") from None
        raise MarketSimError(f"module {name!r} failed to import: {exc}") from None
    except Exception as exc:
        raise MarketSimError(
            f"module {name!r} failed to import: {type(exc).__name__}: {exc}"
        ) from None


def load_object(ref: str, *, default_attr: str | None = None):
    """The object named by ``module:attribute``, ``path.py:attribute`` or ``path.py``.

    A bare file (no attribute) returns the module itself, or its ``default_attr``
    when given and present."""
    target, _, attr = ref.partition(":") if not ref.endswith(".py") else (ref, "", "")
    if target.endswith(".py") or "/" in target or "\\" in target:
        mod = _import_file(Path(target))
    else:
        mod = _import_module(target)
    if not attr:
        return getattr(mod, default_attr, mod) if default_attr else mod
    obj = mod
    for part in attr.split("."):
        if not hasattr(obj, part):
            raise MarketSimError(f"{ref!r}: {target} has no attribute {attr!r}")
        obj = getattr(obj, part)
    return obj


def _coerce(text: str):
    low = text.lower()
    if low in ("true", "false"):
        return low == "true"
    if low in ("none", "null"):
        return None
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            pass
    if "," in text:
        return tuple(_coerce(t) for t in text.split(","))
    return text


def parse_spec(spec: str) -> tuple[str, dict]:
    """``"NAME[:key=value]..."`` -> (NAME, params).  NAME may itself be
    ``module:attribute`` or ``path.py[:attribute]``; values are read as bool, int,
    float or a comma-separated tuple when they look like one, else kept as text.

    >>> parse_spec("shade:factor=1.3")
    ('shade', {'factor': 1.3})
    >>> parse_spec("mypkg.mech:UniformPrice:k=5")
    ('mypkg.mech:UniformPrice', {'k': 5})
    """
    if not isinstance(spec, str) or not spec.strip():
        raise MarketSimError(f"expected a name, got {spec!r}")
    parts = spec.strip().split(":")
    target = [p for p in parts if "=" not in p]
    params: dict = {}
    for p in parts:
        if "=" in p:
            key, _, value = p.partition("=")
            if not key.isidentifier():
                raise MarketSimError(f"{spec!r}: {key!r} is not a parameter name")
            params[key] = _coerce(value)
    if not target:
        raise MarketSimError(f"{spec!r}: no name before the parameters")
    return ":".join(target), params


class Registry:
    """Names -> objects of one kind (see the module docstring)."""

    def __init__(
        self,
        kind: str,
        group: str,
        builtins: dict[str, str] | Callable[[], dict[str, str]],
        check: Callable[[Any, str], Any] | None = None,
    ):
        self.kind, self.group = kind, group
        self._builtin_source = builtins  # a dict, or a function giving it (called once)
        self._builtin_map: dict[str, str] | None = None
        self._registered: dict[str, Any] = {}
        self._check = check

    def register(self, name: str, obj=None):
        """Register ``obj`` under ``name`` (usable as a decorator)."""

        def add(o):
            self._registered[name] = o
            return o

        return add if obj is None else add(obj)

    @property
    def _builtins(self) -> dict[str, str]:
        if self._builtin_map is None:
            src = self._builtin_source
            self._builtin_map = dict(src() if callable(src) else src)
        return self._builtin_map

    def _entry_points(self) -> dict[str, Entry]:
        out = {}
        for ep in entry_points(group=self.group):
            dist = getattr(ep, "dist", None)
            origin = f"entry point ({dist.name})" if dist is not None else "entry point"
            out[ep.name] = Entry(ep.name, ep.value, origin)
        return out

    def entries(self) -> list[Entry]:
        """Every registered name: built-ins first, then entry points, then run-time ones."""
        out = {n: Entry(n, t, "built-in") for n, t in self._builtins.items()}
        for name, e in self._entry_points().items():
            out.setdefault(name, e)
        for name, obj in self._registered.items():
            out[name] = Entry(name, obj, "registered")
        return list(out.values())

    def names(self) -> list[str]:
        return [e.name for e in self.entries()]

    def shadowed(self) -> list[Entry]:
        """Entry points that a built-in or run-time name of the same name hides (they are
        never loaded by that name: the precedence of :meth:`entries`)."""
        taken = set(self._builtins) | set(self._registered)
        return [e for n, e in self._entry_points().items() if n in taken]

    def _unknown(self, name: str) -> MarketSimError:
        names = self.names()
        close = difflib.get_close_matches(name, names, n=1)
        hint = f"; did you mean {close[0]!r}?" if close else ""
        return MarketSimError(
            f"{self.kind}: unknown {name!r}{hint} (known: {', '.join(names)}; "
            f"or give module:attribute or path/to/file.py)"
        )

    def load(self, name: str):
        """The object registered as ``name``, or named by a module/file reference."""
        # the precedence of entries() (run-time, then built-in, then entry point), with
        # the entry points (about 30 ms to scan) read only for a name that is neither
        if name in self._registered:
            found: Entry | None = Entry(name, self._registered[name], "registered")
        elif name in self._builtins:
            found = Entry(name, self._builtins[name], "built-in")
        else:
            found = self._entry_points().get(name)
        if found is not None:
            obj = load_object(found.target) if isinstance(found.target, str) else found.target
        elif ":" in name or name.endswith(".py") or "/" in name:
            obj = load_object(name)
        else:
            raise self._unknown(name)
        return self._check(obj, name) if self._check else obj

    def parse(self, spec: str) -> tuple[str, dict]:
        """:func:`parse_spec`, and ``NAME:VALUE`` (a value without ``key=``) for a
        registered class that declares ``spec_argument``: VALUE is that parameter
        (``bne:path/to/bid.csv`` is ``bne`` with ``path="path/to/bid.csv"``)."""
        name, params = parse_spec(spec)
        head, sep, value = name.partition(":")
        if not sep or head not in self.names():
            return name, params
        key = getattr(self.load(head), "spec_argument", "")
        if not key:
            raise MarketSimError(
                f"{self.kind} {head!r} takes parameters as key=value (got {spec!r}; e.g. "
                f"{head}:key=value)"
            )
        return head, {key: value, **params}

    def describe(self) -> list[tuple[str, str, str]]:
        """(name, first sentence of the docstring, origin) for listings; imports each entry."""
        rows = []
        for e in self.entries():
            try:
                obj = self.load(e.name)
                rows.append((e.name, summary_line(getattr(obj, "__doc__", None)), e.origin))
            except MarketSimError as exc:
                rows.append((e.name, f"(fails to load: {exc})", e.origin))
        return rows


# the seed papers' file numbers, as the code cites them, and their keys in docs/bibliography.md
CITATION_KEYS = {"000": "[SB]", "001": "[MT]", "002": "[SLW]", "003": "[AES]", "004": "[SZH]"}


def summary_line(doc: str | None, width: int = 100) -> str:
    """The docstring's first paragraph on one line, cut after its first sentence; the
    papers cited by file number (``003``) by their bibliography keys (``[AES]``)."""
    para = " ".join((doc or "").strip().split("\n\n")[0].split())
    para = re.sub(r"\b00[0-4]\b", lambda m: CITATION_KEYS[m.group(0)], para)
    para = para.replace("``", "`")
    end = re.search(r"\w{4,}\)?\.\s+[A-Z(]", para)  # not after "Alg." or "Eq."
    line = para if end is None else para[: end.end() - 1].rstrip()
    return line if len(line) <= width else line[: width - 1] + "…"


def check_params(cls, params: dict, who: str) -> None:
    """Every explicit parameter of a spec must be one the constructor of ``cls`` takes."""
    import inspect

    sig = inspect.signature(cls).parameters
    if any(p.kind is p.VAR_KEYWORD for p in sig.values()):
        return
    unknown = sorted(set(params) - set(sig))
    if unknown:
        known = ", ".join(k for k, p in sig.items() if p.kind is not p.VAR_POSITIONAL) or "none"
        raise MarketSimError(f"{who}: no parameter {unknown[0]!r} (it takes: {known})")


# The checks go by the protocol, not by the base classes: the registry sits below the
# modules it names and imports none of them (a ``Mechanism`` subclass has ``outcome``, a
# ``Strategy`` subclass ``report`` and ``report_all``).
def _check_mechanism(obj, name):
    if callable(getattr(obj, "outcome", None)):
        return obj
    raise MarketSimError(f"mechanism {name!r} is not a Mechanism (it has no outcome method)")


def _check_strategy(obj, name):
    if callable(getattr(obj, "report", None)) or callable(getattr(obj, "report_all", None)):
        return obj
    raise MarketSimError(f"strategy {name!r} is not a Strategy (it has no report method)")


MECHANISMS = Registry(
    "mechanism",
    "market_sim.mechanisms",
    {
        "offline": "market_sim.mechanisms.builtin:OfflineMechanism",
        "online": "market_sim.mechanisms.online:OnlineMechanism",
        "data-dependent": "market_sim.mechanisms.builtin:DataDependentMechanism",
        "pay-as-bid": "market_sim.mechanisms.builtin:PayAsBidMechanism",
        "posted-price": "market_sim.mechanisms.builtin:PostedPriceMechanism",
        "private-posted-price": "market_sim.mechanisms.builtin:PrivatePostedPriceMechanism",
        "private-cutoff": "market_sim.mechanisms.builtin:PrivateCutoffMechanism",
        "min-cost": "market_sim.mechanisms.ghosh_roth:MinCostAuction",
        "fair-query": "market_sim.mechanisms.ghosh_roth:FairQuery",
        "uniform-price": "market_sim.mechanisms.uniform_price:UniformPrice",
        "proportional-share": "market_sim.mechanisms.proportional_share:ProportionalShare",
        "optimal-posted-price": "market_sim.mechanisms.optimal_posted_price:OptimalPostedPrice",
        "first-price": "market_sim.mechanisms.first_price:FirstPrice",
        "onnx": "market_sim.mechanisms.onnx_network:OnnxMechanism",
    },
    _check_mechanism,
)


# Mechanisms reading several fields per seller (market_sim.mechanisms.multifield): a
# separate kind, since they take records, not one cost per seller.
def _check_multifield(obj, name):
    if callable(getattr(obj, "outcome", None)) and hasattr(obj, "report_fields"):
        return obj
    raise MarketSimError(
        f"multi-field mechanism {name!r} needs report_fields and an outcome method"
    )


MULTIFIELD_MECHANISMS = Registry(
    "multi-field mechanism",
    "market_sim.multifield_mechanisms",
    {
        "posted-price-caps": "market_sim.mechanisms.multifield:PostedPricePerUnit",
        "cap-threshold": "market_sim.mechanisms.multifield:CapThreshold",
        "fair-query-caps": "market_sim.mechanisms.multifield:FairQueryCaps",
        "all-in": "market_sim.mechanisms.multifield:AllIn",
        "vcg-procurement": "market_sim.mechanisms.multifield:VCGProcurement",
        "csra": "market_sim.mechanisms.multifield:CSRA",
        "mfg-pricing": "market_sim.mechanisms.multifield:MFGPricing",
    },
    _check_multifield,
)


# Strategies of sellers with several fields (market_sim.agents.fields): they return records.
def _check_field_strategy(obj, name):
    if callable(getattr(obj, "report", None)):
        return obj
    raise MarketSimError(f"multi-field strategy {name!r} needs a report method")


FIELD_STRATEGIES = Registry(
    "multi-field strategy",
    "market_sim.field_strategies",
    {
        "truthful": "market_sim.agents.fields:TruthfulFields",
        "shade-cost": "market_sim.agents.fields:ShadeCost",
        "shade-cap": "market_sim.agents.fields:ShadeCap",
        "best-response": "market_sim.joint_audit:BestResponseFields",
    },
    _check_field_strategy,
)

STRATEGIES = Registry(
    "strategy",
    "market_sim.strategies",
    {
        "truthful": "market_sim.agents.strategies:Truthful",
        "shade": "market_sim.agents.strategies:Shade",
        "random": "market_sim.agents.strategies:RandomMisreport",
        "best-response": "market_sim.agents.strategies:BestResponse",
        "learning": "market_sim.agents.strategies:Learning",
        "collusion": "market_sim.agents.strategies:Collusion",
        "bne": "market_sim.agents.bid_function:BidFunction",
        "hedge": "market_sim.agents.learners:Hedge",
        "exp3": "market_sim.agents.learners:Exp3",
        "q-learning": "market_sim.agents.learners:QLearning",
    },
    _check_strategy,
)


def _builtin_scenarios() -> dict[str, str]:
    """Every module of the ``market_sim.scenarios`` package, found without importing it."""
    spec = importlib.util.find_spec("market_sim.scenarios")
    out: dict[str, str] = {}
    for folder in (spec.submodule_search_locations or []) if spec else []:
        for f in sorted(Path(folder).glob("*.py")):
            if not f.stem.startswith("_"):
                out.setdefault(f.stem, f"market_sim.scenarios.{f.stem}")
    return out


def _check_scenario(obj, name):
    missing = [a for a in ("REPLICATIONS", "grid", "run") if not hasattr(obj, a)]
    if missing:
        raise MarketSimError(
            f"scenario {name!r} does not define {', '.join(missing)} "
            f"(a study needs REPLICATIONS, grid and run)"
        )
    return obj


# Studies: the modules of market_sim.scenarios, plus entry points and registered ones.
SCENARIOS = Registry("scenario", "market_sim.scenarios", _builtin_scenarios, _check_scenario)
