"""What ``bne`` returns: each class's bid function (``ClassBid``), the result with how it
was found and verified (``BNEResult``: its summary, files and printed block), its stopping
rules' meanings, and its figure (market_sim.games.equilibrium's module docstring)."""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ..errors import MarketSimError
from ..files import atomic_write, fit_titles, json_plain, save_png
from .equilibrium_game import (
    EpsilonResult,
)


@dataclass(frozen=True)
class ClassBid:
    """One class's bid function: ``bids`` at the grid ``costs`` (linear interpolation
    between them), its law, count and verification ``check``."""

    dist: str
    count: int
    support: tuple[float, float]
    costs: np.ndarray = field(repr=False)
    bids: np.ndarray = field(repr=False)
    check: EpsilonResult = field(repr=False)

    def bid(self, costs) -> np.ndarray:
        return _interp(costs, self.costs, self.bids, self.support)


@dataclass(frozen=True)
class BNEResult:
    """Bid functions, one per class (``classes``; class 0's also as ``costs``, ``bids``,
    ``check``), and how they were found and verified (docs/equilibrium.md)."""

    mechanism: str
    dist: str
    n_sellers: int
    costs: np.ndarray = field(repr=False)
    bids: np.ndarray = field(repr=False)
    epsilon: float
    epsilon_ci: tuple[float, float]
    epsilon_relative: float
    iterations: int
    converged: bool
    residual: float
    seconds: float
    check: EpsilonResult = field(repr=False)
    history: tuple[float, ...] = field(default=(), repr=False)
    options: dict = field(default_factory=dict, repr=False)
    support: tuple[float, float] = (0.0, 1.0)
    classes: tuple[ClassBid, ...] = field(default=(), repr=False)
    stopped_by: str = "max_iter"  # the stopping rule that fired (STOPPING_RULES)

    def bid(self, costs, group: int = 0) -> np.ndarray:
        """Class ``group``'s bid function at ``costs`` (any shape, in its support)."""
        if not 0 <= int(group) < len(self.classes):
            raise MarketSimError(f"group must be in 0..{len(self.classes) - 1} (got {group!r})")
        return self.classes[int(group)].bid(costs)

    __call__ = bid

    def bid_tables(self) -> tuple[tuple[np.ndarray, np.ndarray], ...]:
        """(grid costs, bids) per class: what the ``bne`` strategy plays when a
        ``BNEResult`` is given as a strategy (``market_sim.agents.as_strategy``)."""
        return tuple((c.costs, c.bids) for c in self.classes)

    @property
    def epsilon_by_group(self) -> tuple[float, ...]:
        return tuple(c.check.epsilon for c in self.classes)

    @property
    def loss(self) -> float:
        """ℓ̂ of the worst class (the largest)."""
        return max(c.check.loss for c in self.classes)

    @property
    def relative_loss(self) -> float:
        """L̂ of the worst class (the largest)."""
        return max(c.check.relative_loss for c in self.classes)

    def summary(self) -> dict:
        """The numbers of ``summary.json``."""
        per = [
            {"dist": c.dist, "count": c.count, **c.check.metrics(),
             "max_markup": float(np.max(c.bids - c.costs)),
             "argmax_cost": float(c.check.eval_costs[int(np.argmax(c.check.gains))])}
            for c in self.classes
        ]  # fmt: skip
        return {
            "mechanism": self.mechanism,
            "dist": self.dist,
            "n_sellers": self.n_sellers,
            "seed": self.options.get("seed"),  # the CLI records its --seed here
            "epsilon": self.epsilon,
            "epsilon_ci": list(self.epsilon_ci),
            "epsilon_relative": self.epsilon_relative,
            "epsilon_by_group": list(self.epsilon_by_group),
            "loss": self.loss,
            "relative_loss": self.relative_loss,
            "argmax_cost": per[0]["argmax_cost"],
            "iterations": self.iterations,
            "converged": self.converged,
            "stopped_by": self.stopped_by,
            "residual": self.residual,
            "seconds": self.seconds,
            "max_markup": per[0]["max_markup"],
            "mean_markup": float(np.mean(self.bids - self.costs)),
            "eval_markets": self.check.eval_markets,
            "classes": per,
            **self.options,
        }

    def write(self, folder) -> Path:
        """DIR/bid.csv (group, cost, bid), DIR/summary.json and DIR/bne.png, atomically."""
        out = Path(folder)
        if out.exists() and not out.is_dir():
            raise MarketSimError(f"{folder}: exists and is not a folder")
        out.mkdir(parents=True, exist_ok=True)
        rows = "group,cost,bid\n" + "".join(
            f"{g},{c!r},{b!r}\n"
            for g, cl in enumerate(self.classes)
            for c, b in zip(cl.costs.tolist(), cl.bids.tolist(), strict=True)
        )
        atomic_write(out / "bid.csv", lambda fh: fh.write(rows.encode()))
        doc = json.dumps({k: json_plain(v) for k, v in self.summary().items()}, indent=2) + "\n"
        atomic_write(out / "summary.json", lambda fh: fh.write(doc.encode()))
        plot(self, out / "bne.png")
        return out

    def _tol_abs(self) -> float:
        """The residual at which the ``residual`` rule stops: tol x the widest support."""
        width = max((c.support[1] - c.support[0] for c in self.classes), default=math.nan)
        return float(self.options.get("tol", math.nan)) * width

    def _stopped_text(self) -> str:
        """The rule that fired, what it means on this run's path, and whether the final
        verification certifies it (``converged``)."""
        rule = self.stopped_by
        text = f"{rule}: {STOPPING_RULES.get(rule, '?')}"
        pure = self.options.get("method") != "distributional"  # it returns the average
        if rule in ("max_iter", "stalled") and self.options.get("path") == "interim" and pure:
            text += " (the best iterate is returned)"
        elif rule in ("max_iter", "verified_final") and pure and self.options.get("resample"):
            n = self.options.get("tail_iterates", "eighth's")
            text += f" (the last {n} iterates averaged are returned)"
        elif not self.converged and rule not in ("max_iter", "stalled"):
            text += f"; not certified: verified epsilon / u > {self.options.get('verify_tol')}"
        return text

    def format(self) -> str:
        s = self.summary()
        lo, hi = s["epsilon_ci"]
        rows = [
            ("mechanism", s["mechanism"]),
            ("distribution", s["dist"]),
            ("sellers", str(s["n_sellers"])),
            ("path", str(s["path"])),
            ("verification", str(s.get("verification", "sampled"))),
            ("iterations", f"{s['iterations']} (converged: {s['converged']})"),
            ("stopped by", self._stopped_text()),
            ("residual sup|BR - b|", f"{s['residual']:.3g} (its rule: <= {self._tol_abs():.3g})"),
            ("method", str(s.get("method", "pure"))),
            ("epsilon", f"{s['epsilon']:.3g}"),
            ("95% CI", f"[{lo:.3g}, {hi:.3g}]"),
            ("epsilon / utility", f"{s['epsilon_relative']:.3g} (the utility at the same costs)"),
            ("evaluation cells", ", ".join(str(c.check.eval_cells) for c in self.classes)),
            ("loss l, L", f"{s['loss']:.3g}, {s['relative_loss']:.3g}"),
            ("mean markup b(c) - c", f"{s['mean_markup']:.4g}"),
            ("seconds", f"{s['seconds']:.1f}"),
        ]
        if s.get("method") == "distributional":  # its residual is the grid's utility loss
            at = [k for k, _ in rows].index("residual sup|BR - b|")
            rows[at] = (
                "utility loss (grid)",
                f"{s['residual']:.3g} (its rule: <= {s['eps_tol']:.3g})",
            )
            rows.insert(
                at + 1,
                (
                    "mixed (spread)",
                    ", ".join(
                        f"{m} ({x:.3g})" for m, x in zip(s["mixed"], s["spread"], strict=True)
                    ),
                ),
            )
        if s.get("beliefs_rounds"):  # the opt-in last stage: fictitious play in beliefs
            at = [k for k, _ in rows].index("method")
            changes = s.get("beliefs_changes") or [math.nan]
            rows.insert(at + 1, ("beliefs", (
                f"{s['beliefs_rounds']} rounds of {s['beliefs_markets']} markets (a new belief "
                f"every {s['beliefs_epoch']}); last change of the bids {changes[-1]:.2g}"
            )))  # fmt: skip
        if s.get("beliefs_reason"):  # method="auto" ran the beliefs stage, and why
            at = [k for k, _ in rows].index("method")
            rows.insert(at + 1, ("beliefs stage", str(s["beliefs_reason"])))
        if s.get("method_reason"):  # method="auto": which one ran, and why (as summary.json)
            at = [k for k, _ in rows].index("method")
            rows.insert(at + 1, ("method chosen", str(s["method_reason"])))
        if len(self.classes) > 1:
            rows.insert(
                7, ("epsilon by class", ", ".join(f"{e:.3g}" for e in self.epsilon_by_group))
            )
        width = max(len(k) for k, _ in rows)
        return "\n".join(f"{k:<{width}}  {v}" for k, v in rows)


