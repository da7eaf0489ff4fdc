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

**Several fields** (issue #52; ``fields`` set, e.g. ``("cost", "cap", "size")``): the
reports are (..., n, F), one column per field in ``market_sim.multifield.FIELDS``
order, each scaled to [0, 1] by its own (low, high); the towers' first layer takes the
F features.  With a ``cap`` field the allocation is capped by the reported cap,

    eps_i = min(eps_max * sigmoid(z_alloc_i), reported cap_i)

so a truthful seller's cap is never exceeded (FL-Market's construction, Zheng et al.
2022); the payment is the same fraction of eps_i * high_cost as above.

``forward`` takes the array module (``xp``: numpy, or jax.numpy in training), so the
trained network, its ONNX export (``export``) and the training share one definition.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..errors import MarketSimError
from ..multifield import FIELDS

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
    low: float | tuple[float, ...]
    high: float | tuple[float, ...]
    fields: tuple[str, ...] | None = None
    """None: one-field reports (batch, n); else the fields of reports (batch, n, F)."""
    objective: tuple[float, float, float] | None = None
    """(mu, sigma, gamma) of the Eq. 11 (003) objective it was trained on, or None."""

    @property
    def input_shape(self) -> tuple[int, ...]:
        """The shape of one market's reports: (n,) or (n, F)."""
        return (self.n_sellers,) if self.fields is None else (self.n_sellers, len(self.fields))

    def outputs(self, reports) -> tuple[np.ndarray, np.ndarray]:
        """(eps, payments), each (batch, n), of reports (batch, n) or (batch, n, F), float64."""
        r = np.asarray(reports, dtype=float)
        if r.shape[1:] != self.input_shape or r.ndim != 1 + len(self.input_shape):
            raise MarketSimError(
                f"the network takes reports of shape (batch, "
                f"{', '.join(map(str, self.input_shape))}), got {r.shape}"
            )
        return forward(self.params, r, self.eps_max, self.low, self.high, np, self.fields)


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


def forward(params, reports, eps_max: float, low, high, xp=np, fields=None):
    """(eps, payments) of reports (..., n), or (..., n, F) with ``fields``: the module
    docstring's equations."""
    if fields is None:
        x, high_cost = ((reports - low) / (high - low))[..., None], high
    else:
        lo, hi = xp.asarray(low), xp.asarray(high)
        x, high_cost = (reports - lo) / (hi - lo), high[0]  # the cost is the first field
    eps = eps_max * _sigmoid(tower(params["allocation"], x, xp), xp)
    if fields is not None and "cap" in fields:  # never above the reported cap
        eps = xp.minimum(eps, reports[..., list(fields).index("cap")])
    payments = eps * high_cost * _sigmoid(tower(params["payment"], x, xp), xp)
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
    low=0.0,
    high=1.0,
    fields: tuple[str, ...] | None = None,
) -> MechanismNetwork:
    """Random weights drawn with ``rng`` (same seed, same network); with ``fields``,
    ``low`` and ``high`` are one bound per field (the module docstring)."""
    if not isinstance(rng, np.random.Generator):
        raise MarketSimError("rng must be a numpy.random.Generator")
    if int(n_sellers) < 2:
        raise MarketSimError(f"a network needs at least 2 sellers (got {n_sellers})")
    if int(hidden) < 1 or int(layers) < 1:
        raise MarketSimError(f"hidden and layers must be >= 1 (got {hidden}, {layers})")
    if not (np.isfinite(eps_max) and eps_max > 0):
        raise MarketSimError(f"eps_max must be a finite number > 0 (got {eps_max})")
    if fields is not None and (tuple(fields)[:1] != ("cost",) or not set(fields) <= set(FIELDS)):
        raise MarketSimError(f"fields must be among {', '.join(FIELDS)}, the cost first: {fields}")
    lows, highs = np.atleast_1d(np.asarray(low, float)), np.atleast_1d(np.asarray(high, float))
    width = 1 if fields is None else len(fields)
    if lows.shape != (width,) or highs.shape != (width,):
        raise MarketSimError(f"give one low and one high per field ({width}), not {lows.size}")
    if not (
        np.all(np.isfinite(lows) & np.isfinite(highs)) and np.all((0 <= lows) & (lows < highs))
    ):
        raise MarketSimError(f"each support must be 0 <= low < high (got {low}, {high})")
    params = {}
    for name in TOWERS:
        sizes = [width] + [int(hidden)] * int(layers)
        stack = [_layer(rng, a, b) for a, b in zip(sizes[:-1], sizes[1:], strict=True)]
        stack.append({"w": rng.normal(0.0, np.sqrt(1.0 / hidden), (int(hidden), 1)),
                      "b": np.zeros(1)})  # fmt: skip
        params[name] = stack
    if fields is None:  # one-field
        return MechanismNetwork(params, int(n_sellers), float(eps_max), float(low), float(high))
    bounds = tuple(map(float, lows)), tuple(map(float, highs))
    return MechanismNetwork(params, int(n_sellers), float(eps_max), *bounds, tuple(fields))
