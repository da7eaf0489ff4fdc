"""Training the learned mechanism (market_sim.neural.training) and ``market-sim train``.

The command's refusals need no JAX; the training tests need the neural extra's JAX and
optax (``pip install 'market_sim[neural]'``), which CI's test extra leaves out."""

import sys

import numpy as np
import pytest

from market_sim.cli import main
from market_sim.errors import MarketSimError
from market_sim.neural.training import TrainingConfig

SMALL = dict(n_sellers=3, iterations=4, batch=8, hidden=4, layers=1, ascent_steps=2,
             update_every=2)  # fmt: skip


def test_train_without_jax_is_one_line_and_writes_nothing(tmp_path, monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "jax", None)  # as if not installed
    out = tmp_path / "run"
    code = main(["train", "--sellers", "3", "--iterations", "2", "--out", str(out)])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1
    assert "pip install 'market_sim[neural]'" in err[0]
    assert not out.exists()  # docs/reliability.md's table checks the other refusals


def test_config_checks():
    with pytest.raises(MarketSimError, match="budget"):
        TrainingConfig(budget=-1.0).check()
    with pytest.raises(MarketSimError, match="mu"):
        TrainingConfig(mu=0.0).check()


def test_training_is_seeded_follows_regretnet_and_exports_exactly(tmp_path):
    pytest.importorskip("jax", reason="training needs the neural extra (JAX + optax)")
    pytest.importorskip("onnxruntime", reason="reloading needs the neural extra")
    import jax.numpy as jnp

    from market_sim.mechanisms.onnx_network import OnnxMechanism
    from market_sim.neural.network import forward
    from market_sim.neural.outputs import write_training
    from market_sim.neural.training import train

    config = TrainingConfig(**SMALL, mu=2.0, sigma=0.5)  # weights the file must record
    first = train(config, np.random.default_rng(11))
    again = train(config, np.random.default_rng(11))
    assert first.history.equals(again.history)
    assert first.claimed_regret == again.claimed_regret
    h = first.history.set_index("iteration")
    # RegretNet's multiplier step after iteration 2: lam <- lam + rho * (mean constraint)
    assert h.loc[3, "lambda_regret"] == pytest.approx(5.0 + 1.0 * h.loc[2, "mean_regret"])
    assert h.loc[3, "lambda_ir"] == pytest.approx(5.0 + 1.0 * h.loc[2, "ir_violation"])
    assert h.loc[3, "rho"] == pytest.approx(1.1) and h.loc[2, "rho"] == 1.0
    out = tmp_path / "not" / "there"  # --out names a folder that does not exist yet
    paths = write_training(first, out)
    assert {p.name for p in out.iterdir()} >= {"model.onnx", "training.csv", "training.png"}
    r = np.random.default_rng(12).uniform(0, 1, (20, 3))
    eps, pay = OnnxMechanism(paths["model"]).evaluate(r)
    net = first.network
    jax_eps, jax_pay = forward(net.params, jnp.asarray(r, jnp.float32), net.eps_max,
                               net.low, net.high, jnp)  # fmt: skip
    np.testing.assert_allclose(eps, np.asarray(jax_eps), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(pay, np.asarray(jax_pay), rtol=1e-5, atol=1e-6)
    # the file records the objective it was trained on (the learned study scores on it)
    want = (config.mu, config.sigma, config.gamma)
    assert OnnxMechanism(paths["model"]).objective_weights == want
