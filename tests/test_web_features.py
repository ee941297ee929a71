"""Later platform features over HTTP (Starlette's httpx client against the
app), on SQLite and PostgreSQL: one-time sign-in links, edited votes kept as
revisions, the rubric version each rating was given under, and adding cases
and answers to a running study (in the browser's admin page, over the API
and from the command line)."""

from __future__ import annotations

import io
import json
import re
import zipfile

import pyarrow as pa
import pyarrow.compute as pc
import pytest
import sqlalchemy as sa
from fastapi.testclient import TestClient
from typer.testing import CliRunner

from clinieval.audit.data import from_bundle, from_snapshot
from clinieval.cli import app as cli_app
from clinieval.io.bundle import read_bundle, write_bundle
from clinieval.platform import (
    accounts,
    events,
    membership,
)
from clinieval.platform.demo import DEMO_STUDY, setup_demo
from clinieval.platform.study_export import export_study, study_snapshot
from clinieval.rubric import load_rubric, rubric_to_dict
from clinieval.snapshot import Snapshot
from clinieval.storage import db
from clinieval.storage.schema import platform as platform_tables
from clinieval.storage.schema import snapshot as snapshot_tables
from clinieval.web.app import create_app
from clinieval.web.testing import (
    blinding_source,
    csrf_of,
    http_client,
    make_studies,
    member_client,
)
from tests.helpers import zipped_bundle

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")


client = http_client
member = member_client


def csrf(c: TestClient) -> str:
    return csrf_of(c.get("/studies").text)


def take(c: TestClient, kind: str) -> str:
    r = c.post("/s/x/next", data={"csrf": csrf(c), "kind": kind})
    assert "/t/" in r.headers["location"], r.headers["location"]
    return r.headers["location"]


def answer_form(c: TestClient, url: str, score: str = "1", choice: str = "A") -> dict:
    html = c.get(url).text
    form = {"csrf": csrf_of(html), "time_spent_s": "20", "idempotency_key": re.search(
        r'name="idempotency_key" value="([^"]+)"', html).group(1)}
    panels = ("1", "2") if 'name="s2.' in html else ("1",)
    criteria = sorted(set(re.findall(r'name="s1\.([a-z_]+)"', html)))
    form.update({f"s{p}.{k}": score for p in panels for k in criteria})
    if len(panels) == 2:
        form["choice"] = choice
    return form


def rows(engine, table, *columns, where=None) -> list[tuple]:
    query = sa.select(*(table.c[c] for c in columns))
    if where is not None:
        query = query.where(where)
    with engine.connect() as conn:
        return [tuple(r) for r in conn.execute(query.order_by(*(table.c[c] for c in columns)))]


# --- one-time sign-in links ----------------------------------------------------------

def _sign_in_by_link(c: TestClient, token: str):
    page = c.get(f"/signin/{token}")
    return page, c.post(f"/signin/{token}", data={"csrf": csrf_of(page.text)}
                        if page.status_code == 200 else {"csrf": _pre_csrf(c)})


def _pre_csrf(c: TestClient) -> str:
    return csrf_of(c.get("/login").text)


def test_a_demo_sign_in_link_works_once(engine):
    links = setup_demo(engine)
    app = create_app(engine)
    first = client(app)
    page, r = _sign_in_by_link(first, links["admin"])
    assert page.status_code == 200 and "Sign in" in page.text
    assert r.status_code == 303 and r.headers["location"] == "/studies"
    assert first.get(f"/s/{DEMO_STUDY}/progress").status_code == 200  # signed in as the admin
    second = client(app)
    page, r = _sign_in_by_link(second, links["admin"])
    assert page.status_code == 404 and "already been used" in page.text
    assert r.status_code == 400 and "already been used" in r.text
    assert "ce_session" not in r.cookies and second.get("/studies").status_code == 303
    clinician = client(app)
    _, r = _sign_in_by_link(clinician, links["clinician"])
    assert r.status_code == 303
    assert clinician.get(f"/s/{DEMO_STUDY}").status_code == 200  # the demo clinician's feed


