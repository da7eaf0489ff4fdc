"""A privacy ledger per seller: what repeated sales of its data have cost it.

Each round in which the platform buys eps_i from seller i it trains Algorithm 1
(003) on the seller's row, which is eps_i-DP for that seller (Prop. II.2) and is
known to be nothing more.  The ledger therefore treats a sale at eps_i as an
eps_i-DP mechanism of unknown form and composes its worst case: binary randomized
response at eps_i (RR_e: P = (q, 1 - q), Q = (1 - q, q), q = e^e/(1 + e^e)).
Every e-DP pair of output distributions is a post-processing of RR_e's pair
(Kairouz, Oh & Viswanath 2015), so the composition of RR events bounds the
composition of any eps_i-DP mechanisms (Algorithm 1 and released statistics alike),
and is attained by RR itself: the bound is tight for the class.  In ``dp_accounting``
one sale is ``RandomizedResponseDpEvent(noise_parameter=2/(1 + e^eps_i), num_buckets=2)``
(with probability p a uniform bucket, so Pr[keep] = 1 - p/2 = q) under REPLACE_ONE.
Prop. II.2's slack Delta_i = 2 log(1 + a_i/Lambda) (objective perturbation's
regularisation Lambda; the paper's uniform 2 log(1 + k/(m Lambda))) is not charged:
the ledger counts the eps_i sold (Remark II.3: eps_i + Delta ~ eps_i).

Accountants (``ACCOUNTANTS``):

* ``basic``: eps_spent = sum_t eps_t (pure-DP composition, no delta needed);
* ``rdp``: Renyi DP of RR_e at order a > 1 (``rr_rdp``):
  R_a(e) = log(q^a (1-q)^(1-a) + (1-q)^a q^(1-a)) / (a - 1)
         = (logaddexp(a e, (1 - a) e) - logaddexp(0, e)) / (a - 1);
  RDP adds over rounds; at delta > 0 it converts to
  eps = min_a R_a + log1p(-1/a) - log(a delta)/(a - 1)   (Canonne et al. 2020, Prop. 12);
* ``pld``: privacy-loss distributions (``dp_accounting.pld``, RR's two-point loss
  +-e), pessimistic discretisation ``pld_interval``; eps = the smallest with
  hockey-stick(eps) <= delta.

Every accountant's eps is a valid bound and so is the sum; the ledger reports
``min(sum, accountant)``.  At the budget's delta = 0 all three are the sum: pure-DP
composition is tight (RR's T losses all sit at their maximum with probability
q^T > 0), so only a budget with delta > 0 lets a tighter accountant help.

Work per round: ``basic`` and ``rdp`` are array operations on (m,) and (m, K)
arrays (K RDP orders).  ``pld`` keeps one PLD per distinct history (a multiset of
per-round eps): sellers with the same history share it, and each round composes one
RR PLD per distinct (history, eps) pair.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from ..errors import MarketSimError

__all__ = [
    "ACCOUNTANTS",
    "RDP_ORDERS",
    "Accountant",
    "accountant_class",
    "Budget",
    "PrivacyLedger",
    "pure_dp_rdp",
    "rdp_to_eps",
    "rr_noise_parameter",
    "rr_rdp",
    "spent_under",
]

# The orders dp_accounting's RdpAccountant uses by default (so the numbers agree).
RDP_ORDERS = np.array(
    [1 + x / 10.0 for x in range(1, 100)] + list(range(11, 64)) + [128, 256, 512, 1024],
    dtype=float,
)


@dataclass(frozen=True)
class Budget:
    """A seller's lifetime privacy budget: composed loss <= ``eps`` at ``delta``."""

    eps: float
    delta: float = 0.0

    def __post_init__(self):
        eps, delta = self.eps, self.delta
        if not (
            isinstance(eps, (int, float))
            and not isinstance(eps, bool)
            and math.isfinite(eps)
            and eps > 0
        ):
            raise MarketSimError(f"budget: eps must be a finite number > 0 (got {eps!r})")
        if not (isinstance(delta, (int, float)) and not isinstance(delta, bool)):
            raise MarketSimError(f"budget: delta must be a number (got {delta!r})")
        if delta != 0 and not (0 < delta < 1):
            raise MarketSimError(f"budget: delta must be in (0, 1) (got {delta!r})")
        object.__setattr__(self, "eps", float(eps))
        object.__setattr__(self, "delta", float(delta))

    @classmethod
    def parse(cls, value) -> Budget:
        """From a Budget, a number (pure DP), a pair ``(eps, delta)`` or ``"EPS[:DELTA]"``."""
        if isinstance(value, Budget):
            return value
        if isinstance(value, str):
            parts = value.split(":")
            try:
                nums = [float(p) for p in parts]
            except ValueError:
                raise MarketSimError(f"budget: {value!r} is not EPS or EPS:DELTA") from None
            if len(nums) not in (1, 2):
                raise MarketSimError(f"budget: {value!r} is not EPS or EPS:DELTA")
            return cls._explicit(*nums)
        if isinstance(value, (tuple, list)):
            if len(value) != 2:
                raise MarketSimError(f"budget: give eps or (eps, delta), got {value!r}")
            return cls._explicit(*value)
        return cls(value)

    @classmethod
    def _explicit(cls, eps, delta=None) -> Budget:
        """A delta that is given must be in (0, 1); pure DP is eps alone."""
        if delta is not None and not (
            isinstance(delta, (int, float)) and not isinstance(delta, bool) and 0 < delta < 1
        ):
            raise MarketSimError(
                f"budget: delta must be in (0, 1) (got {delta!r}); for pure DP give eps alone"
            )
        return cls(eps) if delta is None else cls(eps, delta)


