"""One way to draw a report figure: a headless matplotlib figure, saved and closed."""

from __future__ import annotations

from contextlib import contextmanager


@contextmanager
def saved_figure(path, ncols: int = 1, figsize=(8, 4)):
    """Yield (fig, axes) of a 1 x ``ncols`` grid; on exit lay it out, save it to
    ``path`` and close it."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(1, ncols, figsize=figsize)
    try:
        yield fig, ax
        fig.tight_layout()
        fig.savefig(path, dpi=110)
    finally:
        plt.close(fig)
