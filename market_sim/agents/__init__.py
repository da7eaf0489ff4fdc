"""Mesa agents: sellers who decide what to report, a platform that runs a mechanism."""

from .batch import batch_run
from .model import MarketModel, PlatformAgent, SellerAgent
from .strategies import SellerGroup, Strategy, as_strategy

__all__ = [
    "MarketModel",
    "SellerAgent",
    "PlatformAgent",
    "Strategy",
    "SellerGroup",
    "as_strategy",
    "batch_run",
    "MECHANISMS",
    "STRATEGIES",
]


def __getattr__(name):
    """``MECHANISMS`` / ``STRATEGIES``: the names registered now (built-ins, entry
    points and run-time registrations)."""
    if name in ("MECHANISMS", "STRATEGIES"):
        from .. import registry

        return tuple(getattr(registry, name).names())
    raise AttributeError(name)
