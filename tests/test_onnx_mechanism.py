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

from market_sim import audit  # noqa: E402
from market_sim.errors import MarketSimError  # noqa: E402
from market_sim.mechanisms.base import as_mechanism  # noqa: E402
from market_sim.mechanisms.onnx_network import OnnxMechanism  # noqa: E402

MARKET_SIM = str(Path(sys.executable).with_name("market-sim"))
PRICE, SLOPE = 0.6, 8.0


def _save(path: Path, nodes, outputs, initializers=(), input_type=TensorProto.FLOAT, batch="B"):
    inp = helper.make_tensor_value_info("reports", input_type, [batch, "n"])
    outs = [helper.make_tensor_value_info(o, input_type, [batch, "n"]) for o in outputs]
    graph = helper.make_graph(nodes, "mechanism", [inp], outs, initializer=list(initializers))
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    onnx.save(model, str(path))
    return path


def _const(name, value, dtype=TensorProto.FLOAT):
    return helper.make_tensor(name, dtype, [], [value])


def posted_price(path: Path, price=PRICE, pay_the_report=False, input_type=TensorProto.FLOAT):
    """eps = [r <= price]; payments = price * eps (a posted price: truthful and IR, since
    a seller's report only decides whether it sells at the fixed price, which pays
    price - c >= 0 exactly when c <= price) or, with ``pay_the_report``, r * eps (not IC:
    a seller of cost c < price gains price - c by reporting the price, proof by the
    same line)."""
    nodes = [
        helper.make_node("LessOrEqual", ["reports", "price"], ["sells"]),
        helper.make_node("Cast", ["sells"], ["eps"], to=input_type),
        helper.make_node("Mul", ["reports" if pay_the_report else "price", "eps"], ["payments"]),
    ]
    return _save(path, nodes, ["eps", "payments"], [_const("price", price, input_type)], input_type)


def smooth_myerson(path: Path):
    """eps(r) = sigmoid(k (p - r)), payments(r) = r eps(r) + softplus(k (p - r)) / k.

    Truthful and IR by Myerson's lemma: eps is decreasing in r and the payment is
    r eps(r) + int_r^inf eps(z) dz, because int_r^inf sigmoid(k (p - z)) dz =
    softplus(k (p - r)) / k; the utility of cost c reporting r is then
    int_r^inf eps - (c - r) eps(r), maximal at r = c, where it is int_c^inf eps >= 0."""
    nodes = [
        helper.make_node("Sub", ["price", "reports"], ["gap"]),
        helper.make_node("Mul", ["gap", "slope"], ["z"]),
        helper.make_node("Sigmoid", ["z"], ["eps"]),
        helper.make_node("Softplus", ["z"], ["sp"]),
        helper.make_node("Div", ["sp", "slope"], ["tail"]),
        helper.make_node("Mul", ["reports", "eps"], ["reps"]),
        helper.make_node("Add", ["reps", "tail"], ["payments"]),
    ]
    return _save(path, nodes, ["eps", "payments"], [_const("price", PRICE), _const("slope", SLOPE)])


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
