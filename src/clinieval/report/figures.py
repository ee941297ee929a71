"""Draw audit figures with matplotlib: one drawer per :data:`FigureKind`.

Figures are laid out by hand in inches (margins from label lengths, the plot
area from the number of rows and columns) rather than by ``tight_layout``:
that keeps a 13 x 76 heatmap legible and costs no extra draw. Output is
deterministic: a fixed SVG hash salt, text kept as text, no dates in metadata.
Figures are built as plain ``matplotlib.figure.Figure`` objects (no pyplot), so
nothing global is touched and PNGs go through the Agg canvas.
"""

from __future__ import annotations

import math
import multiprocessing
import os
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import matplotlib
import numpy as np
from matplotlib import colormaps
from matplotlib.axes import Axes
from matplotlib.colors import Normalize, TwoSlopeNorm
from matplotlib.figure import Figure as MplFigure
from matplotlib.ticker import FuncFormatter, LogLocator, MaxNLocator, NullFormatter

from clinieval.audit.result import Bars, Figure, Forest, Heatmap, Histogram, Line, Scatter
from clinieval.report.cells import fixed
from clinieval.report.labels import LabelBatch

DPI = 110
INK = "#2b3137"
MUTED = "#6b737a"
PALETTE = ["#3b6ea5", "#d08c2e", "#4f9a73", "#b5534f", "#7a64a8", "#5f8794", "#a0785a",
           "#c56ea0"]
NO_DATA = "#eceff1"

STYLE = {
    "font.family": "sans-serif",
    "font.sans-serif": ["DejaVu Sans", "Helvetica", "Arial"],
    "font.size": 8.5,
    "axes.labelsize": 8.5,
    "xtick.labelsize": 8,
    "ytick.labelsize": 8,
    "legend.fontsize": 8,
    "legend.frameon": False,
    "text.color": INK,
    "axes.labelcolor": INK,
    "axes.edgecolor": "#8a9299",
    "axes.linewidth": 0.6,
    "axes.spines.top": False,
    "axes.spines.right": False,
    "xtick.color": MUTED,
    "ytick.color": MUTED,
    "grid.color": "#e6eaed",
    "grid.linewidth": 0.6,
    "figure.dpi": DPI,
    "savefig.dpi": DPI,
    "svg.fonttype": "none",
    "text.parse_math": False,  # labels are data: a "$" in a model name is not TeX
    "svg.hashsalt": "clinieval-report",
    "path.simplify": True,
}
PNG_METADATA = {"Software": None}
PNG_OPTIONS = {"compress_level": 1}  # zlib level 6 costs ~25% of the render for 15% less size
SVG_METADATA = {"Date": None, "Creator": None, "Format": None, "Type": None}
TOP_IN = 0.2  # space above the plot; titles and captions live in the report, not the image


def render_figure(fig: Figure, path_stem: Path) -> dict[str, Path]:
    """Draw ``fig`` and write ``<path_stem>.png`` and ``<path_stem>.svg``."""
    with matplotlib.rc_context(STYLE):
        return _write(fig, Path(path_stem))


def _write(fig: Figure, path_stem: Path) -> dict[str, Path]:
    path_stem.parent.mkdir(parents=True, exist_ok=True)
    paths = {"png": path_stem.with_name(path_stem.name + ".png"),
             "svg": path_stem.with_name(path_stem.name + ".svg")}
    drawn = draw(fig)
    drawn.savefig(paths["png"], format="png", metadata=PNG_METADATA, pil_kwargs=PNG_OPTIONS)
    drawn.savefig(paths["svg"], format="svg", metadata=SVG_METADATA)
    return paths


def draw_figures(jobs: list[tuple[Figure, Path]], workers: int | None = None
                 ) -> dict[str, dict[str, Path]]:
    """:func:`render_figure` for every ``(figure, path_stem)``, keyed by figure key.

    Figures are independent and drawing is CPU-bound Python, so they are
    drawn in ``workers`` forked processes (default: one per CPU); the files
    are the same bytes as when drawn one by one.
    """
    workers = min(len(jobs), workers or os.cpu_count() or 1)
    if workers <= 1 or "fork" not in multiprocessing.get_all_start_methods():
        return dict(_draw_batch(jobs))
    batches = [jobs[i::workers] for i in range(workers)]  # costly heatmaps spread out
    context = multiprocessing.get_context("fork")
    with ProcessPoolExecutor(workers - 1, mp_context=context) as pool:
        futures = [pool.submit(_draw_batch, batch) for batch in batches[1:]]
        drawn = _draw_batch(batches[0])  # the parent draws its share meanwhile
        for future in futures:
            drawn += future.result()
    order = {fig.key: i for i, (fig, _) in enumerate(jobs)}
    return dict(sorted(drawn, key=lambda item: order[item[0]]))


