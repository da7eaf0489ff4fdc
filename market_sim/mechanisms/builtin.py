"""The built-in mechanisms as :class:`~market_sim.mechanisms.base.Mechanism` classes.

Each wraps the pure functions of its module and keeps a fast specialised
``deviations`` (a seller's eps and payment at other reports, others fixed).
The online mechanism is :class:`market_sim.mechanisms.online.OnlineMechanism`
itself.  Registered names: offline, online, data-dependent, pay-as-bid,
posted-price, private-posted-price, private-cutoff.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, ClassVar

import numpy as np

from ..distributions import CostDistribution, SellerLaws, as_distribution
from ..errors import MarketSimError
from .base import Mechanism, Outcome, _deviation_args, in_own_support
from .dd_curved import DEFAULT_PAYMENT_RTOL, psi_ceiling

if TYPE_CHECKING:
    from .private_cutoff import PrivateCutoff
    from .private_pricing import PrivatePostedPrice

__all__ = [
    "OfflineMechanism",
    "DataDependentMechanism",
    "PayAsBidMechanism",
    "PostedPriceMechanism",
    "PrivatePostedPriceMechanism",
    "PrivateCutoffMechanism",
]

DD_EPS_AVG_GRID = tuple(np.geomspace(0.05, 5.0, 10))


def _need_dist(dist) -> CostDistribution:
    """The mechanism's cost law: a CostDistribution or a spec such as ``uniform:1:5``."""
    return as_distribution(dist)


def _laws_or_dist(dist) -> CostDistribution | SellerLaws:
    """A mechanism defined per seller takes each seller's own law (SellerLaws) or one law."""
    return dist if isinstance(dist, SellerLaws) else as_distribution(dist)


@dataclass(frozen=True)
class _OfflineAllocation(Mechanism):
    """The offline allocation of Eq. 11 (003); subclasses say how sellers are paid.

    ``dist`` is one cost law for every seller or a
    :class:`~market_sim.distributions.SellerLaws` (``per_seller_laws``): seller i's
    virtual cost is then psi_i of its own law, as Eq. 11 is written, and a report
    outside its own support is read as the nearest end of it (``payments``).
    ``backend`` is :func:`~market_sim.mechanisms.offline.solve`'s (``"auto"``,
    ``"numba"`` or ``"numpy"``): ``"numba"`` pays for many small markets (a BNE
    solve, a learner's counterfactuals), as ``KERNEL_MIN_M`` explains."""

    per_seller_laws: ClassVar[bool] = True
    dist: CostDistribution | SellerLaws
    mu: float = 1.0
    sigma: float = 1.0
    gamma: float = 1.0
    k: float | None = None
    backend: str = "auto"

    def __post_init__(self):
        object.__setattr__(self, "dist", _laws_or_dist(self.dist))
        if self.backend not in ("auto", "numba", "numpy"):
            raise MarketSimError(f"unknown backend {self.backend!r} (auto, numba or numpy)")

    @property
    def params(self) -> dict:
        return dict(mu=self.mu, sigma=self.sigma, gamma=self.gamma, k=self.k)

    def for_sellers(self, ids) -> _OfflineAllocation:
        if not isinstance(self.dist, SellerLaws):
            return self
        return replace(self, dist=SellerLaws(self.dist.laws, self.dist.group[np.asarray(ids)]))

    def curves(self, reports):
        """Every seller's eps and Myerson payment as functions of its own report, the
        others at ``reports`` (built lazily per seller; see ``OfflineCurves``).  The
        last market's curves are kept: repeated deviation queries against the same
        reports (best responses, the audit's search) build each curve once."""
        from .payments import OfflineCurves

        r = np.asarray(reports, dtype=float)
        key = (r.shape, r.tobytes())
        last = self.__dict__.get("_last_curves")
        if last is not None and last[0] == key:
            return last[1]
        curves = OfflineCurves(
            reports,
            self.dist,
            mu=self.mu,
            sigma=self.sigma,
            gamma=self.gamma,
            k=self.k,
            backend=self.backend,
        )
        object.__setattr__(self, "_last_curves", (key, curves))
        return curves

    def __getstate__(self):
        state = dict(self.__dict__)
        state.pop("_last_curves", None)  # a cache: rebuilt on demand
        return state


