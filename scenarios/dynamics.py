"""Learning dynamics: where repeated play of learning sellers goes under each mechanism.

Per task one MarketModel runs ``rounds`` rounds in which every seller is a learner
(``learner``: a strategy spec, e.g. ``hedge:eta=0.1``); each row is one round with

* ``report_ratio``: mean report / cost over the round's participants, and
  ``bought_report_ratio`` over the bought ones (whose reports set the payments);
* ``share_bought_misreporting``: among the bought sellers (eps_i > 0), the share
  whose report differs from the cost (|r_i - c_i| > ``TOL`` max(1, c_i)); NaN when
  nobody is bought.  Unbought sellers' reports do not change their utility, so
  only the bought ones say whether the learners left the truth;
* ``avg_external_regret`` (when the model measures it): mean over sellers of the
  cumulative external regret against the best fixed arm in hindsight, divided by
  the rounds played; ``mean_regret``: this round's ex-post regret on a report grid;
* ``proxy_loss`` and ``total_payment`` of the round's outcome, and on the same
  costs (the same participants) ``truthful_proxy_loss`` and ``truthful_payment``:
  what the mechanism gives when everyone reports the truth;
* for a mechanism under which truth is not an equilibrium (``truth_gain`` >
  ``IC_TOL``: the largest gain of one seller from a misreport against truthful
  others on ``IC_PROFILES`` sampled cost profiles), the Bayes-Nash reference: the
  symmetric BNE bid function of ``market_sim.games.equilibrium.symmetric_bne`` played by
  everyone on the same costs (``bne_report_ratio``, ``bne_bought_report_ratio``,
  ``bne_proxy_loss``,
  ``bne_payment``) and the solver's verified ``bne_epsilon`` (largest expected gain
  of a deviation, on fresh opponents; ``bne_epsilon_relative`` over the ex-ante
  utility; ``bne_relative_loss``, bnelearn's L), from ``bne_samples`` opponent draws
  and at most ``bne_max_iter`` best-response iterations; and how far the learners are
  from it: ``bne_linf`` (the largest |report - b(c)| over the sellers whose cost wins
  at least 1% of the time at the BNE) and ``bne_utility_gap`` (mean utility minus the
  utility had everyone played b, same costs and draw);
* ``collusion_index``: Calvano et al.'s Delta = (u - u_N) / (u_M - u_N) of the round's
  mean utility, u_N a seller's ex-ante utility at the equilibrium (truth, or the BNE)
  and u_M the sellers' joint-profit reference: their largest joint utility per seller
  under the mechanism over the cartel rules of ``market_sim.games.psro.collusion_scale``
  (the j cheapest sellers report p, the others the top; or a common markup), both on
  ``COLLUSION_MARKETS`` sampled markets: 0 is competitive play, 1 full collusion,
  below 0 fiercer than the equilibrium; ``collusion_index_markup`` the same with u_M
  the best common markup k c (reports min(k c, top)), a narrower reference.  Every
  reference report stays where the cost density is positive (``report_range``: the
  top of a Beta law, where the density is 0, is replaced by its 1 - 1e-6 quantile).

By default costs are redrawn every round (``new_costs``), which is the Bayesian
game the BNE solves: a learner's arm (a report multiplier) is then a bid function
c -> a c, and the BNE is the benchmark it is measured against.  The IC check and
the BNE are computed once per (mechanism, dist, m, gamma, reference_seed and the
solver's options) in each worker process and cached (seeded by ``reference_seed``
alone, so every task of a run sees the same reference whatever the order the tasks
ran in).  Posted prices are left out: their payments do not depend on the reports,
and at the default price (the 0.1 quantile) nobody sells in many rounds of a small
market, where the proxy loss is infinite.
"""

from __future__ import annotations

import itertools
from typing import Any

import numpy as np

from market_sim.mechanisms.offline import proxy_loss_of_eps
from market_sim.parameters import Distribution, Number, Registered

NAME = "dynamics"
REPLICATIONS = 5
QUICK_REPLICATIONS = 3
TOL = 1e-9  # a report differs from the cost (relative to max(1, cost))
IC_TOL = 1e-7  # truth is an equilibrium when no misreport gains more than this
IC_PROFILES = 8  # cost profiles of the IC check
IC_SELLERS = 64  # sellers whose misreports are tried per profile (all when fewer)
LOCAL = (0.5, 0.8, 0.9, 0.95, 0.99, 1.01, 1.05, 1.1, 1.25, 1.5, 2.0)  # misreports c x a

