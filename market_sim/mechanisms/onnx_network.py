"""A mechanism brought as a network: an ONNX file evaluated with onnxruntime on the CPU.

Any model exported to ONNX (PyTorch's ``torch.onnx.export``, TensorFlow's tf2onnx,
JAX through jax2onnx) is a mechanism here when it has **the signature**:

* **one input**, the reports: a float tensor (``float32`` or ``float64``) of shape
  ``(batch, n_sellers)``, one market per row, the sellers on the last axis.  Declare
  the batch axis dynamic so a whole audit's deviations go through in a few calls; a
  fixed batch of 1 also works (one call per market, slower).
* **two outputs**, ε and the payments, each ``(batch, n_sellers)``: the outputs named
  ``eps`` and ``payments`` when both names exist, else the first two in order.

**Several fields** (sellers with a cost, a privacy cap, a data size:
``market_sim.mechanisms.multifield``): the input is ``(batch, n_sellers, F)`` and the
model's metadata (``metadata_props``) names the fields of the last axis under the key
``report_fields``, e.g. ``cost,cap,size`` (fields of ``market_sim.multifield.FIELDS``,
the cost first).  Such a file is a multi-field mechanism: ``multifield()`` gives it
with ``report_fields``, and the joint audit and ``market-sim audit --population
'...;cap=...' --mechanism onnx:PATH`` take it so.  A file without the key is one-field.

**The training objective.**  A network trained by ``market-sim train`` records the
weights of the Eq. 11 (003) objective it was trained on under the key
``objective_weights`` (value ``mu=1.0,sigma=1.0,gamma=1.0``); ``objective_weights``
is that triple, or None for a file without the key.

The network must be deterministic (the same reports give the same ε and payments);
ε must be finite and ≥ 0.  Every violation of the signature is a one-line
:class:`~market_sim.errors.MarketSimError` naming it.

``market-sim audit --mechanism onnx:path/model.onnx`` (and the same spec in compare,
bne and simulate) builds it; in Python ``OnnxMechanism("path/model.onnx")``.  The audit
evaluates deviations in batches (``deviations`` below), and never certifies a network:
a certificate needs the library's own, unmodified mechanism with a proof
(docs/audit-certification.md); for a network the audit reports what its search found.

onnxruntime is an optional dependency (the ``neural`` extra:
``pip install 'market_sim[neural]'``); importing this module does not need it.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

import numpy as np

from ..errors import MarketSimError
from .base import Mechanism, Outcome, _deviation_args
from .multifield import MultiFieldMechanism

__all__ = [
    "OnnxMechanism",
    "OnnxFields",
    "BATCH_ROWS",
    "FIELDS_KEY",
    "OBJECTIVE_KEY",
    "objective_text",
]

FIELDS_KEY = "report_fields"  # the metadata key of a several-field network
OBJECTIVE_KEY = "objective_weights"  # the metadata key of the training objective's weights
_WEIGHT_NAMES = ("mu", "sigma", "gamma")

#: rows (trial markets) per onnxruntime call in ``deviations``
BATCH_ROWS = 16384

_DTYPES = {"tensor(float)": np.float32, "tensor(double)": np.float64}


def _first_line(exc: Exception) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def _session(path: Path):
    """An onnxruntime CPU session of ``path`` (one line on a missing package or a bad file)."""
    try:
        import onnxruntime as ort
    except ImportError:
        raise MarketSimError(
            "onnx mechanisms need onnxruntime: pip install 'market_sim[neural]'"
        ) from None
    if not path.is_file():
        raise MarketSimError(f"onnx mechanism: {path}: no such file")
    options = ort.SessionOptions()
    options.log_severity_level = 3  # errors only: no warnings on stderr
    try:
        return ort.InferenceSession(
            str(path), sess_options=options, providers=["CPUExecutionProvider"]
        )
    except Exception as exc:  # onnxruntime raises its own exception types
        raise MarketSimError(
            f"onnx mechanism: {path} is not a loadable ONNX model: {_first_line(exc)}"
        ) from None


def _fields(session, path: Path) -> tuple[str, ...] | None:
    """The fields named in the metadata (``report_fields``), or None (one-field)."""
    from ..multifield import FIELDS

    text = session.get_modelmeta().custom_metadata_map.get(FIELDS_KEY)
    if text is None:
        return None
    fields = tuple(f.strip() for f in text.split(","))
    unknown = [f for f in fields if f not in FIELDS]
    if unknown or fields[:1] != ("cost",) or len(set(fields)) != len(fields):
        what = f"unknown field {unknown[0]!r}" if unknown else f"{text!r}"
        raise MarketSimError(
            f"onnx mechanism {path.name}: metadata {FIELDS_KEY} names {what}: distinct "
            f"fields among {', '.join(FIELDS)}, the cost first"
        )
    return fields


def objective_text(weights) -> str:
    """``mu=M,sigma=S,gamma=G``: the training objective's weights (Eq. 11, 003) as the
    metadata value ``_objective`` reads back (``repr``: exact); ``market-sim train``
    writes it (``neural.export``)."""
    pairs = zip(_WEIGHT_NAMES, weights, strict=True)
    return ",".join(f"{k}={float(v)!r}" for k, v in pairs)


def _objective(session, path: Path) -> tuple[float, float, float] | None:
    """(mu, sigma, gamma) named in the metadata (``objective_weights``), or None."""
    text = session.get_modelmeta().custom_metadata_map.get(OBJECTIVE_KEY)
    if text is None:
        return None
    pairs = [item.partition("=") for item in text.split(",")]
    given = {k.strip(): v.strip() for k, _, v in pairs}
    try:
        values = tuple(float(given[k]) for k in _WEIGHT_NAMES)
    except (KeyError, ValueError):
        values = ()
    if len(pairs) != 3 or len(values) != 3 or not all(0 < v < np.inf for v in values):
        raise MarketSimError(
            f"onnx mechanism {path.name}: metadata {OBJECTIVE_KEY} is {text!r}: "
            "it must be mu=M,sigma=S,gamma=G with positive finite numbers"
        )
    return values[0], values[1], values[2]


def _signature(session, path: Path, fields) -> tuple[str, np.dtype, tuple[str, str], object]:
    """(input name, input dtype, (eps output, payments output), declared batch size)."""
    inputs, outputs = session.get_inputs(), session.get_outputs()
    if len(inputs) != 1:
        raise MarketSimError(
            f"onnx mechanism {path.name}: the network must take one input (the reports), "
            f"it takes {len(inputs)}: {', '.join(i.name for i in inputs)}"
        )
    inp = inputs[0]
    if inp.type not in _DTYPES:
        raise MarketSimError(
            f"onnx mechanism {path.name}: the input must be float or double, not {inp.type}"
        )
    want = "(batch, n_sellers)" if fields is None else f"(batch, n_sellers, {len(fields)})"
    last = None if fields is None else inp.shape[-1]
    if len(inp.shape) != (2 if fields is None else 3) or (
        isinstance(last, int) and last != len(fields or ())
    ):
        raise MarketSimError(
            f"onnx mechanism {path.name}: the input must be {want}, its shape is {inp.shape}"
        )
    if len(outputs) < 2:
        raise MarketSimError(
            f"onnx mechanism {path.name}: the network must give two outputs (eps, payments), "
            f"it gives {len(outputs)}"
        )
    names = [o.name for o in outputs]
    pair = ("eps", "payments") if {"eps", "payments"} <= set(names) else (names[0], names[1])
    return inp.name, np.dtype(_DTYPES[inp.type]), pair, inp.shape[0]


class OnnxMechanism(Mechanism):
    """A mechanism given as an ONNX network (reports in; eps and payments out): see the
    module docstring for the signature."""

    name: ClassVar[str] = "onnx"
    spec_argument: ClassVar[str] = "path"  # onnx:PATH is onnx with path=PATH

    def __init__(self, path, dist=None, n_sellers=None):
        self.path = Path(str(path))
        self._session = _session(self.path)
        self.fields = _fields(self._session, self.path)
        self.objective_weights = _objective(self._session, self.path)
        signature = _signature(self._session, self.path, self.fields)
        self._input, self._dtype, self._outputs, batch = signature
        self._batch = batch if isinstance(batch, int) and batch > 0 else None
        self.n_sellers = n_sellers

    def __getstate__(self):  # sessions do not pickle: worker processes reload the file
        return {"path": self.path, "n_sellers": self.n_sellers}

    def __setstate__(self, state):
        self.__init__(state["path"], n_sellers=state["n_sellers"])

    def multifield(self) -> OnnxFields | None:
        """The multi-field mechanism of a several-field file, None for a one-field one."""
        return None if self.fields is None else OnnxFields(self)

    def evaluate(self, reports) -> tuple[np.ndarray, np.ndarray]:
        """(eps, payments), each (rows, n), of the markets ``reports`` (rows, n), or
        (rows, n, F) for a several-field file, float64."""
        r = np.asarray(reports, dtype=float)
        if self.fields is not None and r.ndim != 3:
            raise MarketSimError(
                f"onnx mechanism {self.path.name} reads {','.join(self.fields)} of each "
                "seller: give it a population with these fields (--population "
                "'N*LAW;cap=LAW', docs/multifield.md)"
            )
        r = np.ascontiguousarray(r.reshape(len(r), -1) if self.fields is None else r)
        if self._batch is not None and r.shape[0] != self._batch:
            parts = [self.evaluate(r[i : i + self._batch]) for i in range(0, len(r), self._batch)]
            return np.vstack([p[0] for p in parts]), np.vstack([p[1] for p in parts])
        try:
            eps, pay = self._session.run(list(self._outputs), {self._input: r.astype(self._dtype)})
        except Exception as exc:
            raise MarketSimError(
                f"onnx mechanism {self.path.name}: the network failed on reports of shape "
                f"{r.shape}: {_first_line(exc)}"
            ) from None
        eps, pay = np.asarray(eps, dtype=float), np.asarray(pay, dtype=float)
        if eps.shape != r.shape[:2] or pay.shape != r.shape[:2]:
            raise MarketSimError(
                f"onnx mechanism {self.path.name}: outputs {self._outputs} must have the "
                f"reports' shape {r.shape[:2]} (one per seller), got {eps.shape} and {pay.shape}"
            )
        return eps, pay

    def outcome(self, reports, rng=None) -> Outcome:
        eps, pay = self.evaluate(np.asarray(reports, dtype=float)[None, :])
        return Outcome(eps[0], pay[0])

    def deviations(self, sellers, candidates, reports, rng=None) -> Outcome:
        """Every (seller, candidate) trial market in batches of ``BATCH_ROWS`` rows: row
        k J + j is ``reports`` with seller ``sellers[k]`` at ``candidates[k, j]``."""
        sellers, cand, reports = _deviation_args(sellers, candidates, reports)
        k, j = cand.shape
        who = np.repeat(sellers, j)
        rows = np.arange(k * j)
        eps, pay = np.empty(k * j), np.empty(k * j)
        flat = cand.reshape(-1)
        for a in range(0, k * j, BATCH_ROWS):
            b = min(a + BATCH_ROWS, k * j)
            trial = np.broadcast_to(reports, (b - a, reports.size)).copy()
            trial[rows[a:b] - a, who[a:b]] = flat[a:b]
            e, p = self.evaluate(trial)
            eps[a:b], pay[a:b] = e[rows[a:b] - a, who[a:b]], p[rows[a:b] - a, who[a:b]]
        if not (np.all(np.isfinite(eps)) and np.all(np.isfinite(pay))):
            raise MarketSimError(
                f"onnx mechanism {self.path.name}: eps and payments must be finite"
            )
        return Outcome(eps.reshape(k, j), pay.reshape(k, j))


@dataclass(frozen=True)
class OnnxFields(MultiFieldMechanism):
    """A several-field ONNX network as a multi-field mechanism (the module docstring):
    the records' fields, in the file's order, are the last axis of its input."""

    network: OnnxMechanism
    name: ClassVar[str] = "onnx"

    @property
    def report_fields(self) -> tuple[str, ...]:  # type: ignore[override]
        return tuple(self.network.fields or ())

    def outcome(self, reports, rng=None) -> Outcome:
        n = reports.shape[-1]
        x = np.stack([reports[f] for f in self.report_fields], axis=-1).reshape(
            -1, n, len(self.report_fields)
        )
        eps, pay = self.network.evaluate(x)
        return Outcome(eps.reshape(reports.shape), pay.reshape(reports.shape))
