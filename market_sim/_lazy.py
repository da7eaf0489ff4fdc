"""Lazy package attributes: ``name -> "module:attribute"`` resolved on first use
(PEP 562), so importing a package does not import what it re-exports."""

from __future__ import annotations

import importlib


def lazy_exports(package: str, exports: dict[str, str]):
    """(``__getattr__``, ``__dir__``) for ``package``: ``exports`` maps a public name
    to ``".module:attr"`` (relative to ``package``) or ``".module"`` (the module)."""

    def __getattr__(name):
        target = exports.get(name)
        if target is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        module, _, attr = target.partition(":")
        obj = importlib.import_module(module, package)
        if attr:
            obj = getattr(obj, attr)
        importlib.import_module(package).__dict__[name] = obj  # later lookups are direct
        return obj

    def __dir__():
        return sorted(set(importlib.import_module(package).__dict__) | set(exports))

    return __getattr__, __dir__
