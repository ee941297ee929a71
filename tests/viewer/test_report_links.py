"""Links from the report's judge tables into the run viewer (``--viewer``):
the HTML and Markdown reports carry them escaped and URL-encoded, each one
opens, by the viewer's own filter rules, exactly the judgments of its row,
and ``results.json`` keeps them as fields; a bad address is refused."""

from __future__ import annotations

import html
import html.parser
import json
import re
from urllib.parse import parse_qsl, urlsplit

import pytest
import sqlalchemy as sa
from typer.testing import CliRunner

from clinieval.audit import AuditSettings
from clinieval.cli import app as cli_app
from clinieval.report.cells import Cell
from clinieval.report.render import markdown_table_cell
from clinieval.storage import db
from clinieval.storage.schema import snapshot as snapshot_tables
from tests.viewer.test_viewer import ran  # noqa: F401  (the fixture)

runner = CliRunner()
FILTERS = ("model", "judge", "criterion", "parse", "score")
BASE = "run log/"  # a space: it must come out encoded in both reports


def _keep(row: dict, want: dict) -> bool:
    """The viewer's filter (``keep`` in clinieval.viewer.assets.SCRIPT), in Python."""
    for name in FILTERS:
        wanted, value = want.get(name, ""), row.get(f"data-{name}", "")
        if not wanted:
            continue
        if name == "parse" and wanted == "not-ok":
            if value in ("", "ok"):
                return False
        elif value != wanted:
            return False
    return True


def _want(href: str) -> dict:
    """What the script reads: ``new URLSearchParams(location.hash.slice(1))``
    (form-urlencoded: parse_qsl decodes it the same way)."""
    parts = urlsplit(href)
    assert parts.path.endswith("index.html"), href
    return dict(parse_qsl(parts.fragment, keep_blank_values=True))


class _Tags(html.parser.HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.tags: list[tuple[str, dict]] = []

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, dict(attrs)))


def _tags(text: str) -> list[tuple[str, dict]]:
    parser = _Tags()
    parser.feed(text)
    return parser.tags


def _judgments(url: str) -> list[dict]:
    engine = db.make_engine(url)
    j, a = snapshot_tables.judgments, snapshot_tables.answers
    with engine.connect() as conn:
        rows = conn.execute(sa.select(j.c.judgment_id, j.c.judge_kind, j.c.judge_model,
                                      j.c.criterion_id, j.c.parse_status, a.c.model_id)
                            .join(a, a.c.answer_id == j.c.answer_id)).mappings().all()
    engine.dispose()
    return [dict(r) for r in rows]


def test_report_links_open_the_rows_of_the_table_in_the_viewer(ran, tmp_path):  # noqa: F811
    url, path = ran
    out = tmp_path / "report"
    result = runner.invoke(cli_app, ["audit", url, "--out", str(out), "--bootstrap", "50",
                                     "--viewer", BASE])
    assert result.exit_code == 0, result.output
    site = out / "run log"
    result = runner.invoke(cli_app, ["view", str(path), "--out", str(site)])
    assert result.exit_code == 0, result.output
    rows = [a for t, a in _tags((site / "index.html").read_text()) if t == "tr"
            and a.get("id", "").startswith("j-")]
    judgments = {int(r["judgment_id"]): r for r in _judgments(url)}

    def opened(href: str) -> set[int]:
        want = _want(href)
        return {int(r["id"][2:]) for r in rows if _keep(r, want)}

    page = (out / "report.html").read_text()
    hrefs = [a["href"] for t, a in _tags(page) if t == "a" and "run%20log/" in a.get("href", "")]
    assert hrefs, "the HTML report has no viewer links"
    # in the HTML source the ampersands are escaped, and the link resolves next to the report
    assert all(html.escape(h) in page for h in hrefs)
    assert all(h.startswith("run%20log/index.html#") for h in hrefs)

    sections = {s["key"]: s for s in json.loads((out / "results.json").read_text())["sections"]}
    scores = sections["judge_scores"]["tables"]["scores"]
    calls = sections["automated_judges"]["tables"]["calls"]
    assert scores and calls
    checked = 0
    for row in scores:  # rubric judge rows: model x criterion, and its unparsed ones
        kind, model = row["judge"].split(" judge ", 1)
        expected = {i for i, j in judgments.items() if j["judge_kind"] == kind
                    and j["judge_model"] == model and j["criterion_id"] == row["criterion"]}
        mine = {i for i in expected if judgments[i]["model_id"] == row["model"]}
        assert opened(row["model_href"]) == mine and mine
        bad = {i for i in mine if judgments[i]["parse_status"] != "ok"}
        assert opened(row["unparsed_href"]) == bad and len(bad) == row["unparsed"]
        assert row["model_href"] in hrefs and row["unparsed_href"] in hrefs
        checked += 2
    for row in calls:
        mine = {i for i, j in judgments.items() if (j["judge_kind"], j["judge_model"]) == (
            row["judge_kind"], row["judge_model"])}
        assert opened(row["judge_model_href"]) == mine
        assert opened(row["not_parsed_pct_href"]) == {
            i for i in mine if judgments[i]["parse_status"] != "ok"}
        for status in ("ok", "unparsed", "error"):
            assert len(opened(row[f"{status}_href"])) == row[status]
        checked += 5
    assert checked >= 7

    markdown = (out / "report.md").read_text()
    links = re.findall(r"\]\(([^)\s]*run%20log/index\.html#[^)\s]*)\)", markdown)
    assert set(links) == set(hrefs)
    # the settings table prints the setting
    assert "| viewer | run log/ |" in markdown

    # without the setting: the same report, minus the links and the setting's value
    plain = tmp_path / "plain"
    result = runner.invoke(cli_app, ["audit", url, "--out", str(plain), "--bootstrap", "50"])
    assert result.exit_code == 0, result.output
    assert "href=\"run" not in (plain / "report.html").read_text()
    unlinked = re.sub(r"\[((?:\\.|[^\]\\])*)\]\([^)\s]*run%20log/[^)\s]*\)",
                      lambda m: m[1].replace("\\[", "[").replace("\\]", "]"), markdown)
    unlinked = unlinked.replace("| viewer | run log/ |", "| viewer | no links |")
    assert unlinked == (plain / "report.md").read_text()
    unlinked = re.sub(r'<a href="run%20log/[^"]*">(.*?)</a>', r"\1", page)
    unlinked = unlinked.replace("<bdi>run log/</bdi>", "<bdi>no links</bdi>").replace(
        'data-sort="run log/"', 'data-sort=""')
    assert unlinked == (plain / "report.html").read_text()


def test_markdown_links_cannot_break_the_row_or_the_link():
    cell = Cell("a|b ]x[ (c)", "", href="v/index.html#model=m%28x%29&judge=a b|c)")
    text = markdown_table_cell(cell)
    assert text == r"[a\|b \]x\[ (c)](v/index.html#model=m%28x%29&judge=a%20b%7Cc%29)"
    assert markdown_table_cell(Cell("plain|", "")) == r"plain\|"


@pytest.mark.parametrize("bad", ["javascript:alert(1)", "data:text/html,x", "vbscript:x"])
def test_a_viewer_address_that_is_not_a_web_address_is_refused(bad):
    with pytest.raises(ValueError, match="viewer"):
        AuditSettings(viewer=bad)
    assert AuditSettings(viewer="https://example.org/log/").viewer == "https://example.org/log/"
