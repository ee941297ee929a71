"""Study administration under bad and hostile input and at once by two
admins, on SQLite and PostgreSQL: a study is created whole or not at all,
added answers are screened for the study's stored model names, a flagged
answer is decided once, a token reads no more than its owner may, and
hostile uploads, ids and bodies are refused (4xx), never a server error."""

from __future__ import annotations

import io
import json
import threading
import zipfile

import pytest
import sqlalchemy as sa
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from clinieval.rubric import load_rubric
from clinieval.storage import platform_tables as P
from clinieval.storage import sqltables as S
from clinieval.web import auth, manage
from clinieval.web.app import MAX_BODY
from clinieval.web.demo import demo_source
from clinieval.web.studies import StudyPlan, create_study
from tests.test_web_admin import (
    NEW_SPECIALTY,
    admin_client,
    client,
    csrf,
    signed_in,
    zipped_source,
)

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")

TABLES = (S.studies, S.cases, S.answers, S.models, P.study_settings, P.answer_screens,
          P.study_rubrics, P.study_rubric_versions, P.memberships, P.screen_decisions,
          P.invitations, P.api_tokens)


def counts(engine) -> dict[str, int]:
    with engine.connect() as conn:
        return {t.name: conn.execute(sa.select(sa.func.count()).select_from(t)).scalar_one()
                for t in TABLES}


# --- a study is made whole or not at all ------------------------------------------------------

def test_a_failure_after_the_import_leaves_no_part_of_the_study(engine):
    """Whatever fails once the cases are loaded (here the step after the
    settings) rolls the cases, answers, models and settings back with it."""
    before = counts(engine)
    plan = StudyPlan("half", "Half a study", load_rubric(), specialties=(NEW_SPECIALTY,))

    def fails(conn, made):
        assert made["answers"] > 0
        raise RuntimeError("the step after the import")

    with pytest.raises(RuntimeError):
        create_study(engine, plan, demo_source(), fails)
    assert counts(engine) == before
    made = create_study(engine, plan, demo_source())  # the same source and id, again
    assert made["answers"] > 0 and counts(engine)["studies"] == before["studies"] + 1


@pytest.mark.parametrize("field, value", [
    ("overlap_target", str(10**20)), ("overlap_target", str(2**31)), ("overlap_target", "0"),
    ("consent_text", "I agree\x00"), ("name", "Lung\x00"), ("description", "x\x00y"),
])
def test_settings_a_database_cannot_hold_are_refused_before_anything_is_written(
        app, engine, tmp_path, field, value):
    c = admin_client(app, engine)
    before = counts(engine)
    fields = {"csrf": csrf(c), "study_id": "lung", "specialties": NEW_SPECIALTY, field: value}
    r = c.post("/admin/new", data=fields,
               files={"source": ("s.zip", zipped_source(tmp_path), "application/zip")})
    assert r.status_code == 422 and field in r.text, r.text
    assert counts(engine) == before
    fields[field] = "2" if field == "overlap_target" else "fine"
    r = c.post("/admin/new", data=fields,
               files={"source": ("s.zip", zipped_source(tmp_path), "application/zip")})
    assert r.status_code == 303, r.text  # nothing of the refused attempt stands in the way


# --- the leak guard knows the study's models -----------------------------------------------------

def test_added_answers_are_screened_for_models_stored_before(app, engine):
    """A source adding answers of models the study already has need not send
    the models again; the leak guard still screens for their names."""
    c = admin_client(app, engine)
    cases = "case_id,prompt,specialty\nadd-c1,A pruritic rash: what next?,Pathology\n"
    answers = ("answer_id,case_id,model_id,text\n"
               'add-a1,add-c1,llama-3.1-70b-instruct,"Llama 3.1 70B Instruct here: biopsy it."\n'
               'add-a2,add-c1,claude-3-5-sonnet-20240620,"Start a topical steroid."\n')
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as zf:
        zf.writestr("src/cases.csv", cases)
        zf.writestr("src/answers.csv", answers)
    r = c.post("/s/x/admin/cases", data={"csrf": csrf(c)},
               files={"source": ("src.zip", buffer.getvalue(), "application/zip")})
    assert r.status_code in (200, 303), r.text
    with engine.connect() as conn:
        screens = dict(conn.execute(sa.select(P.answer_screens.c.answer_id,
                                              P.answer_screens.c.status).where(
            P.answer_screens.c.answer_id.in_(["add-a1", "add-a2"]))).all())
    assert screens == {"add-a1": "flagged", "add-a2": "clear"}


