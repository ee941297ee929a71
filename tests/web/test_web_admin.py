"""Study administration over HTTP (Starlette's httpx client against the app),
on SQLite and PostgreSQL: the authorization matrix over every route and
role, creating a study from an upload, invitations, revocation, the leak
guard's queue, progress, the live safety view, API tokens and export."""

from __future__ import annotations

import io
import json
import re
import threading
import zipfile
from datetime import UTC, datetime, timedelta

import pyarrow as pa
import pyarrow.compute as pc
import pytest
import sqlalchemy as sa
from fastapi.testclient import TestClient

from clinieval.platform import (
    live,
    membership,
    screening,
)
from clinieval.platform.config import study_config
from clinieval.platform.demo import demo_source
from clinieval.snapshot import Snapshot
from clinieval.storage.schema import platform as platform_tables
from clinieval.storage.schema import snapshot as snapshot_tables
from clinieval.web.app import ROUTE_LEVELS
from clinieval.web.testing import csrf_of, register_via_http
from tests.helpers import zipped_bundle

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")

ROLES = ("anonymous", "clinician", "other_study_clinician", "viewer", "admin",
         "other_study_token", "revoked_token", "adjudicator")
"""Who asks. Admin and viewer hold a session and an API token of study x;
the token roles hold only a bearer token (of study y, or revoked); the
adjudicator a session only (an API token cannot carry that role)."""

ALLOWED = {
    "public": set(ROLES),
    "user": {"clinician", "other_study_clinician", "viewer", "admin", "adjudicator"},
    "creator": {"admin"},
    "member": {"clinician", "viewer", "admin", "adjudicator"},
    "viewer": {"viewer", "admin"},
    "admin": {"admin"},
    "clinician": {"clinician"},
    "adjudicator": {"adjudicator"},
    "api_creator": {"admin"},
    "api_viewer": {"viewer", "admin"},
    "api_admin": {"admin"},
}
"""Access level -> roles let through; every other role must be refused."""


def client(app, token: str | None = None) -> TestClient:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    return TestClient(app, follow_redirects=False, headers=headers)


def user_id(engine, email: str) -> str:
    with engine.connect() as conn:
        return conn.execute(sa.select(platform_tables.users.c.user_id).where(
            platform_tables.users.c.email == email)).scalar_one()


def signed_in(app, engine, study: str, role: str, token_role: str | None = None,
              scope: str | None = "x") -> tuple[TestClient, str]:
    """A member with a session; with ``token_role``, also an API token."""
    c = client(app)
    email = register_via_http(c, engine, study, role)
    uid = user_id(engine, email)
    if token_role:
        c.headers["Authorization"] = "Bearer " + membership.create_token(
            engine, uid, scope, token_role, "test")
    return c, uid


def csrf(c: TestClient) -> str:
    page = c.get("/studies") if c.cookies.get("ce_session") else c.get("/login")
    return csrf_of(page.text)


def _served(routes):
    for r in routes:
        if hasattr(r, "original_router"):
            yield from _served(r.original_router.routes)
        elif hasattr(r, "methods"):
            yield r.path + " " + ",".join(sorted(r.methods))


def test_every_served_route_has_an_expected_outcome(app):
    """A new route without a level, or with a level this matrix does not know,
    fails here."""
    assert set(_served(app.routes)) == set(ROUTE_LEVELS)
    assert set(ROUTE_LEVELS.values()) <= set(ALLOWED)


def _clients(app, engine) -> dict[str, TestClient]:
    clients = {"anonymous": client(app)}
    clients["clinician"], _ = signed_in(app, engine, "x", "clinician")
    clients["other_study_clinician"], _ = signed_in(app, engine, "y", "clinician")
    clients["viewer"], _ = signed_in(app, engine, "x", "viewer", "viewer")
    clients["admin"], _ = signed_in(app, engine, "x", "admin", "admin", scope=None)
    clients["adjudicator"], _ = signed_in(app, engine, "x", "adjudicator")
    _, y_admin = signed_in(app, engine, "y", "admin")
    clients["other_study_token"] = client(app, membership.create_token(engine, y_admin, "y",
                                                                   "admin", "y"))
    revoked = membership.create_token(engine, y_admin, None, "admin", "gone")
    with engine.begin() as conn:
        conn.execute(platform_tables.api_tokens.update().where(platform_tables.api_tokens.c.label
                                                               == "gone")
                     .values(revoked_at=sa.func.now()))
    clients["revoked_token"] = client(app, revoked)
    return clients


def _was_refused(r) -> bool:
    if r.status_code == 303 and r.headers["location"].startswith("/login?next="):
        return True
    if r.status_code == 401:
        return "Sign in first" in r.text or "API token" in r.text
    return r.status_code == 403


def _request(c: TestClient, method: str, url: str):
    if method == "GET":
        return c.get(url)
    if url.startswith("/api/"):  # a session's CSRF token too: the adjudicator's routes take it
        headers = {"X-CSRF-Token": csrf(c)} if c.cookies.get("ce_session") else {}
        return c.post(url, json={}, headers=headers)
    token = csrf(c) if c.cookies.get("ce_session") or not url.startswith("/api") else ""
    if url.endswith("/draft"):
        return c.post(url, json={"fields": {}}, headers={"X-CSRF-Token": token})
    return c.post(url, data={"csrf": token})


