"""Networks as mechanisms (issue #52, item 1): ONNX files built here with onnx.helper,
each a mechanism whose truth is proved in its docstring, run through `OnnxMechanism`,
the audit and the CLI.  The networks stand for any exported PyTorch/TensorFlow/JAX
model: onnxruntime sees the same graph format."""

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

onnx = pytest.importorskip("onnx", reason="the neural extra (onnx) is in the test extra")
pytest.importorskip("onnxruntime", reason="the neural extra (onnxruntime) is in the test extra")
from onnx import TensorProto, helper  # noqa: E402
from onnx_networks import PRICE, SLOPE, _save, posted_price, smooth_myerson  # noqa: E402

from market_sim import audit  # noqa: E402
from market_sim.errors import MarketSimError  # noqa: E402
from market_sim.mechanisms.base import as_mechanism  # noqa: E402
from market_sim.mechanisms.onnx_network import OnnxMechanism  # noqa: E402

MARKET_SIM = str(Path(sys.executable).with_name("market-sim"))


def test_the_network_gives_its_closed_form(tmp_path):
    mech = OnnxMechanism(smooth_myerson(tmp_path / "smooth.onnx"))
    r = np.array([0.0, 0.3, 0.6, 0.9, 1.0])
    out = mech.run(r)
    z = SLOPE * (PRICE - r)
    eps = 1 / (1 + np.exp(-z))
    np.testing.assert_allclose(out.eps, eps, rtol=1e-5)  # float32
    np.testing.assert_allclose(out.payments, r * eps + np.log1p(np.exp(z)) / SLOPE, rtol=1e-5)


def test_batched_deviations_equal_one_market_at_a_time(tmp_path, monkeypatch):
    import market_sim.mechanisms.onnx_network as net

    mech = as_mechanism(f"onnx:{smooth_myerson(tmp_path / 's.onnx')}")
    assert isinstance(mech, OnnxMechanism)
    rng = np.random.default_rng(0)
    reports = rng.random(7)
    sellers = np.array([0, 3, 6])
    cand = rng.random((3, 5))
    monkeypatch.setattr(net, "BATCH_ROWS", 4)  # several batches, a ragged last one
    dev = mech.deviations(sellers, cand, reports)
    for k, i in enumerate(sellers):
        for j, z in enumerate(cand[k]):
            trial = reports.copy()
            trial[i] = z
            one = mech.run(trial)
            assert dev.eps[k, j] == one.eps[i] and dev.payments[k, j] == one.payments[i]


def test_the_audit_finds_a_networks_gain_and_certifies_no_network(tmp_path):
    """Pay-the-report with a posted threshold: the exact gain of a seller of cost c is
    price - c (reporting the price); the audit's witness must show it."""
    mech = OnnxMechanism(posted_price(tmp_path / "payreport.onnx", pay_the_report=True))
    res = audit(mech, "uniform:0:1", 6, 2, np.random.default_rng(1), n_grid=9, n_random=4)
    assert res.verdict == "not_ic"
    w = res.summary["witness"]
    # the best report is the price (as float32, which rounds 0.6 up by 4e-8)
    assert w["report"] == pytest.approx(PRICE, abs=1e-7)
    assert w["gain"] == pytest.approx(PRICE - w["cost"], abs=1e-7)
    truthful = OnnxMechanism(smooth_myerson(tmp_path / "smooth.onnx"))
    ok = audit(truthful, "uniform:0:1", 6, 2, np.random.default_rng(1), n_grid=9, n_random=4)
    assert ok.verdict == "ic" and ok.ir_verdict == "ir"
    assert not ok.summary["certified"]  # a network is never certified


def test_double_precision_networks_and_fixed_batches(tmp_path):
    path = posted_price(tmp_path / "pp64.onnx", input_type=TensorProto.DOUBLE)
    mech = OnnxMechanism(path)
    out = mech.run(np.array([0.1, 0.6, 0.61]))
    np.testing.assert_array_equal(out.eps, [1.0, 1.0, 0.0])
    np.testing.assert_array_equal(out.payments, [PRICE, PRICE, 0.0])
    nodes = [helper.make_node("Identity", ["reports"], ["eps"]),
             helper.make_node("Identity", ["reports"], ["payments"])]  # fmt: skip
    fixed = OnnxMechanism(_save(tmp_path / "fixed.onnx", nodes, ["eps", "payments"], batch=1))
    dev = fixed.deviations([0, 1], [[0.2, 0.4], [0.5, 0.7]], np.array([0.1, 0.9]))
    want = np.float32([[0.2, 0.4], [0.5, 0.7]]).astype(float)  # the network is float32
    np.testing.assert_array_equal(dev.eps, want)
    np.testing.assert_array_equal(dev.payments, want)


def test_bad_networks_are_one_line_errors(tmp_path):
    with pytest.raises(MarketSimError, match="no such file"):
        OnnxMechanism(tmp_path / "missing.onnx")
    junk = tmp_path / "junk.onnx"
    junk.write_text("not a model")
    with pytest.raises(MarketSimError, match="not a loadable ONNX model"):
        OnnxMechanism(junk)
    one_out = _save(tmp_path / "one.onnx", [helper.make_node("Identity", ["reports"], ["eps"])],
                    ["eps"])  # fmt: skip
    with pytest.raises(MarketSimError, match="two outputs"):
        OnnxMechanism(one_out)
    nodes = [helper.make_node("ReduceSum", ["reports"], ["eps"], keepdims=0),
             helper.make_node("ReduceSum", ["reports"], ["payments"], keepdims=0)]  # fmt: skip
    inp = helper.make_tensor_value_info("reports", TensorProto.FLOAT, ["B", "n"])
    outs = [helper.make_tensor_value_info(o, TensorProto.FLOAT, None) for o in ("eps", "payments")]
    model = helper.make_model(helper.make_graph(nodes, "g", [inp], outs),
                              opset_imports=[helper.make_opsetid("", 11)])  # fmt: skip
    model.ir_version = 8
    onnx.save(model, str(tmp_path / "sum.onnx"))
    with pytest.raises(MarketSimError, match="must have the reports' shape"):
        OnnxMechanism(tmp_path / "sum.onnx").run(np.array([0.1, 0.2]))


def test_the_cli_audits_a_network(tmp_path):
    bad = posted_price(tmp_path / "payreport.onnx", pay_the_report=True)
    run = [MARKET_SIM, "audit", "--dist", "uniform:0:1", "--sellers", "5", "--markets", "2"]
    done = subprocess.run([*run, "--mechanism", f"onnx:{bad}", "--grid", "9"],
                          capture_output=True, text=True)  # fmt: skip
    assert done.returncode == 3, done.stderr
    assert "not_ic" in done.stdout
    done = subprocess.run([*run, "--mechanism", f"onnx:{tmp_path / 'nope.onnx'}"],
                          capture_output=True, text=True)  # fmt: skip
    assert done.returncode == 2 and "no such file" in done.stderr
    assert "Traceback" not in done.stderr
