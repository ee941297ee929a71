"""Adding cases and answers to a running study, on SQLite and PostgreSQL: in
the admin page, over the API and from the command line; a bad source adds
nothing and names the problem."""

from __future__ import annotations

import io
import zipfile

import pyarrow as pa
import pyarrow.compute as pc
import pytest
import sqlalchemy as sa
from fastapi.testclient import TestClient
from typer.testing import CliRunner

from clinieval.cli import app as cli_app
from clinieval.io.bundle import write_bundle
from clinieval.platform import membership
from clinieval.snapshot import Snapshot
from clinieval.storage.schema import platform as platform_tables
from clinieval.storage.schema import snapshot as snapshot_tables
from clinieval.web.testing import blinding_source, csrf_of, make_studies
from clinieval.web.testing import member_client as member
from tests.helpers import zipped_bundle
from tests.web.support import csrf, rows, take

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")


def more_cases(prefix: str = "more-") -> Snapshot:
    """New Pathology cases (study x's specialty) with plain answers."""
    snap = blinding_source()
    cases = snap["cases"].filter(pc.equal(snap["cases"]["specialty"], "Pathology"))
    answers = snap["answers"].filter(pc.is_in(snap["answers"]["case_id"], cases["case_id"]))

    def renamed(table: pa.Table, column: str) -> pa.Table:
        ids = pc.binary_join_element_wise(prefix, table[column], "")
        return table.set_column(table.schema.get_field_index(column), column, ids)

    answers = renamed(renamed(answers, "answer_id"), "case_id")
    texts = [f"Plain advice number {i}: review the slide with a colleague."
             for i in range(answers.num_rows)]
    answers = answers.set_column(answers.schema.get_field_index("text"), "text", pa.array(texts))
    return Snapshot.from_tables({**snap.tables, "cases": renamed(cases, "case_id"),
                                 "answers": answers}, snap.meta)


def zipped(snap: Snapshot, tmp_path) -> bytes:
    return zipped_bundle(snap, tmp_path)


def _content(engine) -> dict[str, list]:
    return {t.name: rows(engine, t, *[c.name for c in t.primary_key.columns])
            for t in (snapshot_tables.cases, snapshot_tables.answers, snapshot_tables.models,
                      platform_tables.answer_screens)}


def test_an_admin_adds_cases_to_a_running_study(app, engine, tmp_path):
    admin = member(app, engine, "x", "admin")
    before = _content(engine)
    source = more_cases()
    page = admin.get("/s/x/admin/content")
    assert page.status_code == 200
    r = admin.post("/s/x/admin/cases", data={"csrf": csrf_of(page.text)},
                   files={"source": ("more.zip", zipped(source, tmp_path), "application/zip")})
    assert r.status_code == 200, r.text
    n_cases, n_answers = source["cases"].num_rows, source["answers"].num_rows
    assert f"Added {n_cases} case(s) and {n_answers} answer(s); 0 held back" in r.text
    after = _content(engine)
    assert len(after["cases"]) == len(before["cases"]) + n_cases
    assert len(after["answer_screens"]) == len(before["answer_screens"]) + n_answers
    # Sending the same file again adds nothing (and is not an error).
    r = admin.post("/s/x/admin/cases", data={"csrf": csrf(admin)},
                   files={"source": ("more.zip", zipped(source, tmp_path), "application/zip")})
    assert r.status_code == 200 and "Added 0 case(s) and 0 answer(s)" in r.text
    assert _content(engine) == after
    # The new answers reach clinicians.
    new_ids = set(source["answers"]["answer_id"].to_pylist())
    c = member(app, engine, "x", "clinician")
    given = set()
    for _ in range(40):
        url = take(c, "rating")
        with engine.connect() as conn:
            given.add(conn.execute(sa.select(platform_tables.task_leases.c.answer_id).where(
                platform_tables.task_leases.c.token == url.rsplit("/", 1)[1])).scalar_one())
        c.post(url + "/skip", data={"csrf": csrf(c)})
        if given & new_ids:
            break
    assert given & new_ids