def test_an_expired_or_unknown_sign_in_link_is_refused(engine):
    setup_demo(engine)
    app = create_app(engine)
    with engine.connect() as conn:
        user_id = conn.execute(sa.select(platform_tables.users.c.user_id).where(
            platform_tables.users.c.email == "demo-clinician@example.org")).scalar_one()
    expired = accounts.create_signin_link(engine, user_id, minutes=-1)
    for token, message in ((expired, "expired"), ("not-a-token", "not valid")):
        c = client(app)
        page, r = _sign_in_by_link(c, token)
        assert page.status_code == 404 and message in page.text
        assert r.status_code == 400 and message in r.text
        assert c.get("/studies").status_code == 303  # still signed out
    with engine.connect() as conn:  # the refused link stays unspent, the digest only is stored
        link = conn.execute(sa.select(platform_tables.signin_links).where(
            platform_tables.signin_links.c.token_hash == accounts.digest(expired))).one()
    assert link.used_at is None


def test_a_sign_in_link_needs_the_forms_csrf_token(engine):
    links = setup_demo(engine)
    c = client(create_app(engine))
    c.get(f"/signin/{links['admin']}")
    assert c.post(f"/signin/{links['admin']}", data={}).status_code == 403
    _, r = _sign_in_by_link(c, links["admin"])  # not spent by the refused request
    assert r.status_code == 303


# --- edited votes ---------------------------------------------------------------------

def test_an_edited_vote_appends_a_revision_and_the_audit_uses_the_latest(app, engine, tmp_path):
    c = member(app, engine, "x", "clinician")
    url = take(c, "pair")
    assert c.post(url, data=answer_form(c, url, choice="A")).status_code == 303
    same = c.post(url, data=answer_form(c, url, choice="A"))  # nothing changed: no new row
    assert same.status_code == 303
    assert len(rows(engine, snapshot_tables.preferences, "preference_id")) == 1
    assert 'value="A" checked' in c.get(url).text
    r = c.post(url, data=answer_form(c, url, choice="tie"), headers={"Accept": "application/json"})
    assert r.status_code == 200 and r.json()["revision"] == 1
    assert 'value="tie" checked' in c.get(url).text  # the task page shows the latest vote
    votes = rows(engine, snapshot_tables.preferences, "revision", "choice")
    assert votes == [(0, votes[0][1]), (1, "tie")] and votes[0][1] in ("A", "B")
    history = c.get("/s/x/history").text
    assert re.search(r"<td>1</td>", history)  # the pair task's revision
    # The export keeps both rows; the audit (live view and bundle) counts one vote: the tie.
    bundle = tmp_path / "export"
    export_study(engine, "x", bundle, salt="s")
    assert read_bundle(bundle)["preferences"].num_rows == 2
    for data in (from_bundle(bundle), from_snapshot(study_snapshot(engine, "x"))):
        assert data.pref_outcome.tolist() == [2]  # index of "tie" in tables.CHOICES


def _history_rows(c: TestClient) -> list[tuple[str, str, int, str]]:
    html = c.get("/s/x/history").text
    return [(token, kind, int(revision), when) for kind, revision, when, token in re.findall(
        r'<tr><td>(Rating|Comparison)</td><td>.*?</td>\s*<td>(\d+)</td><td>([^<]*)</td>\s*'
        r'<td><a href="/s/x/t/([^"]+)">', html, re.S)]


def _statements_of(engine, fn) -> int:
    """Statements that ``fn`` ran through SQLAlchemy's execute."""
    seen = []

    def count(*_args) -> None:
        seen.append(1)

    sa.event.listen(engine, "before_cursor_execute", count)
    try:
        fn()
    finally:
        sa.event.remove(engine, "before_cursor_execute", count)
    return len(seen)


