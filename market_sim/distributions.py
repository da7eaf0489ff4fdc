"""Cost distributions of the sellers, virtual costs and Myerson ironing.

A :class:`CostDistribution` wraps a ``scipy.stats`` frozen distribution on a
bounded support ``[low, high]`` (``low >= 0``: costs are per unit of privacy
loss and cannot be negative).  It exposes the pdf and cdf, sampling with an
explicit :class:`numpy.random.Generator`, the virtual cost

    psi(c) = c + F(c) / f(c)                      (Assumption III.1, 003)

and the distribution of the virtual cost Psi = psi(C) (needed by the online
mechanism).  The mechanisms of the papers need psi non-decreasing ("regular").
A non-regular distribution is refused unless the caller asks for Myerson
ironing, which replaces psi by the derivative of the greatest convex minorant
of H(q) = q F^{-1}(q) (the integral of psi in quantile space).

Spec strings (one syntax for all; ``parse_distribution``):

=================================  ============================================
``uniform:LOW:HIGH``               U[LOW, HIGH]
``truncnorm:MEAN:SD:LOW:HIGH``     N(MEAN, SD^2) truncated to [LOW, HIGH]
``beta:A:B:LOW:HIGH``              Beta(A, B) scaled to [LOW, HIGH]
``truncexpon:SCALE:LOW:HIGH``      LOW + Exp(mean SCALE), truncated at HIGH
``empirical:PATH``                 smoothed empirical law of the costs in PATH
                                   (a CSV with a ``cost`` column, or one column)
=================================  ============================================

The empirical distribution is smoothed by a Gaussian kernel density estimate
(Scott's bandwidth unless given), reflected at both ends of the support to
remove the boundary bias, evaluated at the centres of ``bins`` equal bins on
the support (``[min, max]`` of the samples unless given) and renormalised; the result is a
piecewise-uniform density (``scipy.stats.rv_histogram``) with a piecewise
linear cdf.  Such a density usually is not regular (psi drops wherever the
density steps up), so empirical costs normally need ``iron=True``.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from itertools import pairwise
from pathlib import Path
from typing import Any

import numpy as np

from .errors import MarketSimError

__all__ = [
    "CostDistribution",
    "parse_distribution",
    "uniform",
    "truncnorm",
    "scaled_beta",
    "truncexpon",
    "empirical",
    "mixture",
    "SellerLaws",
    "tabulated_cdf",
]

_GRID = 8193  # points used for the regularity check and for ironing
_REG_TOL = 1e-9


@dataclass(frozen=True)
class CostDistribution:
    """A cost distribution on a bounded support, optionally ironed.

    Build it with :func:`parse_distribution` or the constructors below.
    """

    spec: str
    dist: Any = field(repr=False, compare=False)  # scipy frozen distribution (untyped)
    support: tuple[float, float]
    ironed: bool = False
    # ironing intervals in cost space and the constant virtual cost on each
    iron_intervals: tuple[tuple[float, float, float], ...] = field(default=(), repr=False)
    # costs inside the support where psi may jump (a mixture's parts begin or end there):
    # integrals of functions of psi are split at them
    breaks: tuple[float, ...] = field(default=(), repr=False)

    # ---- density, cdf, sampling ---------------------------------------------
    def pdf(self, c):
        return self.dist.pdf(c)

    def cdf(self, c):
        return self.dist.cdf(c)

    def ppf(self, q):
        return self.dist.ppf(q)

    def sample(self, n: int, rng: np.random.Generator) -> np.ndarray:
        """``n`` i.i.d. costs drawn with the caller's Generator."""
        if not isinstance(rng, np.random.Generator):
            raise TypeError("rng must be a numpy.random.Generator")
        lo, hi = self.support
        return np.clip(self.dist.rvs(size=int(n), random_state=rng), lo, hi)

    def mean(self) -> float:
        return float(self.dist.mean())

    # ---- virtual costs -------------------------------------------------------
    def check_in_support(self, c, what: str = "cost") -> np.ndarray:
        c = np.asarray(c, dtype=float)
        lo, hi = self.support
        bad = ~np.isfinite(c) | (c < lo) | (c > hi)
        if np.any(bad):
            first = float(c[bad].flat[0])
            raise MarketSimError(
                f"{what} {first!r} is outside the support [{lo:g}, {hi:g}] of {self.spec}"
            )
        return c

    def raw_virtual_cost(self, c) -> np.ndarray:
        """psi(c) = c + F(c)/f(c), without ironing (Lemma III.2, 003).

        At the bottom of the support F/f -> 0, so psi(low) = low; where the
        density vanishes inside or at the top of the support psi is +inf.
        """
        c = np.asarray(c, dtype=float)
        lo = self.support[0]
        family = _family(self)  # the closed forms only on the family's own scipy law
        if family == "uniform":  # F/f = c - low: the common case, exactly
            return c + np.maximum(c - lo, 0.0)
        if family == "truncnorm":  # closed form: ~20x faster than scipy's
            return c + np.where(c <= lo, 0.0, _truncnorm_cdf_over_pdf(c, self.dist))
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            if family == "beta":  # closed form: ~3x faster than scipy's
                ratio = np.atleast_1d(_beta_cdf_over_pdf(c, self.dist))
            else:
                ratio = np.atleast_1d(self.dist.cdf(c) / self.dist.pdf(c))
            weak = ~(np.isfinite(ratio) & (ratio > 0))  # underflow in a tail: use logs there
            if weak.any():
                cw = np.broadcast_to(c, ratio.shape)[weak]
                ratio[weak] = np.exp(self.dist.logcdf(cw) - self.dist.logpdf(cw))
        ratio = np.where(c <= lo, 0.0, ratio.reshape(c.shape))
        ratio = np.where(np.isnan(ratio), np.inf, ratio)
        return c + ratio

    def virtual_cost(self, c) -> np.ndarray:
        """The (ironed, if requested) virtual cost of costs in the support."""
        c = self.check_in_support(c)
        psi = self.raw_virtual_cost(c)
        if self.iron_intervals:
            a, b, value = (np.array(col) for col in zip(*self.iron_intervals, strict=True))
            j = np.clip(np.searchsorted(a, c, side="right") - 1, 0, a.size - 1)
            psi = np.where((c > a[j]) & (c < b[j]), value[j], psi)
        return psi

    def is_regular(self) -> bool:
        """True when psi is non-decreasing on the support (checked on a grid)."""
        return _first_decrease(self) is None

    def inverse_virtual_cost(self, y) -> np.ndarray:
        """Largest cost c with psi(c) <= y (``low`` if none, ``high`` if all)."""
        y = np.asarray(y, dtype=float)
        lo, hi = self.support
        a = np.full(y.shape, lo)
        b = np.full(y.shape, hi)
        for _ in range(80):
            mid = 0.5 * (a + b)
            below = self.virtual_cost(mid) <= y
            a = np.where(below, mid, a)
            b = np.where(below, b, mid)
        return np.where(self.virtual_cost(np.full(y.shape, lo)) > y, lo, a)

    def virtual_cost_cdf(self, y) -> np.ndarray:
        """P(Psi <= y) for Psi = psi(C)."""
        y = np.asarray(y, dtype=float)
        return np.where(
            self.virtual_cost(self.support[0]) > y, 0.0, self.cdf(self.inverse_virtual_cost(y))
        )

    def virtual_cost_pdf(self, y) -> np.ndarray:
        """Density of Psi = psi(C): f(c) / psi'(c) at c = psi^{-1}(y).

        Zero outside [psi(low), psi(high)].  Ironed intervals are atoms of Psi
        and have no density; this returns the density of the continuous part.
        """
        y = np.asarray(y, dtype=float)
        lo, hi = self.support
        c = self.inverse_virtual_cost(y)
        h = 1e-6 * (hi - lo)
        c0 = np.clip(c - h, lo, hi)
        c1 = np.clip(c + h, lo, hi)
        slope = (self.virtual_cost(c1) - self.virtual_cost(c0)) / (c1 - c0)
        with np.errstate(divide="ignore", invalid="ignore"):
            dens = np.where(slope > 0, self.pdf(c) / slope, 0.0)
        inside = (y >= self.virtual_cost(lo)) & (y <= self.virtual_cost(hi))
        return np.where(inside & np.isfinite(dens), dens, 0.0)


