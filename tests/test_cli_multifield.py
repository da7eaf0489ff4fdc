"""``market-sim audit`` and ``compare`` with sellers of several fields (docs/multifield.md)."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from market_sim.cli import main
from market_sim.joint_report import is_multifield
from market_sim.mechanisms.multifield import as_multifield_mechanism
from market_sim.multifield import MultiFieldPopulation, records

POP = "5*uniform:0:1;cap=uniform:0.1:5;size=integers:10:500"
SMALL = ["--markets", "3", "--grid", "5", "--quiet"]
PAC = "fair-query-caps:scale=1:respect_caps=False"


def _profile(table: pd.DataFrame, market: int) -> np.ndarray:
    rows = table[table.market == market].sort_values("seller")
    return records(cost=rows.cost, cap=rows.cap, size=rows["size"])


def _utility(mech, profile, truth, seller) -> float:
    """t - c eps of ``seller`` with true record ``truth``; -inf above its cap (by hand)."""
    out = mech.run(profile)
    eps, pay = float(out.eps[seller]), float(out.payments[seller])
    return -np.inf if eps > truth["cap"] * (1 + 1e-9) else pay - truth["cost"] * eps


def test_a_multi_field_population_or_mechanism_takes_the_joint_audit():
    assert is_multifield(POP, ["offline"])
    assert is_multifield("5*uniform:0:1;private=cost", ["offline"])
    assert is_multifield("5*uniform:0:1", ["csra:budget=5"])
    assert not is_multifield("5*uniform:0:1;rho=0.5;data=gaussian", ["offline"])
    assert not is_multifield(None, ["offline", "posted-price:price=0.5"])


def test_audit_of_csra_finds_a_gain_the_table_re_runs(tmp_path, capsys):
    """CSRA pays in proportion to the reported cap: not IC.  The witness row of
    audit.csv is re-run here, by hand, on the market rebuilt from the table."""
    out = tmp_path / "a"
    argv = ["audit", "--mechanism", "csra:budget=5", "--population", POP, *SMALL]
    assert main([*argv, "--out", str(out)]) == 3
    printed = capsys.readouterr().out
    assert "verdict                                 not_ic" in printed
    assert "not IC: seller" in printed and "Not certified" in printed
    table = pd.read_csv(out / "audit.csv")
    summary = json.loads((out / "summary.json").read_text())
    assert summary["verdict"] == "not_ic" and (out / "audit.png").stat().st_size > 0
    assert table.shape[0] == 15 and summary["n_profitable"] == int((table.max_gain > 1e-9).sum())
    best = table.loc[table.max_gain.idxmax()]
    m, i = int(best.market), int(best.seller)
    truth = _profile(table, m)
    lie = truth.copy()
    lie[i]["cost"], lie[i]["cap"] = best.best_cost, best.best_cap
    mech = as_multifield_mechanism("csra:budget=5")
    gain = _utility(mech, lie, truth[i], i) - _utility(mech, truth, truth[i], i)
    assert gain == pytest.approx(best.max_gain, rel=1e-9) and gain > 0
    assert summary["max_gain"] == pytest.approx(gain, rel=1e-9)
    # the verdict's witness is the strongest finite gain, drawn market or opponent profile
    against = table.profile_max_gain[np.isfinite(table.profile_max_gain)].max()
    assert summary["profile_max_gain"] == pytest.approx(against)
    strongest = max(summary["max_gain"], summary["profile_max_gain"])
    assert f"(gain {strongest:.6g})" in summary["ic_statement"]


def test_audit_of_a_mechanism_proved_truthful_exits_0(capsys):
    argv = ["audit", "--mechanism", "cap-threshold:k=2", "--population", POP, *SMALL]
    assert main(argv) == 0
    printed = capsys.readouterr().out
    assert "no profitable misreport of cost, cap" in printed and "IR on these markets" in printed


def test_pac_exceeds_small_caps_not_ir_and_the_table_says_which(tmp_path):
    """PAC sells eps = 1/(n - k) whatever the caps; with caps in [0.1, 0.3] and n = 5
    every winner's eps >= 1/4 > 0.3 or not: the table's cap_exceeded is eps > cap,
    checked here by re-running each market."""
    pop = "5*uniform:0:1;cap=uniform:0.1:0.3"
    out = tmp_path / "pac"
    assert main(["audit", "--mechanism", PAC, "--population", pop, *SMALL, "--out", str(out)]) == 3
    table = pd.read_csv(out / "audit.csv")
    mech = as_multifield_mechanism(PAC)
    for m in range(3):
        rows = table[table.market == m].sort_values("seller")
        eps = mech.run(records(cost=rows.cost, cap=rows.cap)).eps
        assert list(rows.cap_exceeded) == list(eps > rows.cap.to_numpy() * (1 + 1e-9))
    assert table.cap_exceeded.any()
    assert (table.truthful_utility[table.cap_exceeded] == -np.inf).all()
    # every such seller escapes by a cost high enough to lose (eps = 0)
    assert table.escaping[table.cap_exceeded].all()


def test_compare_ranks_on_the_same_markets_with_paired_intervals(tmp_path):
    """The paired row is the t interval of the per-market differences of markets.csv
    (scipy's ttest_rel), and the markets are the population's first draw."""
    out = tmp_path / "c"
    argv = ["compare", "--population", POP, "--mechanism", "csra:budget=5"]
    argv += ["--mechanism", "cap-threshold:k=2", "--mechanism", "posted-price-caps"]
    argv += ["--markets", "4", "--grid", "5", "--quiet", "--seed", "3", "--out", str(out)]
    assert main(argv) == 0
    board = pd.read_csv(out / "leaderboard.csv")
    assert list(board.ic) == ["no gain found", "no gain found", "not IC"]
    assert board.mechanism.iloc[-1] == "csra:budget=5"
    assert board.objective.iloc[0] <= board.objective.iloc[1]
    markets = pd.read_csv(out / "markets.csv")
    paired = pd.read_csv(out / "paired.csv").set_index("mechanism")
    base = markets[markets.mechanism == "csra:budget=5"].objective.to_numpy()
    other = markets[markets.mechanism == "posted-price-caps"].objective.to_numpy()
    ci = stats.ttest_rel(other, base).confidence_interval(0.95)
    row = paired.loc["posted-price-caps"]
    assert row.objective_diff == pytest.approx(np.mean(other - base))
    assert (row.objective_diff_low, row.objective_diff_high) == pytest.approx((ci.low, ci.high))
    types = MultiFieldPopulation.parse(POP).draw(4, np.random.default_rng(3))
    spend = as_multifield_mechanism("cap-threshold:k=2").run(types).payments.sum(axis=-1)
    got = markets[markets.mechanism == "cap-threshold:k=2"].payment.to_numpy()
    assert got == pytest.approx(spend)


@pytest.mark.parametrize(
    "argv, words",
    [
        (["audit", "--mechanism", "csra", "--population", POP, "--coalition", "2"], "--coalition"),
        (["audit", "--mechanism", "csra", "--population", POP, "--sellers", "7"], "conflicts"),
        (["audit", "--mechanism", "csra", "--population", "5*uniform:0:1;cap=uniform:0:1"], "> 0"),
        (["compare", "--mechanism", "csra", "--mechanism", "csra", "--population", POP], "once"),
        (["compare", "--mechanism", "csra", "--population", POP, "--no-audit"], "--no-audit"),
        (["compare", "--mechanism", "csra", "--population", POP, "--baseline", "x"], "baseline"),
    ],
)
def test_bad_input_is_one_line_exit_2_and_writes_nothing(tmp_path, capsys, argv, words):
    out = tmp_path / "out"
    assert main([*argv, "--markets", "2", "--quiet", "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip()
    assert words in err and "\n" not in err
    assert not out.exists()
