"""The Mesa market's settings checked, its generator, its population and the law its
mechanism believes in; synthetic data for a market with a learner."""

from __future__ import annotations

import numpy as np

from ..distributions import CostDistribution, SellerLaws, parse_distribution
from ..errors import MarketSimError
from ..population import Population, as_population


def synthetic_data(
    n: int, d: int, rng: np.random.Generator, n_test: int = 2000, label_noise: float = 0.05
):
    """Rows with ||x|| <= 1 and labels from a fixed linear rule with flipped noise."""
    w = np.ones(d) / np.sqrt(d)

    def draw(k):
        X = rng.standard_normal((k, d)) / np.sqrt(d)
        X /= np.maximum(1.0, np.linalg.norm(X, axis=1))[:, None]
        y = (X @ w > 0).astype(int)
        flip = rng.random(k) < label_noise
        return X, np.where(flip, 1 - y, y)

    X, y = draw(n)
    X_test, y_test = draw(n_test)
    return X, y, X_test, y_test


def _check_settings(rounds, xi, n_grid, release, payment_bound, regret_sample, seed, rng):
    """One-line errors for MarketModel's settings."""
    if not (isinstance(rounds, (int, np.integer)) and rounds >= 1):
        raise MarketSimError(f"rounds must be an integer >= 1 (got {rounds!r})")
    if not (0 < xi <= 1):
        raise MarketSimError(f"xi must be in (0, 1] (got {xi!r})")
    if not (isinstance(n_grid, (int, np.integer)) and n_grid >= 1):
        raise MarketSimError(f"n_grid must be an integer >= 1 (got {n_grid!r})")
    if release is not None and not (
        isinstance(payment_bound, (int, float)) and np.isfinite(payment_bound) and payment_bound > 0
    ):
        raise MarketSimError(
            "release needs payment_bound > 0: the public cap that the "
            "released total payment is clipped to"
        )
    if seed is not None and rng is not None:
        raise MarketSimError("give seed or rng, not both")
    if regret_sample is not None and not (
        isinstance(regret_sample, (int, np.integer)) and regret_sample >= 1
    ):
        raise MarketSimError(f"regret_sample must be an integer >= 1 (got {regret_sample!r})")


def _generator(seed, rng) -> np.random.Generator:
    if rng is None:
        return np.random.default_rng(seed)
    return rng if isinstance(rng, np.random.Generator) else np.random.default_rng(rng)


def _population_of(population, dist, n_sellers, data) -> Population:
    """Who sells: ``population`` (a Population or its spec), or the shorthand ``dist`` and
    ``n_sellers`` (one class, no data; 20 sellers on U[0, 1] by default)."""
    if n_sellers is not None and not (isinstance(n_sellers, (int, np.integer)) and n_sellers >= 1):
        raise MarketSimError(f"n_sellers must be an integer >= 1 (got {n_sellers!r})")
    if population is None:
        law = "uniform:0:1" if dist is None else dist
        law = law if isinstance(law, CostDistribution) else parse_distribution(law)
        return Population([(law, 20 if n_sellers is None else int(n_sellers))])
    if dist is not None:
        raise MarketSimError(
            "give population= or dist=, not both (a cost law is a one-class population)"
        )
    if data is not None:
        raise MarketSimError(
            "data= and a population: the data come from the population (e.g. ;data=synthetic)"
        )
    return as_population(population, None if n_sellers is None else int(n_sellers))


def _market_law(pop: Population) -> CostDistribution | SellerLaws:
    """The one law of a one-class population, else the pooled law (support: the hull of
    the classes'), else (classes with a gap between them) the per-seller laws."""
    if pop.n_classes == 1:
        return pop.laws[0]
    try:
        return pop.pooled
    except MarketSimError:
        return pop.seller_laws
