"""The one mechanism interface: reports in, privacy levels and payments out.

Write a mechanism by subclassing :class:`Mechanism` and implementing
``outcome(reports, rng)``; everything else (a seller's utility at other
reports, best responses, regret, the IC/IR audit) has a correct generic
default that re-runs ``outcome`` with one report replaced::

    class UniformPrice(Mechanism):
        def __init__(self, n_buy=5, eps_level=1.0):
            self.n_buy, self.eps_level = n_buy, eps_level

        def outcome(self, reports, rng=None):
            order = np.argsort(reports, kind="stable")
            eps = np.zeros(len(reports)); eps[order[:self.n_buy]] = self.eps_level
            price = reports[order[self.n_buy]] if len(reports) > self.n_buy else np.inf
            return eps, price * eps

Class attributes a mechanism may set:

``randomized``
    the outcome is a random draw (it uses ``rng``).  Utilities are then
    expectations over the draw.  The generic default estimates them by Monte
    Carlo over ``n_draws`` draws with *common random numbers*: every candidate
    report of every seller sees the same ``n_draws`` seeds (taken once per call
    from ``rng``), so the differences between candidates, which decide best
    responses and regret, carry no sampling noise from unrelated draws.
    Built-in randomized mechanisms override this with exact expectations.
``own_report_inclusion``
    given the mechanism's public randomness, whether a seller is bought depends
    on its own report only (used for the sensitivity of released statistics).
``needs_data``
    the allocation depends on the sellers' data: the platform calls
    ``with_data(X, y)`` before each round.
``per_seller_laws``
    the mechanism is defined per seller: its ``dist`` may be a
    :class:`~market_sim.distributions.SellerLaws` (each seller's own cost law).
    ``as_mechanism(spec, population=pop)`` then passes ``pop.seller_laws``; a
    mechanism without it gets ``pop.pooled``, the law of a seller picked at random.
    Set on offline, pay-as-bid and online.
``myerson_payments``
    the payments are computed from the allocation by Myerson's identity (Eq. 8,
    003), t_i = r_i eps_i + int_{r_i}^{c_high} eps_i(z, r_-i) dz.  Set on the
    library's offline, online and ``myerson_mechanism``; the audit certifies
    (``market_sim.certification``) only library classes that set it, never a
    user's class (a claim the audit cannot verify between the reports it tries).

Construction from a name: ``Mechanism.from_context(dist=..., n_sellers=...,
mu=..., sigma=..., gamma=..., privacy=..., **params)`` passes each market
setting the constructor accepts (by parameter name) and every explicit param;
``as_mechanism(spec, population=pop, ...)`` takes ``dist`` and ``n_sellers`` from a
:class:`~market_sim.population.Population` (see ``per_seller_laws``).
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np

from ..errors import MarketSimError
from ..privacy.limit import privacy_cost
from ..registry import MECHANISMS, check_params

__all__ = [
    "Mechanism",
    "Outcome",
    "as_outcome",
    "checked_outcome_arrays",
    "as_mechanism",
    "mechanism_name",
    "in_own_support",
    "seller_ends",
]


@dataclass(frozen=True)
class Outcome:
    """What a mechanism decides: ``eps`` and ``payments`` per seller (same shape),
    and optional ``info`` (e.g. the drawn price or cut-off)."""

    eps: np.ndarray
    payments: np.ndarray
    info: dict = field(default_factory=dict, compare=False)

    def utilities(self, costs) -> np.ndarray:
        """t_i - c_i eps_i (c_i eps_i = 0 at c_i = 0, eps_i = +inf: ``privacy.limit``)."""
        return self.payments - privacy_cost(costs, self.eps)


def in_own_support(dist, c, what: str = "report", sellers=None) -> np.ndarray:
    """Reports ``c`` checked against the cost law ``dist``.  One law (a CostDistribution):
    a report outside its support is a MarketSimError.  Per-seller laws (SellerLaws): a
    report outside the hull of the supports is one; any other is put in its seller's own
    support, a report past either end read as that end (seller i's message space is its
    type space; such a report earns exactly what the end earns, so IC and IR are
    unchanged).  ``c`` holds one report per seller, or rows of ``sellers``."""
    from ..distributions import SellerLaws

    if not isinstance(dist, SellerLaws):
        return dist.check_in_support(c, what)
    c = np.asarray(c, dtype=float)
    lo, hi = dist.support
    bad = ~np.isfinite(c) | (c < lo) | (c > hi)
    if np.any(bad):
        raise MarketSimError(
            f"{what} {float(c[bad].flat[0])!r} is outside every seller's support "
            f"(the hull [{lo:g}, {hi:g}])"
        )
    low, high = seller_ends(dist)
    if sellers is None:
        if c.shape[:1] != low.shape:
            raise MarketSimError(f"{c.shape[0] if c.ndim else 1} reports for {low.size} sellers")
    else:
        sellers = np.asarray(sellers, dtype=np.int64)
        low, high = low[sellers], high[sellers]
    extra = (1,) * (c.ndim - low.ndim)
    return np.clip(c, low.reshape(low.shape + extra), high.reshape(high.shape + extra))


def seller_ends(laws) -> tuple[np.ndarray, np.ndarray]:
    """(low_i, high_i): the ends of every seller's own support (SellerLaws)."""
    lo = np.array([d.support[0] for d in laws.laws])
    hi = np.array([d.support[1] for d in laws.laws])
    return lo[laws.group], hi[laws.group]


