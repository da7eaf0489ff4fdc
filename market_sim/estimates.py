"""Rough run-time estimates of the commands that can run for very long.

The CLI prints one warning line (never a refusal) with the estimate and a faster
alternative when a command is expected to take more than ``SLOW_SECONDS``.  The
estimates come from a simple cost model, never from timing anything; its
constants are all here, measured once on the 2-core reference machine
(``docs/cli.md``), and are meant to be updated when the code gets faster.

The exception is :class:`FirstMarketEstimate`: a run of K like markets (the audit)
times its first market on the mechanism itself and estimates the other K - 1 from it,
so a slow user mechanism gets an honest figure where the cost model (written for
the library's mechanisms) cannot know its ``outcome``.

Cost model (seconds):

* **Capped offline payments** (``--k``, or ``offline:k=K``).  With the compiled
  capped oracle (numba; ``payments._CappedOracle``) the bought sellers' payments
  cost ``PRUNED_PAY_PER_SELLER`` per seller of the market (most are interpolated
  in the cost), and each seller's whole curve (the regret of ``simulate``)
  ``PRUNED_CURVE_PER_SELLER``:

      T = PRUNED_PAY_PER_SELLER * m + PRUNED_CURVE_PER_SELLER * n_curves

  Without numba each evaluation of eps_i(z) re-solves the whole market, so one
  seller's integral costs ``CAPPED_SOLVES_PER_SELLER`` solves of
  ``SOLVE_FIXED + SOLVE_PER_SELLER * m``:

      T = (n_paid + n_curves) * CAPPED_SOLVES_PER_SELLER * (SOLVE_FIXED + SOLVE_PER_SELLER * m)

  with n_paid the bought sellers and n_curves the sellers whose curves start at
  the bottom of the support (every seller for the regret).  Without a cap the
  payments are one compiled pass (about 0.1 s at m = 10^5).
* **Data-dependent mechanism** (``simulate --mechanism data-dependent --data``).
  Every solve of Eq. 17 (a line search over ``eps_avg``, Newton at each point)
  costs ``DD_SOLVE_FIXED + DD_SOLVE_PER_ROW * m``.  One round pays each seller
  from ``p`` solves and the regret adds ``n_grid`` solves per seller:

      T_round = (1 + m * (p + [regret] n_grid)) * t_solve(m)

  where ``p`` is what Myerson's integral costs: about one solve on piecewise-linear
  psi (U[a, b], ironed pieces: the envelope rule's value at the pieces' ends);
  ``DD_CURVED_SOLVES_PER_SELLER`` on a law with a curved piece (a Beta, a truncated
  normal: the adaptive rule of ``dd_curved``); ``n_nodes`` with
  ``payment_rule="trapezoid"``.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable

__all__ = [
    "SLOW_SECONDS",
    "audit_seconds",
    "capped_offline_seconds",
    "data_dependent_round_seconds",
    "format_duration",
    "FirstMarketEstimate",
]

SLOW_SECONDS = 60.0  # warn above this

# capped offline mechanism, compiled oracle (measured 2026-11-24, U[0, 1], k = 5:
# payments 0.15 s at m = 10^5 and 1.0 s at 10^6; curves of every seller with 11
# candidates 2.7 s at 10^4 and 16 s at 10^5)
PRUNED_PAY_PER_SELLER = 2e-6  # seconds per seller of the market
PRUNED_CURVE_PER_SELLER = 3e-4  # seconds per seller whose whole curve is built

# capped offline mechanism without numba: one re-solve per evaluation of eps_i(z)
CAPPED_SOLVES_PER_SELLER = 400  # measured 160 to 680 at m = 100 to 800, k = 5
SOLVE_FIXED = 1.6e-3  # seconds per capped solve at small m
SOLVE_PER_SELLER = 2.5e-7  # seconds per seller of a capped solve (0.25 s at m = 10^6)

# data-dependent mechanism (Eq. 17 by Algorithm 4, 10 points of eps_avg), the compiled
# multi-start Newton solver (measured 2026-11-27, simulate, 3 rounds: 2.1 s at m = 20
# with regret, 5.9 s at m = 100 with regret; one round of m = 500 without: 16.0 s)
DD_SOLVE_FIXED = 1e-3  # seconds per solve at small m (scipy's L-BFGS-B path: 0.15)
DD_SOLVE_PER_ROW = 5e-6  # about 26 ms per solve at m = 5000
# the adaptive rule on curved pieces (measured 2026-11-29, one round without regret,
# solves of solve_many counted: Beta(2, 5) 1,128 per seller at m = 20 and 683 at
# m = 50, a truncated normal 528 at m = 50; 0.44-0.47 ms a solve, 10-16 s a round)
DD_CURVED_SOLVES_PER_SELLER = 800
DD_CURVED_SOLVE_FIXED = 4.5e-4  # the batched solves of a curved piece are cheaper
DD_CURVED_SOLVE_PER_ROW = 1e-6  # ... and grow little with m (0.44 ms at 20, 0.46 at 50)


def capped_offline_seconds(m: int, n_paid: int, n_curves: int = 0, *, compiled: bool) -> float:
    """Seconds of the payments of ``n_paid`` bought sellers and of ``n_curves`` sellers'
    whole curves in a capped market of m, with the compiled oracle or re-solving."""
    if compiled:
        return PRUNED_PAY_PER_SELLER * m * (n_paid > 0) + PRUNED_CURVE_PER_SELLER * n_curves
    per_solve = SOLVE_FIXED + SOLVE_PER_SELLER * m
    return (n_paid + n_curves) * CAPPED_SOLVES_PER_SELLER * per_solve


def data_dependent_round_seconds(
    m: int, *, regret: bool, n_nodes: int = 9, n_grid: int = 11,
    payment_rule: str = "envelope", curved: bool = False,
) -> float:  # fmt: skip
    """Seconds of one round of the data-dependent mechanism with m sellers; ``curved``:
    the law has a curved piece of psi (``DataDependentMechanism.curved_payments``)."""
    per_solve = DD_SOLVE_FIXED + DD_SOLVE_PER_ROW * m
    solves = 1 + m * (n_grid if regret else 0)
    if payment_rule == "trapezoid":
        payments = m * n_nodes * per_solve
    elif curved:
        curved_solve = DD_CURVED_SOLVE_FIXED + DD_CURVED_SOLVE_PER_ROW * m
        payments = m * DD_CURVED_SOLVES_PER_SELLER * curved_solve
    else:
        payments = m * per_solve  # the value at the pieces' ends, about one solve per seller
    return solves * per_solve + payments


def format_duration(seconds: float) -> str:
    """``"about 45 s"``, ``"about 4.4 min"``, ``"about 3 h"``, ``"about 290 days"``."""
    if not math.isfinite(seconds):
        return "forever"
    value, unit = seconds, "s"
    for name, size in (("min", 60.0), ("h", 3600.0), ("days", 86400.0)):
        if seconds >= (2 if name == "days" else 1) * size:
            value, unit = seconds / size, name
    return f"about {value:.0f} {unit}" if value >= 10 else f"about {value:.1f} {unit}"


# the audit (``market_sim.auditing``): seconds per (seller x candidate report) evaluated
# (measured 2026-11-25: offline, U[0, 1], 141 reports per seller: 53 s at m = 10^5)
AUDIT_FAST_PER_EVAL = 3.5e-6  # a mechanism with its own ``deviations`` (offline: compiled curves)
# one ``outcome`` call of a generic mechanism (re-run per report); 2026-11-29, idle
# machine: a deterministic black box 10 x 20, 1.2 s (2.4 s predicted at the old 2.5e-5)
AUDIT_CALL_FIXED = 1.3e-5
AUDIT_CALL_PER_SELLER = 5e-8  # ... and per seller of its market
AUDIT_FAST_PER_MARKET = 0.05  # fixed cost per market (solves, curves) of the fast paths
# a Monte Carlo (randomized) mechanism: the search screens its candidates in rounds (a
# quarter of ``n_draws``, a quarter, a half), so a candidate gets this share of them on
# average, and each seller's confirmation escalates from ``n_confirm`` in up to 4 stages
# (measured 2026-11-29, the bench's lottery 10 x 20: 436k search calls for 92,800
# candidates, 225k confirmation calls for 200 seller-markets at n_confirm = 64; 9.5 s,
# 9.0 s predicted; 20 x 20: 21.3 s, 23 s predicted)
AUDIT_MC_SEARCH_SHARE = 0.3
AUDIT_MC_CONFIRM_ESCALATION = 17.0
# the data-dependent mechanism: one solve of Eq. 17 per evaluation (measured 2026-11-27:
# 100 sellers with synthetic data, 13-25 s a market for ~48,000 evaluations)
AUDIT_DD_PER_EVAL_PER_SELLER = 5e-6  # the compiled solver (0.5 ms an evaluation at N = 100)
AUDIT_DD_LBFGS_PER_EVAL = 1e-2  # solver="lbfgs": scipy's L-BFGS-B, ~10 ms a solve


def audit_seconds(
    mech, n_sellers: int, n_markets: int, *, n_candidates: int, n_draws: int = 16,
    n_confirm: int = 64,
) -> float:  # fmt: skip
    """Seconds of ``audit`` (unilateral search only): every seller tries ``n_candidates``
    reports.  A mechanism with its own ``deviations`` costs ``AUDIT_FAST_PER_EVAL`` per
    evaluation; a generic one re-runs ``outcome`` per report (``AUDIT_CALL_FIXED +
    AUDIT_CALL_PER_SELLER * n``), a share of ``n_draws`` times for a Monte Carlo
    randomized one (screened) plus the escalated confirmation of each seller from
    ``n_confirm`` draws; the data-dependent mechanism one
    solve of Eq. 17 per evaluation."""
    from .mechanisms.base import Mechanism
    from .mechanisms.builtin import DataDependentMechanism

    evals = float(n_sellers) * (n_candidates + 1) * n_markets
    if isinstance(mech, DataDependentMechanism):  # a solve of Eq. 17 per evaluation
        if mech.solver == "lbfgs":
            return evals * AUDIT_DD_LBFGS_PER_EVAL
        return evals * AUDIT_DD_PER_EVAL_PER_SELLER * n_sellers
    fast = any(
        getattr(type(mech), name, None) is not getattr(Mechanism, name)
        for name in ("deviations", "deviation_utilities")
    )
    if fast:
        return evals * AUDIT_FAST_PER_EVAL + n_markets * AUDIT_FAST_PER_MARKET
    per_call = AUDIT_CALL_FIXED + AUDIT_CALL_PER_SELLER * n_sellers
    if getattr(mech, "randomized", False):
        confirm = float(n_sellers) * n_markets * n_confirm * AUDIT_MC_CONFIRM_ESCALATION
        evals = evals * n_draws * AUDIT_MC_SEARCH_SHARE + confirm
    return evals * per_call


def simulation_seconds(model, rounds: int) -> tuple[float, str]:
    """(seconds, the faster alternative) of ``rounds`` rounds of a ``MarketModel``, by the
    cost model above; (0, "") for a mechanism whose rounds take no noticeable time."""
    from .mechanisms.builtin import DataDependentMechanism, OfflineMechanism, PayAsBidMechanism
    from .mechanisms.payments import capped_oracle_compiled

    mech, m, regret = model.mechanism, model.n_sellers, model.measure_regret
    k = getattr(mech, "k", None)
    if isinstance(mech, (OfflineMechanism, PayAsBidMechanism)) and k is not None and k < m:
        compiled = capped_oracle_compiled()
        paid = math.ceil(m / k) if isinstance(mech, OfflineMechanism) else 0  # >= m/k bought
        curves = m if regret else 0
        seconds = rounds * capped_offline_seconds(m, paid, curves, compiled=compiled)
        faster = "without the cap k (seconds)"
        if regret and paid:
            quick = rounds * capped_offline_seconds(m, paid, compiled=compiled)
            faster += f", or --no-regret ({format_duration(quick)})"
        return seconds, faster
    if isinstance(mech, DataDependentMechanism):

        def per_round(with_regret):
            return data_dependent_round_seconds(
                m, regret=with_regret, n_nodes=mech.n_nodes, n_grid=model.n_grid,
                payment_rule=mech.payment_rule, curved=mech.curved_payments,
            )  # fmt: skip

        faster = "fewer --sellers or --rounds"
        if regret:
            faster = f"--no-regret ({format_duration(rounds * per_round(False))}), or " + faster
        return rounds * per_round(regret), faster
    return 0.0, ""


class FirstMarketEstimate:
    """Calls ``report(line)`` once, when the first of ``total`` like markets is done, with
    the time it took and the estimate of the other ``total - 1`` (first x (total - 1)):
    calibrated on the mechanism itself.  Call it with the number of markets done: 0 at
    the start of the first, then 1, 2, ...  ``clock`` (seconds) can be injected."""

    def __init__(
        self,
        total: int,
        report: Callable[[str], None],
        what: str = "audit",
        clock: Callable[[], float] = time.perf_counter,
    ) -> None:
        self.total, self.report, self.what, self.clock = int(total), report, what, clock
        self.start: float | None = None
        self.first_seconds: float | None = None

    def remaining_seconds(self) -> float:
        """The estimate of the markets after the first (nan before it is done)."""
        if self.first_seconds is None:
            return math.nan
        return self.first_seconds * (self.total - 1)

    def __call__(self, done: int) -> None:
        if done == 0:
            self.start = self.clock()
        elif done == 1 and self.start is not None and self.first_seconds is None:
            self.first_seconds = self.clock() - self.start
            if self.total > 1:
                self.report(
                    f"{self.what}: the first of {self.total} markets took "
                    f"{format_duration(self.first_seconds)}; the other {self.total - 1} "
                    f"estimated at {format_duration(self.remaining_seconds())} "
                    "(timed on this mechanism)"
                )
