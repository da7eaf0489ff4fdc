"""Collaborative private ML with incentives (004): perturbed sufficient statistics,
Bayesian-surprise valuation, rho-Shapley rewards, reward control (names imported
on first use)."""

from .._lazy import lazy_exports

_EXPORTS = {
    "BernoulliModel": ".models:BernoulliModel",
    "GaussianBelief": ".models:GaussianBelief",
    "GaussianMeanModel": ".models:GaussianMeanModel",
    "GridBelief": ".models:GridBelief",
    "LinearRegressionModel": ".models:LinearRegressionModel",
    "SharedStatistic": ".models:SharedStatistic",
    "rdp_noise_variance": ".models:rdp_noise_variance",
    "Collaboration": ".rewards:Collaboration",
    "ModelReward": ".rewards:ModelReward",
    "collaborate": ".rewards:collaborate",
    "noise_reward": ".rewards:noise_reward",
    "temper_reward": ".rewards:temper_reward",
    "coalition_values": ".valuation:coalition_values",
    "kl_nearest_neighbour": ".valuation:kl_nearest_neighbour",
    "rationality_rho": ".valuation:rationality_rho",
    "rho_shapley_rewards": ".valuation:rho_shapley_rewards",
    "shapley_values": ".valuation:shapley_values",
}
__all__ = list(_EXPORTS)
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
