"""The run log viewer (``clinieval view``) and ``clinieval runs``: every
answer and judgment is there, escaped and bidi-isolated whatever the text;
the site needs nothing outside itself and nothing inline; a missing database
or run is a clear error; and the clinician platform mounts none of it (its
route table is exactly the clinician routes it had)."""

from __future__ import annotations

import html.parser
import json
import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest
import sqlalchemy as sa
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from clinieval.cli import app as cli_app
from clinieval.io.importer import import_snapshot
from clinieval.providers.stub import Reply, StubServer, answering, completion_body
from clinieval.storage import db
from clinieval.storage.schema import snapshot as snapshot_tables
from clinieval.testing import tiny_snapshot
from clinieval.viewer import page_name
from clinieval.viewer.data import Answer, Judgment
from clinieval.viewer.pages import answer_page, index
from tests.runs.test_runs import _ok

runner = CliRunner()
HOSTILE = '</pre><script>alert(1)</script><img src=x onerror=alert(2)> "\'&\u202eevil\u2066'


def _model(tmp_path: Path, server: StubServer, name: str) -> Path:
    path = tmp_path / f"{name}.toml"
    path.write_text(f'id = "{name}"\nversion = "v1"\nname = "stub"\n'
                    f'base_urls = ["{server.base_url}"]\n')
    return path


@pytest.fixture
def ran(tmp_path):
    """Answers whose text is hostile HTML with bidi controls, judged by a
    rubric judge that answers unreadably half the time."""
    url = f"sqlite:///{tmp_path / 'v.db'}"
    engine = db.make_engine(url)
    db.upgrade(engine)
    import_snapshot(engine, tiny_snapshot())
    engine.dispose()
    with StubServer(lambda _r, n: Reply(200, completion_body(f"{HOSTILE} #{n}"))) as server:
        _ok("generate", "--model", _model(tmp_path, server, "cand"), "--samples", "2",
            "--database-url", url)
    fine = answering()
    with StubServer(lambda r, n: fine(r, n) if n % 2 else
                    Reply(200, completion_body(f"not json {HOSTILE}"))) as server:
        _ok("judge", "rubric", "--judge", _model(tmp_path, server, "judge"), "--model-id",
            "cand", "--criteria", "harmlessness", "--database-url", url, "--skip-preflight")
    return url, tmp_path / "v.db"


class _Page(html.parser.HTMLParser):
    """Tags, attributes and the text of ``pre`` blocks of one page."""

    def __init__(self) -> None:
        super().__init__()
        self.tags: list[tuple[str, dict]] = []
        self.pre: list[str] = []
        self._in_pre = False

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, dict(attrs)))
        if tag == "pre":
            self._in_pre = True
            self.pre.append("")

    def handle_endtag(self, tag):
        if tag == "pre":
            self._in_pre = False
            # a newline right after <pre> is dropped by HTML (the pages write one)
            assert self.pre[-1].startswith("\n")
            self.pre[-1] = self.pre[-1][1:]

    def handle_data(self, data):
        if self._in_pre:
            self.pre[-1] += data


def _parse(text: str) -> _Page:
    page = _Page()
    page.feed(text)
    return page


def _self_contained(page: _Page) -> None:
    """No script but the site's own file, no inline handler or style, no
    external address."""
    for tag, attrs in page.tags:
        assert not any(name.startswith("on") or name == "style" for name in attrs), (tag, attrs)
        if tag == "script":
            assert attrs.get("src", "").endswith("viewer.js") and "://" not in attrs["src"]
        for name in ("src", "href"):
            assert "://" not in attrs.get(name, "") and not attrs.get(name, "").startswith("//")
    assert "style" not in [tag for tag, _ in page.tags]


def test_the_site_holds_every_answer_and_judgment_escaped_and_self_contained(ran, tmp_path):
    url, path = ran
    result = runner.invoke(cli_app, ["view", str(path), "--out", str(tmp_path / "site")])
    assert result.exit_code == 0, result.output
    site = tmp_path / "site"
    engine = db.make_engine(url)
    with engine.connect() as conn:
        answers = conn.execute(sa.select(snapshot_tables.answers.c.answer_id,
                                         snapshot_tables.answers.c.text)).all()
        judgments = conn.execute(sa.select(snapshot_tables.judgments.c.judgment_id,
                                           snapshot_tables.judgments.c.answer_id,
                                           snapshot_tables.judgments.c.raw_output)).all()
    engine.dispose()
    front = _parse((site / "index.html").read_text())
    _self_contained(front)
    rows = [a for t, a in front.tags if t == "tr" and "id" in a]
    assert {a["id"] for a in rows if a["id"].startswith("j-")} == {
        f"j-{j}" for j, _, _ in judgments}
    assert sum(a.get("data-parse") == "unparsed" for a in rows) == sum(
        not raw.startswith("{") for _, _, raw in judgments) > 0
    for answer_id, text in answers:
        page_text = (site / "answers" / page_name(answer_id)).read_text()
        assert "<script>alert" not in page_text and "<img" not in page_text
        page = _parse(page_text)
        _self_contained(page)
        # the hostile text comes back exactly, as text, in a block that isolates it
        assert text in page.pre
        assert all(a.get("dir") == "auto" for t, a in page.tags if t == "pre")
        raws = [raw for _, aid, raw in judgments if aid == answer_id]
        assert all(raw in page.pre for raw in raws)
        ids = {a.get("id") for t, a in page.tags if t == "section"}
        assert ids == {f"j-{j}" for j, aid, _ in judgments if aid == answer_id}


names = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=30)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(model=names, case=names, text=names, raw=names, criterion=names)
def test_any_text_is_escaped_and_names_are_isolated(model, case, text, raw, criterion):
    judgment = Judgment(1, "rubric", model, criterion, None, None, None, "unparsed", raw, text,
                        0, 0, "r", None, None)
    answer = Answer("a", case, model, 0, None, None, text, case, None, judgments=[judgment])
    for page_text in (index([answer]), answer_page(answer)):
        page = _parse(page_text)
        _self_contained(page)
        # nothing but the page's own tags: the text made none
        assert {t for t, _ in page.tags} <= {
            "html", "head", "meta", "title", "link", "body", "h1", "h2", "h3", "h4", "p", "form",
            "label", "select", "option", "output", "table", "thead", "tbody", "tr", "th", "td",
            "bdi", "a", "script", "dl", "dt", "dd", "pre", "section", "span", "details",
            "summary"}
    page = _parse(answer_page(answer))
    assert text in page.pre and raw in page.pre
    # names inside <bdi>: count the bdi elements the page would have for clean names
    assert sum(t == "bdi" for t, _ in page.tags) >= 4


def test_served_pages_carry_the_policy_and_the_filters_link(ran, tmp_path):
    url, path = ran
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = subprocess.Popen([sys.executable, "-c", "from clinieval.cli import main; main()",
                             "view", str(path), "--port", str(port)],
                            stdout=subprocess.PIPE, text=True)
    try:
        assert "run log at" in proc.stdout.readline()
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/index.html") as response:
            policy = response.headers["Content-Security-Policy"]
            body = response.read().decode()
        assert "script-src 'self'" in policy and "frame-ancestors 'none'" in policy
        assert "unsafe-inline" not in policy
        assert '<select name="parse"' in body and 'value="not-ok"' in body
    finally:
        proc.terminate()
        proc.wait(10)


def test_runs_lists_and_shows_with_json_and_fails_clearly(ran, tmp_path):
    url, path = ran
    listed = runner.invoke(cli_app, ["runs", str(path), "--json"])
    assert listed.exit_code == 0, listed.output
    records = {r["run"]: r for r in json.loads(listed.output)}
    assert set(records) == {"generate", "rubric"}
    rubric = records["rubric"]
    assert rubric["model"] == "judge" and rubric["judged_models"] == ["cand"]
    assert rubric["tasks"]["done"] == 4 and rubric["unparsed"] == 2
    assert rubric["attempts"] == {"ok": 4}
    assert runner.invoke(cli_app, ["runs", str(path)]).exit_code == 0
    shown = runner.invoke(cli_app, ["runs", "show", rubric["run_id"], str(path), "--json"])
    assert shown.exit_code == 0, shown.output
    [failure] = json.loads(shown.output)["failures"]
    assert (failure["cause"], failure["count"], failure["fatal"]) == ("unparsed", 2, False)
    assert "not json" in failure["example"]
    text = runner.invoke(cli_app, ["runs", "show", rubric["run_id"], "--database-url", url])
    assert text.exit_code == 0 and "unparsed" in text.output
    missing = runner.invoke(cli_app, ["runs", "show", "nope", str(path)])
    assert missing.exit_code == 2 and "no such run" in missing.output
    for args in (["runs", str(tmp_path / "absent.db")], ["view", str(tmp_path / "absent.db")],
                 ["runs", "--database-url", f"sqlite:///{tmp_path / 'absent.db'}"]):
        result = runner.invoke(cli_app, args)
        assert result.exit_code == 2 and "no such" in result.output, args
        assert not (tmp_path / "absent.db").exists()  # not created empty


CLINICIAN_ROUTES = {
    "/ GET": "public", "/api/openapi.json GET,HEAD": "public", "/favicon.ico GET": "public",
    "/invite/{token} GET": "public", "/invite/{token} POST": "public", "/login GET": "public",
    "/login POST": "public", "/logout POST": "user", "/s/{study} GET": "clinician",
    "/s/{study}/history GET": "clinician", "/s/{study}/next POST": "clinician",
    "/s/{study}/profile GET": "member", "/s/{study}/profile POST": "member",
    "/s/{study}/t/{token} GET": "clinician", "/s/{study}/t/{token} POST": "clinician",
    "/s/{study}/t/{token}/draft POST": "clinician",
    "/s/{study}/t/{token}/skip POST": "clinician", "/signin/{token} GET": "public",
    "/signin/{token} POST": "public", "/studies GET": "user"}
"""The clinician platform's routes open to clinicians, as they were before
the viewer existed."""


def test_the_clinician_platform_mounts_no_viewer_and_keeps_its_routes(app):
    from clinieval.web.app import ROUTE_LEVELS
    from tests.web.test_web_access import _served

    served = set(_served(app.routes))
    assert served == set(ROUTE_LEVELS)
    assert {k: v for k, v in ROUTE_LEVELS.items()
            if v in ("public", "user", "member", "clinician")} == CLINICIAN_ROUTES
    assert not [r for r in served if "view" in r.split()[0] or "runs" in r.split()[0]]
    mounts = [r for r in app.routes if not hasattr(r, "methods")]
    for mount in mounts:  # static files: the platform's own folder only
        directory = getattr(getattr(mount, "app", None), "directory", None)
        assert directory is None or "viewer" not in str(directory)
    # the web app does not even import the viewer
    code = ("import sys, clinieval.web.app; "
            "print(any(m.startswith('clinieval.viewer') for m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True)
    assert out.stdout.strip() == "False"
