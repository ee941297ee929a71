"""Rubric versions on SQLite and PostgreSQL: each rating records the version it
was given under, a bad new version is refused, and the migration fills the
version of earlier ratings."""

from __future__ import annotations

import json

import pytest
import sqlalchemy as sa

from clinieval.io.bundle import read_bundle
from clinieval.platform.study_export import export_study
from clinieval.rubric import load_rubric, rubric_to_dict
from clinieval.storage import db
from clinieval.storage.schema import platform as platform_tables
from clinieval.storage.schema import snapshot as snapshot_tables
from clinieval.web.testing import csrf_of
from clinieval.web.testing import member_client as member
from tests.web.support import answer_form, csrf, rows, take

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")


def _rubric_upload(**changes) -> tuple[str, bytes, str]:
    data = rubric_to_dict(load_rubric())
    data.update({k: v for k, v in changes.items() if k != "criteria"})
    for c in data["criteria"]:
        if c["criterion_id"] == "accuracy":
            c["definition"] = "DEFINITION OF VERSION TWO"
    if "criteria" in changes:
        data["criteria"] = [c for c in data["criteria"] if c["criterion_id"] in changes["criteria"]]
    return ("rubric.json", json.dumps(data).encode(), "application/json")


def test_ratings_record_the_rubric_version_they_were_given_under(app, engine, tmp_path):
    admin = member(app, engine, "x", "admin")
    c = member(app, engine, "x", "clinician")
    old = load_rubric().version
    first = take(c, "rating")
    c.post(first, data=answer_form(c, first))
    page = admin.get("/s/x/admin/content")
    assert page.status_code == 200 and old in page.text
    r = admin.post("/s/x/admin/rubric", data={"csrf": csrf_of(page.text)},
                   files={"rubric": _rubric_upload(version="2.0.0")})
    assert r.status_code == 200 and "2.0.0" in r.text
    second = take(c, "rating")
    assert "DEFINITION OF VERSION TWO" in c.get(second).text  # clinicians see the new texts
    c.post(second, data=answer_form(c, second))
    c.post(first, data=answer_form(c, first, score="0"))  # an edit after the upload
    versions = rows(engine, snapshot_tables.ratings, "revision", "rubric_version")
    assert {v for r, v in versions if r == 0} == {old, "2.0.0"}
    assert {v for r, v in versions if r == 1} == {"2.0.0"}
    export_study(engine, "x", tmp_path / "export", salt="s")
    exported = read_bundle(tmp_path / "export")
    assert set(exported["ratings"]["rubric_version"].to_pylist()) == {old, "2.0.0"}
    listed = [(v["version"], v["current"]) for v in exported.meta["rubric_versions"]]
    assert listed == [(old, False), ("2.0.0", True)]


@pytest.mark.parametrize("changes, field", [
    ({"version": "1.0.0"}, "version"),
    ({"version": "3", "rubric_id": "another"}, "rubric_id"),
    ({"version": "3", "criteria": ["accuracy"]}, "criteria"),
])
def test_a_bad_rubric_version_is_refused_and_changes_nothing(app, engine, changes, field):
    admin = member(app, engine, "x", "admin")
    before = rows(engine, platform_tables.study_rubric_versions, "study_id", "version")
    r = admin.post("/s/x/admin/rubric", data={"csrf": csrf(admin)},
                   files={"rubric": _rubric_upload(**changes)})
    assert r.status_code == 422 and field in r.text
    assert rows(engine, platform_tables.study_rubric_versions, "study_id", "version") == before
    with engine.connect() as conn:
        assert conn.execute(sa.select(platform_tables.study_rubrics.c.version).where(
            platform_tables.study_rubrics.c.study_id == "x")).scalar_one() == load_rubric().version


def test_migration_fills_the_rubric_version_of_earlier_ratings(db_url):
    """Rows stored under 0005 get their study's version and vote revision 0."""
    engine = db.make_engine(db_url)
    db.upgrade(engine, "0005")
    stamp = "2026-01-01 00:00:00"
    with engine.begin() as conn:
        for sql in (
            "INSERT INTO studies (study_id, name) VALUES ('s', 'S')",
            "INSERT INTO cases (case_id, study_id, specialty, prompt) VALUES ('c', 's', 'P', 'q')",
            "INSERT INTO models (model_id) VALUES ('m1'), ('m2')",
            "INSERT INTO answers (answer_id, case_id, model_id, sample_index)"
            " VALUES ('a1', 'c', 'm1', 0), ('a2', 'c', 'm2', 0)",
            "INSERT INTO raters (rater_id) VALUES ('r')",
            "INSERT INTO criteria (criterion_id, name) VALUES ('k', 'K')",
            f"INSERT INTO ratings (answer_id, rater_id, criterion_id, score, revision, created_at)"
            f" VALUES ('a1', 'r', 'k', 1, 0, '{stamp}')",
            f"INSERT INTO preferences (case_id, answer_a_id, answer_b_id, choice, rater_id,"
            f" created_at) VALUES ('c', 'a1', 'a2', 'A', 'r', '{stamp}')",
            "INSERT INTO study_rubrics (study_id, rubric_id, version, rationale_required)"
            " VALUES ('s', 'rub', '7.1', true)",
        ):
            conn.execute(sa.text(sql))
    db.upgrade(engine)
    assert rows(engine, snapshot_tables.ratings, "rubric_version") == [("7.1",)]
    assert rows(engine, snapshot_tables.preferences, "revision") == [(0,)]
    versions = rows(engine, platform_tables.study_rubric_versions, "study_id", "version")
    assert versions == [("s", "7.1")]
    engine.dispose()