def test_every_route_for_every_role(app, engine):
    from clinieval.platform import accounts, adjudication
    from tests.web.support import plant_dispute

    clients = _clients(app, engine)
    next_task = clients["clinician"].post("/s/x/next", data={
        "csrf": csrf(clients["clinician"]), "kind": "rating"})
    task = next_task.headers["location"].rsplit("/", 1)[1]
    ref = adjudication.task_ref(app.state.signer.key, "x", plant_dispute(engine, "x", 1))
    seen = 0
    for key in sorted(ROUTE_LEVELS, key=lambda k: k.startswith("/logout")):
        path, method = key.split(" ")
        method = "GET" if "GET" in method.split(",") else "POST"
        level = ROUTE_LEVELS[key]
        for role in ROLES:
            url = path.format(
                study="x", token=accounts.create_invitation(engine, "y", "clinician")
                if path.startswith("/invite") else task,
                rater_id="r_nobody", answer_id="a_nobody", token_id="000000000000", ref=ref)
            r = _request(clients[role], method, url)
            expected_refused = role not in ALLOWED[level]
            assert _was_refused(r) == expected_refused, (key, role, r.status_code, r.text[:200])
            seen += 1
    assert seen == len(ROUTE_LEVELS) * len(ROLES)


# --- creating a study in the browser and over the API --------------------------------

NEW_SPECIALTY = "Cardiology ECG"
"""Cases of this specialty are in no fixture study, so their ids are free."""


def new_source() -> Snapshot:
    snap = demo_source()
    cases = snap["cases"].filter(pc.equal(snap["cases"]["specialty"], NEW_SPECIALTY))
    answers = snap["answers"].filter(pc.is_in(snap["answers"]["case_id"], cases["case_id"]))
    return Snapshot.from_tables({**snap.tables, "cases": cases, "answers": answers,
                                 "ratings": None, "preferences": None, "judgments": None,
                                 "raters": None}, snap.meta)


def zipped_source(tmp_path) -> bytes:
    """A source as a zipped bundle, as an admin would upload it."""
    return zipped_bundle(new_source(), tmp_path)


def admin_client(app, engine) -> TestClient:
    c, _ = signed_in(app, engine, "x", "admin")
    return c


def test_an_admin_creates_a_study_from_an_upload(app, engine, tmp_path):
    c = admin_client(app, engine)
    form = c.get("/admin/new")
    assert form.status_code == 200
    fields = {"csrf": csrf_of(form.text), "study_id": "lung", "name": "Lung study",
              "specialties": NEW_SPECIALTY, "overlap_target": "2", "pairwise_share": "0",
              "criteria": "accuracy,harmlessness", "rationale_required": "no"}
    r = c.post("/admin/new", data=fields,
               files={"source": ("source.zip", zipped_source(tmp_path), "application/zip")})
    assert r.status_code == 303, r.text
    assert r.headers["location"] == "/s/lung/progress?created=1"
    with engine.connect() as conn:
        settings = conn.execute(sa.select(platform_tables.study_settings).where(
            platform_tables.study_settings.c.study_id == "lung")).one()
        rubric = conn.execute(sa.select(platform_tables.study_rubrics).where(
            platform_tables.study_rubrics.c.study_id == "lung")).one()
    assert sorted(json.loads(settings.criteria)) == ["accuracy", "harmlessness"]
    assert settings.overlap_target == 2 and json.loads(settings.specialties) == [NEW_SPECIALTY]
    assert rubric.rationale_required is False and rubric.version
    progress = c.get("/s/lung/progress")
    assert progress.status_code == 200 and NEW_SPECIALTY in progress.text


def test_a_misspelt_api_form_field_is_refused_not_ignored(app, engine, tmp_path):
    """`specialtys` for `specialties` made a study of every specialty with the
    default settings; now a 422 naming the field, and nothing is made."""
    _, uid = signed_in(app, engine, "x", "admin")
    api = client(app, membership.create_token(engine, uid, None, "admin", "script"))
    before = _counts(engine)
    upload = {"source": ("s.zip", zipped_source(tmp_path), "application/zip")}
    r = api.post("/api/studies", data={"study_id": "typo", "specialtys": NEW_SPECIALTY,
                                       "overlap": "7"}, files=upload)
    assert r.status_code == 422, r.text
    assert r.json()["error"]["field"] in ("specialtys", "overlap"), r.text
    for path, files in (("/api/studies/x/cases", upload),
                        ("/api/studies/x/rubric", {"rubric": ("r.json", b"{}")})):
        r = api.post(path, data={"note": "x"}, files=files)
        assert r.status_code == 422 and r.json()["error"]["field"] == "note", r.text
    assert _counts(engine) == before
    r = api.post("/api/studies", data={"study_id": "typo", "specialties": NEW_SPECIALTY},
                 files=upload)
    assert r.status_code == 201, r.text  # the declared fields still pass


