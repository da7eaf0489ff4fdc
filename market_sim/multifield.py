"""Sellers with several fields: a cost per unit of privacy, a privacy cap and a data size.

The privacy-procurement literature prices sellers with more than one number:
FL-Market (Zheng et al., IEEE BigData 2022, arXiv:2106.04384) gives each seller a
valuation, a privacy budget eps_max it accepts at most, and a data size; MFG-RegretNet
(2026) draws v ~ U[0, 1] per-unit cost, eps ~ U[0.1, 5] cap and |D| ~ U{10..500}.
A :class:`MultiFieldPopulation` is that: a :class:`~market_sim.population.Population`
for the costs (its classes, its data and its data-cost copula, unchanged) plus,
optionally, a cap law and a size law per class::

    MultiFieldPopulation("10*uniform:0:1", cap="uniform:0.1:5", size="integers:10:500")
    MultiFieldPopulation.parse("10*uniform:0:1;cap=uniform:0.1:5;size=integers:10:500")

**Laws.** ``cap`` is any cost law (``market_sim.distributions`` syntax) whose support
starts above 0; ``size`` is ``integers:LO:HI``, uniform on {LO, ..., HI} with
1 <= LO <= HI.  One law for every class, or one per class joined by ``|``
(``cap=uniform:0.1:1|uniform:1:5``).

**Dependence** (the population's Gaussian copula, extended).  A seller's cost c keeps
its class law F exactly; its latent is z = Phi^-1(F(c)).  Its cap and size latents are
z_f = rho_f z + sqrt(1 - rho_f^2) xi_f (independent xi_f ~ N(0, 1)), and the field is
F_f^-1(Phi(z_f)); so corr(z, z_f) = rho_f, corr(z_cap, z_size) = rho_cap rho_size,
and every field keeps its law whatever the rhos.  With data the cost is the
population's (dependent on the data); caps and sizes follow the cost.

**Private and verified fields.**  ``private`` names the fields a seller reports and may
misreport; the others are verified (the platform sees the truth).  Default: ``cost``,
and ``cap`` when it has a law; ``size`` is verified by default (a platform can count
rows).  Every private field needs a law.

**Draws.**  ``draw(m, rng)`` returns ``m`` markets as one numpy structured array of
shape ``(m, n_sellers)`` with float fields ``cost`` (and ``cap``, ``size`` when they
have laws; sizes are whole numbers): one record per seller, the form multi-field
mechanisms read (``market_sim.mechanisms.multifield``).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .distributions import CostDistribution, parse_distribution
from .errors import MarketSimError
from .population import Population, as_population

__all__ = [
    "FIELDS",
    "FIELD_OPTIONS",
    "IntegerLaw",
    "MultiFieldPopulation",
    "as_multifield",
    "record_dtype",
    "records",
]

FIELDS = ("cost", "cap", "size")
_KEYS = ("cap", "size", "private", "rho_cap", "rho_size")
FIELD_OPTIONS = _KEYS  # the spec options of this layer (the others are the population's)


def record_dtype(fields) -> np.dtype:
    """The structured dtype of one seller's record: a float64 per field, in ``FIELDS`` order."""
    return np.dtype([(f, np.float64) for f in FIELDS if f in tuple(fields)])


def records(**columns) -> np.ndarray:
    """A structured array from equal-shaped columns, e.g. ``records(cost=c, cap=k)``."""
    unknown = sorted(set(columns) - set(FIELDS))
    if unknown:
        raise MarketSimError(f"unknown field {unknown[0]!r}: fields are {', '.join(FIELDS)}")
    if "cost" not in columns:
        raise MarketSimError("a record needs a cost")
    arrays = {k: np.asarray(v, dtype=float) for k, v in columns.items()}
    shape = np.broadcast_shapes(*(a.shape for a in arrays.values()))
    out = np.empty(shape, dtype=record_dtype(arrays))
    for k, a in arrays.items():
        out[k] = a
    return out


@dataclass(frozen=True)
class IntegerLaw:
    """Uniform on the whole numbers {low, ..., high} (a data size)."""

    low: int
    high: int

    @property
    def spec(self) -> str:
        return f"integers:{self.low}:{self.high}"

    @property
    def support(self) -> tuple[float, float]:
        return float(self.low), float(self.high)

    def ppf(self, u) -> np.ndarray:
        """The u-quantile: low + floor(u (high - low + 1)), u in [0, 1)."""
        span = self.high - self.low + 1
        k = np.floor(np.asarray(u, dtype=float) * span)
        return self.low + np.clip(k, 0, span - 1)


