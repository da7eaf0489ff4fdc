"""A researcher's own mechanism: a posted price with a cap on the sellers bought.

The platform posts a price ``price`` per unit of eps and can afford at most
``cap`` sellers.  Every seller whose report is at most the price accepts; when more
than ``cap`` accept, the platform keeps ``cap`` of them and each kept seller sells
eps = ``eps_level`` for ``price * eps_level``.

Which ``cap`` acceptors are kept decides whether it is truthful:

* ``keep="cheapest"`` (the tempting rule: the cheapest reports first) is **not
  incentive compatible**.  Proof: take a seller of cost c < price that is an
  acceptor but not among the ``cap`` lowest reports.  Truthful, it sells nothing
  (utility 0).  Reporting a cost below every other acceptor's report keeps it, and
  it is paid the posted price, not its report: utility (price - c) eps_level > 0.
  The audit finds such a witness whenever a market has more acceptors than ``cap``.
* ``keep="lottery"`` keeps a uniformly random set of ``cap`` acceptors (drawn
  from ``rng``).  It is incentive compatible in expectation: a seller's report only
  decides whether it accepts (report <= price), and its chance of being kept does
  not depend on how far below the price it reports; accepting pays
  (price - c) eps_level * P(kept) >= 0 exactly when c <= price, which a truthful
  report achieves.  It is individually rational (a kept seller has c <= price).

    market-sim audit --mechanism examples/capped_posted_price.py:CappedPostedPrice:keep=cheapest \\
        --dist beta:2:5:0:2 --sellers 30 --markets 20
"""

from __future__ import annotations

import numpy as np

from market_sim.errors import MarketSimError
from market_sim.mechanisms.base import Mechanism, Outcome

KEEPS = ("cheapest", "lottery")


class CappedPostedPrice(Mechanism):
    """Posted ``price`` per unit, at most ``cap`` sellers bought (``keep`` says which)."""

    name = "capped-posted-price"

    def __init__(
        self,
        price: float = 0.5,
        cap: int = 5,
        keep: str = "cheapest",
        eps_level: float = 1.0,
        dist=None,
    ):
        self.price, self.cap, self.eps_level = float(price), int(cap), float(eps_level)
        if keep not in KEEPS:
            raise MarketSimError(f"capped-posted-price: keep must be one of {KEEPS} (got {keep!r})")
        if not (self.price > 0 and self.cap >= 1 and self.eps_level > 0):
            raise MarketSimError("capped-posted-price: price, cap and eps_level must be > 0")
        self.keep = keep
        self.randomized = keep == "lottery"

    def outcome(self, reports, rng=None) -> Outcome:
        reports = np.asarray(reports, dtype=float)
        accept = np.flatnonzero(reports <= self.price)
        if accept.size > self.cap:
            if self.keep == "cheapest":
                accept = accept[np.argsort(reports[accept], kind="stable")[: self.cap]]
            else:
                if rng is None:
                    raise MarketSimError("capped-posted-price: keep=lottery needs rng=")
                accept = rng.choice(accept, self.cap, replace=False)
        eps = np.zeros(reports.size)
        eps[accept] = self.eps_level
        return Outcome(eps, self.price * eps, {"acceptors": int(np.sum(reports <= self.price))})
