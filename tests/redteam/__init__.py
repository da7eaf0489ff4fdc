"""The red-team corpus of the audit: mechanisms built to fool it, by class, each with its
truth proved in its docstring and its witnesses exact (``common.Case``).

``CASES`` lists them all; ``tests/test_redteam.py`` checks each truth by brute force
(``brute``) and runs ``market_sim.audit`` on each at two seeds; ``KNOWN_WRONG.md`` lists
the verdicts today's audit gets wrong (those tests are strict xfails);
``benchmarks/redteam_defaults.py`` runs the corpus at the audit's default settings.
docs/redteam.md has the table."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from market_sim.auditing import audit

from . import (
    earlier,
    fresh,
    hidden,
    interior,
    library,
    novel,
    population,
    rare,
    ripples,
    screened,
    structure,
    tolerance,
    twins,
    units,
    windows,
)
from .common import Case

MODULES = (
    earlier,
    library,
    tolerance,
    rare,
    interior,
    units,
    windows,
    population,
    novel,
    structure,
    twins,
    hidden,
    ripples,
    screened,
    fresh,
)
CASES: list[Case] = [c for m in MODULES for c in m.CASES]
KNOWN_WRONG_FILE = Path(__file__).with_name("KNOWN_WRONG.md")


SEEDS = (0, 1)
TEST_SETTINGS = dict(n_grid=17, n_random=16)  # the test's audit: smaller than the defaults


def run_audit(case: Case, seed: int, defaults: bool = False):
    """``market_sim.audit`` of ``case`` at ``seed``: the test's sizes and settings
    (``case.n_sellers`` x ``case.n_markets``, ``TEST_SETTINGS`` and ``case.settings``),
    or with ``defaults`` the audit's own (10 sellers x 20 markets; a population: its
    size)."""
    pop = "*" in case.law
    if defaults:
        n, k, settings = (None if pop else 10), 20, {}
    else:
        n, k = (None if pop else case.n_sellers), case.n_markets
        settings = {**TEST_SETTINGS, **case.settings}
    return audit(case.make(), case.law, n, k, np.random.default_rng(seed), **settings)


def known_wrong() -> dict[tuple[str, int], str]:
    """(mechanism, seed) -> what today's audit says instead, from KNOWN_WRONG.md's table
    (rows ``| mechanism | seed | given | right |``)."""
    rows = {}
    for line in KNOWN_WRONG_FILE.read_text(encoding="utf-8").splitlines():
        cells = [c.strip().strip("`") for c in line.strip().strip("|").split("|")]
        if len(cells) >= 4 and cells[1].isdigit():
            rows[(cells[0], int(cells[1]))] = f"gives {cells[2]}, right is {cells[3]}"
    return rows


assert len({c.name for c in CASES}) == len(CASES), "case names must be unique"