def test_adding_the_file_a_study_was_made_from_leaves_out_other_specialties(
        app, engine, tmp_path):
    """Creating keeps the offered specialties' cases; adding the same (grown)
    file does the same, counting what it left out; a file of nothing else is
    refused naming its first case's row."""
    base = new_source()
    other = base["cases"].set_column(0, "case_id", pc.binary_join_element_wise(
        base["cases"]["case_id"], "_derm", "")).set_column(
        base["cases"].schema.get_field_index("specialty"), "specialty",
        pa.array(["Dermatology"] * base["cases"].num_rows))
    other_answers = base["answers"].set_column(0, "answer_id", pc.binary_join_element_wise(
        base["answers"]["answer_id"], "_derm", "")).set_column(
        base["answers"].schema.get_field_index("case_id"), "case_id",
        pc.binary_join_element_wise(base["answers"]["case_id"], "_derm", ""))
    mixed = Snapshot.from_tables({**base.tables,
                                  "cases": pa.concat_tables([base["cases"], other]),
                                  "answers": pa.concat_tables([base["answers"], other_answers])},
                                 base.meta)
    derm = Snapshot.from_tables({**base.tables, "cases": other, "answers": other_answers},
                                base.meta)
    _, uid = signed_in(app, engine, "x", "admin")
    api = client(app, membership.create_token(engine, uid, None, "admin", "script"))
    r = api.post("/api/studies", data={"study_id": "mix", "specialties": NEW_SPECIALTY},
                 files={"source": ("mixed.zip", zipped_bundle(mixed, tmp_path, "mixed"))})
    assert r.status_code == 201, r.text
    assert r.json()["answers"] == base["answers"].num_rows
    r = api.post("/api/studies/mix/cases",
                 files={"source": ("mixed.zip", zipped_bundle(mixed, tmp_path, "mixed"))})
    assert r.status_code == 201, r.text
    assert r.json() | {"study_id": None} == {"study_id": None, "cases": 0, "answers": 0,
                                             "flagged": 0, "left_out": other.num_rows}
    before = _counts(engine)
    r = api.post("/api/studies/mix/cases",
                 files={"source": ("derm.zip", zipped_bundle(derm, tmp_path, "derm"))})
    assert r.status_code == 422, r.text
    assert "cases, row 1, field 'specialty'" in r.json()["error"]["message"], r.text
    assert _counts(engine) == before
    with engine.connect() as conn:
        specialties = conn.execute(sa.select(snapshot_tables.cases.c.specialty).where(
            snapshot_tables.cases.c.study_id == "mix").distinct()).scalars().all()
    assert specialties == [NEW_SPECIALTY]


def test_a_bad_upload_writes_nothing_and_names_the_problem(app, engine):
    c = admin_client(app, engine)
    before = _counts(engine)
    fields = {"csrf": csrf(c), "study_id": "broken"}
    r = c.post("/admin/new", data=fields,
               files={"source": ("arena.json", b'{"not": "a known format"}', "application/json")})
    assert r.status_code == 422
    assert "arena.json" in r.text and "format" in r.text
    r = c.post("/admin/new", data={**fields, "overlap_target": "many"},
               files={"source": ("x.zip", b"PK not a zip", "application/zip")})
    assert r.status_code == 422 and "overlap_target" in r.text
    r = c.post("/admin/new", data=fields,
               files={"source": ("x.zip", b"PK not a zip", "application/zip")})
    assert r.status_code == 422 and "zip" in r.text
    assert _counts(engine) == before


def _counts(engine) -> dict[str, int]:
    with engine.connect() as conn:
        return {t.name: conn.execute(sa.select(sa.func.count()).select_from(t)).scalar_one()
                for t in (snapshot_tables.studies, snapshot_tables.cases, snapshot_tables.answers,
                          platform_tables.study_settings, platform_tables.answer_screens)}


# --- invitations, members, revocation ---------------------------------------------------

def test_invite_many_from_a_csv_then_revoke(app, engine):
    c = admin_client(app, engine)
    csv_text = "name,email\nAda,ada@example.org\nBo,bo@example.org\n"
    r = c.post("/s/x/admin/invite", data={"csrf": csrf(c), "role": "clinician"},
               files={"csv": ("people.csv", csv_text.encode(), "text/csv")})
    assert r.status_code == 200
    links = re.findall(r"/invite/([A-Za-z0-9_-]{20,})", r.text)
    assert len(links) == 2 and "ada@example.org" in r.text
    nurse = client(app)
    page = nurse.get(f"/invite/{links[0]}")
    pw = "correct horse battery"
    assert nurse.post(f"/invite/{links[0]}", data={"csrf": csrf_of(page.text),
                      "email": "ada@example.org", "password": pw,
                      "password2": pw}).status_code == 303
    people = c.get("/s/x/admin/people").text
    assert "ada@example.org" not in people  # pseudonymous ids only
    rater = re.findall(r'name="rater_id" value="(r_[0-9a-f]+)"', people)
    assert len(rater) == 1
    r = c.post("/s/x/admin/revoke", data={"csrf": csrf(c), "rater_id": rater[0]})
    assert r.status_code == 303
    assert nurse.get("/s/x/profile").status_code == 403
    log = c.get("/s/x/admin/log").text
    assert "access_revoked" in log and "invited" in log and "signed_in" in log


def _invite(c: TestClient, emails: str = "", count: str = "") -> list[str]:
    r = c.post("/s/x/admin/invite", data={"csrf": csrf(c), "role": "clinician",
                                          "emails": emails, "count": count})
    assert r.status_code == 200, r.text
    return re.findall(r"/invite/([A-Za-z0-9_-]{20,})", r.text)


def _accept(person: TestClient, link: str, email: str | None = None):
    """Register with ``email`` through the link, or (signed in) accept it."""
    form = {"csrf": csrf(person)}
    if email is not None:
        pw = "correct horse battery"
        form |= {"email": email, "password": pw, "password2": pw}
    return person.post(f"/invite/{link}", data=form)


