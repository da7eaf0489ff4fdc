"""Training the learned mechanism: RegretNet's augmented Lagrangian (Dütting, Feng,
Narasimhan, Parkes and Ravindranath, "Optimal Auctions through Deep Learning", ICML 2019),
for procurement with the offline mechanism's objective.

Each iteration draws a batch of markets c (batch, n) from the cost law and minimises

    L = f + sum_i lam_rgt_i rgt_i + sum_i lam_ir_i ir_i + lam_b b
          + rho/2 (sum_i rgt_i^2 + sum_i ir_i^2 + b^2)

* f: the buyer's loss (Eq. 11 of 003 with the payments, ``offline.buyer_loss``),
  mu ||eps||_2 / sum eps + sigma / sum eps + gamma sum_i t_i, averaged over the batch;
* rgt_i: seller i's regret, mean over the batch of max(0, max_m u_i(m, c_-i) - u_i(c)),
  u_i = t_i - c_i eps_i; the misreports m are found by gradient ascent on the
  reports (``ascent_steps`` plain gradient steps of ``ascent_step`` × the support's
  width, clipped to the support) from ``ascent_starts`` starts:
  the truth and random draws of the law (RegretNet's inner loop; the misreports are then
  held fixed while the weights take their step);
* ir_i: mean over the batch of max(0, c_i eps_i - t_i) (the IR violation);
* b: mean of max(0, sum_i t_i - budget) when a budget is given, else 0.

Every ``update_every`` iterations the multipliers take RegretNet's step
lam <- lam + rho * (constraint), and rho grows by ``rho_growth``.  Adam (optax) on the
weights.  The regret the training claims at the end (``claimed_regret``) is RegretNet's
measure on a fresh batch: the mean over sellers of rgt_i with ``4 ×`` the ascent steps.

**Several fields** (``population``, a ``market_sim.multifield`` spec such as
``10*uniform:0:1;cap=uniform:0.1:5;size=integers:10:500``): the markets are the
population's draws, each seller's inputs its fields (cost, cap, size: ``network``'s
several-field forward, eps capped by the reported cap).  The ascent moves every
*private* field jointly (cost and cap by default; a verified field such as the size
stays at the truth), each clipped to its support.  A misreported cap above the true
one may give eps above the true cap, which the seller never consented to: its utility
is then an unbounded loss (``mechanisms.multifield.utilities``).  We do not clip the
misreported cap to the true cap (a network is not monotone: an inflated cap can change
the payment while eps stays under the true cap, a real gain the clip would hide); the
ascent searches the cap's whole support on t - c eps - K max(0, eps - cap) with
K = 2 × the cost's upper bound (more than any payment per unit of eps), and the regret
counts a misreport whose eps exceeds the true cap as no gain (utility replaced by the
truth's: the -inf of the utility, after max(0, .)).

Seeded: the weights, the batches and the misreports' starts come from the
``numpy.random.Generator`` given; JAX runs on the CPU in float32 (the ONNX export is
float64 of the same weights), deterministically: the same seed gives the same numbers.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np
import pandas as pd

from ..distributions import as_distribution
from ..errors import MarketSimError
from ..mechanisms.offline import check_params
from ..multifield import MultiFieldPopulation
from .network import MechanismNetwork, forward, initial_network

__all__ = [
    "TrainingConfig",
    "TrainingResult",
    "train",
    "deviation_utilities",
    "own_outcomes",
    "HISTORY_COLUMNS",
    "import_jax",
]

HISTORY_COLUMNS = (
    "iteration",
    "objective",
    "mean_regret",
    "ir_violation",
    "budget_violation",
    "lambda_regret",
    "lambda_ir",
    "rho",
)


@dataclass(frozen=True)
class TrainingConfig:
    """What to train and how (defaults: the 10-seller, U[0, 1] run of docs/neural.md)."""

    n_sellers: int = 10
    dist: str = "uniform:0:1"
    iterations: int = 1000
    batch: int = 64
    hidden: int = 16
    layers: int = 2
    eps_max: float = 5.0
    mu: float = 1.0
    sigma: float = 1.0
    gamma: float = 1.0
    budget: float | None = None
    learning_rate: float = 3e-3
    ascent_steps: int = 5
    ascent_starts: int = 2
    ascent_step: float = 0.05
    rho: float = 1.0
    rho_growth: float = 1.1
    rho_max: float = 100.0
    lambda_start: float = 5.0
    update_every: int = 25
    population: str | None = None
    """A multi-field population spec (module docstring); None: one-field ``dist``."""

    def check(self) -> None:
        """One line naming the first bad setting (MarketSimError)."""
        check_params(self.mu, self.sigma, self.gamma)
        as_distribution(self.dist)
        if self.population is not None:
            pop = MultiFieldPopulation.parse(self.population)
            if pop.population.has_data:
                raise MarketSimError("training takes a population without data (costs only)")
            if pop.n_sellers != self.n_sellers:
                raise MarketSimError(
                    f"the population has {pop.n_sellers} sellers, not {self.n_sellers}"
                )
        for name in ("n_sellers", "iterations", "batch", "hidden", "layers", "ascent_starts"):
            if int(getattr(self, name)) < (2 if name == "n_sellers" else 1):
                raise MarketSimError(f"{name} must be >= {2 if name == 'n_sellers' else 1}")
        if int(self.ascent_steps) < 0:
            raise MarketSimError("ascent_steps must be >= 0")
        for name in (
            "eps_max",
            "learning_rate",
            "ascent_step",
            "rho",
            "rho_growth",
            "update_every",
        ):
            v = getattr(self, name)
            if not (np.isfinite(v) and v > 0):
                raise MarketSimError(f"{name} must be a finite number > 0 (got {v!r})")
        if self.budget is not None and not (np.isfinite(self.budget) and self.budget > 0):
            raise MarketSimError(f"budget must be a finite number > 0 (got {self.budget!r})")


@dataclass(frozen=True)
class TrainingResult:
    """The trained network, one history row per iteration (``HISTORY_COLUMNS``), the
    regret the training measured at the end, and the wall time in seconds."""

    network: MechanismNetwork
    history: pd.DataFrame
    claimed_regret: float
    claimed_ir_violation: float
    seconds: float


def import_jax():
    """(jax, jax.numpy, optax), or one line naming the extra."""
    try:
        import jax
        import jax.numpy as jnp
        import optax
    except ImportError:
        raise MarketSimError(
            "training a network needs JAX and optax: pip install 'market_sim[neural]'"
        ) from None
    return jax, jnp, optax


@dataclass(frozen=True)
class _Layout:
    """The training's reports (..., n, F): the fields, which are private, their bounds."""

    fields: tuple[str, ...]
    private: tuple[bool, ...]
    low: tuple[float, ...]
    high: tuple[float, ...]

    @property
    def cap(self) -> int | None:
        return self.fields.index("cap") if "cap" in self.fields else None


