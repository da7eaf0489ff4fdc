"""The learned mechanism's network (market_sim.neural.network) and its ONNX export: no
JAX needed, so CI runs all of it."""

import numpy as np
import pytest

from market_sim.errors import MarketSimError
from market_sim.neural import initial_network
from market_sim.neural.network import MechanismNetwork

pytest.importorskip("onnx", reason="the export needs the neural extra's onnx (in test)")
pytest.importorskip("onnxruntime", reason="loading needs the neural extra's onnxruntime")


def _loop_forward(net: MechanismNetwork, r: np.ndarray):
    """The module docstring's equations seller by seller, with explicit loops over the
    others (independent of the vectorised ``forward``)."""
    n = r.size
    out = {}
    for name in ("allocation", "payment"):
        layers = net.params[name]
        h = [np.array([(r[i] - net.low) / (net.high - net.low)]) for i in range(n)]
        for layer in layers[:-1]:
            new = []
            for i in range(n):
                others = sum(h[j] for j in range(n) if j != i) / (n - 1)
                pre = h[i] @ layer["w_self"] + others @ layer["w_others"] + layer["bias"]
                new.append(np.maximum(pre, 0.0))
            h = new
        z = np.array([float(h[i] @ layers[-1]["w"][:, 0] + layers[-1]["b"][0]) for i in range(n)])
        out[name] = 1 / (1 + np.exp(-z))
    eps = net.eps_max * out["allocation"]
    return eps, eps * net.high * out["payment"]


def test_forward_is_the_documented_equations():
    net = initial_network(4, np.random.default_rng(3), hidden=5, layers=2, low=0.5, high=2.0)
    r = np.random.default_rng(4).uniform(0.5, 2.0, (3, 4))
    eps, pay = net.outputs(r)
    for row in range(3):
        e, p = _loop_forward(net, r[row])
        np.testing.assert_allclose(eps[row], e, rtol=1e-12)
        np.testing.assert_allclose(pay[row], p, rtol=1e-12)


def test_equivariant_and_bounded():
    net = initial_network(6, np.random.default_rng(5), hidden=8, eps_max=3.0)
    r = np.random.default_rng(6).uniform(0, 1, (5, 6))
    perm = np.array([3, 0, 5, 1, 4, 2])
    eps, pay = net.outputs(r)
    eps_p, pay_p = net.outputs(r[:, perm])
    np.testing.assert_allclose(eps_p, eps[:, perm], rtol=1e-12)
    np.testing.assert_allclose(pay_p, pay[:, perm], rtol=1e-12)
    assert np.all((eps > 0) & (eps < 3.0)) and np.all((pay > 0) & (pay < eps * 1.0))


def test_same_seed_same_network_and_bad_input():
    a = initial_network(3, np.random.default_rng(7))
    b = initial_network(3, np.random.default_rng(7))
    r = np.array([[0.1, 0.5, 0.9]])
    assert np.array_equal(a.outputs(r)[1], b.outputs(r)[1])
    with pytest.raises(MarketSimError, match="at least 2 sellers"):
        initial_network(1, np.random.default_rng(0))
    with pytest.raises(MarketSimError, match="shape"):
        a.outputs(np.zeros((2, 4)))
    with pytest.raises(MarketSimError, match="low < high"):
        initial_network(3, np.random.default_rng(0), low=1.0, high=1.0)


def test_onnx_export_equals_the_numpy_forward(tmp_path):
    from market_sim.mechanisms.onnx_network import OnnxMechanism
    from market_sim.neural.export import write_onnx

    net = initial_network(5, np.random.default_rng(8), hidden=7, layers=3, low=0.2, high=1.5)
    mech = OnnxMechanism(write_onnx(net, tmp_path / "model.onnx"))
    r = np.random.default_rng(9).uniform(0.2, 1.5, (11, 5))
    eps, pay = mech.evaluate(r)
    want_eps, want_pay = net.outputs(r)
    np.testing.assert_allclose(eps, want_eps, rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(pay, want_pay, rtol=1e-12, atol=1e-14)
    # the audit's batched path gives the same numbers as one market at a time
    dev = mech.deviations([1, 3], [[0.3, 1.4], [0.9, 0.2]], r[0])
    trial = r[0].copy()
    trial[3] = 0.2
    assert dev.payments[1, 1] == pytest.approx(net.outputs(trial[None])[1][0, 3], rel=1e-12)


def test_the_onnx_file_records_the_training_objective(tmp_path):
    """write_onnx writes (mu, sigma, gamma) exactly (repr) and OnnxMechanism reads them
    back; a network without them writes no key, and reads back None."""
    import dataclasses

    from market_sim.mechanisms.onnx_network import OnnxMechanism
    from market_sim.neural.export import write_onnx

    net = initial_network(3, np.random.default_rng(2), hidden=4)
    weights = (0.1 + 0.2, 3.0, 1e-7)  # 0.30000000000000004: exact only through repr
    trained = dataclasses.replace(net, objective=weights)
    assert OnnxMechanism(write_onnx(trained, tmp_path / "w.onnx")).objective_weights == weights
    assert OnnxMechanism(write_onnx(net, tmp_path / "n.onnx")).objective_weights is None


def test_the_trainings_deviation_utilities_are_the_mechanisms(tmp_path):
    """The trial markets the training's regret is measured on (seller i at its misreport,
    the others truthful) give the utilities the audit's mechanism interface gives."""
    from market_sim.mechanisms.onnx_network import OnnxMechanism
    from market_sim.neural.export import write_onnx
    from market_sim.neural.training import deviation_utilities

    net = initial_network(4, np.random.default_rng(13), hidden=6)
    gen = np.random.default_rng(14)
    costs, mis = gen.uniform(0, 1, (3, 4)), gen.uniform(0, 1, (2, 3, 4))
    got = deviation_utilities(net.params, mis, costs, net.eps_max, net.low, net.high)
    mech = OnnxMechanism(write_onnx(net, tmp_path / "m.onnx"))
    for s in range(2):
        for b in range(3):
            want = mech.deviation_utilities(range(4), mis[s, b][:, None], costs[b], costs[b])
            np.testing.assert_allclose(got[s, b], want[:, 0], rtol=1e-10, atol=1e-12)
