"""Toy mechanisms shared by the tests and the benchmarks, written once.

Import from tests as ``from shared_mechanisms import ...`` (pytest puts ``tests/`` on the
path, as for ``bne_reference``); benchmarks put ``tests/`` on ``sys.path`` first (as
benchmarks/bne_conformance.py does).  Here, not in ``market_sim``: they are fixtures
of the tests (a user's mechanism as a user would write it), not part of the library.
"""

from __future__ import annotations

import numpy as np


class BatchedFirstPrice:
    """Single-unit first-price procurement written for a (B, n) batch of report
    vectors (``batched = True``) as well as for one: the lowest reports share the
    unit (eps = 1 / number of ties) and are paid their report."""

    batched = True

    def outcome(self, reports, rng=None):
        r = np.asarray(reports, dtype=float)
        won = r == r.min(axis=-1, keepdims=True)
        eps = won / won.sum(axis=-1, keepdims=True)
        return eps, r * eps
