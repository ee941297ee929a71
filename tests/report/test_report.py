"""The report renderer: self-contained HTML, Markdown, deterministic JSON, figures."""

from __future__ import annotations

import json
import re
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from markupsafe import escape

import clinieval.report as report
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
from clinieval.audit.settings import AuditSettings
from clinieval.report import jsonout, render_figure, render_report
from clinieval.report.cells import decimals, format_interval, format_value, table_view
from clinieval.report.example import large_result, small_result
from clinieval.report.render import inline_svg


@pytest.fixture(scope="module")
def rendered(tmp_path_factory) -> dict[str, Path]:
    return render_report(small_result(), tmp_path_factory.mktemp("report"))


@pytest.fixture(scope="module")
def html(rendered) -> str:
    return rendered["html"].read_text(encoding="utf-8")


def test_writes_every_file(rendered):
    assert {"html", "markdown", "json", "figures"} <= set(rendered)
    for key in ("fail_heatmap", "bt_forest"):
        for suffix in ("png", "svg"):
            assert (rendered["figures"] / f"{key}.{suffix}").stat().st_size > 1000


def test_html_is_self_contained(html):
    assert "http://" not in html and "https://" not in html
    assert not re.search(r"""(?:src|href)\s*=\s*["']?(?!#|data:)[a-z]+:""", html, re.I)
    assert "<script src" not in html and 'rel="stylesheet"' not in html
    assert html.count("<svg") == 2
    assert "xmlns" not in html  # inline SVG carries no namespace URLs


def test_html_shows_estimates_with_intervals_and_counts(html):
    assert "0.82 [0.77, 0.86]" in html
    assert "4.2% [2.1%, 7.9%]" in html
    assert 'data-sort="0.82" title="n = 120"' in html
    assert ">mean lo<" not in html and 'title="mean_lo"' not in html  # raw bounds hidden
    assert 'title="n">n</th>' in html  # the n column stays visible
    assert "&lt;0.001" in html and "✓" in html


def test_html_has_summary_sections_skip_reason_and_settings(html):
    for line in small_result().headlines:
        assert line in html
    assert "No preference records which answer was shown on the left." in html
    assert "Settings used" in html
    for name, info in AuditSettings.model_fields.items():
        assert f'data-sort="{name}"' in html
        assert str(escape(info.description)) in html
    assert "20260301" in html
    assert html.index("Model summary") < html.index("Bradley-Terry") < html.index("Position bias")


def test_every_table_header_is_sortable(html):
    assert "function sortTable" in html
    headers = re.findall(r"<th\b[^>]*>", html)
    assert headers and all("data-sort-type=" in th for th in headers)
    assert 'data-sort-type="num" title="mean"' in html
    assert 'data-sort-type="text" title="model"' in html


def test_outputs_are_byte_identical_across_folders(rendered, tmp_path):
    again = render_report(small_result(), tmp_path / "elsewhere")
    for name in ("results.json", "report.html", "report.md", "figures/fail_heatmap.svg",
                 "figures/fail_heatmap.png", "figures/bt_forest.svg"):
        assert (rendered["json"].parent / name).read_bytes() == (again["json"].parent / name
                                                                 ).read_bytes(), name
    assert str(tmp_path) not in again["json"].read_text(encoding="utf-8")


def test_results_json_holds_every_number_as_plain_json(rendered):
    doc = json.loads(rendered["json"].read_bytes())
    section = doc["sections"][0]
    assert section["tables"]["harmlessness"][2]["mean"] is None  # NaN -> null
    assert section["values"]["missing"] is None
    assert section["values"]["gap_pp"] == 8.25
    assert section["tables"]["harmlessness"][0]["mean"] == 0.82
    assert doc["sections"][2]["skipped"].startswith("No preference records")
    assert doc["settings"]["seed"] == doc["seed"] == 20260301
    assert doc["headlines"] == small_result().headlines
    assert doc["snapshot"]["counts"]["ratings"] == 2160
    assert doc["version"] == "0.1.0"
    assert section["figures"][0]["files"] == {"png": "figures/fail_heatmap.png",
                                              "svg": "figures/fail_heatmap.svg"}


def test_floats_are_rounded_to_six_significant_digits():
    assert jsonout.dumps({"b": 1 / 3, "a": np.float64(123456789.0), "c": float("inf")}) == (
        '{\n "a": 123457000.0,\n "b": 0.333333,\n "c": null\n}\n')


