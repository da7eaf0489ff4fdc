"""``market-sim fields``: the joint audit of several mechanisms on the same markets."""

from __future__ import annotations

import pytest

from market_sim.cli import main

POP = "6*uniform:0:1;cap=uniform:0.1:5;size=integers:10:500"
SMALL = ["--markets", "4", "--field-grid", "6", "--joint-grid", "3", "--local-steps", "2"]


def test_leaderboard_ranks_the_truthful_first_and_writes_the_table(tmp_path, capsys):
    out = tmp_path / "fields.csv"
    argv = ["fields", "--population", POP, "--mechanism", "csra:budget=5"]
    argv += ["--mechanism", "cap-threshold:k=3", "--out", str(out), *SMALL]
    assert main(argv) == 0
    printed = capsys.readouterr().out
    table = out.read_text().splitlines()
    assert table[0].startswith("mechanism,ic,ir,share_gaining")
    # cap-threshold is truthful in cost and cap (proved); CSRA pays for the reported cap
    assert table[1].startswith("cap-threshold:k=3,no gain found,IR here")
    assert table[2].startswith("csra:budget=5,not IC")
    assert "csra:budget=5: not IC: seller" in printed
    assert "not a proof of IC" in printed


@pytest.mark.parametrize(
    "extra, words",
    [
        (
            ["--population", "6*uniform:0:1;cap=uniform:0:5", "--mechanism", "csra"],
            "cap must be > 0",
        ),
        (["--population", POP, "--mechanism", "nosuch"], "unknown 'nosuch'"),
        (["--population", "6*uniform:0:1;size=integers:0:9", "--mechanism", "csra"], "positive"),
    ],
)
def test_bad_input_is_one_line_and_writes_nothing(tmp_path, capsys, extra, words):
    out = tmp_path / "fields.csv"
    assert main(["fields", *extra, "--out", str(out), *SMALL]) == 2
    err = capsys.readouterr().err.strip()
    assert words in err and "\n" not in err
    assert not out.exists()


def test_rounds_play_one_market_with_best_responding_sellers(capsys):
    argv = ["fields", "--population", POP, "--mechanism", "cap-threshold:k=3", *SMALL]
    assert main([*argv, "--rounds", "2"]) == 0
    printed = capsys.readouterr().out
    play = printed.split("round,mechanism,share_misreporting", 1)[1].strip().splitlines()
    assert len(play) == 3  # the header's rest and two rounds
    assert play[1].startswith("1,cap-threshold:k=3,0,") and play[2].startswith("2,")
