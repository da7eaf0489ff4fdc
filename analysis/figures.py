"""Drawing report figures, and a check that a figure can be read.

Every study's ``plot`` returns its matplotlib ``Figure`` (already saved when given a
path), so tests and notebooks can read the drawn objects back; ``figure_problems``
lists what would make a figure hard to read: an axes without labels, no title, no
data, non-finite data, a legend with repeated entries or a legend over data, and a
title, label or legend cut off at the figure's edge (``cut_texts``).
"""

from __future__ import annotations

from contextlib import contextmanager

import numpy as np

CONTROL_COLOR = "#c0392b"  # the negative control (pay-as-bid), in every figure that has one
PALETTE = ["C0", "C1", "C2", "C4", "C5", "C6", "C8", "C9"]  # the default cycle without red


def new_figure(nrows: int = 1, ncols: int = 1, figsize=(8, 4), **subplot_kw):
    """(fig, axes) on a headless Figure (no pyplot state), constrained layout."""
    from matplotlib.figure import Figure

    fig = Figure(figsize=figsize, layout="constrained")
    return fig, fig.subplots(nrows, ncols, **subplot_kw)


def save(fig, path, dpi: int = 110) -> None:
    """Save ``fig`` to ``path`` (nothing when ``path`` is None), its titles fitted
    (``market_sim.files.fit_titles``)."""
    from market_sim.files import fit_titles

    fit_titles(fig)
    if path is not None:
        fig.savefig(path, dpi=dpi)


@contextmanager
def saved_figure(path, ncols: int = 1, figsize=(8, 4), nrows: int = 1, **subplot_kw):
    """Yield (fig, axes) of an ``nrows`` x ``ncols`` grid; on exit save it to ``path``
    (when not None). The figure stays readable after the block: return it."""
    fig, ax = new_figure(nrows, ncols, figsize, **subplot_kw)
    yield fig, ax
    save(fig, path)


def outside_legend(fig, handles=None, labels=None, *, ncols: int | None = None, **kw):
    """One figure legend below the axes (never over data), without repeated labels."""
    if handles is None:
        handles, labels = [], []
        for ax in fig.axes:
            h, lab = ax.get_legend_handles_labels()
            handles += h
            labels += lab
    seen: dict[str, object] = {}
    for h, lab in zip(handles, labels, strict=True):
        if lab and not lab.startswith("_"):
            seen.setdefault(lab, h)
    if not seen:
        return None
    n = len(seen)
    return fig.legend(
        list(seen.values()),
        list(seen),
        loc="outside lower center",
        ncols=ncols or min(n, 4),
        fontsize=8,
        frameon=False,
        **kw,
    )


# --- reading a figure back --------------------------------------------------------


def _is_colorbar(ax) -> bool:
    return getattr(ax, "_colorbar", None) is not None


def _finite_points(artist) -> np.ndarray:
    """The artist's data points (n x 2, data coordinates), non-finite ones included."""
    from matplotlib.collections import Collection
    from matplotlib.image import AxesImage
    from matplotlib.lines import Line2D
    from matplotlib.patches import Rectangle

    if isinstance(artist, Line2D):
        x, y = artist.get_data()
        return np.column_stack(
            [np.asarray(x, dtype=float).ravel(), np.asarray(y, dtype=float).ravel()]
        )
    if isinstance(artist, Collection):
        offsets = np.asarray(artist.get_offsets(), dtype=float).reshape(-1, 2)
        if (
            len(offsets)
            and artist.axes is not None
            and artist.get_offset_transform() is artist.axes.transData
        ):
            return offsets
        paths = [np.asarray(p.vertices) for p in artist.get_paths() if np.size(p.vertices)]
        return np.vstack(paths) if paths else np.empty((0, 2))
    if isinstance(artist, Rectangle):
        x, y = artist.get_xy()
        return np.array([[x, y], [x + artist.get_width(), y + artist.get_height()]], dtype=float)
    if isinstance(artist, AxesImage):
        return np.asarray(artist.get_array(), dtype=float).reshape(-1, 1).repeat(2, axis=1)
    return np.empty((0, 2))


def _data_artists(ax):
    """Artists drawn in data coordinates (reference lines such as axhline excluded)."""
    out = []
    for a in [*ax.lines, *ax.collections, *ax.patches, *ax.images]:
        if not a.get_visible():
            continue
        tr = a.get_data_transform() if a in ax.patches else a.get_transform()
        offset_tr = getattr(a, "get_offset_transform", lambda: None)()
        if tr is ax.transData or offset_tr is ax.transData or a in ax.images:
            out.append(a)
    return out


