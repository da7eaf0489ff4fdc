"""The Mesa market's agents: a seller, a view on one row of the model's columnar seller
arrays, and the platform that runs the mechanism, settles, trains and publishes."""

from __future__ import annotations

import mesa
import numpy as np

from ..mechanisms.offline import buyer_loss, proxy_loss_of_eps
from ..privacy.limit import privacy_cost
from .strategies import Strategy


def _view(column: str, kind=float):
    def get(self):
        return kind(getattr(self.model, column)[self.seller_id])

    def put(self, value):
        getattr(self.model, column)[self.seller_id] = value

    return property(get, put, doc=f"``model.{column}[seller_id]``")


class SellerAgent(mesa.Agent):
    """A seller: a view on row ``seller_id`` of the model's seller arrays."""

    def __init__(self, model, seller_id: int):
        super().__init__(model)
        self.seller_id = int(seller_id)

    cost = _view("cost")
    group = _view("group", int)  # the seller's class in the population
    report = _view("report")
    eps = _view("eps")
    payment = _view("payment")
    utility = _view("utility")
    regret = _view("regret")
    external_regret = _view("external_regret")
    participating = _view("participating", bool)
    index = _view("position", int)  # position among this round's participants

    @property
    def eps_spent(self) -> float:
        """Composed privacy loss so far (NaN without a budget)."""
        led = self.model.ledger
        return np.nan if led is None else float(led.spent[self.seller_id])

    @property
    def budget_left(self) -> float:
        led = self.model.ledger
        return np.nan if led is None else float(led.left[self.seller_id])

    @property
    def strategy(self) -> Strategy:
        return self.model.strategy_of(self.seller_id)

    @property
    def strategy_name(self) -> str:
        return self.model.strategy_names[self.model.strategy_id[self.seller_id]]

    @property
    def x(self):
        return None if self.model.X is None else self.model.X[self.seller_id]

    @property
    def y(self):
        return None if self.model.y is None else self.model.y[self.seller_id]


class PlatformAgent(mesa.Agent):
    """Runs the mechanism on the reports, pays, trains, and records the buyer's outcome."""

    def __init__(self, model, test_data=None, reg_lambda: float = 1e-2):
        super().__init__(model)
        self.test_data = test_data
        self.reg_lambda = reg_lambda
        self.buyer_loss = np.nan  # Eq. 11 (003) with the payments made: what the buyer loses
        self.proxy_loss = np.nan  # Eq. 11 with the virtual costs psi_i(c_i) of the true costs
        self.total_payment = 0.0
        self.n_bought = 0
        self.test_error = np.nan
        self.released_payment = self.released_n_bought = np.nan

    def allocate(self, reports: np.ndarray):
        """The mechanism's eps and payments for this round's reports."""
        return self.model.mechanism.run(reports, self.model.rng)

    def settle(self, active: np.ndarray, outcome) -> None:
        m = self.model
        m.eps[active], m.payment[active] = outcome.eps, outcome.payments
        if m.ledger is None:
            m.utility[active] = outcome.payments - privacy_cost(m.cost[active], outcome.eps)
        else:  # cost = c_i x the increase of the composed loss (docs/ledger.md)
            ids = np.arange(m.n_sellers)[active]
            m.loss_increase[:] = 0.0
            m.loss_increase[ids] = m.ledger.charge(ids, outcome.eps)
            m.utility[active] = outcome.payments - privacy_cost(
                m.cost[active], m.loss_increase[active]
            )
            m._exhausted = m.ledger.exhausted()
        self.total_payment = float(outcome.payments.sum())
        self.n_bought = int(np.count_nonzero(outcome.eps))
        kw = dict(mu=m.mu, sigma=m.sigma, gamma=m.gamma)
        self.buyer_loss = buyer_loss(outcome.eps, outcome.payments, **kw)
        self.proxy_loss = proxy_loss_of_eps(outcome.eps, m.virtual_costs(active), **kw)
        self.publish(outcome.eps, outcome.payments)

    def train(self, active: np.ndarray) -> None:
        """Fit the private model on the bought sellers' data with their eps (Alg. 1)."""
        m = self.model
        if self.test_data is None:
            return
        from ..learning import HeteroDPLogisticRegression

        eps = m.eps[active]
        X, y = m.X[active], m.y[active]
        bought = eps > 0
        if not bought.any() or np.unique(y[bought]).size < 2:
            self.test_error = np.nan
            return
        clf = HeteroDPLogisticRegression(
            eps[bought], reg_lambda=self.reg_lambda, random_state=m.rng
        )
        clf.fit(X[bought], y[bought])
        X_test, y_test = self.test_data
        self.test_error = float(1.0 - clf.score(X_test, y_test))

    def publish(self, eps, pay):
        """Release the total payment and the number bought through ``model.release``.

        The total payment is clipped to [0, payment_bound]; as one report can move
        every seller's payment, its sensitivity is the whole range.  The number
        bought has sensitivity 1 where, given the (possibly privately drawn) price
        or cut-off, each seller's inclusion depends on its own report alone
        (``mechanism.own_report_inclusion``); else it is the range, the number of
        participants.  Each release spends ``release.epsilon`` (basic composition:
        2 epsilon in all per round)."""
        rel = self.model.release
        if rel is None:
            return
        rng = self.model.rng
        self.released_payment = rel.release(
            float(pay.sum()), rng, lower=0.0, upper=self.model.payment_bound
        ).value
        own_report_only = bool(getattr(self.model.mechanism, "own_report_inclusion", False))
        self.released_n_bought = rel.release(
            float(np.count_nonzero(eps)),
            rng,
            lower=0.0,
            upper=float(eps.size),
            sensitivity=1.0 if own_report_only else float(max(eps.size, 1)),
        ).value