def _draw_batch(jobs: list[tuple[Figure, Path]]) -> list[tuple[str, dict[str, Path]]]:
    with matplotlib.rc_context(STYLE):
        return [(fig.key, _write(fig, stem)) for fig, stem in jobs]


def draw(fig: Figure) -> MplFigure:
    """The matplotlib figure for ``fig`` (call inside ``rc_context(STYLE)``)."""
    drawer = DRAWERS.get(type(fig.data))
    if drawer is None:
        raise ValueError(f"figure {fig.key!r}: cannot draw {type(fig.data).__name__}")
    try:
        return drawer(fig)
    except (KeyError, IndexError, TypeError, ValueError) as err:
        raise ValueError(f"figure {fig.key!r} ({fig.data.kind}): cannot draw its data: {err}"
                         ) from err


# -- layout helpers ---------------------------------------------------------------------------

def _canvas(plot_w: float, plot_h: float, *, left: float, right: float, bottom: float,
            top: float = TOP_IN) -> tuple[MplFigure, Axes]:
    """A figure whose plot area is exactly ``plot_w`` x ``plot_h`` inches."""
    width, height = left + plot_w + right, bottom + plot_h + top
    canvas = MplFigure(figsize=(width, height), dpi=DPI, facecolor="white")
    ax = canvas.add_axes((left / width, bottom / height, plot_w / width, plot_h / height))
    for axis in (ax.xaxis, ax.yaxis):  # at most ~6 ticks: calmer, and each tick costs a Text
        axis.set_major_locator(MaxNLocator(nbins=5))
    return canvas, ax


def _text_in(labels: list[str], size: float) -> float:
    """Rough width in inches of the longest label at ``size`` points."""
    return max((len(s) for s in labels), default=0) * size * 0.58 / 72


def _short(label, limit: int = 38) -> str:
    text = str(label)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _floats(values, length: int | None = None) -> np.ndarray:
    if values is None:
        return np.full(length or 0, np.nan)
    return np.array([np.nan if v is None else float(v) for v in values], dtype=float)


def _label_font(count: int) -> float:
    return 8.0 if count <= 20 else 7.0 if count <= 45 else 6.0


def _rotation(labels: list[str], font: float, slot: float) -> int:
    """Horizontal labels when they fit their slot, else 45 degrees, else (many) vertical."""
    if len(labels) <= 8 and _text_in(labels, font) < slot * 0.95:
        return 0
    return 45 if len(labels) <= 20 else 90


def _label_depth(labels: list[str], font: float, rotation: int) -> float:
    """Inches that labels under the x axis need."""
    if rotation == 0:
        return font * 1.4 / 72
    return _text_in(labels, font) * (1.0 if rotation == 90 else 0.72) + 0.05


def _row_labels(ax: Axes, positions, labels: list[str], font: float) -> None:
    """Category labels left of the plot (one artist, not a tick per label)."""
    ax.set_yticks([])
    xy = np.column_stack([np.zeros(len(labels)), positions])
    ax.add_artist(LabelBatch(xy, labels, transform=ax.get_yaxis_transform(), size=font,
                             color=INK, ha="right", va="center", offset=(-4, 0)))


def _col_labels(ax: Axes, positions, labels: list[str], font: float, rotation: int) -> None:
    """Category labels under the plot: centred, or turned about their right end."""
    ax.set_xticks([])
    xy = np.column_stack([positions, np.zeros(len(labels))])
    ha, va = ("center", "top") if rotation == 0 else ("right", "center" if rotation == 90
                                                       else "top")
    ax.add_artist(LabelBatch(xy, labels, transform=ax.get_xaxis_transform(), size=font,
                             color=INK, ha=ha, va=va, rotation=rotation, offset=(0, -4)))


def _note(canvas: MplFigure, text: str, left: float) -> None:
    width = canvas.get_figwidth()
    canvas.text(left / width, 0.06 / canvas.get_figheight(), text, ha="left", va="bottom",
                fontsize=7, color=MUTED)