def own_outcomes(params, misreports, truth, eps_max, low, high, xp=np, fields=None):
    """Seller i's (eps, payment) when it reports misreports[s, b, i] and the others of
    market b report ``truth`` (b): (starts, batch, n) each.  One-field: truth (batch, n);
    with ``fields``: truth (batch, n, F), misreports (starts, batch, n, F)."""
    n = truth.shape[1]
    if fields is None:  # [s, b, i, j]: seller i's trial market
        reports = xp.where(xp.eye(n, dtype=bool), misreports[..., :, None], truth[None, :, None])
    else:  # [s, b, i, j, f]
        own = xp.eye(n, dtype=bool)[..., None]
        reports = xp.where(own, misreports[..., :, None, :], truth[None, :, None])
    eps, pay = forward(params, reports, eps_max, low, high, xp, fields)
    diagonal = (xp.diagonal(v, axis1=-2, axis2=-1) for v in (eps, pay))
    return tuple(diagonal)


def deviation_utilities(params, misreports, costs, eps_max, low, high, xp=np):
    """Seller i's utility t_i - c_i eps_i when it reports misreports[s, b, i] and the
    others of market b report their costs truthfully: (starts, batch, n)."""
    eps_own, pay_own = own_outcomes(params, misreports, costs, eps_max, low, high, xp)
    return pay_own - costs * eps_own