# the compiled payment kernel: 4x faster than numpy on these small markets, the same
# payments to ~1e-13 (market_sim.mechanisms.payments.offline_payments)
MECHANISMS = ["offline:backend=numba", "online", "pay-as-bid"]
LEARNERS = ["hedge", "exp3", "q-learning", "learning"]  # the strategies compared (specs)


def _flag(value) -> None:
    """true or false"""
    if not isinstance(value, bool):
        raise ValueError("")


PARAMS = {  # what `--set` accepts (market_sim.parameters)
    "mechanism": Registered("mechanism"),
    "learner": Registered("strategy"),
    "m": Number(int, low=2),
    "dist": Distribution(),
    "rounds": Number(int, low=1),
    "gamma": Number(float, low=0, low_open=True),
    "new_costs": _flag,
    "measure_regret": _flag,
    "reference_seed": Number(
        int, low=0, doc="seed of the IC check, the BNE and the collusion scale"
    ),
    "bne_samples": Number(int, low=1, doc="opponent draws of the BNE solver"),
    "bne_max_iter": Number(int, low=1, doc="best-response iterations of the BNE solver, at most"),
}


def grid(quick: bool = False) -> list[dict]:
    sizes = [5] if quick else [10, 25]
    return [
        dict(
            mechanism=mech,
            learner=learner,
            m=m,
            dist="uniform:1:5",
            rounds=40 if quick else 200,
            gamma=0.3,
            new_costs=True,
            measure_regret=True,
            reference_seed=0,
            # the solver's opponent draws and iterations (its defaults in the full grid)
            bne_samples=256 if quick else 1024,
            bne_max_iter=60 if quick else 150,
        )
        for mech, learner, m in itertools.product(MECHANISMS, LEARNERS, sizes)
    ]


# ---- references, cached per worker process ---------------------------------------
_TRUTH_GAIN: dict[tuple, float] = {}
_BNE: dict[tuple, Any] = {}


def _reference_key(params: dict) -> tuple:
    return (
        str(params["mechanism"]),
        str(params["dist"]),
        int(params["m"]),
        float(params["gamma"]),
        int(params["reference_seed"]),
        int(params["bne_samples"]),
        int(params["bne_max_iter"]),
    )


def truth_gain(mechanism, dist, m: int, seed: int) -> float:
    """Largest gain of one seller from a misreport when all others report the truth,
    over ``IC_PROFILES`` cost profiles of m i.i.d. costs (expected utilities for
    randomized mechanisms).  Misreports: c x ``LOCAL`` and 20 cell midpoints of the
    support.  0 (up to rounding) for a truthful mechanism."""
    rng = np.random.default_rng(seed)
    lo, hi = dist.support
    mids = lo + (hi - lo) * (np.arange(20) + 0.5) / 20
    gain = 0.0
    for _ in range(IC_PROFILES):
        costs = dist.sample(m, rng).astype(float)
        idx = np.sort(rng.choice(m, min(m, IC_SELLERS), replace=False))
        c = costs[idx]
        cand = np.column_stack(
            [
                c,
                np.clip(c[:, None] * np.asarray(LOCAL), lo, hi),
                np.broadcast_to(mids, (c.size, 20)),
            ]
        )
        u = mechanism.deviation_utilities(idx, cand, c, costs, rng)  # column 0: the truth
        gain = max(gain, float((u.max(axis=1) - u[:, 0]).max()))
    return gain


def references(model, params: dict):
    """(truth_gain, the BNE or None) of the task's market, cached per process."""
    key = _reference_key(params)
    if key not in _TRUTH_GAIN:
        _TRUTH_GAIN[key] = truth_gain(
            model.mechanism, model.dist, model.n_sellers, params["reference_seed"]
        )
    gain = _TRUTH_GAIN[key]
    if gain <= IC_TOL:
        return gain, None
    if key not in _BNE:
        from market_sim.games.equilibrium import symmetric_bne

        _BNE[key] = symmetric_bne(
            model.mechanism,
            model.dist,
            model.n_sellers,
            rng=np.random.default_rng(params["reference_seed"]),
            samples=params["bne_samples"],
            max_iter=params["bne_max_iter"],
        )
    return gain, _BNE[key]


