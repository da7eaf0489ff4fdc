"""The trained network as an ONNX file, built node by node with ``onnx.helper``.

The graph computes ``network.forward`` (the same equations, in float64) with the
signature of ``market_sim.mechanisms.onnx_network``: one input ``reports``
(batch, n_sellers) with a dynamic batch axis, two outputs ``eps`` and ``payments``.
Operators: Sub, Mul, Div, Unsqueeze, MatMul, ReduceSum, Add, Relu, Squeeze, Sigmoid
(opset 17).  It needs the ``onnx`` package only (no JAX).

A network of several fields takes ``reports`` (batch, n_sellers, F) and names its
fields in the model's metadata (``metadata_props``: key ``report_fields``, value e.g.
``cost,cap,size``, the order of the last axis); the cap is applied with Gather and Min.
A network trained by ``market-sim train`` records the weights of the objective it was
trained on (key ``objective_weights``, value ``mu=1.0,sigma=1.0,gamma=1.0``), so that a
study scores it on the same Eq. 11 (``scenarios/learned.py``).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from ..errors import MarketSimError
from ..files import atomic_write

# the metadata keys and the objective's format belong to the reader of the file
from ..mechanisms.onnx_network import FIELDS_KEY, OBJECTIVE_KEY, objective_text
from .network import TOWERS, MechanismNetwork

__all__ = ["onnx_model", "write_onnx", "OPSET", "FIELDS_KEY", "OBJECTIVE_KEY"]

OPSET = 17


class _Graph:
    """Nodes and constants (initializers) of a graph under construction."""

    def __init__(self, helper, numpy_helper) -> None:
        self.helper, self.numpy_helper = helper, numpy_helper
        self.nodes: list = []
        self.constants: list = []

    def const(self, name: str, value) -> str:
        array = np.asarray(value, dtype=np.float64)
        self.constants.append(self.numpy_helper.from_array(array, name))
        return name

    def axes(self, name: str, values) -> str:
        self.constants.append(self.numpy_helper.from_array(np.asarray(values, np.int64), name))
        return name

    def op(self, kind: str, inputs: list[str], output: str, **attrs) -> str:
        self.nodes.append(self.helper.make_node(kind, inputs, [output], **attrs))
        return output


def _tower(g: _Graph, name: str, layers: list, x: str) -> str:
    """The tower's z (batch, n): ``network.tower``."""
    h = x
    for k, layer in enumerate(layers[:-1]):
        p = f"{name}_{k}"
        own = g.op("MatMul", [h, g.const(f"{p}_w_self", layer["w_self"])], f"{p}_own")
        total = g.op("ReduceSum", [h, "axis_sellers"], f"{p}_sum", keepdims=1)
        rest = g.op("Sub", [total, h], f"{p}_rest")
        mean = g.op("Div", [rest, "n_others"], f"{p}_others_mean")
        others = g.op("MatMul", [mean, g.const(f"{p}_w_others", layer["w_others"])], f"{p}_oth")
        pre = g.op("Add", [own, others], f"{p}_pre")
        biased = g.op("Add", [pre, g.const(f"{p}_bias", layer["bias"])], f"{p}_biased")
        h = g.op("Relu", [biased], f"{p}_h")
    head = layers[-1]
    z = g.op("MatMul", [h, g.const(f"{name}_head_w", head["w"])], f"{name}_z3")
    z = g.op("Add", [z, g.const(f"{name}_head_b", head["b"])], f"{name}_zb")
    return g.op("Squeeze", [z, "axis_last"], f"{name}_z")


def onnx_model(network: MechanismNetwork):
    """The ``onnx.ModelProto`` of ``network`` (checked by ``onnx.checker``)."""
    try:
        import onnx
        from onnx import TensorProto, helper, numpy_helper
    except ImportError:
        raise MarketSimError(
            "writing a network needs onnx: pip install 'market_sim[neural]'"
        ) from None
    g = _Graph(helper, numpy_helper)
    g.axes("axis_sellers", [1])
    g.axes("axis_last", [-1])
    g.const("n_others", network.n_sellers - 1)
    fields = network.fields
    low, high = np.asarray(network.low, float), np.asarray(network.high, float)
    shifted = g.op("Sub", ["reports", g.const("low", low)], "shifted")
    scaled = g.op("Div", [shifted, g.const("width", high - low)], "scaled")
    x = scaled if fields else g.op("Unsqueeze", [scaled, "axis_last"], "x")
    z = {name: _tower(g, name, network.params[name], x) for name in TOWERS}
    alloc = g.op("Sigmoid", [z["allocation"]], "alloc_share")
    eps = g.op("Mul", [alloc, g.const("eps_max", network.eps_max)], "eps_net")
    if fields and "cap" in fields:  # eps = min(network's eps, reported cap)
        g.axes("cap_index", fields.index("cap"))
        cap = g.op("Gather", ["reports", "cap_index"], "reported_cap", axis=2)
        eps = g.op("Min", [eps, cap], "eps_capped")
    eps = g.op("Identity", [eps], "eps")
    pay_share = g.op("Sigmoid", [z["payment"]], "pay_share")
    top = g.op("Mul", [eps, g.const("high", high.reshape(-1)[0])], "eps_times_high")
    g.op("Mul", [top, pay_share], "payments")
    shape: list[str | int | None] = ["batch", network.n_sellers]
    graph = helper.make_graph(
        g.nodes,
        "market_sim_regretnet",
        [helper.make_tensor_value_info("reports", TensorProto.DOUBLE,
                                       shape + ([len(fields)] if fields else []))],
        [helper.make_tensor_value_info(o, TensorProto.DOUBLE, shape) for o in ("eps", "payments")],
        initializer=g.constants,
    )  # fmt: skip
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)])
    model.ir_version = min(model.ir_version, 8)  # readable by onnxruntime >= 1.20
    props = {} if not fields else {FIELDS_KEY: ",".join(fields)}
    if network.objective is not None:
        props[OBJECTIVE_KEY] = objective_text(network.objective)
    if props:
        helper.set_model_props(model, props)
    onnx.checker.check_model(model)
    return model


def write_onnx(network: MechanismNetwork, path) -> Path:
    """Write ``network`` to ``path`` (an .onnx file) and return the path."""
    model = onnx_model(network)
    path = Path(path)
    atomic_write(path, lambda fh: fh.write(model.SerializeToString()))
    return path
