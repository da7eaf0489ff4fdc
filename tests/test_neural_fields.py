"""The learned mechanism for sellers with several fields (issue #52, item 2's last
clause): the network reads cost, cap and size, eps is capped by the reported cap, the
ONNX file names its fields in its metadata and is audited as a multi-field mechanism.
The ONNX side runs without JAX; the training needs it (importorskip)."""

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("onnx", reason="the neural extra (onnx) is in the test extra")
pytest.importorskip("onnxruntime", reason="the neural extra (onnxruntime) is in the test extra")
from onnx_networks import posted_price_caps, smooth_myerson  # noqa: E402

from market_sim.errors import MarketSimError  # noqa: E402
from market_sim.joint_audit import joint_audit  # noqa: E402
from market_sim.mechanisms.multifield import (  # noqa: E402
    OneField,
    PostedPricePerUnit,
    as_multifield_mechanism,
)
from market_sim.mechanisms.onnx_network import OnnxFields, OnnxMechanism  # noqa: E402
from market_sim.multifield import MultiFieldPopulation  # noqa: E402
from market_sim.neural.network import initial_network  # noqa: E402

SPEC = "3*uniform:0:1;cap=uniform:0.1:5;size=integers:10:500"
MARKET_SIM = str(Path(sys.executable).with_name("market-sim"))


def _reports(m: int, seed: int) -> np.ndarray:
    """(m, 3, 3) reports: cost, cap (some below the network's eps), size."""
    return np.random.default_rng(seed).uniform([0, 0.01, 10], [1, 5, 500], (m, 3, 3))


def test_a_several_field_network_is_read_as_a_multi_field_mechanism_and_audited(tmp_path):
    """The posted price per unit with caps as an ONNX file (its truth proved in
    ``posted_price_caps``): the same outcomes as the library's PostedPricePerUnit, and
    the joint audit finds no gain and IR; paying the report is found not IC."""
    path = posted_price_caps(tmp_path / "pp.onnx", price=0.5, e_max=1.0)
    mech = as_multifield_mechanism(f"onnx:{path}")
    assert isinstance(mech, OnnxFields) and mech.report_fields == ("cost", "cap", "size")
    types = MultiFieldPopulation.parse(SPEC).draw(40, np.random.default_rng(1))
    got, want = mech.run(types), PostedPricePerUnit(0.5, 1.0).run(types)
    np.testing.assert_array_equal(got.eps, want.eps)
    np.testing.assert_array_equal(got.payments, want.payments)
    found = joint_audit(mech, SPEC, 12, np.random.default_rng(2), local_steps=3)
    assert not found.ic_refuted and not found.ir_refuted
    liar = posted_price_caps(tmp_path / "liar.onnx", pay_the_report=True)
    refuted = joint_audit(f"onnx:{liar}", SPEC, 12, np.random.default_rng(2), local_steps=3)
    w = refuted.ic_witness
    assert refuted.ic_refuted and w is not None
    # the gain is at most (p - c) min(cap, e_max), reached by reporting cost p (the proof)
    bound = (0.5 - w.true["cost"]) * min(w.true["cap"], 1.0)
    assert 0 < w.gain <= bound + 1e-12
    # a one-field file stays one-field (read on the costs)
    assert isinstance(as_multifield_mechanism(f"onnx:{smooth_myerson(tmp_path / 's.onnx')}"),
                      OneField)  # fmt: skip


def test_the_audit_command_takes_a_several_field_network(tmp_path):
    path = posted_price_caps(tmp_path / "pp.onnx")
    run = subprocess.run(
        [MARKET_SIM, "audit", "--population", SPEC, "--mechanism", f"onnx:{path}",
         "--markets", "6", "--seed", "0", "--no-refine"],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert run.returncode == 0, run.stderr
    assert "no profitable misreport of cost, cap" in run.stdout


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"metadata": "cost,bribe,size"}, "unknown field 'bribe'"),
        ({"metadata": "cap,cost,size"}, "the cost first"),
        ({"width": 2}, "must be (batch, n_sellers, 3)"),
    ],
)
def test_bad_several_field_files_are_one_line(tmp_path, kwargs, message):
    path = posted_price_caps(tmp_path / "bad.onnx", **kwargs)
    with pytest.raises(MarketSimError, match=message.replace("(", r"\(").replace(")", r"\)")) as e:
        OnnxMechanism(path)
    assert "\n" not in str(e.value)


def test_a_several_field_file_used_on_costs_alone_is_one_line(tmp_path):
    mech = OnnxMechanism(posted_price_caps(tmp_path / "pp.onnx"))
    with pytest.raises(MarketSimError, match="reads cost,cap,size") as e:
        mech.run(np.array([0.2, 0.4, 0.9]))
    assert "\n" not in str(e.value)