_SCALE: dict[tuple, Any] = {}
COLLUSION_MARKETS = 32  # sampled markets of the collusive and equilibrium references
COLLUSION_MULTIPLIERS = 9  # common markups tried, geometric from 1 to high / low
COLLUSION_LEVELS = 5  # the designated sellers' reports tried, twice (collusion_scale)


def collusion_reference(model, params: dict, bne):
    """The collusion scale of the task's market (``market_sim.games.psro.collusion_scale``):
    a seller's ex-ante utility at the equilibrium (truth for an IC mechanism, else the
    BNE), at the best cartel rule (the joint-profit reference) and at the best common
    markup k c (k from 1 to high/low: at the top everybody reports the top), cached per
    process and seeded by ``reference_seed``."""
    key = _reference_key(params)
    if key not in _SCALE:
        from market_sim.games.psro import collusion_scale

        lo, hi = model.dist.support
        top = hi / lo if lo > 0 else 1000.0
        _SCALE[key] = collusion_scale(
            model.mechanism,
            model.dist,
            model.n_sellers,
            np.random.default_rng(params["reference_seed"]),
            nash="truthful" if bne is None else bne,
            multipliers=np.geomspace(1.0, top, COLLUSION_MULTIPLIERS),
            markets=COLLUSION_MARKETS,
            cartel_levels=COLLUSION_LEVELS,
        )
    return _SCALE[key]


def collusion_index(scale, utility: float, reference: str = "u_collusive") -> float:
    """Delta = (u - u_nash) / (u_M - u_nash) (Calvano et al. 2020): 0 at the
    equilibrium, 1 at u_M, the scale's ``reference``: ``u_collusive`` (the sellers'
    joint-profit maximum found, Calvano's benchmark) or ``u_markup`` (the best common
    markup); NaN where colluding gains nothing."""
    gap = getattr(scale, reference) - scale.u_nash
    return float((utility - scale.u_nash) / gap) if gap > 0 else float("nan")


def _outcome_stats(model, reports, costs, rng) -> tuple[float, float, np.ndarray]:
    """(proxy loss (Eq. 11), total payment, eps) of the mechanism on ``reports``."""
    loss, pay, eps, _ = _outcome_and_utilities(model, reports, costs, rng)
    return loss, pay, eps


def _outcome_and_utilities(model, reports, costs, rng):
    """(proxy loss (Eq. 11), total payment, eps, utilities t_i - c_i eps_i) on ``reports``."""
    out = model.mechanism.run(reports, rng)
    psi = model.dist.virtual_cost(costs)
    loss = proxy_loss_of_eps(out.eps, psi, mu=model.mu, sigma=model.sigma, gamma=model.gamma)
    return loss, float(np.sum(out.payments)), np.asarray(out.eps), out.utilities(costs)


def bne_distance(bne, cost, report, utility, bne_utility, arms=None) -> dict:
    """How far the learners' round is from the BNE on the same costs: ``bne_linf``, the
    largest |report - b(c)| over the sellers whose cost wins at least 1% of the time at
    the BNE (the solver's verification says which), and ``bne_utility_gap``, the mean
    utility of a seller minus its utility had everyone played b (same costs, same seed).
    ``arms``: (n, K) each seller's reports at its learner's arms (NaN rows for sellers
    without arms), or None; then ``bne_action_gap``, the largest distance from b(c) to
    the nearest arm over the same sellers: how close the action set lets a learner get
    to the equilibrium (0 when b(c) is an arm; NaN without arms)."""
    ch = bne.check
    winning = ch.eval_costs[ch.win_rates >= 0.01]
    top = float(winning.max()) if winning.size else -np.inf
    sel = cost <= top
    bid = np.asarray(bne.bid(cost), dtype=float)
    gap = np.abs(report - bid)
    action_gap = np.nan
    if arms is not None:
        nearest = np.nanmin(np.abs(arms - bid[:, None]), axis=1, initial=np.inf)
        known = sel & np.isfinite(nearest)
        action_gap = float(nearest[known].max()) if known.any() else np.nan
    return {
        "bne_linf": float(gap[sel].max()) if sel.any() else np.nan,
        "bne_action_gap": action_gap,
        "bne_utility_gap": float(np.mean(utility - bne_utility)),
    }