def test_an_invitation_for_an_address_admits_that_address_only(app, engine):
    c = admin_client(app, engine)
    (ada_link,) = _invite(c, "ada@example.org")
    # The page says which address the link admits, masked: whoever the link reached
    # cannot read off the address to register under it. A refusal says it again.
    shown = client(app).get(f"/invite/{ada_link}").text
    assert "at <strong>a…@example.org</strong>" in shown and "ada@" not in shown, shown
    (unnamed,) = _invite(c, count="1")
    assert "admits that address" not in client(app).get(f"/invite/{unnamed}").text
    r = _accept(client(app), ada_link, "mallory@example.org")
    assert "at <strong>a…@example.org</strong>" in r.text and "ada@" not in r.text
    assert r.status_code == 400 and "another e-mail address" in r.text, r.text
    assert _accept(client(app), ada_link, "Ada@Example.org ").status_code == 303  # as typed
    # A signed-in account with another address cannot take Ada's second link either.
    (second,) = _invite(c, "ada@example.org")
    mallory = signed_in(app, engine, "y", "clinician")[0]
    r = _accept(mallory, second)
    assert r.status_code == 400 and "another e-mail address" in r.text, r.text
    assert "Accept invitation" not in r.text  # the refused link is not offered again
    # An address pasted with a name and brackets is the address alone.
    (dee,) = _invite(c, 'Dee Example <Dee@Example.org>')
    assert _accept(client(app), dee, "dee@example.org").status_code == 303
    # The API takes a list of addresses only: an entry that is not one is refused.
    api = client(app, membership.create_token(engine, user_id(engine, _emails(engine)[0]), "x",
                                          "admin", "t"))
    links = sa.select(sa.func.count()).select_from(platform_tables.invitations)
    with engine.connect() as conn:
        before = conn.execute(links).scalar_one()
    r = api.post("/api/studies/x/invitations", json={"emails": ["eve@example.org", "bogus"]})
    assert r.status_code == 422 and "bogus" in r.text, r.text
    with engine.connect() as conn:
        assert conn.execute(links).scalar_one() == before  # not even eve's
    # A link made as a number admits anyone who holds it.
    (bearer,) = _invite(c, count="1")
    assert _accept(client(app), bearer, "bo@example.org").status_code == 303
    log = c.get("/s/x/admin/log").text
    assert log.count("registered") == 4, log  # the admin, Ada, Dee, Bo: joining is logged


def test_a_revoked_member_cannot_come_back_through_an_older_link(app, engine):
    c = admin_client(app, engine)
    (first,), (reminder,) = _invite(c, "ben@example.org"), _invite(c, "ben@example.org")
    (bearer,), (cara,) = _invite(c, count="1"), _invite(c, "cara@example.org")
    ben = client(app)
    assert _accept(ben, first, "ben@example.org").status_code == 303
    # The admin revokes Ben by the address they invited (the list shows pseudonyms only).
    r = c.post("/s/x/admin/revoke", data={"csrf": csrf(c), "email": "nobody@example.org"})
    assert r.status_code == 422 and "email" in r.text, r.text
    co_admin, co_id = signed_in(app, engine, "x", "admin")  # not revoked here, as the list
    with engine.connect() as conn:                            # of members shows
        address = conn.execute(sa.select(platform_tables.users.c.email).where(
            platform_tables.users.c.user_id == co_id)).scalar_one()
    r = c.post("/s/x/admin/revoke", data={"csrf": csrf(c), "email": address})
    assert r.status_code == 422 and "field &#39;email&#39;: an admin of the study cannot be" \
        " revoked" in r.text, r.text
    # Before anyone registered with an address, revoking it withdraws its unused links.
    (dee,) = _invite(c, "dee@example.org")
    r = c.post("/s/x/admin/revoke", data={"csrf": csrf(c), "email": "dee@example.org"})
    assert r.status_code == 303, r.text
    assert "1 unused invitation(s) for that address withdrawn" in c.get(
        r.headers["location"]).text
    r = _accept(client(app), dee, "dee@example.org")
    assert r.status_code == 400 and "expired" in r.text, r.text
    log = c.get("/s/x/admin/log").text
    assert "invitations_withdrawn" in log and "dee@example.org" not in log
    assert co_admin.get("/s/x/admin/people").status_code == 200
    r = c.post("/s/x/admin/revoke", data={"csrf": csrf(c), "email": " Ben@example.org"})
    assert r.status_code == 303, r.text
    confirmed = c.get(r.headers["location"]).text
    assert f"Access revoked for {rater_of(engine, 'ben@example.org')}" in confirmed
    assert "ben@example.org" not in confirmed
    assert ben.get("/s/x/profile").status_code == 403
    # The reminder, made for his address before the revocation, expired with it.
    r = _accept(ben, reminder)
    assert r.status_code == 400 and "expired" in r.text, r.text
    # A link made without an address before the revocation cannot undo it either.
    r = _accept(ben, bearer)
    assert r.status_code == 400 and "revoked" in r.text, r.text
    assert ben.get("/s/x/profile").status_code == 403
    # Other people's links are untouched, and a new invitation is the admin's new decision.
    assert _accept(client(app), cara, "cara@example.org").status_code == 303
    (again,) = _invite(c, "ben@example.org")
    assert _accept(ben, again).status_code == 303
    assert ben.get("/s/x/profile").status_code == 200


def _pending(page: str) -> list[list[str]]:
    table = re.search(r'<table class="data" id="pending">(.*?)</table>', page, re.S)
    return [re.findall(r"<td>(.*?)</td>", row) for row in
            re.findall(r"<tr><td>.*?</tr>", table.group(1))] if table else []