def _family(law) -> str | None:
    """The spec's family when the law's scipy distribution is that family's (a law whose
    ``dist`` was swapped after it was built, e.g. by a test of the audit, gets scipy's
    cdf / pdf, not a closed form of the family its spec names)."""
    family = law.spec.split(":", 1)[0]
    return family if getattr(getattr(law.dist, "dist", None), "name", None) == family else None


def _truncnorm_cdf_over_pdf(c, frozen) -> np.ndarray:
    """F(c)/f(c) of N(loc, scale^2) truncated to z = (c - loc)/scale in [a, b] (scipy's
    frozen ``truncnorm(a, b, loc, scale)``): the normalising constant cancels, so

        F/f = scale (Phi(z) - Phi(a)) / phi(z),

    computed without cancellation or underflow through the scaled complementary error
    function erfcx(x) = exp(x^2) erfc(x): with r = sqrt(2 pi) / 2 and u = z / sqrt(2),
    v = a / sqrt(2),

    * z <= 0 (both in the lower tail): r [erfcx(-u) - erfcx(-v) exp(u^2 - v^2)];
    * a >= 0 (both in the upper tail): r [erfcx(v) exp(u^2 - v^2) - erfcx(u)];
    * a < 0 < z: r [erf(u) + erf(-v)] exp(u^2)  (two positive terms).

    The exponents are <= 0 in the first case; in the others a large value is a true
    large ratio (the density vanishing in the upper tail), +inf past overflow."""
    from scipy.special import erf, erfcx

    a = float(frozen.args[0])
    loc, scale = float(frozen.kwds["loc"]), float(frozen.kwds["scale"])
    u = (np.asarray(c, dtype=float) - loc) / (scale * math.sqrt(2.0))
    v = a / math.sqrt(2.0)
    r = math.sqrt(2.0 * math.pi) / 2.0
    with np.errstate(over="ignore", invalid="ignore"):  # in the branches not taken
        growth = np.exp(u * u - v * v)
        lower = erfcx(-u) - erfcx(-v) * growth
        upper = erfcx(v) * growth - erfcx(u)
        across = (erf(u) + erf(-v)) * np.exp(u * u)
    out = np.where(u <= 0, lower, np.where(v >= 0, upper, across))
    return scale * r * np.maximum(out, 0.0)


