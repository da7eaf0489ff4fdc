"""The files of a training run: DIR/model.onnx, DIR/training.csv, DIR/training.png."""

from __future__ import annotations

from pathlib import Path

from ..files import atomic_write, save_png
from .export import write_onnx
from .training import TrainingResult

__all__ = ["write_training", "training_figure"]


def training_figure(history):
    """The training curve: the objective, the regret and IR violation (log scale), the
    multipliers and rho, against the iteration."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 3, figsize=(13, 3.6))
    it = history["iteration"]
    axes[0].plot(it, history["objective"])
    axes[0].set(title="buyer's objective (Eq. 11 with payments)", xlabel="iteration")
    for column, label in (("mean_regret", "mean regret"), ("ir_violation", "IR violation")):
        axes[1].semilogy(it, history[column].clip(lower=1e-8), label=label)
    axes[1].set(title="constraints on the batch (training's ascent)", xlabel="iteration")
    axes[1].legend()
    for column, label in (("lambda_regret", "λ regret"), ("lambda_ir", "λ IR"), ("rho", "ρ")):
        axes[2].plot(it, history[column], label=label)
    axes[2].set(title="augmented Lagrangian's multipliers", xlabel="iteration")
    axes[2].legend()
    return fig


def write_training(result: TrainingResult, out) -> dict[str, Path]:
    """Write the run's three files into the folder ``out`` (created, with its parents,
    as ``--out`` promises: the CLI checked it can be, before training); their paths."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    paths = {"model": out / "model.onnx", "history": out / "training.csv"}
    paths["figure"] = out / "training.png"
    write_onnx(result.network, paths["model"])
    csv = result.history.to_csv(index=False).encode()
    atomic_write(paths["history"], lambda fh: fh.write(csv))
    save_png(training_figure(result.history), paths["figure"])
    return paths