def _empty(fig: Figure) -> MplFigure:
    canvas, ax = _canvas(4.0, 1.2, left=0.3, right=0.3, bottom=0.2)
    ax.set_axis_off()
    ax.text(0.5, 0.5, "No data", ha="center", va="center", color=MUTED, transform=ax.transAxes)
    return canvas


def _fmt(x: float) -> str:
    """A cell annotation: two significant digits, at most two decimals."""
    if not math.isfinite(x):
        return ""
    return fixed(x, 0 if abs(x) >= 10 else 1 if abs(x) >= 1 else 2)


# -- heatmap ----------------------------------------------------------------------------------

def heat_scale(values: np.ndarray, scale: str) -> tuple[str, Normalize]:
    """The colour map the figure asks for: ``diverging`` (blue-red around 0,
    for signed quantities), ``sequential`` (white to red from 0: higher is
    worse), ``percent`` (sequential, up to 100 once values pass 50) or
    ``score`` (red to green on 0..1: higher is better)."""
    finite = values[np.isfinite(values)]
    low, high = (float(finite.min()), float(finite.max())) if finite.size else (0.0, 1.0)
    if scale == "diverging":
        bound = max(abs(low), abs(high), 1e-9)
        return "RdBu", TwoSlopeNorm(0.0, -bound, bound)
    if scale == "score":
        return "RdYlGn", Normalize(0.0, 1.0)
    if scale not in ("sequential", "percent"):
        raise ValueError(f"unknown heatmap scale {scale!r}")
    top = 100.0 if scale == "percent" and high > 50 else max(high, 1e-9)
    return "OrRd", Normalize(min(0.0, low), top)


def _grid(values, shape: tuple[int, int]) -> np.ndarray:
    if values is None:
        return np.full(shape, np.nan)
    grid = np.array([_floats(row) for row in values], dtype=float)
    return grid.reshape(shape)


def draw_heatmap(fig: Figure) -> MplFigure:
    d: Heatmap = fig.data
    limit = 38 if len(d.cols) <= 40 else 28
    rows, cols = [_short(r, limit) for r in d.rows], [_short(c, limit) for c in d.cols]
    if not rows or not cols:
        return _empty(fig)
    shape = (len(rows), len(cols))
    values = _grid(d.values, shape)
    counts = _grid(d.n, shape) if d.n is not None else None
    label = d.value_label
    font = _label_font(max(shape))
    annotate = shape[0] * shape[1] <= 160 and shape[1] <= 16
    cell_w = min(max(9.0 / shape[1], font * 1.7 / 72, 0.5 if annotate else 0), 0.9)
    cell_h = min(max(4.5 / shape[0], font * 1.6 / 72, 0.32 if annotate else 0), 0.5)
    rotation = _rotation(cols, font, cell_w)
    masked = _low_n(counts, d.mask_below)
    canvas, ax = _canvas(cell_w * shape[1], cell_h * shape[0],
                         left=_text_in(rows, font) + 0.25, right=1.0,
                         bottom=_label_depth(cols, font, rotation) + 0.15
                         + (0.25 if masked is not None else 0))
    cmap_name, norm = heat_scale(values, d.scale)
    cmap = colormaps[cmap_name].with_extremes(bad=NO_DATA)
    image = ax.imshow(np.ma.masked_invalid(values), cmap=cmap, norm=norm, aspect="auto",
                      interpolation="none", extent=(0, shape[1], shape[0], 0))
    _cell_borders(ax, shape, 0.8 if annotate else 0.4)
    _row_labels(ax, np.arange(shape[0]) + 0.5, rows, font)
    _col_labels(ax, np.arange(shape[1]) + 0.5, cols, font, rotation)
    for spine in ax.spines.values():
        spine.set_visible(False)
    if masked is not None and masked.any():
        _hatch(ax, masked)
    if masked is not None:
        _note(canvas, f"Hatched: n < {d.mask_below} (too few to rank). Grey: no data.", 0.12)
    if annotate:
        _annotate(ax, values, counts, cmap, norm, cell_h)
    _colorbar(canvas, ax, image, label)
    return canvas


def _low_n(counts: np.ndarray | None, mask_below) -> np.ndarray | None:
    if counts is None or mask_below is None:
        return None
    with np.errstate(invalid="ignore"):
        return np.isfinite(counts) & (counts < float(mask_below))