def _beta_cdf_over_pdf(c, frozen) -> np.ndarray:
    """F(c)/f(c) of Beta(a, b) scaled to [loc, loc + scale] (scipy's frozen ``beta(a, b,
    loc, scale)``), with x = (c - loc) / scale:

        F/f = scale I_x(a, b) B(a, b) / (x^(a-1) (1 - x)^(b-1)),

    the regularized incomplete beta ``betainc`` over the density, its power in logs (no
    overflow of x^(a-1) for a < 1 near 0).  Below x = 1e-20, where I_x may underflow,
    its series I_x = x^a / (a B(a, b)) (1 + O(x)) gives F/f = scale x / a (1 + O(x)),
    exact in double precision."""
    from scipy.special import betainc, betaln

    a, b = float(frozen.args[0]), float(frozen.args[1])
    loc, scale = float(frozen.kwds["loc"]), float(frozen.kwds["scale"])
    x = np.clip((np.asarray(c, dtype=float) - loc) / scale, 0.0, 1.0)
    log_density = (a - 1.0) * np.log(x) + (b - 1.0) * np.log1p(-x) - betaln(a, b)
    ratio = scale * betainc(a, b, x) * np.exp(-log_density)
    return np.where(x < 1e-20, scale * x / a, ratio)


# ---- regularity and ironing -------------------------------------------------
def _cost_grid(dist: CostDistribution) -> np.ndarray:
    lo, hi = dist.support
    return np.linspace(lo, hi, _GRID)


def _first_decrease(dist: CostDistribution):
    c = _cost_grid(dist)
    psi = dist.raw_virtual_cost(c)
    finite = np.isfinite(psi)
    psi, c = psi[finite], c[finite]
    drop = np.diff(psi) < -_REG_TOL * np.maximum(1.0, np.abs(psi[:-1]))
    return float(c[1:][drop][0]) if drop.any() else None