# ---- Renyi DP of randomized response, in closed form ---------------------------------
def rr_noise_parameter(eps) -> np.ndarray:
    """``dp_accounting``'s noise parameter of binary RR at loss e: p = 2/(1 + e^e)
    (a uniform bucket with probability p, so Pr[keep] = 1 - p/2 = e^e/(1 + e^e))."""
    e = np.asarray(eps, dtype=float)
    # 2/(1 + e^e) as written (the float the PLD's +-e is computed from), 2 e^-e past overflow
    return np.where(e <= 700, 2.0 / (1.0 + np.exp(np.minimum(e, 700))), 2.0 * np.exp(-e))


def rr_rdp(eps, orders=RDP_ORDERS) -> np.ndarray:
    """R_a(e) of binary randomized response at loss e, the worst e-DP mechanism,
    shape (len(eps), len(orders)): with q = e^e/(1 + e^e), a > 1,
    R_a(e) = log(q^a (1-q)^(1-a) + (1-q)^a q^(1-a)) / (a - 1)
           = (logaddexp(a e, (1 - a) e) - logaddexp(0, e)) / (a - 1)   (log-sum-exp)."""
    e = np.asarray(eps, dtype=float).reshape(-1, 1)
    a = np.asarray(orders, dtype=float).reshape(1, -1)
    if np.any(a <= 1):
        raise MarketSimError("rr_rdp: orders must be > 1")
    with np.errstate(invalid="ignore"):
        r = (np.logaddexp(a * e, (1 - a) * e) - np.logaddexp(0.0, e)) / (a - 1)
    # e = +inf (the data given without noise, ``privacy.limit``): R_a = +inf, not inf - inf
    return np.where(np.isposinf(e), np.inf, r)


# The RDP bound of any e-DP mechanism (RR dominates them all).
pure_dp_rdp = rr_rdp


def rdp_to_eps(rdp, delta: float, orders=RDP_ORDERS) -> np.ndarray:
    """eps at ``delta`` from RDP curves (rows): min over orders a > 1.01 of
    R_a + log1p(-1/a) - log(a delta)/(a - 1) (Canonne, Kamath, Steinke 2020, Prop. 12),
    and 0 where delta^2 >= 1 - exp(-R_a) (the KL bound already gives delta)."""
    r = np.atleast_2d(np.asarray(rdp, dtype=float))
    a = np.asarray(orders, dtype=float)
    eps = r + np.log1p(-1 / a) - np.log(a * delta) / (a - 1)
    eps = np.where(a > 1.01, eps, np.inf)
    eps = np.where(delta**2 + np.expm1(-r) > 0, 0.0, eps)
    return np.maximum(eps.min(axis=1), 0.0)


