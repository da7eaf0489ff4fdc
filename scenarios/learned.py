"""A learned mechanism against the offline mechanism, at truth and at the sellers' equilibrium.

Issue #52, item 4.  The offline mechanism (Alg. 2 of 003 with Myerson payments) minimises
the buyer's expected objective (Eq. 11 of 003 with the payments made:
``market_sim.mechanisms.offline.buyer_loss``) among Bayes-IC, interim-IR mechanisms.  A
learned mechanism (a RegretNet trained by ``market-sim train``, or any network brought as
ONNX) is trained on the same objective with a penalty on its *measured* regret; it is not
exactly IC.  By the revelation principle the sellers' Bayes-Nash equilibrium of any
mechanism is an outcome some Bayes-IC mechanism also gets (play the equilibrium for the
sellers), so at the equilibrium no mechanism beats offline in expectation.  At truth a
non-IC network may.  Each task answers one of the two questions on ``markets`` fresh
markets of ``sellers`` sellers with i.i.d. costs from ``dist``, both mechanisms on the
same costs (paired):

* ``at = truth``: every seller reports its cost.  Besides the objectives, the network's
  regret by the peers' protocols and by the audit on the first ``audit_markets``
  markets (``market_sim.referee``): ``regret_ascent`` (FL-Market: gradient ascent from
  the truth, 100 steps of 0.1), ``regret_grid`` (MFG-RegretNet: a 25-point grid),
  ``regret_audit`` (``market_sim.audit`` with its opponent profiles), each the largest
  over those markets' sellers.
* ``at = equilibrium``: every seller bids b(c), the symmetric BNE of the network
  (``market_sim.games.equilibrium.symmetric_bne``, seeded by ``reference_seed`` and cached per
  worker process, so every task of a run plays the same b); the offline mechanism is
  played at truth, its equilibrium (it is dominant-strategy IC: proved in
  docs/mathematics.md and certified by the audit).  ``bne_epsilon_relative`` and
  ``bne_converged`` say how good that equilibrium is: a large epsilon means the
  comparison is against an approximate equilibrium, and the report says so.

Per task one row: the means over its markets of each mechanism's objective
(``objective_learned``, ``objective_offline``), of their paired difference
(``objective_difference``, learned minus offline) and its standard deviation, the
payments, the sellers' mean utility, and under the network the share of sellers whose
utility is below -1e-9 (``negative_utility_share``: IR violations at truth, ex-post losses
at the equilibrium) and the most negative utility seen (``min_utility_learned``).
``network`` names one of the networks shipped with the package (``SHIPPED``) or a path to
an ``.onnx`` file.  Both mechanisms are built and scored with the weights ``mu``,
``sigma``, ``gamma`` of Eq. 11: by default (``network``) the weights the network was
trained on, which ``market-sim train`` records in the file (``objective_weights``); a
file without them needs the three given (``--set mu=... --set sigma=... --set
gamma=...``), since scoring a network on an objective it was not trained for answers
another question.  The row records the weights used (``objective_mu`` ...).
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np

from market_sim.parameters import Choice, Distribution, Number

NAME = "learned"
REPLICATIONS = 5
QUICK_REPLICATIONS = 2
# Networks shipped with the package (market_sim/neural/networks/); each was written by
# the command in its README entry, and its training curve lies beside it.
SHIPPED = {"regretnet-u01-m10": "regretnet-u01-m10.onnx"}
IR_TOL = 1e-9  # a utility below -IR_TOL counts as a loss


class _Network:
    """The ``network`` parameter's declaration (market_sim.parameters): a shipped name or
    an existing ``.onnx`` file."""

    doc = "the learned mechanism played: a shipped network's name or an ONNX file"
    allowed = "a shipped network (" + ", ".join(SHIPPED) + ") or a path to an .onnx file"

    def check(self, value) -> None:
        if not isinstance(value, str):
            raise ValueError("not a name or a path")
        if value not in SHIPPED and not (value.endswith(".onnx") and Path(value).is_file()):
            raise ValueError(f"{value!r} is neither a shipped network nor an existing .onnx file")


class _Weight:
    """An Eq. 11 weight parameter: ``network`` (the weight the network was trained on,
    from its file) or a positive number."""

    allowed = "network (the weight in the network's file) or a number > 0"

    def __init__(self, doc: str) -> None:
        self.doc = doc + "; network: the one it was trained on"

    def check(self, value) -> None:
        if value == "network":
            return
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ValueError("not 'network' or a number")
        if not (0 < value < math.inf):
            raise ValueError("not a positive finite number")


WEIGHTS = ("mu", "sigma", "gamma")

PARAMS = {  # what `--set` accepts (market_sim.parameters)
    "network": _Network(),
    "at": Choice("truth", "equilibrium", doc="the sellers report their costs or play the BNE"),
    "dist": Distribution(doc="the sellers' cost law (the network's training law)"),
    "sellers": Number(int, low=2, doc="sellers per market (the network's training size)"),
    "markets": Number(int, low=1, doc="markets drawn per task"),
    "audit_markets": Number(int, low=0, doc="markets the regret protocols run on (at truth)"),
    "reference_seed": Number(int, low=0, doc="seed of the BNE the sellers play"),
    "bne_samples": Number(int, low=1, doc="opponent draws of the BNE solver"),
    "bne_max_iter": Number(int, low=1, doc="best-response iterations of the BNE solver"),
    "mu": _Weight("weight of ||eps||_2 / sum(eps) in Eq. 11 (003)"),
    "sigma": _Weight("price of the privacy noise, sigma / sum(eps) in Eq. 11 (003)"),
    "gamma": _Weight("weight of the payments in Eq. 11 (003)"),
}


def grid(quick: bool = False) -> list[dict]:
    common = dict(
        network="regretnet-u01-m10",
        dist="uniform:0:1",
        sellers=10,
        markets=40 if quick else 500,
        audit_markets=2 if quick else 20,
        reference_seed=0,
        bne_samples=64 if quick else 256,
        bne_max_iter=4 if quick else 40,
        mu="network",
        sigma="network",
        gamma="network",
    )
    return [dict(common, at=at) for at in ("truth", "equilibrium")]


def network_path(network: str) -> Path:
    """The ``.onnx`` file ``network`` names (module docstring)."""
    if network in SHIPPED:  # a file beside market_sim.neural (its package data), not imported
        import market_sim

        return Path(market_sim.__file__).parent / "neural" / "networks" / SHIPPED[network]
    return Path(network)


_BNE: dict[tuple, object] = {}


def equilibrium(mech, params: dict):
    """The network's symmetric BNE for the task's market, cached per process and seeded
    by ``reference_seed`` alone (the same for every task of a run)."""
    key = tuple(
        params[k]
        for k in ("network", "dist", "sellers", "reference_seed", "bne_samples", "bne_max_iter")
    )
    if key not in _BNE:
        from market_sim.games.equilibrium import symmetric_bne

        _BNE[key] = symmetric_bne(
            mech,
            params["dist"],
            params["sellers"],
            rng=np.random.default_rng(params["reference_seed"]),
            samples=params["bne_samples"],
            max_iter=params["bne_max_iter"],
        )
    return _BNE[key]


def objective_weights(params: dict, net) -> dict[str, float]:
    """mu, sigma, gamma: the parameters', with ``network`` read from the network's file
    (``OnnxMechanism.objective_weights``); one line when the file does not record them."""
    trained = getattr(net, "objective_weights", None)
    if trained is None and any(params[k] == "network" for k in WEIGHTS):
        from market_sim.errors import MarketSimError

        raise MarketSimError(
            f"network {params['network']!r} does not record the objective it was trained on "
            "(ONNX metadata objective_weights): give --set mu=... --set sigma=... --set gamma=..."
        )
    recorded = dict(zip(WEIGHTS, trained or (), strict=False))
    return {k: float(recorded[k] if params[k] == "network" else params[k]) for k in WEIGHTS}


def market_outcomes(
    mech, reports: np.ndarray, costs: np.ndarray, weights: dict[str, float]
) -> dict[str, np.ndarray]:
    """Per market (rows of ``reports``): the objective (Eq. 11 of 003 with the payments
    and ``weights``),
    the total payment, the sellers' mean and least utility at true ``costs`` and the
    share of sellers whose utility is below -IR_TOL."""
    from market_sim.mechanisms.offline import buyer_loss

    keys = ("objective", "payment", "utility", "least", "losing")
    out: dict[str, list[float]] = {k: [] for k in keys}
    for r, c in zip(reports, costs, strict=True):
        o = mech.run(r)
        u = o.utilities(c)
        out["objective"].append(buyer_loss(o.eps, o.payments, **weights))
        out["payment"].append(float(np.sum(o.payments)))
        out["utility"].append(float(np.mean(u)))
        out["least"].append(float(np.min(u)))
        out["losing"].append(float(np.mean(u < -IR_TOL)))
    return {k: np.asarray(v) for k, v in out.items()}


def regrets(mech, law, costs: np.ndarray, rng: np.random.Generator) -> dict[str, float]:
    """The largest regret over the sellers of ``costs``'s markets by each protocol of
    ``market_sim.referee`` (module docstring); NaN without markets."""
    if costs.shape[0] == 0:
        return {"regret_ascent": math.nan, "regret_grid": math.nan, "regret_audit": math.nan}
    from market_sim.auditing import audit
    from market_sim.referee import gradient_ascent_regret, grid_regret

    ascent = max(float(gradient_ascent_regret(mech, c, law.support, rng).max()) for c in costs)
    on_grid = max(float(grid_regret(mech, c, law.support, rng).max()) for c in costs)
    result = audit(mech, law, costs.shape[1], costs.shape[0], rng, costs=costs)
    found = float(np.nanmax(result.table["max_gain"].to_numpy(dtype=float).clip(min=0.0)))
    return {"regret_ascent": ascent, "regret_grid": on_grid, "regret_audit": found}


def run(params: dict, rng: np.random.Generator) -> list[dict]:
    from market_sim.distributions import as_distribution
    from market_sim.mechanisms.base import as_mechanism

    law = as_distribution(params["dist"])
    m = params["sellers"]
    net = as_mechanism(f"onnx:{network_path(params['network'])}", dist=law, n_sellers=m)
    weights = objective_weights(params, net)
    offline = as_mechanism("offline", dist=law, n_sellers=m, **weights)
    costs = np.vstack([law.sample(m, rng) for _ in range(params["markets"])])
    # every row has every column (NaN where it does not apply), so that
    # pandas.read_parquet(DIR / "results") reads them all from any one task's file
    row: dict = dict(regrets(net, law, costs[:0], rng), bne_epsilon_relative=math.nan,
                     bne_converged=math.nan)  # fmt: skip
    row |= {f"objective_{k}": v for k, v in weights.items()}
    if params["at"] == "equilibrium":
        bne = equilibrium(net, params)
        reports = np.clip(bne.bid(costs), *law.support)
        row |= dict(
            bne_epsilon_relative=float(bne.epsilon_relative),
            bne_converged=float(bne.converged),  # 1 or 0 (NaN at truth)
        )
    else:
        reports = costs
        row |= regrets(net, law, costs[: params["audit_markets"]], rng)
    learned = market_outcomes(net, reports, costs, weights)
    best = market_outcomes(offline, costs, costs, weights)
    diff = learned["objective"] - best["objective"]
    return [
        dict(
            row,
            objective_learned=float(learned["objective"].mean()),
            objective_offline=float(best["objective"].mean()),
            objective_difference=float(diff.mean()),
            objective_difference_sd=float(diff.std(ddof=1)) if diff.size > 1 else math.nan,
            payment_learned=float(learned["payment"].mean()),
            payment_offline=float(best["payment"].mean()),
            seller_utility_learned=float(learned["utility"].mean()),
            seller_utility_offline=float(best["utility"].mean()),
            negative_utility_share=float(learned["losing"].mean()),
            min_utility_learned=float(learned["least"].min()),
        )
    ]