def _ironing_intervals(dist: CostDistribution) -> tuple[tuple[float, float, float], ...]:
    """Intervals where Myerson ironing flattens psi, with the flat value.

    In quantile space H(q) = q F^{-1}(q) has H' = psi; the ironed virtual cost
    is the slope of the greatest convex minorant of H.  The minorant is the
    lower convex hull of H on the cost grid.
    """
    c = _cost_grid(dist)
    q = dist.cdf(c)
    h = q * c
    hull: list[int] = []
    for j in range(len(c)):  # Andrew's monotone chain, lower hull
        while len(hull) >= 2:
            i0, i1 = hull[-2], hull[-1]
            cross = (q[i1] - q[i0]) * (h[j] - h[i0]) - (h[i1] - h[i0]) * (q[j] - q[i0])
            if cross <= 0:
                hull.pop()
            else:
                break
        hull.append(j)
    intervals = []
    for i0, i1 in pairwise(hull):
        if i1 - i0 < 2 or q[i1] <= q[i0]:
            continue
        slope = (h[i1] - h[i0]) / (q[i1] - q[i0])
        chord = h[i0] + slope * (q[i0 : i1 + 1] - q[i0])
        if np.max(h[i0 : i1 + 1] - chord) > 1e-12 * max(1.0, abs(h[i1])):
            intervals.append((float(c[i0]), float(c[i1]), float(slope)))
    return tuple(intervals)


def _make(spec: str, frozen, low: float, high: float, iron: bool) -> CostDistribution:
    if not (np.isfinite(low) and np.isfinite(high)) or low < 0 or high <= low:
        raise MarketSimError(
            f"{spec}: the support must satisfy 0 <= LOW < HIGH < inf (got [{low:g}, {high:g}])"
        )
    d = CostDistribution(spec=spec, dist=frozen, support=(float(low), float(high)))
    where = _first_decrease(d)
    if where is None:
        return d
    if not iron:
        raise MarketSimError(
            f"{spec} is not regular (its virtual cost decreases near c={where:.6g}); "
            "ask for Myerson ironing (iron=True, or --iron on the command line)"
        )
    spec_i = spec if spec.endswith("+iron") else spec + "+iron"
    return CostDistribution(
        spec=spec_i,
        dist=frozen,
        support=d.support,
        ironed=True,
        iron_intervals=_ironing_intervals(d),
    )


# ---- constructors ------------------------------------------------------------
def _stats():
    """scipy.stats, imported on first use (it takes ~0.3 s: importing market_sim stays cheap)."""
    from scipy import stats

    return stats


def _fmt(*values: float) -> str:
    """Exact, short text of the parameters: the spec re-parses to the same law."""
    return ":".join(np.format_float_positional(float(v), trim="-") for v in values)


def uniform(low: float, high: float, *, iron: bool = False) -> CostDistribution:
    return _make(
        "uniform:" + _fmt(low, high), _stats().uniform(loc=low, scale=high - low), low, high, iron
    )


def truncnorm(
    mean: float, sd: float, low: float, high: float, *, iron: bool = False
) -> CostDistribution:
    spec = "truncnorm:" + _fmt(mean, sd, low, high)
    if not sd > 0:
        raise MarketSimError(f"{spec}: SD must be > 0")
    frozen = _stats().truncnorm((low - mean) / sd, (high - mean) / sd, loc=mean, scale=sd)
    return _make(spec, frozen, low, high, iron)


def scaled_beta(
    a: float, b: float, low: float, high: float, *, iron: bool = False
) -> CostDistribution:
    spec = "beta:" + _fmt(a, b, low, high)
    if not (a > 0 and b > 0):
        raise MarketSimError(f"{spec}: A and B must be > 0")
    return _make(spec, _stats().beta(a, b, loc=low, scale=high - low), low, high, iron)