def _broken_answers(tmp_path) -> bytes:
    """A tables folder whose answers name a case that does not exist."""
    snap = more_cases("bad-")
    answers = snap["answers"]
    case_ids = answers["case_id"].to_pylist()
    case_ids[2] = "no-such-case"
    answers = answers.set_column(answers.schema.get_field_index("case_id"), "case_id",
                                 pa.array(case_ids))
    return zipped(Snapshot.from_tables({**snap.tables, "answers": answers}, snap.meta), tmp_path)


def test_a_bad_source_adds_nothing_and_names_the_problem(app, engine, tmp_path):
    admin = member(app, engine, "x", "admin")
    before = _content(engine)
    cases = [
        (("more.zip", _broken_answers(tmp_path), "application/zip"), "no-such-case"),
        (("arena.json", b'{"not": "a known format"}', "application/json"), "arena.json"),
        (("more.zip", b"PK not a zip", "application/zip"), "zip"),
    ]
    lung = more_cases("lung-")
    lung_cases = lung["cases"].set_column(lung["cases"].schema.get_field_index("specialty"),
                                          "specialty", pa.array(["Pulmonology"] *
                                                                lung["cases"].num_rows))
    off = Snapshot.from_tables({**lung.tables, "cases": lung_cases}, lung.meta)
    cases.append((("lung.zip", zipped(off, tmp_path), "application/zip"), "not offered"))
    for upload, message in cases:
        r = admin.post("/s/x/admin/cases", data={"csrf": csrf(admin)}, files={"source": upload})
        assert r.status_code == 422 and message in r.text, (message, r.text[-600:])
    assert _content(engine) == before


def test_the_api_adds_cases(app, engine, tmp_path):
    admin = member(app, engine, "x", "admin")
    with engine.connect() as conn:
        uid = conn.execute(sa.select(platform_tables.memberships.c.user_id).where(
            platform_tables.memberships.c.role == "admin",
            platform_tables.memberships.c.study_id == "x")).scalar_one()
    api = TestClient(app, headers={"Authorization": "Bearer " + membership.create_token(
        engine, uid, "x", "admin", "t")})
    source = more_cases()
    r = api.post("/api/studies/x/cases",
                 files={"source": ("more.zip", zipped(source, tmp_path), "application/zip")})
    assert r.status_code == 201, r.text
    assert r.json() == {"study_id": "x", "cases": source["cases"].num_rows,
                        "answers": source["answers"].num_rows, "flagged": 0, "left_out": 0}
    r = api.post("/api/studies/x/cases", files={"source": ("arena.json", b"{}", "text/json")})
    assert r.status_code == 422 and "arena.json" in r.json()["error"]["message"]
    assert "cases_added" in admin.get("/s/x/admin/log").text


def test_study_add_cases_on_the_command_line(db_url, engine, tmp_path):
    make_studies(engine)
    runner = CliRunner()
    good, bad = tmp_path / "good", tmp_path / "bad"
    write_bundle(more_cases(), good)
    before = _content(engine)
    (bad / "x").mkdir(parents=True)
    r = runner.invoke(cli_app, ["study", "add-cases", "x", str(tmp_path / "missing"),
                                "--database-url", db_url])
    assert r.exit_code == 2 and "missing" in r.output
    with zipfile.ZipFile(io.BytesIO(_broken_answers(tmp_path))) as zf:
        zf.extractall(bad)
    r = runner.invoke(cli_app, ["study", "add-cases", "x", str(bad / "bundle"),
                                "--database-url", db_url])
    assert r.exit_code == 2 and "no-such-case" in r.output
    assert _content(engine) == before
    r = runner.invoke(cli_app, ["study", "add-cases", "x", str(good), "--database-url", db_url])
    assert r.exit_code == 0, r.output
    assert len(_content(engine)["cases"]) == len(before["cases"]) + more_cases()["cases"].num_rows