def _size_law(spec) -> IntegerLaw:
    if isinstance(spec, IntegerLaw):
        law = spec
    else:
        name, _, rest = str(spec).strip().partition(":")
        parts = rest.split(":")
        if name != "integers" or len(parts) != 2:
            raise MarketSimError(
                f"size law {spec!r}: a size is a positive integer law, integers:LO:HI"
            )
        try:
            law = IntegerLaw(int(parts[0]), int(parts[1]))
        except ValueError:
            raise MarketSimError(
                f"size law {spec!r}: LO and HI must be whole numbers (integers:10:500)"
            ) from None
    if not 1 <= law.low <= law.high:
        raise MarketSimError(f"size law {law.spec}: a size is a positive integer, so 1 <= LO <= HI")
    return law


def _cap_law(spec) -> CostDistribution:
    law = spec if isinstance(spec, CostDistribution) else parse_distribution(str(spec))
    if not law.support[0] > 0:
        raise MarketSimError(
            f"cap law {law.spec}: its support starts at {law.support[0]:g}; a cap must be > 0"
        )
    return law


def _per_class(value, n_classes: int, make, what: str) -> tuple | None:
    """One law per class from a law, a 'A|B' spec or a sequence of laws."""
    if value is None:
        return None
    if isinstance(value, str):
        items: list = value.split("|")
    elif isinstance(value, list | tuple):
        items = list(value)
    else:
        items = [value]
    if len(items) == 1:
        items = items * n_classes
    if len(items) != n_classes:
        raise MarketSimError(
            f"{what}: {len(items)} laws for {n_classes} classes (give one, or one per class)"
        )
    return tuple(make(v) for v in items)


def _rho(name: str, value) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not -1 <= value <= 1:
        raise MarketSimError(f"{name} must be a number in [-1, 1], got {value!r}")
    return float(value)


