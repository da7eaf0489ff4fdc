"""The multi-field compare resumes from its store (one task per mechanism) and draws its
figure, as the one-field compare does."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import numpy as np
import pytest

from market_sim.joint_report import COMPARE_FILES, compare_fields
from market_sim.mechanisms.base import Outcome
from market_sim.mechanisms.multifield import MultiFieldMechanism, PostedPricePerUnit

POP = "5*uniform:0:1;cap=uniform:0.1:5;size=integers:10:500"


@dataclass(frozen=True)
class Counted(MultiFieldMechanism):
    """A posted price 0.5 per unit (eps = min(cap, 1)) counting its runs."""

    name: ClassVar[str] = "counted"
    report_fields: ClassVar[tuple[str, ...]] = ("cost", "cap")
    runs: ClassVar[list] = [0]

    def outcome(self, reports, rng=None) -> Outcome:
        type(self).runs[0] += 1
        return PostedPricePerUnit(price=0.5).outcome(reports)


@dataclass(frozen=True)
class Interrupting(MultiFieldMechanism):
    """Pays nothing; raises KeyboardInterrupt (a Ctrl-C) while ``armed``."""

    name: ClassVar[str] = "interrupting"
    report_fields: ClassVar[tuple[str, ...]] = ("cost",)
    armed: ClassVar[list] = [True]

    def outcome(self, reports, rng=None) -> Outcome:
        if type(self).armed[0]:
            raise KeyboardInterrupt
        return Outcome(np.zeros(reports.shape), np.zeros(reports.shape))


def run(store):
    return compare_fields([Counted(), Interrupting()], POP, 3, np.random.default_rng(5),
                          field_grid=5, joint_grid=3, local_steps=1, store=store)  # fmt: skip


def test_an_interrupted_compare_resumes_without_redoing_a_finished_mechanism(tmp_path):
    store = tmp_path / "tasks"
    Counted.runs[0], Interrupting.armed[0] = 0, True
    with pytest.raises(KeyboardInterrupt):
        run(store)
    first = Counted.runs[0]
    assert first > 0 and len(list(store.glob("done-*.pkl"))) == 1
    Interrupting.armed[0] = False
    resumed = run(store)
    assert Counted.runs[0] == first  # the finished mechanism was read, not re-audited
    Counted.runs[0] = 0
    fresh = run(tmp_path / "other")
    assert Counted.runs[0] == first
    assert resumed.leaderboard.equals(fresh.leaderboard)
    assert resumed.markets.equals(fresh.markets)


def test_compare_writes_its_figure(tmp_path):
    Interrupting.armed[0] = False
    result = run(None)
    result.write(tmp_path)
    assert "compare.png" in COMPARE_FILES
    for name in COMPARE_FILES:
        assert (tmp_path / name).stat().st_size > 0
    assert (tmp_path / "compare.png").stat().st_size > 10_000
