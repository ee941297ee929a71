"""Bidirectional controls (U+202A-202E, U+2066-2069) in what people write are
kept, but cannot reorder what surrounds them on a page, and exports flag
them (issue 29, section 2). The pages are drawn by Debian's chromium
(Playwright), every request answered by the app in-process: a page showing
a string with U+202E (a zero-width character) must look exactly like the
page showing the string without it."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from clinieval.io.bundle import read_bundle
from clinieval.platform.study_export import export_study
from clinieval.storage import db
from clinieval.storage.schema import snapshot as snapshot_tables
from clinieval.web.app import create_app
from clinieval.web.testing import CHROMIUM, csrf_of, make_studies, member_client
from clinieval.web.testing import CHROMIUM_ARGS as ARGS

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")
RLO = "\u202e"
HOST = "http://clinieval.test"


@pytest.fixture
def sqlite_app(tmp_path):
    engine = db.make_engine(f"sqlite:///{tmp_path / 'platform.db'}")
    db.upgrade(engine)
    make_studies(engine)
    yield create_app(engine), engine
    engine.dispose()


def _screenshots(c: TestClient, paths: list[str], mask: str | None = None) -> list[bytes]:
    """Each page drawn by chromium, its requests answered by ``c`` (so with
    its session), as a full-page PNG; ``mask`` covers elements whose own
    text differs between the pages compared."""
    sync_api = pytest.importorskip("playwright.sync_api")
    if not Path(CHROMIUM).exists():
        pytest.skip("needs Debian's chromium (.ci/setup-browser.sh)")

    def through_the_app(route) -> None:
        r = c.get(route.request.url.removeprefix(HOST))
        headers = {k: v for k, v in r.headers.items() if k.lower() != "content-length"}
        route.fulfill(status=r.status_code, headers=headers, body=r.content)

    shots = []
    with sync_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        page = browser.new_page(viewport={"width": 1000, "height": 700})
        page.route("**/*", through_the_app)
        for path in paths:
            page.goto(HOST + path)
            page.evaluate("document.activeElement && document.activeElement.blur()")
            masks = [page.locator(mask)] if mask else []
            shots.append(page.screenshot(full_page=True, mask=masks, animations="disabled"))
        browser.close()
    return shots


def _name_study(engine, name: str) -> None:
    studies = snapshot_tables.studies
    with db.writing(engine) as conn:
        conn.execute(studies.update().where(studies.c.study_id == "x").values(name=name))


def test_a_study_name_with_a_bidi_override_leaves_the_page_as_it_was(sqlite_app):
    """The name "Study x" then "Study x" + U+202E: the override had turned the
    role after it, " (admin)", around."""
    app, engine = sqlite_app
    c = member_client(app, engine, "x", "admin")
    _name_study(engine, "Study x")
    plain = c.get("/studies").text
    _name_study(engine, "Study x" + RLO)
    assert RLO in c.get("/studies").text  # kept as written
    assert plain != c.get("/studies").text
    _name_study(engine, "Study x")
    before, = _screenshots(c, ["/studies"])
    _name_study(engine, "Study x" + RLO)
    after, = _screenshots(c, ["/studies"])
    assert before == after


def _answer(c: TestClient, url: str, comment: str) -> None:
    """Submit the rating task at ``url`` with ``comment`` on accuracy."""
    html = c.get(url).text
    form = {"csrf": csrf_of(html), "time_spent_s": "20", "idempotency_key": re.search(
        r'name="idempotency_key" value="([^"]+)"', html).group(1), "c1.accuracy": comment}
    form |= {f"s1.{k}": "1" for k in set(re.findall(r'name="s1\.([a-z_]+)"', html))}
    assert c.post(url, data=form, headers={"accept": "application/json"}).status_code == 200


def test_an_export_flags_text_holding_bidi_controls(sqlite_app, tmp_path):
    app, engine = sqlite_app
    c = member_client(app, engine, "x", "clinician")
    r = c.post("/s/x/next", data={"csrf": csrf_of(c.get("/studies").text), "kind": "rating"})
    _answer(c, r.headers["location"], f"dose {RLO}gm 2")
    summary = export_study(engine, "x", tmp_path / "b", salt="a secret salt")
    assert summary["bidi_controls"] == {"ratings.comment": 1}  # the manifest written
    snap = read_bundle(tmp_path / "b")
    assert snap.meta["bidi_controls"] == {"ratings.comment": 1}
    assert f"dose {RLO}gm 2" in snap["ratings"]["comment"].to_pylist()  # kept as written
    csv = export_study(engine, "x", tmp_path / "c", salt="a secret salt", fmt="csv")
    assert csv["bidi_controls"] == {"ratings.comment": 1}