def _functions(cfg: TrainingConfig, layout: _Layout):
    """The jitted training step and the regret measurement (closures over the config)."""
    jax, jnp, optax = import_jax()
    low, high = jnp.asarray(layout.low), jnp.asarray(layout.high)
    step_size = cfg.ascent_step * (high - low) * jnp.asarray(layout.private, jnp.float32)
    penalty = 2.0 * layout.high[0]  # K of the module docstring
    ci = layout.cap

    def outcome(params, reports):
        return forward(params, reports, cfg.eps_max, layout.low, layout.high, jnp, layout.fields)

    def deviation(params, misreports, truth):
        """(u_i - K max(0, eps_i - true cap), eps_i) at each misreport."""
        eps, pay = own_outcomes(params, misreports, truth, cfg.eps_max, layout.low,
                                layout.high, jnp, layout.fields)  # fmt: skip
        u = pay - truth[..., 0] * eps
        if ci is None:
            return u, eps
        return u - penalty * jnp.maximum(eps - truth[..., ci], 0.0), eps

    def ascend(params, starts, truth, steps):
        grad = jax.grad(lambda m: jnp.sum(deviation(params, m, truth)[0]))

        def step(_, m):
            return jnp.clip(m + step_size * grad(m), low, high)

        return jax.lax.fori_loop(0, steps, step, starts)

    def constraints(params, truth, misreports):
        eps, pay = outcome(params, truth)
        truthful = pay - truth[..., 0] * eps
        u_dev, eps_dev = deviation(params, misreports, truth)
        if ci is not None:  # eps above the true cap: no gain (module docstring)
            u_dev = jnp.where(eps_dev > truth[..., ci] * (1 + 1e-6), truthful[None], u_dev)
        regret = jnp.maximum(jnp.max(u_dev, axis=0) - truthful, 0.0).mean(axis=0)
        ir = jnp.maximum(-truthful, 0.0).mean(axis=0)
        total = eps.sum(axis=-1)
        # Eq. 11 (003) with the payments: the buyer's loss (offline.buyer_loss)
        loss = cfg.mu * jnp.linalg.norm(eps, axis=-1) / total + cfg.sigma / total
        objective = (loss + cfg.gamma * pay.sum(axis=-1)).mean()
        over = 0.0 if cfg.budget is None else jnp.maximum(pay.sum(-1) - cfg.budget, 0).mean()
        return objective, regret, ir, over

    def lagrangian(params, truth, misreports, lam_rgt, lam_ir, lam_b, rho):
        objective, regret, ir, over = constraints(params, truth, misreports)
        penalty = jnp.sum(regret**2) + jnp.sum(ir**2) + over**2
        value = objective + lam_rgt @ regret + lam_ir @ ir + lam_b * over + rho / 2 * penalty
        return value, (objective, regret, ir, over)

    optimizer = optax.adam(cfg.learning_rate)

    @jax.jit
    def train_step(params, opt_state, truth, starts, lam_rgt, lam_ir, lam_b, rho):
        misreports = jax.lax.stop_gradient(ascend(params, starts, truth, cfg.ascent_steps))
        grad_fn = jax.value_and_grad(lagrangian, has_aux=True)
        (_, aux), grads = grad_fn(params, truth, misreports, lam_rgt, lam_ir, lam_b, rho)
        updates, opt_state = optimizer.update(grads, opt_state, params)
        return optax.apply_updates(params, updates), opt_state, aux

    @jax.jit
    def measure(params, truth, starts):
        misreports = ascend(params, starts, truth, 4 * cfg.ascent_steps)
        return constraints(params, truth, misreports)

    return optimizer, train_step, measure


