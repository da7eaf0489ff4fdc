"""Mechanisms that read several fields of each seller: cost, privacy cap, data size.

**The protocol.**  A multi-field mechanism declares the fields it reads,
``report_fields = ("cost", "cap", "size")``, and implements ``outcome(reports, rng)``:
``reports`` is a numpy structured array whose last axis is the sellers (one record per
seller, fields named as in ``market_sim.multifield.FIELDS``; leading axes are
independent markets, so one call prices a batch) and the result is an
:class:`~market_sim.mechanisms.base.Outcome` of eps and payments of the same shape.
A structured array is numpy's record form: ``reports["cap"]`` is one field over every
market and seller, ``reports[..., i]`` seller i's records.  ``run`` checks the fields
and the result.  Build one with ``market_sim.multifield.records(cost=..., cap=...)``.

**Utility with caps** (:func:`utilities`).  A seller of true type (c, cap) that sells
eps at payment t gets t - c eps when eps <= cap; a mechanism that takes more than the
true cap gives it an unbounded loss, -inf: the seller never consented to that privacy
loss (FL-Market, Zheng et al. 2022, zeroes such a utility in training and counts it as
a violation; we count it as an IR violation of unbounded size).

**One-field mechanisms** run unchanged through :class:`OneField`, which reads the costs
and ignores every other field (a cap is then not respected unless eps happens to be
below it).

The literature's mechanisms (each from its paper; fields, and what the paper claims):

- :class:`PostedPricePerUnit`: a posted price p per unit, eps = min(cap, e_max) for
  every seller with cost <= p.  Truthful in cost and cap (proof in its docstring).
- :class:`CapThreshold`: the k lowest costs sell min(cap, e_max), each paid the
  (k+1)-th lowest cost per unit.  Truthful in cost and cap (proof in its docstring).
- :class:`FairQueryCaps`: Ghosh and Roth's FairQuery (EC 2011) with FL-Market's cap
  rule; with ``respect_caps=False`` and scale 1 it is MFG-RegretNet's PAC baseline.
- :class:`AllIn`: FL-Market's All-in (Zheng et al., IEEE BigData 2022): every winner
  sells its whole reported cap at a common price per unit of eps x size.
- :class:`VCGProcurement`: MFG-RegretNet's budgeted VCG procurement baseline.
- :class:`CSRA`: CSRA-QMS (IEEE TIFS 2024) as in MFG-RegretNet's baselines: a quality
  score from cap and size, winners paid in proportion to it.
- :class:`MFGPricing`: MFG-RegretNet's MFG-Pricing baseline: every seller sells its
  reported cap and the budget is split in proportion to the caps.

The bi-dimensional procurement auction PEPAC of arXiv:1504.01020 (truthful in cost and
capacity for linear revenue curves) is not implemented: only its abstract is reachable
from here, and its allocation and payment rules are not given there.  ``CapThreshold``
is a cap-respecting rule with its own proof instead.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from ..errors import MarketSimError
from ..multifield import FIELDS
from .base import Outcome, as_mechanism, mechanism_name

__all__ = [
    "MultiFieldMechanism",
    "OneField",
    "utilities",
    "as_multifield_mechanism",
    "PostedPricePerUnit",
    "CapThreshold",
    "FairQueryCaps",
    "AllIn",
    "VCGProcurement",
    "CSRA",
    "MFGPricing",
]

CAP_TOL = 1e-9  # eps up to cap (1 + CAP_TOL) is within the cap (rounding)


def utilities(outcome: Outcome, types: np.ndarray) -> np.ndarray:
    """t - c eps for true types (records with ``cost``, optionally ``cap``); -inf where
    eps exceeds the true cap (an unbounded loss, module docstring)."""
    eps, pay = np.asarray(outcome.eps), np.asarray(outcome.payments)
    with np.errstate(invalid="ignore"):  # 0 x inf: an infinite eps is -inf below anyway
        u = pay - types["cost"] * eps
    u = np.where(np.isposinf(eps), -np.inf, u)  # beyond every cap
    if "cap" in (types.dtype.names or ()):
        u = np.where(eps > types["cap"] * (1 + CAP_TOL), -np.inf, u)
    return u


class MultiFieldMechanism:
    """Base class of a mechanism reading several fields (module docstring)."""

    name: ClassVar[str] = ""
    report_fields: ClassVar[tuple[str, ...]] = ("cost",)
    randomized: ClassVar[bool] = False

    def outcome(self, reports: np.ndarray, rng: np.random.Generator | None = None) -> Outcome:
        raise NotImplementedError(f"{type(self).__name__} must implement outcome(reports, rng)")

    def run(self, reports: np.ndarray, rng: np.random.Generator | None = None) -> Outcome:
        """``outcome`` with the reports' fields and the result checked."""
        names = reports.dtype.names or ()
        missing = [f for f in self.report_fields if f not in names]
        if missing:
            raise MarketSimError(
                f"{mechanism_name(self)} reads {', '.join(self.report_fields)}; "
                f"the reports have no {missing[0]!r}"
            )
        if reports.ndim < 1 or reports.shape[-1] < 2:
            raise MarketSimError(f"{mechanism_name(self)}: a market needs at least two sellers")
        out = self.outcome(reports, rng)
        eps, pay = np.asarray(out.eps, dtype=float), np.asarray(out.payments, dtype=float)
        if eps.shape != reports.shape or pay.shape != reports.shape:
            raise MarketSimError(f"{mechanism_name(self)}: eps and payments must match the reports")
        if not (np.all(np.isfinite(eps)) and np.all(np.isfinite(pay)) and np.all(eps >= 0)):
            raise MarketSimError(
                f"{mechanism_name(self)}: eps must be finite and >= 0, payments finite"
            )
        return out


