"""A learned procurement mechanism, trained here: RegretNet (Dütting et al. 2019) for
one-field costs and for sellers with several fields, cost, cap and size (issue #52,
item 2; docs/neural.md).

* ``network``: the weights and the forward pass (numpy, or jax.numpy when training):
  two permutation-equivariant towers (DeepSets), one for ε and one for the payments.
* ``export``: the ONNX graph of given weights (``onnx.helper``; the signature of
  ``market_sim.mechanisms.onnx_network``).
* ``training``: the augmented-Lagrangian training (JAX + optax, the ``neural`` extra).

A layer above the mechanisms and the audit: nothing but the command line imports it.
"""

from .network import MechanismNetwork, forward, initial_network

__all__ = ["MechanismNetwork", "forward", "initial_network"]
