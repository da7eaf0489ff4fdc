"""Mechanisms: pure functions of arrays returning frozen dataclasses."""

from .offline import OfflineResult, solve, solve_eta_grid
from .payments import offline_payments

__all__ = ["OfflineResult", "solve", "solve_eta_grid", "offline_payments"]