class _Markets:
    """The batches: (truth (markets, n, F), starts (ascent_starts, markets, n, F)), the
    truth first among the starts, then draws (a verified field at the truth)."""

    def __init__(self, cfg: TrainingConfig):
        self.cfg = cfg
        if cfg.population is None:
            self.law = as_distribution(cfg.dist)
            bounds = self.law.support
            self.layout = _Layout(("cost",), (True,), (float(bounds[0]),), (float(bounds[1]),))
        else:
            self.pop = MultiFieldPopulation.parse(cfg.population)
            fields = self.pop.fields
            lows, highs = zip(*(self.pop.support(f) for f in fields), strict=True)
            private = tuple(f in self.pop.private for f in fields)
            self.layout = _Layout(fields, private, lows, highs)

    def _draw(self, markets: int, rng: np.random.Generator) -> np.ndarray:
        n = self.cfg.n_sellers
        if self.cfg.population is None:
            return self.law.sample(markets * n, rng).reshape(markets, n, 1)
        draw = self.pop.draw(markets, rng)
        return np.stack([draw[f] for f in self.layout.fields], axis=-1)

    def batch(self, rng: np.random.Generator, markets: int):
        truth = self._draw(markets, rng)
        draws = [self._draw(markets, rng) for _ in range(self.cfg.ascent_starts - 1)]
        verified = ~np.asarray(self.layout.private)
        starts = np.stack([truth] + [np.where(verified, truth, d) for d in draws])
        return truth.astype(np.float32), starts.astype(np.float32)

    def network(self, weights: dict) -> MechanismNetwork:
        cfg, lay = self.cfg, self.layout
        objective = (float(cfg.mu), float(cfg.sigma), float(cfg.gamma))
        if cfg.population is None:
            return MechanismNetwork(weights, cfg.n_sellers, cfg.eps_max, lay.low[0],
                                    lay.high[0], objective=objective)  # fmt: skip
        return MechanismNetwork(weights, cfg.n_sellers, cfg.eps_max, lay.low, lay.high,
                                lay.fields, objective=objective)  # fmt: skip


def train(config: TrainingConfig, rng: np.random.Generator, progress=None) -> TrainingResult:
    """Train the network of ``config`` (module docstring); ``progress(row)`` is called with
    each history row when given."""
    config.check()
    if not isinstance(rng, np.random.Generator):
        raise MarketSimError("rng must be a numpy.random.Generator")
    jax, jnp, _ = import_jax()
    markets = _Markets(config)
    lay = markets.layout
    one = config.population is None
    bounds = (lay.low[0], lay.high[0]) if one else (lay.low, lay.high)
    start = initial_network(config.n_sellers, rng, hidden=config.hidden, layers=config.layers,
                            eps_max=config.eps_max, low=bounds[0], high=bounds[1],
                            fields=None if one else lay.fields)  # fmt: skip
    optimizer, train_step, measure = _functions(config, lay)
    params = jax.tree.map(lambda a: jnp.asarray(a, jnp.float32), start.params)
    opt_state = optimizer.init(params)
    n = config.n_sellers
    lam_rgt, lam_ir = np.full(n, config.lambda_start), np.full(n, config.lambda_start)
    lam_b, rho = (0.0 if config.budget is None else config.lambda_start), config.rho
    rows, clock = [], time.perf_counter()
    for it in range(1, config.iterations + 1):
        costs, starts = markets.batch(rng, config.batch)
        lams = (jnp.asarray(lam_rgt, jnp.float32), jnp.asarray(lam_ir, jnp.float32), lam_b)
        params, opt_state, aux = train_step(params, opt_state, costs, starts, *lams, rho)
        objective, regret, ir, over = (np.asarray(v, dtype=float) for v in aux)
        row = dict(zip(HISTORY_COLUMNS, (it, float(objective), regret.mean(), ir.mean(),
                   float(over), lam_rgt.mean(), lam_ir.mean(), rho), strict=True))  # fmt: skip
        rows.append(row)
        if progress is not None:
            progress(row)
        if it % config.update_every == 0:  # RegretNet's multiplier step
            lam_rgt, lam_ir = lam_rgt + rho * regret, lam_ir + rho * ir
            lam_b = lam_b + rho * float(over) if config.budget is not None else 0.0
            rho = min(rho * config.rho_growth, config.rho_max)
    weights = jax.tree.map(lambda a: np.asarray(a, dtype=float), params)
    network = markets.network(weights)
    costs, starts = markets.batch(rng, 4 * config.batch)
    _, regret, ir, _ = (np.asarray(v, dtype=float) for v in measure(params, costs, starts))
    return TrainingResult(network, pd.DataFrame(rows, columns=list(HISTORY_COLUMNS)),
                          float(regret.mean()), float(ir.mean()),
                          time.perf_counter() - clock)  # fmt: skip