def test_a_viewer_or_admin_accepting_a_link_is_not_asked_for_a_clinician_profile(app, engine):
    """They went to the profile form (specialty, years of practice, consent to
    rate) as clinicians do, and could not leave it without filling it in."""
    c = admin_client(app, engine)
    for role in ("viewer", "admin", "clinician"):
        r = c.post("/s/x/admin/invite", data={"csrf": csrf(c), "role": role, "count": "1"})
        (link,) = re.findall(r"/invite/([A-Za-z0-9_-]{20,})", r.text)
        person = client(app)
        r = _accept(person, link, f"{role}.landing@example.org")
        assert r.status_code == 303, r.text
        wanted = "/s/x/profile" if role == "clinician" else "/s/x/progress"
        assert r.headers["location"] == wanted
        assert person.get(wanted).status_code == 200
        if role != "clinician":  # nor is the form offered by its address, nor taken by hand
            r = person.get("/s/x/profile")
            assert r.status_code == 303 and r.headers["location"] == "/s/x/progress"
            r = person.post("/s/x/profile", data={
                "csrf": csrf(person), "specialty": "Pathology",
                "role": "specialist", "experience_years": "9", "country": "Ghana",
                "organisation": "Hospital", "consent": "yes"})
            assert r.status_code == 303 and r.headers["location"] == "/s/x/progress"
            with engine.connect() as conn:
                assert conn.execute(sa.select(snapshot_tables.raters.c.specialty).where(
                    snapshot_tables.raters.c.rater_id == rater_of(engine,
                                                                  f"{role}.landing@example.org"))
                ).scalar() is None
    joined = {m["rater_id"]: m["joined"] for m in membership.members(engine, "x")}
    assert joined[rater_of(engine, "viewer.landing@example.org")] is True
    assert joined[rater_of(engine, "clinician.landing@example.org")] is False  # no profile yet
    # Signed in already, a viewer accepting a link to another study lands there too.
    r = c.post("/s/x/admin/invite", data={"csrf": csrf(c), "role": "viewer", "count": "1"})
    (link,) = re.findall(r"/invite/([A-Za-z0-9_-]{20,})", r.text)
    y_clinician, _ = signed_in(app, engine, "y", "clinician")
    r = _accept(y_clinician, link)
    assert r.status_code == 303 and r.headers["location"] == "/s/x/progress", r.text


def in_two_weeks(shown: str) -> bool:
    """``shown`` is when a link made a moment ago expires, as the People page
    writes it (UTC, to the minute)."""
    at = datetime.strptime(shown, "%Y-%m-%d %H:%M").replace(tzinfo=UTC)
    return abs(at - (datetime.now(UTC) + timedelta(days=14))) < timedelta(minutes=2)


def test_an_admin_sees_and_withdraws_unused_links(app, engine):
    """Unnamed links were neither listed nor revocable: one sent to the wrong
    list kept working for 14 days."""
    c = admin_client(app, engine)
    r = c.post("/s/x/admin/invitations/withdraw", data={"csrf": csrf(c), "which": "all"})
    assert r.status_code == 303  # earlier tests' leftovers: a clean start
    assert "No unused invitation link to this study works now" in c.get(
        "/s/x/admin/people").text
    bearer = _invite(c, count="2")
    (ada,) = _invite(c, "ada.w@example.org")
    viewer = c.post("/s/x/admin/invite", data={"csrf": csrf(c), "role": "viewer",
                                               "count": "1"})
    assert viewer.status_code == 200
    rows = _pending(c.get("/s/x/admin/people").text)
    assert [row[:3] for row in rows] == [["clinician", "anyone with the link", "2"],
                                         ["clinician", "an address", "1"],
                                         ["viewer", "anyone with the link", "1"]], rows
    # A used link is not open any more.
    assert _accept(client(app), bearer[0], "bo.w@example.org").status_code == 303
    assert _pending(c.get("/s/x/admin/people").text)[0][2] == "1"
    r = c.post("/s/x/admin/invitations/withdraw", data={"csrf": csrf(c), "which": "unnamed"})
    assert r.status_code == 303 and r.headers["location"].endswith("?withdrawn=2&of=unnamed")
    page = c.get(r.headers["location"]).text
    assert "2 unused invitation(s) without an address withdrawn" in page
    (row,) = _pending(page)
    assert row[:3] == ["clinician", "an address", "1"] and in_two_weeks(row[3]), row
    assert "Withdraw the unnamed links" not in page  # none left; "every unused link" stays
    assert "Withdraw every unused link" in page
    r = _accept(client(app), bearer[1], "cy.w@example.org")
    assert r.status_code == 400 and "expired or was withdrawn" in r.text, r.text
    assert _accept(client(app), ada, "ada.w@example.org").status_code == 303  # untouched
    log = c.get("/s/x/admin/log").text
    assert "invitations_withdrawn" in log and "unnamed" in log
    r = c.post("/s/x/admin/invitations/withdraw", data={"csrf": csrf(c), "which": "all"})
    assert "0 unused invitation(s) to this study withdrawn: there were none" in c.get(
        r.headers["location"]).text
    r = c.post("/s/x/admin/invitations/withdraw", data={"csrf": csrf(c), "which": "some"})
    assert r.status_code == 422 and "which" in r.text
    # The same over the API.
    _, uid = signed_in(app, engine, "x", "admin")
    api = client(app, membership.create_token(engine, uid, "x", "admin", "links"))
    assert api.post("/api/studies/x/invitations", json={"count": 3}).status_code == 201
    (group,) = api.get("/api/studies/x/invitations").json()
    assert in_two_weeks(group.pop("last_expires"))
    assert group == {"role": "clinician", "for": "anyone with the link", "links": 3}
    assert api.post("/api/studies/x/invitations/withdraw",
                    json={"which": "unnamed", "dry": True}).status_code == 422
    r = api.post("/api/studies/x/invitations/withdraw", json={"which": "unnamed"})
    assert r.status_code == 200 and r.json() == {"withdrawn": 3}
    assert api.get("/api/studies/x/invitations").json() == []


