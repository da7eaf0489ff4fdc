"""Friction a newcomer met (issues #42 item 5 and #43): answers without ``--out``,
audit labels that say what they count, and the audit's estimate timed on the
mechanism itself."""

import os

import numpy as np
import pytest

from market_sim.auditing import audit
from market_sim.cli import main
from market_sim.estimates import FirstMarketEstimate
from market_sim.mechanisms.base import Mechanism

DIST = "uniform:1:5"

# each command at a small size, and a line its printed answer must contain
QUICK = {
    "audit": (
        ["audit", "--mechanism", "pay-as-bid", "--dist", DIST, "--sellers", "3"]
        + ["--markets", "2", "--grid", "5", "--random", "4", "--no-refine"],
        "verdict",
    ),
    "compare": (
        ["compare", "--mechanism", "offline", "--mechanism", "pay-as-bid", "--dist", DIST]
        + ["--sellers", "5", "--markets", "2", "--no-audit"],
        "| rank | mechanism |",
    ),
    "egta": (
        ["egta", "--mechanism", "pay-as-bid", "--dist", DIST, "--sellers", "4"]
        + ["--strategy", "truthful", "--strategy", "shade:factor=1.2", "--samples", "2"]
        + ["--players", "2", "--boot", "20"],
        "equilibri",
    ),
    "bne": (
        ["bne", "--mechanism", "pay-as-bid", "--dist", DIST, "--sellers", "3"]
        + ["--samples", "32", "--max-iter", "2", "--grid", "5", "--check-grid", "5"]
        + ["--eval-grid", "4"],
        "epsilon",
    ),
    "psro": (
        ["psro", "--mechanism", "pay-as-bid", "--dist", DIST, "--sellers", "2"]
        + ["--iterations", "1", "--markets", "32"],
        "regret 1",
    ),
}


@pytest.mark.parametrize("command", sorted(QUICK))
@pytest.mark.parametrize("quiet", [False, True])
def test_without_out_the_answer_is_printed_and_nothing_written(
    command, quiet, tmp_path, monkeypatch, capsys
):
    monkeypatch.chdir(tmp_path)
    argv, needle = QUICK[command]
    code = main(argv + (["--quiet"] if quiet else []))
    assert code in (0, 3)  # audit: pay-as-bid is not IC
    out = capsys.readouterr().out
    assert needle in out
    assert "written to" not in out
    assert os.listdir(tmp_path) == []


def test_with_out_the_folder_is_written_as_before(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    argv, needle = QUICK["audit"]
    assert main(argv + ["--out", "a", "--quiet"]) == 3
    out = capsys.readouterr().out
    assert needle in out and "written to a" in out
    assert sorted(os.listdir(tmp_path / "a")) == ["audit.csv", "audit.png", "summary.json"]


# ---- the audit's labels ------------------------------------------------------------------
def _row(text: str, label: str) -> str:
    """The value printed after ``label`` in a two-column table."""
    lines = [ln for ln in text.splitlines() if ln.startswith(label + " ")]
    assert len(lines) == 1, (label, text)
    return lines[0][len(label) :].strip()


def test_audit_labels_say_what_they_count():
    """Sellers are counted against markets x sellers, random reports against markets x
    sellers x --random: pay-as-bid (3 x 4 sellers, 5 random reports each) has its own
    numbers in each line, and the old labels, which read as one share twice, are gone."""
    r = audit("pay-as-bid", DIST, 4, 3, np.random.default_rng(1), n_grid=5, n_random=5)
    s, text = r.summary, r.format()
    assert s["n_random_reports"] == 3 * 4 * 5
    sellers = _row(text, "sellers with a profitable misreport")
    assert sellers.startswith(f"{s['n_profitable']} of 12 (share ")
    reports = _row(text, "random reports that gain > tol")
    assert reports.startswith(f"{s['n_profitable_random']} of 60 (share, 95% upper: ")
    assert f"{s['profitable_share_upper']:.3g}" in reports
    assert _row(text, "sellers violating IR").startswith(f"{s['ir_violations']} of 12 ")
    for old in ("share profitable", "profitable share, 95% upper", "IR share, 95% upper"):
        assert old not in text


# ---- the estimate, timed on the mechanism ------------------------------------------------
class SlowByWork(Mechanism):
    """IC (each seller alone, eps linear, Myerson payments) and slow by work: every call
    adds the market's size to ``work``, the clock of the test (no sleeping)."""

    def __init__(self):
        self.work = 0

    def outcome(self, reports, rng=None):
        r = np.asarray(reports, dtype=float)
        self.work += r.size
        eps = (5.0 - r) / 4.0
        return eps, r * eps + (5.0 - r) ** 2 / 8.0


def test_first_market_estimate_is_first_times_the_rest_and_reports_once():
    times = iter([10.0, 13.0, 20.0, 30.0])
    lines: list[str] = []
    est = FirstMarketEstimate(5, lines.append, clock=lambda: next(times))
    for done in range(3):
        est(done)
    assert est.first_seconds == 3.0 and est.remaining_seconds() == 12.0
    assert lines == [
        "audit: the first of 5 markets took about 3.0 s; the other 4 estimated at "
        "about 12 s (timed on this mechanism)"
    ]
    single: list[str] = []
    one = FirstMarketEstimate(1, single.append, clock=iter([0.0, 1.0]).__next__)
    one(0)
    one(1)
    assert single == []


def test_audit_estimate_of_a_slow_mechanism_is_within_a_factor_of_the_truth():
    """The clock counts the toy's work (sellers evaluated), so the truth is the work of
    the markets after the first; the cost model, which prices a generic call at tens of
    microseconds, cannot know it."""
    mech = SlowByWork()
    lines: list[str] = []
    est = FirstMarketEstimate(4, lines.append, clock=lambda: mech.work * 1e-3)
    marks = {}

    def on_market(done):
        est(done)
        marks[done] = mech.work * 1e-3

    audit(mech, DIST, 5, 4, np.random.default_rng(0), n_grid=5, n_random=4, on_market=on_market)
    truth = marks[4] - marks[1]
    assert sorted(marks) == [0, 1, 2, 3, 4] and truth > 0
    assert 0.5 <= est.remaining_seconds() / truth <= 2.0
    assert len(lines) == 1 and "the first of 4 markets" in lines[0]


def test_the_cli_prints_the_timed_estimate(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    argv, _ = QUICK["audit"]
    assert main(argv) == 3
    err = capsys.readouterr().err
    assert "the first of 2 markets took" in err and "(timed on this mechanism)" in err


@pytest.mark.parametrize("command", sorted(QUICK))
def test_the_summary_records_the_seed(command, tmp_path, monkeypatch):
    """Every summary.json says which seed made it (psro's did not)."""
    import json

    monkeypatch.chdir(tmp_path)
    argv, _ = QUICK[command]
    assert main(argv + ["--seed", "11", "--out", "o", "--quiet"]) in (0, 3)
    summary = json.loads((tmp_path / "o" / "summary.json").read_text())
    assert summary.get("seed", summary.get("options", {}).get("seed")) == 11
