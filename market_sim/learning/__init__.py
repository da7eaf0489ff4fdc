"""Private learners."""

from .hetero_dp import HeteroDPLogisticRegression

__all__ = ["HeteroDPLogisticRegression"]