def truncexpon(scale: float, low: float, high: float, *, iron: bool = False) -> CostDistribution:
    spec = "truncexpon:" + _fmt(scale, low, high)
    if not scale > 0:
        raise MarketSimError(f"{spec}: SCALE must be > 0")
    frozen = _stats().truncexpon((high - low) / scale, loc=low, scale=scale)
    return _make(spec, frozen, low, high, iron)


def empirical(
    samples,
    *,
    bins: int = 512,
    bandwidth: float | None = None,
    iron: bool = False,
    name: str = "samples",
    support: tuple[float, float] | None = None,
) -> CostDistribution:
    """Smoothed empirical distribution of observed costs (see module docstring).

    ``support`` (default: [min, max] of the samples) is where the smoothed
    density lives; the KDE is renormalised there."""
    x = np.asarray(samples, dtype=float).ravel()
    spec = f"empirical:{name}"
    if x.size < 2 or not np.all(np.isfinite(x)):
        raise MarketSimError(f"{spec}: need at least 2 finite cost samples")
    if np.any(x < 0):
        raise MarketSimError(f"{spec}: costs must be >= 0")
    low, high = (float(x.min()), float(x.max())) if support is None else map(float, support)
    if high <= low:
        raise MarketSimError(f"{spec}: all samples are equal; the distribution has no density")
    if support is not None and (x.min() < low or x.max() > high):
        raise MarketSimError(f"{spec}: samples fall outside the support [{low:g}, {high:g}]")
    kde = _stats().gaussian_kde(x, bw_method=bandwidth)
    edges = np.linspace(low, high, bins + 1)
    mid = 0.5 * (edges[:-1] + edges[1:])
    # reflection at both ends removes the KDE's boundary bias (half the density there)
    dens = kde(mid) + kde(2 * low - mid) + kde(2 * high - mid)
    dens = np.maximum(dens, 1e-12 * dens.max())
    frozen = _stats().rv_histogram((dens, edges), density=True)
    return _with_density_steps(_make(spec, frozen, low, high, iron), edges[1:-1])


def _with_density_steps(d: CostDistribution, steps) -> CostDistribution:
    """``d`` with its density's steps declared as ``breaks``: psi = c + F/f jumps where
    f does (Lemma III.2, 003), so a payment integral must not straddle them (a
    Gauss-Legendre rule across 64 bin edges was off by ~1e-4 of a payment).  Steps
    inside an ironing interval are left out: psi is constant there."""
    steps = np.asarray(steps, dtype=float)
    inside = np.zeros(steps.size, dtype=bool)
    for a, b, _ in d.iron_intervals:
        inside |= (steps > a) & (steps < b)
    # an interval's ends are breaks too: its constant is the grid's, not the raw psi there
    ends = [e for a, b, _ in d.iron_intervals for e in (a, b)]
    lo, hi = d.support
    cuts = np.unique(np.concatenate((steps[~inside], ends)))
    return replace(d, breaks=tuple(float(x) for x in cuts if lo < x < hi))