@dataclass(frozen=True)
class OfflineMechanism(_OfflineAllocation):
    """Offline data-independent mechanism (Alg. 2 / Eq. 11, 003) with Myerson payments."""

    name: ClassVar[str] = "offline"
    myerson_payments: ClassVar[bool] = True

    def outcome(self, reports, rng=None) -> Outcome:
        from .payments import offline_payments

        eps, pay = offline_payments(reports, self.dist, **self.params, backend=self.backend)
        return Outcome(eps, pay)

    def deviations(self, sellers, candidates, reports, rng=None) -> Outcome:
        """All listed sellers' eps and payments at their candidates from their curves:
        no re-solve per candidate."""
        sellers, cand, reports = _deviation_args(sellers, candidates, reports)
        eps, pay = self.curves(reports).outcome_at(cand, sellers=sellers)
        return Outcome(eps, pay)


@dataclass(frozen=True)
class PayAsBidMechanism(_OfflineAllocation):
    """Pay-as-bid: the offline allocation, each seller paid report x eps (not IC: the control)."""

    name: ClassVar[str] = "pay-as-bid"

    def outcome(self, reports, rng=None) -> Outcome:
        from .base import in_own_support as _in_support
        from .baselines import pay_as_bid

        reports = _in_support(self.dist, np.asarray(reports, dtype=float), "report")
        eps, pay = pay_as_bid(reports, self.dist, **self.params, backend=self.backend)
        return Outcome(eps, pay)

    def deviations(self, sellers, candidates, reports, rng=None) -> Outcome:
        """Seller i's eps at z is the offline allocation's eps_i(z); it is paid z eps_i(z)
        (the allocation oracle alone: no payment curve is built)."""
        from .base import in_own_support as _in_support

        sellers, cand, reports = _deviation_args(sellers, candidates, reports)
        _in_support(self.dist, reports, "report")
        cand = _in_support(self.dist, cand, "candidate report", sellers)
        from .baselines import paid_as_bid

        eps = self.curves(reports).allocation_at(cand, sellers=sellers)
        return Outcome(eps, paid_as_bid(cand, eps))


@dataclass(frozen=True)
class PostedPriceMechanism(Mechanism):
    """Fixed posted price: every report <= ``price`` sells ``eps_level`` at ``price`` a unit.

    The default price is the 0.1 quantile of the cost law.  Truthful (a report
    only decides whether to sell at a price it cannot move), but blind to the
    reports: a control for efficiency, not for incentives."""

    name: ClassVar[str] = "posted-price"
    own_report_inclusion: ClassVar[bool] = True
    dist: CostDistribution
    price: float | None = None
    eps_level: float = 1.0

    def __post_init__(self):
        object.__setattr__(self, "dist", _need_dist(self.dist))
        if self.price is None:
            object.__setattr__(self, "price", float(self.dist.ppf(0.1)))

    def outcome(self, reports, rng=None) -> Outcome:
        from .baselines import posted_price

        assert self.price is not None  # set in __post_init__
        eps, pay = posted_price(reports, price=self.price, eps_level=self.eps_level)
        return Outcome(eps, pay)

    def deviations(self, sellers, candidates, reports, rng=None) -> Outcome:
        _, cand, _ = _deviation_args(sellers, candidates, reports)
        return self.outcome(cand)  # each seller alone: the others do not matter