def _cell_borders(ax: Axes, shape: tuple[int, int], width: float) -> None:
    ax.hlines(np.arange(1, shape[0]), 0, shape[1], color="white", linewidth=width)
    ax.vlines(np.arange(1, shape[1]), 0, shape[0], color="white", linewidth=width)
    ax.set_xlim(0, shape[1])
    ax.set_ylim(shape[0], 0)


# three parallel strokes per cell, as (x0, y0, x1, y1) in cell units (y grows downwards)
HATCH_STROKES = np.array([[0.1, 0.5, 0.5, 0.1], [0.1, 0.9, 0.9, 0.1], [0.5, 0.9, 0.9, 0.5]])


def _hatch(ax: Axes, masked: np.ndarray) -> None:
    """Grey out the low-n cells and hatch them by hand: one translucent image and
    one broken line (matplotlib's hatch fill costs far more on big grids)."""
    veil = np.zeros(masked.shape + (4,))
    veil[masked] = (1.0, 1.0, 1.0, 0.55)
    ax.imshow(veil, aspect="auto", interpolation="none", extent=ax.images[0].get_extent())
    i, j = np.nonzero(masked)
    strokes = (np.column_stack([j, i, j, i])[:, None, :] + HATCH_STROKES).reshape(-1, 4)
    gap = np.full(len(strokes), np.nan)
    xs = np.column_stack([strokes[:, 0], strokes[:, 2], gap]).ravel()
    ys = np.column_stack([strokes[:, 1], strokes[:, 3], gap]).ravel()
    ax.plot(xs, ys, color="#7d868d", linewidth=0.5)  # one path, broken at the NaNs


def _annotate(ax: Axes, values: np.ndarray, counts: np.ndarray | None, cmap, norm,
              cell_h: float) -> None:
    with_n = counts is not None and cell_h >= 0.4
    i, j = np.nonzero(np.isfinite(values))
    cells = values[i, j]
    r, g, b, _ = cmap(norm(cells)).T
    colours = np.where(0.299 * r + 0.587 * g + 0.114 * b < 0.5, "white", INK).tolist()
    ax.add_artist(LabelBatch(np.column_stack([j + 0.5, i + (0.42 if with_n else 0.5)]),
                             [_fmt(v) for v in cells], transform=ax.transData, size=7.5,
                             color=colours))
    if with_n:
        ax.add_artist(LabelBatch(np.column_stack([j + 0.5, i + 0.78]),
                                 [_count(n, "n=") for n in counts[i, j]],
                                 transform=ax.transData, size=5.5, color=colours))


def _count(n, prefix: str = "") -> str:
    return "" if n is None or not np.isfinite(n) else f"{prefix}{int(n):,}"


def _colorbar(canvas: MplFigure, ax: Axes, mesh, label: str) -> None:
    width, height = canvas.get_figwidth(), canvas.get_figheight()
    box = ax.get_position()
    bar_h = min(box.height, 2.6 / height)
    cax = canvas.add_axes((box.x1 + 0.15 / width, box.y1 - bar_h, 0.13 / width, bar_h))
    bar = canvas.colorbar(mesh, cax=cax)
    bar.outline.set_visible(False)
    bar.ax.tick_params(labelsize=7, length=2)
    bar.set_label(label, fontsize=7.5)


# -- forest / bars / line ----------------------------------------------------------------------

def _intervals(d: Forest | Bars, k: int) -> tuple:
    """The est, lo and hi series of a forest or bars figure as ``k`` floats each."""
    return tuple(_floats(v, k) for v in (d.est, d.lo, d.hi))


