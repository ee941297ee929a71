"""Typed audit results: sections of DataFrames, figure data and headline values."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

import pandas as pd

from clinieval.audit.settings import AuditSettings

FigureKind = Literal["heatmap", "forest", "scatter", "hist", "bars", "line"]


@dataclass
class Figure:
    """Data for one figure; the report decides how to draw it.

    ``data`` holds JSON-serialisable lists. By kind:
    - heatmap: rows, cols, values (rows x cols, None for empty), n (same shape),
      optional value_label, optional mask_below (cells with n below it are hatched).
    - forest: labels, est, lo, hi, optional n, optional x_label, optional ref (vertical line).
    - scatter: x, y, labels, optional x_lo/x_hi/y_lo/y_hi, x_label, y_label, optional fit.
    - hist: series = {name: values}, x_label, optional bins, optional log_x.
    - bars: labels, est, lo, hi, optional n, y_label.
    - line: x, y, lo, hi, x_label, y_label.
    """

    key: str
    title: str
    kind: FigureKind
    data: dict[str, Any]
    caption: str = ""


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
