"""Writing result files so that a failure never leaves a partial one."""

from __future__ import annotations

import math
import os
import tempfile
from pathlib import Path

import numpy as np

from .errors import MarketSimError

__all__ = ["atomic_write", "check_writable_folder", "check_writable_file", "fit_titles", "save_png"]


def atomic_write(path, write) -> None:
    """Write through ``write(binary_file)`` to a temporary file, then rename:
    a failure leaves no partial output."""
    target = Path(path)
    if not target.parent.exists():
        raise MarketSimError(f"{path}: folder {str(target.parent)!r} does not exist")
    fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".tmp")
    umask = os.umask(0)
    os.umask(umask)
    try:
        os.chmod(tmp, 0o666 & ~umask)  # mkstemp makes 0600; give the usual mode
        with os.fdopen(fd, "wb") as fh:
            write(fh)
        os.replace(tmp, target)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def fit_titles(fig) -> bool:
    """Wrap the figure's title onto more lines where it is wider than the figure, and
    each axes' title where it is wider than its axes (a tenth more allowed), then lay
    the figure out again; True when something was wrapped.  Every figure the CLI
    writes goes through it (``save_png``)."""
    import textwrap

    from matplotlib.backends.backend_agg import FigureCanvasAgg

    if not hasattr(fig.canvas, "get_renderer"):
        FigureCanvasAgg(fig)
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    texts = [(fig._suptitle, 0.96 * fig.bbox.width)] if fig._suptitle else []
    for ax in fig.axes:
        room = 1.1 * ax.get_window_extent(renderer).width
        texts += [(t, room) for t in (ax.title, ax._left_title, ax._right_title)]
    wrapped = False
    for text, room in texts:
        for _ in range(4):
            width = text.get_window_extent(renderer).width
            if not text.get_text() or not text.get_visible() or width <= room:
                break
            longest = max(len(line) for line in text.get_text().split("\n"))
            chars = max(12, int(longest * room / width) - 1)
            lines = [textwrap.fill(line, chars) for line in text.get_text().split("\n")]
            text.set_text("\n".join(lines))
            wrapped = True
    if wrapped:
        engine = fig.get_layout_engine()
        gridded = all(ax.get_subplotspec() is not None for ax in fig.axes)
        if gridded and (engine is None or type(engine).__name__ == "PlaceHolderLayoutEngine"):
            fig.tight_layout()  # a figure laid out by hand keeps its layout
    return wrapped


def save_png(fig, path, dpi: int = 100) -> None:
    """Write a matplotlib figure to ``path`` as PNG atomically (its titles fitted, see
    :func:`fit_titles`), then close it."""
    import matplotlib.pyplot as plt

    fit_titles(fig)

    def write(fh):
        fig.savefig(fh, format="png", dpi=dpi)

    try:
        atomic_write(path, write)
    finally:
        plt.close(fig)


def _nearest_existing(path: Path) -> Path:
    p = path
    while not p.exists() and p != p.parent:
        p = p.parent
    return p


def _probe(folder: Path, shown) -> None:
    """Create and remove a temporary file in ``folder``: the one reliable test
    (os.access says yes to root on a read-only mount, no to ACLs it ignores)."""
    try:
        fd, tmp = tempfile.mkstemp(dir=folder, prefix=".market-sim-probe-")
        os.close(fd)
        os.unlink(tmp)
    except OSError as exc:
        where = "" if folder == Path(shown) else f" ({folder})"
        raise MarketSimError(f"cannot write to {shown}: {exc.strerror or exc}{where}") from None


def check_writable_folder(path) -> None:
    """Refuse, before any work, an output folder that cannot be created or written:
    it must be a folder (or not exist yet) whose nearest existing ancestor is a
    folder this process can create files in.  Nothing is left behind."""
    target = Path(path)
    if target.exists() and not target.is_dir():
        raise MarketSimError(f"cannot write to {path}: it exists and is not a folder")
    base = _nearest_existing(target)
    if not base.is_dir():
        raise MarketSimError(f"cannot write to {path}: {base} is not a folder")
    _probe(base, path)


def check_writable_file(path) -> None:
    """Refuse, before any work, an output file that cannot be written: its folder
    must exist and accept new files, and the path must not be a folder."""
    target = Path(path)
    if target.is_dir():
        raise MarketSimError(f"cannot write to {path}: it is a folder")
    folder = target.parent
    base = _nearest_existing(folder)
    if not base.is_dir():
        raise MarketSimError(f"cannot write to {path}: {base} is not a folder")
    if base != folder:
        raise MarketSimError(f"cannot write to {path}: folder {str(folder)!r} does not exist")
    _probe(folder, path)


def json_plain(v):
    """``v`` with numpy scalars and arrays as plain Python, non-finite floats as None
    (JSON has no inf or NaN), recursively through dicts, lists and tuples."""
    if isinstance(v, dict):
        return {k: json_plain(x) for k, x in v.items()}
    if isinstance(v, (list, tuple, np.ndarray)):
        return [json_plain(x) for x in v]
    if isinstance(v, (np.floating, float)):
        return float(v) if math.isfinite(v) else None
    if isinstance(v, (np.integer, np.bool_)):
        return v.item()
    return v
