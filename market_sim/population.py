"""Who sells in one market: classes of sellers with their cost laws, their data, and the
dependence between data and costs.

A :class:`Population` is the one description of a market's sellers that every tool
uses (the audit, the leaderboard, the empirical game, the agent model, the equilibrium
solver)::

    Population([("uniform:0:1", 70), ("uniform:1:2", 30)])      # two classes, no data
    Population([("uniform:0:1", 60)], data="synthetic", rho=-0.8, on="label_noise")

``pop.sample(rng)`` draws one :class:`Market`: every seller's cost (seller ``i`` from
the law of its class ``group[i]``; class 0's sellers first), and, with data, each
seller's row ``(x_i, y_i)`` and held-out test rows.

**Data sources.** ``"synthetic"``: rows x = G / (2 sqrt d) of a latent standard normal
G (clipped to ||x|| <= 1), labels by the linear rule y = 1[x . w > 0] with w = 1/sqrt(d),
flipped for the sellers whose latent noise g ~ N(0, 1) exceeds Phi^-1(1 - label_noise)
(``Market.mislabelled``); test rows are fresh draws.  ``"wisconsin"``: scikit-learn's
breast-cancer table (569 rows, 30 features), standardised and scaled so ||x|| <= 1 on
the whole table, sellers' rows drawn without replacement and the rows not sold held out
for testing.  A CSV path: numeric feature columns and a binary label column (``label=``,
default the column named ``label``; a CSV without one needs ``label=``), prepared as
Wisconsin.  ``on=name:COL`` names a column even when its name is a number (``on=1`` is
feature index 1).  An option the data source does not take (``d``, ``label_noise`` and
``n_test`` are synthetic's, ``label`` a CSV's) is refused, and so is ``rho`` on a
constant column.

**Dependence** (a Gaussian copula with correlation ``rho`` between each seller's cost and
its ``on``).  The target T_i is turned into an exactly uniform U_i by its probability
integral transform against its law in the source, randomised on ties (for a label: U =
P(y < y_i) + V P(y = y_i), V ~ U[0, 1]); then Z = rho Phi^-1(U) + sqrt(1 - rho^2) xi and
c_i = F_g^-1(Phi(Z)), so every cost keeps its class law F_g exactly whatever rho.  For
synthetic data the latents are Gaussian already: ``on="label_noise"`` uses g, feature
``j`` uses G[:, j].  With rho < 0 and ``on="label_noise"`` the mislabelled sellers are
the cheap ones.

Spec strings (``Population.parse``; ``--population`` on the command line)::

    COUNT*LAW[+COUNT*LAW...][;key=value...]
    70*uniform:0:1+30*uniform:1:2
    60*uniform:0:1;data=synthetic;rho=-0.8;on=label_noise;d=5;label_noise=0.15

keys: ``data``, ``rho``, ``on``, ``d``, ``label_noise``, ``n_test``, ``label``.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path

import numpy as np

from .distributions import CostDistribution, SellerLaws, as_distribution, mixture
from .errors import MarketSimError

__all__ = ["Population", "SellerClass", "Market", "as_population", "DATA_SOURCES"]

DATA_SOURCES = ("synthetic", "wisconsin")  # or a CSV path
_KEYS = ("data", "rho", "on", "d", "label_noise", "n_test", "label")


@dataclass(frozen=True)
class SellerClass:
    """``count`` sellers whose costs follow ``law``."""

    law: CostDistribution
    count: int


@dataclass(frozen=True)
class Market:
    """One drawn market: costs and class of every seller; data rows (X, y) and held-out
    test rows when the population has data; for synthetic data, who is mislabelled."""

    costs: np.ndarray
    group: np.ndarray
    data: tuple[np.ndarray, np.ndarray] | None = None
    test: tuple[np.ndarray, np.ndarray] | None = field(default=None, repr=False)
    mislabelled: np.ndarray | None = field(default=None, repr=False)
    band: tuple[np.ndarray, np.ndarray] | None = field(default=None, repr=False)
    """What each seller's data reveals of its copula uniform: U_i ~ U[a_i, b_i] given the
    data (a point for a continuous feature); None without dependence."""

    @property
    def n_sellers(self) -> int:
        return int(self.costs.size)


# ---- data sources -----------------------------------------------------------------------
@dataclass(frozen=True)
class _Rows:
    """Sellers' rows, test rows, and the exactly-uniform transform of every possible target."""

    X: np.ndarray
    y: np.ndarray
    test: tuple[np.ndarray, np.ndarray]
    mislabelled: np.ndarray | None
    uniform_of: dict  # target name -> U_i in (0, 1) for the sellers
    band_of: dict  # target name -> (a_i, b_i): what the data reveals of U_i (U_i ~ U[a_i, b_i])


