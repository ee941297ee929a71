"""Batches of short labels drawn straight to the renderer.

A matplotlib ``Text`` spends about a millisecond of Python per draw on top of
the font work, and a heatmap with category labels and annotated cells has
hundreds of them, drawn twice (PNG and SVG). :class:`LabelBatch` draws a whole
set in one artist with the same placement rules, which halves figure time.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import matplotlib as mpl
import numpy as np
from matplotlib.artist import Artist
from matplotlib.backends.backend_svg import FigureCanvasSVG
from matplotlib.font_manager import FontProperties
from matplotlib.text import Text
from matplotlib.transforms import IdentityTransform, Transform

# baseline offset from the anchor for each vertical alignment, from the label's
# height and descent (as matplotlib's Text does for one line)
_VERTICAL = {
    "baseline": lambda h, d: 0.0,
    "bottom": lambda h, d: d,
    "center": lambda h, d: d - h / 2,
    "top": lambda h, d: d - h,
}
_HORIZONTAL = {"left": 0.0, "center": -0.5, "right": -1.0}


class LabelBatch(Artist):
    """Labels at ``xy`` (in ``transform`` coordinates), placed like ``Text`` with
    ``rotation_mode="anchor"``: the (ha, va) point of the unrotated label sits on
    the anchor, shifted by ``offset`` points, and the label turns around it.

    Heights use the metrics of "lp" (as ``Text`` does), so a row of labels shares
    one baseline. In SVG the labels stay text, anchored with ``text-anchor`` so
    they line up whatever font the browser substitutes.
    """

    zorder = 3

    def __init__(self, xy, texts: Sequence[str], *, transform: Transform, size: float,
                 color: str | Sequence[str], ha: str = "center", va: str = "center",
                 rotation: float = 0.0, offset: tuple[float, float] = (0.0, 0.0)):
        super().__init__()
        self._xy = np.asarray(xy, dtype=float).reshape(-1, 2)
        self._texts = [str(t) for t in texts]
        self._colors = [color] * len(self._texts) if isinstance(color, str) else list(color)
        self._prop = FontProperties(size=size)
        self._ha, self._va = ha, va
        self._rotation = float(rotation)
        self._offset = np.asarray(offset, dtype=float)
        self.set_transform(transform)
        # handed to the renderer so the SVG backend can emit text-anchor and a rotation
        # about the anchor, exactly as it does for a Text
        self._anchor = Text(rotation_mode="anchor", horizontalalignment=ha,
                            rotation=rotation, transform=IdentityTransform())

    def draw(self, renderer) -> None:
        if not self.get_visible() or not self._texts:
            return
        anchors = self.get_transform().transform(self._xy)
        anchors = anchors + self._offset * renderer.points_to_pixels(1.0)
        _, lp_height, lp_descent = renderer.get_text_width_height_descent(
            "lp", self._prop, ismath=False)
        turn = math.radians(self._rotation)
        cos, sin = math.cos(turn), math.sin(turn)
        canvas_height = renderer.get_canvas_width_height()[1]
        # SVG text is placed by text-anchor, so only its vertical offset matters
        measure = self._ha != "left" and not self._anchors_text()
        gc = renderer.new_gc()
        for (x, y), text, colour in zip(anchors, self._texts, self._colors, strict=True):
            if not text:
                continue
            width, height, descent = (self._metrics(renderer, text, lp_height, lp_descent)
                                      if measure else (0.0, lp_height, lp_descent))
            dx = _HORIZONTAL[self._ha] * width
            dy = _VERTICAL[self._va](height, descent)
            bx, by = x + dx * cos - dy * sin, y + dx * sin + dy * cos
            gc.set_foreground(colour)
            self._anchor.set_position((x, y))
            renderer.draw_text(gc, bx, canvas_height - by if renderer.flipy() else by, text,
                               self._prop, self._rotation, ismath=False, mtext=self._anchor)
        gc.restore()
        self.stale = False

    def _anchors_text(self) -> bool:
        """Whether the output keeps text as text with its own horizontal anchoring
        (SVG wraps its renderer, so ask the canvas being printed)."""
        return isinstance(self.figure.canvas, FigureCanvasSVG) \
            and mpl.rcParams["svg.fonttype"] == "none"

    def _metrics(self, renderer, text: str, lp_height: float, lp_descent: float
                 ) -> tuple[float, float, float]:
        width, height, descent = renderer.get_text_width_height_descent(
            text, self._prop, ismath=False)
        return width, max(height, lp_height), max(descent, lp_descent)