# --- two admins deciding at once ------------------------------------------------------------

def test_two_admins_deciding_one_flagged_answer_at_once_decide_it_once(app, engine):
    _, admin = signed_in(app, engine, "x", "admin")
    answer = manage.flagged_queue(engine, "x")[0]["answer_id"]
    start, outcomes = threading.Barrier(6), []

    def decide(decision: str) -> None:
        start.wait()
        try:
            manage.decide(engine, admin, "x", answer, decision)
            outcomes.append(decision)
        except manage.InputError:
            outcomes.append("refused")

    threads = [threading.Thread(target=decide, args=(d,)) for d in ("release", "withdraw") * 3]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    with engine.connect() as conn:
        decisions = conn.execute(sa.select(P.screen_decisions.c.decision).where(
            P.screen_decisions.c.answer_id == answer)).scalars().all()
        status = conn.execute(sa.select(P.answer_screens.c.status).where(
            P.answer_screens.c.answer_id == answer)).scalar_one()
    assert sorted(outcomes) == sorted([*decisions, *["refused"] * 5])
    assert len(decisions) == 1
    assert status == ("clear" if decisions == ["release"] else "flagged")


# --- a token reads no more than its owner may -----------------------------------------------------

def test_an_all_studies_admin_token_reads_a_study_its_owner_views_as_a_viewer(app, engine):
    owner, owner_id = signed_in(app, engine, "y", "admin")
    invitation = auth.create_invitation(engine, "x", "viewer")
    assert owner.post(f"/invite/{invitation}", data={"csrf": csrf(owner)}).status_code == 303
    token = manage.create_token(engine, owner_id, None, "admin", "every study")
    api = client(app, token)
    assert api.get("/api/studies/y/progress").json()["clinicians"] is not None
    progress = api.get("/api/studies/x/progress")
    assert progress.status_code == 200 and progress.json()["clinicians"] is None
    assert api.get("/api/studies/x/members").status_code == 403


# --- hostile uploads, ids and bodies ------------------------------------------------------------

def _zip(members: dict[str, bytes], method: int = zipfile.ZIP_DEFLATED) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", method) as zf:
        for name, data in members.items():
            zf.writestr(name, data)
    return buffer.getvalue()


def _damaged(kind: str) -> bytes:
    data = bytearray(_zip({"src/cases.csv": b"case_id,prompt,specialty\n" * 200}))
    header = data.index(b"PK\x03\x04")
    if kind == "encrypted":  # the flag bit of an encrypted member, local and central
        data[header + 6] |= 1
        central = data.index(b"PK\x01\x02")
        data[central + 8] |= 1
    elif kind == "method":  # a compression method no one implements
        data[header + 8] = 99
        central = data.index(b"PK\x01\x02")
        data[central + 10] = 99
    elif kind == "stream":  # the deflate stream's bytes scrambled
        start = header + 30 + len("src/cases.csv")
        data[start:start + 20] = b"\xff" * 20
    return bytes(data)


@pytest.mark.parametrize("name, content", [
    ("..", b"PK"), ("." * 300 + ".zip", _zip({"cases.csv": b"x"})), ("\x00.zip", b"PK"),
    ("s.zip", _damaged("encrypted")), ("s.zip", _damaged("method")),
    ("s.zip", _damaged("stream")), ("s.zip", _zip({"a" * 300 + ".csv": b"x"})),
    ("s.zip", _zip({f"f{i}.csv": b"" for i in range(manage.MAX_MEMBERS + 1)},
                   zipfile.ZIP_STORED)),
])
def test_hostile_uploads_are_refused_naming_the_upload(app, engine, name, content):
    c = admin_client(app, engine)
    before = counts(engine)
    r = c.post("/s/x/admin/cases", data={"csrf": csrf(c)},
               files={"source": (name, content, "application/octet-stream")})
    assert r.status_code == 422, r.text
    assert "clinieval-upload-" not in r.text  # our temporary copy is not the user's file
    assert counts(engine) == before


