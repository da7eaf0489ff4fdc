"""The offline mechanism with a private cut-off.

The exact mechanism (Eq. 11-13, 003) picks the cut-off lam from everybody's
reports, so lam itself leaks them.  Here lam is drawn from a public grid by the
exponential mechanism (001); given lam the allocation keeps the Eq. 13 shape
a_i proportional to (lam - x_i)^+ (x_i = gamma psi(r_i), reports clipped to the
public support) with the best eta = sqrt(sigma / x.a).

Score.  With w_i = (lam - x_i)^+, S = sum w, the proxy loss (Eq. 11, 003) is
L(lam) = mu ||w|| / S + 2 sqrt(sigma x.w / S).  A cut-off under which almost no
weight is bought lets one seller move L by O(1), so the score is ramped:

    score(lam) = -[theta L + (1 - theta) L_max],   theta = min(1, S / S0),

with L_max = mu + 2 sqrt(sigma lam) >= L (no seller is worse than one seller at
x = lam) and S0 > 0 public (default: half the expected S at that lam under the prior).
Wherever S >= S0 the score is exactly -L.

Sensitivity (one report changed, m fixed; W = lam - x_lo, x_lo = gamma psi(low),
R = L_max - L_min, L_min = mu/sqrt(m) + 2 sqrt(sigma x_lo)).  For neighbouring w, w'
with sums S, S' (S_min the smaller): ||a - a'||_1 <= 2W/S_min, so the norm term
moves by <= 2 mu W / S_min; the weighted mean x.a moves by <= 1.5 W^2 / S_min
(centre x at (x_lo + lam)/2), and sqrt moves by h(v) = min(sqrt v, v / (2 sqrt x_lo)).
Since theta changes by <= W / S0 and theta_min g(S_min) <= g(S0) for the
decreasing g(S) = 2 mu W / S + 2 sqrt(sigma) h(1.5 W^2 / S),

    Delta(lam) = R W / S0 + min(R, g(S0)),   Delta = max over the grid.

So lam is ``privacy``-DP in the reports, and Delta = O(1/m) (O(1/sqrt m) when
x_lo = 0) for S0 proportional to m.

Incentives.  Given lam, seller i's eps_i(z) = sqrt(sigma) w(z) /
sqrt((S_-i + w(z)) (P_-i + x(z) w(z))) (P = x.w) is non-increasing in its own
report z (d log eps / dw >= 1/w - (lam - 2w)/(P + lam w - w^2) >= 0), so Myerson
payments t_i = r eps_i(r) + int_r^{c_max} eps_i(z) dz make the lam-stage exactly
truthful and individually rational; a report moves lam's law by a factor of at
most e^privacy, so a misreport gains at most (e^privacy - 1) E[truthful utility]
(approximate truthfulness, 001).  ``ic_bound`` gives that number.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ..distributions import CostDistribution
from ..errors import MarketSimError
from ..privacy.selection import exponential_mechanism, exponential_probabilities
from .offline import check_params
from .online import OnlineMechanism
from .quadrature import gauss_legendre_cos

__all__ = ["PrivateCutoff", "PrivateCutoffOutcome"]

_SHAPE, _JAC = gauss_legendre_cos(24)


@dataclass(frozen=True)
class PrivateCutoffOutcome:
    eps: np.ndarray
    payments: np.ndarray
    lam: float
    n_bought: int


@dataclass(frozen=True)
class PrivateCutoff:
    """Offline mechanism whose cut-off lam is chosen ``privacy``-DP (see module doc).

    ``grid``: the public cut-offs (default: 33 points, lam - x_lo geometric from
    1/4 to 4 times the fluid cut-off's, which is public: it needs only the prior);
    ``min_weight``: S0 of the score's ramp (default: per cut-off, half the
    expected S = m E[(lam - gamma Psi)^+] under the prior).
    """

    dist: CostDistribution
    m: int
    mu: float = 1.0
    sigma: float = 1.0
    gamma: float = 1.0
    privacy: float = 1.0
    grid: tuple | None = None
    min_weight: float | None = None
    _x_lo: float = field(init=False, repr=False)
    _S0: np.ndarray = field(init=False, repr=False, compare=False)

    def __post_init__(self):
        check_params(self.mu, self.sigma, self.gamma)
        if not isinstance(self.dist, CostDistribution):
            raise MarketSimError("dist must be a CostDistribution (see parse_distribution)")
        if not (float(self.m) == int(self.m) and int(self.m) >= 1):
            raise MarketSimError(f"m must be an integer >= 1 (got {self.m!r})")
        if not (np.isfinite(self.privacy) and self.privacy > 0):
            raise MarketSimError(
                f"privacy (the epsilon of the cut-off choice) must be > 0 (got {self.privacy!r})"
            )
        lo, hi = self.dist.support
        x_lo = float(self.gamma * self.dist.virtual_cost(np.array(lo)))
        object.__setattr__(self, "_x_lo", x_lo)
        fluid = OnlineMechanism(self.dist, self.m, mu=self.mu, sigma=self.sigma, gamma=self.gamma)
        if self.grid is None:  # geometric in lam - x_lo around the fluid cut-off
            grid = x_lo + (fluid.cutoff - x_lo) * np.geomspace(0.25, 4.0, 33)
        else:
            grid = np.asarray(self.grid, dtype=float)
            if grid.ndim != 1 or grid.size == 0 or not np.all(np.isfinite(grid)):
                raise MarketSimError("grid must be a non-empty list of finite cut-offs")
            if grid.min() <= x_lo:
                raise MarketSimError(
                    f"every cut-off must exceed gamma psi(low) = {x_lo:g} "
                    "(below it nobody is ever bought)"
                )
        grid = np.sort(grid)
        object.__setattr__(self, "grid", tuple(float(v) for v in grid))
        if self.min_weight is None:  # half the expected S at each cut-off
            S0 = np.array([0.5 * self.m * fluid.moments(lam)[1] for lam in grid])
        else:
            S0 = np.full(grid.size, self.min_weight, dtype=float)
        if not (np.all(np.isfinite(S0)) and np.all(S0 > 0)):
            raise MarketSimError(
                f"min_weight must be a finite number > 0 (got {self.min_weight!r})"
            )
        object.__setattr__(self, "_S0", S0)

    # ---- the score and its sensitivity -------------------------------------------
    @property
    def lams(self) -> np.ndarray:
        return np.asarray(self.grid)

    def _loss_bounds(self):
        lam = self.lams
        top = self.mu + 2 * np.sqrt(self.sigma * lam)
        bottom = self.mu / np.sqrt(self.m) + 2 * np.sqrt(self.sigma * self._x_lo)
        return top, top - bottom

    @property
    def sensitivity(self) -> float:
        """Delta = max over the grid of R W / S0 + min(R, g(S0)) (module doc)."""
        _, R = self._loss_bounds()
        W = self.lams - self._x_lo
        S0 = self._S0
        v = 1.5 * W**2 / S0
        h = np.sqrt(v)
        if self._x_lo > 0:
            h = np.minimum(h, v / (2 * np.sqrt(self._x_lo)))
        g = 2 * self.mu * W / S0 + 2 * np.sqrt(self.sigma) * h
        return float(np.max(R * W / S0 + np.minimum(R, g)))

    def virtual(self, reports) -> np.ndarray:
        """x = gamma psi(report), reports clipped to the public support."""
        r = np.asarray(reports, dtype=float)
        if r.ndim != 1 or r.size == 0 or not np.all(np.isfinite(r)):
            raise MarketSimError("reports must be a non-empty 1-D array of finite costs")
        return self.gamma * self.dist.virtual_cost(np.clip(r, *self.dist.support))

    def _sums(self, x):
        """W[g, i] = (lam_g - x_i)^+ and its sums S = sum w, Q = sum w^2, P = sum w x."""
        W = np.maximum(self.lams[:, None] - x[None, :], 0.0)
        xf = np.where(np.isfinite(x), x, 0.0)  # x = inf (psi at a top where f = 0) has w = 0
        return W, W.sum(1), (W * W).sum(1), W @ xf

    def _losses(self, S, Q, P) -> np.ndarray:
        with np.errstate(divide="ignore", invalid="ignore"):
            L = self.mu * np.sqrt(Q) / S + 2 * np.sqrt(self.sigma * P / S)
        return np.where(S > 0, L, np.inf)

    def _scores(self, S, Q, P) -> np.ndarray:
        L_max, _ = self._loss_bounds()
        theta = np.minimum(1.0, S / self._S0)
        L = np.minimum(self._losses(S, Q, P), L_max)  # L_max where nothing is bought
        return -(theta * L + (1 - theta) * L_max)

    def proxy_losses(self, reports) -> np.ndarray:
        """L(lam) on the grid (inf where nothing is bought)."""
        return self._losses(*self._sums(self.virtual(reports))[1:])

    def scores(self, reports) -> np.ndarray:
        return self._scores(*self._sums(self.virtual(reports))[1:])

    def cutoff_probabilities(self, reports) -> np.ndarray:
        return exponential_probabilities(self.scores(reports), self.privacy, self.sensitivity)

    # ---- allocation and payments at a given cut-off ------------------------------
    def allocation(self, reports, lam: float) -> np.ndarray:
        x = self.virtual(reports)
        w = np.maximum(lam - x, 0.0)
        S, P = w.sum(), float(w @ x)
        if S == 0:
            return np.zeros_like(x)
        if P <= 0:
            raise MarketSimError(
                "no optimum at this cut-off: every bought seller has virtual cost 0, so eta -> inf"
            )
        return np.sqrt(self.sigma / (P / S)) * w / S

    def _own_eps(self, z, lam, S_rest, P_rest):
        """eps_i(z) at cut-off lam, the others' sums fixed (any array shape)."""
        x = self.gamma * self.dist.virtual_cost(z)
        w = np.maximum(lam - x, 0.0)
        with np.errstate(divide="ignore", invalid="ignore"):
            e = np.sqrt(self.sigma) * w / np.sqrt((S_rest + w) * (P_rest + x * w))
        return np.where(w > 0, e, 0.0)

    def payments(self, reports, lam: float) -> np.ndarray:
        """Myerson payments of the lam-stage, others' reports fixed."""
        r = np.clip(np.asarray(reports, dtype=float), *self.dist.support)
        x = self.gamma * self.dist.virtual_cost(r)
        w = np.maximum(lam - x, 0.0)
        S_rest, P_rest = w.sum() - w, float(w @ x) - w * x
        eps = self._own_eps(r, lam, S_rest, P_rest)
        span = np.maximum(self._top_report(lam) - r, 0.0)
        z = r[:, None] + span[:, None] * _SHAPE[None, :]
        tail = span * (self._own_eps(z, lam, S_rest[:, None], P_rest[:, None]) @ _JAC)
        return r * eps + tail

    # ---- the mechanism -------------------------------------------------------------
    def outcome(self, reports, rng: np.random.Generator) -> PrivateCutoffOutcome:
        lam = self.lams[
            exponential_mechanism(self.scores(reports), self.privacy, self.sensitivity, rng)
        ]
        eps = self.allocation(reports, lam)
        return PrivateCutoffOutcome(
            eps=eps,
            payments=self.payments(reports, lam),
            lam=float(lam),
            n_bought=int(np.count_nonzero(eps)),
        )

    def _top_report(self, lam):
        """The largest report still bought at lam (psi is non-decreasing)."""
        top = self.dist.inverse_virtual_cost(np.asarray(lam, dtype=float) / self.gamma)
        return np.clip(top, *self.dist.support)

    def _utilities_by_cutoff(self, i, report, cost, reports) -> tuple[np.ndarray, np.ndarray]:
        """(P(lam), seller i's utility at each lam) when i reports ``report``."""
        trial = np.array(reports, dtype=float)
        trial[i] = report
        r = float(np.clip(report, *self.dist.support))
        x = self.virtual(trial)
        lams = self.lams
        W, S, Q, P = self._sums(x)
        S_rest = S - W[:, i]
        P_rest = P - W[:, i] * (x[i] if np.isfinite(x[i]) else 0.0)  # w = 0 where x = inf
        eps = self._own_eps(np.full(lams.size, r), lams, S_rest, P_rest)
        span = np.maximum(self._top_report(lams) - r, 0.0)
        z = r + span[:, None] * _SHAPE[None, :]
        tail = span * (self._own_eps(z, lams[:, None], S_rest[:, None], P_rest[:, None]) @ _JAC)
        prob = exponential_probabilities(self._scores(S, Q, P), self.privacy, self.sensitivity)
        return prob, r * eps + tail - cost * eps

    def expected_utility(self, i: int, report: float, cost: float, reports) -> float:
        """Seller i's utility averaged over the draw of lam."""
        prob, util = self._utilities_by_cutoff(i, report, cost, reports)
        return float(prob @ util)

    def ic_bound(self, i: int, cost: float, reports) -> float:
        """Most a misreport can gain in expectation: (e^privacy - 1) E[truthful utility]."""
        return float(np.expm1(self.privacy) * self.expected_utility(i, cost, cost, reports))