@dataclass(frozen=True)
class OneField(MultiFieldMechanism):
    """A one-field :class:`~market_sim.mechanisms.base.Mechanism` on multi-field reports:
    it reads the costs and ignores the other fields (each market run on its own)."""

    mechanism: object
    report_fields: ClassVar[tuple[str, ...]] = ("cost",)

    @property
    def name(self) -> str:  # type: ignore[override]
        return mechanism_name(self.mechanism)

    @property
    def randomized(self) -> bool:  # type: ignore[override]
        return bool(getattr(self.mechanism, "randomized", False))

    def outcome(self, reports, rng=None) -> Outcome:
        costs = reports["cost"].reshape(-1, reports.shape[-1])
        eps, pay = np.empty(costs.shape), np.empty(costs.shape)
        for row, c in enumerate(costs):
            out = self.mechanism.run(c, rng)  # type: ignore[attr-defined]
            eps[row], pay[row] = out.eps, out.payments
        return Outcome(eps.reshape(reports.shape), pay.reshape(reports.shape))

    def deviations_of(self, reports, seller: int, candidates, rng=None) -> Outcome:
        """Seller ``seller``'s eps and payment when it alone reports each of
        ``candidates`` ((markets, K) records), the others at ``reports`` ((markets, n)):
        the one-field mechanism's ``deviations`` on the costs, each distinct cost once
        per market (an offline mechanism answers from its payment curves, with no
        re-solve per candidate; candidates differing in another field only are one).
        eps may be +inf where the one-field mechanism gives it (a zero cost in the
        offline limit): above every cap."""
        costs, cand = reports["cost"], candidates["cost"]
        eps, pay = np.empty(cand.shape), np.empty(cand.shape)
        for row in range(cand.shape[0]):
            distinct, where = np.unique(cand[row], return_inverse=True)
            out = self.mechanism.deviations([seller], distinct[None, :], costs[row], rng)  # type: ignore[attr-defined]
            eps[row] = np.asarray(out.eps, dtype=float)[0][where]
            pay[row] = np.asarray(out.payments, dtype=float)[0][where]
        if not np.all(np.isfinite(pay)) or np.any(np.isnan(eps)) or np.any(eps < 0):
            raise MarketSimError(f"{self.name}: eps must be >= 0, payments finite")
        return Outcome(eps, pay)


def as_multifield_mechanism(spec, **context) -> MultiFieldMechanism:
    """A multi-field mechanism from itself, a registered multi-field name (with
    ``name:key=value`` parameters), or a one-field mechanism (wrapped in OneField)."""
    from ..registry import MULTIFIELD_MECHANISMS, check_params

    if isinstance(spec, MultiFieldMechanism):
        return _checked(spec)
    if isinstance(spec, str):
        name, params = MULTIFIELD_MECHANISMS.parse(spec)
        if name in MULTIFIELD_MECHANISMS.names():
            cls = MULTIFIELD_MECHANISMS.load(name)
            check_params(cls, params, f"mechanism {name!r}")
            try:
                return _checked(cls(**params))
            except TypeError as exc:
                raise MarketSimError(f"mechanism {name!r}: {exc}") from None
    if hasattr(spec, "report_fields") and callable(getattr(spec, "outcome", None)):
        return _checked(spec)
    try:
        return _multifield_form(as_mechanism(spec, **context))
    except MarketSimError as exc:
        if isinstance(spec, str) and "unknown" in str(exc):
            known = ", ".join(MULTIFIELD_MECHANISMS.names())
            raise MarketSimError(
                f"mechanism: unknown {spec!r} (multi-field: {known}; one-field: "
                "market-sim mechanisms)"
            ) from None
        raise


