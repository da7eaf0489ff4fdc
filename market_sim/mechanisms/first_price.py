"""First-price procurement and its Bayes-Nash equilibria in closed form: the references
the equilibrium solver is validated against (docs/equilibrium.md).

:class:`FirstPrice` buys one unit (eps = 1) from each of the ``k`` lowest reports and
pays each its report (ties broken by seller index).  It is not IC: sellers shade up.
Its symmetric BNE for n sellers with costs U[lo, hi] is

    b(c) = E[Y | Y > c],  Y the k-th lowest of the n - 1 others' costs,

from the first-order condition b'(c) S(c) = (b(c) - c) f_Y(c), S the survival of Y
(:func:`first_price_bid`).  With two sellers, costs U[1, 2] and U[0, 2], the equilibrium is
the mirror image (c = 2 - v, report = 2 - bid) of the first-price auction with values
U[0, 1] and U[0, 2], whose inverse bids are phi_i(b) = 2b / (1 + k_i b^2), k_1 = 1/a_1^2 -
1/a_2^2 = 3/4 = -k_2 (:func:`asymmetric_first_price_bid`).
"""

from __future__ import annotations

from typing import ClassVar

import numpy as np

from .base import Mechanism

__all__ = ["FirstPrice", "first_price_bid", "asymmetric_first_price_bid"]


class FirstPrice(Mechanism):
    """k-unit first-price procurement: the k lowest reports sell eps = 1 at their report.

    ``batched``: ``outcome`` also takes a (B, n) batch of report vectors."""

    name: ClassVar[str] = "first-price"
    batched: ClassVar[bool] = True

    def __init__(self, k: int = 1):
        self.k = int(k)

    def outcome(self, reports, rng=None):
        R = np.atleast_2d(np.asarray(reports, dtype=float))
        rank = np.argsort(np.argsort(R, axis=1, kind="stable"), axis=1, kind="stable")
        eps = (rank < self.k).astype(float)
        return (eps[0], (R * eps)[0]) if np.ndim(reports) == 1 else (eps, R * eps)

    def interim(self, z, below, counts):
        """A deviator's expected eps and payment at reports ``z`` (K,) when the others'
        reports are independent, ``counts[h]`` of them with probability ``below[h]``
        (K,) of reporting below z: it sells iff fewer than k of them do, so E(z) =
        P(N < k), N a sum of binomials (Poisson-binomial), and T(z) = z E(z).  Ties count
        half in ``below`` (exact for two sellers and an even split; the equilibrium
        solver's ``interim`` path, docs/equilibrium.md)."""
        z = np.asarray(z, dtype=float)
        E = below_count_pmf(below, counts, self.k).sum(axis=1)
        return E, z * E


def below_count_pmf(below, counts, size: int | None = None) -> np.ndarray:
    """(K, size): P(N = j), j < ``size`` (all of 0..sum(counts) by default), N the
    number of independent opponents below a report, ``counts[h]`` of them each below
    with probability ``below[h]`` (K,): a Poisson-binomial law, one opponent at a time."""
    below = np.asarray(below, dtype=float)
    counts = [int(m) for m in np.atleast_1d(counts)]
    pmf = np.zeros((below.shape[1], sum(counts) + 1 if size is None else size))
    pmf[:, 0] = 1.0
    for p, m in zip(below, counts, strict=True):
        for _ in range(m):  # one more opponent below z with probability p
            pmf[:, 1:] = pmf[:, 1:] * (1 - p)[:, None] + pmf[:, :-1] * p[:, None]
            pmf[:, 0] *= 1 - p
    return pmf


def first_price_bid(c, n: int, k: int = 1, low: float = 0.0, high: float = 1.0) -> np.ndarray:
    """The symmetric BNE bid b(c) = E[Y | Y > c] of :class:`FirstPrice` (module doc); Y
    scaled from the k-th lowest of n - 1 uniforms on [0, 1], a Beta(k, n - k)."""
    from scipy import integrate, stats

    Y = stats.beta(k, n - k)
    out = []
    for x in np.atleast_1d(np.asarray(c, dtype=float)):
        u = (x - low) / (high - low)
        s = Y.sf(u)
        m = integrate.quad(lambda t: t * Y.pdf(t), u, 1)[0] / s if s > 1e-12 else u
        out.append(low + (high - low) * m)
    return np.array(out)


def asymmetric_first_price_bid(
    c, group: int, lows: tuple[float, float] = (1.0, 0.0), high: float = 2.0
) -> np.ndarray:
    """Class ``group``'s BNE report, one seller per class with costs U[lows[g], high]
    (default: 0: U[1, 2], 1: U[0, 2]): the mirror image (v = high - c, report = high -
    beta) of the first-price auction with values U[0, a_g], a_g = high - lows[g], whose
    bid beta solves k_g v beta^2 - 2 beta + v = 0, beta = (1 - sqrt(1 - k_g v^2)) /
    (k_g v), k_g = 1/a_g^2 - 1/a_other^2 (3/4 and -3/4 by default)."""
    a = [high - lo for lo in lows]
    k = 1 / a[group] ** 2 - 1 / a[1 - group] ** 2
    v = high - np.asarray(c, dtype=float)
    if k == 0:  # equal supports: the symmetric bid v / 2
        return high - v / 2
    with np.errstate(divide="ignore", invalid="ignore"):
        b = (1 - np.sqrt(1 - k * v**2)) / (k * v)
    return high - np.where(v > 0, b, 0.0)
