"""Lazy package attributes: ``name -> "module:attribute"`` resolved on first use
(PEP 562), so importing a package does not import what it re-exports."""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.util
import sys


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


class _ModuleAliases(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Finds ``old`` module names and loads them as the module ``new`` itself."""

    def __init__(self, aliases: dict[str, str]):
        self.aliases = aliases
        self.specs: dict = {}

    def find_spec(self, name, path=None, target=None):
        if name not in self.aliases:
            return None
        return importlib.util.spec_from_loader(name, self)

    def create_module(self, spec):
        module = importlib.import_module(self.aliases[spec.name])  # the same object
        self.specs[spec.name] = module.__spec__
        return module

    def exec_module(self, module):
        """Nothing to run; the import system set the alias's spec on the module: its own
        goes back (``__name__`` and ``__spec__`` keep naming the new path)."""
        module.__spec__ = self.specs[module.__spec__.name]


def alias_modules(aliases: dict[str, str]) -> None:
    """Make each ``old`` dotted module name (a key) import the module ``new`` (its value),
    on first use: ``import old`` gives the very module object ``new``, so its names,
    private ones included, and a ``monkeypatch`` of either are shared.  Used for the
    paths a module had before it moved into a package (no file is left at the old path)."""
    if not any(isinstance(f, _ModuleAliases) and f.aliases == aliases for f in sys.meta_path):
        sys.meta_path.append(_ModuleAliases(aliases))