def test_markdown_has_pipe_tables_figures_and_skips(rendered):
    md = rendered["markdown"].read_text(encoding="utf-8")
    assert "| model | mean | fail % | n | ranked | p |" in md
    assert "| --- | ---: | ---: | ---: | ---: | ---: |" in md
    assert "| model-a | 0.82 [0.77, 0.86] | 4.2% [2.1%, 7.9%] | 120 | ✓ | <0.001 |" in md
    assert "![Fail% by model and specialty](figures/fail_heatmap.png)" in md
    assert "> **Skipped:** No preference records" in md
    assert "| seed | 20260301 | 20260301 |" in md


# -- cells -----------------------------------------------------------------------------------

def test_number_formats():
    assert format_interval(0.8213, 0.7704, 0.8611) == "0.82 [0.77, 0.86]"
    assert format_interval(12.34, 10.0, 14.5, "fail_pct") == "12.3% [10.0%, 14.5%]"
    assert format_interval(0.031, 0.012, 0.055) == "0.031 [0.012, 0.055]"
    assert format_interval(float("nan"), 0.1, 0.2) == "—"
    assert format_interval(2.0, 1.0, 6.0) == "2 [1, 6]"  # ranks
    assert format_value(7.25, "severe_pct") == "7.2%"  # 7.25 is exact: round half to even
    assert format_value(0.00004, "p") == "<0.001"
    assert format_value(np.int64(12345), "n") == "12,345"
    assert format_value(120.0, "n") == "120"
    assert format_value(True) == "✓" and format_value(False) == ""
    assert format_value(None) == "—"
    assert format_value(-0.001) == "-0.0010" and format_value(-0.0001, "x_pct") == "0.0%"
    assert format_interval(-0.001, -0.3, 0.2) == "0.00 [-0.30, 0.20]"  # no "-0.00"
    assert [decimals(x) for x in (123.0, 12.3, 1.23, 0.82, 0.031, 0.0)] == [0, 1, 2, 2, 3, 2]


def test_table_view_pairs_estimates_with_bounds_and_counts():
    frame = pd.DataFrame({"model": ["a"], "mean": [0.5], "mean_lo": [0.4], "mean_hi": [0.6],
                          "mean_n": [40], "n": [99], "lone_lo": [1.0]})
    view = table_view("t", frame)
    assert [c.name for c in view.columns] == ["model", "mean", "mean_n", "n", "lone_lo"]
    cell = view.rows[0][1]
    assert (cell.text, cell.sort, cell.title) == ("0.50 [0.40, 0.60]", "0.5", "n = 40")


def test_column_labels_and_text_layout():
    frame = pd.DataFrame({"model": ["m"], "fail_pct_n": [3], "verdict": ["x" * 80]})
    view = table_view("t", frame)
    assert [c.label for c in view.columns] == ["model", "fail % n", "verdict"]
    assert [c.layout for c in view.columns] == ["tight", "", "prose"]


def test_table_view_keeps_a_named_index():
    frame = pd.DataFrame({"x": [1.5]}, index=pd.Index(["m1"], name="model"))
    assert [c.name for c in table_view("t", frame).columns] == ["model", "x"]


# -- figures ---------------------------------------------------------------------------------

FIGURES = [
    Figure("h", "Heatmap", Heatmap(rows=["a", "b"], cols=["x", "y", "z"],
                                   values=[[1.0, None, 3.0], [4.0, 5.0, 6.0]],
                                   n=[[40, 0, 5], [50, 60, 70]], value_label="Fail %",
                                   scale="percent", mask_below=30)),
    Figure("f", "Forest", Forest(labels=["a", "b"], est=[0.1, None], lo=[0.0, None],
                                 hi=[0.2, None], x_label="x", ref=0)),
    Figure("s", "Scatter", Scatter(x=[1, 2, 3], y=[2, 4, 5], labels=["a", "b", "c"],
                                   x_label="x", y_label="y", y_lo=[1, 3, 4], y_hi=[3, 5, 6],
                                   fit=True)),
    Figure("hi", "Hist", Histogram(series={"w": [10, 200, 3000], "l": [20, 30]},
                                   x_label="chars", log_x=True)),
    Figure("b", "Bars", Bars(labels=["a", "b"], est=[-1, 2], lo=[-2, 1], hi=[0, 3], n=[5, 6],
                             y_label="y")),
    Figure("l", "Line", Line(x=[1, 2, 3], y=[1, 2, 1], lo=[0, 1, 0], hi=[2, 3, 2], x_label="x",
                             y_label="y")),
    Figure("e", "Empty", Heatmap(rows=[], cols=[], values=[], scale="sequential",
                                 value_label="")),
]


