"""simulate's buyer's loss: Eq. 11 of [AES] with the payments made (issue #43, item 2)."""

import math

import numpy as np
import pandas as pd
import pytest

from market_sim.agents import MarketModel
from market_sim.analysis.simulation import plot_simulation
from market_sim.cli import main


class FixedOutcome:
    """Buys eps = (1, 1, 0) from three sellers and pays (0.5, 0.25, 0), whatever they report."""

    def outcome(self, reports, rng=None):
        return np.array([1.0, 1.0, 0.0]), np.array([0.5, 0.25, 0.0])


def test_the_buyer_loss_is_eq_11_with_the_payments_made():
    # by hand: eta = 2, ||eps|| = sqrt 2; mu sqrt(2) / 2 + sigma / 2 + gamma (0.5 + 0.25)
    mu, sigma, gamma = 1.0, 3.0, 2.0
    m = MarketModel(
        3, dist="uniform:0:1", mechanism=FixedOutcome(), rounds=1, seed=0, mu=mu, sigma=sigma,
        gamma=gamma, measure_regret=False,
    )  # fmt: skip
    model_df, agent_df = m.run()
    by_hand = mu * math.sqrt(2) / 2 + sigma / 2 + gamma * 0.75
    assert model_df["buyer_loss"].iloc[0] == pytest.approx(by_hand, rel=1e-12)
    # the proxy loss is what its label says: the virtual costs psi(c) = 2c of U[0, 1]
    c = agent_df.sort_values("seller_id")["cost"].to_numpy()
    proxy = mu * math.sqrt(2) / 2 + sigma / 2 + gamma * (2 * c[0] + 2 * c[1])
    assert model_df["proxy_loss"].iloc[0] == pytest.approx(proxy, rel=1e-12)


def test_simulate_writes_and_plots_the_buyer_loss(tmp_path, capsys):
    out = tmp_path / "sim"
    argv = ["simulate", "--dist", "uniform:1:5", "--sellers", "6", "--rounds", "2"]
    argv += ["--mechanism", "pay-as-bid", "--gamma", "0.5", "--out", str(out), "--quiet"]
    assert main(argv) == 0
    assert "note (" not in capsys.readouterr().out  # truthful sellers: nothing to say
    model_df = pd.read_csv(out / "model.csv")
    agents = pd.read_csv(out / "agents.csv")
    for r, row in model_df.set_index("round").iterrows():
        a = agents[agents["round"] == r]
        eta = a.eps.sum()
        loss = (np.linalg.norm(a.eps) + 1.0) / eta + 0.5 * a.payment.sum()  # mu = sigma = 1
        assert row["buyer_loss"] == pytest.approx(loss, rel=1e-9)
        # truthful under pay-as-bid: paid c eps < psi(c) eps = (2c - 1) eps for c > 1
        assert row["buyer_loss"] < row["proxy_loss"]
    fig = plot_simulation(agents, model_df)
    panel = fig.axes[5]  # bottom right: the buyer's loss
    assert panel.get_title() == "the buyer's loss"
    lines = {ln.get_label(): ln.get_ydata() for ln in panel.get_lines()}
    np.testing.assert_allclose(lines["with the payments made"], model_df["buyer_loss"])
    np.testing.assert_allclose(lines["proxy: virtual costs ψ(c)"], model_df["proxy_loss"])


def test_best_responders_are_told_they_are_not_at_the_bne(tmp_path, capsys):
    argv = ["simulate", "--dist", "uniform:1:5", "--sellers", "6", "--rounds", "1", "--quiet"]
    argv += ["--mechanism", "pay-as-bid", "--strategy", "best-response", "--out", str(tmp_path)]
    assert main(argv) == 0
    notes = [ln for ln in capsys.readouterr().out.splitlines() if ln.startswith("note (")]
    assert len(notes) == 1 and notes[0].startswith("note (best-response): ")
    assert "Bayes-Nash" in notes[0] and "market-sim bne" in notes[0] and "bne:" in notes[0]
