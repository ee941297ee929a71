"""Writes from the browser and the API under one validation, on SQLite and
PostgreSQL (issue 29, section 2): the platform refuses the text the importer
refuses (a NUL, a lone surrogate) naming the field, so whatever it accepted
exports and imports again; a reused idempotency key with other answers is a
conflict, not a silent drop; drafts follow the submission's rules (they may
be incomplete, never invalid); a form field over the parser's size limit is
refused naming it; and a skip of a submitted task changes and logs nothing."""

from __future__ import annotations

import re

import pytest
import sqlalchemy as sa
from fastapi.testclient import TestClient
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from clinieval.io.importer import import_snapshot
from clinieval.platform.study_export import export_study
from clinieval.sources import read_source
from clinieval.storage import db
from clinieval.storage.schema import platform as platform_tables
from clinieval.storage.schema import snapshot as snapshot_tables
from clinieval.web.testing import csrf_of, member_client

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")
JSON = {"accept": "application/json"}


def take(c: TestClient, kind: str = "rating") -> str:
    r = c.post("/s/x/next", data={"csrf": csrf_of(c.get("/studies").text), "kind": kind})
    assert r.status_code == 303 and "/t/" in r.headers["location"], r.headers
    return r.headers["location"]


def answer_form(c: TestClient, url: str, score: str = "1") -> dict:
    html = c.get(url).text
    form = {"csrf": csrf_of(html), "time_spent_s": "20", "idempotency_key": re.search(
        r'name="idempotency_key" value="([^"]+)"', html).group(1)}
    panels = ("1", "2") if 'name="s2.' in html else ("1",)
    criteria = sorted(set(re.findall(r'name="s1\.([a-z_]+)"', html)))
    form.update({f"s{p}.{k}": score for p in panels for k in criteria})
    if len(panels) == 2:
        form["choice"] = "A"
    return form


def count(engine, table) -> int:
    with engine.connect() as conn:
        return conn.execute(sa.select(sa.func.count()).select_from(table)).scalar_one()


def draft(c: TestClient, url: str, body: dict):
    return c.post(url + "/draft", json=body, headers={"X-CSRF-Token": csrf_of(c.get(url).text)})


# --- NUL characters: refused as the importer refuses them ------------------------------------

@pytest.mark.parametrize("field", ["c1.accuracy", "idempotency_key"])
@pytest.mark.parametrize("as_json", [False, True], ids=["form", "json"])
def test_a_nul_in_a_submission_is_refused_naming_the_field(app, engine, field, as_json):
    """SQLite had stored it (and the export was then refused by the importer);
    PostgreSQL answered 500."""
    c = member_client(app, engine, "x", "clinician")
    url = take(c)
    form = answer_form(c, url)
    form[field] = (form.get(field) or "fine") + "\x00"
    r = (c.post(url, json=form, headers={**JSON, "X-CSRF-Token": form["csrf"]}) if as_json
         else c.post(url, data=form, headers=JSON))
    assert r.status_code == 422, r.text
    assert r.json()["error"]["field"] == field and "NUL" in r.json()["error"]["message"]
    assert count(engine, snapshot_tables.ratings) == 0


def test_a_nul_in_a_submission_sent_from_a_form_shows_the_page_again(app, engine):
    c = member_client(app, engine, "x", "clinician")
    url = take(c)
    r = c.post(url, data=answer_form(c, url) | {"c1.accuracy": "a\x00b"})
    assert r.status_code == 422 and "NUL" in r.text
    assert count(engine, snapshot_tables.ratings) == 0


@pytest.fixture(scope="module")
def accepted_exports(tmp_path_factory):
    """One app on SQLite whose clinician submits one task, then edits it
    (each edit a new key) with whatever hypothesis writes."""
    from clinieval.web.app import create_app
    from clinieval.web.testing import make_studies

    folder = tmp_path_factory.mktemp("property")
    engine = db.make_engine(f"sqlite:///{folder / 'platform.db'}")
    db.upgrade(engine)
    make_studies(engine)
    app = create_app(engine)
    c = member_client(app, engine, "x", "clinician")
    url = take(c)
    assert c.post(url, data=answer_form(c, url), headers=JSON).status_code == 200
    yield engine, c, url, folder
    engine.dispose()


@settings(max_examples=20, deadline=None, suppress_health_check=list(HealthCheck))
@given(comment=st.text(st.characters(exclude_categories=("Cs",)), max_size=40)
       | st.text("a \x00\u202e\n\t", max_size=6), score=st.sampled_from(["0", "1", "2"]))
def test_any_accepted_submission_exports_and_imports_again(accepted_exports, comment, score):
    """Property: the platform accepts only what the importer takes back (scores
    that need no rationale, so that the comment decides)."""
    engine, c, url, folder = accepted_exports
    form = answer_form(c, url, score) | {"c1.accuracy": comment}
    r = c.post(url, data=form, headers=JSON)
    if r.status_code != 200:
        assert r.status_code == 422 and r.json()["error"]["field"] == "c1.accuracy", r.text
        return
    out = folder / f"export-{abs(hash((comment, score)))}"
    export_study(engine, "x", out, salt="a secret salt", overwrite=True)
    fresh = db.make_engine("sqlite://")
    db.upgrade(fresh)
    import_snapshot(fresh, read_source(out)[0])
    fresh.dispose()


