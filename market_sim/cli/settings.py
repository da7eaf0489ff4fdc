"""Settings that only take effect with another: nothing given on the command line is
silently ignored.  A subcommand lists its pairs as ``(setting, needed, why)`` with
``argparse`` destinations (``payment_bound``), each defaulting to None."""

from __future__ import annotations

from ..errors import MarketSimError
from .arguments import warn


def _flag(dest: str) -> str:
    return "--" + dest.replace("_", "-")


def check_needs(args, needs) -> None:
    """One-line error for a setting given while the setting it needs is not."""
    for name, needed, why in needs:
        if getattr(args, name, None) is not None and getattr(args, needed, None) is None:
            raise MarketSimError(f"{_flag(name)} has no effect without {_flag(needed)} ({why})")


def warn_if_not_private(privacy, mechanism, name: str) -> None:
    """--privacy is the epsilon of a private mechanism's random choice: one warning line
    when ``mechanism`` has none (no ``privacy`` attribute)."""
    if privacy is not None and not hasattr(mechanism, "privacy"):
        warn(f"--privacy has no effect with --mechanism {name} (it draws nothing privately)")