def test_export_names_the_fields_caps_eps_and_equals_numpy(tmp_path):
    """The several-field forward's ONNX file: the numpy forward to 1e-12, eps never above
    the reported cap, and the training's trial markets are the mechanism's."""
    from market_sim.neural.export import write_onnx
    from market_sim.neural.training import own_outcomes

    net = initial_network(3, np.random.default_rng(5), hidden=6, low=(0, 0.01, 10),
                          high=(1, 5, 500), fields=("cost", "cap", "size"))  # fmt: skip
    mech = as_multifield_mechanism(OnnxMechanism(write_onnx(net, tmp_path / "n.onnx")))
    r = _reports(50, 6)
    eps, pay = mech.network.evaluate(r)
    want_eps, want_pay = net.outputs(r)
    np.testing.assert_allclose(eps, want_eps, rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(pay, want_pay, rtol=1e-12, atol=1e-14)
    assert np.all(eps <= r[..., 1]) and np.any(eps == r[..., 1])  # the cap binds somewhere
    mis = _reports(2 * 4, 7).reshape(2, 4, 3, 3)
    truth = r[:4]
    e_own, p_own = own_outcomes(net.params, mis, truth, net.eps_max, net.low, net.high,
                                np, net.fields)  # fmt: skip
    for s in range(2):
        for b in range(4):
            for i in range(3):
                trial = truth[b].copy()
                trial[i] = mis[s, b, i]
                e, p = mech.network.evaluate(trial[None])
                assert e_own[s, b, i] == pytest.approx(e[0, i], rel=1e-12)
                assert p_own[s, b, i] == pytest.approx(p[0, i], rel=1e-12)
    with pytest.raises(MarketSimError, match="the cost first"):
        initial_network(
            3, np.random.default_rng(0), low=(0, 0), high=(1, 1), fields=("cap", "cost")
        )


def test_training_several_fields_is_seeded_and_exports_exactly(tmp_path):
    pytest.importorskip("jax", reason="training needs the neural extra (JAX + optax)")
    import jax.numpy as jnp

    from market_sim.neural.export import write_onnx
    from market_sim.neural.network import forward
    from market_sim.neural.training import TrainingConfig, train

    config = TrainingConfig(n_sellers=3, population=SPEC, iterations=4, batch=8, hidden=4,
                            ascent_steps=2, update_every=2)  # fmt: skip
    first = train(config, np.random.default_rng(3))
    again = train(config, np.random.default_rng(3))
    assert first.history.equals(again.history) and first.claimed_regret == again.claimed_regret
    net = first.network
    assert net.fields == ("cost", "cap", "size") and net.high == (1.0, 5.0, 500.0)
    mech = OnnxMechanism(write_onnx(net, tmp_path / "m.onnx"))
    assert mech.fields == net.fields
    r = _reports(30, 8)
    eps, pay = mech.evaluate(r)
    jax_eps, jax_pay = forward(net.params, jnp.asarray(r), net.eps_max, net.low, net.high,
                               jnp, net.fields)  # fmt: skip
    np.testing.assert_allclose(eps, np.asarray(jax_eps), rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(pay, np.asarray(jax_pay), rtol=1e-6, atol=1e-6)
    assert np.all(eps <= r[..., 1])
    with pytest.raises(MarketSimError, match="has 3 sellers, not 4"):
        TrainingConfig(n_sellers=4, population=SPEC).check()


def test_the_regret_counts_a_misreport_above_the_true_cap_as_no_gain():
    """Sellers of small true caps (<= 0.3) inflate their cap to 5: eps = min(network,
    5) then exceeds every true cap (checked), which the seller never consented to
    (utility -inf), so the training's regret is 0; the utilities ignoring the cap gain
    (checked here too, so the rule is what makes the regret 0)."""
    pytest.importorskip("jax", reason="training needs the neural extra (JAX + optax)")
    import jax
    import jax.numpy as jnp

    from market_sim.neural.training import TrainingConfig, _functions, _Markets, own_outcomes

    cfg = TrainingConfig(n_sellers=3, population=SPEC, ascent_steps=0)  # the starts as they are
    layout = _Markets(cfg).layout
    net = initial_network(3, np.random.default_rng(5), hidden=6, low=layout.low,
                          high=layout.high, fields=layout.fields)  # fmt: skip
    truth = np.random.default_rng(1).uniform([0, 0.1, 10], [0.2, 0.3, 500], (16, 3, 3))
    inflated = truth.copy()
    inflated[..., 1] = 5.0
    starts = np.stack([truth, inflated])
    eps, pay = own_outcomes(net.params, starts, truth, net.eps_max, net.low, net.high,
                            np, net.fields)  # fmt: skip
    assert np.all(eps[1] > truth[..., 1])
    u = pay - truth[..., 0] * eps
    assert np.all(np.maximum(u[1] - u[0], 0).mean(axis=0) > 0.05)  # what a blind count sees
    _, _, measure = _functions(cfg, layout)
    params = jax.tree.map(lambda a: jnp.asarray(a, jnp.float32), net.params)
    f32 = (jnp.asarray(a, jnp.float32) for a in (truth, starts))
    _, regret, _, _ = measure(params, *f32)
    np.testing.assert_array_equal(np.asarray(regret), 0.0)
