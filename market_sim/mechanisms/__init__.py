"""Mechanisms: pure functions of arrays returning frozen dataclasses, and the
:class:`Mechanism` interface.  Names are imported on first use (the data-dependent
mechanism pulls in scikit-learn)."""

from .._lazy import lazy_exports

_EXPORTS = {
    "Mechanism": ".base:Mechanism",
    "Outcome": ".base:Outcome",
    "as_mechanism": ".base:as_mechanism",
    "myerson_mechanism": ".myerson:myerson_mechanism",
    "OfflineResult": ".offline:OfflineResult",
    "solve": ".offline:solve",
    "solve_eta_grid": ".offline:solve_eta_grid",
    "project_capped_simplex": ".offline:project_capped_simplex",
    "offline_payments": ".payments:offline_payments",
    "data_dependent": ".data_dependent",
}
__all__ = list(_EXPORTS)
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
