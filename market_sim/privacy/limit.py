"""Arithmetic of an outcome that may hold eps_i = +inf.

The offline mechanism's outcome at a report of virtual cost 0 that can take all the
weight is the zero-cost limit of Eq. 11 (003): the zero-psi sellers split the weight,
eta = +inf and their eps_i = +inf (docs/mathematics.md, "Reports of virtual cost 0").
Such a seller gives its data without noise.  Every consumer of an outcome reads it
through these two functions, which take the limit rather than the IEEE product:

* ``privacy_cost(c, eps)``: c eps, with 0 x inf = 0 (a seller of cost 0 loses nothing
  by giving its data away; c eps(c) -> 0 along the limit, docs/mathematics.md) and
  c x inf = +inf for c > 0;
* ``weights(eps)``: (a, eta) with eps = eta a (Eq. 13, 003): a = eps / sum eps and
  eta = sum eps, or, where some eps are +inf, a uniform on those and eta = +inf (the
  limit of a = eps / sum eps as the infinite entries grow together).
"""

from __future__ import annotations

import numpy as np

__all__ = ["privacy_cost", "scaled", "weights"]


def privacy_cost(c, eps) -> np.ndarray:
    """c eps elementwise, 0 where c = 0 and eps = +inf (the zero-cost limit)."""
    c, eps = np.asarray(c, dtype=float), np.asarray(eps, dtype=float)
    with np.errstate(invalid="ignore"):
        out = c * eps
    return np.where((c == 0) & np.isinf(eps), 0.0, out)


def scaled(x, eta) -> np.ndarray:
    """x eta elementwise with 0 x inf = 0 (a weight 0 at eta = +inf buys nothing)."""
    return privacy_cost(x, eta)


def weights(eps) -> tuple[np.ndarray, float]:
    """(a, eta): the allocation and the total budget of ``eps`` (Eq. 13, 003); a = 0 and
    eta = 0 when nothing is bought; a uniform on the +inf entries and eta = +inf when
    there are any (docs/mathematics.md, "Reports of virtual cost 0")."""
    eps = np.asarray(eps, dtype=float)
    inf = np.isposinf(eps)
    if inf.any():
        return inf / float(np.count_nonzero(inf)), np.inf
    eta = float(eps.sum())
    return (eps / eta if eta > 0 else np.zeros_like(eps)), eta