def _interp(costs, grid, bids, support) -> np.ndarray:
    c = np.asarray(costs, dtype=float)
    lo, hi = support
    bad = ~np.isfinite(c) | (c < lo) | (c > hi)
    if np.any(bad):
        raise MarketSimError(
            f"cost {float(c[bad].flat[0])!r} is outside the support [{lo:g}, {hi:g}]"
        )
    return np.interp(c, grid, bids)


#: the stopping rules (``BNEResult.stopped_by``) and what each means
STOPPING_RULES = {
    "residual": "sup|BR - b| <= tol x the support's width (at once: the bids are kept)",
    "gain": "the responses' ex-ante gain on their own sample <= gain_tol x utility "
    "(biased up by the sample's noise: conservative)",
    "epsilon": "interim path: every class's exact largest gain <= eps_tol x its utility",
    "verified": "sampled paths, every verify_every iterations: every class's epsilon upper "
    "95% bound on fresh opponents <= verify_tol x its utility",
    "stalled": "interim path, patience > 0: no smaller exact epsilon for `patience` "
    "iterations (the best iterate is returned; not converged)",
    "verified_final": "outcome path, after max_iter iterations: the final verification "
    "(fresh opponents) puts every class's epsilon <= verify_tol x its utility",
    "max_iter": "max_iter iterations",
    "utility_loss": "distributional: every class's relative utility loss on the grid <= eps_tol",
    "tables_epsilon": "distributional, interim path: the returned tables' exact relative "
    "epsilon (every report searched against their exact report laws) <= verify_tol",
}