def _display_samples(ax, artist, per_segment: int = 24) -> np.ndarray:
    """Points of ``artist`` in display coordinates, line segments densified."""
    from matplotlib.collections import LineCollection, PathCollection
    from matplotlib.lines import Line2D

    pts = _finite_points(artist)
    pts = pts[np.isfinite(pts).all(axis=1)] if len(pts) else pts
    if not len(pts):
        return np.empty((0, 2))
    if isinstance(artist, PathCollection) and artist.get_offset_transform() is ax.transData:
        return ax.transData.transform(pts)
    disp = ax.transData.transform(pts)
    connected = (isinstance(artist, Line2D) and artist.get_linestyle() not in ("None", "")) or (
        isinstance(artist, LineCollection)
    )
    if not connected or len(disp) < 2:
        return disp
    if isinstance(artist, LineCollection):
        segs = [
            ax.transData.transform(np.asarray(s, dtype=float))
            for s in artist.get_segments()
            if len(s) >= 2 and np.isfinite(s).all()
        ]
    else:
        segs = [disp]
    t = np.linspace(0.0, 1.0, per_segment)[:, None]
    out = [
        (s[:-1, None, :] * (1 - t) + s[1:, None, :] * t).reshape(-1, 2) for s in segs if len(s) > 1
    ]
    return np.vstack(out) if out else disp


def cut_texts(fig) -> list[str]:
    """The titles, axis labels and legends that reach beyond the figure's edges (cut
    off in the saved image), one line each: each text's rendered box against the
    figure's box, one pixel of slack."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    if not hasattr(fig.canvas, "get_renderer"):
        FigureCanvasAgg(fig)
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    box = fig.bbox
    named = [("the figure title", fig._suptitle)] if fig._suptitle is not None else []
    for i, ax in enumerate(fig.axes):
        if not ax.get_visible():
            continue
        named += [(f"the title of axes {i}", t) for t in (ax.title, ax._left_title,
                                                          ax._right_title)]  # fmt: skip
        named += [(f"the x label of axes {i}", ax.xaxis.label)]
        named += [(f"the y label of axes {i}", ax.yaxis.label)]
        if ax.get_legend() is not None:
            named.append((f"the legend of axes {i}", ax.get_legend()))
    named += [("a figure legend", leg) for leg in fig.legends]
    out = []
    for name, artist in named:
        if not artist.get_visible() or (hasattr(artist, "get_text") and not artist.get_text()):
            continue
        b = artist.get_window_extent(renderer)
        sides = [side for side, cut in (("left", b.x0 < box.x0 - 1), ("right", b.x1 > box.x1 + 1),
                                        ("bottom", b.y0 < box.y0 - 1), ("top", b.y1 > box.y1 + 1))
                 if cut]  # fmt: skip
        if sides:
            label = artist.get_text() if hasattr(artist, "get_text") else ""
            what = f" ({label[:40]!r})" if label else ""
            out.append(f"{name}{what} is cut off at the {' and '.join(sides)}")
    return out


def figure_problems(fig) -> list[str]:
    """What makes ``fig`` hard to read, one line each (empty when nothing does)."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.patches import Rectangle

    FigureCanvasAgg(fig)
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    problems = cut_texts(fig)
    suptitle = fig._suptitle.get_text() if fig._suptitle is not None else ""
    axes = [a for a in fig.axes if a.get_visible() and a.axison]
    if not axes:
        problems.append("the figure has no axes")
    for i, ax in enumerate(axes):
        name = f"axes {i} ({ax.get_title() or 'untitled'})"
        if _is_colorbar(ax):
            if not (ax.get_ylabel() or ax.get_xlabel()):
                problems.append(f"colour bar {i} has no label")
            continue
        if not ax.get_xlabel():
            problems.append(f"{name} has no x label")
        if not ax.get_ylabel():
            problems.append(f"{name} has no y label")
        if not (suptitle or ax.get_title()):
            problems.append(f"{name} has no title (and the figure none)")
        artists = _data_artists(ax)
        pts = [_finite_points(a) for a in artists]
        if not any(np.isfinite(p).all(axis=1).any() for p in pts if len(p)):
            problems.append(f"{name} shows no data")
        if any(np.isinf(p).any() for p in pts if len(p)):
            problems.append(f"{name} plots an infinite value")
    legends = [a.get_legend() for a in axes if a.get_legend() is not None] + list(fig.legends)
    for leg in legends:
        labels = [t.get_text() for t in leg.get_texts()]
        dup = sorted({lab for lab in labels if labels.count(lab) > 1})
        if dup:
            problems.append(f"a legend repeats {dup}")
        box = leg.get_window_extent(renderer).shrunk(0.98, 0.98)
        for i, ax in enumerate(axes):
            if _is_colorbar(ax):
                continue
            for artist in _data_artists(ax):
                if isinstance(artist, Rectangle):
                    covered = box.overlaps(artist.get_window_extent(renderer))
                else:
                    p = _display_samples(ax, artist)
                    covered = bool(
                        len(p)
                        and (
                            (p[:, 0] > box.x0)
                            & (p[:, 0] < box.x1)
                            & (p[:, 1] > box.y0)
                            & (p[:, 1] < box.y1)
                        ).any()
                    )
                if covered:
                    problems.append(
                        f"a legend ({', '.join(labels[:2])}, ...) covers data of axes {i}"
                    )
                    break
    return problems
