"""The exact brute force of the red-team corpus: a mechanism's truth from ``outcome`` alone.

Independent of the audit.  For a seller i, an opponent profile r_-i and a dense grid Z of
own reports (every point of the own support the case names, plus the grid), it calls the
mechanism directly, once per own report, and reads eps_i(z) and t_i(z) (for a randomized
mechanism: its closed-form expectation ``expected(reports)``, which ``check_expectation``
checks against ``outcome`` by simulation).  A seller of cost c in Z reporting z in Z gets

    u_c(z) = t_i(z) - c eps_i(z),

so the grid's best gain of cost c is max_z u_c(z) - u_c(c) (a |Z| x |Z| table per profile)
and its IR margin is u_c(c).  ``brute_force`` returns a seller's largest gain and lowest IR
margin over every profile and cost of the grid, each with its witness, and its own
scales (the largest |eps| and |payment| it saw); ``gain_at``
and ``utility_at`` evaluate one witness exactly.  A grid proves nothing between its points:
each case's docstring proves its truth, and the brute force checks the proof's numbers
(and that no grid point contradicts it).  ``check_expectation`` checks a randomized
mechanism's ``expected`` against ``outcome`` exactly, on stratified draws (``Strata``).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.special import ndtri


@dataclass(frozen=True)
class Found:
    """The grid's largest gain and lowest truthful utility, each with where it is."""

    max_gain: float
    gain_at: tuple  # (seller, cost, report, profile)
    min_utility: float
    utility_at: tuple  # (seller, cost, profile)
    eps_max: float  # the largest |eps| seen (the scale of incentives)
    pay_max: float  # the largest |payment| seen


def own_outcomes(mech, seller: int, profile, reports) -> tuple[np.ndarray, np.ndarray]:
    """eps_i and t_i of ``seller`` at each own report (the others at ``profile``), one
    direct call of ``outcome`` (or ``expected`` if randomized) per report."""
    eps, pay = np.empty(len(reports)), np.empty(len(reports))
    base = np.array(profile, dtype=float)
    for j, z in enumerate(reports):
        trial = base.copy()
        trial[seller] = z
        e, t = _direct(mech, trial)
        eps[j], pay[j] = e[seller], t[seller]
    return eps, pay


def _direct(mech, reports) -> tuple[np.ndarray, np.ndarray]:
    if getattr(mech, "randomized", False) or hasattr(mech, "expected"):  # random, declared or not
        e, t = mech.expected(reports)
    else:
        out = mech.outcome(reports, None)
        e, t = (out.eps, out.payments) if hasattr(out, "eps") else out
    return np.asarray(e, dtype=float), np.asarray(t, dtype=float)


def gain_at(mech, seller: int, cost: float, report: float, profile) -> float:
    """u_c(report) - u_c(cost) of ``seller`` of cost ``cost``, the others at ``profile``."""
    eps, pay = own_outcomes(mech, seller, profile, [report, cost])
    u = pay - cost * eps
    return float(u[0] - u[1])


def utility_at(mech, seller: int, cost: float, profile) -> float:
    """The truthful utility t_i(c) - c eps_i(c), the others at ``profile``."""
    eps, pay = own_outcomes(mech, seller, profile, [cost])
    return float(pay[0] - cost * eps[0])


def brute_force(mech, seller: int, profiles, grid) -> Found:
    """``seller`` in every profile of ``profiles`` (full report vectors; its own entry is
    replaced), costs and reports on ``grid`` (its own support's grid): the largest gain
    and the lowest truthful utility, with the seller's own scales."""
    best: tuple = (-np.inf, None)
    worst: tuple = (np.inf, None)
    eps_max = pay_max = 0.0
    Z = np.asarray(grid, dtype=float)
    for p in profiles:
        eps, pay = own_outcomes(mech, seller, p, Z)
        eps_max = max(eps_max, float(np.abs(eps).max()))
        pay_max = max(pay_max, float(np.abs(pay).max()))
        U = pay[None, :] - Z[:, None] * eps[None, :]  # U[c, z] = u_c(z)
        truthful = np.diag(U)
        G = U.max(axis=1) - truthful
        c = int(G.argmax())
        if G[c] > best[0]:
            best = (float(G[c]), (seller, float(Z[c]), float(Z[int(U[c].argmax())]), tuple(p)))
        k = int(truthful.argmin())
        if truthful[k] < worst[0]:
            worst = (float(truthful[k]), (seller, float(Z[k]), tuple(p)))
    return Found(best[0], best[1], worst[0], worst[1], eps_max, pay_max)


class Strata:
    """A stand-in for ``numpy.random.Generator`` whose every draw in call k is the k-th
    of n stratified uniforms u_k = (k + 1/2) / n (a normal draw: its quantile).  The
    mean of ``outcome`` over k = 0..n-1 is then the midpoint rule for each draw's
    marginal, exact for an indicator {u < p} with p a multiple of 1/n (a prize of
    probability 1e-4 is hit in exactly 1 of 10000 strata), and for payments linear in
    each draw (every draw of a call shares u_k: only marginals are right)."""

    def __init__(self, u: float):
        self.u = u

    def random(self, size=None):
        return np.full(size, self.u) if size is not None else self.u

    def standard_normal(self, size=None):
        z = float(ndtri(self.u))
        return np.full(size, z) if size is not None else z


def check_expectation(mech, reports, n: int = 10000) -> None:
    """``expected(reports)`` equals the stratified mean of ``outcome`` (``Strata``) to
    1e-9 of the largest |value| for every seller's eps and payment."""
    r = np.asarray(reports, dtype=float)
    draws = [_as_pair(mech.outcome(r, Strata((k + 0.5) / n))) for k in range(n)]
    e, t = mech.expected(r)
    for sample, mean in (
        (np.array([d[0] for d in draws]), e),
        (np.array([d[1] for d in draws]), t),
    ):
        scale = 1e-9 * max(1.0, float(np.abs(sample).max()))
        assert np.allclose(sample.mean(axis=0), mean, rtol=0, atol=scale), (
            sample.mean(axis=0),
            mean,
        )


def _as_pair(out):
    return (out.eps, out.payments) if hasattr(out, "eps") else out