def draw_forest(fig: Figure) -> MplFigure:
    d: Forest = fig.data
    labels = [_short(s, 44) for s in d.labels]
    if not labels:
        return _empty(fig)
    k = len(labels)
    est, lo, hi = _intervals(d, k)
    counts = d.n
    font = _label_font(k)
    row_h = 0.24 if k <= 20 else font * 1.9 / 72
    canvas, ax = _canvas(4.6, max(0.9, row_h * k), left=_text_in(labels, font) + 0.3,
                         right=0.75 if counts else 0.3, bottom=0.55, top=0.35)
    y = np.arange(k)
    for row in range(1, k, 2):
        ax.axhspan(row - 0.5, row + 0.5, color="#f4f6f7", zorder=0, linewidth=0)
    ax.hlines(y, lo, hi, color=PALETTE[0], linewidth=1.4, zorder=2)
    ax.plot(est, y, "o", color=PALETTE[0], markersize=4.5, zorder=3)
    if d.ref is not None:
        ax.axvline(float(d.ref), color=MUTED, linestyle="--", linewidth=0.8, zorder=1)
    _row_labels(ax, y, labels, font)
    ax.set_ylim(k - 0.5, -0.5)
    ax.spines["left"].set_visible(False)
    ax.grid(axis="x")
    ax.set_axisbelow(True)
    ax.set_xlabel(d.x_label)
    if counts:
        _right_counts(ax, y, counts, font)
    return canvas


def _right_counts(ax: Axes, y: np.ndarray, counts, font: float) -> None:
    column = [_count(np.nan if n is None else n) for n in counts]
    xy = np.column_stack([np.full(len(y) + 1, 1.0), np.concatenate([[-0.9], y])])
    ax.add_artist(LabelBatch(xy, ["n", *column], transform=ax.get_yaxis_transform(), size=font,
                             color=MUTED, ha="left", va="center", offset=(6, 0)))


def draw_bars(fig: Figure) -> MplFigure:
    d: Bars = fig.data
    labels = [_short(s, 30) for s in d.labels]
    if not labels:
        return _empty(fig)
    k = len(labels)
    est, lo, hi = _intervals(d, k)
    font = _label_font(k)
    width = min(max(3.2, 0.34 * k), 14.0)
    rotation = _rotation(labels, font, width / k)
    canvas, ax = _canvas(width, 2.8, left=0.75, right=0.3,
                         bottom=_label_depth(labels, font, rotation) + 0.15)
    x = np.arange(k)
    ax.bar(x, np.nan_to_num(est), width=0.62, color=PALETTE[0], alpha=0.85, zorder=2)
    ax.vlines(x, lo, hi, color=INK, linewidth=1.0, zorder=3)
    ax.hlines(np.concatenate([lo, hi]), np.tile(x - 0.12, 2), np.tile(x + 0.12, 2), color=INK,
              linewidth=1.0, zorder=3)
    if (np.concatenate([est, lo]) < 0).any():
        ax.axhline(0, color=MUTED, linewidth=0.7)
    _col_labels(ax, x, labels, font, rotation)
    ax.set_xlim(-0.6, k - 0.4)
    ax.set_ylabel(d.y_label)
    ax.grid(axis="y")
    ax.set_axisbelow(True)
    if d.n and k <= 25:
        tops = np.where(np.isfinite(hi), hi, np.nan_to_num(est))
        ax.add_artist(LabelBatch(np.column_stack([x, tops]),
                                 [_count(np.nan if n is None else n, "n=") for n in d.n],
                                 transform=ax.transData, size=6, color=MUTED, va="bottom",
                                 offset=(0, 2)))
    return canvas


def draw_line(fig: Figure) -> MplFigure:
    d: Line = fig.data
    xs = list(d.x)
    if not xs:
        return _empty(fig)
    k = len(xs)
    categorical = any(isinstance(v, str) for v in xs)
    x = np.arange(k, dtype=float) if categorical else _floats(xs)
    y, lo, hi = (_floats(v, k) for v in (d.y, d.lo, d.hi))
    canvas, ax = _canvas(5.2, 2.8, left=0.75, right=0.3,
                         bottom=0.55 + (_text_in([str(v) for v in xs], 7) * 0.75
                                        if categorical else 0))
    ax.fill_between(x, lo, hi, color=PALETTE[0], alpha=0.18, linewidth=0)
    ax.plot(x, y, "o-", color=PALETTE[0], markersize=3.5, linewidth=1.4)
    if categorical:
        ax.set_xticks(x, [_short(v, 24) for v in xs], fontsize=7, rotation=45, ha="right",
                      rotation_mode="anchor")
    ax.set_xlabel(d.x_label)
    ax.set_ylabel(d.y_label)
    ax.grid(axis="y")
    ax.set_axisbelow(True)
    return canvas


# -- scatter / hist ---------------------------------------------------------------------------

