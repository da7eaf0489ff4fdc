"""Modified instances of a library mechanism: the object, not its class, is what pays.

The library's online mechanism on U[1, 5] planned for 5 sellers answers each seller from
its own report alone: eps_i(z) = scale (lam - gamma psi(z))^+, which is 0 for every
z >= 2 here (its cut-off cost is below 2: ``test_truth_by_brute_force`` sees
eps_i(2) = 0), and pays by Eq. 8 up to the top, so a seller of cost c >= 2 gets exactly
0 at every report z >= 2.  A bonus B for reports in the top window [5 - 4e-6, 5] (1e-6
of the support) therefore gives a seller of cost 4.9 reporting 5 a gain of exactly B."""

from __future__ import annotations

import copy
import types

import numpy as np

from market_sim.distributions import parse_distribution
from market_sim.mechanisms.base import Mechanism, Outcome, as_mechanism
from market_sim.mechanisms.online import OnlineMechanism

from .common import Case, IRWitness, Witness, drawn_profiles

LAW = "uniform:1:5"
PROFILES = drawn_profiles(1.0, 5.0, 5, seed=3)
BONUS, WINDOW = 1.0, 5.0 - 4e-6


def online() -> OnlineMechanism:
    return as_mechanism("online", dist=parse_distribution(LAW), n_sellers=5)


def _library_outcome(mech, reports, rng=None) -> Outcome:
    return OnlineMechanism.outcome(mech, np.asarray(reports, dtype=float), rng)


def _plus(out: Outcome, extra) -> Outcome:
    return Outcome(out.eps, np.asarray(out.payments, dtype=float) + extra, out.info)


def _top_bonus(self, reports, rng=None) -> Outcome:
    bonus = BONUS * (np.asarray(reports, dtype=float) >= WINDOW)
    return _plus(_library_outcome(self, reports, rng), bonus)


def top_bonus_instance() -> Mechanism:
    """The online mechanism with ``outcome`` (bonus 1 in [5 - 4e-6, 5]) and ``deviations``
    (the generic re-run of that outcome) bound on the instance.  Cost 4.9 reporting 5
    gains exactly 1 (module doc): not IC; IR (the bonus is >= 0)."""
    mech = online()
    mech.outcome = types.MethodType(_top_bonus, mech)
    mech.deviations = types.MethodType(Mechanism.deviations, mech)
    return mech


def top_bonus_outcome_only() -> Mechanism:
    """The same bonus bound as ``outcome`` only: the class's closed-form ``deviations``
    still describe the unmodified mechanism and disagree with what ``outcome`` pays.
    The mechanism is what ``outcome`` (``run``) does: not IC (cost 4.9 reporting 5
    gains 1), IR."""
    mech = online()
    mech.outcome = types.MethodType(_top_bonus, mech)
    return mech


def wrapped_instance() -> Mechanism:
    """The online mechanism with ``outcome`` bound on the instance to a wrapper that
    returns the library's outcome unchanged: the same mechanism, IC and IR (Eq. 8 over a
    non-increasing eps; the payment at the top is 0)."""
    mech = online()
    mech.outcome = types.MethodType(_library_outcome, mech)
    return mech


class FeeOnline(OnlineMechanism):
    """A subclass of the library's class: the online payments minus 0.01.  A constant:
    IC; a seller of cost 5 gets eps 0 and pays 0.01: u = -0.01.  Not IR."""

    def outcome(self, reports, rng=None):
        return _plus(_library_outcome(self, reports, rng), -0.01)


def fee_subclass() -> Mechanism:
    mech = copy.copy(online())
    mech.__class__ = FeeOnline
    return mech


TOP = Witness(0, 4.9, 5.0, PROFILES[0], BONUS)
CASES = [
    Case("online-top-bonus-instance", "modified library instance", top_bonus_instance, LAW,
         False, True, PROFILES, gain=TOP, points=(2.0, WINDOW)),
    Case("online-top-bonus-outcome-only", "modified library instance", top_bonus_outcome_only,
         LAW, False, True, PROFILES, gain=TOP, points=(2.0, WINDOW)),
    Case("online-wrapped", "modified library instance", wrapped_instance, LAW, True, True,
         PROFILES),
    Case("online-fee-subclass", "modified library instance", fee_subclass, LAW, True, False,
         PROFILES, ir_fail=IRWitness(0, 5.0, PROFILES[0], -0.01)),
]  # fmt: skip
