"""Mechanisms: pure functions of arrays returning frozen dataclasses."""

from . import data_dependent
from .offline import OfflineResult, project_capped_simplex, solve, solve_eta_grid
from .payments import offline_payments

__all__ = ["OfflineResult", "solve", "solve_eta_grid", "offline_payments",
           "project_capped_simplex", "data_dependent"]