def draw_scatter(fig: Figure) -> MplFigure:
    d: Scatter = fig.data
    x, y = _floats(d.x), _floats(d.y)
    if not x.size:
        return _empty(fig)
    canvas, ax = _canvas(4.8, 3.4, left=0.75, right=0.4, bottom=0.55)
    whisker = {"color": PALETTE[0], "alpha": 0.55, "linewidth": 1.0, "zorder": 2}
    if d.x_lo is not None and d.x_hi is not None:
        ax.hlines(y, _floats(d.x_lo), _floats(d.x_hi), **whisker)
    if d.y_lo is not None and d.y_hi is not None:
        ax.vlines(x, _floats(d.y_lo), _floats(d.y_hi), **whisker)
    ax.plot(x, y, "o", color=PALETTE[0], markersize=5, zorder=3)
    if d.fit:
        _fit_line(ax, x, y)
    labels = [_short(s, 24) for s in d.labels][: x.size]
    shown = np.isfinite(x[: len(labels)]) & np.isfinite(y[: len(labels)])
    ax.add_artist(LabelBatch(np.column_stack([x[: len(labels)], y[: len(labels)]])[shown],
                             [s for s, ok in zip(labels, shown, strict=True) if ok],
                             transform=ax.transData, size=7 if len(labels) <= 20 else 6,
                             color=INK, ha="left", va="bottom", offset=(4, 3)))
    ax.set_xlabel(d.x_label)
    ax.set_ylabel(d.y_label)
    ax.grid(True)
    ax.set_axisbelow(True)
    return canvas


def _fit_line(ax: Axes, x: np.ndarray, y: np.ndarray) -> None:
    """The least-squares line through the finite points, when there is one."""
    ok = np.isfinite(x) & np.isfinite(y)
    if ok.sum() < 2 or np.ptp(x[ok]) == 0:
        return
    slope, intercept = np.polyfit(x[ok], y[ok], 1)
    fx = np.array([x[ok].min(), x[ok].max()])
    ax.plot(fx, intercept + slope * fx, "--", color=PALETTE[3], linewidth=1.0, zorder=1)


def draw_hist(fig: Figure) -> MplFigure:
    d: Histogram = fig.data
    log_x = d.log_x
    series = {str(k): _clean(v, log_x) for k, v in d.series.items()}
    pooled = np.concatenate(list(series.values())) if series else np.array([])
    if not pooled.size:
        return _empty(fig)
    edges = _edges(pooled, d.bins, log_x)
    canvas, ax = _canvas(5.2, 2.8, left=0.75, right=0.3, bottom=0.55)
    for colour, (name, values) in zip(PALETTE * 4, series.items(), strict=False):
        density, _ = np.histogram(values, bins=edges, density=bool(values.size))
        ax.stairs(density, edges, fill=True, color=colour, alpha=0.25, linewidth=0)
        ax.stairs(density, edges, color=colour, linewidth=1.3,
                  label=f"{name} (n={values.size:,})")
    if log_x:
        _log_axis(ax)
    ax.set_xlabel(d.x_label)
    ax.set_ylabel("density")
    ax.legend(loc="upper right")
    return canvas


def _log_axis(ax: Axes) -> None:
    """Log scale labelled 100, 200, 500, 1,000 (plain numbers read better than 10^3
    and skip mathtext, the slowest text path in matplotlib)."""
    ax.set_xscale("log")
    ax.xaxis.set_major_locator(LogLocator(subs=(1.0, 2.0, 5.0)))
    ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:,.0f}" if v >= 1 else f"{v:g}"))
    ax.xaxis.set_minor_formatter(NullFormatter())


def _clean(values, log_x: bool) -> np.ndarray:
    arr = _floats(values)
    arr = arr[np.isfinite(arr)]
    return arr[arr > 0] if log_x else arr


def _edges(pooled: np.ndarray, bins: int, log_x: bool) -> np.ndarray:
    bins = max(1, int(bins))
    low, high = float(pooled.min()), float(pooled.max())
    if high <= low:
        high = low + (abs(low) * 0.1 or 1.0)
    return np.geomspace(low, high, bins + 1) if log_x else np.linspace(low, high, bins + 1)


DRAWERS: dict[type, Callable[[Figure], MplFigure]] = {
    Heatmap: draw_heatmap,
    Forest: draw_forest,
    Scatter: draw_scatter,
    Histogram: draw_hist,
    Bars: draw_bars,
    Line: draw_line,
}