def law_quantiles(law: CostDistribution, q) -> np.ndarray:
    """``law.ppf(q)`` with scipy's RuntimeWarning silenced (its beta ppf may warn below
    1e-8, Beta(0.5, 2): a point placed off is still a cost of the support)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        return np.asarray(law.ppf(q), dtype=float)


def tail_costs(law: CostDistribution, points: int = 64, widest: float = 1e-2) -> np.ndarray:
    """Costs of ``law`` at ``points`` quantiles geometric from 1e-15 to ``widest`` towards
    each end (u and 1 - u), clipped to the support, finite: where a density singular at
    an end has its sellers (F = sqrt(c): the quantile 1e-5 is the cost 1e-10), which even
    costs and equal-mass cells do not reach.  An end where the cost is linear in u to
    0.1% of the span (a density flat there: U[0, 1] at both ends) gets none: even
    costs serve it."""
    lo, hi = law.support
    tail = np.geomspace(1e-15, widest, points)
    ends = []
    for end, q in ((lo, tail), (hi, 1.0 - tail)):
        x = np.clip(law_quantiles(law, q), lo, hi)
        linear = end + (tail / widest) * (x[-1] - end)  # the cost if linear in u there
        if np.nanmax(np.abs(x - linear)) > 1e-3 * abs(x[-1] - end):  # else: even costs do
            ends.append(x[np.isfinite(x)])
    return np.concatenate(ends) if ends else np.empty(0)


def tabulated_cdf(law: CostDistribution, points: int = 4097) -> Callable:
    """``law``'s cdf, linearly interpolated between ``points`` costs of its support,
    ``points`` quantiles and 512 quantiles geometric from 1e-15 to 0.1 towards each end
    (exact for a uniform law): the BNE solver's interim path asks for it thousands of
    times.  The geometric ones: F = c^0.4's chord from 0 to the quantile 1/4096 put
    F(1e-10) at 2.7e-5 for 1e-4, and the exact verification printed 2.4% of u for 0.22%
    (issue #48)."""
    lo, hi = law.support
    by_mass = np.concatenate((law_quantiles(law, np.linspace(0.0, 1.0, points)),
                              tail_costs(law, 512, 0.1)))  # fmt: skip
    x = np.concatenate((np.linspace(lo, hi, points), by_mass))
    x = np.unique(np.clip(x[np.isfinite(x)], lo, hi))  # and by quantile (issue #48)
    F = np.asarray(law.cdf(x), dtype=float)

    def cdf(c):
        return np.interp(c, x, F)

    return cdf


def _read_cost_column(path: str) -> np.ndarray:
    import pandas as pd

    p = Path(path)
    if not p.is_file():
        raise MarketSimError(f"empirical:{path}: no such file")
    try:
        df = pd.read_csv(p)
    except Exception as exc:  # pandas raises many types for bad CSV
        raise MarketSimError(
            f"empirical:{path}: cannot read CSV ({exc.__class__.__name__})"
        ) from None
    col = "cost" if "cost" in df.columns else (df.columns[0] if df.shape[1] == 1 else None)
    if col is None:
        raise MarketSimError(f"empirical:{path}: needs a 'cost' column")
    values = pd.to_numeric(df[col], errors="coerce").to_numpy(float)
    return values


_SYNTAX = {
    "uniform": "uniform:LOW:HIGH",
    "truncnorm": "truncnorm:MEAN:SD:LOW:HIGH",
    "beta": "beta:A:B:LOW:HIGH",
    "truncexpon": "truncexpon:SCALE:LOW:HIGH",
    "empirical": "empirical:PATH",
}
_ALIASES = {"normal": "truncnorm", "gaussian": "truncnorm", "norm": "truncnorm"}
_ALIASES |= {"exponential": "truncexpon", "expon": "truncexpon", "exp": "truncexpon"}


def parse_distribution(spec: str, *, iron: bool = False) -> CostDistribution:
    """Parse a spec string such as ``uniform:0:1`` (see the module docstring).

    A trailing ``+iron`` in the spec is the same as ``iron=True``.
    """
    if not isinstance(spec, str) or not spec.strip():
        raise MarketSimError("distribution spec must be a non-empty string such as 'uniform:0:1'")
    spec = spec.strip()
    if spec.endswith("+iron"):
        spec, iron = spec[: -len("+iron")], True
    name, _, rest = spec.partition(":")
    name = name.lower()
    if name == "empirical":
        if not rest:
            raise MarketSimError("empirical needs a file: 'empirical:PATH'")
        return empirical(_read_cost_column(rest), iron=iron, name=rest)
    if name not in _SYNTAX:
        import difflib

        stem = name.split("(")[0].strip()
        close = [_ALIASES[stem]] if stem in _ALIASES else []
        close = close or difflib.get_close_matches(stem, list(_SYNTAX), n=1, cutoff=0.6)
        hint = f"did you mean {_SYNTAX[close[0]]}? " if close else ""
        raise MarketSimError(
            f"unknown distribution {name!r}; {hint}use NAME:PARAMS with ':' between the "
            "numbers: " + ", ".join(_SYNTAX.values())
        )
    arity = {k: v.count(":") for k, v in _SYNTAX.items()}
    parts = rest.split(":") if rest else []
    if len(parts) != arity[name]:
        raise MarketSimError(
            f"{name} takes {arity[name]} numbers separated by ':', as in {_SYNTAX[name]} "
            f"(got {spec!r})"
        )
    try:
        nums = [float(p) for p in parts]
    except ValueError:
        raise MarketSimError(f"{spec!r}: parameters must be numbers") from None
    if not all(np.isfinite(nums)):
        raise MarketSimError(f"{spec!r}: parameters must be finite")
    builders: dict[str, Callable[..., CostDistribution]] = {
        "uniform": uniform,
        "truncnorm": truncnorm,
        "beta": scaled_beta,
        "truncexpon": truncexpon,
    }
    return builders[name](*nums, iron=iron)


def as_distribution(dist) -> CostDistribution:
    """A CostDistribution from itself or a spec string (see :func:`parse_distribution`)."""
    if isinstance(dist, str):
        dist = parse_distribution(dist)
    if not isinstance(dist, CostDistribution):
        raise MarketSimError("dist must be a CostDistribution or a spec like uniform:0:1")
    return dist


# ---- mixtures and per-seller laws ------------------------------------------------------
class _FrozenMixture:
    """A finite mixture of frozen scipy laws, with the frozen-law methods the library uses."""

    def __init__(self, parts, weights):
        self.parts, self.weights = tuple(parts), np.asarray(weights, dtype=float)
        self.low = min(float(p.support()[0]) for p in self.parts)
        self.high = max(float(p.support()[1]) for p in self.parts)

    def support(self):
        return self.low, self.high

    def pdf(self, c):
        """Right-continuous: a part's density stops just below its top (unless that is the
        mixture's top), so psi has no spurious dip where one part ends and another goes on."""
        c = np.asarray(c, dtype=float)
        total = np.zeros(c.shape)
        for w, p in zip(self.weights, self.parts, strict=True):
            hi = float(p.support()[1])
            total = total + np.where((c < hi) | (hi >= self.high), w * p.pdf(c), 0.0)
        return total

    def cdf(self, c):
        return sum(w * p.cdf(c) for w, p in zip(self.weights, self.parts, strict=True))

    def logpdf(self, c):
        with np.errstate(divide="ignore"):
            return np.log(self.pdf(c))

    def logcdf(self, c):
        with np.errstate(divide="ignore"):
            return np.log(self.cdf(c))

    def mean(self):
        return float(sum(w * p.mean() for w, p in zip(self.weights, self.parts, strict=True)))

    def ppf(self, q):
        """F^{-1}(q) by bisection on the (continuous, non-decreasing) mixture cdf."""
        q = np.asarray(q, dtype=float)
        a, b = np.full(q.shape, self.low), np.full(q.shape, self.high)
        for _ in range(60):
            mid = 0.5 * (a + b)
            below = self.cdf(mid) < q
            a, b = np.where(below, mid, a), np.where(below, b, mid)
        return b

    def rvs(self, size, random_state):
        rng = random_state
        which = rng.choice(len(self.parts), size=size, p=self.weights)
        out = np.empty(size)
        for j, p in enumerate(self.parts):
            k = int(np.count_nonzero(which == j))
            out[which == j] = p.rvs(size=k, random_state=rng) if k else []
        return out


def mixture(laws, weights) -> CostDistribution:
    """The law of a seller drawn from class j with probability ``weights[j]`` and then
    from ``laws[j]``: F = sum_j w_j F_j.  Ironed where its virtual cost falls (a
    mixture of regular laws need not be regular)."""
    laws = tuple(as_distribution(d) for d in laws)
    w = np.asarray(weights, dtype=float)
    if len(laws) == 0 or w.shape != (len(laws),) or np.any(w <= 0) or not np.isfinite(w).all():
        raise MarketSimError("mixture needs one positive weight per law")
    if len(laws) == 1:
        return laws[0]
    spans = sorted(d.support for d in laws)
    reach = spans[0][1]
    for lo, hi in spans[1:]:
        if lo > reach:
            raise MarketSimError(
                f"the supports leave a gap ({reach:g}, {lo:g}) where the pooled law has no "
                "density: a mechanism that takes one cost law cannot serve these classes"
            )
        reach = max(reach, hi)
    w = w / w.sum()
    frozen = _FrozenMixture([d.dist for d in laws], w)
    spec = "mixture(" + ", ".join(f"{wj:.6g}*{d.spec}" for wj, d in zip(w, laws, strict=True)) + ")"
    d = _make(spec, frozen, frozen.low, frozen.high, iron=True)
    ends = {float(e) for law in laws for e in law.support} | {b for law in laws for b in law.breaks}
    return replace(d, breaks=tuple(sorted(e for e in ends if d.support[0] < e < d.support[1])))


@dataclass(frozen=True)
class SellerLaws:
    """Every seller's own cost law: seller ``i`` has law ``laws[group[i]]``.

    The per-seller counterpart of a :class:`CostDistribution` that the mechanisms defined
    per seller (offline, online: psi_i, Lemma III.2, 003) use.  Methods take costs of
    shape ``(n,)`` (one per seller) or, with ``sellers=``, ``(k, ...)`` arrays whose row
    ``r`` belongs to seller ``sellers[r]``."""

    laws: tuple[CostDistribution, ...]
    group: np.ndarray = field(repr=False)

    def __post_init__(self):
        laws = tuple(as_distribution(d) for d in self.laws)
        g = np.asarray(self.group, dtype=int).reshape(-1)
        if not laws:
            raise MarketSimError("SellerLaws needs at least one law")
        if g.size and (g.min() < 0 or g.max() >= len(laws)):
            raise MarketSimError(f"group indices must lie in 0..{len(laws) - 1}")
        g.setflags(write=False)
        object.__setattr__(self, "laws", laws)
        object.__setattr__(self, "group", g)

    @property
    def n_sellers(self) -> int:
        return int(self.group.size)

    @property
    def low(self) -> np.ndarray:
        return np.array([self.laws[j].support[0] for j in self.group])

    @property
    def high(self) -> np.ndarray:
        return np.array([self.laws[j].support[1] for j in self.group])

    @property
    def support(self) -> tuple[float, float]:
        """The hull of every seller's support."""
        return (
            min(d.support[0] for d in self.laws),
            max(d.support[1] for d in self.laws),
        )

    def law(self, i: int) -> CostDistribution:
        return self.laws[int(self.group[i])]

    def _rows(self, c, sellers):
        c = np.asarray(c, dtype=float)
        g = self.group if sellers is None else self.group[np.asarray(sellers, dtype=int)]
        if c.shape[: g.ndim] != g.shape:
            raise MarketSimError(f"costs of shape {c.shape} do not match {g.size} sellers")
        return c, g.reshape(g.shape + (1,) * (c.ndim - g.ndim))

    def _apply(self, method: str, c, sellers=None) -> np.ndarray:
        c, g = self._rows(c, sellers)
        out = np.empty(c.shape)
        gb = np.broadcast_to(g, c.shape)
        for j, d in enumerate(self.laws):
            sel = gb == j
            if sel.any():
                out[sel] = getattr(d, method)(c[sel])
        return out

    def virtual_cost(self, c, sellers=None) -> np.ndarray:
        """psi_i(c) for each seller's own law."""
        return self._apply("virtual_cost", c, sellers)

    def cdf(self, c, sellers=None) -> np.ndarray:
        return self._apply("cdf", c, sellers)

    def pdf(self, c, sellers=None) -> np.ndarray:
        return self._apply("pdf", c, sellers)

    def ppf(self, q, sellers=None) -> np.ndarray:
        """Each seller's own quantile function, clipped to its support."""
        return np.clip(self._apply("ppf", q, sellers), self.low, self.high)

    def check_in_support(self, c, what: str = "cost", sellers=None) -> np.ndarray:
        c, g = self._rows(c, sellers)
        gb = np.broadcast_to(g, c.shape)
        for j, d in enumerate(self.laws):
            d.check_in_support(c[gb == j], f"{what} (class {j})")
        return c

    def sample(self, rng: np.random.Generator) -> np.ndarray:
        """One cost per seller, each from its own law (class by class, in class order)."""
        out = np.empty(self.n_sellers)
        for j, d in enumerate(self.laws):
            sel = self.group == j
            out[sel] = d.sample(int(sel.sum()), rng)
        return out
