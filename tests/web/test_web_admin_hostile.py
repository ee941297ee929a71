"""Study administration under bad and hostile input and at once by two
admins, on SQLite and PostgreSQL: a study is created whole or not at all,
added answers are screened for the study's stored model names, a flagged
answer is decided once, a token reads no more than its owner may, and
hostile uploads, ids and bodies are refused (4xx), never a server error."""

from __future__ import annotations

import io
import json
import re
import socket
import threading
import time
import zipfile
from pathlib import Path

import httpx
import pyarrow as pa
import pytest
import sqlalchemy as sa
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from clinieval import web
from clinieval.errors import InputError
from clinieval.platform import (
    accounts,
    events,
    membership,
    screening,
    uploads,
)
from clinieval.platform.demo import demo_source
from clinieval.platform.studies import StudyPlan, create_study
from clinieval.rubric import load_rubric
from clinieval.storage.schema import platform as platform_tables
from clinieval.storage.schema import snapshot as snapshot_tables
from clinieval.web.app import MAX_BODY
from clinieval.web.testing import free_port, start_server
from tests.web.test_web_admin import (
    NEW_SPECIALTY,
    admin_client,
    client,
    csrf,
    signed_in,
    zipped_source,
)

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")

TABLES = (snapshot_tables.studies, snapshot_tables.cases, snapshot_tables.answers,
          snapshot_tables.models, platform_tables.study_settings, platform_tables.answer_screens,
          platform_tables.study_rubrics, platform_tables.study_rubric_versions,
          platform_tables.memberships, platform_tables.screen_decisions,
          platform_tables.invitations, platform_tables.api_tokens)


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