def test_any_upload_gets_an_answer_not_a_server_error(app, engine):
    """Random names and bytes (zipped as the file's only member, or raw) for
    the source: refused or added, never a 500, nothing half-written."""
    c = admin_client(app, engine)

    @settings(max_examples=30, deadline=None, suppress_health_check=list(HealthCheck))
    @given(name=st.text(max_size=300), content=st.binary(max_size=600), zipped=st.booleans())
    def upload(name, content, zipped):
        before = counts(engine)
        member = name if name.split("\x00")[0] else "x"  # zipfile cuts a name at NUL
        body = _zip({member: content}) if zipped else content
        r = c.post("/s/x/admin/cases", data={"csrf": csrf(c)},
                   files={"source": ((name or "x") + (".zip" if zipped else ""), body,
                                     "application/octet-stream")})
        assert r.status_code in (303, 422), r.text
        if r.status_code == 422:
            assert counts(engine) == before

    upload()


def test_hostile_ids_and_bodies_get_4xx(app, engine):
    admin = admin_client(app, engine)
    _, admin_id = signed_in(app, engine, "x", "admin")
    api = client(app, manage.create_token(engine, admin_id, "x", "admin", "t"))
    before = counts(engine)
    assert admin.get("/s/x%00/progress").status_code == 404
    assert api.get("/api/studies/x%00/progress").status_code == 404
    assert api.post("/api/studies/x/members/r_%00/revoke").status_code == 404
    for body in ('{"count": NaN}', '{"emails": [Infinity]}', '{"count": 1e999}'):
        r = api.post("/api/studies/x/invitations", content=body,
                     headers={"content-type": "application/json"})
        assert r.status_code == 422, (body, r.text)
        assert "NaN" not in r.text and "Infinity" not in r.text
    r = api.post("/api/studies/x/tokens", json={"label": "a\x00b"})
    assert r.status_code == 422 and "label" in r.text
    r = admin.post("/s/x/admin/invite", data={"csrf": csrf(admin), "emails": "a" * 200_000})
    assert r.status_code == 422 and "emails" in r.text
    for count in ("\u00b2", "9" * 5000, "-1", "1001"):
        r = admin.post("/s/x/admin/invite", data={"csrf": csrf(admin), "count": count})
        assert r.status_code == 422 and "count" in r.text, count
    r = admin.post("/s/x/admin/invite", data={"csrf": csrf(admin)},
                   files={"csv": ("people.csv", "jos\u00e9@example.org".encode("latin-1"))})
    assert r.status_code == 422 and "people.csv" in r.text and "UTF-8" in r.text
    assert counts(engine) == before


def test_a_body_past_the_limit_is_refused_as_it_arrives(app, engine):
    api = client(app, manage.create_token(engine, signed_in(app, engine, "x", "admin")[1],
                                          "x", "admin", "t"))
    declared = api.post("/api/studies/x/cases", content=b"x" * (MAX_BODY + 1),
                        headers={"content-type": "multipart/form-data; boundary=b"})
    assert declared.status_code == 413

    def chunks():  # no declared length: counted as the bytes come
        for _ in range(MAX_BODY // 2**20 + 2):
            yield b"x" * 2**20

    streamed = api.post("/api/studies/x/cases", content=chunks(),
                        headers={"content-type": "multipart/form-data; boundary=b"})
    assert streamed.status_code == 413
    assert json.loads(streamed.text)["error"]["message"].startswith("The request is larger")


def test_an_unknown_address_costs_a_password_check_like_a_known_one(engine, monkeypatch):
    """Signing in with an address that has no account runs argon2 as a wrong
    password does, so the answer's timing does not reveal who has one."""
    checks = []

    class Counting:
        def __init__(self, hasher):
            self.hasher = hasher

        def verify(self, stored, password):
            checks.append(stored)
            return self.hasher.verify(stored, password)

        def hash(self, password):
            return self.hasher.hash(password)

    monkeypatch.setattr(auth, "_hasher", Counting(auth._hasher))
    for email in ("nobody@example.org", "nobody@example.org"):
        with pytest.raises(auth.AuthError):
            auth.sign_in(engine, email, "wrong password")
    assert len(checks) == 2 and all(c.startswith("$argon2") for c in checks)