# ---- accountants -----------------------------------------------------------------------
class Accountant:
    """Composes per-seller eps-DP events (as binary RR, their worst case); subclasses
    keep their state in arrays.

    ``after(ids, eps)``: the composed eps at ``delta`` of each seller ``ids[k]`` if it
    also took an event at ``eps[k]`` now (nothing recorded);
    ``record(ids, eps)``: add those events; ``spent``: the composed eps so far."""

    name: ClassVar[str] = ""
    # how much more than e one e-DP event may add to ``spent`` numerically
    slack: float = 0.0

    def __init__(self, n: int, delta: float):
        self.n, self.delta = int(n), float(delta)
        self.spent = np.zeros(self.n)

    def after(self, ids: np.ndarray, eps: np.ndarray) -> np.ndarray:
        raise NotImplementedError

    def record(self, ids: np.ndarray, eps: np.ndarray) -> None:
        raise NotImplementedError

    def labels(self, ids: np.ndarray) -> np.ndarray:
        """Equal labels for sellers in the same state (they share a computation)."""
        return np.unique(self.spent[ids], return_inverse=True)[1].reshape(-1)


class BasicAccountant(Accountant):
    """eps_spent = sum of the eps taken (pure-DP composition)."""

    name = "basic"

    def after(self, ids, eps):
        return self.spent[ids] + eps

    def record(self, ids, eps):
        self.spent[ids] += eps


class RdpAccountant(Accountant):
    """Each seller's RDP curve on ``RDP_ORDERS``: an (n, K) array, added to each round."""

    name = "rdp"
    slack = 1e-9

    def __init__(self, n: int, delta: float, orders=RDP_ORDERS):
        super().__init__(n, delta)
        self.orders = np.asarray(orders, dtype=float)
        self.rdp = np.zeros((self.n, self.orders.size))

    def _curves(self, eps: np.ndarray) -> np.ndarray:
        """RR's RDP of each eps, one closed-form row per distinct value."""
        levels, inv = np.unique(eps, return_inverse=True)
        return rr_rdp(levels, self.orders)[inv.reshape(-1)]

    def after(self, ids, eps):
        return rdp_to_eps(self.rdp[ids] + self._curves(eps), self.delta, self.orders)

    def record(self, ids, eps):
        self.rdp[ids] += self._curves(eps)
        self.spent[ids] = rdp_to_eps(self.rdp[ids], self.delta, self.orders)

    def labels(self, ids):
        return np.unique(self.rdp[ids], axis=0, return_inverse=True)[1].reshape(-1)


class PldAccountant(Accountant):
    """One PLD per distinct history (a sorted tuple of (eps, count) pairs); sellers
    point at their history (``hid``), so equal histories are composed once."""

    name = "pld"
    # RR at e > MAX_EVENT flips with probability 1/(1 + e^e), below float range: no PLD is
    # built, and that seller's bound is the sum from then on (a valid one)
    MAX_EVENT: ClassVar[float] = 700.0

    def __init__(self, n: int, delta: float, interval: float = 1e-3):
        super().__init__(n, delta)
        try:
            from dp_accounting.pld import privacy_loss_distribution as pld
        except ImportError:
            raise MarketSimError(
                "the pld accountant needs dp-accounting: pip install 'market_sim[accounting]'"
            ) from None

        self._pld_mod, self.interval = pld, float(interval)
        self.slack = 2 * self.interval  # pessimistic discretisation: up to one step per event
        self.keys: list[tuple] = [()]
        self.index: dict[tuple, int] = {(): 0}
        self.eps_of: list[float] = [0.0]
        self.plds: dict[int, Any] = {0: pld.identity(self.interval)}
        self.hid = np.zeros(self.n, dtype=np.int64)
        self._rr: dict[float, Any] = {}

    def labels(self, ids):
        return self.hid[ids]

    def event(self, e: float):
        """The PLD of one e-DP event: binary RR at loss e (privacy loss +-e), REPLACE_ONE."""
        p = self._rr.get(e)
        if p is None:
            if len(self._rr) >= 4096:  # bounded: bisection tries many levels
                self._rr.clear()
            p = self._rr[e] = self._pld_mod.from_randomized_response(
                noise_parameter=float(rr_noise_parameter(e)),
                num_buckets=2,
                value_discretization_interval=self.interval,
            )
        return p

    def _child(self, h: int, e: float) -> int:
        """The history h plus one event at e (composed now if new)."""
        counts = dict(self.keys[h])
        counts[e] = counts.get(e, 0) + 1
        key = tuple(sorted(counts.items()))
        c = self.index.get(key)
        if c is None:
            c = self.index[key] = len(self.keys)
            self.keys.append(key)
            pld = self._pld(h).compose(self.event(e))
            self.plds[c] = pld
            self.eps_of.append(float(pld.get_epsilon_for_delta(self.delta)))
        return c

    def _pld(self, h: int):
        p = self.plds.get(h)
        if p is None:  # dropped: rebuild from the history
            p = self.plds[0]
            for e, k in self.keys[h]:
                p = p.compose(self.event(e).self_compose(k))
            self.plds[h] = p
        return p

    def _children(self, ids, eps) -> np.ndarray:
        """Each seller's history plus its event; -1 = no PLD (see ``MAX_EVENT``)."""
        kids = np.full(ids.size, -1, dtype=np.int64)
        ok = (eps <= self.MAX_EVENT) & (self.hid[ids] >= 0)
        if ok.any():
            pairs = np.column_stack([self.hid[ids[ok]].astype(float), eps[ok]])
            uniq, inv = np.unique(pairs, axis=0, return_inverse=True)
            new = np.array([self._child(int(h), float(e)) for h, e in uniq], dtype=np.int64)
            kids[ok] = new[inv.reshape(-1)]
        return kids

    def _eps(self, kids: np.ndarray) -> np.ndarray:
        out = np.full(kids.size, np.inf)  # no PLD bound: the ledger's min is the sum
        ok = kids >= 0
        out[ok] = np.asarray(self.eps_of, dtype=float)[kids[ok]]
        return out

    def after(self, ids, eps):
        return self._eps(self._children(ids, eps))

    def record(self, ids, eps):
        kids = self._children(ids, eps)
        self.hid[ids] = kids
        self.spent[ids] = self._eps(kids)
        live = set(np.unique(self.hid).tolist())
        for h in [h for h in self.plds if h not in live and h != 0]:
            del self.plds[h]  # only the live histories' PLDs are kept


