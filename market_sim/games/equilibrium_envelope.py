"""The envelope step: a bid table's payments made to agree with its allocation.

In a Bayes-Nash equilibrium where a class-g seller's report b_g(c) increases with its
cost, its utility u_g(c) = max_z T_g(z) - c E_g(z) is a maximum of functions linear in c,
and the envelope theorem (Milgrom and Segal 2002; Myerson's lemma in the mechanism's
terms) gives

    u_g(c) = u_g(c_top) + int_c^c_top E_g(b_g(t)) dt                          (E1)

so the payment a seller of cost c gets at its own report is

    T_g(b_g(c)) = u_g(c) + c E_g(b_g(c)).                                      (E2)

For a mechanism with an exact ``interim`` (E and T of a report z given, per opponent
class, the probability that one opponent reports below z), E_g(b_g(t)) is what the
table's allocation gives a seller of cost t: its own class's opponents are below it
with probability F_g(t) (the rank: the bids increase), the other classes with their
report laws' probability of a report below b_g(t).  Holding those probabilities fixed,
(E2) is solved for the report z: T(z | below) = u_g(c) + c E_g (the payment rises with
the report: z E for pay-as-bid, E + z - 1 for an all-pay contest).

With one class the allocation F(t) does not depend on the bids at all, so one step maps
any increasing table to the equilibrium of the game (up to the quadrature of (E1) on the
table's costs): revenue equivalence, constructively.  With several classes the others'
probabilities below b_g(t) depend on their bids, and the step is iterated with damping;
``market_sim.games.equilibrium_distributional.bid_tables`` keeps whichever table (before or
after the steps) has the smallest exact relative epsilon, so the step cannot make a
result worse by that measure.  Costs whose seller gets (almost) nothing (E < 1e-4: a
reserve, the costs priced out) keep their bids: (E2) does not fix a report that never
sells.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
from scipy.integrate import cumulative_trapezoid

from .equilibrium_game import Classes, Interim

__all__ = ["envelope_step"]

#: reports of the range searched for the payment (E2) asks for (then linear in between)
_REPORTS = 2049
#: a cost whose expected eps is below this keeps its bid (nothing to fix a report by)
_LIVE = 1e-4


def envelope_step(
    interim: Callable,
    classes: Classes,
    tables: Sequence[tuple[np.ndarray, np.ndarray]],
    z_range: tuple[float, float],
    damping: float = 1.0,
    cdfs: Sequence[Callable] | None = None,
) -> list[tuple[np.ndarray, np.ndarray]]:
    """One envelope step on every class's table (module doc): the bids b + damping (z_E -
    b), z_E the report that pays what (E1)-(E2) say at the table's allocation, made
    non-decreasing.  The costs of each table are kept."""
    tables = [(np.asarray(c, dtype=float), np.maximum.accumulate(b)) for c, b in tables]
    laws_of = Interim(classes, [c for c, _ in tables], [b for _, b in tables], cdfs)
    counts = np.asarray(classes.counts)
    out = []
    for g, (costs, bids) in enumerate(tables):
        opponents = counts - (np.arange(counts.size) == g)
        below = laws_of.below(bids)
        below[g] = np.clip(np.asarray(classes.laws[g].cdf(costs), dtype=float), 0.0, 1.0)
        E, T = (np.asarray(x, dtype=float) for x in interim(bids, below, opponents))
        target = _envelope_payment(costs, E, T)
        z_env, found = _report_paying(interim, below, opponents, target, z_range)
        move = found & (E >= _LIVE)
        new = np.where(move, bids + damping * (z_env - bids), bids)
        out.append((costs, np.maximum.accumulate(new)))
    return out


def _envelope_payment(costs: np.ndarray, E: np.ndarray, T: np.ndarray) -> np.ndarray:
    """(E2) at every cost of the table: u(c_top) + int_c^c_top E dt + c E (E1), the
    integral by the trapezoid rule on the table's costs (dense where the law's mass
    is: they are its quantiles), u(c_top) the table's own utility at its top cost."""
    u_top = T[-1] - costs[-1] * E[-1]
    tail = cumulative_trapezoid(E[::-1], -costs[::-1], initial=0.0)[::-1]
    return u_top + tail + costs * E


def _report_paying(interim, below, opponents, target, z_range):
    """Per cost, the lowest report z of the range with T(z | below) >= target (the
    first crossing on ``_REPORTS`` even reports, then linear between the two around
    it) and whether there is one."""
    n = target.size
    Z = np.linspace(z_range[0], z_range[1], _REPORTS)
    reps = np.repeat(below, Z.size, axis=1)
    _, T = interim(np.tile(Z, n), reps, opponents)
    T = np.asarray(T, dtype=float).reshape(n, Z.size)
    reached = T >= target[:, None]
    j = np.argmax(reached, axis=1)
    found = reached.any(axis=1) & (j > 0)
    j = np.maximum(j, 1)
    rows = np.arange(n)
    t0, t1 = T[rows, j - 1], T[rows, j]
    frac = np.clip((target - t0) / np.maximum(t1 - t0, 1e-300), 0.0, 1.0)
    return Z[j - 1] + (Z[j] - Z[j - 1]) * frac, found