def test_the_history_lists_each_task_with_its_latest_revision_in_one_statement(app, engine):
    c = member(app, engine, "x", "clinician")
    first = take(c, "rating")
    assert c.post(first, data=answer_form(c, first)).status_code == 303
    one_task = _statements_of(engine, lambda: _history_rows(c))
    for score in ("2", "0"):  # two edits: revision 2
        assert c.post(first, data=answer_form(c, first, score=score)).status_code == 303
    pair = take(c, "pair")
    assert c.post(pair, data=answer_form(c, pair, choice="A")).status_code == 303
    # Only the vote changes: the ratings stay at revision 0, the task is at 1.
    assert c.post(pair, data=answer_form(c, pair, choice="tie")).status_code == 303
    second_pair = take(c, "pair")
    assert c.post(second_pair, data=answer_form(c, second_pair, choice="A")).status_code == 303
    for score in ("2", "0"):  # only answer B's first criterion changes, twice: revision 2
        form = answer_form(c, second_pair, choice="A")
        form[min(k for k in form if k.startswith("s2."))] = score
        assert c.post(second_pair, data=form).status_code == 303
    last = take(c, "rating")
    assert c.post(last, data=answer_form(c, last)).status_code == 303
    # Another clinician of the study, and one of another study, with tasks of their own.
    for other in (member(app, engine, "x", "clinician"), member(app, engine, "y", "clinician")):
        study = "x" if other.get("/s/x").status_code == 200 else "y"
        url = other.post(f"/s/{study}/next", data={"csrf": csrf(other), "kind": "rating"}
                         ).headers["location"]
        assert other.post(url, data=answer_form(other, url)).status_code == 303

    token = {url: url.rsplit("/", 1)[1] for url in (first, pair, second_pair, last)}
    with engine.connect() as conn:
        tl = platform_tables.task_leases
        user_id = conn.execute(sa.select(tl.c.user_id).where(tl.c.token == token[first])).scalar()
        rater_id = conn.execute(sa.select(platform_tables.users.c.rater_id).where(
            platform_tables.users.c.user_id == user_id)).scalar()
        expected = {}
        for lease in conn.execute(sa.select(tl).where(tl.c.status == "submitted",
                                                      tl.c.user_id == user_id)):
            rated = conn.execute(sa.select(snapshot_tables.ratings.c.created_at).where(
                snapshot_tables.ratings.c.rater_id == rater_id,
                snapshot_tables.ratings.c.answer_id.in_(
                    [x for x in (lease.answer_id, lease.answer_b_id) if x]))).scalars().all()
            voted = conn.execute(sa.select(snapshot_tables.preferences.c.created_at).where(
                snapshot_tables.preferences.c.preference_id == lease.preference_id)).scalars().all()
            when = max(events.aware(x) for x in rated + voted).strftime("%Y-%m-%d %H:%M UTC")
            expected[lease.token] = when
    assert _history_rows(c) == [  # newest task first, none of the others'
        (token[last], "Rating", 0, expected[token[last]]),
        (token[second_pair], "Comparison", 2, expected[token[second_pair]]),
        (token[pair], "Comparison", 1, expected[token[pair]]),
        (token[first], "Rating", 2, expected[token[first]]),
    ]
    # One statement however many tasks (it was one more per task, and per vote).
    assert _statements_of(engine, lambda: _history_rows(c)) == one_task


def test_a_vote_edit_with_a_bad_choice_writes_nothing(app, engine):
    c = member(app, engine, "x", "clinician")
    url = take(c, "pair")
    c.post(url, data=answer_form(c, url, choice="B"))
    r = c.post(url, data=answer_form(c, url, choice="maybe"),
               headers={"Accept": "application/json"})
    assert r.status_code == 422 and r.json()["error"]["field"] == "choice"
    assert len(rows(engine, snapshot_tables.preferences, "preference_id")) == 1


def test_each_vote_counts_once_in_pair_balancing_and_progress(app, engine):
    from clinieval.platform import live
    from clinieval.platform.assignment import _pair_load
    from clinieval.platform.config import study_config

    c = member(app, engine, "x", "clinician")
    url = take(c, "pair")
    c.post(url, data=answer_form(c, url, choice="A"))
    c.post(url, data=answer_form(c, url, choice="B"))
    c.post(url, data=answer_form(c, url, choice="both_bad"))
    (a, b), = set(rows(engine, snapshot_tables.preferences, "answer_a_id", "answer_b_id"))
    with engine.connect() as conn:
        assert _pair_load(conn, a, b) == 1
        cfg = study_config(conn, "x")
    people = live.progress(engine, cfg, per_clinician=True)["clinicians"]
    assert [p["votes"] for p in people] == [1]


# --- the rubric version of each rating ----------------------------------------------------

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
    assert rows(engine, platform_tables.study_rubric_versions, "study_id", "version") == [("s",
                                                                                           "7.1")]
    engine.dispose()


# --- adding cases and answers to a running study -------------------------------------------

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
