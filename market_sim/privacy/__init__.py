"""Privacy building blocks: additive noise mechanisms and private selection
(names imported on first use)."""

from .._lazy import lazy_exports

_EXPORTS = {
    "Laplace": ".noise:Laplace",
    "AnalyticGaussian": ".noise:AnalyticGaussian",
    "TruncatedLaplace": ".noise:TruncatedLaplace",
    "exponential_mechanism": ".selection:exponential_mechanism",
    "exponential_probabilities": ".selection:exponential_probabilities",
    "permute_and_flip": ".selection:permute_and_flip",
    "optimal_noise": ".optimal_noise:optimal_noise",
    "PiecewiseUniformNoise": ".optimal_noise:PiecewiseUniformNoise",
}
__all__ = list(_EXPORTS)
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