def _multifield_form(mech):
    """A one-field mechanism's form on records: its own multi-field form when it reads
    several fields (``multifield()``, e.g. an ONNX network naming its fields), else
    :class:`OneField`."""
    form = getattr(mech, "multifield", None)
    own = form() if callable(form) else None
    return OneField(mech) if own is None else _checked(own)


def _checked(mech):
    """A mechanism whose declared fields are all known fields."""
    fields = tuple(getattr(mech, "report_fields", ()))
    unknown = [f for f in fields if f not in FIELDS]
    if unknown or "cost" not in fields:
        what = f"unknown field {unknown[0]!r}" if unknown else "no cost"
        raise MarketSimError(
            f"{mechanism_name(mech)} declares {what}: report_fields are among "
            f"{', '.join(FIELDS)}, the cost first"
        )
    return mech


# ---- shared steps -------------------------------------------------------------------------
def _positive(name: str, value) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not value > 0:
        raise MarketSimError(f"{name} must be a number > 0, got {value!r}")
    return float(value)


def _sorted_by(key: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(order, rank): sellers sorted by ``key`` along the last axis, ties by index."""
    order = np.argsort(key, axis=-1, kind="stable")
    rank = np.empty_like(order)
    np.put_along_axis(rank, order, np.arange(key.shape[-1]), axis=-1)
    return order, rank


def _largest_k(ok: np.ndarray, *, prefix: bool) -> np.ndarray:
    """k* from ok[..., k - 1] (k = 1..K): the largest k with ok, or with ``prefix`` the
    number of leading oks (0 when none)."""
    k = np.arange(1, ok.shape[-1] + 1)
    if prefix:
        return np.cumprod(ok, axis=-1).sum(axis=-1)
    return np.max(np.where(ok, k, 0), axis=-1, initial=0)


def _equal_split(ok, rank, by_position) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """MFG-RegretNet's baselines' step: k* = the largest k in 1..n-1 with ok[..., k - 1];
    the sellers ranked below k* sell eps = 1/(n - k*).  Returns (eps, who wins, the
    value of ``by_position`` at position k*, 0-based: the (k*+1)-th)."""
    n = rank.shape[-1]
    kstar = _largest_k(ok, prefix=False)[..., None]
    e_star = np.where(kstar > 0, 1.0 / (n - kstar), 0.0)
    at_next = np.take_along_axis(by_position, np.minimum(kstar, n - 1), axis=-1)
    wins = rank < kstar
    return np.where(wins, e_star, 0.0), wins, at_next


def _caps(reports, default: float) -> np.ndarray:
    names = reports.dtype.names or ()
    return reports["cap"] if "cap" in names else np.full(reports.shape, default)


# ---- the mechanisms -------------------------------------------------------------------------
@dataclass(frozen=True)
class PostedPricePerUnit(MultiFieldMechanism):
    """A posted price per unit of privacy with caps: a seller with reported cost <= ``price``
    sells eps = min(reported cap, ``e_max``) and is paid ``price`` eps.

    *Truthful in cost and cap.*  Seller i's outcome depends on its own report only.
    With true (c, k) and report (c', k'): if it sells, u = (p - c) min(k', e) when
    min(k', e) <= k, else -inf.  If c <= p, u >= 0 is largest at the largest quantity
    not above k, min(k, e), which the truth gets; if c > p every sale has u < 0 and the
    truth sells nothing (u = 0).  So no report beats the truth, and u(truth) >= 0 (IR).
    """

    name: ClassVar[str] = "posted-price-caps"
    report_fields: ClassVar[tuple[str, ...]] = ("cost", "cap")
    price: float = 0.5
    e_max: float = 1.0

    def __post_init__(self):
        _positive("price", self.price)
        _positive("e_max", self.e_max)

    def outcome(self, reports, rng=None) -> Outcome:
        sells = reports["cost"] <= self.price
        eps = np.where(sells, np.minimum(_caps(reports, self.e_max), self.e_max), 0.0)
        return Outcome(eps, self.price * eps)


@dataclass(frozen=True)
class CapThreshold(MultiFieldMechanism):
    """The k lowest reported costs sell min(reported cap, ``e_max``), each paid T_i per
    unit, T_i = the k-th lowest of the others' costs (the (k+1)-th lowest overall);
    ties by index.  A k-unit Vickrey auction whose quantity respects each cap.

    *Truthful in cost and cap* (a proof for this rule, in the spirit of the
    bi-dimensional procurement of arXiv:1504.01020).  T_i depends on the others' costs
    only, and i wins iff c' < T_i (or c' = T_i and it is first among the ties).  With
    true (c, k): a winning report gives u = (T_i - c) min(k', e), -inf if min(k', e) > k.
    If c <= T_i the truth wins and sells min(k, e), the largest quantity within the cap,
    and (T_i - c) >= 0 makes that the best; if c > T_i every winning report gives u < 0
    and the truth gets 0 (or, at c = T_i, u = 0 either way).  IR: u(truth) >= 0.
    """

    name: ClassVar[str] = "cap-threshold"
    report_fields: ClassVar[tuple[str, ...]] = ("cost", "cap")
    k: int = 5
    e_max: float = 1.0

    def __post_init__(self):
        if isinstance(self.k, bool) or not isinstance(self.k, int) or self.k < 1:
            raise MarketSimError(f"k must be a positive integer, got {self.k!r}")
        _positive("e_max", self.e_max)

    def outcome(self, reports, rng=None) -> Outcome:
        n = reports.shape[-1]
        if self.k >= n:
            raise MarketSimError(f"cap-threshold buys k={self.k} of {n} sellers: k must be < n")
        cost = reports["cost"]
        order, rank = _sorted_by(cost)
        price = np.take_along_axis(cost, order[..., self.k : self.k + 1], axis=-1)
        wins = rank < self.k
        eps = np.where(wins, np.minimum(_caps(reports, self.e_max), self.e_max), 0.0)
        return Outcome(eps, price * eps)


@dataclass(frozen=True)
class FairQueryCaps(MultiFieldMechanism):
    """Ghosh and Roth's FairQuery (EC 2011) with caps, as FL-Market runs it (Zheng et al.,
    IEEE BigData 2022) and MFG-RegretNet's PAC baseline.

    Costs sorted r_(1) <= ... <= r_(n); e_k = s / (n - k) with s = ``scale`` (FL-Market:
    the largest reported cap, ``scale="max-cap"``; PAC: 1);

        k* = the number of leading k in 1..n-1 with  k e_k r_(k) <= B  and (with
             ``respect_caps``) the k lowest all reporting cap >= e_k,
        eps = e_k* and t = min(B / k*, r_(k*+1) e_k*) for the k* lowest.

    Both conditions only get harder as k grows, so "leading" is "largest".  FL-Market's
    code compares r_(k) (not r_(k) e_k) with B / k: its valuations are per allocation,
    ours per unit, and the per-unit form is Ghosh-Roth's and PAC's.  With
    ``respect_caps=False`` and scale 1 it equals ``fair-query`` (eps_scale 1).
    """

    name: ClassVar[str] = "fair-query-caps"
    report_fields: ClassVar[tuple[str, ...]] = ("cost", "cap")
    budget: float = 50.0
    scale: float | str = "max-cap"
    respect_caps: bool = True

    def __post_init__(self):
        _positive("budget", self.budget)
        if self.scale != "max-cap":
            _positive("scale", self.scale)

    def outcome(self, reports, rng=None) -> Outcome:
        n, B = reports.shape[-1], float(self.budget)
        cost = reports["cost"]
        caps = _caps(reports, np.inf)
        order, rank = _sorted_by(cost)
        r = np.take_along_axis(cost, order, axis=-1)
        if self.scale == "max-cap":
            s = np.max(caps, axis=-1, keepdims=True)
        else:
            s = np.full(cost.shape[:-1] + (1,), float(self.scale))
        k = np.arange(1, n)
        e = s / (n - k)  # e_k, k = 1..n-1
        ok = k * e * r[..., : n - 1] <= B
        if self.respect_caps:
            low_cap = np.minimum.accumulate(np.take_along_axis(caps, order, axis=-1), axis=-1)
            ok &= low_cap[..., : n - 1] >= e
        kstar = _largest_k(ok, prefix=True)[..., None]
        e_star = np.where(kstar > 0, s / (n - kstar), 0.0)
        next_cost = np.take_along_axis(r, np.minimum(kstar, n - 1), axis=-1)
        pay = np.minimum(B / np.maximum(kstar, 1), next_cost * e_star)
        wins = rank < kstar
        return Outcome(np.where(wins, e_star, 0.0), np.where(wins, pay, 0.0))


@dataclass(frozen=True)
class VCGProcurement(MultiFieldMechanism):
    """Budgeted VCG procurement as in MFG-RegretNet's baselines (``baselines/vcg.py``).

    Costs sorted r_(1) <= ... <= r_(n); k* = the largest k in 1..n-1 with
    k r_(k+1) / (n - k) <= B; the k* lowest sell eps = 1/(n - k*) and each is paid
    r_(k+1) / (n - k*) (the (k*+1)-th cost per unit times eps).  Caps are not read: a
    seller whose cap is below 1/(n - k*) has its cap exceeded.
    """

    name: ClassVar[str] = "vcg-procurement"
    report_fields: ClassVar[tuple[str, ...]] = ("cost",)
    budget: float = 50.0

    def __post_init__(self):
        _positive("budget", self.budget)

    def outcome(self, reports, rng=None) -> Outcome:
        n, B = reports.shape[-1], float(self.budget)
        cost = reports["cost"]
        order, rank = _sorted_by(cost)
        r = np.take_along_axis(cost, order, axis=-1)
        k = np.arange(1, n)
        ok = k * r[..., 1:n] / (n - k) <= B
        eps, wins, next_cost = _equal_split(ok, rank, r)
        return Outcome(eps, np.where(wins, next_cost * eps, 0.0))


@dataclass(frozen=True)
class CSRA(MultiFieldMechanism):
    """CSRA-QMS (client selection by reverse auction, IEEE TIFS 2024), one shot, as in
    MFG-RegretNet's baselines (``baselines/csra.py``; honesty p(H) = 1).

    Quality q_i = (cap_i / sum cap)(size_i / sum size), bid b_i = c_i cap_i; sellers sorted
    by q_i / b_i, largest first, ties by index; k* = the largest k in 1..n-1 with
    (b_(k+1) / q_(k+1)) sum_{j<=k} q_(j) <= B; the k* first sell eps = 1/(n - k*), each
    paid (b_(k*+1) / q_(k*+1)) q_i.

    A zero bid has q/b = +inf and ranks first (``zero_bid="first"``); the peers' code sets
    q/b = 0 there and ranks it last (``zero_bid="last"`` reproduces it).

    *Closed form* (the sums cancel): q_i / b_i = size_i / (c_i sum cap sum size), so the
    order is by size_i / c_i whatever the caps, and a winner is paid
    (c / size)_(k*+1) cap_i size_i: in proportion to its *reported* cap while eps does
    not move, so not truthful in cap; and the payment is not tied to the winner's own cost
    c_i / (n - k*), so a winner can be paid less (not IR) and a loser can gain by winning.
    """

    name: ClassVar[str] = "csra"
    report_fields: ClassVar[tuple[str, ...]] = ("cost", "cap", "size")
    budget: float = 50.0
    zero_bid: str = "first"

    def __post_init__(self):
        _positive("budget", self.budget)
        if self.zero_bid not in ("first", "last"):
            raise MarketSimError(f"zero_bid must be 'first' or 'last', got {self.zero_bid!r}")

    def outcome(self, reports, rng=None) -> Outcome:
        n, B = reports.shape[-1], float(self.budget)
        cap, size = reports["cap"], reports["size"]
        q = (cap / cap.sum(axis=-1, keepdims=True)) * (size / size.sum(axis=-1, keepdims=True))
        bid = reports["cost"] * cap
        at_zero = np.inf if self.zero_bid == "first" else 0.0
        with np.errstate(divide="ignore", invalid="ignore"):
            ratio = np.where(bid > 0, q / bid, at_zero)
        order, rank = _sorted_by(-ratio)
        q_s = np.take_along_axis(q, order, axis=-1)
        b_s = np.take_along_axis(bid, order, axis=-1)
        unit = b_s / q_s  # b_(j) / q_(j): the price per unit of quality at position j
        ok = unit[..., 1:n] * np.cumsum(q_s, axis=-1)[..., : n - 1] <= B
        eps, wins, scale = _equal_split(ok, rank, unit)
        return Outcome(eps, np.where(wins, scale * q, 0.0))


@dataclass(frozen=True)
class AllIn(MultiFieldMechanism):
    """FL-Market's All-in (Zheng et al., IEEE BigData 2022, ``singleminded.allin``).

    A seller's price per unit of eps x size is u_i = c_i / size_i (its valuation of its
    whole cap, c_i cap_i, over cap_i size_i).  In increasing u_i (ties by index) each
    seller is added when (W + cap_i size_i) u_i <= B, W the weight added so far (a seller
    that does not fit is skipped, the next ones still tried).  Winners sell their whole
    reported cap, eps_i = cap_i, and are paid cap_i size_i B / W: every winner gets one
    price B / W per unit of weight and the spend is exactly B.
    """

    name: ClassVar[str] = "all-in"
    report_fields: ClassVar[tuple[str, ...]] = ("cost", "cap", "size")
    budget: float = 50.0

    def __post_init__(self):
        _positive("budget", self.budget)

    def outcome(self, reports, rng=None) -> Outcome:
        B = float(self.budget)
        cap, size = reports["cap"], reports["size"]
        unit = reports["cost"] / size
        order, _ = _sorted_by(unit)
        weight = cap * size
        W = np.zeros(reports.shape[:-1])
        wins = np.zeros(reports.shape, dtype=bool)
        for pos in range(reports.shape[-1]):
            i = order[..., pos : pos + 1]
            w_i = np.take_along_axis(weight, i, axis=-1)[..., 0]
            u_i = np.take_along_axis(unit, i, axis=-1)[..., 0]
            fits = (W + w_i) * u_i <= B
            W = np.where(fits, W + w_i, W)
            np.put_along_axis(wins, i, fits[..., None], axis=-1)
        price = np.where(W > 0, B / np.where(W > 0, W, 1.0), 0.0)[..., None]
        eps = np.where(wins, cap, 0.0)
        return Outcome(eps, eps * size * price)


@dataclass(frozen=True)
class MFGPricing(MultiFieldMechanism):
    """MFG-Pricing as MFG-RegretNet's baseline (``baselines/mfg_pricing.py``; the paper cites
    Hu-Bolz et al., High-Confidence Computing 2025, a mean-field data pricing strategy whose
    own text is not reachable here): no auction, every seller sells its reported cap
    clipped to [``cap_low``, ``cap_high``], eps_i = clip(cap_i), and the budget is split
    in proportion, t_i = B eps_i / sum_j eps_j (the spend is exactly B).

    *Properties* (proof sketch).  The cost report is never read: truthful in cost.  In
    the cap, with S = sum_{j != i} eps_j and a report x = clip(cap') <= cap (a larger x
    exceeds the true cap: -inf), u(x) = B x / (x + S) - c x is strictly concave
    (u'' = -2 B S / (x + S)^3), so the best report is the projection of the stationary
    point, x* = clip(sqrt(B S / c) - S, cap_low, min(cap, cap_high)) (c = 0: the top).
    The truth, x = min(cap, cap_high), is a best report iff
    c <= B S / (min(cap, cap_high) + S)^2; a higher cost gains by reporting a smaller
    cap (not IC in cap).  IR: u(truth) = x (B / sum eps - c) >= 0 iff c <= B / sum eps;
    with 10 sellers, caps <= 5 and costs <= 1 that holds for every profile when B >= 50,
    and fails at B = 10 when sum eps > 10 / c.  A true cap below cap_low is exceeded.
    """

    name: ClassVar[str] = "mfg-pricing"
    report_fields: ClassVar[tuple[str, ...]] = ("cost", "cap")
    budget: float = 50.0
    cap_low: float = 0.1
    cap_high: float = 5.0

    def __post_init__(self):
        _positive("budget", self.budget)
        _positive("cap_low", self.cap_low)
        if not _positive("cap_high", self.cap_high) >= self.cap_low:
            raise MarketSimError(f"cap_high must be >= cap_low, got {self.cap_high!r}")

    def outcome(self, reports, rng=None) -> Outcome:
        eps = np.clip(_caps(reports, self.cap_high), self.cap_low, self.cap_high)
        return Outcome(eps, float(self.budget) * eps / eps.sum(axis=-1, keepdims=True))
