"""Privacy building blocks: additive noise mechanisms and private selection."""

from .noise import AnalyticGaussian, Laplace, TruncatedLaplace
from .optimal_noise import PiecewiseUniformNoise, optimal_noise
from .selection import exponential_mechanism, exponential_probabilities, permute_and_flip

__all__ = ["Laplace", "AnalyticGaussian", "TruncatedLaplace", "exponential_mechanism",
           "exponential_probabilities", "permute_and_flip", "optimal_noise", "PiecewiseUniformNoise"]
