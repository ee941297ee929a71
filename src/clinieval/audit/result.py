"""Typed audit results: sections of DataFrames, figure data and headline values."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal

import pandas as pd

from clinieval.audit.settings import AuditSettings

Number = float | None  # None: no value (drawn as empty)
HeatScale = Literal["sequential", "percent", "diverging", "score"]


@dataclass(frozen=True)
class Skipped:
    """A section that cannot be computed from this snapshot, and why (one line)."""

    reason: str


@dataclass(frozen=True)
class Heatmap:
    """A rows x cols grid of values. ``scale``: ``sequential`` (0 upwards,
    higher is worse), ``percent`` (the same on 0..100), ``diverging``
    (signed, centred on 0) or ``score`` (0..1, higher is better). Cells
    whose count ``n`` is below ``mask_below`` are hatched as too few to call."""

    kind: ClassVar[str] = "heatmap"
    rows: list[str]
    cols: list[str]
    values: list[list[Number]]
    scale: HeatScale
    value_label: str
    n: list[list[int]] | None = None
    mask_below: int | None = None


@dataclass(frozen=True)
class Forest:
    """One estimate with its interval per labelled row; ``ref`` draws a
    vertical reference line."""

    kind: ClassVar[str] = "forest"
    labels: list[str]
    est: list[Number]
    lo: list[Number]
    hi: list[Number]
    x_label: str
    n: list[int] | None = None
    ref: float | None = None


@dataclass(frozen=True)
class Bars:
    """One bar with its interval per label."""

    kind: ClassVar[str] = "bars"
    labels: list[str]
    est: list[Number]
    lo: list[Number]
    hi: list[Number]
    y_label: str
    n: list[int] | None = None


@dataclass(frozen=True)
class Scatter:
    """Labelled points with optional interval whiskers and a least-squares line."""

    kind: ClassVar[str] = "scatter"
    x: list[Number]
    y: list[Number]
    labels: list[str]
    x_label: str
    y_label: str
    x_lo: list[Number] | None = None
    x_hi: list[Number] | None = None
    y_lo: list[Number] | None = None
    y_hi: list[Number] | None = None
    fit: bool = False


@dataclass(frozen=True)
class Histogram:
    """Overlaid histograms of named series on shared bins."""

    kind: ClassVar[str] = "hist"
    series: dict[str, list[float]]
    x_label: str
    bins: int = 30
    log_x: bool = False


@dataclass(frozen=True)
class Line:
    """A line through (x, y) with a band from lo to hi."""

    kind: ClassVar[str] = "line"
    x: list[float]
    y: list[Number]
    lo: list[Number]
    hi: list[Number]
    x_label: str
    y_label: str


FigureData = Heatmap | Forest | Bars | Scatter | Histogram | Line


@dataclass
class Figure:
    """One figure: its typed data (one class per kind) and the words around
    it; the report decides how to draw it."""

    key: str
    title: str
    data: FigureData
    caption: str = ""

    @property
    def kind(self) -> str:
        return self.data.kind


@dataclass
class Section:
    """One analysis. ``skipped`` is a one-line reason when the snapshot lacks
    what the section needs; its tables and figures are then empty.

    Table conventions: an estimate column ``x`` comes with ``x_lo``, ``x_hi``
    (the CI at the audit's level) and a count column ``n`` or ``x_n``.
    """

    key: str
    title: str
    summary: str = ""
    tables: dict[str, pd.DataFrame] = field(default_factory=dict)
    figures: list[Figure] = field(default_factory=list)
    values: dict[str, Any] = field(default_factory=dict)
    skipped: str | None = None


@dataclass
class AuditResult:
    """Everything an audit found: its settings, the sections in report order,
    the headline sentences and what snapshot they describe."""

    settings: AuditSettings
    sections: list[Section]
    headlines: list[str]
    snapshot: dict[str, Any]
    version: str

    def section(self, key: str) -> Section:
        for s in self.sections:
            if s.key == key:
                return s
        raise KeyError(key)

    def __getitem__(self, key: str) -> Section:
        return self.section(key)
