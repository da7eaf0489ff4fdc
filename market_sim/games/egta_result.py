"""What ``egta`` returns: the estimated meta-game, its equilibria with their regret
intervals, the per-seed tables, the files (payoffs.csv, equilibria.json, summary.json) and
the figure (egta.png).
"""

from __future__ import annotations

import itertools
import json
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from ..errors import MarketSimError
from ..files import atomic_write, save_png
from .regret_bounds import RegretTest, regret_test
from .symmetric_game import SymmetricGame, dpr_exact

if TYPE_CHECKING:
    import pandas as pd


# ---- results --------------------------------------------------------------------------------
@dataclass(frozen=True)
class Equilibrium:
    """A symmetric mixed equilibrium of the meta-game: population shares, the regret
    of that mixture in the estimated table (0 up to the solver's tolerance) and a
    one-sided 95% interval [0, q] of its true regret (:func:`regret_upper_bounds`: a band
    uniform over the simplex, so valid although the mixture was chosen from the data)."""

    mixture: dict[str, float]
    regret: float
    regret_ci: tuple[float, float]

    def as_dict(self) -> dict:
        return {
            "mixture": dict(self.mixture),
            "regret": float(self.regret),
            "regret_ci": [float(self.regret_ci[0]), float(self.regret_ci[1])],
        }


