"""market_sim: an agent-based testbed for privacy data markets.

The core is pure: ``market_sim.distributions`` (cost distributions, virtual
costs, ironing) and ``market_sim.mechanisms`` (the exact offline mechanism and
its Myerson payments).  Importing the package is cheap: sub-modules and the
names below are imported on first use.

The modules of the games moved into ``market_sim.games`` (docs/architecture.md); their
former paths ``market_sim.equilibrium``, ``.egta``, ``.psro`` and ``.env`` stay importable
as aliases of the same modules.
"""

from ._lazy import alias_modules, lazy_exports

__version__ = "0.1.0"

_EXPORTS = {
    "audit": ".auditing:audit",
    "compare": ".comparison:compare",
    "Population": ".population:Population",
}
__all__ = ["__version__", *_EXPORTS]
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
alias_modules(
    {
        f"{__name__}.{name}": f"{__name__}.games.{name}"
        for name in ("equilibrium", "egta", "psro", "env")
    }
)
