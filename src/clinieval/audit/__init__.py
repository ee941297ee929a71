"""The safety-first audit: analyses composed from :mod:`clinieval.stats`."""

from clinieval.audit.result import (
    AuditResult,
    Bars,
    Figure,
    Forest,
    Heatmap,
    Histogram,
    Line,
    Scatter,
    Section,
)
from clinieval.audit.run import SECTIONS, audit
from clinieval.audit.settings import AuditSettings

__all__ = [
    "AuditResult",
    "AuditSettings",
    "Bars",
    "Figure",
    "Forest",
    "Heatmap",
    "Histogram",
    "Line",
    "SECTIONS",
    "Scatter",
    "Section",
    "audit",
]