def mechanism_name(mech) -> str:
    name = getattr(mech, "name", "") or ""
    return name or type(mech).__name__


def as_outcome(result: Any, n: int, who: str = "mechanism") -> Outcome:
    """An :class:`Outcome` from what ``outcome`` returned: an Outcome, an object with
    ``eps`` and ``payments``, or an ``(eps, payments)`` pair; checked to hold ``n``
    finite numbers each with eps >= 0 (eps may be +inf: a zero-cost limit)."""
    if isinstance(result, Outcome):
        eps, pay, info = result.eps, result.payments, result.info
    elif hasattr(result, "eps") and hasattr(result, "payments"):
        eps, pay, info = result.eps, result.payments, {}
    elif isinstance(result, tuple) and len(result) >= 2:
        eps, pay, info = result[0], result[1], {}
    else:
        raise MarketSimError(
            f"{who}: outcome must return an Outcome or an (eps, payments) "
            f"pair, got {type(result).__name__}"
        )
    try:
        eps = np.asarray(eps, dtype=float).reshape(-1)
        pay = np.asarray(pay, dtype=float).reshape(-1)
    except (TypeError, ValueError):
        raise MarketSimError(f"{who}: eps and payments must be arrays of numbers") from None
    for label, arr in (("eps", eps), ("payments", pay)):
        if arr.size != n:
            raise MarketSimError(f"{who}: {label} has {arr.size} entries for {n} reports")
    # eps = +inf is the offline mechanism's zero-cost limit (data released without noise
    # at a report of virtual cost 0, ``offline._zero_cost_limit``)
    eps, pay = checked_outcome_arrays(eps, pay, who, inf_eps=True)
    return Outcome(eps, pay, dict(info))


def checked_outcome_arrays(eps, payments, who: str = "mechanism", *, inf_eps: bool = True):
    """``eps`` and ``payments`` (arrays of one shape: a market's sellers, or (markets,
    sellers) for a batch) checked as :func:`as_outcome` checks one market: finite
    numbers, eps >= 0, eps = +inf allowed only with ``inf_eps`` (a zero-cost limit; a
    solver that mixes utilities over markets refuses it).  The first bad entry is named
    (its market too for a batch); returns the two float arrays."""
    eps, payments = np.asarray(eps, dtype=float), np.asarray(payments, dtype=float)

    def where(flat: int, shape) -> str:
        if len(shape) < 2:
            return f"seller {flat}"
        row, col = np.unravel_index(flat, shape)
        return f"market {int(row)}, seller {int(col)}"

    for label, arr in (("eps", eps), ("payments", payments)):
        ok = np.isfinite(arr) | (np.isposinf(arr) if label == "eps" and inf_eps else False)
        if not np.all(ok):
            at = where(int(np.argmin(ok.ravel())), arr.shape)
            raise MarketSimError(f"{who}: {label} contains NaN or inf (first at {at})")
    if np.any(eps < 0):
        flat = int(np.argmax(eps.ravel() < 0))
        raise MarketSimError(
            f"{who}: eps must be >= 0 ({where(flat, eps.shape)} got {eps.ravel()[flat]:g})"
        )
    return eps, payments


def _construct(cls: type, context: dict[str, Any]) -> Any:
    """cls(**the entries of context its constructor names); all of them if it takes **kw."""
    params = inspect.signature(cls).parameters
    takes_all = any(p.kind is p.VAR_KEYWORD for p in params.values())
    kw = {k: v for k, v in context.items() if takes_all or k in params}
    try:
        return cls(**kw)
    except MarketSimError:
        raise
    except TypeError as exc:
        raise MarketSimError(f"mechanism {cls.__name__}: {exc}") from None