@dataclass(frozen=True)
class PrivatePostedPriceMechanism(Mechanism):
    """Private posted price (001): a price drawn privately by the exponential mechanism.

    Prices are 21 quantiles of the cost law; the buyer values a unit of eps at
    the top of the support (so every price leaves it a surplus)."""

    name: ClassVar[str] = "private-posted-price"
    randomized: ClassVar[bool] = True
    own_report_inclusion: ClassVar[bool] = True
    dist: CostDistribution
    privacy: float = 1.0
    eps_level: float = 1.0
    pricing: PrivatePostedPrice | None = field(default=None, repr=False, compare=False)

    def __post_init__(self):
        from .private_pricing import PrivatePostedPrice

        object.__setattr__(self, "dist", _need_dist(self.dist))
        if self.pricing is None:
            prices = tuple(float(v) for v in self.dist.ppf(np.linspace(0.025, 0.975, 21)))
            object.__setattr__(
                self,
                "pricing",
                PrivatePostedPrice(
                    prices,
                    value=float(self.dist.support[1]),
                    eps_level=self.eps_level,
                    privacy=self.privacy,
                ),
            )

    @property
    def _pricing(self) -> PrivatePostedPrice:
        assert self.pricing is not None  # set in __post_init__
        return self.pricing

    def outcome(self, reports, rng=None) -> Outcome:
        if rng is None:
            raise MarketSimError(f"{self.name} draws its outcome at random: pass rng")
        eps, pay, price = self._pricing.outcome(reports, rng)
        return Outcome(eps, pay, {"price": price})

    def _expected(self, sellers, candidates, reports):
        """Exact expectations over the price draw, vectorised over sellers and candidates:
        seller i at report z changes the count of reports <= p only by its own term, so
        the score of price p is (value - p) eps_level (n_{-i}(p) + 1{z <= p}).
        Returns (cand, P(price) (k, C, P), sold (k, C, P), prices)."""
        from ..privacy.selection import _scores as _checked

        sellers, cand, reports = _deviation_args(sellers, candidates, reports)
        pricing = self._pricing
        p = np.asarray(pricing.prices, dtype=float)
        counts = np.searchsorted(np.sort(reports), p, side="right")  # n(p), all sellers
        rest = counts[None, :] - (reports[sellers][:, None] <= p)  # (k, P): without seller i
        sold = cand[:, :, None] <= p  # (k, C, P)
        score = (pricing.value - p) * pricing.eps_level * (rest[:, None, :] + sold)
        _checked(np.zeros(1), pricing.privacy, pricing.sensitivity)  # validates privacy
        logit = pricing.privacy * score / (2 * pricing.sensitivity)
        prob = np.exp(logit - logit.max(axis=-1, keepdims=True))
        prob /= prob.sum(axis=-1, keepdims=True)
        return cand, prob, sold * pricing.eps_level, p

    def deviations(self, sellers, candidates, reports, rng=None) -> Outcome:
        """Exact expectations over the price draw."""
        _, prob, sold, p = self._expected(sellers, candidates, reports)
        return Outcome(np.sum(prob * sold, axis=-1), np.sum(prob * sold * p, axis=-1))

    def deviation_utilities(self, sellers, candidates, true_costs, reports, rng=None):
        cand, prob, sold, p = self._expected(sellers, candidates, reports)
        c = np.asarray(true_costs, dtype=float).reshape(-1)
        return np.sum(prob * sold * (p[None, None, :] - c[:, None, None]), axis=-1).reshape(
            cand.shape
        )


