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
from .network import MechanismNetwork, forward, initial_network

__all__ = [
    "TrainingConfig",
    "TrainingResult",
    "train",
    "deviation_utilities",
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

    def check(self) -> None:
        """One line naming the first bad setting (MarketSimError)."""
        check_params(self.mu, self.sigma, self.gamma)
        as_distribution(self.dist)
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


def deviation_utilities(params, misreports, costs, eps_max, low, high, xp=np):
    """Seller i's utility t_i - c_i eps_i when it reports misreports[s, b, i] and the
    others of market b report their costs truthfully: (starts, batch, n)."""
    n = costs.shape[-1]
    own = xp.eye(n, dtype=bool)
    # [s, b, i, j]: seller i's trial market, its own report misreports[s, b, i]
    reports = xp.where(own, misreports[..., :, None], costs[None, :, None, :])
    eps, pay = forward(params, reports, eps_max, low, high, xp)
    eps_own = xp.diagonal(eps, axis1=-2, axis2=-1)
    pay_own = xp.diagonal(pay, axis1=-2, axis2=-1)
    return pay_own - costs * eps_own


def _functions(cfg: TrainingConfig, low: float, high: float):
    """The jitted training step and the regret measurement (closures over the config)."""
    jax, jnp, optax = import_jax()
    width = high - low

    def outcome(params, reports):
        return forward(params, reports, cfg.eps_max, low, high, jnp)

    def deviation_utility(params, misreports, costs):
        return deviation_utilities(params, misreports, costs, cfg.eps_max, low, high, jnp)

    def ascend(params, starts, costs, steps):
        grad = jax.grad(lambda m: jnp.sum(deviation_utility(params, m, costs)))

        def step(_, m):
            return jnp.clip(m + cfg.ascent_step * width * grad(m), low, high)

        return jax.lax.fori_loop(0, steps, step, starts)

    def constraints(params, costs, misreports):
        eps, pay = outcome(params, costs)
        truthful = pay - costs * eps
        best = jnp.max(deviation_utility(params, misreports, costs), axis=0)
        regret = jnp.maximum(best - truthful, 0.0).mean(axis=0)
        ir = jnp.maximum(-truthful, 0.0).mean(axis=0)
        total = eps.sum(axis=-1)
        # Eq. 11 (003) with the payments: the buyer's loss (offline.buyer_loss)
        loss = cfg.mu * jnp.linalg.norm(eps, axis=-1) / total + cfg.sigma / total
        objective = (loss + cfg.gamma * pay.sum(axis=-1)).mean()
        over = 0.0 if cfg.budget is None else jnp.maximum(pay.sum(-1) - cfg.budget, 0).mean()
        return objective, regret, ir, over

    def lagrangian(params, costs, misreports, lam_rgt, lam_ir, lam_b, rho):
        objective, regret, ir, over = constraints(params, costs, misreports)
        penalty = jnp.sum(regret**2) + jnp.sum(ir**2) + over**2
        value = objective + lam_rgt @ regret + lam_ir @ ir + lam_b * over + rho / 2 * penalty
        return value, (objective, regret, ir, over)

    optimizer = optax.adam(cfg.learning_rate)

    @jax.jit
    def train_step(params, opt_state, costs, starts, lam_rgt, lam_ir, lam_b, rho):
        misreports = jax.lax.stop_gradient(ascend(params, starts, costs, cfg.ascent_steps))
        grad_fn = jax.value_and_grad(lagrangian, has_aux=True)
        (_, aux), grads = grad_fn(params, costs, misreports, lam_rgt, lam_ir, lam_b, rho)
        updates, opt_state = optimizer.update(grads, opt_state, params)
        return optax.apply_updates(params, updates), opt_state, aux

    @jax.jit
    def measure(params, costs, starts):
        misreports = ascend(params, starts, costs, 4 * cfg.ascent_steps)
        return constraints(params, costs, misreports)

    return optimizer, train_step, measure


def _batch(law, cfg: TrainingConfig, rng: np.random.Generator, markets: int):
    """(costs (markets, n), starts (ascent_starts, markets, n)): the truth, then draws."""
    n = cfg.n_sellers
    costs = law.sample(markets * n, rng).reshape(markets, n)
    draws = law.sample((cfg.ascent_starts - 1) * markets * n, rng)
    starts = np.concatenate([costs[None], draws.reshape(-1, markets, n)])
    return costs.astype(np.float32), starts.astype(np.float32)


def train(config: TrainingConfig, rng: np.random.Generator, progress=None) -> TrainingResult:
    """Train the network of ``config`` (module docstring); ``progress(row)`` is called with
    each history row when given."""
    config.check()
    if not isinstance(rng, np.random.Generator):
        raise MarketSimError("rng must be a numpy.random.Generator")
    jax, jnp, _ = import_jax()
    law = as_distribution(config.dist)
    low, high = (float(v) for v in law.support)
    start = initial_network(config.n_sellers, rng, hidden=config.hidden, layers=config.layers,
                            eps_max=config.eps_max, low=low, high=high)  # fmt: skip
    optimizer, train_step, measure = _functions(config, low, high)
    params = jax.tree.map(lambda a: jnp.asarray(a, jnp.float32), start.params)
    opt_state = optimizer.init(params)
    n = config.n_sellers
    lam_rgt, lam_ir = np.full(n, config.lambda_start), np.full(n, config.lambda_start)
    lam_b, rho = (0.0 if config.budget is None else config.lambda_start), config.rho
    rows, clock = [], time.perf_counter()
    for it in range(1, config.iterations + 1):
        costs, starts = _batch(law, config, rng, config.batch)
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
    network = MechanismNetwork(weights, n, config.eps_max, low, high)
    costs, starts = _batch(law, config, rng, 4 * config.batch)
    _, regret, ir, _ = (np.asarray(v, dtype=float) for v in measure(params, costs, starts))
    return TrainingResult(network, pd.DataFrame(rows, columns=list(HISTORY_COLUMNS)),
                          float(regret.mean()), float(ir.mean()),
                          time.perf_counter() - clock)  # fmt: skip