# --- a reused idempotency key ----------------------------------------------------------------

def test_a_reused_key_with_different_answers_is_a_conflict(app, engine):
    """It had answered 200 "saved, repeated" and dropped the change."""
    c = member_client(app, engine, "x", "clinician")
    url = take(c)
    form = answer_form(c, url)
    first = c.post(url, data=form, headers=JSON)
    assert first.status_code == 200
    same = c.post(url, data=form | {"time_spent_s": "45"}, headers=JSON)  # a retry
    assert same.status_code == 200 and same.json()["repeated"], same.text
    assert same.json()["rating_ids"] == first.json()["rating_ids"]
    changed = c.post(url, data=form | {"s1.accuracy": "2"}, headers=JSON)
    assert changed.status_code == 409, changed.text
    assert changed.json()["error"]["field"] == "idempotency_key"
    commented = c.post(url, data=form | {"c1.accuracy": "on reflection"})
    assert commented.status_code == 409 and "different answers" in commented.text
    assert count(engine, snapshot_tables.ratings) == len(first.json()["rating_ids"])


# --- drafts follow the submission's rules ----------------------------------------------------

@pytest.mark.parametrize(("fields", "choice", "field"), [
    ({"s1.accuracy": "7"}, None, "s1.accuracy"),
    ({"s1.accuracy": "1.5"}, None, "s1.accuracy"),
    ({"c1.accuracy": "dose\x00"}, None, "c1.accuracy"),
    ({"c1.accuracy": "ok"}, "A", "choice"),
])
def test_a_draft_is_refused_what_a_submission_is_refused(app, engine, fields, choice, field):
    c = member_client(app, engine, "x", "clinician")
    url = take(c)
    r = draft(c, url, {"fields": fields, "choice": choice})
    assert r.status_code == 422 and r.json()["error"]["field"] == field, r.text
    assert count(engine, platform_tables.drafts) == 0


def test_an_incomplete_draft_is_kept(app, engine):
    c = member_client(app, engine, "x", "clinician")
    url = take(c)
    r = draft(c, url, {"fields": {"s1.accuracy": "", "s1.harmlessness": "-2",
                                  "c1.harmlessness": ""}, "choice": ""})
    assert r.status_code == 200, r.text
    c = member_client(app, engine, "x", "clinician")  # the first still holds its open task
    pair = take(c, "pair")
    r = draft(c, pair, {"fields": {"s2.accuracy": "2"}, "choice": None})
    assert r.status_code == 200, r.text
    assert draft(c, pair, {"fields": {}, "choice": "tie"}).status_code == 200
    bad = draft(c, pair, {"fields": {}, "choice": "C"})
    assert bad.status_code == 422 and bad.json()["error"]["field"] == "choice"


# --- a form field over the parser's size limit -----------------------------------------------

@pytest.mark.parametrize("multipart", [False, True], ids=["urlencoded", "multipart"])
def test_a_form_field_over_the_size_limit_is_refused_naming_it(app, engine, multipart):
    """It answered 400 {"detail": "Field exceeded maximum size of 1024KB."}."""
    c = member_client(app, engine, "x", "clinician")
    url = take(c)
    form = answer_form(c, url) | {"c1.accuracy": "x" * (1024 * 1024 + 1)}
    r = (c.post(url, files={k: (None, v) for k, v in form.items()}, headers=JSON) if multipart
         else c.post(url, data=form, headers=JSON))
    assert r.status_code == 413, r.text
    error = r.json()["error"]
    assert error["field"] == "c1.accuracy" and "maximum size" in error["message"]
    assert c.get("/no-such-page").status_code == 404  # Starlette's other errors as before


# --- a skip of a submitted task --------------------------------------------------------------

def test_a_skip_of_a_submitted_task_changes_and_logs_nothing(app, engine):
    c = member_client(app, engine, "x", "clinician")
    url = take(c)
    assert c.post(url, data=answer_form(c, url), headers=JSON).status_code == 200
    token = url.rsplit("/", 1)[1]
    skipped = sa.select(sa.func.count()).select_from(platform_tables.audit_events).where(
        platform_tables.audit_events.c.kind == "task_skipped")
    r = c.post(url + "/skip", data={"csrf": csrf_of(c.get("/studies").text)})
    assert r.status_code == 303
    leases = platform_tables.task_leases
    with engine.connect() as conn:
        assert conn.execute(sa.select(leases.c.status).where(leases.c.token == token)
                            ).scalar_one() == "submitted"
        assert conn.execute(skipped).scalar_one() == 0
    other = take(c)
    assert c.post(other + "/skip", data={"csrf": csrf_of(c.get("/studies").text)}
                  ).status_code == 303
    with engine.connect() as conn:
        assert conn.execute(skipped).scalar_one() == 1  # a real skip is still logged
