"""ONNX networks for the tests, built with onnx.helper: each a mechanism whose truth is
proved in its docstring (tests/test_onnx_mechanism.py, tests/test_agents.py)."""

from pathlib import Path

import onnx
from onnx import TensorProto, helper

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


def posted_price_caps(path: Path, price=0.5, e_max=1.0, pay_the_report=False,
                      fields=("cost", "cap", "size"), metadata=None, width=None):  # fmt: skip
    """A several-field network, reports (B, n, F) with F = len(fields) (``width``
    overrides the declared F) and metadata ``report_fields`` = ``metadata`` or the
    fields: eps = [cost <= price] min(cap, e_max), payments = price eps.

    That is ``PostedPricePerUnit(price, e_max)`` (market_sim.mechanisms.multifield),
    truthful in cost and cap and IR; proof (its docstring): the outcome depends on the
    seller's own report only; with true (c, k) a sale gives (p - c) min(k', e_max) when
    min(k', e_max) <= k, else -inf, so for c <= p the best is the largest quantity not
    above k, min(k, e_max), the truth's, and for c > p no sale (the truth's u = 0) is
    best.  With ``pay_the_report`` the payment is cost' eps, not IC: a seller of cost
    c < p gets 0 from the truth and (p - c) min(k, e_max) > 0 reporting (p, k)."""
    ci, ki = fields.index("cost"), fields.index("cap")
    nodes = [
        helper.make_node("Gather", ["reports", "i_cost"], ["cost"], axis=2),
        helper.make_node("Gather", ["reports", "i_cap"], ["cap"], axis=2),
        helper.make_node("LessOrEqual", ["cost", "price"], ["sells"]),
        helper.make_node("Cast", ["sells"], ["sold"], to=TensorProto.DOUBLE),
        helper.make_node("Min", ["cap", "e_max"], ["quantity"]),
        helper.make_node("Mul", ["sold", "quantity"], ["eps"]),
        helper.make_node("Mul", ["cost" if pay_the_report else "price", "eps"], ["payments"]),
    ]
    consts = [
        helper.make_tensor("i_cost", TensorProto.INT64, [], [ci]),
        helper.make_tensor("i_cap", TensorProto.INT64, [], [ki]),
        _const("price", price, TensorProto.DOUBLE),
        _const("e_max", e_max, TensorProto.DOUBLE),
    ]
    inp = helper.make_tensor_value_info(
        "reports", TensorProto.DOUBLE, ["B", "n", len(fields) if width is None else width]
    )
    outs = [
        helper.make_tensor_value_info(o, TensorProto.DOUBLE, ["B", "n"])
        for o in ("eps", "payments")
    ]
    graph = helper.make_graph(nodes, "mechanism", [inp], outs, initializer=consts)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    helper.set_model_props(model, {"report_fields": metadata or ",".join(fields)})
    onnx.checker.check_model(model)
    onnx.save(model, str(path))
    return path