class Mechanism:
    """Base class of every mechanism (see the module docstring)."""

    name: ClassVar[str] = ""
    randomized: ClassVar[bool] = False
    own_report_inclusion: ClassVar[bool] = False
    needs_data: ClassVar[bool] = False
    per_seller_laws: ClassVar[bool] = False
    myerson_payments: ClassVar[bool] = False
    n_draws: ClassVar[int] = 64

    # ---- construction ------------------------------------------------------------
    @classmethod
    def from_context(cls, **context) -> Mechanism:
        """Build from the market's settings (``dist``, ``n_sellers``, ``mu``, ``sigma``,
        ``gamma``, ``privacy``): each one the constructor names is passed."""
        return _construct(cls, context)

    def with_data(self, X, y) -> Mechanism:
        """This mechanism for sellers with data rows ``X`` and labels ``y``."""
        return self

    def for_sellers(self, ids) -> Mechanism:
        """This mechanism for the market of sellers ``ids`` alone (those taking part in a
        round): a mechanism with per-seller laws keeps those sellers' laws, in that order;
        any other is itself."""
        return self

    # ---- the mechanism --------------------------------------------------------------
    def outcome(self, reports: np.ndarray, rng: np.random.Generator | None = None):
        """eps and payments for every report (an :class:`Outcome` or a pair)."""
        raise NotImplementedError(f"{type(self).__name__} must implement outcome(reports, rng)")

    def run(self, reports, rng: np.random.Generator | None = None) -> Outcome:
        """``outcome`` with its result checked and made an :class:`Outcome`."""
        r = np.asarray(reports, dtype=float)
        return as_outcome(self.outcome(r, rng), r.size, mechanism_name(self))

    # ---- unilateral deviations (the IC test) --------------------------------------
    def deviations(
        self, sellers, candidates, reports, rng: np.random.Generator | None = None
    ) -> Outcome:
        """Seller ``sellers[k]``'s eps and payment when it alone reports
        ``candidates[k, j]`` (the others at ``reports``): an Outcome of (k, n)
        arrays; expectations over the draw for randomized mechanisms."""
        sellers, cand, reports = _deviation_args(sellers, candidates, reports)
        eps, pay = np.empty(cand.shape), np.empty(cand.shape)
        if not self.randomized:
            for k, i in enumerate(sellers):
                trial = reports.copy()
                for j, z in enumerate(cand[k]):
                    trial[i] = z
                    out = self.run(trial, rng)
                    eps[k, j], pay[k, j] = out.eps[i], out.payments[i]
            return Outcome(eps, pay)
        if rng is None:
            raise MarketSimError(
                f"{mechanism_name(self)} is randomized: pass rng= to estimate expected utilities"
            )
        seeds = rng.integers(2**63, size=int(self.n_draws))  # common random numbers
        for k, i in enumerate(sellers):
            trial = reports.copy()
            for j, z in enumerate(cand[k]):
                trial[i] = z
                draws = [self.run(trial, np.random.default_rng(s)) for s in seeds]
                eps[k, j] = np.mean([o.eps[i] for o in draws])
                pay[k, j] = np.mean([o.payments[i] for o in draws])
        return Outcome(eps, pay)

    def deviation_utilities(
        self, sellers, candidates, true_costs, reports, rng: np.random.Generator | None = None
    ) -> np.ndarray:
        """(k, n) utilities t - c eps of ``deviations`` at true costs ``true_costs[k]``."""
        dev = self.deviations(sellers, candidates, reports, rng)
        cost = np.asarray(true_costs, dtype=float).reshape(-1, 1)
        return dev.payments - privacy_cost(cost, dev.eps)  # 0 x inf = 0 (privacy.limit)

    def utilities(
        self, i: int, candidates, true_cost: float, reports, rng: np.random.Generator | None = None
    ) -> np.ndarray:
        """Seller i's utility at each candidate report, the others fixed."""
        cand = np.asarray(candidates, dtype=float).reshape(1, -1)
        return self.deviation_utilities([i], cand, [true_cost], reports, rng)[0]


def _deviation_args(sellers, candidates, reports):
    reports = np.array(reports, dtype=float).reshape(-1)
    sellers = np.asarray(sellers, dtype=int).reshape(-1)
    cand = np.asarray(candidates, dtype=float)
    if cand.ndim == 1:
        cand = cand.reshape(1, -1)
    if cand.shape[0] != sellers.size:
        raise MarketSimError(
            f"candidates need one row per seller ({sellers.size}), got {cand.shape[0]}"
        )
    if sellers.size and (sellers.min() < 0 or sellers.max() >= reports.size):
        raise MarketSimError(f"seller index out of range 0..{reports.size - 1}")
    return sellers, cand, reports