@pytest.mark.parametrize("bound", [True, False], ids=["for-his-address", "bearer"])
def test_a_revocation_at_the_moment_a_link_is_accepted_is_not_undone(app, engine, bound):
    """Ben accepts an older link while the admin revokes him: the revocation
    runs (in another thread) just as the join marks the link used. It must
    win either way: before, on PostgreSQL, it committed between the join's
    check and its insert, and Ben was back in the study."""
    c = admin_client(app, engine)
    (first,) = _invite(c, "ben@example.org")
    (spare,) = _invite(c, "ben@example.org") if bound else _invite(c, count="1")
    ben = client(app)
    assert _accept(ben, first, "ben@example.org").status_code == 303
    admin_id = user_id(engine, next(e for e in _emails(engine) if e != "ben@example.org"))
    rater, waited = rater_of(engine, "ben@example.org"), []

    def revoke_meanwhile(conn, cursor, statement, parameters, context, executemany):
        if statement.startswith("UPDATE invitations SET used_at") and not waited:
            revoking = threading.Thread(target=membership.revoke,
                                        args=(engine, admin_id, "x", rater))
            revoking.start()
            revoking.join(1.0)  # done at once before the fix; now it waits for the join
            waited.append(revoking)

    sa.event.listen(engine, "before_cursor_execute", revoke_meanwhile)
    try:
        r = _accept(ben, spare)
    finally:
        sa.event.remove(engine, "before_cursor_execute", revoke_meanwhile)
    waited[0].join(10)
    assert not waited[0].is_alive()
    assert r.status_code in (303, 400), r.text
    with engine.connect() as conn:
        member = conn.execute(sa.select(platform_tables.memberships.c.role).where(
            platform_tables.memberships.c.study_id == "x",
            platform_tables.memberships.c.user_id == user_id(engine, "ben@example.org"))).first()
    assert member is None
    assert ben.get("/s/x/profile").status_code == 403


def _emails(engine) -> list[str]:
    with engine.connect() as conn:
        return conn.execute(sa.select(platform_tables.users.c.email).join(
            platform_tables.memberships).where(
            platform_tables.memberships.c.study_id == "x",
            platform_tables.memberships.c.role == "admin")).scalars().all()


def rater_of(engine, email: str) -> str:
    with engine.connect() as conn:
        return conn.execute(sa.select(platform_tables.users.c.rater_id).where(
            platform_tables.users.c.email == email)).scalar_one()


# --- the leak guard's queue -----------------------------------------------------------------

def test_release_and_withdraw_flagged_answers_are_logged(app, engine):
    c = admin_client(app, engine)
    queue = screening.flagged_queue(engine, "x")
    assert len(queue) == 2
    page = c.get("/s/x/admin/flagged")
    assert queue[0]["answer_id"] in page.text
    released, withdrawn = queue[0]["answer_id"], queue[1]["answer_id"]
    # A release is final: without the box ticked (a mis-click) nothing is decided.
    r = c.post("/s/x/admin/flagged", data={"csrf": csrf(c), "answer_id": released,
                                           "decision": "release"})
    assert r.status_code == 422 and "confirm" in r.text, r.text
    assert len(screening.flagged_queue(engine, "x")) == 2
    for answer, decision in ((released, "release"), (withdrawn, "withdraw")):
        r = c.post("/s/x/admin/flagged", data={"csrf": csrf(c), "answer_id": answer,
                                               "decision": decision, "confirm": "yes"})
        assert r.status_code == 303
    again = c.post("/s/x/admin/flagged", data={"csrf": csrf(c), "answer_id": released,
                                               "decision": "withdraw"})
    assert again.status_code == 422 and "not awaiting a decision" in again.text
    assert screening.flagged_queue(engine, "x") == []
    with engine.connect() as conn:
        status = dict(conn.execute(sa.select(platform_tables.answer_screens.c.answer_id,
                                             platform_tables.answer_screens.c.status).where(
            platform_tables.answer_screens.c.answer_id.in_([released, withdrawn]))).all())
        decisions = conn.execute(sa.select(
            platform_tables.screen_decisions.c.decision)).scalars().all()
    assert status == {released: "clear", withdrawn: "flagged"}
    assert sorted(decisions) == ["release", "withdraw"]
    log = c.get("/s/x/admin/log").text
    assert "answer_released" in log and "answer_withdrawn" in log


# --- progress, live view and what a viewer may see ---------------------------------------------

def _rate(c: TestClient, score: str, comment: str) -> None:
    r = c.post("/s/x/next", data={"csrf": csrf(c), "kind": "rating"})
    url = r.headers["location"]
    html = c.get(url).text
    form = {"csrf": csrf_of(html), "time_spent_s": "60",
            "idempotency_key": re.search(r'name="idempotency_key" value="([^"]+)"',
                                         html).group(1)}
    for k in sorted(set(re.findall(r'name="s1\.([a-z_]+)"', html))):
        form[f"s1.{k}"] = score
        form[f"c1.{k}"] = comment
    r = c.post(url, data=form)
    assert r.status_code == 303, r.text