@pytest.mark.parametrize("fig", FIGURES, ids=[f.kind + "-" + f.key for f in FIGURES])
def test_every_figure_kind_renders(fig, tmp_path):
    paths = render_figure(fig, tmp_path / fig.key)
    assert paths["png"].read_bytes().startswith(b"\x89PNG")
    svg = paths["svg"].read_text(encoding="utf-8")
    assert "<svg" in svg and "<dc:date>" not in svg


def test_wide_heatmap_is_sized_by_its_grid(tmp_path):
    rows, cols = [f"model-{i}" for i in range(13)], [f"specialty {j}" for j in range(76)]
    values = np.arange(13 * 76, dtype=float).reshape(13, 76) % 60
    fig = Figure("wide", "Wide", Heatmap(rows=rows, cols=cols, values=values.tolist(),
                                         value_label="Fail %", scale="percent"))
    svg = render_figure(fig, tmp_path / "wide")["svg"].read_text(encoding="utf-8")
    width, height = (float(v) for v in re.search(r'width="([\d.]+)pt" height="([\d.]+)pt"',
                                                 svg).groups())
    assert 600 < width < 1300 and height < width  # ~0.13 in per column, labels vertical
    assert svg.count("specialty ") == 76 and "rotate(-90" in svg


def test_unknown_figure_kind_names_the_figure(tmp_path):
    with pytest.raises(ValueError, match="'odd'"):
        render_figure(Figure("odd", "Odd", {"pie": [1]}), tmp_path / "odd")  # type: ignore[arg-type]


def test_duplicate_figure_keys_are_refused(tmp_path):
    fig = FIGURES[1]
    result = AuditResult(AuditSettings(), [Section("a", "A", figures=[fig]),
                                           Section("b", "B", figures=[fig])], [], {}, "0.1.0")
    with pytest.raises(ValueError, match="used twice"):
        render_report(result, tmp_path)


def test_inline_svg_prefixes_ids_and_drops_namespaces():
    svg = ('<?xml version="1.0"?>\n<svg xmlns="http://www.w3.org/2000/svg" '
           'xmlns:xlink="http://www.w3.org/1999/xlink"><metadata>x</metadata>'
           '<path id="p1"/><use xlink:href="#p1"/><g clip-path="url(#p1)"/></svg>')
    out = inline_svg(svg, "fig-a", 'A "title"')
    assert out.startswith('<svg role="img" aria-label="A &quot;title&quot;"')
    assert 'id="fig-a-p1"' in out and 'href="#fig-a-p1"' in out and "url(#fig-a-p1)" in out
    assert "http" not in out and "metadata" not in out


def test_snapshot_paths_are_not_written(tmp_path):
    result = small_result()
    result.snapshot["source"] = str(tmp_path / "bundle")
    doc = json.loads(render_report(result, tmp_path / "out")["json"].read_text())
    assert doc["snapshot"]["source"] == "bundle"


def test_public_api_is_curated():
    assert report.__all__ == sorted(report.__all__)
    assert {name for name in report.__all__} == {"render_figure", "render_report"}


@pytest.mark.slow
def test_paper_sized_report_renders(tmp_path):
    """15 figures (one 13 x 76 heatmap) and 22 tables. The target is < 4 s on two
    cores; the bound here only catches order-of-magnitude slips (such as mathtext
    or tight_layout on big grids), since shared CI machines vary too much."""
    result = large_result()
    start = time.perf_counter()
    paths = render_report(result, tmp_path)
    assert time.perf_counter() - start < 15.0
    assert len(list(paths["figures"].glob("*.png"))) == 15
    assert paths["html"].read_text(encoding="utf-8").count("<table") == 22 + 2


def test_heatmap_colours_follow_the_declared_scale_not_the_label():
    from clinieval.report.figures import heat_scale

    values = np.array([[0.5, 1.5]])
    assert heat_scale(values, "diverging")[0] == "RdBu"
    assert heat_scale(values, "sequential")[0] == "OrRd"
    assert heat_scale(np.array([[10.0, 60.0]]), "percent")[1].vmax == 100
    with pytest.raises(ValueError, match="scale"):
        heat_scale(values, "mean score")


def test_figures_drawn_in_parallel_are_the_same_bytes_as_one_by_one(tmp_path):
    from clinieval.report.figures import draw_figures

    jobs = [(fig, tmp_path / "serial" / fig.key) for fig in FIGURES[:4]]
    serial = draw_figures(jobs, workers=1)
    parallel = draw_figures([(fig, tmp_path / "parallel" / fig.key) for fig in FIGURES[:4]],
                            workers=2)
    assert list(serial) == list(parallel) == [fig.key for fig in FIGURES[:4]]
    for key, kinds in serial.items():
        for kind, path in kinds.items():
            assert path.read_bytes() == parallel[key][kind].read_bytes(), (key, kind)