class _Adapted(Mechanism):
    """A duck-typed object with ``outcome`` used as a Mechanism."""

    def __init__(self, obj, takes_rng: bool):
        self.obj, self.takes_rng = obj, takes_rng
        # a per-instance name shadowing the ClassVar (mypy allows only class-level ones)
        self.name = mechanism_name(obj)  # type: ignore[misc]
        for attr in ("randomized", "own_report_inclusion", "needs_data", "n_draws"):
            if hasattr(obj, attr):
                setattr(self, attr, getattr(obj, attr))

    def outcome(self, reports, rng=None):
        return self.obj.outcome(reports, rng) if self.takes_rng else self.obj.outcome(reports)

    def with_data(self, X, y):
        if hasattr(self.obj, "with_data"):
            return _Adapted(self.obj.with_data(X, y), self.takes_rng)
        return self


def _takes_rng(fn) -> bool:
    try:
        params = [
            p
            for p in inspect.signature(fn).parameters.values()
            if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD, p.VAR_POSITIONAL)
        ]
    except (TypeError, ValueError):
        return True
    return len(params) >= 2 or any(p.kind is p.VAR_POSITIONAL for p in params)


def as_mechanism(obj, *, population=None, **context) -> Mechanism:
    """A Mechanism from a registered name, a spec ``name[:key=value]...``, a Mechanism
    class (built with ``from_context(**context)``) or instance, or any object with
    an ``outcome(reports[, rng])`` method.

    ``population`` (a Population or its spec) gives ``dist`` and ``n_sellers``: each
    seller's own law to a mechanism that sets ``per_seller_laws``, the pooled law to
    one that takes one ``dist``; a conflicting ``n_sellers``, a ``dist`` beside it, or
    a data-needing mechanism on a population without data is a MarketSimError."""
    if population is not None:
        return _for_population(obj, population, context)
    if isinstance(obj, str):
        name, params = MECHANISMS.parse(obj)  # NAME:VALUE for a spec_argument (onnx:PATH)
        found = MECHANISMS.load(name)
        if params:
            if not isinstance(found, type):
                raise MarketSimError(f"mechanism {name!r} is an instance; it takes no parameters")
            check_params(found, params, f"mechanism {name!r}")
        mech = as_mechanism(found, **{**context, **params})
        if isinstance(found, type) and not getattr(mech, "name", ""):
            try:
                object.__setattr__(mech, "name", name)
            except (AttributeError, TypeError):
                pass
        return mech
    if isinstance(obj, type):
        if issubclass(obj, Mechanism):
            return obj.from_context(**context)
        if callable(getattr(obj, "outcome", None)):
            return as_mechanism(_construct(obj, context))
        raise MarketSimError(f"{obj.__name__} is not a Mechanism: it has no outcome method")
    if isinstance(obj, Mechanism):
        if type(obj).outcome is Mechanism.outcome:
            raise MarketSimError(f"{type(obj).__name__} does not implement outcome(reports, rng)")
        return obj
    fn = getattr(obj, "outcome", None)
    if callable(fn):
        return _Adapted(obj, _takes_rng(fn))
    raise MarketSimError(f"{type(obj).__name__} is not a Mechanism: it has no outcome method")


def _mechanism_class(obj):
    """The class ``as_mechanism`` would build ``obj`` from (its type for an instance)."""
    if isinstance(obj, str):
        found = MECHANISMS.load(MECHANISMS.parse(obj)[0])
        return found if isinstance(found, type) else type(found)
    return obj if isinstance(obj, type) else type(obj)


def _for_population(obj, population, context: dict) -> Mechanism:
    """``as_mechanism`` with ``dist`` and ``n_sellers`` from a population."""
    from ..population import as_population

    if context.get("dist") is not None:
        raise MarketSimError("give a population or dist, not both")
    pop = as_population(population, context.pop("n_sellers", None))
    cls = _mechanism_class(obj)
    label = obj if isinstance(obj, str) else mechanism_name(cls)
    if getattr(cls, "needs_data", False) and not pop.has_data:
        raise MarketSimError(
            f"mechanism {label} needs the sellers' data: the population {pop.spec} has none "
            "(add ;data=synthetic, wisconsin or a CSV path)"
        )
    dist: object
    if getattr(cls, "per_seller_laws", False):
        dist = pop.seller_laws
    else:
        try:
            dist = pop.pooled
        except MarketSimError as exc:
            raise MarketSimError(f"mechanism {label} takes one cost law: {exc}") from None
    return as_mechanism(obj, **{**context, "dist": dist, "n_sellers": pop.n_sellers})
