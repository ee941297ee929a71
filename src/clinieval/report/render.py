"""Render an :class:`AuditResult` to report.html, report.md, results.json and figures/."""

from __future__ import annotations

import functools
import html
import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from jinja2 import Environment, FileSystemLoader, StrictUndefined, select_autoescape
from markupsafe import Markup

from clinieval.audit.result import AuditResult, Figure, Section
from clinieval.audit.settings import AuditSettings, default_words
from clinieval.report import jsonout
from clinieval.report.cells import MISSING, Cell, Column, TableView, table_view
from clinieval.report.figures import draw_figures

TEMPLATES = Path(__file__).parent / "templates"
SCRIPT = Path(__file__).parents[1] / "web" / "static" / "report.js"
"""The report's script (sortable tables, figures that toggle to full size),
one file for both uses: report.html carries it inline, as it is one file
opened offline; the web app serves it as a static file and the report it
serves refers to it (:func:`with_script_file`)."""
TITLE = "Clinical safety audit"
COUNT_ORDER = ("models", "cases", "answers", "raters", "ratings", "preferences", "judgments")
CHECKSUM_KEYS = ("checksum", "snapshot_sha256", "sha256")


@dataclass
class FigureView:
    key: str
    title: str
    caption: str
    png: str
    svg: str  # inline SVG markup for the HTML report


@dataclass
class SectionView:
    number: int
    key: str
    anchor: str
    title: str
    summary: str
    skipped: str | None
    tables: list[TableView] = field(default_factory=list)
    figures: list[FigureView] = field(default_factory=list)


def render_report(result: AuditResult, out_dir: Path) -> dict[str, Path]:
    """Write ``report.html``, ``report.md``, ``results.json`` and ``figures/`` into ``out_dir``.

    Returns the paths under the keys ``html``, ``markdown``, ``json`` and ``figures``.
    """
    out_dir = Path(out_dir)
    paths = {"html": out_dir / "report.html", "markdown": out_dir / "report.md",
             "json": out_dir / "results.json", "figures": out_dir / "figures"}
    out_dir.mkdir(parents=True, exist_ok=True)
    stems = figure_stems(result)
    written = draw_figures([(fig, paths["figures"] / stems[fig.key])
                            for s in result.sections for fig in s.figures])
    context = _context(result, _section_views(result, written))
    env = _environment()
    paths["html"].write_text(env.get_template("report.html.j2").render(context), encoding="utf-8")
    paths["markdown"].write_text(env.get_template("report.md.j2").render(context),
                                 encoding="utf-8")
    files = {key: {kind: f"figures/{path.name}" for kind, path in kinds.items()}
             for key, kinds in written.items()}
    paths["json"].write_text(jsonout.dumps(jsonout.results_document(result, files)),
                             encoding="utf-8")
    return paths | _write_csvs(result, out_dir)


def _write_csvs(result: AuditResult, out_dir: Path) -> dict[str, Path]:
    """Tables a section hands on as files (``values["csv"]``: file name ->
    table name), e.g. the judge licences a governance board reads."""
    written = {}
    for section in result.sections:
        for name, table in section.values.get("csv", {}).items():
            written[name] = out_dir / name
            section.tables[table].to_csv(written[name], index=False)
    return written


def figure_stems(result: AuditResult) -> dict[str, str]:
    """File name (without suffix) of every figure; two figures may not share one."""
    stems: dict[str, str] = {}
    for fig in (f for s in result.sections for f in s.figures):
        stem = slug(fig.key)
        if fig.key in stems or stem in stems.values():
            raise ValueError(f"figure key {fig.key!r} is used twice (files figures/{stem}.*)")
        stems[fig.key] = stem
    return stems