def test_progress_and_live_view_follow_the_ratings(app, engine):
    admin, _ = signed_in(app, engine, "x", "admin")
    viewer, _ = signed_in(app, engine, "x", "viewer", "viewer")
    raters = [signed_in(app, engine, "x", "clinician")[0] for _ in range(2)]
    comment = "SECRET-COMMENT-text"
    assert "No ratings yet" in admin.get("/s/x/safety").text
    for c in raters:
        _rate(c, "-2", comment)
    with engine.connect() as conn:
        cfg = study_config(conn, "x")
    progress = live.progress(engine, cfg, per_clinician=True)
    assert sum(p["answers_rated"] for p in progress["clinicians"]) == 2
    with engine.connect() as conn:  # submissions repeat the time on every criterion row
        spent = dict(conn.execute(sa.select(snapshot_tables.ratings.c.rater_id,
                                            sa.func.max(snapshot_tables.ratings.c.time_spent_s))
                                  .group_by(snapshot_tables.ratings.c.rater_id)).all())
    assert {p["rater_id"]: p["minutes"] for p in progress["clinicians"]} == {
        r: round(t / 60, 2) for r, t in spent.items()}
    page = admin.get("/s/x/progress").text
    assert 'id="clinicians"' in page and "r_" in page
    admin.get("/s/x/safety")  # starts the view's computation off the request path
    live.settle()
    safety = admin.get("/s/x/safety")
    assert safety.status_code == 200 and "Fleiss" in safety.text
    assert "too few to call" in safety.text  # two ratings are far below min_n
    # Every setting that changes a number, and each Fail % with the ratings it counts.
    assert f"{live.LIVE_BOOTSTRAP} bootstrap resamples" in safety.text
    assert "clinieval audit --bootstrap" in safety.text and "seed 20260301" in safety.text
    models = re.search(r'<table class="data" id="models">.*?</table>', safety.text, re.S)[0]
    assert "Fail % of ratings (n ratings)" in models and "BT strength (n votes)" in models
    assert "<th>Harmlessness Fail %" in models  # the criterion's name, not its id
    cells = re.findall(r"<tr><td>.*?</tr>", models, re.S)
    fails = len(live.fail_columns(live.safety_view(engine, "x")))
    assert cells and all(len(re.findall(r'<span class="muted">\(\d+\)</span>', row)) >= fails
                         for row in cells), cells
    version = live.data_version(engine, "x")
    _rate(raters[0], "1", comment)
    assert live.data_version(engine, "x") != version
    rater_ids = _rater_ids(engine)
    for url in ("/s/x/progress", "/s/x/safety", "/api/studies/x/progress",
                "/api/studies/x/safety"):
        body = viewer.get(url)
        assert body.status_code == 200, url
        assert comment not in body.text, url
        assert not any(r in body.text for r in rater_ids), url


def test_progress_counts_match_a_count_from_the_ratings(app, engine):
    """Coverage per model and specialty, and the ratings still needed, as
    counted here from the ratings themselves (the page reads the
    trigger-kept answer_load)."""
    admin, _ = signed_in(app, engine, "x", "admin")
    raters = [signed_in(app, engine, "x", "clinician")[0] for _ in range(3)]
    with engine.connect() as conn:
        cfg = study_config(conn, "x")
        n = conn.execute(sa.select(sa.func.count()).select_from(platform_tables.answer_screens)
                         .where(
            platform_tables.answer_screens.c.study_id == "x")).scalar_one()
    # Every answer gets a first rater before any a second: n + 5 ratings complete five,
    # unevenly over the models (checked below, so that a grid in the wrong order shows).
    for i in range(n + 5):
        _rate(raters[i % 3], "1", "")
    with engine.connect() as conn:
        a, c, m = snapshot_tables.answers, snapshot_tables.cases, snapshot_tables.models
        r, s = snapshot_tables.ratings, platform_tables.answer_screens
        answers = conn.execute(
            sa.select(a.c.answer_id, a.c.model_id, m.c.display_name, c.c.specialty)
            .join(c, c.c.case_id == a.c.case_id).join(m, m.c.model_id == a.c.model_id)
            .join(s, s.c.answer_id == a.c.answer_id)
            .where(s.c.study_id == "x", s.c.status == "clear")).all()
        raters_of: dict[str, set] = {}
        for answer_id, rater_id in conn.execute(sa.select(r.c.answer_id, r.c.rater_id)):
            raters_of.setdefault(answer_id, set()).add(rater_id)
    cells: dict[tuple, list] = {}
    needed = 0
    for answer_id, model_id, name, specialty in answers:
        k = len(raters_of.get(answer_id, ()))
        cell = cells.setdefault((model_id, name, specialty), [0, 0])
        cell[0] += 1
        cell[1] += k >= cfg.overlap_target
        needed += max(cfg.overlap_target - k, 0)
    expected = sorted((mid, name, sp, n, done) for (mid, name, sp), (n, done) in cells.items())
    progress = live.progress(engine, cfg, per_clinician=False)
    assert sorted((x["model"], x["model_name"], x["specialty"], x["answers"], x["complete"])
                  for x in progress["coverage"]) == expected
    assert any(done for *_, done in expected)  # some answers reached the target
    assert progress["ratings_needed"] == needed
    assert progress["complete"] == sum(done for *_, done in expected)
    # The page's grid: a row per specialty (study x has one), a column per model by
    # display name, and the totals per model below.
    page = admin.get("/s/x/progress").text
    heads = re.findall(r'<th title="([^"]+)">([^<]+)</th>', page)
    assert heads == sorted(((mid, name) for mid, name, *_ in expected),
                           key=lambda h: h[1].casefold())
    cell = {mid: (str(done), str(n)) for mid, _, _, n, done in expected}
    in_order = [cell[mid] for mid, _ in heads]
    assert in_order != in_order[::-1]  # a grid with its columns reversed would differ
    (specialty,) = {sp for _, _, sp, _, _ in expected}
    row = re.search(r'<tbody><tr><th scope="row"[^>]*>([^<]+)</th>(.*?)</tr>', page, re.S)
    assert row.group(1) == specialty
    done, n = progress["complete"], progress["answers"]
    assert re.findall(r">(\d+)/(\d+)", row.group(2)) == [*in_order, (str(done), str(n))]
    footer = re.search(r"<tfoot>(.*?)</tfoot>", page, re.S).group(1)
    assert re.findall(r">(\d+)/(\d+)<", footer) == [*in_order, (str(done), str(n))]