@dataclass(frozen=True, init=False)
class MultiFieldPopulation:
    """Sellers with a cost and optional cap and size per class (see the module docstring)."""

    population: Population
    cap: tuple[CostDistribution, ...] | None
    size: tuple[IntegerLaw, ...] | None
    private: tuple[str, ...]
    rho_cap: float
    rho_size: float

    def __init__(
        self,
        population,
        cap=None,
        size=None,
        *,
        private=None,
        rho_cap: float = 0.0,
        rho_size: float = 0.0,
    ):
        pop = as_population(population)
        set_ = object.__setattr__
        set_(self, "population", pop)
        set_(self, "cap", _per_class(cap, pop.n_classes, _cap_law, "cap"))
        set_(self, "size", _per_class(size, pop.n_classes, _size_law, "size"))
        set_(self, "rho_cap", _rho("rho_cap", rho_cap))
        set_(self, "rho_size", _rho("rho_size", rho_size))
        set_(self, "private", self._private(private))

    def _private(self, private) -> tuple[str, ...]:
        if private is None:
            return tuple(f for f in ("cost", "cap") if f in self.fields)
        names = private.split(",") if isinstance(private, str) else list(private)
        names = [str(n).strip() for n in names if str(n).strip()]
        for n in names:
            if n not in FIELDS:
                raise MarketSimError(f"unknown field {n!r}: fields are {', '.join(FIELDS)}")
            if n not in self.fields:
                raise MarketSimError(f"private field {n!r} has no law (give {n}=...)")
        if not names:
            raise MarketSimError("private must name at least one field (cost, cap or size)")
        return tuple(f for f in FIELDS if f in names)

    # ---- who sells ---------------------------------------------------------------------
    @property
    def fields(self) -> tuple[str, ...]:
        """The fields with a law, in ``FIELDS`` order (cost always)."""
        return tuple(f for f in FIELDS if f == "cost" or getattr(self, f) is not None)

    @property
    def verified(self) -> tuple[str, ...]:
        return tuple(f for f in self.fields if f not in self.private)

    @property
    def n_sellers(self) -> int:
        return self.population.n_sellers

    @property
    def dtype(self) -> np.dtype:
        return record_dtype(self.fields)

    def support(self, field: str) -> tuple[float, float]:
        """The hull of the supports of ``field`` over the classes."""
        if field == "cost":
            laws: tuple = self.population.laws
        else:
            laws = getattr(self, field) or ()
            if not laws:
                raise MarketSimError(f"field {field!r} has no law")
        return min(law.support[0] for law in laws), max(law.support[1] for law in laws)

    # ---- drawing ---------------------------------------------------------------------------
    def draw(self, m: int, rng: np.random.Generator) -> np.ndarray:
        """``m`` markets: a structured array (m, n_sellers), one record per seller."""
        if not isinstance(rng, np.random.Generator):
            raise TypeError("rng must be a numpy.random.Generator")
        if isinstance(m, bool) or not isinstance(m, int | np.integer) or m < 1:
            raise MarketSimError(f"the number of markets must be a positive integer, got {m!r}")
        from scipy import stats

        pop, m = self.population, int(m)
        out = np.empty((m, self.n_sellers), dtype=self.dtype)
        if pop.has_data:  # the population's own cost draw (dependent on its data)
            out["cost"] = np.stack([pop.sample(rng).costs for _ in range(m)])
            u = np.clip(pop.seller_laws.cdf(out["cost"].T).T, 1e-12, 1 - 1e-12)
        else:
            u = np.asarray(rng.uniform(1e-12, 1 - 1e-12, size=out.shape))
            out["cost"] = self._by_class(pop.laws, u)
        z = stats.norm.ppf(u)  # the cost's copula latent
        for field, rho in (("cap", self.rho_cap), ("size", self.rho_size)):
            laws = getattr(self, field)
            if laws is not None:
                xi = rng.standard_normal(z.shape)
                z_f = rho * z + np.sqrt(max(0.0, 1 - rho**2)) * xi
                out[field] = self._by_class(
                    laws, np.clip(np.asarray(stats.norm.cdf(z_f)), 0.0, 1 - 1e-12)
                )
        return out

    def _by_class(self, laws, u: np.ndarray) -> np.ndarray:
        """F_g^-1(u) column by column, g each seller's class."""
        values = np.empty(u.shape)
        for g, law in enumerate(laws):
            mine = self.population.group == g
            values[:, mine] = law.ppf(u[:, mine])
        return values

    # ---- text ----------------------------------------------------------------------------
    @property
    def spec(self) -> str:
        text = self.population.spec
        for field in ("cap", "size"):
            laws = getattr(self, field)
            if laws is not None:
                text += f";{field}=" + "|".join(law.spec for law in laws)
        default = tuple(f for f in ("cost", "cap") if f in self.fields)
        if self.private != default:
            text += ";private=" + ",".join(self.private)
        for key in ("rho_cap", "rho_size"):
            if getattr(self, key):
                text += f";{key}={getattr(self, key)}"
        return text

    def __str__(self) -> str:
        return self.spec

    @classmethod
    def parse(cls, spec: str) -> MultiFieldPopulation:
        """From a population spec with the options ``cap=``, ``size=``, ``private=``,
        ``rho_cap=``, ``rho_size=`` (the other options go to ``Population.parse``)."""
        if not isinstance(spec, str) or not spec.strip():
            raise MarketSimError(
                "population spec must be a non-empty string such as 10*uniform:0:1"
            )
        head, *options = spec.strip().split(";")
        mine: dict = {}
        rest = [head]
        for opt in options:
            key, eq, value = opt.partition("=")
            if eq and key.strip() in _KEYS:
                mine[key.strip()] = value.strip()
            else:
                rest.append(opt)
        for key in ("rho_cap", "rho_size"):
            if key in mine:
                try:
                    mine[key] = float(mine[key])
                except ValueError:
                    raise MarketSimError(f"{key}={mine[key]!r} must be a number") from None
        try:
            population = Population.parse(";".join(rest))
        except MarketSimError as exc:  # name this layer's keys beside the population's
            text = str(exc)
            if text.startswith("population option") and "key one of" in text:
                text += ", " + ", ".join(_KEYS)
            raise MarketSimError(text) from None
        return cls(population, **mine)


def as_multifield(x, n_sellers: int | None = None) -> MultiFieldPopulation:
    """A MultiFieldPopulation from itself, a spec (with or without cap/size options), or
    anything ``as_population`` takes (a cost-only population)."""
    if isinstance(x, MultiFieldPopulation):
        return x
    if isinstance(x, str) and "*" in x:
        return MultiFieldPopulation.parse(x)
    return MultiFieldPopulation(as_population(x, n_sellers))
