"""Symmetric Bayes-Nash equilibria and their epsilon."""

import json
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import pytest

from market_sim.analysis.figures import figure_problems
from market_sim.cli import main
from market_sim.equilibrium import BNEResult, bne_epsilon, figure, symmetric_bne
from market_sim.errors import MarketSimError
from market_sim.mechanisms.base import Mechanism, as_mechanism

FIRST_PRICE = f"{Path(__file__).resolve().parent.parent / 'examples' / 'first_price.py'}"
FIRST_PRICE += ":FirstPriceProcurement"
SMALL = dict(samples=128, grid=9, eval_grid=17)
CHECK = dict(samples=128, eval_grid=17)  # bne_epsilon's options
FAST = dict(SMALL, max_iter=10)


def closed_form(c, m):
    """Single-unit first-price procurement, U[0, 1] costs, m sellers:
    b(c) = c + int_c^1 (1 - t)^(m-1) dt / (1 - c)^(m-1) = c + (1 - c) / m."""
    return c + (1 - c) / m


def test_closed_form_is_the_first_order_condition():
    # u(x; c) = (b(x) - c)(1 - x)^(m-1) for a seller of cost c bidding as cost x:
    # at the closed form it is maximised at x = c (checked on a fine grid)
    for m in (2, 3, 5):
        x = np.linspace(0, 1, 20001)
        for c in (0.0, 0.2, 0.5, 0.8):
            u = (closed_form(x, m) - c) * (1 - x) ** (m - 1)
            assert abs(x[np.argmax(u)] - c) <= 1e-4


def test_example_deviations_match_the_generic_default():
    mech = as_mechanism(FIRST_PRICE)
    rng = np.random.default_rng(3)
    for n in (1, 2, 4):
        for _ in range(20):
            r = np.round(rng.uniform(0, 1, n), 1)  # ties happen
            z = np.round(rng.uniform(0, 1, (n, 5)), 1)
            fast = mech.deviations(np.arange(n), z, r)
            slow = Mechanism.deviations(mech, np.arange(n), z, r)
            np.testing.assert_allclose(fast.eps, slow.eps)
            np.testing.assert_allclose(fast.payments, slow.payments)


@pytest.mark.parametrize("m, samples, tol", [(2, 2048, 0.01), (3, 2048, 0.02)])
def test_first_price_matches_the_closed_form(m, samples, tol):
    r = symmetric_bne(FIRST_PRICE, "uniform:0:1", m, np.random.default_rng(0), samples=samples)
    assert r.converged
    assert np.max(np.abs(r.bids - closed_form(r.costs, m))) <= tol
    c = np.linspace(0, 1, 101)
    assert np.max(np.abs(r.bid(c) - closed_form(c, m))) <= tol
    # epsilon: small against the utility at stake and against truth's; the closed
    # form itself, measured the same way, shows the noise floor of the estimate
    assert r.epsilon_relative <= 0.1
    truth = bne_epsilon(FIRST_PRICE, "uniform:0:1", m, "truth", np.random.default_rng(1))
    assert truth.epsilon_ci[0] > 20 * r.epsilon
    exact = bne_epsilon(
        FIRST_PRICE, "uniform:0:1", m, lambda x: closed_form(x, m), np.random.default_rng(2),
        samples=samples,
    )  # fmt: skip
    assert exact.epsilon_relative <= 0.1
    assert exact.epsilon_ci[0] <= exact.epsilon <= exact.epsilon_ci[1]


@pytest.mark.parametrize("mech", ["posted-price", "offline"])
def test_ic_mechanisms_give_truth_with_zero_epsilon(mech):
    r = symmetric_bne(mech, "uniform:1:5", 5, np.random.default_rng(0), **SMALL)
    assert r.converged and r.iterations == 1
    np.testing.assert_allclose(r.bids, r.costs, atol=1e-5 * 4)
    assert r.epsilon <= 1e-9 and r.epsilon_ci[1] <= 1e-9
    e = bne_epsilon(mech, "uniform:1:5", 5, "truth", np.random.default_rng(1), **CHECK)
    assert e.epsilon <= 1e-9


def test_truth_under_pay_as_bid_is_not_an_equilibrium_and_the_bne_is():
    rng = np.random.default_rng(0)
    truth = bne_epsilon("pay-as-bid", "uniform:1:5", 5, "truth", rng, **CHECK)
    assert truth.epsilon_ci[0] > 0.1  # truthful utility is 0: shading up pays
    r = symmetric_bne("pay-as-bid", "uniform:1:5", 5, np.random.default_rng(0), **SMALL)
    assert r.epsilon < 0.05 * truth.epsilon
    bought = r.check.utilities > 0
    assert np.all(r.bid(r.check.eval_costs[bought]) > r.check.eval_costs[bought])  # markups
    assert np.all(np.diff(r.bids) >= 0) and np.all(r.bids >= r.costs - 1e-12)
    # the best deviation found is never below the cost
    assert np.all(r.check.best_reports >= r.check.eval_costs - 1e-12)