@dataclass(frozen=True)
class PrivateCutoffMechanism(Mechanism):
    """Offline mechanism with a privately drawn cut-off and Myerson payments per cut-off.

    The cut-off is drawn ``privacy``-DP by the exponential mechanism over a public grid."""

    name: ClassVar[str] = "private-cutoff"
    randomized: ClassVar[bool] = True
    own_report_inclusion: ClassVar[bool] = True
    dist: CostDistribution
    n_sellers: int = 100
    mu: float = 1.0
    sigma: float = 1.0
    gamma: float = 1.0
    privacy: float = 1.0
    cutoff: PrivateCutoff | None = field(default=None, repr=False, compare=False)

    def __post_init__(self):
        from .private_cutoff import PrivateCutoff

        object.__setattr__(self, "dist", _need_dist(self.dist))
        if self.cutoff is None:
            object.__setattr__(
                self,
                "cutoff",
                PrivateCutoff(
                    self.dist,
                    self.n_sellers,
                    mu=self.mu,
                    sigma=self.sigma,
                    gamma=self.gamma,
                    privacy=self.privacy,
                ),
            )

    def outcome(self, reports, rng=None) -> Outcome:
        if rng is None:
            raise MarketSimError(f"{self.name} draws its outcome at random: pass rng")
        assert self.cutoff is not None  # set in __post_init__
        out = self.cutoff.outcome(reports, rng)
        return Outcome(out.eps, out.payments, {"lam": out.lam})

    def deviations(self, sellers, candidates, reports, rng=None) -> Outcome:
        """Exact expectations over the cut-off draw of seller k's eps and payment at
        each candidate, vectorised over sellers, candidates and cut-offs.

        Moving seller i changes the grid sums S, Q, P (and so the cut-off law) only
        through its own term, so the others' sums are computed once per call."""
        from ..privacy.selection import _scores as _checked
        from .private_cutoff import _JAC, _SHAPE

        sellers, cand, reports = _deviation_args(sellers, candidates, reports)
        pc = self.cutoff
        assert pc is not None  # set in __post_init__
        x = pc.virtual(reports)
        W, S, Q, P = pc._sums(x)
        xf = np.where(np.isfinite(x), x, 0.0)  # w = 0 wherever x = inf
        lams = pc.lams
        top = pc._top_report(lams)
        _checked(np.zeros(1), pc.privacy, pc.sensitivity)  # validates privacy and sensitivity
        scale = pc.privacy / (2 * pc.sensitivity)
        eps_out, pay_out = np.empty(cand.shape), np.empty(cand.shape)
        step = max(1, 2_000_000 // max(1, cand.shape[1] * lams.size * _SHAPE.size))
        for a in range(0, sellers.size, step):
            i = sellers[a : a + step]
            r = np.clip(cand[a : a + step], *self.dist.support)[:, :, None]  # (k, n, 1)
            xz = pc.gamma * self.dist.virtual_cost(r)
            Wi = W[:, i].T[:, None, :]  # (k, 1, G)
            S_rest = S - Wi
            P_rest = P - Wi * xf[i][:, None, None]
            wz = np.maximum(lams - xz, 0.0)  # (k, n, G)
            xzf = np.where(np.isfinite(xz), xz, 0.0)
            logit = scale * pc._scores(S_rest + wz, Q - Wi * Wi + wz * wz, P_rest + wz * xzf)
            if not np.all(np.isfinite(logit)):
                raise MarketSimError(
                    "private cut-off: a score is not finite (a report at the "
                    "bottom of a support starting at 0 has virtual cost 0)"
                )
            prob = np.exp(logit - logit.max(axis=-1, keepdims=True))
            prob /= prob.sum(axis=-1, keepdims=True)
            eps = pc._own_eps(r, lams, S_rest, P_rest)  # (k, n, G)
            span = np.maximum(top - r, 0.0)
            z = r[..., None] + span[..., None] * _SHAPE  # (k, n, G, q)
            tail = span * (
                pc._own_eps(z, lams[:, None], S_rest[..., None], P_rest[..., None]) @ _JAC
            )
            eps_out[a : a + step] = np.sum(prob * eps, axis=-1)
            pay_out[a : a + step] = np.sum(prob * (r * eps + tail), axis=-1)
        return Outcome(eps_out, pay_out)


@dataclass(frozen=True)
class DataDependentMechanism(Mechanism):
    """Data-dependent mechanism (Eq. 17 / Alg. 4, 003).

    ``dist`` is one cost law for every seller (a pooled law) or a
    :class:`~market_sim.distributions.SellerLaws` (``per_seller_laws``: seller i's
    virtual cost psi_i is its own law's, as Eq. 17 is written; a report outside its own
    support is read as the nearest end of it, as in the offline mechanism).  A virtual
    cost above ``dd_curved.psi_ceiling`` (an infinite one at a Beta's top included) is
    read as the ceiling, where Eq. 17 gives the seller no weight.

    Payments are Myerson's, t_i(r) = r eps_i(r) + int_r^{c_max} eps_i(z) dz.
    ``payment_rule="envelope"`` (default) takes the integral from the optimal value
    V of Eq. 17: seller i's report enters it only as gamma psi_i eps_i, so (envelope
    theorem) dV/d(gamma psi_i) = eps_i.  The support is cut at psi's breaks and the
    ironing intervals' ends (``data_dependent.payment_plan``): on a piece where psi is
    affine the integral is exactly Delta V / (gamma psi') between the piece's ends, on
    an ironed piece eps_i is constant, a jump of psi adds nothing, and on a curved piece
    (a Beta, a truncated normal) an adaptive rule (``dd_curved``: Chebyshev interpolation
    of eps_i between its jumps, which are bracketed and priced by V's rise) reaches
    ``payment_rtol`` of the piece's integral, by its own error estimate.
    ``payment_rule="trapezoid"`` is the old rule: the trapezoid rule on eps_i at
    {r} and the ``n_nodes`` reports above r, far off where eps_i jumps
    (docs/data-dependent.md); ``n_nodes`` is used by that rule only.  Outcomes and
    deviations use one payment rule.

    ``solver="newton"`` (default) solves every profile of an ``outcome`` or
    ``deviations`` call (candidates and payment nodes, identical profiles once) in one
    call of the compiled multi-start Newton solver (``data_dependent.solve_many``);
    ``solver="lbfgs"`` is the scipy reference, one L-BFGS-B solve per eta and profile.
    For it, ``warm_start`` starts each re-solve at a changed report from the solution
    at the submitted reports, and each payment node from the node below.  It is the
    same allocation (to the solver's tolerance) only where Eq. 17 is jointly convex,
    2 Lambda mu > m (Thm VIII.1); below it a warm start can reach another local
    optimum and eps_i would depend on the order of the solves, so the default
    (None) warm-starts exactly when jointly convex.  ``blas_threads=1`` (default)
    runs L-BFGS-B on one BLAS thread; ``cache_nodes`` keeps eps_i at the payment
    nodes per (seller, others' reports) (both solvers).  ``solver="lbfgs",
    warm_start=False, blas_threads=None, cache_nodes=False`` is the old path
    (docs/data-dependent.md has the speed-ups).

    ``certify=True`` runs ``dd_certify``'s branch-and-bound over the weights on every
    profile solved (small markets only: seconds per profile at m = 4-6), replaces an
    optimum the multi-start missed by the better point it finds, and reports in
    ``Outcome.info`` whether every profile the outcome rests on is a certified global
    optimum on the eps_avg grid (``certified_optimum``) and the largest proved gap
    (``gap_bound``).  Without it ``certified_optimum`` is False and ``optimality`` says
    what is known instead: one optimum where Eq. 17 is jointly convex (2 Lambda mu > m,
    Thm VIII.1), else the best local optimum of the solver's starts."""

    name: ClassVar[str] = "data-dependent"
    needs_data: ClassVar[bool] = True
    per_seller_laws: ClassVar[bool] = True
    dist: CostDistribution | SellerLaws
    mu: float = 1.0
    sigma: float = 1.0
    gamma: float = 1.0
    reg_lambda: float = 1e-2
    n_nodes: int = 9
    payment_rule: str = "envelope"
    payment_rtol: float = DEFAULT_PAYMENT_RTOL
    solver: str = "newton"
    warm_start: bool | None = None
    blas_threads: int | None = 1
    cache_nodes: bool = True
    certify: bool = False
    data: tuple | None = field(default=None, repr=False, compare=False)
    _node_eps: dict = field(default_factory=dict, init=False, repr=False, compare=False)
    _plans: tuple = field(default=(), init=False, repr=False, compare=False)
    _tails: dict = field(default_factory=dict, init=False, repr=False, compare=False)
    _ceiling: float = field(default=np.inf, init=False, repr=False, compare=False)

    def __post_init__(self):
        from .data_dependent import payment_plan

        object.__setattr__(self, "dist", _laws_or_dist(self.dist))
        if self.payment_rule not in ("envelope", "trapezoid"):
            raise MarketSimError(f"data-dependent: payment_rule must be 'envelope' or "
                                 f"'trapezoid', not {self.payment_rule!r}")  # fmt: skip
        if not (isinstance(self.n_nodes, int | np.integer) and self.n_nodes >= 2):
            raise MarketSimError(f"data-dependent: n_nodes must be an integer >= 2, "
                                 f"not {self.n_nodes!r}")  # fmt: skip
        if not (isinstance(self.payment_rtol, float | int) and 0 < self.payment_rtol < 1):
            raise MarketSimError(f"data-dependent: payment_rtol must be a number in (0, 1), "
                                 f"not {self.payment_rtol!r}")  # fmt: skip
        if self.solver not in ("newton", "lbfgs"):
            raise MarketSimError(f"data-dependent: solver must be 'newton' or 'lbfgs', "
                                 f"not {self.solver!r}")  # fmt: skip
        if self.certify and self.solver != "newton":
            raise MarketSimError("data-dependent: certify needs solver='newton'")
        laws = self.dist.laws if isinstance(self.dist, SellerLaws) else (self.dist,)
        object.__setattr__(self, "_plans", tuple(payment_plan(d) for d in laws))
        ceiling = psi_ceiling(laws, self.mu, self.gamma, self.reg_lambda, min(DD_EPS_AVG_GRID))
        object.__setattr__(self, "_ceiling", ceiling)

    @property
    def curved_payments(self) -> bool:
        """True when a payment integrates a curved piece of psi (a Beta, a truncated
        normal) by the adaptive rule of ``dd_curved``: hundreds of solves per seller
        (``market_sim.estimates``), where piecewise-linear psi costs about one."""
        from .data_dependent import CURVED

        return (
            self.payment_rule == "envelope"
            and self.gamma != 0
            and any(bool(np.any(plan.kind == CURVED)) for plan in self._plans)
        )

    def for_sellers(self, ids) -> DataDependentMechanism:
        if not isinstance(self.dist, SellerLaws):
            return self
        return replace(self, dist=SellerLaws(self.dist.laws, self.dist.group[np.asarray(ids)]))

    def with_data(self, X, y) -> DataDependentMechanism:
        return replace(self, data=(np.asarray(X, dtype=float), np.asarray(y)))

    def _data(self) -> tuple[np.ndarray, np.ndarray]:
        if self.data is None:
            raise MarketSimError("the data-dependent mechanism needs the sellers' data")
        return self.data

    def _kw(self):
        self._data()  # checks that the sellers' data are there
        return dict(
            mu=self.mu,
            sigma=self.sigma,
            gamma=self.gamma,
            reg_lambda=self.reg_lambda,
            eps_avg_grid=DD_EPS_AVG_GRID,
        )

    # ---- each seller's law, virtual cost and payment plan -----------------------------
    def _group(self, i) -> int:
        return int(self.dist.group[i]) if isinstance(self.dist, SellerLaws) else 0

    def _law(self, i) -> CostDistribution:
        return self.dist.law(i) if isinstance(self.dist, SellerLaws) else self.dist

    def _cands(self, sellers, cand) -> tuple[np.ndarray, np.ndarray]:
        """(reports, virtual costs) of each seller's candidates (k, C), the reports put in
        the seller's own support (``in_own_support``), in one call per law."""
        if not isinstance(self.dist, SellerLaws):
            r = self.dist.check_in_support(cand, "report")
            return r, self._capped(self.dist.virtual_cost(r))
        r = in_own_support(self.dist, cand, sellers=sellers)
        return r, self._capped(self.dist.virtual_cost(r, sellers))

    def _psi(self, reports) -> np.ndarray:
        """Every seller's virtual cost at a profile of reports."""
        return self._capped(self.dist.virtual_cost(in_own_support(self.dist, reports)))

    def _capped(self, psi) -> np.ndarray:
        """psi at most ``dd_curved.psi_ceiling`` (an infinite psi included: a report where
        the density vanishes, as at a Beta's top): Eq. 17 unchanged where another seller
        is below the laws' 1 - 1e-6 quantile, eps_i = 0 (docs/data-dependent.md)."""
        return np.minimum(np.asarray(psi, dtype=float), self._ceiling)

    def _node_reports_and_psi(self, i) -> tuple[np.ndarray, np.ndarray]:
        """The payment nodes of seller i: (reports, virtual costs).  The envelope rule's
        are its law's ``payment_plan`` (psi's one-sided limits at the pieces' ends); the
        trapezoid rule's ``n_nodes`` equally spaced reports."""
        if self.payment_rule == "envelope":
            plan = self._plans[self._group(i)]
            return plan.z, plan.x
        law = self._law(i)
        z = np.linspace(*law.support, self.n_nodes)
        return z, law.virtual_cost(z)

    def optimality(self, m: int) -> str:
        """What is known, without ``certify``, of how optimal an outcome of m sellers is:
        the sentence ``Outcome.info["optimality"]`` carries."""
        if 2 * self.reg_lambda * self.mu > m:
            return (f"jointly convex (2 Lambda mu = {2 * self.reg_lambda * self.mu:g} > m = "
                    f"{m}, Thm VIII.1): one optimum, reached to the solver's tolerance; "
                    "not certified (certify=False)")  # fmt: skip
        return (f"not jointly convex (2 Lambda mu = {2 * self.reg_lambda * self.mu:g} <= m = "
                f"{m}): the best of the solver's starts, a local optimum; certify=True "
                f"proves the global one (m <= {_certify_max_m()})")  # fmt: skip

    def _warm(self, m: int) -> bool:
        """Warm starts on?  By default iff Eq. 17 is jointly convex (2 Lambda mu > m)."""
        if self.warm_start is None:
            return 2 * self.reg_lambda * self.mu > m
        return self.warm_start

    # ---- the scipy reference path ------------------------------------------------------
    def _solve(self, reports):
        """Eq. 17 at the submitted reports (its ``w_path`` warm-starts the re-solves)."""
        from . import data_dependent as dd

        X, y = self._data()
        return dd.solve(X, y, self._psi(reports), blas_threads=None, **self._kw())

    def _own(self, i, reports, x, w_start) -> np.ndarray:
        """(2, len(x)): eps_i and the optimal value of Eq. 17 when seller i's virtual
        cost is each x, the others' from ``reports``."""
        from . import data_dependent as dd

        X, y = self._data()
        return np.array(dd.own_cost_outcomes(
            i,
            X,
            y,
            self._psi(reports),
            dd._as_psi,
            x,
            warm_start=w_start is not None,
            w_start=w_start,
            blas_threads=None,
            **self._kw(),
        ))  # fmt: skip

    def _node_key(self, i, reports):
        return (int(i), np.delete(reports, i).tobytes())

    def _nodes_eps(self, i, reports, w_start) -> np.ndarray:
        """(2, nodes): eps_i and Eq. 17's value at seller i's payment nodes, a function of
        (i, the others' reports) only, so kept (per instance, hence per data set)."""
        key = self._node_key(i, reports)
        x = self._node_reports_and_psi(i)[1]
        if not self.cache_nodes:
            return self._own(i, reports, x, w_start)
        if key not in self._node_eps:
            self._keep_nodes(key, self._own(i, reports, x, w_start))
        return self._node_eps[key]

    def _keep_nodes(self, key, eps) -> None:
        if len(self._node_eps) >= 4096:  # bounded: an audit revisits recent profiles
            self._node_eps.clear()
        self._node_eps[key] = eps

    def _curved_tails(self, i, reports, w_start) -> dict:
        """Seller i's ``curved_tails`` (its law's curved pieces) at the others' reports,
        solved by this mechanism's solver; a function of (i, the others' reports) only,
        so kept like the nodes.  Empty without a curved piece or with the trapezoid rule."""
        from . import data_dependent as dd

        plan = self._plans[self._group(i)]
        if self.payment_rule != "envelope" or self.gamma == 0 or not np.any(plan.kind == dd.CURVED):
            return {}
        key = self._node_key(i, reports)
        if self.cache_nodes and key in self._tails:
            return self._tails[key]

        def at(x):  # seller i's eps_i, Eq. 17's value and certificate gap at each x
            if self.solver == "lbfgs":
                e, v = self._own(i, reports, x, w_start)
                return e, v, np.full(e.size, np.nan)
            eps_u, val_u, gap_u, inv = self._batch(np.full(x.size, i), x, reports)
            return eps_u[inv, i], val_u[inv], gap_u[inv]

        tails = dd.curved_tails(plan, self._law(i), self.gamma, at, self._ceiling,
                                self.payment_rtol)  # fmt: skip
        if self.cache_nodes:
            if len(self._tails) >= 4096:
                self._tails.clear()
            self._tails[key] = tails
        return tails

    # ---- payments ----------------------------------------------------------------------
    def _payments(self, i, r, psi_r, eps_cands, value_cands, node_vals, tails) -> np.ndarray:
        """Seller i's Myerson t(r) = r eps(r) + int_r^{c_max} eps (``payment_rule``; r in
        its own support, psi_r its virtual costs; node_vals: eps and Eq. 17's value at the
        nodes, value_cands: the value at each r; tails: ``_curved_tails``)."""
        e = np.asarray(eps_cands, dtype=float)
        if self.payment_rule == "trapezoid":
            return r * e + self._trapezoid_tail(i, r, e, node_vals[0])
        top = self._law(i).support[1]
        if self.gamma == 0:  # the report does not enter Eq. 17: eps_i is constant
            return r * e + (top - r) * e
        from .data_dependent import envelope_tail

        tail = envelope_tail(self._plans[self._group(i)], self.gamma, r, psi_r,
                             np.asarray(value_cands, dtype=float), node_vals[0],
                             node_vals[1], tails)  # fmt: skip
        return r * e + tail

    def _trapezoid_tail(self, i, r, e, eps_nodes) -> np.ndarray:
        """The old rule: the trapezoid rule of eps_i on {r} and the nodes above r."""
        nodes = self._node_reports_and_psi(i)[0]
        seg = np.diff(nodes) * (eps_nodes[1:] + eps_nodes[:-1]) / 2
        tail = np.r_[np.cumsum(seg[::-1])[::-1], 0.0]  # int from node j to the top
        j = np.searchsorted(nodes, r, side="right")  # the first node above r
        jj = np.minimum(j, nodes.size - 1)
        first = (nodes[jj] - r) * (e + eps_nodes[jj]) / 2 + tail[jj]
        return np.where(j < nodes.size, first, 0.0)

    # ---- the compiled solver: every profile of a call in one batch ------------------
    def _batch(self, rows_i, rows_x, reports):
        """Eq. 17 at each profile ``reports`` with seller rows_i[b]'s virtual cost
        rows_x[b] (identical profiles solved once): (eps and Eq. 17's value of the
        distinct profiles, the row of each)."""
        from . import data_dependent as dd

        X, y = self._data()
        i = np.asarray(rows_i, dtype=int)
        x = np.asarray(rows_x, dtype=float)
        psi = self._psi(reports)
        same = x == psi[i]
        key = np.column_stack([np.where(same, -1.0, i), np.where(same, 0.0, x)])
        uniq, inv = np.unique(key, axis=0, return_inverse=True)
        P = np.tile(psi, (uniq.shape[0], 1))
        moved = np.flatnonzero(uniq[:, 0] >= 0)
        P[moved, uniq[moved, 0].astype(int)] = uniq[moved, 1]
        res = dd.solve_many(X, y, P, certify=self.certify, **self._kw())
        gap = res.gap_bound if res.gap_bound is not None else np.full(P.shape[0], np.nan)
        return res.eps, res.objective, gap, inv.reshape(-1)

    def _newton(self, sellers, cand, reports):
        """(eps, payments) of each seller's candidates (k, C) by the compiled solver in
        one batch, the payment nodes of the sellers not cached yet included."""
        k, C = cand.shape
        keys = [self._node_key(i, reports) for i in sellers]
        todo = [i for n, i in enumerate(sellers) if not (self.cache_nodes and keys[n] in
                                                          self._node_eps)]  # fmt: skip
        todo = list(dict.fromkeys(int(i) for i in todo))
        node_x = [self._node_reports_and_psi(i)[1] for i in todo]
        cand_r, cand_psi = self._cands(sellers, cand)
        cand_x = cand_psi.reshape(-1)
        sizes = [x.size for x in node_x]
        rows_i = np.r_[np.repeat(sellers, C), np.repeat(todo, sizes)].astype(int)
        rows_x = np.concatenate([cand_x, *node_x])
        eps_u, val_u, gap_u, inv = self._batch(rows_i, rows_x, reports)
        rows = np.array([eps_u[inv, rows_i], val_u[inv], gap_u[inv]])  # eps_i, value, gap
        ends = k * C + np.cumsum([0, *sizes])
        fresh = {i: rows[:, ends[n] : ends[n + 1]] for n, i in enumerate(todo)}
        eps, val = rows[0, : k * C].reshape(k, C), rows[1, : k * C].reshape(k, C)
        node_eps = [fresh.get(int(i), None) for i in sellers]
        node_eps = [self._node_eps[keys[n]] if e is None else e for n, e in enumerate(node_eps)]
        if self.cache_nodes:  # stored after reading: storing may clear the cache
            for i, e in fresh.items():
                self._keep_nodes(self._node_key(i, reports), e)
        tails = [self._curved_tails(i, reports, None) for i in sellers]
        pay = np.array([self._payments(i, cand_r[n], cand_psi[n], eps[n], val[n], node_eps[n],
                                       tails[n]) for n, i in enumerate(sellers)])  # fmt: skip
        gaps = np.r_[rows[2, : k * C], *(e[2] for e in node_eps),
                     *(t.gap for ts in tails for t in ts.values())]  # fmt: skip
        return eps, pay.reshape(k, C), self._certificate(gaps, reports.size)

    def _certificate(self, gaps, m: int) -> dict:
        """Outcome.info: ``certified_optimum`` (with ``certify``: every profile the
        call's eps and payments rest on is within the search's tol of the global optimum
        of Eq. 17 on the grid, ``dd_certify``; without it always False) and either
        ``gap_bound`` (the largest proved gap) or ``optimality`` (what is known instead)."""
        if not self.certify:
            return {"certified_optimum": False, "optimality": self.optimality(m)}
        from .dd_certify import CERTIFY_TOL

        gap = float(np.max(gaps))
        return {"certified_optimum": bool(gap <= CERTIFY_TOL), "gap_bound": gap}

    def outcome(self, reports, rng=None) -> Outcome:
        from . import data_dependent as dd

        reports = np.asarray(reports, dtype=float)
        if self.data is None or len(self.data[0]) != reports.size:
            raise MarketSimError("data-dependent: one data row per reporting seller is needed")
        if self.solver == "newton":
            sellers = np.arange(reports.size)
            eps, pay, info = self._newton(sellers, reports[:, None], reports)
            return Outcome(eps[:, 0], pay[:, 0], info)
        with dd._blas_threads(self.blas_threads):
            base = self._solve(reports)
            start = base.w_path if self._warm(reports.size) else None
            r, psi = self._cands(np.arange(reports.size), reports[:, None])
            pay = np.array([self._payments(i, r[i], psi[i], [base.eps[i]], [base.objective],
                                           self._nodes_eps(i, reports, start),
                                           self._curved_tails(i, reports, start))[0]
                            for i in range(reports.size)])  # fmt: skip
        return Outcome(base.eps, pay, self._certificate(np.zeros(0), reports.size))

    def deviations(self, sellers, candidates, reports, rng=None) -> Outcome:
        from . import data_dependent as dd

        sellers, cand, reports = _deviation_args(sellers, candidates, reports)
        if self.solver == "newton":
            eps, pay, info = self._newton(sellers, cand, reports)
            return Outcome(eps.reshape(cand.shape), pay.reshape(cand.shape), info)
        with dd._blas_threads(self.blas_threads):
            start = self._solve(reports).w_path if self._warm(reports.size) else None
            r, x = self._cands(sellers, cand)
            own = [self._own(i, reports, x[k], start) for k, i in enumerate(sellers)]
            eps = np.array([o[0] for o in own])
            pay = np.array([self._payments(i, r[k], x[k], own[k][0], own[k][1],
                                           self._nodes_eps(i, reports, start),
                                           self._curved_tails(i, reports, start))
                            for k, i in enumerate(sellers)])  # fmt: skip
        info = self._certificate(np.zeros(0), reports.size)
        return Outcome(eps.reshape(cand.shape), pay.reshape(cand.shape), info)


def _certify_max_m() -> int:
    from .dd_certify import CERTIFY_MAX_M

    return CERTIFY_MAX_M
