"""The IC / IR / monotonicity audit and `market-sim audit` (issue 17 item 6)."""

import json

import numpy as np
import pandas as pd
import pytest

from market_sim.auditing import COLUMNS, audit
from market_sim.cli import main
from market_sim.distributions import parse_distribution
from market_sim.mechanisms.myerson import myerson_mechanism

DIST = "uniform:1:5"


def _audit(mech, seed=0, n=6, k=4, **kw):
    return audit(mech, DIST, n, k, np.random.default_rng(seed), n_grid=kw.pop("n_grid", 13), **kw)


def test_pay_as_bid_is_caught():
    res = _audit("pay-as-bid", k=10)
    s = res.summary
    assert s["verdict"] == "not_ic"
    assert s["max_gain"] > 1e3 * s["tol"]
    assert s["max_gain_ci_low"] > 0  # the confidence bound excludes 0
    assert 0 < s["share_profitable"] <= 1
    assert s["ir_violations"] == 0 and s["monotonicity_violations"] == 0
    # a profitable deviation is an over-report (shading up), by the gain found
    gainers = res.table[res.table.max_gain > s["tol"]]
    assert (gainers.best_report > gainers.cost).all()


@pytest.mark.parametrize("name", ["offline", "online"])
def test_truthful_mechanisms_pass(name):
    res = _audit(name, k=3)
    s = res.summary
    assert s["verdict"] == "ic", s
    assert s["max_gain"] <= s["tol"] == pytest.approx(1e-6 * s["mean_payment"])
    assert s["mean_payment"] > 0 and s["ir_violations"] == 0
    assert s["min_truthful_utility"] >= -1e-12
    assert list(res.table.columns) == COLUMNS and len(res.table) == 3 * 6


def test_posted_price_is_truthful():
    """A fixed posted price is dominant-strategy truthful: the audit finds no gain at all."""
    res = _audit("posted-price")
    assert res.summary["max_gain"] == 0 and res.verdict == "ic"


def test_private_posted_price_gain_within_its_bound():
    from market_sim.mechanisms.base import as_mechanism

    dist = parse_distribution(DIST)
    mech = as_mechanism("private-posted-price", dist=dist, privacy=1.0)
    res = audit(mech, dist, 6, 3, np.random.default_rng(1), n_grid=13)
    bound = np.array([mech.pricing.ic_bound(c) for c in res.table.cost])
    assert np.all(res.table.max_gain <= bound + 1e-12)
    assert res.summary["max_gain"] > 0  # only approximately truthful


def test_non_monotone_myerson_rule_is_flagged():
    def bad(r):  # increasing in the own report above 3
        return np.where(r < 3, 1.0, r - 2.5)

    res = _audit(myerson_mechanism(bad, DIST, name="bad"), k=2)
    s = res.summary
    assert s["myerson_monotonicity_violations"] > 0 and s["monotonicity_violations"] > 0
    assert not res.table.monotone.all()


def test_cli_writes_outputs(tmp_path, capsys):
    out = tmp_path / "a"
    code = main(
        [
            "audit",
            "--mechanism",
            "pay-as-bid",
            "--dist",
            DIST,
            "--sellers",
            "5",
            "--markets",
            "3",
            "--seed",
            "3",
            "--grid",
            "9",
            "--out",
            str(out),
        ]
    )
    assert code == 0
    s = json.loads((out / "summary.json").read_text())
    for key in (
        "max_gain",
        "max_gain_ci_high",
        "share_profitable",
        "ir_violations",
        "monotonicity_violations",
        "verdict",
        "tol",
        "mechanism",
        "dist",
        "seed",
    ):
        assert key in s
    assert s["verdict"] == "not_ic" and s["seed"] == 3 and s["mechanism"] == "pay-as-bid"
    df = pd.read_csv(out / "audit.csv")
    assert list(df.columns) == COLUMNS and len(df) == 15
    assert df.max_gain.max() == pytest.approx(s["max_gain"])
    assert (out / "audit.png").stat().st_size > 1000
    assert "verdict" in capsys.readouterr().out


def test_cli_same_seed_same_numbers(tmp_path):
    args = [
        "audit",
        "--mechanism",
        "pay-as-bid",
        "--dist",
        DIST,
        "--sellers",
        "4",
        "--markets",
        "2",
        "--grid",
        "5",
        "--no-refine",
        "--seed",
        "7",
        "--out",
    ]
    assert main(args + [str(tmp_path / "x")]) == 0 and main(args + [str(tmp_path / "y")]) == 0
    assert (tmp_path / "x" / "audit.csv").read_text() == (tmp_path / "y" / "audit.csv").read_text()


@pytest.mark.parametrize(
    "extra,words",
    [
        (["--mechanism", "nonesuch"], "unknown 'nonesuch'"),
        (["--mechanism", "offline", "--dist", "weird:1"], "weird"),
        (["--mechanism", "offline", "--sellers", "0"], "sellers must be >= 1"),
        (["--mechanism", "math:pi"], "not a Mechanism"),
    ],
)
def test_cli_bad_input_one_line_exit_2(tmp_path, capsys, extra, words):
    base = {"--dist": DIST, "--sellers": "3"}
    args = ["audit", "--markets", "1", "--out", str(tmp_path / "o")] + extra
    for k, v in base.items():
        if k not in extra:
            args += [k, v]
    try:
        code = main(args)
    except SystemExit as exc:  # argparse's own check (--sellers 0)
        code = exc.code
    assert code == 2
    err = capsys.readouterr().err.strip()
    assert words in err and "\n" not in err
    assert not (tmp_path / "o").exists()


def test_randomized_mechanism_audited_with_common_random_numbers():
    """A price drawn independently of the reports is truthful draw by draw; with common
    random numbers (same draws at every candidate, grid and search) no gain appears."""
    from market_sim.mechanisms.base import Mechanism

    class RandomPrice(Mechanism):
        randomized = True
        n_draws = 16

        def outcome(self, reports, rng=None):
            p = rng.uniform(1, 5)
            eps = (np.asarray(reports) <= p).astype(float)
            return eps, p * eps

    res = audit(RandomPrice(), DIST, 4, 2, np.random.default_rng(0), n_grid=9)
    assert res.summary["randomized"] and res.summary["mean_payment"] > 0
    assert res.summary["max_gain"] == 0 and res.verdict == "ic"