def test_seeded_reproducibility():
    a = symmetric_bne(FIRST_PRICE, "uniform:0:1", 3, np.random.default_rng(5), **FAST)
    b = symmetric_bne(FIRST_PRICE, "uniform:0:1", 3, np.random.default_rng(5), **FAST)
    c = symmetric_bne(FIRST_PRICE, "uniform:0:1", 3, np.random.default_rng(6), **FAST)
    np.testing.assert_array_equal(a.bids, b.bids)
    assert a.epsilon == b.epsilon and a.epsilon_ci == b.epsilon_ci
    assert not np.array_equal(a.bids, c.bids)


def test_result_object():
    r = symmetric_bne(FIRST_PRICE, "uniform:0:1", 2, np.random.default_rng(0), **SMALL)
    assert isinstance(r, BNEResult)
    with pytest.raises(AttributeError):
        r.epsilon = 0.0  # frozen
    c = np.array([[0.0, 0.3], [0.7, 1.0]])
    assert r.bid(c).shape == (2, 2)
    assert np.all(np.diff(r.bid(np.linspace(0, 1, 50))) >= 0)
    with pytest.raises(MarketSimError, match="outside the support"):
        r.bid([1.5])
    s = r.summary()
    assert s["epsilon"] == r.epsilon and s["iterations"] == r.iterations
    assert len(r.history) == r.iterations
    fig = figure(r)  # labelled, titled, finite, no legend over the data
    assert figure_problems(fig) == []
    plt.close(fig)
    # a warm start from the result begins much nearer a fixed point than the truth
    w = symmetric_bne(
        FIRST_PRICE, "uniform:0:1", 2, np.random.default_rng(0), init=r, max_iter=1, **SMALL
    )
    assert w.iterations == 1 and w.history[0] < r.history[0] / 3


def test_bad_input_is_one_line():
    rng = np.random.default_rng(0)
    cases = [
        (dict(mechanism="data-dependent"), "needs the sellers' data"),
        (dict(n_sellers=1), "n_sellers must be an integer >= 2"),
        (dict(grid=2), "grid must be an integer >= 3"),
        (dict(damping=0), "damping must be in"),
        (dict(samples=0), "samples must be an integer >= 1"),
        (dict(grdi=5), "unknown option 'grdi'"),
        (dict(bid_max=0.5), "bid_max must be in"),
        (dict(rng=1), "rng must be a numpy.random.Generator"),
        (dict(dist="uniform:1"), "uniform"),
    ]
    for kw, msg in cases:
        args = dict(mechanism="pay-as-bid", dist="uniform:0:1", n_sellers=3, rng=rng)
        args.update(kw)
        with pytest.raises(MarketSimError, match=msg) as info:
            symmetric_bne(**args)
        assert "\n" not in str(info.value)
    with pytest.raises(MarketSimError, match="bid must be"):
        bne_epsilon("pay-as-bid", "uniform:0:1", 3, 0.5, rng)


def test_cli_writes_the_three_files(tmp_path, capsys):
    out = tmp_path / "bne"
    argv = ["bne", "--mechanism", FIRST_PRICE, "--dist", "uniform:0:1", "--sellers", "2"]
    argv += ["--seed", "4", "--out", str(out), "--quiet", "--samples", "128", "--grid", "9"]
    assert main(argv) == 0
    table = pd.read_csv(out / "bid.csv")
    assert list(table.columns) == ["cost", "bid"]
    s = json.loads((out / "summary.json").read_text())
    assert s["seed"] == 4 and s["n_sellers"] == 2
    for key in ("epsilon", "epsilon_ci", "iterations", "seconds", "converged"):
        assert key in s
    assert (out / "bne.png").stat().st_size > 0
    # the same seed from Python gives the same bid function
    r = symmetric_bne(FIRST_PRICE, "uniform:0:1", 2, np.random.default_rng(4), samples=128, grid=9)
    np.testing.assert_allclose(table["bid"], r.bids)
    assert s["epsilon"] == pytest.approx(r.epsilon)
    assert "epsilon" in capsys.readouterr().out


@pytest.mark.parametrize(
    "extra, msg",
    [
        (["--mechanism", "data-dependent"], "needs the sellers' data"),
        (["--mechanism", "pay-as-bid", "--sellers", "1"], "sellers must be >= 2"),
        (["--mechanism", "pay-as-bid", "--damping", "0"], "damping must be in"),
        (["--mechanism", "no-such-mechanism"], "unknown"),
    ],
)
def test_cli_bad_input_exits_2(tmp_path, capsys, extra, msg):
    argv = ["bne", "--dist", "uniform:0:1", "--sellers", "3", "--out", str(tmp_path / "o")]
    try:
        code = main(argv + extra)
    except SystemExit as exc:  # argparse's own checks
        code = exc.code
    assert code == 2
    err = capsys.readouterr().err
    assert msg in err and err.count("\n") == 1 and "Traceback" not in err
    assert not (tmp_path / "o" / "summary.json").exists()
