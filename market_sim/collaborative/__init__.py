"""Collaborative private ML with incentives (004): perturbed sufficient statistics,
Bayesian-surprise valuation, rho-Shapley rewards, reward control."""

from .models import (BernoulliModel, GaussianBelief, GaussianMeanModel, GridBelief,
                     LinearRegressionModel, SharedStatistic, rdp_noise_variance)
from .rewards import Collaboration, ModelReward, collaborate, noise_reward, temper_reward
from .valuation import (coalition_values, kl_nearest_neighbour, rationality_rho,
                        rho_shapley_rewards, shapley_values)

__all__ = ["BernoulliModel", "GaussianMeanModel", "LinearRegressionModel", "SharedStatistic",
           "GaussianBelief", "GridBelief", "rdp_noise_variance", "Collaboration", "ModelReward",
           "collaborate", "noise_reward", "temper_reward", "coalition_values",
           "kl_nearest_neighbour", "rationality_rho", "rho_shapley_rewards", "shapley_values"]
