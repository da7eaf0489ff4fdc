"""The learned mechanism's network: weights and forward pass (numpy or jax.numpy).

Two towers of the same shape, the *allocation* network and the *payment* network, each a
stack of permutation-equivariant layers (DeepSets; Zaheer et al. 2017) on the reports:

    x_i = (r_i - low) / (high - low)                      (reports scaled to [0, 1])
    h_i <- relu(h_i W_self + mean_{j != i} h_j W_others + b)     (each hidden layer)
    z_i = h_i . w + b0                                    (the head, one number a seller)

so permuting the sellers permutes the outputs.  The outputs (RegretNet's construction,
Dütting et al. 2019, with procurement's sign):

    eps_i      = eps_max * sigmoid(z_alloc_i)                     (in (0, eps_max))
    payments_i = eps_i * high * sigmoid(z_pay_i)                 (in (0, eps_i * high))

The payment is a learned fraction of the most any cost in the support could ask for
ε_i, so individual rationality (payment >= c_i eps_i) is reachable for every c_i and is
learned, not built in (as in RegretNet, where the payment is a fraction of the value).

``forward`` takes the array module (``xp``: numpy, or jax.numpy in training), so the
trained network, its ONNX export (``export``) and the training share one definition.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..errors import MarketSimError

__all__ = ["MechanismNetwork", "forward", "initial_network", "TOWERS"]

#: the two towers, in the order of their outputs
TOWERS = ("allocation", "payment")


@dataclass(frozen=True)
class MechanismNetwork:
    """Weights (``params[tower]``: a list of layers ``{"w_self", "w_others", "bias"}``,
    then the head ``{"w", "b"}``) and the constants of the output map."""

    params: dict
    n_sellers: int
    eps_max: float
    low: float
    high: float

    def outputs(self, reports) -> tuple[np.ndarray, np.ndarray]:
        """(eps, payments), each (batch, n), of reports (batch, n), in float64."""
        r = np.asarray(reports, dtype=float)
        if r.ndim != 2 or r.shape[1] != self.n_sellers:
            raise MarketSimError(
                f"the network takes reports of shape (batch, {self.n_sellers}), got {r.shape}"
            )
        return forward(self.params, r, self.eps_max, self.low, self.high, np)


def _sigmoid(z, xp):
    return 1.0 / (1.0 + xp.exp(-z))


def _others_mean(h, xp):
    """mean_{j != i} h_j along the seller axis (axis -2)."""
    n = h.shape[-2]
    return (xp.sum(h, axis=-2, keepdims=True) - h) / (n - 1)


def tower(layers, x, xp):
    """One tower on features x (..., n, 1): the head's z (..., n)."""
    h = x
    for layer in layers[:-1]:
        h = h @ layer["w_self"] + _others_mean(h, xp) @ layer["w_others"] + layer["bias"]
        h = xp.maximum(h, 0.0)
    head = layers[-1]
    return (h @ head["w"])[..., 0] + head["b"][0]


def forward(params, reports, eps_max: float, low: float, high: float, xp=np):
    """(eps, payments) of reports (..., n): the module docstring's equations."""
    x = ((reports - low) / (high - low))[..., None]
    eps = eps_max * _sigmoid(tower(params["allocation"], x, xp), xp)
    payments = eps * high * _sigmoid(tower(params["payment"], x, xp), xp)
    return eps, payments


def _layer(rng: np.random.Generator, d_in: int, d_out: int) -> dict:
    scale = np.sqrt(2.0 / (2 * d_in))  # He initialisation over the two inputs of a layer
    return {
        "w_self": rng.normal(0.0, scale, (d_in, d_out)),
        "w_others": rng.normal(0.0, scale, (d_in, d_out)),
        "bias": np.zeros(d_out),
    }


def initial_network(
    n_sellers: int,
    rng: np.random.Generator,
    *,
    hidden: int = 32,
    layers: int = 2,
    eps_max: float = 5.0,
    low: float = 0.0,
    high: float = 1.0,
) -> MechanismNetwork:
    """Random weights drawn with ``rng`` (same seed, same network)."""
    if not isinstance(rng, np.random.Generator):
        raise MarketSimError("rng must be a numpy.random.Generator")
    if int(n_sellers) < 2:
        raise MarketSimError(f"a network needs at least 2 sellers (got {n_sellers})")
    if int(hidden) < 1 or int(layers) < 1:
        raise MarketSimError(f"hidden and layers must be >= 1 (got {hidden}, {layers})")
    if not (np.isfinite(eps_max) and eps_max > 0):
        raise MarketSimError(f"eps_max must be a finite number > 0 (got {eps_max})")
    if not (np.isfinite(low) and np.isfinite(high) and 0 <= low < high):
        raise MarketSimError(f"the cost support must be 0 <= low < high (got {low}, {high})")
    params = {}
    for name in TOWERS:
        sizes = [1] + [int(hidden)] * int(layers)
        stack = [_layer(rng, a, b) for a, b in zip(sizes[:-1], sizes[1:], strict=True)]
        stack.append({"w": rng.normal(0.0, np.sqrt(1.0 / hidden), (int(hidden), 1)),
                      "b": np.zeros(1)})  # fmt: skip
        params[name] = stack
    return MechanismNetwork(params, int(n_sellers), float(eps_max), float(low), float(high))
