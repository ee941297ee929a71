"""Render audit results: a self-contained HTML report, Markdown, JSON and figure files."""

from clinieval.report.figures import render_figure
from clinieval.report.render import render_report

__all__ = ["render_figure", "render_report"]