@dataclass(frozen=True, eq=False)
class EgtaResult:
    """The estimated meta-game and its equilibria.

    ``game``: the reduced game with mean payoffs; ``full_profiles`` (F x S): the
    simulated N-seller profiles (counts, the deviator included); ``deviator`` (F,): the
    deviator's strategy in each; ``sample_payoffs`` (F x samples): per seed, the
    deviator's mean utility per round; ``weights`` (P x S x F): the DPR's weights of the
    markets behind each reduced payoff; ``seats`` (samples x N): seed k's seating, role
    r (0: the deviator, then the others in strategy order) at seat seats[k, r]."""

    mechanism: str
    dist: str
    n_sellers: int
    players: int
    samples: int
    rounds: int
    last_rounds: int
    strategies: tuple[str, ...]
    game: SymmetricGame
    full_profiles: np.ndarray
    deviator: np.ndarray
    sample_payoffs: np.ndarray
    weights: np.ndarray
    seats: np.ndarray
    equilibria: tuple[Equilibrium, ...]
    n_boot: int
    boot_seed: int
    seconds: float
    seed: int | None = None
    context: dict = field(default_factory=dict)
    population: str = ""
    class_laws: tuple[str, ...] = ()
    deviator_class: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))

    @property
    def reduction(self) -> str:
        """How the DPR's full profiles are made: ``exact`` ((N - 1)/(n - 1) an integer)
        or ``interpolated`` (between the integer splits around it; exact on games
        linear in the counts)."""
        return "exact" if dpr_exact(self.n_sellers, self.players) else "interpolated"

    def _reduced(self, per_profile: np.ndarray) -> np.ndarray:
        return _reduce(self.weights, self.game.profiles, per_profile)

    def class_payoffs(self) -> np.ndarray:
        """Payoff tables per class of sellers (C x P x S): the mean over the samples whose
        deviator sat in a seat of that class (class g's seats are its share of the N)."""
        per_seed = self._reduced(self.sample_payoffs.T)  # (K, P, S)
        return np.array(
            [per_seed[self.deviator_class == g].mean(axis=0) for g in range(len(self.class_laws))]
        )

    # -- bootstrap --------------------------------------------------------------------
    def _boot_games(self, n_boot: int, seed: int) -> np.ndarray:
        """Reduced payoff tables (n_boot x P x S) from seeds resampled with replacement."""
        K = self.samples
        rng = np.random.default_rng(seed)
        w = rng.multinomial(K, np.full(K, 1.0 / K), size=n_boot) / K  # (B, K)
        means = w @ self.sample_payoffs.T  # (B, F)
        return self._reduced(means)

    def _as_vector(self, mixture) -> np.ndarray:
        if isinstance(mixture, Mapping):
            unknown = set(mixture) - set(self.strategies)
            if unknown:
                raise MarketSimError(f"mixture: unknown strategies {sorted(unknown)}")
            return np.array([float(mixture.get(s, 0.0)) for s in self.strategies])
        return np.asarray(mixture, dtype=float)

    def regret(self, mixture) -> float:
        """Regret of a mixture ({spec: share} or shares in ``strategies`` order)."""
        return float(self.game.regret(self._as_vector(mixture)))

    def seed_tables(self) -> np.ndarray:
        """The reduced payoff table of each seed alone (samples x P x S); ``game`` has
        their mean."""
        return self._reduced(self.sample_payoffs.T)

    def regret_test(self, mixture, *, level: float = 0.95, n_boot: int | None = None) -> RegretTest:
        """Test of "this mixture, fixed in advance, is an equilibrium" (its true regret is
        0): the p-value and one-sided ``level`` bounds on the regret (:func:`regret_test`)."""
        x = self.game._mix(self._as_vector(mixture))
        return regret_test(
            self.game, self.seed_tables(), x, level=level, n_boot=n_boot or self.n_boot,
            seed=self.boot_seed,
        )  # fmt: skip

    def regret_ci(
        self, mixture, *, level: float = 0.95, n_boot: int | None = None
    ) -> tuple[float, float]:
        """Two-sided ``level`` interval of the true regret of a mixture fixed in advance:
        the one-sided (1 + level)/2 bounds of :meth:`regret_test`, so its lower end is
        above 0 exactly when the test rejects "an equilibrium" at (1 - level)/2.  An
        estimated equilibrium's interval is its ``Equilibrium.regret_ci``."""
        t = self.regret_test(mixture, level=(1 + level) / 2, n_boot=n_boot)
        return t.lower, t.upper

    # -- output ----------------------------------------------------------------------------
    def table(self) -> pd.DataFrame:
        """One row per reduced profile and played strategy (payoffs.csv)."""
        import pandas as pd

        per_seed = self._reduced(self.sample_payoffs.T)  # (K, P, S)
        sellers = np.einsum("psf,fs->ps", self.weights, self.full_profiles)
        by_class = self.class_payoffs() if len(self.class_laws) > 1 else None
        rows = []
        for i, p in enumerate(self.game.profiles):
            for s in np.flatnonzero(p):
                y = per_seed[:, i, s]
                row: dict = {"profile": i}
                row.update(
                    {f"players[{t}]": int(c) for t, c in zip(self.strategies, p, strict=True)}
                )
                row.update(
                    {
                        "strategy": self.strategies[s],
                        "share": p[s] / self.players,
                        "sellers": round(float(sellers[i, s]), 6),
                        "payoff": float(y.mean()),
                        "sd": float(y.std(ddof=1)) if y.size > 1 else math.nan,
                        "samples": int(y.size),
                    }
                )
                if by_class is not None:
                    for g, law in enumerate(self.class_laws):
                        row[f"payoff[class {g}: {law}]"] = float(by_class[g, i, s])
                rows.append(row)
        return pd.DataFrame(rows)

    def summary(self) -> dict:
        return {
            "mechanism": self.mechanism,
            "dist": self.dist,
            "population": self.population,
            "n_sellers": self.n_sellers,
            "players": self.players,
            "reduction": self.reduction,
            "others_per_reduced_player": f"{self.n_sellers - 1}/{self.players - 1}",
            "payoff": "the deviator's mean utility per round; seats drawn per seed",
            "equilibrium_regret_ci": "one-sided 95% [0, q]: a band uniform over the simplex "
            "(valid for a mixture chosen from the data)",
            "regret_ci": "two-sided 95% for a mixture fixed in advance; lower end > 0: "
            "not an equilibrium (test at 2.5%)",
            "strategies": list(self.strategies),
            "samples": self.samples,
            "rounds": self.rounds,
            "last_rounds": self.last_rounds,
            "seed": self.seed,
            "full_profiles": int(self.full_profiles.shape[0]),
            "simulations": int(self.full_profiles.shape[0] * self.samples),
            "seconds": round(self.seconds, 2),
            "n_boot": self.n_boot,
            "context": dict(self.context),
        }

    def write(self, folder) -> Path:
        """DIR/payoffs.csv, DIR/equilibria.json, DIR/summary.json and DIR/egta.png."""
        out = Path(folder)
        if out.exists() and not out.is_dir():
            raise MarketSimError(f"{folder}: exists and is not a folder")
        out.mkdir(parents=True, exist_ok=True)
        csv = self.table().to_csv(index=False).encode()
        atomic_write(out / "payoffs.csv", lambda fh: fh.write(csv))
        eq = json.dumps([e.as_dict() for e in self.equilibria], indent=2) + "\n"
        atomic_write(out / "equilibria.json", lambda fh: fh.write(eq.encode()))
        summ = json.dumps(self.summary(), indent=2) + "\n"
        atomic_write(out / "summary.json", lambda fh: fh.write(summ.encode()))
        plot(self, out / "egta.png")
        return out

    def format(self) -> str:
        ratio = f"(N-1)/(n-1) = {self.n_sellers - 1}/{self.players - 1}"
        lines = [
            f"mechanism     {self.mechanism}",
            f"sellers       {self.population or self.dist} (the mechanism's law: {self.dist})",
            f"market        {self.n_sellers} sellers, {self.rounds} round(s); payoff: mean "
            f"utility per round over the last {self.last_rounds} (seats drawn per seed)",
            f"meta-game     {len(self.strategies)} strategies, DPR to {self.players} players "
            f"({self.reduction}: {ratio}): {self.full_profiles.shape[0]} profiles x "
            f"{self.samples} samples ({self.seconds:.1f} s)",
            "pure profiles (regret, 95% CI):",
        ]
        w = max(len(s) for s in self.strategies)
        for name, vertex in zip(self.strategies, np.eye(len(self.strategies)), strict=True):
            lo, hi = self.regret_ci(vertex)
            lines.append(f"  all {name:<{w}}  {self.regret(vertex):.4g}  [{lo:.4g}, {hi:.4g}]")
        lines.append("equilibria (population shares; regret, one-sided 95% CI):")
        for e in self.equilibria:
            mix = ", ".join(f"{k} {v:.3f}" for k, v in e.mixture.items() if v > 0)
            lines.append(
                f"  {mix}  regret {e.regret:.3g} [{e.regret_ci[0]:.3g}, {e.regret_ci[1]:.3g}]"
            )
        return "\n".join(lines)