def _add_cases(c, cases: str, answers: str):
    """Post a zipped source of two CSV tables to study x's "add cases"."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as zf:
        zf.writestr("src/cases.csv", cases)
        zf.writestr("src/answers.csv", answers)
    return c.post("/s/x/admin/cases", data={"csrf": csrf(c)},
                  files={"source": ("src.zip", buffer.getvalue(), "application/zip")})


def test_added_answers_are_screened_for_models_stored_before(app, engine):
    """A source adding answers of models the study already has need not send
    the models again; the leak guard still screens for their names."""
    c = admin_client(app, engine)
    cases = "case_id,prompt,specialty\nadd-c1,A pruritic rash: what next?,Pathology\n"
    answers = ("answer_id,case_id,model_id,text\n"
               'add-a1,add-c1,llama-3.1-70b-instruct,"Llama 3.1 70B Instruct here: biopsy it."\n'
               'add-a2,add-c1,claude-3-5-sonnet-20240620,"Start a topical steroid."\n')
    r = _add_cases(c, cases, answers)
    assert r.status_code in (200, 303), r.text
    with engine.connect() as conn:
        screens = dict(conn.execute(sa.select(platform_tables.answer_screens.c.answer_id,
                                              platform_tables.answer_screens.c.status).where(
            platform_tables.answer_screens.c.answer_id.in_(["add-a1", "add-a2"]))).all())
    assert screens == {"add-a1": "flagged", "add-a2": "clear"}


# --- two admins deciding at once ------------------------------------------------------------

def test_two_admins_deciding_one_flagged_answer_at_once_decide_it_once(app, engine):
    _, admin = signed_in(app, engine, "x", "admin")
    answer = screening.flagged_queue(engine, "x")[0]["answer_id"]
    start, outcomes = threading.Barrier(6), []

    def decide(decision: str) -> None:
        start.wait()
        try:
            screening.decide(engine, admin, "x", answer, decision)
            outcomes.append(decision)
        except InputError:
            outcomes.append("refused")

    threads = [threading.Thread(target=decide, args=(d,)) for d in ("release", "withdraw") * 3]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    with engine.connect() as conn:
        decisions = conn.execute(sa.select(platform_tables.screen_decisions.c.decision).where(
            platform_tables.screen_decisions.c.answer_id == answer)).scalars().all()
        status = conn.execute(sa.select(platform_tables.answer_screens.c.status).where(
            platform_tables.answer_screens.c.answer_id == answer)).scalar_one()
    assert sorted(outcomes) == sorted([*decisions, *["refused"] * 5])
    assert len(decisions) == 1
    assert status == ("clear" if decisions == ["release"] else "flagged")


# --- a token reads no more than its owner may -----------------------------------------------------

def test_an_all_studies_admin_token_reads_a_study_its_owner_views_as_a_viewer(app, engine):
    owner, owner_id = signed_in(app, engine, "y", "admin")
    invitation = accounts.create_invitation(engine, "x", "viewer")
    assert owner.post(f"/invite/{invitation}", data={"csrf": csrf(owner)}).status_code == 303
    token = membership.create_token(engine, owner_id, None, "admin", "every study")
    api = client(app, token)
    assert api.get("/api/studies/y/progress").json()["clinicians"] is not None
    progress = api.get("/api/studies/x/progress")
    assert progress.status_code == 200 and progress.json()["clinicians"] is None
    assert api.get("/api/studies/x/members").status_code == 403
    # The token reaches both of the owner's studies: its creation is in both logs.
    (owner_rater,) = [m["rater_id"] for m in membership.members(engine, "y")
                      if m["role"] == "admin"]
    for study in ("x", "y"):
        logged = [(e["kind"], e["who"]) for e in events.audit_log(engine, study)]
        assert ("token_created", owner_rater) in logged, (study, logged)


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
    ("s.zip", _zip({f"f{i}.csv": b"" for i in range(uploads.MAX_MEMBERS + 1)},
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
    api = client(app, membership.create_token(engine, admin_id, "x", "admin", "t"))
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


def test_what_the_web_fuzzing_crashed_on_gets_4xx(app, engine):
    """Each request a hypothesis run against the real server answered with a
    500 (a traceback in the log); now refused, naming the field, with
    nothing written. TestClient re-raises a server error, so a 500 fails here."""
    admin = admin_client(app, engine)
    _, admin_id = signed_in(app, engine, "x", "admin")
    api = client(app, membership.create_token(engine, admin_id, "x", "admin", "t"))
    nurse, _ = signed_in(app, engine, "x", "clinician")
    before = counts(engine)
    # A CSRF token that is not ASCII text (compare_digest raised TypeError), or a file.
    for form, files, headers in (({"csrf": "\u00e9", "label": "a"}, None, {}),
                                 ({"label": "a"}, None, {"X-CSRF-Token": b"\xe9"}),
                                 ({"label": "a"}, {"csrf": ("c.txt", b"abc")}, {})):
        r = admin.post("/s/x/admin/tokens", data=form, files=files, headers=headers)
        assert r.status_code == 403, r.text
    # Digits int() refuses ("\u00b2".isdigit() is true), or too many of them.
    for years in ("\u00b2", "9" * 5000):
        r = nurse.post("/s/x/profile", data={
            "csrf": csrf(nurse), "specialty": "Cardiology", "country": "K",
            "organisation": "O", "experience_years": years, "role": "specialist",
            "consent": "yes"})
        assert r.status_code == 422 and "experience_years" in r.text, r.text
    # A lone surrogate in JSON: in an e-mail address (the links were committed, then the
    # answer failed), in a submission's comment or idempotency key.
    r = api.post("/api/studies/x/invitations", content=b'{"emails": ["a\\ud800@b.org"]}',
                 headers={"content-type": "application/json"})
    assert r.status_code == 422 and "emails" in r.text, r.text
    url = nurse.post("/s/x/next", data={"csrf": csrf(nurse), "kind": "rating"}
                     ).headers["location"]
    names = sorted(set(re.findall(r'name="(s1\.[a-z_]+)"', nurse.get(url).text)))
    body = {n: "1" for n in names} | {"idempotency_key": "abcdefgh1234"}
    for field, value in ((names[0].replace("s1.", "c1."), "\\ud800"),
                         ("idempotency_key", "abcdefgh\\udfff")):
        text = json.dumps(body)[:-1] + f', "{field}": "{value}"}}'
        r = nurse.post(url, content=text.encode(), headers={
            "content-type": "application/json", "X-CSRF-Token": csrf(nurse)})
        assert r.status_code == 422 and field in r.text, r.text
    # An integer of more digits than Python converts, in an uploaded JSON file or rubric.
    huge = b"1" * 5000
    for path, name, content in (
            ("/api/studies/x/cases", "s.jsonl", b'{"prompt": ' + huge + b"}\n"),
            ("/api/studies/x/cases", "s.json", b'[{"prompt": ' + huge + b"}]"),
            ("/api/studies/x/rubric", "r.json", b'{"rubric_id": ' + huge + b"}")):
        r = api.post(path, files={"source" if "cases" in path else "rubric":
                                  (name, content, "application/octet-stream")})
        assert r.status_code == 422 and name in r.text and "too long" in r.text, r.text
    # A field the API does not take is an error, not ignored (a token's "scope" was).
    r = api.post("/api/studies/x/tokens", json={"label": "t", "scope": "all"})
    assert r.status_code == 422 and "scope" in r.text, r.text
    with engine.connect() as conn:
        assert conn.execute(sa.select(sa.func.count())
                            .select_from(snapshot_tables.ratings)).scalar_one() == 0
    assert counts(engine) == before


def test_a_body_past_the_limit_is_refused_as_it_arrives(app, engine):
    api = client(app, membership.create_token(engine, signed_in(app, engine, "x", "admin")[1],
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


def test_guesses_sent_at_once_get_no_more_tries_than_the_limit(app, engine, db_url, tmp_path):
    """Twenty wrong passwords for one address at once, from two server
    processes: the limit holds. Before, each guess checked the count before any
    had recorded its failure (argon2 runs for a while, off the lock), and all
    twenty were tried."""
    from concurrent.futures import ThreadPoolExecutor

    c, _ = signed_in(app, engine, "x", "clinician")
    with engine.connect() as conn:
        email = conn.execute(sa.select(platform_tables.users.c.email)
                             .order_by(platform_tables.users.c.created_at.desc())
                             ).scalars().first()
    ports = [free_port(), free_port()]
    servers = [start_server(db_url, port, tmp_path / f"server{port}.log") for port in ports]
    try:
        def guess(i: int) -> int:
            with httpx.Client(base_url=f"http://127.0.0.1:{ports[i % 2]}", timeout=60) as web:
                page = web.get("/login")
                token = re.search(r'name="csrf" value="([^"]+)"', page.text)[1]
                return web.post("/login", data={"csrf": token, "email": email,
                                                 "password": f"wrong guess {i}"}).status_code

        with ThreadPoolExecutor(20) as pool:
            statuses = list(pool.map(guess, range(20)))
    finally:
        for server in servers:
            server.kill()
            server.wait()
    assert statuses.count(401) == accounts.LOGIN_MAX_FAILURES, statuses
    assert statuses.count(429) == 20 - accounts.LOGIN_MAX_FAILURES, statuses


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

    monkeypatch.setattr(accounts, "_hasher", Counting(accounts._hasher))
    for email in ("nobody@example.org", "nobody@example.org"):
        with pytest.raises(accounts.AuthError):
            accounts.sign_in(engine, email, "wrong password")
    assert len(checks) == 2 and all(c.startswith("$argon2") for c in checks)


def test_a_static_file_asked_with_a_huge_declared_body_is_sent_whole(tmp_path):
    """Static files are not limited (they read no body): under uvicorn they
    listen while they send, and the limit's refusal cut a 200 short and
    logged a traceback."""
    log = tmp_path / "serve.log"
    port = free_port()
    server = start_server(f"sqlite:///{tmp_path / 's.db'}", port, log)
    try:
        expected = (Path(web.__file__).parent / "static" / "app.css").read_bytes()
        with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
            s.sendall(b"GET /static/app.css HTTP/1.1\r\nHost: x\r\nConnection: close\r\n"
                      b"Content-Length: %d\r\n\r\n" % (MAX_BODY * 2))
            answer = b""
            while chunk := s.recv(65536):
                answer += chunk
        head, _, body = answer.partition(b"\r\n\r\n")
        assert head.startswith(b"HTTP/1.1 200") and body == expected
    finally:
        server.terminate()
        server.wait(10)
    assert "Exception in ASGI application" not in log.read_text()


def test_nul_in_a_flagged_answer_or_an_uploaded_id_is_refused(app, engine):
    c = admin_client(app, engine)
    before = counts(engine)
    r = c.post("/s/x/admin/flagged", data={"csrf": csrf(c), "answer_id": "a\x00b",
                                           "decision": "release", "confirm": "yes"})
    assert r.status_code == 422 and "answer_id" in r.text
    cases = "case_id,prompt,specialty\nnul-c1,A pruritic rash: what next?,Pathology\n"
    answers = "answer_id,case_id,model_id,text\nnul-a1,nul-c1,m\x00x,Biopsy it.\n"
    r = _add_cases(c, cases, answers)
    assert r.status_code == 422 and "model_id" in r.text and "NUL" in r.text, r.text
    assert counts(engine) == before


@pytest.mark.parametrize("same_id", [False, True])
def test_two_studies_created_at_once_share_models_or_refuse_the_id(engine, same_id):
    """The second creation starts while the first is between its import and
    its commit. Two studies share the models neither had stored (on
    PostgreSQL the second one's model rows clashed: a 500); the same id
    twice is refused by name."""
    snap = demo_source()
    first, second = sorted(set(snap["cases"]["specialty"].to_pylist()))[:2]
    plan_b = StudyPlan("first" if same_id else "second", "B", load_rubric(),
                       specialties=(first if same_id else second,))
    outcome = {}

    def create_b() -> None:
        try:
            outcome["b"] = create_study(engine, plan_b, demo_source())
        except InputError as err:
            outcome["b"] = err

    def start_b_meanwhile(conn, made) -> None:
        thread = threading.Thread(target=create_b)
        thread.start()
        outcome["thread"] = thread
        time.sleep(1.0)  # B gets as far as it can while A holds its transaction

    create_study(engine, StudyPlan("first", "A", load_rubric(), specialties=(first,)),
                 demo_source(), start_b_meanwhile)
    outcome["thread"].join(30)
    with engine.connect() as conn:
        studies = set(conn.execute(sa.select(snapshot_tables.studies.c.study_id)).scalars())
    if same_id:
        assert isinstance(outcome["b"], InputError)
        assert "a study with this id exists" in str(outcome["b"])
        assert {"first"} <= studies and "second" not in studies
    else:
        assert outcome["b"]["answers"] > 0, outcome["b"]
        assert {"first", "second"} <= studies


def test_the_same_cases_added_twice_at_once_are_added_once(engine):
    """A double-submitted "add cases": the second starts while the first holds
    its transaction, and then adds nothing (it screened the same answers
    again and failed on their screen rows: a 500)."""
    from clinieval.contract import tabular
    from clinieval.platform.studies import add_cases
    from clinieval.snapshot import Snapshot, conform
    from clinieval.web.testing import make_studies

    make_studies(engine)
    cases = conform(pa.Table.from_pylist([{"case_id": "twice-c1", "specialty": "Pathology",
                                           "prompt": "A pruritic rash: what next?"}]),
                    tabular.CASES)
    answers = conform(pa.Table.from_pylist([{"answer_id": "twice-a1", "case_id": "twice-c1",
                                             "model_id": "claude-3-5-sonnet-20240620",
                                             "text": "Start a topical steroid."}]), tabular.ANSWERS)
    outcome = {}

    def source() -> Snapshot:
        return Snapshot.from_tables({"cases": cases, "answers": answers}, {})

    def second() -> None:
        outcome["second"] = add_cases(engine, "x", source())

    def start_second_meanwhile(conn, made) -> None:
        outcome["thread"] = threading.Thread(target=second)
        outcome["thread"].start()
        time.sleep(1.0)

    first = add_cases(engine, "x", source(), start_second_meanwhile)
    outcome["thread"].join(30)
    assert first["answers"] == 1
    assert outcome["second"] == {"cases": 0, "answers": 0, "flagged": 0, "left_out": 0}


def test_an_import_beside_a_study_being_created_reuses_its_models(engine):
    """``clinieval import`` while the platform creates a study (between its
    import and its commit): both bring the same new model rows; the import
    waits for the study and reuses them (on PostgreSQL it clashed)."""
    import pyarrow.compute as pc

    from clinieval.io.importer import import_snapshot
    from clinieval.snapshot import Snapshot

    snap = demo_source()
    first, second = sorted(set(snap["cases"]["specialty"].to_pylist()))[:2]
    cases = snap["cases"].filter(pc.equal(snap["cases"]["specialty"], second))
    answers = snap["answers"].filter(pc.is_in(snap["answers"]["case_id"], cases["case_id"]))
    other = Snapshot.from_tables({**snap.tables, "cases": cases, "answers": answers,
                                  "ratings": None, "preferences": None, "judgments": None,
                                  "raters": None}, snap.meta)
    outcome = {}

    def import_meanwhile(conn, made) -> None:
        def run() -> None:
            outcome["import"] = import_snapshot(engine, other)

        outcome["thread"] = threading.Thread(target=run)
        outcome["thread"].start()
        time.sleep(1.0)

    create_study(engine, StudyPlan("first", "A", load_rubric(), specialties=(first,)),
                 demo_source(), import_meanwhile)
    outcome["thread"].join(30)
    assert outcome["import"]["answers"] == answers.num_rows


def test_export_and_report_need_a_post_with_the_csrf_token(app, engine):
    """Both write to the audit log (and the report runs the whole audit): a
    link from another site, which SameSite=Lax lets carry the admin's cookie,
    sets off neither."""
    c = admin_client(app, engine)

    def logged() -> int:
        with engine.connect() as conn:
            return conn.execute(sa.select(sa.func.count()).where(
                platform_tables.audit_events.c.kind.in_(["exported", "report_run"]))).scalar_one()

    for action in ("export", "report"):
        assert c.get(f"/s/x/admin/{action}").status_code == 405
        assert c.post(f"/s/x/admin/{action}", data={}).status_code == 403
        assert c.post(f"/s/x/admin/{action}", data={"csrf": "0" * 64}).status_code == 403
    assert logged() == 0
    assert c.post("/s/x/admin/export", data={"csrf": csrf(c)}).status_code == 200
    assert logged() == 1
