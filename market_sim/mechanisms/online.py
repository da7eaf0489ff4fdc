"""The online mechanism (Algorithm 3, Sec. V of 003) and its exact fluid form.

Sellers arrive one at a time; each is answered with eps_i and t_i from its own
report only, with a cut-off lam fixed in advance from the cost distribution and
the planned number of sellers m.  Then eps is a fixed non-increasing function
of the own report and the Myerson payment (Eq. 8) makes every seller's truth
optimal whatever the others do.

Rules (x = gamma psi):

* ``alg3`` -- the printed formulas: lam = sqrt(mu^2 gamma / (sigma m f_Psi(0))),
  eps = 2 sqrt(3) gamma^{3/2} mu (lam - x)^+ / (f_Psi(0)^{3/2} m^{3/2} lam^{7/2}).
  They divide by f_Psi(0), which is 0 whenever costs are bounded away from 0
  (the paper's own U[1, 5] experiment): refused there.
* ``fluid`` -- Eq. 13/14 of the offline optimum with every sum replaced by m
  times its expectation: with g(lam) = E[((lam - gamma Psi)^+)^2] and
  w(lam) = E[(lam - gamma Psi)^+], lam solves lam - sigma m g / mu^2 - g/w = 0
  (the non-trivial root with the least expected proxy loss) and
  eps = mu (lam - x)^+ / (sqrt(m g) m w).  Defined for every regular law;
  ``alg3`` is its small-lam expansion (g ~ f lam^3/3, w ~ f lam^2/2), and the
  two coincide when the density of Psi is flat near 0 (U[0, b]).

Expectations are integrals over the cost distribution by Gauss-Legendre
quadrature (after a cosine change of variables), never by sampling.

**Per-seller laws.**  Given a :class:`~market_sim.distributions.SellerLaws`, seller i
is answered with its own virtual cost, eps_i = scale (lam - gamma psi_i(c_i))^+, and
paid by Eq. 8 (003) up to the top of its own support; the cut-off is the fluid rule
with every expectation the class-weighted sum (g = sum_j w_j g_j, w = sum_j w_j w_j,
w_j the share of class j), and alg3's f_Psi(0) the mixture's, sum_j w_j f_Psi_j(0).
Each class is answered by a one-law mechanism that shares lam and the scale.
A report outside a seller's own support is read as its nearest end (as offline).
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy import optimize

from ..distributions import CostDistribution, SellerLaws, empirical
from ..errors import MarketSimError
from .base import Mechanism, Outcome, _deviation_args
from .offline import check_params, proxy_loss_of_eps, solve
from .quadrature import gauss_legendre_cos

__all__ = [
    "OnlineMechanism",
    "ArrivalOutcome",
    "simulate_arrivals",
    "compare_online_offline",
    "PriorFreeOnline",
]

_NODES = 256
_RULES = ("fluid", "alg3")


_SHAPE, _JAC = gauss_legendre_cos(_NODES)  # expectations over the cost law
_PAY_SHAPE, _PAY_JAC = gauss_legendre_cos(64)  # the payment integral (eps is smooth in z)


class OnlineMechanism(Mechanism):
    """Algorithm 3 (``rule="alg3"``) or its fluid form (``rule="fluid"``).

    ``eps(costs)`` and ``payments(costs)`` answer each reported cost as if it
    arrived alone.  ``cutoff`` is lam: a report is bought iff gamma psi < lam.
    As a :class:`Mechanism` (registered as ``online``) the planned m is the
    market's number of sellers.
    """

    name = "online"
    own_report_inclusion = True
    myerson_payments = True  # Alg. 3 pays by Eq. 8 (003): see ``payments``
    per_seller_laws = True  # takes SellerLaws: each seller's own psi_i (module docstring)
    cutoff: float
    scale: float
    threshold_cost: float | np.ndarray  # per seller with per-seller laws
    _classes: list[tuple[OnlineMechanism, float]] | None
    _class_ids: list[int]

    @classmethod
    def from_context(cls, **context: Any) -> OnlineMechanism:
        return cls._from_settings(**context)

    @classmethod
    def _from_settings(
        cls, *, dist, n_sellers=100, mu=1.0, sigma=1.0, gamma=1.0, rule="fluid", m=None, **_ignored
    ) -> OnlineMechanism:
        return cls(dist, n_sellers if m is None else m, mu=mu, sigma=sigma, gamma=gamma, rule=rule)

    def __init__(
        self,
        dist: CostDistribution | SellerLaws,
        m: int,
        *,
        mu: float,
        sigma: float,
        gamma: float,
        rule: str = "fluid",
    ):
        check_params(mu, sigma, gamma)
        if not isinstance(dist, CostDistribution | SellerLaws):
            raise MarketSimError(
                "dist must be a CostDistribution (see parse_distribution) or SellerLaws"
            )
        if rule not in _RULES:
            raise MarketSimError(f"unknown online rule {rule!r}; use 'fluid' or 'alg3'")
        if not (float(m) == int(m) and int(m) >= 1):
            raise MarketSimError(
                f"the planned number of sellers m must be an integer >= 1 (got {m!r})"
            )
        self.dist, self.m, self.rule = dist, int(m), rule
        self.mu, self.sigma, self.gamma = float(mu), float(sigma), float(gamma)
        self._classes = _class_schedules(self) if isinstance(dist, SellerLaws) else None
        if self._classes is not None and len(self._classes) == 1:
            one = self._classes[0][0]  # one class: that law's own mechanism, exactly
            self.cutoff, self.scale = one.cutoff, one.scale
        elif rule == "alg3":
            self.cutoff, self.scale = self._alg3()
        else:
            self.cutoff = self._fluid_cutoff()
            g, w = self.moments(self.cutoff)
            self.scale = self.mu / (np.sqrt(self.m * g) * self.m * w)
        if self._classes is not None:
            self._share_schedule()
            return
        self._answer_setup()

    def _answer_setup(self) -> None:
        # the largest report that is still bought (the top of the support if all are)
        assert isinstance(self.dist, CostDistribution)
        self.threshold_cost = float(
            self.dist.inverse_virtual_cost(np.array(self.cutoff / self.gamma))
        )
        self._affine_top = self._affine_eps_at_top()

    def _share_schedule(self) -> None:
        """Per-seller laws: every class answers with the common cut-off and scale."""
        assert self._classes is not None and isinstance(self.dist, SellerLaws)
        for one, _ in self._classes:
            one.cutoff, one.scale = self.cutoff, self.scale
            one._answer_setup()
        by_law = {j: one for (one, _), j in zip(self._classes, self._class_ids, strict=True)}
        self._by_law = by_law
        # each seller's largest report still bought
        self.threshold_cost = np.array([by_law[j].threshold_cost for j in self.dist.group])

    def _affine_eps_at_top(self) -> float | None:
        """eps at the payment integral's top when psi (so eps) is affine below it (every
        uniform law): then int_c^top eps = (top - c)(eps(c) + eps(top)) / 2 exactly (the
        trapezoid rule is exact for lines).  None when psi is not affine there (checked
        by second differences on 257 points, to 1e-12 of its range)."""
        lo = self.dist.support[0]
        top = min(self.threshold_cost, self.dist.support[1])
        if not top > lo:
            return None
        z = np.linspace(lo, top, 257)
        psi = np.asarray(self.dist.virtual_cost(z), dtype=float)
        if not np.all(np.isfinite(psi)):
            return None
        span = max(float(np.ptp(psi)), abs(float(psi[0])), 1e-300)
        if np.max(np.abs(np.diff(psi, 2))) > 1e-12 * span:
            return None
        return float(self.scale * (self.cutoff - self.gamma * psi[-1]))  # the line, unclipped

    # ---- expectations over the cost distribution ------------------------------
    def moments(self, lam: float) -> tuple[float, float]:
        """g(lam) = E[((lam - gamma Psi)^+)^2], w(lam) = E[(lam - gamma Psi)^+]
        (per-seller laws: the class-weighted sums)."""
        if self._classes is not None:
            g, w = self._class_moments(np.array([float(lam)]))
            return float(g[0]), float(w[0])
        assert isinstance(self.dist, CostDistribution)
        top = float(self.dist.inverse_virtual_cost(np.array(lam / self.gamma)))
        return self._moments(lam, top)

    def _moments(self, lam: float, top: float) -> tuple[float, float]:
        """The moments when gamma psi(c) < lam exactly for c < top."""
        assert isinstance(self.dist, CostDistribution)
        lo = self.dist.support[0]
        if top <= lo:
            return 0.0, 0.0
        c = lo + (top - lo) * _SHAPE
        gap = np.maximum(lam - self.gamma * self.dist.virtual_cost(c), 0.0)
        dens = self.dist.pdf(c) * (top - lo) * _JAC
        return float(np.dot(gap * gap, dens)), float(np.dot(gap, dens))

    def _phi(self, lam: float, top: float) -> float:
        """Eq. 14 (003) in expectation: lam - sigma m g / mu^2 - g / w."""
        g, w = self._moments(lam, top)
        if w <= 0:
            return lam
        return lam - self.sigma * self.m * g / self.mu**2 - g / w

    def expected_proxy_loss(self, lam: float) -> float:
        """Proxy loss (Eq. 11) of the fluid allocation at lam, sums as m x expectations."""
        g, w = self.moments(lam)
        if w <= 0:
            return np.inf
        m = self.m
        scale = self.mu / (np.sqrt(m * g) * m * w)
        eta = m * scale * w
        lin = m * scale * (lam * w - g)  # gamma sum eps_i psi_i
        return float(self.mu * np.sqrt(m * g) / (m * w) + self.sigma / eta + lin)

    def _fluid_cutoff(self) -> float:
        """All non-trivial roots of the expected Eq. 14, then the best of them.

        Below gamma psi(high) the cut-off is parametrised by the cost t where
        gamma psi(t) = lam (no inversion of psi needed); above it everybody is
        bought and lam is scanned directly."""
        if self._classes is not None:
            return self._fluid_cutoff_classes()
        assert isinstance(self.dist, CostDistribution)
        lo, hi = self.dist.support
        gam = self.gamma
        roots = []

        def scan(grid, lam_of, top_of):
            vals = np.array([self._phi(lam_of(t), top_of(t)) for t in grid])
            for a, b, fa, fb in zip(grid[:-1], grid[1:], vals[:-1], vals[1:], strict=True):
                if fa * fb < 0:
                    t = optimize.brentq(
                        lambda u: self._phi(lam_of(u), top_of(u)),
                        a,
                        b,
                        xtol=1e-14 * max(abs(b), 1e-300),
                        rtol=1e-15,
                    )
                    roots.append(lam_of(t))
                elif fb == 0:
                    roots.append(lam_of(b))

        x_hi = gam * float(self.dist.virtual_cost(hi))
        ts = lo + (hi - lo) * np.geomspace(1e-9, 1.0, 300)
        scan(ts, lambda t: gam * float(self.dist.virtual_cost(t)), lambda t: t)
        if np.isfinite(x_hi):
            top = 2 * x_hi + 1e-300
            while self._phi(top, hi) > 0:
                top *= 2
                if top > 1e300:
                    raise MarketSimError("fluid rule: no cut-off found (phi stays positive)")
            scan(x_hi + (top - x_hi) * np.linspace(0, 1, 200), lambda v: v, lambda v: hi)
        roots = [r for r in roots if r > gam * float(self.dist.virtual_cost(lo))]
        if not roots:
            raise MarketSimError("fluid rule: Eq. 14 in expectation has no positive root")
        return float(min(roots, key=self.expected_proxy_loss))

    def _class_moments(self, lams: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """g and w at each of ``lams`` for per-seller laws: sum_j w_j E_j[...] (vectorised;
        class j's top is the largest cost with gamma psi_j(c) <= lam)."""
        assert self._classes is not None
        g, w = np.zeros(lams.size), np.zeros(lams.size)
        for one, share in self._classes:
            d = one.dist
            assert isinstance(d, CostDistribution)
            lo = d.support[0]
            top = np.asarray(d.inverse_virtual_cost(lams / self.gamma), dtype=float)
            span = np.maximum(top - lo, 0.0)[:, None]
            c = lo + span * _SHAPE
            gap = np.maximum(lams[:, None] - self.gamma * d.virtual_cost(c), 0.0)
            dens = d.pdf(c) * span * _JAC
            g += share * np.sum(gap * gap * dens, axis=1)
            w += share * np.sum(gap * dens, axis=1)
        return g, w

    def _fluid_cutoff_classes(self) -> float:
        """The fluid cut-off for per-seller laws: the roots of the class-weighted Eq. 14
        in expectation (lam scanned at every class's values gamma psi_j(t) on a grid
        of costs, then above all of them), the best by expected proxy loss."""
        assert self._classes is not None
        gam = self.gamma

        def phis(lams):
            g, w = self._class_moments(np.atleast_1d(np.asarray(lams, dtype=float)))
            with np.errstate(divide="ignore", invalid="ignore"):
                v = lams - self.sigma * self.m * g / self.mu**2 - g / w
            return np.where(w > 0, v, lams)

        def phi(lam):
            return float(phis(np.array([lam]))[0])

        laws = [one.dist for one, _ in self._classes]
        grid = [
            gam * d.virtual_cost(d.support[0] + np.ptp(d.support) * np.geomspace(1e-9, 1.0, 300))
            for d in laws
        ]
        x_hi = max(float(v[-1]) for v in grid)
        lams = np.unique(np.concatenate(grid))
        if np.isfinite(x_hi):
            top = 2 * x_hi + 1e-300
            while phi(top) > 0:
                top *= 2
                if top > 1e300:
                    raise MarketSimError("fluid rule: no cut-off found (phi stays positive)")
            lams = np.unique(np.r_[lams[np.isfinite(lams)], np.linspace(x_hi, top, 200)])
        vals = phis(lams)
        roots = []
        for a, b, fa, fb in zip(lams[:-1], lams[1:], vals[:-1], vals[1:], strict=True):
            if fa * fb < 0:
                roots.append(optimize.brentq(phi, a, b, xtol=1e-14 * max(abs(b), 1e-300)))
            elif fb == 0:
                roots.append(float(b))
        floor = min(gam * float(d.virtual_cost(d.support[0])) for d in laws)
        roots = [r for r in roots if r > floor]
        if not roots:
            raise MarketSimError("fluid rule: Eq. 14 in expectation has no positive root")
        return float(min(roots, key=self.expected_proxy_loss))

    def _psi_density_at_zero(self) -> float:
        """f_Psi(0); per-seller laws: the mixture's, sum_j w_j f_Psi_j(0)."""
        if self._classes is not None:
            return float(sum(w * one._psi_density_at_zero() for one, w in self._classes))
        assert isinstance(self.dist, CostDistribution)
        return float(self.dist.virtual_cost_pdf(np.array(0.0)))

    def _alg3(self):
        f0 = self._psi_density_at_zero()
        if not f0 > 0:
            laws = [self.dist] if self._classes is None else [o.dist for o, _ in self._classes]
            psi_lo = min(float(d.virtual_cost(d.support[0])) for d in laws)
            spec = ", ".join(d.spec for d in laws)
            raise MarketSimError(
                f"alg3 divides by f_Psi(0), the density of the virtual cost at 0, which is 0 for "
                f"{spec} (virtual costs start at {psi_lo:g}); "
                "use rule='fluid'"
            )
        m, mu, sigma, gamma = self.m, self.mu, self.sigma, self.gamma
        lam = np.sqrt(mu**2 * gamma / (sigma * m * f0))
        scale = 2 * np.sqrt(3) * gamma**1.5 * mu / (f0**1.5 * m**1.5 * lam**3.5)
        return float(lam), float(scale)

    # ---- answers ----------------------------------------------------------------
    def eps(self, costs, sellers=None) -> np.ndarray:
        """eps for each reported cost, each as if it arrived alone (per-seller laws:
        ``costs`` one per seller, or rows of ``sellers``)."""
        if self._classes is not None:
            return self._per_law("eps", costs, sellers)
        c = np.asarray(costs, dtype=float)
        x = np.asarray(self.dist.virtual_cost(c), dtype=float)
        if x.ndim == 0:
            return self.scale * np.maximum(self.cutoff - self.gamma * x, 0.0)
        if np.shares_memory(x, c) or not x.flags.writeable:
            x = x.copy()
        x *= -self.gamma  # in place: scale (cutoff - gamma psi)^+, no temporaries
        x += self.cutoff
        np.maximum(x, 0.0, out=x)
        x *= self.scale
        return x

    def for_sellers(self, ids) -> OnlineMechanism:
        """Per-seller laws: the same schedule (cut-off and scale, planned in advance),
        answering sellers ``ids``."""
        if self._classes is None:
            return self
        assert isinstance(self.dist, SellerLaws) and isinstance(self.threshold_cost, np.ndarray)
        ids = np.asarray(ids, dtype=int)
        sub = copy.copy(self)
        sub.dist = SellerLaws(self.dist.laws, self.dist.group[ids])
        sub.threshold_cost = self.threshold_cost[ids]
        return sub

    def outcome(self, reports, rng=None) -> Outcome:
        eps, pay = self._eps_and_payments(reports)
        return Outcome(eps, pay, {"cutoff": self.cutoff})

    def deviations(self, sellers, candidates, reports, rng=None) -> Outcome:
        sellers, cand, _ = _deviation_args(sellers, candidates, reports)
        if self._classes is not None:
            return Outcome(*self._eps_and_payments(cand, sellers))
        return self.outcome(cand)  # each seller alone: the others do not matter

    def payments(self, costs, sellers=None) -> np.ndarray:
        """Myerson payments (Eq. 8): t = c eps(c) + int_c^{c*} eps(z) dz."""
        return self._eps_and_payments(costs, sellers)[1]

    def _per_law(self, what: str, costs, sellers):
        """Per-seller laws: ``what`` (eps or _eps_and_payments) of each row by its
        seller's class, reports put in each seller's own support."""
        from .base import in_own_support as _in_support

        assert isinstance(self.dist, SellerLaws)
        c = _in_support(self.dist, np.asarray(costs, dtype=float), "report", sellers)
        g = self.dist.group if sellers is None else self.dist.group[np.asarray(sellers, int)]
        outs = None
        for j, one in self._by_law.items():
            rows = np.flatnonzero(g == j)
            if not rows.size:
                continue
            got = getattr(one, what)(c[rows])
            got = got if isinstance(got, tuple) else (got,)
            if outs is None:
                outs = tuple(np.zeros(c.shape) for _ in got)
            for out, part in zip(outs, got, strict=True):
                out[rows] = part
        if outs is None:
            outs = (np.zeros(c.shape), np.zeros(c.shape))
        return outs if what != "eps" else outs[0]

    def _eps_and_payments(self, costs, sellers=None) -> tuple[np.ndarray, np.ndarray]:
        """eps and the Myerson payment of each reported cost.  The integral is exact
        (trapezoid) when psi is affine below the top, else Gauss-Legendre on 64 nodes."""
        if self._classes is not None:
            return self._per_law("_eps_and_payments", costs, sellers)
        c = np.asarray(costs, dtype=float)
        flat = c.reshape(-1)  # a copy when c is not C-contiguous: work on it, reshape at the end
        eps = self.eps(flat)
        pay = flat * eps
        top = min(self.threshold_cost, self.dist.support[1])
        if self._affine_top is not None:
            width = np.subtract(top, flat)
            np.maximum(width, 0.0, out=width)  # 0 at and above the top
            half = np.add(eps, self._affine_top)
            half *= width
            half *= 0.5
            pay += half
            return eps.reshape(c.shape), pay.reshape(c.shape)
        bought = np.flatnonzero(flat < top)
        cb = flat[bought]
        breaks = np.array([b for b in getattr(self.dist, "breaks", ()) if b < top])
        if breaks.size:  # psi (so eps) may jump there: one short rule per segment
            pay[bought] += _integral_between_breaks(self.eps, cb, breaks, top)
            return eps.reshape(c.shape), pay.reshape(c.shape)
        width = top - cb
        z = cb[:, None] + width[:, None] * _PAY_SHAPE
        pay[bought] += width * (self.eps(z) @ _PAY_JAC)
        return eps.reshape(c.shape), pay.reshape(c.shape)


_SEGMENT_SHAPE, _SEGMENT_JAC = gauss_legendre_cos(8)


def _integral_between_breaks(eps, lo, breaks, top) -> np.ndarray:
    """int_{lo_i}^{top} eps(z) dz (Eq. 8, 003) segment by segment between the law's
    ``breaks``, where eps may jump (an empirical law's density steps), with a short
    Gauss-Legendre rule on each segment (eps is smooth inside one)."""
    edges = np.concatenate((breaks, [top]))
    a = np.maximum(np.concatenate(([-np.inf], breaks))[None, :], lo[:, None])
    b = np.maximum(edges[None, :], lo[:, None])  # empty segments below lo have width 0
    width = b - a
    width[~np.isfinite(width)] = 0.0
    start = np.where(np.isfinite(a), a, lo[:, None])
    z = np.minimum(start[..., None] + width[..., None] * _SEGMENT_SHAPE, top)
    return np.einsum("ij,ijk,k->i", width, eps(z), _SEGMENT_JAC)


def _class_schedules(mech: OnlineMechanism) -> list[tuple[OnlineMechanism, float]]:
    """[(a one-law OnlineMechanism of class j, its share w_j)] for the classes present; the
    class mechanisms compute their own cut-off only when there is one class."""
    laws = mech.dist
    assert isinstance(laws, SellerLaws)
    if laws.n_sellers == 0:
        raise MarketSimError("per-seller laws with no sellers")
    counts = np.bincount(laws.group, minlength=len(laws.laws))
    present = np.flatnonzero(counts)
    out = []
    for j in present:
        law = laws.laws[int(j)]
        if present.size == 1:
            one = OnlineMechanism(
                law, mech.m, mu=mech.mu, sigma=mech.sigma, gamma=mech.gamma, rule=mech.rule
            )
        else:  # answers only: cut-off and scale set by the caller (``_share_schedule``)
            one = OnlineMechanism.__new__(OnlineMechanism)
            one.dist, one.m, one.rule, one._classes = law, mech.m, mech.rule, None
            one.mu, one.sigma, one.gamma = mech.mu, mech.sigma, mech.gamma
        out.append((one, float(counts[j]) / laws.n_sellers))
    mech._class_ids = [int(j) for j in present]
    return out


@dataclass(frozen=True)
class ArrivalOutcome:
    """What the platform bought from the sellers who actually arrived."""

    arrived: np.ndarray  # indices (into the given costs) of the arrivals, in order
    eps: np.ndarray  # per arrival
    payments: np.ndarray  # per arrival
    proxy_loss: float  # Eq. 11 of what was bought (inf if nothing was bought)
    total_payment: float


def simulate_arrivals(
    mech,
    costs,
    *,
    xi: float = 1.0,
    rng: np.random.Generator | None = None,
    true_dist: CostDistribution | None = None,
) -> ArrivalOutcome:
    """Sellers with ``costs`` arrive (in random order if ``rng`` is given, else in
    the given order); only the first round(xi * len(costs)) arrive (Thm V.1:
    the platform planned for more).  ``mech`` is an OnlineMechanism or a
    PriorFreeOnline.  The proxy loss uses the virtual costs of ``true_dist``
    (default: the mechanism's own distribution; required for PriorFreeOnline)."""
    costs = np.asarray(costs, dtype=float).ravel()
    if isinstance(getattr(mech, "dist", None), SellerLaws):
        raise MarketSimError("simulate_arrivals takes one cost law, not per-seller laws")
    if true_dist is None:
        if isinstance(mech, PriorFreeOnline):
            raise MarketSimError("PriorFreeOnline needs true_dist to score the proxy loss")
        true_dist = mech.dist
    if not (0 < xi <= 1):
        raise MarketSimError(f"xi must be in (0, 1] (got {xi!r})")
    order = rng.permutation(costs.size) if rng is not None else np.arange(costs.size)
    arrived = order[: max(1, int(round(xi * costs.size)))]
    c = costs[arrived]
    if isinstance(mech, PriorFreeOnline):
        eps, pay = mech.run(c)
    else:
        eps, pay = mech.eps(c), mech.payments(c)
    loss = proxy_loss_of_eps(
        eps, true_dist.virtual_cost(c), mu=mech.mu, sigma=mech.sigma, gamma=mech.gamma
    )
    return ArrivalOutcome(arrived, eps, pay, loss, float(pay.sum()))


def compare_online_offline(
    costs,
    mech,
    *,
    xi: float = 1.0,
    rng: np.random.Generator | None = None,
    true_dist: CostDistribution | None = None,
) -> dict:
    """Online and offline proxy losses on the same realised (arrived) costs."""
    out = simulate_arrivals(mech, costs, xi=xi, rng=rng, true_dist=true_dist)
    true_dist = true_dist or mech.dist
    psi = true_dist.virtual_cost(np.asarray(costs, dtype=float)[out.arrived])
    offline = solve(psi, mu=mech.mu, sigma=mech.sigma, gamma=mech.gamma).proxy_loss
    return {
        "online_loss": out.proxy_loss,
        "offline_loss": offline,
        "ratio": out.proxy_loss / offline,
        "n_arrived": int(out.arrived.size),
        "online_payment": out.total_payment,
    }


class PriorFreeOnline:
    """Online mechanism that does not know f_C (beyond its support).

    Arrivals are split into epochs that double in length after a warm-up; the
    sellers of an epoch face the fluid rule built from an ironed, smoothed
    empirical distribution of the reports of all *earlier* epochs.  A seller's
    own report therefore never moves its own schedule, so each seller still
    faces a fixed non-increasing eps(report) with its Myerson payment: IC and
    IR hold seller by seller.  Warm-up sellers are not bought.
    """

    def __init__(
        self,
        support: tuple[float, float],
        m: int,
        *,
        mu: float,
        sigma: float,
        gamma: float,
        warmup: int = 32,
    ):
        check_params(mu, sigma, gamma)
        lo, hi = map(float, support)
        if not (0 <= lo < hi < np.inf):
            raise MarketSimError("support must satisfy 0 <= low < high < inf")
        if warmup < 2:
            raise MarketSimError("warmup must be >= 2")
        self.support, self.m, self.warmup = (lo, hi), int(m), int(warmup)
        self.mu, self.sigma, self.gamma = float(mu), float(sigma), float(gamma)
        self.dist: CostDistribution | None = None  # the estimate in force for the last epoch
        self.schedules: list[tuple[int, OnlineMechanism]] = []

    def run(self, costs) -> tuple[np.ndarray, np.ndarray]:
        """Answer the reports in arrival order; returns (eps, payments)."""
        c = np.asarray(costs, dtype=float)
        eps = np.zeros(c.size)
        pay = np.zeros(c.size)
        start = self.warmup
        self.schedules = []
        while start < c.size:
            end = min(c.size, 2 * start)
            est = empirical(
                c[:start], iron=True, support=self.support, name=f"first {start} reports"
            )
            mech = OnlineMechanism(est, self.m, mu=self.mu, sigma=self.sigma, gamma=self.gamma)
            self.schedules.append((start, mech))
            eps[start:end] = mech.eps(c[start:end])
            pay[start:end] = mech.payments(c[start:end])
            self.dist = est
            start = end
        if self.dist is None:
            raise MarketSimError(f"no seller arrived after the warm-up of {self.warmup}")
        return eps, pay
