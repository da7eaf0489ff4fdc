"""The Mesa market: seller agents who decide what to report, a platform that runs a mechanism.

Each round has explicit stages: arrival -> report -> allocate -> settle ->
learn, then the DataCollector records the round.
"""

from __future__ import annotations

import mesa
import numpy as np

from ..distributions import CostDistribution, parse_distribution
from ..errors import MarketSimError
from ..mechanisms.offline import proxy_loss_of_eps
from ..privacy.release import StatisticRelease
from .markets import Market
from .strategies import STRATEGIES, Colluder, CollusionGroup, Truthful, make_strategy


def synthetic_data(n: int, d: int, rng: np.random.Generator, n_test: int = 2000,
                   label_noise: float = 0.05):
    """Rows with ||x|| <= 1 and labels from a fixed linear rule with flipped noise."""
    w = np.ones(d) / np.sqrt(d)

    def draw(k):
        X = rng.standard_normal((k, d)) / np.sqrt(d)
        X /= np.maximum(1.0, np.linalg.norm(X, axis=1))[:, None]
        y = (X @ w > 0).astype(int)
        flip = rng.random(k) < label_noise
        return X, np.where(flip, 1 - y, y)

    X, y = draw(n)
    X_test, y_test = draw(n_test)
    return X, y, X_test, y_test


class SellerAgent(mesa.Agent):
    """A seller with a private cost, a reporting strategy and a participation rule."""

    def __init__(self, model, cost: float, strategy, index: int):
        super().__init__(model)
        self.cost, self.strategy = float(cost), strategy
        self.seller_id = index  # stable id
        self.index = index      # position among this round's participants
        self.report = self.cost
        self.eps = self.payment = self.utility = 0.0
        self.regret = np.nan
        self.participating = True

    def arrive(self):
        """Participation rule: stay out after a round with negative utility."""
        self.participating = self.utility >= -self.model.tol

    def decide_report(self):
        if self.participating:
            self.report = float(self.strategy.report(self, self.model))

    def learn(self):
        if self.participating:
            self.strategy.observe(self, self.model, self.utility)


OWN_REPORT_INCLUSION = ("online", "posted-price", "private-posted-price", "private-cutoff")


class PlatformAgent(mesa.Agent):
    """Collects the reports, runs the model's market (``model.market``), pays, and
    records the buyer's outcome."""

    def __init__(self, model, test_data=None, reg_lambda: float = 1e-2):
        super().__init__(model)
        self.test_data = test_data
        self.reg_lambda = reg_lambda
        self.proxy_loss = np.nan
        self.total_payment = 0.0
        self.test_error = np.nan
        self.released_payment = self.released_n_bought = np.nan

    def train(self, sellers):
        """Fit the private model on the bought sellers' data with their eps (Alg. 1)."""
        if self.test_data is None:
            return
        from ..learning import HeteroDPLogisticRegression

        eps = np.array([s.eps for s in sellers])
        X = np.array([s.x for s in sellers])
        y = np.array([s.y for s in sellers])
        bought = eps > 0
        if not bought.any() or np.unique(y[bought]).size < 2:
            self.test_error = np.nan
            return
        clf = HeteroDPLogisticRegression(eps[bought], reg_lambda=self.reg_lambda,
                                         random_state=self.model.rng)
        clf.fit(X[bought], y[bought])
        X_test, y_test = self.test_data
        self.test_error = float(1.0 - clf.score(X_test, y_test))

    def allocate_and_settle(self, sellers):
        reports = np.array([s.report for s in sellers])
        eps, pay = self.model.market.outcome(reports)
        for s, e, t in zip(sellers, eps, pay):
            s.eps, s.payment = float(e), float(t)
            s.utility = s.payment - s.cost * s.eps
        self.total_payment = float(pay.sum())
        psi = self.model.market.dist.virtual_cost(np.array([s.cost for s in sellers]))
        self.proxy_loss = proxy_loss_of_eps(eps, psi, **self.model.market.params)
        self.publish(eps, pay)

    def publish(self, eps, pay):
        """Release the total payment and the number bought through ``model.release``.

        The total payment is clipped to [0, payment_bound]; as one report can move
        every seller's payment, its sensitivity is the whole range.  The number
        bought has sensitivity 1 where, given the (possibly privately drawn) price
        or cut-off, each seller's inclusion depends on its own report alone; else
        it is the range, the number of participants.  Each release spends
        ``release.epsilon`` (basic composition: 2 epsilon in all per round)."""
        rel = self.model.release
        if rel is None:
            return
        rng = self.model.rng
        self.released_payment = rel.release(float(pay.sum()), rng, lower=0.0,
                                            upper=self.model.payment_bound).value
        own_report_only = self.model.market.mechanism in OWN_REPORT_INCLUSION
        self.released_n_bought = rel.release(
            float(np.count_nonzero(eps)), rng, lower=0.0, upper=float(eps.size),
            sensitivity=1.0 if own_report_only else float(max(eps.size, 1))).value