def learner_arm_table(model, active) -> np.ndarray | None:
    """(participating sellers, K) reports at every arm of the sellers' learners (NaN
    where a seller has fewer arms or none); None when no seller learns over arms."""
    groups = model.learner_arms()
    if not groups:
        return None
    k = max(a.shape[1] for _, a in groups)
    table = np.full((model.n_sellers, k), np.nan)
    for ids, a in groups:
        table[ids, : a.shape[1]] = a
    return table[active]


def _ratio(reports, costs, mask) -> float:
    """Mean report / cost over the sellers of ``mask`` with cost > 0 (NaN if none)."""
    mask = mask & (costs > 0)
    return float(np.mean(reports[mask] / costs[mask])) if mask.any() else np.nan


# ---- one task ------------------------------------------------------------------------
def run(params: dict, rng: np.random.Generator) -> list[dict]:
    from market_sim.agents import MarketModel  # Mesa: imported when a task runs

    model = MarketModel(
        params["m"],
        dist=params["dist"],
        mechanism=params["mechanism"],
        strategy=params["learner"],
        strategic_fraction=1.0,
        rounds=params["rounds"],
        gamma=params["gamma"],
        new_costs_each_round=params["new_costs"],
        measure_regret=params["measure_regret"],
        agent_views=False,
        seed=int(rng.integers(2**63)),
    )
    ref_rng = np.random.default_rng(int(rng.integers(2**63)))  # randomized references
    gain, bne = references(model, params)
    scale = collusion_reference(model, params, bne)
    lo, hi = model.dist.support
    rows = []
    while model.running:
        model.step()
        active = model.participating
        cost, report, eps = model.cost[active], model.report[active], model.eps[active]
        bought = eps > 0
        mis = np.abs(report - cost) > TOL * np.maximum(1.0, np.abs(cost))
        everyone = np.ones(cost.size, dtype=bool)
        regret = model.regret[active]
        regret = regret[np.isfinite(regret)]
        loss, pay, _ = _outcome_stats(model, cost, cost, ref_rng)
        u_mean = float(np.mean(model.utility[active]))
        row = {
            "round": int(model.round),
            "participation": float(np.mean(active)),
            "n_bought": int(np.count_nonzero(bought)),
            "report_ratio": _ratio(report, cost, everyone),
            "bought_report_ratio": _ratio(report, cost, bought),
            "share_misreporting": float(np.mean(mis)),
            "share_bought_misreporting": float(np.mean(mis[bought])) if bought.any() else np.nan,
            "mean_regret": float(regret.mean()) if regret.size else np.nan,
            "proxy_loss": float(model.platform.proxy_loss),
            "total_payment": float(model.platform.total_payment),
            "truthful_proxy_loss": loss,
            "truthful_payment": pay,
            "truth_gain": gain,
            # Calvano et al.'s Delta of the round's mean utility (collusion_reference)
            "collusion_index": collusion_index(scale, u_mean),
            "collusion_index_markup": collusion_index(scale, u_mean, "u_markup"),
        }
        if bne is not None:
            bids = np.clip(np.asarray(bne.bid(cost), dtype=float), lo, hi)
            seed = int(ref_rng.integers(2**63))  # the same draw for both profiles
            u_now = _outcome_and_utilities(model, report, cost, np.random.default_rng(seed))[3]
            loss, pay, eps_bne, u_bne = _outcome_and_utilities(
                model, bids, cost, np.random.default_rng(seed)
            )
            row |= {
                "bne_report_ratio": _ratio(bids, cost, everyone),
                "bne_bought_report_ratio": _ratio(bids, cost, eps_bne > 0),
                "bne_proxy_loss": loss,
                "bne_payment": pay,
                "bne_epsilon": float(bne.epsilon),
                "bne_epsilon_relative": float(bne.epsilon_relative),
                "bne_relative_loss": float(bne.relative_loss),
                **bne_distance(bne, cost, report, u_now, u_bne, learner_arm_table(model, active)),
            }
        rows.append(row)
    frame = model.model_frame()
    if "avg_external_regret" in frame.columns:  # the model's own measure (learners)
        for row, value in zip(rows, frame["avg_external_regret"], strict=True):
            row["avg_external_regret"] = float(value)
    return rows
