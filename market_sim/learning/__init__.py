"""Private learners (imported on first use: they need scikit-learn)."""

from .._lazy import lazy_exports

_EXPORTS = {"HeteroDPLogisticRegression": ".hetero_dp:HeteroDPLogisticRegression"}
__all__ = list(_EXPORTS)
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