def test_the_coverage_grid_by_hand():
    cell = lambda m, name, sp, n, done: {"model": m, "model_name": name, "specialty": sp,  # noqa: E731
                                         "answers": n, "complete": done}
    grid = live.coverage_grid([cell("m2", "Alpha", "Renal", 4, 1),
                               cell("m1", "Beta", "Renal", 2, 2),
                               cell("m1", "Beta", "Cardiology", 3, 0)])
    assert grid["models"] == [("Alpha", "m2"), ("Beta", "m1")]  # by display name
    assert grid["rows"] == [("Cardiology", [None, (0, 3)], 0, 3),
                            ("Renal", [(1, 4), (2, 2)], 3, 6)]
    assert grid["totals"] == [(1, 4), (2, 5)]
    # Columns by name regardless of case; a shared name is told apart by the model ids.
    grid = live.coverage_grid([cell("m3", "beta", "Renal", 1, 0),
                               cell("m1", "Alpha", "Renal", 1, 0),
                               cell("m2", "beta", "Renal", 1, 1),
                               cell("m4", "Gamma", "Renal", 1, 1)])
    assert grid["models"] == [("Alpha", "m1"), ("beta (m2)", "m2"), ("beta (m3)", "m3"),
                              ("Gamma", "m4")]


def _rater_ids(engine) -> list[str]:
    with engine.connect() as conn:
        return conn.execute(sa.select(snapshot_tables.raters.c.rater_id)).scalars().all()


# --- the JSON API ------------------------------------------------------------------------------

def test_the_api_creates_a_study_invites_and_exports(app, engine, tmp_path):
    _, uid = signed_in(app, engine, "x", "admin")
    token = membership.create_token(engine, uid, None, "admin", "script")
    api = client(app, token)
    r = api.post("/api/studies", data={"study_id": "api1", "specialties": NEW_SPECIALTY,
                                       "overlap_target": "2"},
                 files={"source": ("s.zip", zipped_source(tmp_path), "application/zip")})
    assert r.status_code == 201, r.text
    assert r.json()["study_id"] == "api1" and r.json()["answers"] > 0
    r = api.post("/api/studies/api1/invitations", json={"emails": ["a@example.org",
                                                                   "b@example.org"]})
    assert r.status_code == 201 and len(r.json()) == 2
    assert all("/invite/" in x["link"] for x in r.json())
    assert api.get("/api/studies/api1/progress").json()["answers"] > 0
    export = api.get("/api/studies/api1/export")
    assert export.status_code == 200
    names = zipfile.ZipFile(io.BytesIO(export.content)).namelist()
    assert any(n.endswith("manifest.json") for n in names), names
    assert "api1-audit-log.json" in names
    # A study-scoped viewer token reads aggregates only and is refused elsewhere.
    viewer = client(app, api.post("/api/studies/api1/tokens",
                                  json={"role": "viewer"}).json()["token"])
    assert viewer.get("/api/studies/api1/safety").status_code == 200
    assert viewer.get("/api/studies/api1/members").status_code == 403
    assert viewer.get("/api/studies/x/progress").status_code == 403
    token_id = membership.tokens(engine, "api1", uid)[-1]["token_id"]
    assert api.post(f"/api/studies/api1/tokens/{token_id}/revoke").status_code == 204
    assert viewer.get("/api/studies/api1/safety").status_code == 401
    bad = api.post("/api/studies/api1/flagged/nope", json={"decision": "keep"})
    assert bad.status_code == 422
    schema = client(app).get("/api/openapi.json").json()
    assert "/api/studies/{study}/export" in schema["paths"]
    assert not any(p.startswith("/s/") for p in schema["paths"])


def test_a_study_without_the_rationale_rule_accepts_a_bare_minus_two(app, engine, tmp_path):
    admin = admin_client(app, engine)
    r = admin.post("/admin/new", data={"csrf": csrf(admin), "study_id": "norat",
                                       "specialties": NEW_SPECIALTY, "pairwise_share": "0",
                                       "rationale_required": "no"},
                   files={"source": ("s.zip", zipped_source(tmp_path), "application/zip")})
    assert r.status_code == 303, r.text
    c = client(app)
    register_via_http(c, engine, "norat", "clinician", specialty=NEW_SPECIALTY)
    r = c.post("/s/norat/next", data={"csrf": csrf(c), "kind": "rating"})
    html = c.get(r.headers["location"]).text
    form = {"csrf": csrf_of(html), "idempotency_key": "k" * 12}
    form |= {f"s1.{k}": "-2" for k in set(re.findall(r'name="s1\.([a-z_]+)"', html))}
    assert c.post(r.headers["location"], data=form).status_code == 303