def _section_views(result: AuditResult, written: dict[str, dict[str, Path]]
                   ) -> list[SectionView]:
    views, anchors = [], {"settings", "summary-title"}
    shown = [s for s in result.sections if s.values.get("shown", True)]
    for number, section in enumerate(shown, start=1):
        view = _section_view(number, section, _unique(slug(section.key), anchors))
        view.figures = [_figure_view(fig, written[fig.key]) for fig in section.figures]
        views.append(view)
    return views


def _figure_view(fig: Figure, paths: dict[str, Path]) -> FigureView:
    svg = inline_svg(paths["svg"].read_text(encoding="utf-8"), f"fig-{paths['svg'].stem}",
                     fig.title)
    return FigureView(fig.key, fig.title, fig.caption, f"figures/{paths['png'].name}", svg)


def _section_view(number: int, section: Section, anchor: str) -> SectionView:
    return SectionView(number=number, key=section.key, anchor=anchor, title=section.title,
                       summary=section.summary, skipped=section.skipped,
                       tables=[table_view(name, frame) for name, frame in section.tables.items()])


def slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "-", str(text)).strip("-.") or "figure"


def _unique(anchor: str, taken: set[str]) -> str:
    candidate, i = anchor, 2
    while candidate in taken:
        candidate, i = f"{anchor}-{i}", i + 1
    taken.add(candidate)
    return candidate


_PROLOGUE = re.compile(r"^.*?(?=<svg\b)", re.S)
_METADATA = re.compile(r"<metadata>.*?</metadata>\s*", re.S)
_XMLNS = re.compile(r'\s+xmlns(?::\w+)?="[^"]*"')
_STYLE = re.compile(r"<style[^>]*>.*?</style>", re.S)  # page-wide in HTML; the page CSS has it


def inline_svg(svg: str, prefix: str, title: str = "") -> str:
    """SVG markup fit to sit inside HTML next to other figures: no XML prologue,
    no namespace URLs, no <style> (it would apply to the whole page), and every
    id (and reference to one) prefixed so ids of different figures cannot collide."""
    svg = _METADATA.sub("", _PROLOGUE.sub("", svg, count=1))
    svg = _STYLE.sub("", _XMLNS.sub("", svg))
    svg = re.sub(r'\bid="([^"]+)"', rf'id="{prefix}-\1"', svg)
    svg = re.sub(r'href="#([^"]+)"', rf'href="#{prefix}-\1"', svg)
    svg = re.sub(r"url\(#([^)]+)\)", rf"url(#{prefix}-\1)", svg)
    label = html.escape(title, quote=True)
    return svg.replace("<svg", f'<svg role="img" aria-label="{label}"', 1).strip()


# -- context ----------------------------------------------------------------------------------

def _context(result: AuditResult, sections: list[SectionView]) -> dict[str, Any]:
    return {
        "title": TITLE,
        "snapshot_line": snapshot_line(result),
        "headlines": list(result.headlines),
        "sections": sections,
        "settings": settings_view(result.settings),
        "snapshot": _snapshot_view(jsonout.strip_paths(result.snapshot)),
        "seed": result.settings.seed,
        "version": _version(result.version),
        "missing": MISSING,
        "script": _inline_script(),
    }


def snapshot_line(result: AuditResult) -> str:
    """"Snapshot 3f9a0c1d2e4b · 12 models · 4,000 criterion scores · clinieval 0.1.0"."""
    snap = result.snapshot
    parts = []
    checksum = next((snap[k] for k in CHECKSUM_KEYS if snap.get(k)), None)
    if checksum:
        parts.append(f"Snapshot {str(checksum)[:12]}")
    counts = snap.get("counts") or {}
    ordered = [k for k in COUNT_ORDER if k in counts] + sorted(set(counts) - set(COUNT_ORDER))
    parts += [f"{int(counts[k]):,} {_noun(k, counts[k])}" for k in ordered if counts[k]]
    parts.append(_version(result.version))
    return " · ".join(parts)