def _tie_band(values: np.ndarray, reference: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """[P(R < v), P(R <= v)] for R uniform over ``reference``."""
    ref = np.sort(reference)
    below = np.searchsorted(ref, values, side="left") / ref.size
    return below, np.searchsorted(ref, values, side="right") / ref.size


def _randomised_pit(band: tuple[np.ndarray, np.ndarray], rng) -> np.ndarray:
    """U = a + V (b - a), V ~ U[0, 1], on the tie band [a, b] of each value: exactly
    U[0, 1] when the value is drawn uniformly from the reference (the probability
    integral transform, randomised on ties)."""
    a, b = band
    return a + rng.uniform(size=a.size) * (b - a)


def _synthetic(n: int, rng, d: int, label_noise: float, n_test: int) -> _Rows:
    from scipy import stats

    w_true = np.ones(d) / np.sqrt(d)

    def rows(k):
        G = rng.standard_normal((k, d))
        X = G / (2 * np.sqrt(d))
        X /= np.maximum(1.0, np.linalg.norm(X, axis=1))[:, None]
        g = rng.standard_normal(k)
        flipped = g > stats.norm.ppf(1 - label_noise)
        y = np.where(flipped, X @ w_true <= 0, X @ w_true > 0).astype(int)
        return X, y, flipped, G, g

    X, y, flipped, G, g = rows(n)
    Xt, yt, *_ = rows(n_test)
    cdf = stats.norm.cdf
    label_band = (0.5 * y, 0.5 * y + 0.5)  # P(y = 1) = 1/2 by symmetry
    cut = 1 - label_noise
    band_of: dict = {
        "label": label_band,
        # the flip is what a platform that knows the labelling rule sees of g
        "label_noise": (np.where(flipped, cut, 0.0), np.where(flipped, 1.0, cut)),
    }
    # a feature's latent: x_j reveals G_j (x is G / (2 sqrt d) unless ||x|| > 1 is clipped)
    band_of.update({j: (cdf(G[:, j]), cdf(G[:, j])) for j in range(d)})
    uniform_of: dict = {"label_noise": cdf(g), "label": _randomised_pit(label_band, rng)}
    uniform_of.update({j: band_of[j][0] for j in range(d)})
    return _Rows(X, y, (Xt, yt), flipped, uniform_of, band_of)


@functools.cache
def _table(source: str, label: str | None) -> tuple[np.ndarray, np.ndarray, tuple[str, ...]]:
    """(X standardised and scaled to ||x|| <= 1, y in {0, 1}, feature names)."""
    if source == "wisconsin":
        from sklearn.datasets import load_breast_cancer

        bunch = load_breast_cancer()
        X, y, names = bunch.data, bunch.target, tuple(bunch.feature_names)
    else:
        X, y, names = _read_csv(source, label)
    sd = X.std(axis=0)
    Z = (X - X.mean(axis=0)) / np.where(sd > 0, sd, 1.0)
    Z /= max(1.0, float(np.linalg.norm(Z, axis=1).max()))
    Z.setflags(write=False)
    return Z, np.asarray(y, dtype=int), names


def _read_csv(path: str, label: str | None):
    import pandas as pd

    if not Path(path).is_file():
        raise MarketSimError(
            f"data {path!r}: no such file (use synthetic, wisconsin or a CSV path)"
        )
    try:
        df = pd.read_csv(path)
    except Exception as exc:  # pandas raises many types for bad CSV
        raise MarketSimError(f"data {path}: cannot read CSV ({type(exc).__name__})") from None
    if label is None and "label" not in df.columns:
        raise MarketSimError(
            f"data {path}: no column named label; name the label column with label=COLUMN "
            f"(columns: {', '.join(map(str, df.columns))})"
        )
    col = "label" if label is None else label
    if col not in df.columns:
        raise MarketSimError(f"data {path}: no label column {col!r} (columns: {list(df.columns)})")
    missing = int(df[col].isna().sum())
    if missing:
        raise MarketSimError(
            f"data {path}: label {col!r} is missing in {missing} row(s) "
            f"(first at row {int(np.argmax(df[col].isna().to_numpy())) + 1})"
        )
    feats = df.drop(columns=[col])
    if feats.shape[1] == 0 or len(df) < 2:
        raise MarketSimError(f"data {path}: needs at least one feature column and two rows")
    X = feats.apply(pd.to_numeric, errors="coerce").to_numpy(float)
    if not np.isfinite(X).all():
        raise MarketSimError(f"data {path}: feature columns must be numbers (no gaps)")
    levels = np.unique(df[col].to_numpy())
    if levels.size != 2:
        raise MarketSimError(
            f"data {path}: label {col!r} must take two values, found {levels.size}"
        )
    y = (df[col].to_numpy() == levels[1]).astype(int)
    return X, y, tuple(str(c) for c in feats.columns)


def _from_table(n: int, rng, source: str, label: str | None) -> _Rows:
    X, y, names = _table(source, label)
    if n >= y.size:
        raise MarketSimError(
            f"data {source}: {n} sellers need fewer than its {y.size} rows "
            "(the rows not sold are the test set)"
        )
    idx = rng.permutation(y.size)
    sold, held = idx[:n], idx[n:]
    band_of: dict = {"label": _tie_band(y[sold], y)}
    for j, name in enumerate(names):
        band_of[j] = band_of[name] = _tie_band(X[sold, j], X[:, j])
    uniform_of: dict = {"label": _randomised_pit(band_of["label"], rng)}
    for j, name in enumerate(names):
        uniform_of[j] = uniform_of[name] = _randomised_pit(band_of[j], rng)
    return _Rows(X[sold], y[sold], (X[held], y[held]), None, uniform_of, band_of)


# ---- the population -----------------------------------------------------------------------
def _seller_class(entry) -> SellerClass:
    if isinstance(entry, SellerClass):
        return entry
    try:
        law, count = entry
    except (TypeError, ValueError):
        raise MarketSimError(f"a seller class is a (cost law, count) pair, got {entry!r}") from None
    if isinstance(count, bool) or not isinstance(count, int | np.integer) or count < 1:
        raise MarketSimError(f"a class's count must be a positive integer, got {count!r}")
    return SellerClass(as_distribution(law), int(count))


@dataclass(frozen=True, init=False)
class Population:
    """The sellers of one market (see the module docstring)."""

    classes: tuple[SellerClass, ...]
    data: str | None = None
    rho: float = 0.0
    on: str | int | None = None
    d: int = 5
    label_noise: float = 0.15
    n_test: int = 1000
    label: str | None = None

    def __init__(
        self,
        classes,
        data: str | None = None,
        rho: float = 0.0,
        on: str | int | None = None,
        *,
        d: int = 5,
        label_noise: float = 0.15,
        n_test: int = 1000,
        label: str | None = None,
    ):
        if isinstance(classes, str | CostDistribution) or not hasattr(classes, "__iter__"):
            raise MarketSimError(
                "classes must be a list of (cost law, count) pairs, e.g. [('uniform:0:1', 70)]"
            )
        cls = tuple(_seller_class(c) for c in classes)
        if not cls:
            raise MarketSimError("a population needs at least one class of sellers")
        setattr_ = object.__setattr__
        setattr_(self, "classes", cls)
        setattr_(self, "data", data)
        setattr_(self, "rho", rho)
        setattr_(self, "on", on)
        setattr_(self, "d", d)
        setattr_(self, "label_noise", label_noise)
        setattr_(self, "n_test", n_test)
        setattr_(self, "label", label)
        self._check()

    def _check(self) -> None:
        if not isinstance(self.rho, int | float) or not -1 <= self.rho <= 1:
            raise MarketSimError(f"rho must be a number in [-1, 1], got {self.rho!r}")
        _refuse_unused({k: getattr(self, k) for k in ("data", *_KEYS[3:])}, given=False)
        if self.data is None:
            if self.on is not None or self.rho != 0:
                raise MarketSimError("rho and on need data= (synthetic, wisconsin or a CSV path)")
            return
        if not isinstance(self.data, str) or not self.data:
            raise MarketSimError("data must be synthetic, wisconsin or a CSV path")
        if self.data not in DATA_SOURCES and not Path(self.data).is_file():
            raise MarketSimError(
                f"unknown data source {self.data!r}: use synthetic, wisconsin or a CSV path"
            )
        if self.rho != 0 and self.on is None:
            raise MarketSimError("rho != 0 needs on= (label, label_noise or a feature)")
        for key, lo in (("d", 1), ("n_test", 1)):
            v = getattr(self, key)
            if isinstance(v, bool) or not isinstance(v, int | np.integer) or v < lo:
                raise MarketSimError(f"{key} must be a positive integer, got {v!r}")
        if not 0 <= self.label_noise < 1:
            raise MarketSimError(f"label_noise must be in [0, 1), got {self.label_noise!r}")
        self._check_rows()
        if self.on is not None:
            self._check_target()

    def _check_target(self) -> None:
        on = self.on
        if self.data == "synthetic":
            ok = on in ("label", "label_noise") or (
                isinstance(on, int | np.integer) and 0 <= on < self.d
            )
            choices = f"label, label_noise or a feature index 0..{self.d - 1}"
        else:
            _, _, names = _table(self.data or "", self.label)
            ok = (
                on == "label"
                or on in names
                or (isinstance(on, int | np.integer) and 0 <= on < len(names))
            )
            choices = f"label, a feature index 0..{len(names) - 1} or a column name"
        if not ok:
            raise MarketSimError(f"on={on!r} is not a target of data {self.data}: use {choices}")
        if self.data != "synthetic" and on != "label" and self.rho != 0:
            X, _, names = _table(self.data or "", self.label)
            j = names.index(on) if isinstance(on, str) else int(on or 0)  # (on is set here)
            if np.ptp(X[:, j]) == 0:
                raise MarketSimError(
                    f"on={on!r}: column {names[j]!r} of data {self.data} is constant, so "
                    "costs cannot depend on it (rho would be ignored)"
                )

    def _check_rows(self) -> None:
        """A table must keep rows back for testing."""
        if self.data != "synthetic":
            rows = _table(self.data or "", self.label)[1].size
            if self.n_sellers >= rows:
                raise MarketSimError(
                    f"data {self.data}: {self.n_sellers} sellers need fewer than its {rows} rows "
                    "(the rows not sold are the test set)"
                )

    # ---- who sells -------------------------------------------------------------------------
    @property
    def n_sellers(self) -> int:
        return sum(c.count for c in self.classes)

    @property
    def n_classes(self) -> int:
        return len(self.classes)

    @property
    def laws(self) -> tuple[CostDistribution, ...]:
        return tuple(c.law for c in self.classes)

    @property
    def counts(self) -> tuple[int, ...]:
        return tuple(c.count for c in self.classes)

    @cached_property
    def group(self) -> np.ndarray:
        """The class of each seller: class 0's sellers first, then class 1's, ..."""
        g = np.repeat(np.arange(self.n_classes), self.counts)
        g.setflags(write=False)
        return g

    @cached_property
    def seller_laws(self) -> SellerLaws:
        """Each seller's own law (for mechanisms defined per seller)."""
        return SellerLaws(self.laws, self.group)

    @cached_property
    def pooled(self) -> CostDistribution:
        """The law of a seller picked at random: the count-weighted mixture of the classes
        (ironed where needed); for mechanisms that take one cost law."""
        return mixture(self.laws, self.counts)

    @property
    def has_data(self) -> bool:
        return self.data is not None

    @property
    def is_plain(self) -> bool:
        """One class and no data: the same as a cost law and a number of sellers."""
        return self.n_classes == 1 and not self.has_data

    # ---- drawing a market --------------------------------------------------------------
    def sample(self, rng: np.random.Generator) -> Market:
        """One market drawn with the caller's Generator."""
        if not isinstance(rng, np.random.Generator):
            raise TypeError("rng must be a numpy.random.Generator")
        if not self.has_data:
            return Market(self.seller_laws.sample(rng), self.group)
        rows = self._rows(rng)
        costs = self._dependent_costs(rows, rng)
        band = None if self.on is None or self.rho == 0 else rows.band_of[self.on]
        return Market(costs, self.group, (rows.X, rows.y), rows.test, rows.mislabelled, band)

    def _rows(self, rng) -> _Rows:
        n = self.n_sellers
        if self.data == "synthetic":
            return _synthetic(n, rng, self.d, self.label_noise, self.n_test)
        return _from_table(n, rng, self.data or "", self.label)

    def _dependent_costs(self, rows: _Rows, rng) -> np.ndarray:
        """c_i = F_g^-1(Phi(rho Phi^-1(U_i) + sqrt(1 - rho^2) xi_i)) (the Gaussian copula)."""
        from scipy import stats

        xi = rng.standard_normal(self.n_sellers)
        if self.on is None or self.rho == 0:
            z = xi
        else:
            u = np.clip(rows.uniform_of[self.on], 1e-300, 1 - 1e-16)
            z = self.rho * stats.norm.ppf(u) + np.sqrt(max(0.0, 1 - self.rho**2)) * xi
        return self.seller_laws.ppf(stats.norm.cdf(z))

    # ---- the platform that knows the dependence ------------------------------------------------
    def conditional_virtual_cost(self, market: Market, costs=None) -> np.ndarray:
        """psi_i(c) = c + G_i(c) / g_i(c) under seller i's cost law given its data (default:
        at its drawn cost): the virtual cost of an oracle platform that knows the copula.

        Given the data U_i ~ U[a_i, b_i] (``market.band``), so W = Phi^-1(U_i) is a
        standard normal truncated to [t_a, t_b] = Phi^-1([a_i, b_i]).  With z(c) =
        Phi^-1(F_g(c)), s = sqrt(1 - rho^2) and Z = rho W + s xi (xi ~ N(0, 1)), the cost
        is F_g^-1(Phi(Z)), so, in closed form (no quadrature meets Phi^-1's end
        singularities):

            G_i(c) = P(Z <= z, t_a <= W <= t_b) / (b - a)
                   = [Phi2(t_b, z; rho) - Phi2(t_a, z; rho)] / (b - a),
            g_i(c) = f_g(c) [Phi((t_b - rho z) / s) - Phi((t_a - rho z) / s)] / (b - a),

        the second because phi(w) phi((z - rho w) / s) = phi(z) phi((w - rho z) / s);
        Phi2 is the bivariate normal law (``_bivariate_normal_cdf``, by Owen's T).
        Without dependence it is psi_g(c).
        """
        c = market.costs if costs is None else np.asarray(costs, dtype=float)
        laws = SellerLaws(self.laws, market.group)
        if market.band is None or self.rho == 0:
            return laws.virtual_cost(c)
        if abs(self.rho) >= 1:
            raise MarketSimError(
                "at |rho| = 1 a cost given its data has no density (it is a function of "
                "the data, or a truncation of its law): no conditional virtual cost"
            )
        return _conditional_psi(c, laws.cdf(c), laws.pdf(c), market.band, self.rho)

    # ---- text ----------------------------------------------------------------------------
    @property
    def spec(self) -> str:
        """The spec string that :meth:`parse` turns back into this population."""
        text = "+".join(f"{c.count}*{c.law.spec}" for c in self.classes)
        for key in _KEYS:
            value = getattr(self, key)
            if value != getattr(Population, key, None) and value is not None:
                if key == "on" and isinstance(value, str) and value.lstrip("-").isdigit():
                    value = f"name:{value}"  # a column whose name is a number
                text += f";{key}={value}"
        return text

    def __str__(self) -> str:
        return self.spec

    @classmethod
    def parse(cls, spec: str, *, iron: bool = False) -> Population:
        """A population from ``COUNT*LAW[+COUNT*LAW...][;key=value...]`` (module docstring);
        ``iron`` irons every class law that needs it."""
        from .distributions import parse_distribution

        if not isinstance(spec, str) or not spec.strip():
            raise MarketSimError(
                "population spec must be a non-empty string such as 70*uniform:0:1"
            )
        head, *options = spec.strip().split(";")
        classes = []
        for part in _class_parts(head):
            count, star, law = part.partition("*")
            if not star:
                raise MarketSimError(
                    f"population class {part!r} must read COUNT*LAW, e.g. 70*uniform:0:1"
                )
            try:
                n = int(count.strip())
            except ValueError:
                raise MarketSimError(
                    f"population class {part!r} must read COUNT*LAW, the count first "
                    "(e.g. 70*uniform:0:1)"
                ) from None
            classes.append((parse_distribution(law.strip(), iron=iron), n))
        return cls(classes, **_options(options))


def _class_parts(head: str) -> list[str]:
    """Split ``A+B+C`` on '+', keeping a law's ``+iron`` suffix with its law."""
    parts: list[str] = []
    for token in head.split("+"):
        if token.strip() == "iron" and parts:
            parts[-1] += "+iron"
        else:
            parts.append(token)
    return parts


def _options(options: list[str]) -> dict:
    kw: dict = {}
    for opt in options:
        if not opt.strip():
            continue
        key, eq, value = opt.partition("=")
        key, value = key.strip(), value.strip()
        if not eq or key not in _KEYS:
            raise MarketSimError(
                f"population option {opt!r}: use key=value with key one of {', '.join(_KEYS)}"
            )
        if key in ("rho", "label_noise"):
            try:
                kw[key] = float(value)
            except ValueError:
                raise MarketSimError(
                    f"population option {key}={value!r} must be a number"
                ) from None
        elif key in ("d", "n_test"):
            try:
                kw[key] = int(value)
            except ValueError:
                raise MarketSimError(
                    f"population option {key}={value!r} must be an integer"
                ) from None
        elif key == "on":
            # on=name:COL names a column, even one whose name is a number
            name, colon, col = value.partition(":")
            if colon and name.strip() == "name":
                kw[key] = col.strip()
            else:
                kw[key] = int(value) if value.lstrip("-").isdigit() else value
        else:
            kw[key] = value
    _refuse_unused(kw, given=True)
    return kw


#: The options each kind of data source takes (besides data, rho, on).
_TAKES = {"synthetic": ("d", "label_noise", "n_test"), "wisconsin": (), "csv": ("label",)}


def _refuse_unused(kw: dict, given: bool) -> None:
    """Refuse, in one line, an option the population's data source does not take (``given``:
    every key of ``kw`` was written by the user; else only values off their defaults)."""
    data = kw.get("data")
    kind = None if data is None else data if data in ("synthetic", "wisconsin") else "csv"
    takes = () if kind is None else _TAKES[kind]
    for key in ("d", "label_noise", "n_test", "label"):
        if key not in kw or key in takes:
            continue
        if not given and kw[key] == getattr(Population, key):
            continue
        where = "without data=" if kind is None else f"with data={data}"
        users = [k for k, v in _TAKES.items() if key in v]
        raise MarketSimError(
            f"population option {key}= has no effect {where} (only data="
            f"{' or '.join(u if u != 'csv' else 'a CSV path' for u in users)} takes it)"
        )


def _typed(key: str, value: str, kind, noun: str):
    try:
        return kind(value)
    except ValueError:
        raise MarketSimError(f"population option {key}={value!r} must be {noun}") from None


def as_population(x, n_sellers: int | None = None) -> Population:
    """A Population from a Population, a population spec (``70*uniform:0:1+...``), a list of
    ``(cost law, count)`` classes, or a cost law (spec or CostDistribution) with
    ``n_sellers`` (one class, no data).  ``n_sellers`` given with a population must agree
    with it."""
    if isinstance(x, str) and "*" in x:
        x = Population.parse(x)
    if isinstance(x, Population):
        pop = x
    elif isinstance(x, str | CostDistribution):
        if n_sellers is None:
            raise MarketSimError("a cost law needs a number of sellers (n_sellers)")
        pop = Population([(x, n_sellers)])
    elif isinstance(x, list | tuple):
        pop = Population(x)
    else:
        raise MarketSimError(
            f"expected a Population, a cost law or (law, count) classes, got {type(x).__name__}"
        )
    if n_sellers is not None and int(n_sellers) != pop.n_sellers:
        raise MarketSimError(
            f"n_sellers={n_sellers} conflicts with the population's {pop.n_sellers} sellers "
            "(omit n_sellers)"
        )
    return pop


def _conditional_psi(c, F, f, band, rho: float) -> np.ndarray:
    """c + G / g of :meth:`Population.conditional_virtual_cost` (its docstring)."""
    from scipy.special import ndtr, ndtri

    a, b = (np.asarray(v, dtype=float) for v in band)
    ta, tb = ndtri(a), ndtri(b)  # -inf / +inf at a = 0 / b = 1
    s = np.sqrt(1 - rho**2)
    z = ndtri(np.clip(F, 0.0, 1.0))
    with np.errstate(divide="ignore", invalid="ignore"):
        G = _bivariate_normal_cdf(tb, z, rho) - _bivariate_normal_cdf(ta, z, rho)
        g = f * (ndtr((tb - rho * z) / s) - ndtr((ta - rho * z) / s))
        ratio = G / g
        # a narrow band (a feature's value: a point, or a tie's width) would lose digits
        # in those differences: there G / g = E_W Phi((z - rho W) / s) / E_W g(c | W), the
        # expectations by Gauss-Legendre in t = Phi^-1(u) (smooth on a finite interval)
        narrow = np.flatnonzero(np.isfinite(ta) & np.isfinite(tb) & (tb - ta < 1.0))
        if narrow.size:
            x, w = np.polynomial.legendre.leggauss(16)
            lo, hi, zz = ta[narrow, None], tb[narrow, None], z[narrow, None]
            t = lo + (hi - lo) * (x[None, :] + 1) / 2
            wt = w[None, :] * np.exp(-0.5 * t * t)  # the weight phi(t), up to a constant
            num = (ndtr((zz - rho * t) / s) * wt).sum(axis=1)
            # phi((z - rho t) / s) / phi(z) = phi((t - rho z) / s) / phi(t)
            den = f[narrow] * (np.exp(-0.5 * ((t - rho * zz) / s) ** 2) * w).sum(axis=1) / s
            ratio[narrow] = num / den
        return np.where(F <= 0, c, c + ratio)


def _bivariate_normal_cdf(h, k, rho: float) -> np.ndarray:
    """P(X <= h, Y <= k) for standard normals of correlation |rho| < 1, to rounding, by
    Owen's T (Owen 1956, Eq. 2.1): Phi2 = (Phi(h) + Phi(k)) / 2 - T(h, a_h) - T(k, a_k)
    - beta, a_h = (k - rho h) / (h s), a_k = (h - rho k) / (k s), s = sqrt(1 - rho^2),
    beta = 1/2 when h k < 0 or (h k = 0 and h + k < 0), else 0; h or k infinite by the
    margins.  At h = 0, T(0, a) = arctan(a) / (2 pi) -> sign(a) / 4 as a -> +-inf, which
    a_h = +-inf gives (``scipy.special.owens_t`` takes infinite a)."""
    from scipy.special import ndtr, owens_t

    h, k = np.broadcast_arrays(np.asarray(h, dtype=float), np.asarray(k, dtype=float))
    s = np.sqrt(1 - rho**2)
    with np.errstate(divide="ignore", invalid="ignore"):
        both = np.sqrt((1 - rho) / (1 + rho))  # h = k = 0: the limit along h = k
        a_h = np.where((h == 0) & (k == 0), both, _ratio(k - rho * h, h * s))
        a_k = np.where((h == 0) & (k == 0), both, _ratio(h - rho * k, k * s))
        hk = h * k
        beta = np.where((hk < 0) | ((hk == 0) & (h + k < 0)), 0.5, 0.0)
        core = 0.5 * (ndtr(h) + ndtr(k)) - owens_t(h, a_h) - owens_t(k, a_k) - beta
    out = np.where(np.isfinite(h) & np.isfinite(k), core, 0.0)
    out = np.where(np.isposinf(h), ndtr(k), out)
    out = np.where(np.isposinf(k) & ~np.isinf(h), ndtr(h), out)
    out = np.where(np.isneginf(h) | np.isneginf(k), 0.0, out)
    return np.clip(out, 0.0, 1.0)


def _ratio(num, den):
    """num / den, x / 0 read as sign(x) inf (0 / 0 as 0: only where h = k = 0, set apart)."""
    return np.where(den == 0, np.where(num == 0, 0.0, np.sign(num) * np.inf), num / den)