ACCOUNTANTS: dict[str, type[Accountant]] = {
    c.name: c for c in (BasicAccountant, RdpAccountant, PldAccountant)
}


def accountant_class(name) -> type[Accountant]:
    """The accountant registered as ``name``; a one-line error for any other name."""
    cls = ACCOUNTANTS.get(name) if isinstance(name, str) else None
    if cls is None:
        raise MarketSimError(
            f"unknown accountant {name!r} (one of: {', '.join(sorted(ACCOUNTANTS))})"
        )
    return cls


# ---- the ledger ----------------------------------------------------------------------------
class PrivacyLedger:
    """Per-seller composed privacy loss against a lifetime ``budget``.

    ``spent`` (n,): min(sum of eps, the accountant's eps at the budget's delta);
    ``left`` = budget.eps - spent.  ``cap(ids)`` is each seller's largest eps this
    round whose composition stays within the budget; ``charge(ids, eps)`` records a
    round and returns the increase of each seller's composed loss.  A seller is
    ``exhausted`` when its cap is below ``min_eps`` (default 1e-3 of the budget)."""

    def __init__(
        self,
        n: int,
        budget,
        accountant: str = "basic",
        *,
        pld_interval: float = 1e-3,
        min_eps: float | None = None,
        grid: float | None = None,
    ):
        self.budget = Budget.parse(budget)
        cls = accountant_class(accountant)
        self.accountant_name = cls.name
        self.n = int(n)
        self.basic = BasicAccountant(self.n, self.budget.delta)
        # at delta = 0 every accountant is the sum (module docstring)
        self.tight: Accountant | None = None
        if cls is not BasicAccountant and self.budget.delta > 0:
            kw = {"interval": pld_interval} if cls is PldAccountant else {}
            self.tight = cls(self.n, self.budget.delta, **kw)
        self.min_eps = 1e-3 * self.budget.eps if min_eps is None else float(min_eps)
        # tight accountants' caps are multiples of ``grid`` (rounded down: conservative)
        self.grid = 1e-4 * self.budget.eps if grid is None else float(grid)
        self.rounds = np.zeros(self.n, dtype=np.int64)  # rounds with eps > 0

    @property
    def spent(self) -> np.ndarray:
        if self.tight is None:
            return self.basic.spent
        return np.minimum(self.basic.spent, self.tight.spent)

    @property
    def left(self) -> np.ndarray:
        return self.budget.eps - self.spent

    def after(self, ids, eps) -> np.ndarray:
        """Composed loss of sellers ``ids`` if each took ``eps`` now (not recorded)."""
        ids = np.asarray(ids, dtype=np.int64).reshape(-1)
        eps = np.asarray(eps, dtype=float).reshape(-1)
        out = self.basic.after(ids, eps)
        pos = eps > 0
        if self.tight is not None and pos.any():
            out[pos] = np.minimum(out[pos], self.tight.after(ids[pos], eps[pos]))
        return np.where(pos, out, self.spent[ids])

    def lower_cap(self, ids) -> np.ndarray:
        """A lower bound on ``cap(ids)`` with no composition: composing an e-DP event
        adds at most e to the composed loss (up to the accountant's numerical slack)."""
        ids = np.asarray(ids, dtype=np.int64).reshape(-1)
        slack = 0.0 if self.tight is None else self.tight.slack
        return np.maximum(self.left[ids] - slack, 0.0)

    def cap(self, ids) -> np.ndarray:
        """The largest eps each seller ``ids`` can take now within its budget.

        With the sum it is ``left``.  Else it is the largest multiple k * ``grid`` with
        ``after(ids, k grid) <= budget``, or ``lower_cap`` if that is larger and fits
        (the result is rounded down: conservative): ``lower_cap`` gives a start, doubling an
        upper end, then bisection on k, vectorised over the sellers; sellers in the
        same state (same spent sum and same accountant state) are computed once."""
        ids = np.asarray(ids, dtype=np.int64).reshape(-1)
        if self.tight is None or ids.size == 0:
            return np.maximum(self.left[ids], 0.0)
        state = np.column_stack([self.tight.labels(ids), self.basic.spent[ids]])
        _, first, inv = np.unique(state, axis=0, return_index=True, return_inverse=True)
        rep = ids[first]
        b, g = self.budget.eps, self.grid

        def fits(k):
            return self.after(rep, k * g) <= b

        low = self.lower_cap(rep)
        low = np.where(self.after(rep, low) <= b, low, 0.0)  # kept if it fits
        lo = np.floor(low / g)
        lo = np.where(fits(lo), lo, 0.0)
        hi = np.maximum(2 * lo, 1.0)
        for _ in range(64):  # double until the budget is crossed
            over = ~fits(hi)
            if over.all():
                break
            lo, hi = np.where(over, lo, hi), np.where(over, hi, 2 * hi)
        while np.any(hi - lo > 1):
            mid = np.floor(0.5 * (lo + hi))
            good = fits(mid)
            lo, hi = np.where(good, mid, lo), np.where(good, hi, mid)
        return np.maximum(lo * g, low)[inv.reshape(-1)]

    def exhausted(self) -> np.ndarray:
        """(n,) bool: sellers whose cap is below ``min_eps``."""
        low = np.flatnonzero(self.left < max(self.min_eps, 0.0) + 1e-12)
        out = np.zeros(self.n, dtype=bool)
        if low.size:
            out[low] = self.cap(low) < self.min_eps
        return out

    def charge(self, ids, eps) -> np.ndarray:
        """Record a round's eps for sellers ``ids``; returns the increase of each
        one's composed loss (the quantity its privacy cost is charged on)."""
        ids = np.asarray(ids, dtype=np.int64).reshape(-1)
        eps = np.asarray(eps, dtype=float).reshape(-1)
        before = self.spent[ids].copy()
        pos = eps > 0
        if pos.any():
            self.basic.record(ids[pos], eps[pos])
            if self.tight is not None:
                self.tight.record(ids[pos], eps[pos])
            self.rounds[ids[pos]] += 1
        with np.errstate(invalid="ignore"):
            rise = np.maximum(self.spent[ids] - before, 0.0)
        # an event at eps = +inf (data given without noise, ``privacy.limit``) raises the
        # loss without bound even where it was already +inf (inf - inf is not 0)
        return np.where(np.isposinf(eps), np.inf, rise)


def spent_under(
    eps_history, delta: float, accountants=("basic", "rdp", "pld"), pld_interval: float = 1e-3
) -> dict[str, np.ndarray]:
    """Each seller's composed loss at ``delta`` under each accountant, from a (T, n)
    array of the eps it was allocated round by round (0 = not bought)."""
    h = np.atleast_2d(np.asarray(eps_history, dtype=float))
    n = h.shape[1]
    out: dict[str, np.ndarray] = {}
    ids = np.arange(n)
    for name in accountants:
        # the budget's eps plays no part in what is spent
        led = PrivacyLedger(n, Budget(1.0, delta), name, pld_interval=pld_interval)
        for row in h:
            led.charge(ids, row)
        out[name] = led.spent.copy()
    return out