SINGULAR = {"criteria": "criterion", "studies": "study"}
COUNT_WORDS = {"ratings": "criterion scores"}
"""The platform's one vocabulary: a rating is one clinician's scores of one
answer, and a row of the ratings table is one of its criterion scores (the
live view says "5 ratings (45 criterion scores)"; the header must not call
those 45 rows ratings)."""


def _noun(name: str, count) -> str:
    name = COUNT_WORDS.get(name, name.replace("_", " "))
    if int(count) != 1:
        return name
    return SINGULAR.get(name, name[:-1] if name.endswith("s") else name)


def _version(version: str) -> str:
    return version if str(version).startswith("clinieval") else f"clinieval {version}"


def settings_view(settings: AuditSettings) -> TableView:
    """Every setting with its value, its default and its description."""
    values = settings.describe()
    columns = [Column("setting", "setting", False), Column("value", "value", False),
               Column("default", "default", False), Column("description", "description", False)]
    rows = []
    for name, info in type(settings).model_fields.items():
        default = info.get_default(call_default_factory=True)
        # a None default stands for something (the bundled file, none, all
        # rated): say what, as --help does
        words = default_words(name)
        rows.append([Cell(name, name), _setting_cell(values[name], words),
                     _setting_cell(jsonout.canonical(default), words),
                     Cell(info.description or "", info.description or "")])
    return TableView("settings", "Settings used", columns, rows)


def _setting_cell(value, words: str = "not set") -> Cell:
    if value is None:
        return Cell(words, "")
    text = value if isinstance(value, str) else json.dumps(jsonout.canonical(value),
                                                           ensure_ascii=False)
    return Cell(text, text)


def _snapshot_view(snapshot: dict[str, Any]) -> TableView:
    columns = [Column("field", "field", False), Column("value", "value", False)]
    rows = []
    for key in sorted(snapshot):
        value = snapshot[key]
        if isinstance(value, dict):
            rows += [[Cell(f"{key}.{k}", f"{key}.{k}"), _setting_cell(v)]
                     for k, v in sorted(value.items())]
        else:
            rows.append([Cell(key, key), _setting_cell(value)])
    return TableView("snapshot", "Snapshot", columns, rows)


@functools.cache
def _inline_script() -> Markup:
    return Markup(f"<script>\n{SCRIPT.read_text(encoding='utf-8')}</script>")


def with_script_file(html: str, src: str) -> str:
    """``html``, a report.html as :func:`render_report` writes it, with its
    inline script replaced by ``<script src="{src}">``: for a server whose
    Content-Security-Policy runs no inline script."""
    inline = _inline_script()
    if html.count(inline) != 1:
        raise ValueError("the report does not carry its script exactly once")
    return html.replace(inline, Markup('<script src="{}"></script>').format(src))


@functools.cache
def _environment() -> Environment:
    env = Environment(loader=FileSystemLoader(TEMPLATES), undefined=StrictUndefined,
                      autoescape=select_autoescape(enabled_extensions=("html.j2",),
                                                   default_for_string=False, default=False),
                      trim_blocks=True, lstrip_blocks=True, keep_trailing_newline=True)
    env.filters["md"] = markdown_cell
    env.filters["md_cell"] = markdown_table_cell
    return env


def markdown_table_cell(cell: Cell) -> str:
    """A table cell's text, as ``[text](href)`` where it links somewhere."""
    if not cell.href:
        return markdown_cell(cell.text)
    text = markdown_cell(cell.text).replace("[", "\\[").replace("]", "\\]")
    return f"[{text}]({markdown_href(cell.href)})"


def markdown_href(href: str) -> str:
    """A link target that ends only at its closing parenthesis and cannot break the row."""
    return "".join(f"%{ord(c):02X}" if c in "()<> |\\\n\r\t`[]" else c for c in href)


def markdown_cell(text: str) -> str:
    """Text that cannot break a pipe table row."""
    return str(text).replace("\\", "\\\\").replace("|", "\\|").replace("\n", " ")
