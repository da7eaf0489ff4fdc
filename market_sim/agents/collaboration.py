"""The collaboration of 004 as a Mesa model: parties choose a DP level, share
perturbed sufficient statistics, and a mediator values coalitions and rewards them.

Stages per round: choose (each party its epsilon) -> share -> value (all
coalitions, Shapley) -> reward (rho-Shapley targets, realised by tempering or
noise addition) -> record.  A party's utility is its reward value (nats of
Bayesian surprise) minus privacy_cost x epsilon.  ``truthful`` parties use
their preferred epsilon; ``strategic`` ones best-respond on ``eps_grid`` to the
others' current choices, with the expected reward estimated over ``n_draws``
noise draws (common random numbers across the grid).
"""

from __future__ import annotations

import mesa
import numpy as np

from ..collaborative import GaussianMeanModel, SharedStatistic, rdp_noise_variance
from ..collaborative.rewards import CONTROLS, model_reward, target_rewards
from ..errors import MarketSimError

PARTY_STRATEGIES = ("truthful", "strategic")
EPS_GRID = tuple(np.geomspace(0.05, 20.0, 9))  # default candidate epsilons of a strategic party


class PartyAgent(mesa.Agent):
    def __init__(
        self,
        model,
        index: int,
        data: np.ndarray,
        eps_pref: float,
        privacy_cost: float,
        strategy: str,
    ):
        super().__init__(model)
        self.index, self.data = index, data
        self.eps_pref, self.privacy_cost, self.strategy = eps_pref, privacy_cost, strategy
        self.eps = eps_pref
        self.value_alone = self.shapley = self.reward = self.utility = np.nan
        self.similarity = np.nan

    def choose_privacy(self):
        if self.strategy == "strategic":
            self.eps = self.model.best_response(self)


class CollaborationModel(mesa.Model):
    """Parties with Gaussian data (``GaussianMeanModel``) collaborating under 004's scheme.

    ``sizes``: data points per party; ``eps_pref``: preferred epsilons;
    ``privacy_cost``: cost per unit of epsilon (default 0.1 / eps_pref, so a
    party that wants strong privacy finds it expensive to give up).
    """

    def __init__(
        self,
        sizes=(50, 100, 200),
        eps_pref=(1.0, 1.0, 1.0),
        privacy_cost=None,
        *,
        rho: float = 0.5,
        control: str = "temper",
        strategy: str = "truthful",
        rounds: int = 1,
        eps_grid=EPS_GRID,
        n_draws: int = 8,
        true_mean: float = 0.5,
        seed: int | None = None,
    ):
        sizes = [int(v) for v in sizes]
        eps_pref = [float(v) for v in eps_pref]
        if len(sizes) == 0 or len(sizes) != len(eps_pref):
            raise MarketSimError("sizes and eps_pref need one entry per party (at least one)")
        if min(sizes) < 1:
            raise MarketSimError("every party needs at least one data point")
        if not all(np.isfinite(e) and e > 0 for e in eps_pref):
            raise MarketSimError("every preferred epsilon must be a finite number > 0")
        if privacy_cost is None:
            privacy_cost = [0.1 / e for e in eps_pref]
        if len(privacy_cost) != len(sizes) or min(privacy_cost) < 0:
            raise MarketSimError("privacy_cost needs one number >= 0 per party")
        if strategy not in PARTY_STRATEGIES:
            raise MarketSimError(f"strategy: unknown {strategy!r}; use truthful or strategic")
        if control not in CONTROLS:
            raise MarketSimError(f"control: unknown {control!r}; use temper or noise")
        if not (0.0 <= rho <= 1.0):
            raise MarketSimError(f"rho must be in [0, 1] (got {rho!r})")
        grid = np.asarray(eps_grid, dtype=float)
        if grid.size == 0 or not np.all(np.isfinite(grid) & (grid > 0)):
            raise MarketSimError("eps_grid must be a non-empty list of epsilons > 0")
        super().__init__(rng=np.random.default_rng(seed))
        self.stat = GaussianMeanModel(data_var=1.0, prior_var=1.0, bound=3.0)
        self.rho, self.control, self.rounds = float(rho), control, int(rounds)
        self.eps_grid, self.n_draws = grid, int(n_draws)
        self.parties = [
            PartyAgent(self, i, self.rng.normal(true_mean, 1.0, n), e, float(c), strategy)
            for i, (n, e, c) in enumerate(zip(sizes, eps_pref, privacy_cost, strict=True))
        ]
        self.exact = [self.stat.sufficient_statistic(p.data) for p in self.parties]
        self.welfare = self.share_rational = self.negative_shapley = np.nan
        self.datacollector = mesa.DataCollector(
            model_reporters={
                "welfare": "welfare",
                "share_rational": "share_rational",
                "negative_shapley": "negative_shapley",
                "mean_eps": lambda m: float(np.mean([p.eps for p in m.parties])),
            },
            agent_reporters={
                k: k
                for k in (
                    "index",
                    "eps",
                    "eps_pref",
                    "privacy_cost",
                    "value_alone",
                    "shapley",
                    "reward",
                    "utility",
                    "similarity",
                )
            },
        )

    # ---- sharing and valuing ----------------------------------------------------------
    def _shared(self, eps, zeta) -> list[SharedStatistic]:
        out = []
        for (ss, n), e, z in zip(self.exact, eps, zeta, strict=True):
            var = rdp_noise_variance(self.stat.sensitivity, e)
            out.append(SharedStatistic(n, ss + np.sqrt(var) * z, var))
        return out

    def _targets(self, shared):
        return target_rewards(self.stat, shared, self.rho, negative="clip")

    def best_response(self, party: PartyAgent) -> float:
        """argmax over eps_grid of E[reward] - privacy_cost eps, others fixed."""
        eps = [p.eps for p in self.parties]
        draws = [self.rng.standard_normal((len(self.parties), 1)) for _ in range(self.n_draws)]
        best, best_u = party.eps, -np.inf
        for e in self.eps_grid:
            eps[party.index] = e
            r = np.mean([self._targets(self._shared(eps, z))[2][party.index] for z in draws])
            u = r - party.privacy_cost * e
            if u > best_u + 1e-12:
                best, best_u = float(e), u
        return best

    # ---- one round ------------------------------------------------------------------------
    def step(self):
        self.agents_by_type[PartyAgent].shuffle_do("choose_privacy")
        zeta = self.rng.standard_normal((len(self.parties), 1))
        shared = self._shared([p.eps for p in self.parties], zeta)
        values, phi, targets = self._targets(shared)
        self.negative_shapley = int(np.sum(phi < 0))
        for p, t in zip(self.parties, targets, strict=True):
            p.value_alone = values[1 << p.index]
            p.shapley = float(phi[p.index])
            reward = model_reward(self.stat, shared, t, self.control, self.rng)
            p.reward = reward.attained
            p.similarity = reward.similarity
            p.utility = p.reward - p.privacy_cost * p.eps
        self.welfare = float(sum(p.reward for p in self.parties))
        self.share_rational = float(
            np.mean([p.reward >= p.value_alone - 1e-9 for p in self.parties])
        )
        self.datacollector.collect(self)

    def run(self):
        for _ in range(self.rounds):
            self.step()
        model_df = self.datacollector.get_model_vars_dataframe().reset_index(drop=True)
        model_df.insert(0, "round", np.arange(1, len(model_df) + 1))
        agents = self.datacollector.get_agent_vars_dataframe().reset_index()
        agents = agents.rename(columns={"Step": "round"}).drop(columns=["AgentID"])
        return model_df, agents