def _reduce(weights: np.ndarray, profiles: np.ndarray, per_profile: np.ndarray) -> np.ndarray:
    """Reduced tables (... x P x S) from the deviators' payoffs (... x F): the DPR's
    weighted means (NaN where the strategy is not played)."""
    out = np.einsum("psf,...f->...ps", weights, per_profile)
    return np.where(profiles > 0, out, np.nan)


# ---- the figure ------------------------------------------------------------------------------
def plot(result: EgtaResult, path) -> None:
    """Two strategies: u_s(x) against the share of the second; three: the regret over
    the simplex; more: the equilibria's shares as bars.  Equilibria marked."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    S = len(result.strategies)
    title = (
        f"EGTA: {result.mechanism}, {result.dist}, N={result.n_sellers} "
        f"(DPR {result.players} players, {result.samples} samples)"
    )
    if S == 2:
        fig = _plot_two(result, plt)
    elif S == 3:
        fig = _plot_three(result, plt)
    else:
        fig = _plot_many(result, plt)
    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    save_png(fig, path, dpi=100)


def _plot_two(result: EgtaResult, plt):
    """u_s(x) against the share of the second strategy, and the gain of switching to it
    with its pointwise bootstrap band; the equilibria marked."""
    game, names = result.game, result.strategies
    S = len(names)
    fig, (ax, low) = plt.subplots(
        2, 1, figsize=(7.5, 6.4), sharex=True, gridspec_kw={"height_ratios": [3, 2]}
    )
    share = np.linspace(0, 1, 201)
    X = np.column_stack([1 - share, share])
    U = game.deviation_payoffs(X)
    for s in range(S):
        ax.plot(share, U[:, s], lw=2, label=f"payoff of {names[s]}")
    # the gain of switching, a paired difference: its bootstrap band is narrow
    boot = np.array(
        [
            np.diff(SymmetricGame(names, game.players, game.profiles, t).deviation_payoffs(X))
            for t in result._boot_games(min(result.n_boot, 200), result.boot_seed)
        ]
    )[..., 0]
    lo, hi = np.quantile(boot, [0.025, 0.975], axis=0)
    low.plot(share, U[:, 1] - U[:, 0], color="C2", lw=2)
    low.fill_between(share, lo, hi, color="C2", alpha=0.25, lw=0, label="95% bootstrap")
    low.axhline(0, color="k", lw=0.8)
    for e in result.equilibria:
        x1 = e.mixture[names[1]]
        for a in (ax, low):
            a.axvline(x1, color="k", ls="--", lw=1)
        ax.annotate(
            f"equilibrium, regret {e.regret:.2g}",
            (x1, ax.get_ylim()[1]),
            textcoords="offset points",
            xytext=(3 if x1 < 0.5 else -3, -12),
            ha="left" if x1 < 0.5 else "right",
            fontsize=8,
        )
    ax.set(ylabel="expected payoff\n(mean utility per round)")
    ax.legend(loc="best", fontsize=9)
    low.set(
        xlabel=f"population share of {names[1]} (the rest: {names[0]})",
        ylabel=f"gain of {names[1]}\nover {names[0]}",
    )
    low.legend(loc="best", fontsize=8)
    return fig


def _plot_three(result: EgtaResult, plt):
    """The regret over the simplex, the equilibria starred."""
    game, names = result.game, result.strategies
    fig, ax = plt.subplots(figsize=(7, 6))
    k = 60
    pts = np.array([(i, j, k - i - j) for i in range(k + 1) for j in range(k + 1 - i)]) / k
    corners = np.array([[0.0, 0.0], [1.0, 0.0], [0.5, np.sqrt(3) / 2]])
    xy = pts @ corners
    reg = np.asarray(game.regret(pts))
    tc = ax.tricontourf(xy[:, 0], xy[:, 1], reg, levels=20, cmap="viridis_r")
    fig.colorbar(tc, ax=ax, label="regret of the mixture")
    ax.plot(*np.vstack([corners, corners[:1]]).T, color="k", lw=1)
    for c, label, (dx, dy) in zip(corners, names, [(0, -16), (0, -16), (0, 8)], strict=True):
        ax.annotate(label, c, textcoords="offset points", xytext=(dx, dy), ha="center")
    for e in result.equilibria:
        p = np.array([e.mixture[s] for s in names]) @ corners
        ax.plot(*p, "r*", ms=14, mec="w")
        ax.annotate(
            f"regret {e.regret:.2g}", p, textcoords="offset points", xytext=(6, 6), fontsize=8
        )
    ax.set_aspect("equal")
    ax.set(xlim=(-0.12, 1.12), ylim=(-0.1, 0.97))
    ax.axis("off")
    return fig


def _plot_many(result: EgtaResult, plt):
    """The gain of one seller's switch from every pure profile (a heatmap) and the
    equilibria's shares as bars."""
    game, names = result.game, result.strategies
    S = len(names)
    # the gain of one seller switching from s (everybody's strategy) to t
    gain = np.array(
        [game.deviation_payoffs(v) - game.deviation_payoffs(v)[i] for i, v in enumerate(np.eye(S))]
    )
    fig, (ax, bars) = plt.subplots(
        1, 2, figsize=(11, 0.9 * S + 2.2), gridspec_kw={"width_ratios": [3, 2]}
    )
    top = float(np.max(np.abs(gain))) or 1.0
    im = ax.imshow(gain, cmap="RdBu_r", vmin=-top, vmax=top)
    for i, j in itertools.product(range(S), range(S)):
        dark = abs(gain[i, j]) > 0.6 * top
        ax.text(
            j,
            i,
            f"{gain[i, j]:.2g}",
            ha="center",
            va="center",
            fontsize=8,
            color="w" if dark else "k",
        )
    ax.set_xticks(range(S), names, rotation=20, ha="right", fontsize=8)
    ax.set_yticks(range(S), [f"all {n}" for n in names], fontsize=8)
    ax.set(xlabel="one seller switches to", title="gain of one seller's switch")
    fig.colorbar(im, ax=ax, shrink=0.8)
    left = np.zeros(len(result.equilibria))
    for name in names:
        w = np.array([e.mixture[name] for e in result.equilibria])
        bars.barh(range(len(w)), w, left=left, label=name)
        left += w
    bars.set_yticks(
        range(len(result.equilibria)),
        [f"regret {e.regret:.2g}" for e in result.equilibria],
        fontsize=8,
    )
    bars.invert_yaxis()
    bars.set(xlabel="population share", xlim=(0, 1), title="equilibria")
    bars.legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.25), ncol=2)
    return fig