# ---- the figure ------------------------------------------------------------------------
def figure(result: BNEResult):
    """The bid function against the truth (left) and the gain of the best deviation
    per cost on fresh opponents (right): a matplotlib Figure."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (ax, ax2) = plt.subplots(1, 2, figsize=(11, 4.6))
    many = len(result.classes) > 1
    for g, cl in enumerate(result.classes):
        tag = f" (class {g}: {cl.dist})" if many else ""
        ax.plot(cl.costs, cl.bids, "o-", ms=3, label=f"BNE bid b(c){tag}")
        ax2.plot(cl.check.eval_costs, cl.check.gains, ".-", label=f"mean gain at each cost{tag}")
    lo_c = min(cl.support[0] for cl in result.classes)
    hi_c = max(cl.support[1] for cl in result.classes)
    ax.plot([lo_c, hi_c], [lo_c, hi_c], "k--", lw=1, label="truth b(c) = c")
    ax.set(
        xlabel="cost c",
        ylabel="report",
        title=f"{result.mechanism}, {result.dist}, {result.n_sellers} sellers",
    )
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.15), fontsize=8)
    lo, hi = result.epsilon_ci
    ax2.axhline(result.epsilon, color="k", ls="--", lw=1, label=f"epsilon {result.epsilon:.2g}")
    ax2.axhspan(lo, hi, color="0.85", label=f"95% CI [{lo:.2g}, {hi:.2g}]")
    ax2.set(
        xlabel="cost c",
        ylabel="gain of the best deviation (fresh markets)",
        title=f"{result.iterations} iterations, stopped by {result.stopped_by}",
    )
    ax2.legend(loc="upper center", bbox_to_anchor=(0.5, -0.15), fontsize=8, ncol=2)
    fig.tight_layout()
    fit_titles(fig)  # a mechanism given by its file path can be wider than the axes
    return fig


def plot(result: BNEResult, path) -> None:
    """:func:`figure` written to ``path`` (PNG) atomically."""
    save_png(figure(result), path, dpi=100)