class MarketModel(mesa.Model):
    """Repeated rounds of one market.

    ``strategy`` is given to a fraction ``strategic_fraction`` of the sellers
    (the others are truthful).  ``mechanism`` is one of ``MECHANISMS``
    (``privacy`` is the epsilon of the private ones' random choice).
    ``release`` (with ``payment_bound``) publishes noisy round statistics.  With ``measure_regret`` every seller's regret
    (best utility on a report grid minus actual utility) is computed each round.
    """

    def __init__(self, n_sellers: int = 20, *, dist="uniform:0:1", mechanism: str = "offline",
                 strategy: str = "truthful", strategic_fraction: float = 1.0, rounds: int = 3,
                 mu: float = 1.0, sigma: float = 1.0, gamma: float = 1.0, xi: float = 1.0,
                 new_costs_each_round: bool = False, measure_regret: bool = True,
                 n_grid: int = 11, collusion_size: int = 3, data=None, privacy: float = 1.0,
                 release: StatisticRelease | None = None, payment_bound: float | None = None,
                 seed: int | None = None):
        if not (isinstance(n_sellers, (int, np.integer)) and n_sellers >= 1):
            raise MarketSimError(f"n_sellers must be an integer >= 1 (got {n_sellers!r})")
        if not (isinstance(rounds, (int, np.integer)) and rounds >= 1):
            raise MarketSimError(f"rounds must be an integer >= 1 (got {rounds!r})")
        if not (0 < xi <= 1):
            raise MarketSimError(f"xi must be in (0, 1] (got {xi!r})")
        if not (0 <= strategic_fraction <= 1):
            raise MarketSimError(f"strategic_fraction must be in [0, 1] (got {strategic_fraction!r})")
        if strategy not in STRATEGIES:
            raise MarketSimError(f"strategy: unknown {strategy!r}; use one of {', '.join(STRATEGIES)}")
        if release is not None and not (isinstance(payment_bound, (int, float))
                                        and np.isfinite(payment_bound) and payment_bound > 0):
            raise MarketSimError("release needs payment_bound > 0: the public cap that the "
                                 "released total payment is clipped to")
        super().__init__(rng=np.random.default_rng(seed))
        self.release, self.payment_bound = release, payment_bound
        self.dist = dist if isinstance(dist, CostDistribution) else parse_distribution(dist)
        self.market = Market.build(mechanism, self.dist, mu=mu, sigma=sigma, gamma=gamma,
                                   planned_m=n_sellers, privacy=privacy, rng=self.rng)
        self.rounds, self.xi, self.tol = int(rounds), float(xi), 1e-9
        self.new_costs, self.measure_regret, self.n_grid = new_costs_each_round, measure_regret, n_grid
        costs = self.dist.sample(n_sellers, self.rng)
        n_strategic = int(round(strategic_fraction * n_sellers))
        self.group = None
        if strategy == "collusion":
            self.group = CollusionGroup(members=[])
        self.sellers = []
        for i, c in enumerate(costs):
            if i < n_strategic:
                strat = Colluder(group=self.group) if strategy == "collusion" else make_strategy(strategy)
            else:
                strat = Truthful()
            self.sellers.append(SellerAgent(self, c, strat, i))
        if self.group is not None:
            self.group.members = [s for s in self.sellers[:min(collusion_size, n_strategic)]]
            for s in self.sellers[len(self.group.members):n_strategic]:
                s.strategy = Truthful()
        test_data = None
        if data is not None:
            if isinstance(data, str) and data == "synthetic":
                data = synthetic_data(n_sellers, 5, self.rng)
            try:
                X, y, X_test, y_test = (np.asarray(v) for v in data)
            except (TypeError, ValueError):
                raise MarketSimError("data must be 'synthetic' or (X, y, X_test, y_test)") from None
            if len(X) != n_sellers or len(y) != n_sellers:
                raise MarketSimError(f"data: {len(X)} rows for {n_sellers} sellers; "
                                     "give one (x, y) per seller")
            for sel, xi_, yi_ in zip(self.sellers, X, y):
                sel.x, sel.y = xi_, yi_
            test_data = (X_test, y_test)
        if mechanism == "data-dependent" and test_data is None:
            raise MarketSimError("mechanism data-dependent needs the sellers' data: pass data= "
                                 "(or --data on the command line)")
        self.platform = PlatformAgent(self, test_data)
        self.datacollector = mesa.DataCollector(
            model_reporters={
                "proxy_loss": lambda m: m.platform.proxy_loss,
                "total_payment": lambda m: m.platform.total_payment,
                "released_payment": lambda m: m.platform.released_payment,
                "released_n_bought": lambda m: m.platform.released_n_bought,
                "test_error": lambda m: m.platform.test_error,
                "mean_regret": lambda m: float(np.nanmean([s.regret for s in m.active()]))
                if m.measure_regret else np.nan,
                "max_regret": lambda m: float(np.nanmax([s.regret for s in m.active()]))
                if m.measure_regret else np.nan,
                "participation": lambda m: np.mean([s.participating for s in m.sellers]),
                "share_misreporting": lambda m: np.mean([abs(s.report - s.cost) > 1e-12
                                                         for s in m.active()]),
            },
            agent_reporters={
                "seller_id": lambda a: getattr(a, "seller_id", None),
                "cost": lambda a: getattr(a, "cost", None),
                "report": lambda a: getattr(a, "report", None),
                "eps": lambda a: getattr(a, "eps", None),
                "payment": lambda a: getattr(a, "payment", None),
                "utility": lambda a: getattr(a, "utility", None),
                "regret": lambda a: getattr(a, "regret", None),
            },
        )

    # ---- helpers used by the strategies ------------------------------------------
    def active(self):
        return [s for s in self.sellers if s.participating]

    def current_reports(self) -> np.ndarray:
        return np.array([s.report for s in self.active()])

    def report_grid(self, cost: float, n: int) -> np.ndarray:
        """The true cost first, then the midpoints of n equal cells of the support
        (the bottom itself is avoided: at a support starting at 0, psi = 0 there)."""
        lo, hi = self.dist.support
        return np.concatenate(([cost], lo + (hi - lo) * (np.arange(n) + 0.5) / n))

    # ---- one round -----------------------------------------------------------------
    def step(self):
        sellers = self.sellers
        # arrival
        if self.new_costs and self.steps > 1:
            for s, c in zip(sellers, self.dist.sample(len(sellers), self.rng)):
                s.cost = float(c)
        for s in sellers:
            s.arrive()
        if self.xi < 1:
            absent = self.rng.random(len(sellers)) >= self.xi
            for s, out in zip(sellers, absent):
                s.participating = s.participating and not out
        active = self.active()
        for k, s in enumerate(active):
            s.index = k
        if self.market.mechanism == "data-dependent" and active:
            self.market = self.market.with_data([s.x for s in active], [s.y for s in active])
        for s in sellers:
            if not s.participating:  # out this round: nothing sold, nothing paid
                s.eps = s.payment = s.utility = 0.0
                s.regret = np.nan
        if not active:
            raise MarketSimError("no seller participates in this round")
        # report
        if self.group is not None:
            self.group.members = [s for s in self.group.members if s.participating]
            if self.group.members:
                self.group.decide(self)
        self.agents_by_type[SellerAgent].select(lambda a: a.participating).shuffle_do("decide_report")
        # allocate and settle
        self.platform.allocate_and_settle(active)
        # learn (sellers) and train (platform)
        for s in active:
            s.learn()
        self.platform.train(active)
        if self.measure_regret:
            reports = self.current_reports()
            for s in active:
                grid = self.report_grid(s.cost, self.n_grid)
                best = float(np.max(self.market.utilities(s.index, grid, s.cost, reports)))
                actual = (float(self.market.utilities(s.index, [s.report], s.cost, reports)[0])
                          if self.market.randomized else s.utility)  # expectation vs expectation
                s.regret = max(best - actual, 0.0)
        self.datacollector.collect(self)

    def run(self):
        for _ in range(self.rounds):
            self.step()
        return self.model_frame(), self.agent_frame()

    def model_frame(self):
        df = self.datacollector.get_model_vars_dataframe().reset_index(drop=True)
        df.insert(0, "round", np.arange(1, len(df) + 1))
        return df

    def agent_frame(self):
        df = self.datacollector.get_agent_vars_dataframe().reset_index()
        df = df[df.seller_id.notna()].rename(columns={"Step": "round"}).drop(columns=["AgentID"])
        df["seller_id"] = df.seller_id.astype(int)
        return df.reset_index(drop=True)
