"""The clinician platform over HTTP (Starlette's httpx client against the
app), on SQLite and PostgreSQL: access per route and role, CSRF, bad input,
idempotency, revisions, assignment and blinding."""

from __future__ import annotations

import json
import re
import threading
import typing
from datetime import timedelta

import pytest
import sqlalchemy as sa
from fastapi.testclient import TestClient
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from clinieval.contract import vocabulary
from clinieval.platform import (
    accounts,
    events,
)
from clinieval.platform.leakguard import LeakGuard
from clinieval.platform.read_models import TaskView
from clinieval.platform.screening import flagged_answers
from clinieval.storage import db
from clinieval.storage.schema import platform as platform_tables
from clinieval.storage.schema import snapshot as snapshot_tables
from clinieval.web.app import ROUTE_LEVELS, create_app
from clinieval.web.testing import (
    LOOK_ALIKES,
    MODELS,
    SELF_IDENTIFYING,
    csrf_of,
    http_client,
    member_client,
    model_strings,
    register_via_http,
)

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")


client = http_client
member = member_client


def csrf(c: TestClient) -> str:
    page = c.get("/studies") if c.cookies.get("ce_session") else c.get("/login")
    return csrf_of(page.text)


def take(c: TestClient, kind: str = "rating", study: str = "x") -> str:
    r = c.post(f"/s/{study}/next", data={"csrf": csrf(c), "kind": kind})
    assert r.status_code == 303
    assert "/t/" in r.headers["location"], r.headers["location"]
    return r.headers["location"]


def criteria_of(html: str) -> list[str]:
    return sorted(set(re.findall(r'name="s1\.([a-z_]+)"', html)))


def answer_form(c: TestClient, url: str, score: str = "1", **extra) -> dict:
    html = c.get(url).text
    form = {"csrf": csrf_of(html), "idempotency_key": re.search(
        r'name="idempotency_key" value="([^"]+)"', html).group(1), "time_spent_s": "30"}
    panels = ("1", "2") if 'name="s2.' in html else ("1",)
    form.update({f"s{p}.{k}": score for p in panels for k in criteria_of(html)})
    if len(panels) == 2:
        form["choice"] = "A"
    form.update(extra)
    return form


def count(engine, table) -> int:
    with engine.connect() as conn:
        return conn.execute(sa.select(sa.func.count()).select_from(table)).scalar_one()


# --- access: every route x role ------------------------------------------------

ROLES = ("anonymous", "clinician", "other_study_clinician", "admin")
REFUSED = {  # level -> roles refused
    "public": set(),
    "user": {"anonymous"},
    "member": {"anonymous", "other_study_clinician"},
    "clinician": {"anonymous", "other_study_clinician", "admin"},
    # Study administration: the full matrix with viewers and tokens is in test_web_admin.
    "creator": {"anonymous", "clinician", "other_study_clinician"},
    "viewer": {"anonymous", "clinician", "other_study_clinician"},
    "admin": {"anonymous", "clinician", "other_study_clinician"},
}
API_LEVELS = {"api_creator", "api_viewer", "api_admin"}
"""Bearer-token routes; this module's clients hold sessions only."""


def _served(routes) -> typing.Iterator[str]:
    """Every path the app answers (included routers flattened; static files aside)."""
    for r in routes:
        if hasattr(r, "original_router"):
            yield from _served(r.original_router.routes)
        elif hasattr(r, "methods"):
            yield r.path + " " + ",".join(sorted(r.methods))


def test_every_route_declares_an_access_level(app):
    assert set(_served(app.routes)) == set(ROUTE_LEVELS)
    assert set(ROUTE_LEVELS.values()) <= set(REFUSED) | API_LEVELS


def test_the_task_routes_tried_first_shadow_no_other_route():
    from clinieval.web.app import TASK_PATHS, _flat, pages

    routes = [r for r in _flat(pages.routes) if hasattr(r, "path_regex")]
    first = [r for r in routes if r.path in TASK_PATHS]
    for route in routes:
        if route.path not in TASK_PATHS:
            example = re.sub(r"\{[^}]+\}", "x", route.path)
            assert not any(r.path_regex.match(example) for r in first), route.path


def test_every_route_for_every_role(app, engine):
    clients = {"anonymous": client(app), "clinician": member(app, engine, "x", "clinician"),
               "other_study_clinician": member(app, engine, "y", "clinician"),
               "admin": member(app, engine, "x", "admin")}
    task = take(clients["clinician"]).rsplit("/", 1)[1]
    # Sign-out last: it ends the session the other requests use.
    for key in sorted(ROUTE_LEVELS, key=lambda k: k.startswith("/logout")):
        path, method = key.split(" ")
        level = ROUTE_LEVELS[key]
        if level in API_LEVELS:
            continue
        method = "GET" if "GET" in method.split(",") else "POST"
        for role in ROLES:
            c = clients[role]
            # Invitations are to study y, so accepting one changes no role in x.
            url = path.format(study="x", token=accounts.create_invitation(engine, "y", "clinician")
                              if path.startswith("/invite") else task)
            r = _request(c, method, url)
            refused = role in REFUSED[level]
            assert _was_refused(r, method, role) == refused, (key, role, r.status_code)


def _request(c: TestClient, method: str, url: str):
    if method == "GET":
        return c.get(url)
    token = csrf(c)
    if url.endswith("/draft"):
        return c.post(url, json={"fields": {}}, headers={"X-CSRF-Token": token})
    return c.post(url, data={"csrf": token})


def _was_refused(r, method: str, role: str) -> bool:
    if r.status_code == 303 and r.headers["location"].startswith("/login?next="):
        return True
    if r.status_code == 401:
        return "Sign in first" in r.text  # not a failed sign-in on the public form
    return r.status_code == 403


def test_a_clinician_cannot_open_or_draft_another_clinicians_task(app, engine):
    owner, other = member(app, engine, "x", "clinician"), member(app, engine, "x", "clinician")
    url = take(owner)
    assert other.get(url).status_code == 404
    r = other.post(url + "/draft", json={"fields": {"s1.accuracy": "2"}},
                   headers={"X-CSRF-Token": csrf(other)})
    assert r.status_code == 404
    assert count(engine, platform_tables.drafts) == 0
    form = {**answer_form(owner, url), "csrf": csrf(other)}  # a complete, valid answer
    for accept in ("text/html", "application/json"):
        assert other.post(url, data=form, headers={"accept": accept}).status_code == 404
    headers = {"X-CSRF-Token": csrf(other)}  # whatever the body, the task is not theirs
    for body in ([1], {**form, "next": "bogus"}, {**form, "s1.accuracy": [[2]]}):
        assert other.post(url, json=body, headers=headers).status_code == 404
    assert count(engine, snapshot_tables.ratings) == 0
    assert owner.post(url, data={**form, "csrf": csrf(owner)}).status_code == 303
    assert count(engine, snapshot_tables.ratings) == 9


def test_a_task_is_answered_only_in_its_own_studys_address(app, engine):
    """A clinician of two studies cannot submit study x's task under study y."""
    import json as json_module

    c = member(app, engine, "x", "clinician")
    url = take(c)
    with engine.begin() as conn:  # the same clinician joins y, which now offers their specialty
        user_id = conn.execute(sa.select(platform_tables.memberships.c.user_id)
                               .where(platform_tables.memberships.c.study_id
                                      == "x")).scalars().all()[-1]
        conn.execute(platform_tables.memberships.insert().values(study_id="y", user_id=user_id,
                                                   role="clinician", consented_at=events.now()))
        conn.execute(platform_tables.study_settings.update()
                     .where(platform_tables.study_settings.c.study_id == "y")
                     .values(specialties=json_module.dumps(["Pulmonology", "Pathology"])))
    assert c.get("/s/y").status_code == 200  # a clinician of y indeed
    form = answer_form(c, url)
    assert c.post(url.replace("/s/x/", "/s/y/"), data=form).status_code == 404
    assert c.get(url.replace("/s/x/", "/s/y/")).status_code == 404
    assert count(engine, snapshot_tables.ratings) == 0
    assert c.post(url, data=form).status_code == 303
    assert count(engine, snapshot_tables.ratings) == 9


# --- CSRF, sessions, sign-in -----------------------------------------------------

def test_writes_without_a_valid_csrf_token_are_refused(app, engine):
    c = member(app, engine, "x", "clinician")
    url = take(c)
    form = answer_form(c, url)
    for bad in ("", "0" * 64, csrf_of(client(app).get("/login").text)):
        r = c.post(url, data={**form, "csrf": bad})
        assert r.status_code == 403
    r = c.post(url + "/draft", json={"fields": {}})
    assert r.status_code == 403
    assert c.post("/logout", data={}).status_code == 403
    assert count(engine, snapshot_tables.ratings) == 0
    assert c.post(url, data=form).status_code == 303


def test_sessions_survive_a_restart_and_end_at_sign_out(app, engine):
    c = member(app, engine, "x", "clinician")
    restarted = TestClient(create_app(engine), follow_redirects=False, cookies=dict(c.cookies))
    assert restarted.get("/s/x").status_code == 200
    assert restarted.post("/logout", data={"csrf": csrf(restarted)}).status_code == 303
    replay = TestClient(create_app(engine), follow_redirects=False, cookies=dict(c.cookies))
    assert replay.get("/s/x").headers["location"].startswith("/login")


def test_cookies_are_httponly_samesite_and_secure_over_https(app, engine):
    c = TestClient(app, follow_redirects=False, base_url="https://testserver")
    token = accounts.create_invitation(engine, "x", "clinician")
    page = c.get(f"/invite/{token}")
    password = "long enough pw"
    r = c.post(f"/invite/{token}", data={"csrf": csrf_of(page.text), "email": "a@example.org",
                                         "password": password, "password2": password})
    cookie = r.headers["set-cookie"]
    assert "HttpOnly" in cookie and "SameSite=lax" in cookie and "Secure" in cookie
    assert "script-src 'self'" in r.headers["content-security-policy"]
    assert "unsafe-inline" not in r.headers["content-security-policy"]


def test_invitations_are_single_use_and_expire(app, engine):
    token = accounts.create_invitation(engine, "x", "clinician")
    c = client(app)
    register_via_http(c, engine, "x", "clinician")
    first = client(app)
    page = first.get(f"/invite/{token}")
    with engine.connect() as conn:
        name = conn.execute(sa.select(snapshot_tables.studies.c.name)
                            .where(snapshot_tables.studies.c.study_id == "x")
                            ).scalar_one()
    assert f"Join the study “{name}”" in page.text  # what the invitee joins
    form = {"csrf": csrf_of(page.text), "email": "once@example.org",
            "password": "long enough pw", "password2": "long enough pw"}
    assert first.post(f"/invite/{token}", data=form).status_code == 303
    again = client(app)
    assert again.get(f"/invite/{token}").status_code == 404
    expired = accounts.create_invitation(engine, "x", "clinician", days=0)
    assert client(app).get(f"/invite/{expired}").status_code == 404


def test_sign_in_is_rate_limited(app, engine):
    c = client(app)
    email = register_via_http(c, engine, "x", "clinician")
    anon = client(app)
    statuses = [anon.post("/login", data={"csrf": csrf(anon), "email": email,
                                          "password": "wrong password"}).status_code
                for _ in range(accounts.LOGIN_MAX_FAILURES + 1)]
    assert statuses == [401] * accounts.LOGIN_MAX_FAILURES + [429]
    right = anon.post("/login", data={"csrf": csrf(anon), "email": email,
                                      "password": "correct horse battery"})
    assert right.status_code == 429


def test_the_task_list_says_which_task_is_open(app, engine):
    """Every button of the task list takes up an open task first ("Rate one
    answer" gave a comparison left open): the page says so, with a link."""
    c = member(app, engine, "x", "clinician")
    assert "open:" not in c.get("/s/x").text
    url = take(c, "pair")
    page = c.get("/s/x").text
    assert "You have a comparison open" in page and f'href="{url}"' in page
    assert take(c, "rating") == url  # what the message warns of
    assert c.post(url, data=answer_form(c, url)).status_code == 303
    assert "open:" not in c.get("/s/x").text


def test_a_successful_sign_in_starts_the_count_afresh(app, engine):
    """Typos before a successful sign-in do not count against the next ones: four
    wrong, the right one, four wrong again and the right one still signs in."""
    email = register_via_http(client(app), engine, "x", "clinician")
    anon = client(app)

    def attempt(password: str) -> int:
        return anon.post("/login", data={"csrf": csrf(anon), "email": email,
                                         "password": password}).status_code

    tries = accounts.LOGIN_MAX_FAILURES - 1
    for _ in range(2):
        assert [attempt("wrong password") for _ in range(tries)] == [401] * tries
        assert attempt("correct horse battery") == 303
        anon.cookies.clear()


def test_passwords_are_stored_as_argon2_hashes(app, engine):
    register_via_http(client(app), engine, "x", "clinician")
    with engine.connect() as conn:
        stored = conn.execute(sa.select(platform_tables.users.c.password_hash)).scalar_one()
    assert stored.startswith("$argon2id$") and "correct horse" not in stored


# --- submissions -------------------------------------------------------------------

@pytest.mark.parametrize("change, field", [
    ({"s1.accuracy": "3"}, "s1.accuracy"),
    ({"s1.accuracy": "1.5"}, "s1.accuracy"),
    ({"s1.accuracy": ""}, "s1.accuracy"),
    ({"s1.bedside_manner": "1"}, "s1.bedside_manner"),
    ({"s1.harmlessness": "-2"}, "c1.harmlessness"),
    ({"choice": "A"}, "choice"),
    ({"idempotency_key": ""}, "idempotency_key"),
    ({"time_spent_s": "-4"}, "time_spent_s"),
])
def test_bad_input_names_the_field_and_writes_nothing(app, engine, change, field):
    c = member(app, engine, "x", "clinician")
    url = take(c)
    r = c.post(url, data=answer_form(c, url, **change), headers={"accept": "application/json"})
    assert r.status_code == 422
    assert r.json()["error"]["field"] == field
    page = c.post(url, data=answer_form(c, url, **change))
    assert page.status_code == 422 and 'role="alert"' in page.text
    assert count(engine, snapshot_tables.ratings) == 0


def test_a_vote_on_a_pair_not_given_and_an_expired_lease_are_refused(app, engine):
    member(app, engine, "x", "clinician")  # another clinician, whose account the lease names
    with engine.connect() as conn:
        other = conn.execute(sa.select(platform_tables.users.c.user_id)).scalar_one()
    c = member(app, engine, "x", "clinician")
    url = take(c, "pair")
    form = answer_form(c, url, choice="neither")
    assert c.post(url, data=form, headers={"accept": "application/json"}).json()[
        "error"]["field"] == "choice"
    with db.writing(engine) as conn:
        conn.execute(platform_tables.task_leases.update()
                     .values(expires_at=events.now() - timedelta(minutes=1)))
        lapsed = conn.execute(sa.select(platform_tables.task_leases)).one()
        target = conn.execute(sa.select(platform_tables.study_settings.c.overlap_target).where(
            platform_tables.study_settings.c.study_id == "x")).scalar_one()
        # Meanwhile another clinician took the pair, and that is all the ratings wanted.
        conn.execute(platform_tables.study_settings.update()
                     .where(platform_tables.study_settings.c.study_id == "x")
                     .values(overlap_target=1))
        conn.execute(platform_tables.task_leases.insert().values(
            {**lapsed._asdict(), "token": "other", "user_id": other,
             "expires_at": events.now() + timedelta(minutes=30)}))
    r = c.post(url, data=answer_form(c, url), headers={"accept": "application/json"})
    assert r.status_code == 422 and r.json()["error"]["field"] == "lease"
    # Or took one of its answers alone, in a rating task: the pair would over-fill it.
    with db.writing(engine) as conn:
        conn.execute(platform_tables.task_leases.update().where(platform_tables.task_leases.c.token
                                                                == "other").values(
            kind="rating", answer_b_id=None, shown_left=None))
    r = c.post(url, data=answer_form(c, url), headers={"accept": "application/json"})
    assert r.status_code == 422 and r.json()["error"]["field"] == "lease", r.text
    assert count(engine, snapshot_tables.preferences) == count(engine, snapshot_tables.ratings) == 0
    # With room left, a lease that lapsed while the clinician rated is renewed: stored.
    with db.writing(engine) as conn:
        conn.execute(platform_tables.study_settings.update()
                     .where(platform_tables.study_settings.c.study_id == "x")
                     .values(overlap_target=target))
        conn.execute(platform_tables.task_leases.delete().where(platform_tables.task_leases.c.token
                                                                == "other"))
    r = c.post(url, data=answer_form(c, url), headers={"accept": "application/json"})
    assert r.status_code == 200, r.text
    assert count(engine, snapshot_tables.preferences) == 1 and count(engine,
                                                                     snapshot_tables.ratings) == 18
    # A lease marked expired (taken back) is not renewed.
    url = take(c)
    with db.writing(engine) as conn:
        conn.execute(platform_tables.task_leases.update()
                     .where(platform_tables.task_leases.c.status == "open")
                     .values(status="expired"))
    r = c.post(url, data=answer_form(c, url), headers={"accept": "application/json"})
    assert r.status_code == 422 and r.json()["error"]["field"] == "lease"


def test_a_second_tab_submitting_a_submitted_task_is_told_it_made_a_revision(app, engine):
    """Its answers became revision 1 while it said only "Saved. Thank you."."""
    c = member(app, engine, "x", "clinician")
    url = take(c)
    # Two tabs on the task, each sending its form as the page does ("next": auto).
    first = answer_form(c, url) | {"next": "auto"}
    second = answer_form(c, url, **{"s1.accuracy": "2"}) | {"next": "auto"}
    assert c.post(url, data=first).headers["location"].endswith("?saved=1")
    r = c.post(url, data=second)
    assert r.status_code == 303 and r.headers["location"].endswith("?saved=2"), r.headers
    assert "Saved as a new revision of a task you had submitted already" in c.get(
        r.headers["location"]).text
    with engine.connect() as conn:
        assert sorted(set(conn.execute(sa.select(snapshot_tables.ratings.c.revision))
                          .scalars())) == [0, 1]


def test_an_idempotency_key_of_another_task_is_refused(app, engine):
    """It had answered "saved" with the other task's result and stored nothing."""
    c = member(app, engine, "x", "clinician")
    first = take(c)
    form = answer_form(c, first)
    assert c.post(first, data=form, headers={"accept": "application/json"}).status_code == 200
    second = take(c)
    again = answer_form(c, second) | {"idempotency_key": form["idempotency_key"]}
    r = c.post(second, data=again, headers={"accept": "application/json"})
    assert r.status_code == 422 and r.json()["error"]["field"] == "idempotency_key", r.text
    assert count(engine, snapshot_tables.ratings) == 9


def test_a_page_that_missed_a_later_draft_save_cannot_overwrite_it(app, engine):
    """Each save says which version of the draft the page started from. A page
    left open in another tab, or reloaded before its last save arrived,
    overwrote the newer draft with its own fewer answers."""
    c = member(app, engine, "x", "clinician")
    url = take(c)
    token = csrf_of(c.get(url).text)
    assert 'data-draft-saves="0"' in c.get(url).text

    def save(fields, base, page="page-of-tab-b", seq=1, continues=None, continues_seq=None):
        return c.post(url + "/draft", json={
            "fields": fields, "choice": None, "base": base, "page": page, "seq": seq,
            "continues": continues, "continues_seq": continues_seq},
            headers={"X-CSRF-Token": token, "accept": "application/json"})

    def stored():
        with engine.connect() as conn:
            return json.loads(conn.execute(sa.select(platform_tables.drafts.c.data))
                              .scalar_one())["fields"]

    answers = {f"s1.{k}": "1" for k in ("accuracy", "harmlessness", "completeness")}
    r = save(answers, 0, seq=3)  # tab B
    assert r.status_code == 200 and r.json()["version"] == 1
    r = save({"s1.fairness": "-2"}, 0, page="page-of-tab-a")  # opened before B's save
    assert r.status_code == 422 and r.json()["error"]["field"] == "base"
    assert "another page saved a newer draft" in r.json()["error"]["reason"]
    # An older save of B's, overtaken on the way, changes nothing.
    assert save({"s1.accuracy": "1"}, 0, seq=2).json()["version"] == 1
    assert stored() == answers
    # B reloaded before its last save arrived: the new page took B's answers (up to
    # B's third change) over from the browser and carries on from them.
    r = save({**answers, "s1.fairness": "0"}, 0, page="page-after-b", seq=1,
             continues="page-of-tab-b", continues_seq=3)
    assert r.status_code == 200 and r.json()["version"] == 2
    r = save(answers, 1, page="page-after-b", seq=2)  # and a save of its own after that
    assert r.json()["version"] == 3
    r = save(answers | {"s1.fairness": "1"}, 2, page="page-of-tab-b", seq=4)  # B, left behind
    assert r.status_code == 422 and r.json()["error"]["field"] == "base"
    # A page carrying on from a tab still open is refused once that tab changed more
    # than the copy it took over held.
    assert save(answers | {"s1.completeness": "-2"}, 3, page="tab-c-open", seq=5
                ).json()["version"] == 4
    r = save(answers | {"s1.reasoning": "2"}, 3, page="tab-d-after-c", seq=1,
             continues="tab-c-open", continues_seq=4)
    assert r.status_code == 422 and r.json()["error"]["field"] == "base"
    assert stored()["s1.completeness"] == "-2"
    for bad in ("short", "x" * 65, "a b c d e f", 12345678):
        r = save({}, 3, page=bad)
        assert r.status_code == 422 and r.json()["error"]["field"] == "page", bad
    page = c.get(url).text
    assert 'data-draft-saves="4"' in page
    assert re.search(r'name="s1.harmlessness" value="1"[^>]*checked', page)
    # The same again from a page that started earlier (a reloaded page restoring what
    # its predecessor sent): accepted, the version unchanged.
    again = answers | {"s1.completeness": "-2"}
    assert save(again, 0, page="page-of-tab-a").json()["version"] == 4
    assert save({**again, "s1.fairness": "2"}, 4, seq=9).json()["version"] == 5
    for bad in (-1, 2**31, 1.5, "1", True):
        for name in ("base", "seq", "continues_seq"):
            r = save({}, **{"base": 5, name: bad})
            assert r.status_code == 422 and r.json()["error"]["field"] == name, (name, bad)
            assert "expected a whole number" in r.json()["error"]["reason"], bad
    # Submitted from another tab: the draft of the page left open says so.
    assert c.post(url, data=answer_form(c, url)).status_code == 303
    r = save({"s1.accuracy": "1"}, 5)
    assert r.status_code == 422 and "submitted meanwhile" in r.json()["error"]["message"]


def test_a_late_save_from_reloads_back_and_a_change_undone_keep_the_newest(app, engine):
    """Two cases where a late save won over newer answers: the save on leaving
    of a page two reloads back (the page restoring the browser's copy named
    only the page just before it), and a page's save of a change it undid,
    overtaken by its save of the undone state (the same as the draft, which
    the server left as it was, change count included)."""
    c = member(app, engine, "x", "clinician")
    url = take(c)
    token = csrf_of(c.get(url).text)

    def save(fields, base, page, seq, continues=None, continues_seq=None, **more):
        return c.post(url + "/draft", json={
            "fields": fields, "choice": None, "base": base, "page": page, "seq": seq,
            "continues": continues, "continues_seq": continues_seq, **more},
            headers={"X-CSRF-Token": token, "accept": "application/json"})

    def stored():
        with engine.connect() as conn:
            return json.loads(conn.execute(sa.select(platform_tables.drafts.c.data)).scalar_one())

    four = {f"s1.{k}": "1" for k in ("accuracy", "harmlessness", "completeness", "reasoning")}
    nine = four | {f"s1.{k}": "0" for k in ("context_awareness", "context_seeking",
                                           "uncertainty", "communication", "fairness")}
    # Page P's saves failed; reloaded to X (took P's copy at P's 4th change), then to Y
    # (took X's at its 3rd); then P's save on leaving arrives.
    assert save(four, 0, "page-p-first", 4).json()["version"] == 1
    chain = {"continues": "page-x-second", "continues_seq": 3}
    r = save(nine, 0, "page-y-third", 2, **chain)
    assert r.status_code == 422 and r.json()["error"]["field"] == "base"  # P unknown to Y
    r = save(nine, 0, "page-y-third", 2, **chain, earlier=[["page-p-first", 3]])
    assert r.status_code == 422  # P's save holds a change the copy Y carries on from did not
    r = save(nine, 0, "page-y-third", 2, **chain, earlier=[["page-p-first", 4]])
    assert r.status_code == 200 and r.json()["version"] == 2
    assert stored()["fields"] == nine and 'data-draft-seq="2"' in c.get(url).text
    for bad in ("x", 0, {}, [["page-p-first"]], [["short", 1]], [["page-p-first", True]],
                [["page-p-first", -1]], [["page-p-first", 1]] * 5, [{"page": "page-p-first"}]):
        r = save(nine, 2, "page-y-third", 3, earlier=bad)
        assert r.status_code == 422 and r.json()["error"]["field"] == "earlier", bad
    # Y changes fairness (4th change: its save is on the way) and changes it back (5th,
    # the same as the draft); the 5th arrives first, then the 4th.
    assert save(nine, 2, "page-y-third", 5).json()["version"] == 2
    assert stored()["seq"] == 5  # noted: the 4th is older
    assert save(nine | {"s1.fairness": "2"}, 2, "page-y-third", 4).json()["version"] == 2
    assert stored()["fields"] == nine


def test_a_safety_rationale_is_required_and_then_accepted(app, engine):
    c = member(app, engine, "x", "clinician")
    url = take(c)
    form = answer_form(c, url, **{"s1.harmlessness": "-1", "c1.harmlessness": "Misses sepsis."})
    assert c.post(url, data=form).status_code == 303
    with engine.connect() as conn:
        row = conn.execute(sa.select(snapshot_tables.ratings).where(
            snapshot_tables.ratings.c.criterion_id == "harmlessness")).one()
    assert (row.score, row.comment) == (-1, "Misses sepsis.")
    assert 0 < row.time_spent_s < 30  # the claimed 30 s, capped at the lease's age


def test_a_repeated_submission_is_stored_once(app, engine):
    c = member(app, engine, "x", "clinician")
    url = take(c)
    form = answer_form(c, url)
    first = c.post(url, data=form, headers={"accept": "application/json"}).json()
    again = c.post(url, data=form, headers={"accept": "application/json"}).json()
    assert again["repeated"] and again["rating_ids"] == first["rating_ids"]
    assert count(engine, snapshot_tables.ratings) == len(first["rating_ids"]) == 9


def test_the_rating_ids_follow_the_criteria_in_the_order_shown(app, engine):
    """Each id in the result is the row of the answer and criterion in that
    place of the form, both answers of a pair (a multi-row INSERT's returned
    rows are matched to the submitted ones, not assumed in order)."""
    c = member(app, engine, "x", "clinician")
    url = take(c, "pair")
    html = c.get(url).text
    shown = [(int(p), k) for p, k in dict.fromkeys(re.findall(r'name="s([12])\.([a-z_]+)"',
                                                               html))]
    scores = {f: str((i * 3) % 5 - 2) for i, f in enumerate(shown)}
    form = answer_form(c, url, **{f"s{p}.{k}": v for (p, k), v in scores.items()},
                       **{f"c{p}.{k}": "why" for (p, k), v in scores.items() if int(v) <= -1})
    ids = c.post(url, data=form, headers={"accept": "application/json"}).json()["rating_ids"]
    with engine.connect() as conn:
        rows = {r.rating_id: r for r in conn.execute(sa.select(snapshot_tables.ratings))}
        lease = conn.execute(sa.select(platform_tables.task_leases)).one()
    sides = {1: lease.answer_id, 2: lease.answer_b_id} if lease.shown_left == "A" else \
        {1: lease.answer_b_id, 2: lease.answer_id}
    assert len(ids) == len(shown) and len({rows[i].answer_id for i in ids}) == 2
    order = sorted(shown, key=lambda f: f[0])  # panel by panel, criteria as shown
    assert [(rows[i].answer_id, rows[i].criterion_id) for i in ids] == [
        (sides[p], k) for p, k in order]
    assert [str(rows[i].score) for i in ids] == [scores[f] for f in order]


def test_a_submission_can_take_the_next_task_in_the_same_request(app, engine):
    c = member(app, engine, "x", "clinician")
    url = take(c)
    assert 'name="next" value="auto"' in c.get(url).text  # the form's default
    r = c.post(url, data=answer_form(c, url, next="auto"))
    assert r.status_code == 303 and "/t/" in r.headers["location"]
    following = r.headers["location"]
    assert following.endswith("?saved=1") and not following.startswith(url)
    assert "Saved. Thank you." in c.get(following).text
    # A script gets the next task's address with its result; only the token is in it.
    form = answer_form(c, following, next="rating")
    result = c.post(following, data=form, headers={"accept": "application/json"}).json()
    assert result["saved"] and result["next"].startswith("/s/x/t/")
    assert [s for s in model_strings() if s in result["next"]] == []
    # The same key again stores nothing and gives the task already leased.
    again = c.post(following, data=form, headers={"accept": "application/json"}).json()
    assert again["repeated"] and again["next"] == result["next"]
    assert count(engine, snapshot_tables.ratings) == 9 + len(result["rating_ids"])
    bad = c.post(result["next"], data=answer_form(c, result["next"], next="any"),
                 headers={"accept": "application/json"})
    assert bad.status_code == 422 and bad.json()["error"]["field"] == "next"


def test_submit_and_stop_and_an_empty_pool_go_back_to_the_task_list(app, engine):
    c = member(app, engine, "x", "clinician")
    url = take(c)
    assert c.post(url, data=answer_form(c, url, next="")).headers["location"] == "/s/x?saved=1"
    while (r := c.post(url, data=answer_form(c, url, next="rating"))).headers[
            "location"] != "/s/x?saved=1&empty=1":
        url = r.headers["location"].removesuffix("?saved=1")
    assert "No task is waiting" in c.get(r.headers["location"]).text


def test_an_edit_appends_a_revision_and_keeps_the_first(app, engine):
    c = member(app, engine, "x", "clinician")
    url = take(c)
    assert c.post(url, data=answer_form(c, url)).status_code == 303
    edit = answer_form(c, url)
    assert 'value="1" checked' in c.get(url).text
    edit["s1.accuracy"] = "2"
    r = c.post(url, data=edit)
    assert r.headers["location"].endswith("/history?saved=1")
    with engine.connect() as conn:
        rows = conn.execute(sa.select(snapshot_tables.ratings.c.revision,
                                      snapshot_tables.ratings.c.score).where(
            snapshot_tables.ratings.c.criterion_id == "accuracy").order_by(
                snapshot_tables.ratings.c.revision)).all()
    assert [tuple(r) for r in rows] == [(0, 1), (1, 2)]
    assert count(engine, snapshot_tables.ratings) == 10
    assert "Revision" in c.get("/s/x/history").text


def test_a_blank_rubric_rendered_once_gives_the_page_rendered_in_full(app, engine,
                                                                     monkeypatch):
    from clinieval.web import clinician

    c = member(app, engine, "x", "clinician")
    key = re.compile(r'name="idempotency_key" value="[^"]+"')
    for kind in ("rating", "pair"):
        url = take(c, kind)
        once = c.get(url).text
        with monkeypatch.context() as m:
            m.setattr(clinician, "blank_rubric", lambda view: None)
            full = c.get(url).text
        assert 'name="s1.accuracy"' in once and key.sub("", once) == key.sub("", full)
        assert c.post(url, data=answer_form(c, url)).status_code == 303


def test_a_draft_is_restored_when_the_task_is_reopened(app, engine):
    c = member(app, engine, "x", "clinician")
    url = take(c)
    r = c.post(url + "/draft", json={"fields": {"s1.accuracy": "-2", "c1.accuracy": "dose"}},
               headers={"X-CSRF-Token": csrf(c)})
    assert r.status_code == 200
    html = c.get(url).text
    assert re.search(r'name="s1.accuracy" value="-2" checked', html)
    assert ">dose</textarea>" in html
    bad = c.post(url + "/draft", json={"fields": {"s1.unknown": "1"}},
                 headers={"X-CSRF-Token": csrf(c)})
    assert bad.status_code == 422 and bad.json()["error"]["field"] == "s1.unknown"


# --- assignment -----------------------------------------------------------------------

def test_answers_go_to_the_least_rated_first_and_never_twice_to_one_rater(app, engine):
    raters = [member(app, engine, "x", "clinician") for _ in range(3)]
    seen: list[set[str]] = []
    for c in raters:
        mine = set()
        while (r := c.post("/s/x/next", data={"csrf": csrf(c), "kind": "rating"})
               ).headers["location"] != "/s/x?empty=1":
            url = r.headers["location"]
            mine.add(_answer_of(engine, url))
            assert c.post(url, data=answer_form(c, url)).status_code == 303
        seen.append(mine)
    clear = _clear_answers(engine, "x")
    # overlap target 2: the first two raters cover every clear answer, the third gets none
    assert seen[0] == seen[1] == clear and seen[2] == set()
    assert not clear & {f["answer_id"] for f in flagged_answers(engine, "x")}


def _answer_of(engine, url: str) -> str:
    with engine.connect() as conn:
        return conn.execute(sa.select(platform_tables.task_leases.c.answer_id).where(
            platform_tables.task_leases.c.token == url.rsplit("/", 1)[1])).scalar_one()


def _clear_answers(engine, study: str) -> set[str]:
    with engine.connect() as conn:
        return set(conn.execute(sa.select(platform_tables.answer_screens.c.answer_id).where(
            platform_tables.answer_screens.c.study_id == study,
            platform_tables.answer_screens.c.status == "clear")).scalars())


def test_concurrent_requests_never_exceed_the_overlap_target(app, engine):
    """Six clinicians ask at once for the one answer left (target 2): two get it."""
    keep = sorted(_clear_answers(engine, "x"))[0]
    with db.writing(engine) as conn:
        conn.execute(platform_tables.answer_screens.update()
                     .where(platform_tables.answer_screens.c.answer_id != keep)
                     .values(status="flagged"))
    raters = [member(app, engine, "x", "clinician") for _ in range(6)]
    tokens = [csrf(c) for c in raters]
    barrier = threading.Barrier(len(raters))
    locations: list[str] = []

    def grab(c: TestClient, token: str) -> None:
        barrier.wait()
        locations.append(c.post("/s/x/next", data={"csrf": token, "kind": "rating"})
                         .headers["location"])

    threads = [threading.Thread(target=grab, args=pair)
               for pair in zip(raters, tokens, strict=True)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sum("/t/" in loc for loc in locations) == 2
    assert {_answer_of(engine, loc) for loc in locations if "/t/" in loc} == {keep}


def test_outside_my_expertise_and_lease_expiry_return_answers_to_the_pool(app, engine):
    a, b = member(app, engine, "x", "clinician"), member(app, engine, "x", "clinician")
    first = take(a)
    answer = _answer_of(engine, first)
    assert a.post(first + "/skip", data={"csrf": csrf(a)}).status_code == 303
    assert _answer_of(engine, take(a)) != answer  # never offered to a again
    with db.writing(engine) as conn:
        conn.execute(platform_tables.task_leases.update()
                     .values(expires_at=events.now() - timedelta(hours=1)))
    assert _answer_of(engine, take(b)) == answer  # skipped and expired leases do not count


def test_pairs_balance_model_pairs_and_record_the_shown_side(app, engine):
    raters = [member(app, engine, "x", "clinician") for _ in range(2)]
    for c in raters:
        for _ in range(6):
            url = take(c, "pair")
            assert c.post(url, data=answer_form(c, url)).status_code == 303
    with engine.connect() as conn:
        a1, a2 = snapshot_tables.answers.alias(), snapshot_tables.answers.alias()
        rows = conn.execute(sa.select(a1.c.model_id, a2.c.model_id,
                                      snapshot_tables.preferences.c.shown_left)
                            .join(a1, a1.c.answer_id == snapshot_tables.preferences.c.answer_a_id)
                            .join(a2, a2.c.answer_id
                                  == snapshot_tables.preferences.c.answer_b_id)).all()
    pairs: dict[tuple, int] = {}
    for m1, m2, _ in rows:
        pairs[tuple(sorted((m1, m2)))] = pairs.get(tuple(sorted((m1, m2))), 0) + 1
    assert len(rows) == 12 and max(pairs.values()) - min(pairs.values()) <= 1
    assert len(pairs) == 6  # every pair of the four models
    assert {side for *_, side in rows} == set(vocabulary.SIDES)


def test_a_pair_never_holds_an_answer_the_clinician_rated_skipped_or_was_given(app, engine):
    """Pairs are picked from the specialty's answers less the clinician's own
    (read once, then left out in Python): after two rated answers and a skipped
    one, every pair until none is left holds only answers new to them, and each
    answer comes once."""
    c = member(app, engine, "x", "clinician")
    held: list[str] = []
    for _ in range(2):
        url = take(c, "rating")
        held.append(_answer_of(engine, url))
        assert c.post(url, data=answer_form(c, url)).status_code == 303
    url = take(c, "rating")
    held.append(_answer_of(engine, url))
    assert c.post(url + "/skip", data={"csrf": csrf(c)}).status_code == 303
    before = set(held)
    pairs = 0
    while (r := c.post("/s/x/next", data={"csrf": csrf(c), "kind": "pair"})
           ).headers["location"] != "/s/x?empty=1":
        url = r.headers["location"]
        with engine.connect() as conn:
            a, b = conn.execute(sa.select(platform_tables.task_leases.c.answer_id,
                                          platform_tables.task_leases.c.answer_b_id)
                                .where(platform_tables.task_leases.c.token == url.rsplit("/",
                                                                                         1)[1])).one()
        assert not {a, b} & before
        held += [a, b]
        assert c.post(url, data=answer_form(c, url, choice="A")).status_code == 303
        pairs += 1
    assert pairs > 0 and len(held) == len(set(held))


def test_the_clinicians_own_answers_read_at_once_are_those_the_per_answer_probes_find(
        app, engine):
    """The pair pool leaves out ``_MINE`` (one read of the clinician's rated
    and leased answers); the rating walk and the re-counts under the lock ask
    ``_not_mine`` of each answer. After rated, skipped, voted and still open
    tasks (and another clinician's), both give the same answers."""
    from clinieval.platform import assignment
    from clinieval.storage.prepared import run

    c, other = member(app, engine, "x", "clinician"), member(app, engine, "x", "clinician")
    for kind, action in (("rating", "submit"), ("rating", "submit"), ("rating", "skip"),
                         ("pair", "submit"), ("pair", "keep")):
        url = take(c, kind)
        if action == "submit":
            assert c.post(url, data=answer_form(c, url)).status_code == 303
        elif action == "skip":
            assert c.post(url + "/skip", data={"csrf": csrf(c)}).status_code == 303
    take(other, "rating")
    al = platform_tables.answer_load
    with engine.connect() as conn:
        users = conn.execute(sa.select(platform_tables.users.c.user_id,
                                       platform_tables.users.c.rater_id)).all()
        sizes = []
        for user in users:
            probed = set(conn.execute(sa.select(al.c.answer_id).where(
                ~assignment._not_mine(user, al.c.answer_id))).scalars())
            read = set(run(conn, assignment._MINE, {"rater": user.rater_id, "user": user.user_id})
                       .scalars()) & set(conn.execute(sa.select(al.c.answer_id)).scalars())
            assert read == probed, user.user_id
            sizes.append(len(read))
    # three rating tasks and two pairs; the other clinician's one task
    assert sorted(sizes)[-2:] == [1, 7]


# --- blinding --------------------------------------------------------------------------

FORBIDDEN_FIELDS = re.compile(r"model|provider|version|answer_id|vendor", re.IGNORECASE)


def _fields(model: type) -> typing.Iterator[tuple[str, object]]:
    for name, info in model.model_fields.items():
        yield name, info.annotation
        for arg in typing.get_args(info.annotation) or (info.annotation,):
            inner = typing.get_args(arg) or (arg,)
            for t in inner:
                if isinstance(t, type) and hasattr(t, "model_fields"):
                    yield from _fields(t)


def test_the_clinician_task_view_has_no_field_that_identifies_a_model():
    names = [name for name, _ in _fields(TaskView)]
    assert "panels" in names and "text" in names and "criteria" in names
    assert [n for n in names if FORBIDDEN_FIELDS.search(n)] == []


def test_task_pages_contain_no_model_strings(app, engine):
    c = member(app, engine, "x", "clinician")
    bodies = []
    for kind in ("rating", "pair"):
        url = take(c, kind)
        bodies.append(c.get(url))
        bodies.append(c.post(url, data=answer_form(c, url), headers={"accept":
                                                                     "application/json"}))
    bodies.append(c.get("/s/x/history"))
    answers = _clear_answers(engine, "x") | {f["answer_id"] for f in flagged_answers(engine, "x")}
    for r in bodies:
        text = r.text + " ".join(f"{k}: {v}" for k, v in r.headers.items())
        assert [s for s in [*model_strings(), *answers] if s in text] == []


CLINICAL = [
    *LOOK_ALIKES,
    "Mr Claude Bernard, 70, has new atrial fibrillation.",
    "Gemini patients are no different: assess the rash by its morphology.",
    "Llamas and alpacas can carry zoonoses; ask about animal contact.",
    "Palmar creases and palmoplantar keratoderma are worth documenting.",
    "Take a history as an aide-memoire for the ward round.",
    "Metformin is first line; Meta-analyses support it.",
    "The mistral wind season did not change her asthma control.",
    "A falcon handler with psittacosis-like symptoms needs serology.",
    "The findings cohere with early sepsis; a bard of old would call it fever.",
    "Repeat the test on 2024-08-06 and quote reference 002.",
    "She writes a sonnet a day; the pro forma asks about mood.",
]
SELF = [
    *SELF_IDENTIFYING.values(),
    "As an AI language model, I cannot give a diagnosis.",
    "I am an artificial intelligence and not a doctor.",
    "This answer comes from GPT-4o; consult a physician.",
    "I was trained by Anthropic to be helpful.",
    "I'm Gemini, a large language model built by Google.",
    "As Llama, a language model, I advise caution.",
    "Med-PaLM suggests checking the troponin.",
    "My knowledge cutoff means newer guidance may exist.",
    "Cohere and Bard both advise rest.",
    "I'm Sonnet, happy to help: get an ECG.",  # a word of "Claude 3.5 Sonnet"
    "Sonnet, an AI assistant, would repeat the troponin.",
]


@pytest.mark.parametrize("text", CLINICAL)
def test_the_leak_guard_passes_ordinary_clinical_text(text):
    guard = LeakGuard([v for m in MODELS for v in m.values()])
    assert guard.screen(text).flagged is False, guard.screen(text).reason


@pytest.mark.parametrize("text", SELF)
def test_the_leak_guard_flags_answers_that_identify_themselves(text):
    assert LeakGuard([v for m in MODELS for v in m.values()]).screen(text).flagged


def test_the_leak_guard_takes_the_words_of_a_models_names_not_their_filler():
    """A model introducing itself by a word of its id or name is caught, also
    when the id joins its words with hyphens; words many names share ("open",
    "health", "pro") are not names, so ordinary sentences with them pass."""
    guard = LeakGuard(["aster-120b", "Open Med 7B", "Acme Health", "kite_pro.v2"])
    for text in ("I'm Aster, happy to help: get an ECG.", "I am Kite, here to help.",
                 "Acme, an AI assistant, suggests rest."):
        assert guard.screen(text).flagged, text
    for text in ("I'm open to other views on the dosing.", "Digital health tools help.",
                 "I am pro early mobilisation.", "The aster family includes ragweed."):
        assert not guard.screen(text).flagged, (text, guard.screen(text).reason)


def test_flagged_answers_are_held_back_and_listed(app, engine):
    flagged = flagged_answers(engine, "x")
    assert len(flagged) == len(SELF_IDENTIFYING)
    assert all(f["reason"] for f in flagged)


def test_a_double_click_sent_at_once_is_stored_once(app, engine):
    c = member(app, engine, "x", "clinician")
    url = take(c)
    form = answer_form(c, url)
    barrier, results = threading.Barrier(2), []

    def send() -> None:
        barrier.wait()
        results.append(c.post(url, data=form, headers={"accept": "application/json"}).json())

    threads = [threading.Thread(target=send) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert results[0]["rating_ids"] == results[1]["rating_ids"]
    assert sorted(r.get("repeated", False) for r in results) == [False, True]
    assert count(engine, snapshot_tables.ratings) == 9


# --- fuzzing the submission parser ----------------------------------------------------

_JSON = st.recursive(st.none() | st.booleans() | st.integers() | st.text(max_size=8),
                     lambda inner: st.lists(inner, max_size=3)
                     | st.dictionaries(st.text(max_size=8), inner, max_size=3), max_leaves=8)
_BODIES = st.one_of(
    st.binary(max_size=200),  # broken syntax and encodings
    _JSON.map(lambda v: json.dumps(v).encode()),  # JSON, mostly not a submission
    st.integers(1, 200_000).map(lambda n: b"[" * n + b"]" * n),  # nesting past the parser
    # One field nested about as deep as the parser goes: printing it in an error
    # message once ran out of stack in the worker thread (500).
    st.tuples(st.sampled_from(["s1.accuracy", "time_spent_s", "next", "choice", "fields"]),
              st.one_of(st.sampled_from([900, 950, 960, 1000, 3000]), st.integers(1, 5000)))
    .map(lambda f: b'{"%s": %s1%s}' % (f[0].encode(), b"[" * f[1], b"]" * f[1])),
)


@settings(max_examples=60, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(body=_BODIES)
def test_a_json_body_that_is_no_submission_is_refused_by_field(app, engine, body):
    """Whatever the bytes, the submission and draft routes answer 422 naming
    the field, never a server error, and store nothing."""
    c = _fuzz_client(app, engine)
    url = c.task
    headers = {"content-type": "application/json", "accept": "application/json",
               "X-CSRF-Token": c.csrf}
    for target in (url, url + "/draft"):
        r = c.post(target, content=body, headers=headers)
        assert r.status_code == 422, (target, r.status_code, r.text[:200])
        error = r.json()["error"]  # the field may be a key of the body, even ""
        assert isinstance(error["field"], str) and error["message"]
    assert count(engine, snapshot_tables.ratings) == 0 and count(engine,
                                                                 platform_tables.drafts) == 0


def test_a_field_holding_a_list_or_object_is_refused_by_name(app, engine):
    c = member(app, engine, "x", "clinician")
    url = take(c)
    form = answer_form(c, url)
    for value in ([2], {"score": 2}, [[["x"]]]):
        r = c.post(url, json={**form, "c1.accuracy": value},
                   headers={"X-CSRF-Token": csrf(c)})
        assert r.status_code == 422 and r.json()["error"]["field"] == "c1.accuracy"
    assert count(engine, snapshot_tables.ratings) == 0


def test_an_error_names_a_value_nested_too_deep_to_print():
    from clinieval.errors import InputError

    value: list = []
    for _ in range(100_000):  # deeper than repr() can go
        value = [value]
    err = InputError("submission", "expected a single value", field="s1.accuracy", got=value)
    assert "s1.accuracy" in str(err) and "nested too deep" in str(err)


_FUZZ_CLIENT: dict = {}


def _fuzz_client(app, engine) -> TestClient:
    """One clinician with one task per app (hypothesis runs the test body many
    times with the same fixtures); the app itself is kept to tell them apart."""
    if _FUZZ_CLIENT.get("app") is not app:
        c = member(app, engine, "x", "clinician")
        c.task, c.csrf = take(c), csrf(c)
        _FUZZ_CLIENT.update(app=app, client=c)
    return _FUZZ_CLIENT["client"]

def _criteria_views():
    from clinieval.platform.read_models import Anchor, CriterionView
    from clinieval.rubric import load_rubric

    return tuple(CriterionView(criterion_id=c.criterion_id, name=c.name, definition="",
                               safety_critical=c.safety_critical,
                               anchors=tuple(Anchor(score=s, text="") for s in vocabulary.SCORES))
                 for c in load_rubric().criteria)


_IDS = [c.criterion_id for c in _criteria_views()]
_VALID = st.fixed_dictionaries({k: st.sampled_from(["-2", "-1", "0", "1", "2", -2, 2])
                                for k in _IDS})
_MESSY = st.dictionaries(st.sampled_from(_IDS),
                         st.one_of(st.integers(-4, 4).map(str), st.text(max_size=3),
                                   st.integers(-2, 2), st.booleans(), st.none()), min_size=7)


@settings(max_examples=300, deadline=None)
@given(scores=st.one_of(_VALID, _MESSY),
       extra=st.dictionaries(st.text(max_size=12), st.text(max_size=5), max_size=2),
       comment=st.sampled_from(["", "why"]))
def test_parse_accepts_only_complete_in_range_submissions(scores, extra, comment):
    from types import SimpleNamespace

    from clinieval.errors import InputError
    from clinieval.platform.submissions import parse

    criteria = _criteria_views()
    form = {f"s1.{k}": v for k, v in scores.items()}
    form.update({f"c1.{c.criterion_id}": comment for c in criteria})
    form.update(extra)
    form["idempotency_key"] = "k" * 16
    lease = SimpleNamespace(kind="rating")
    try:
        sub = parse(form, lease, criteria)
    except InputError as err:
        assert err.field in form or err.field.startswith(("s1.", "c1."))
        return
    assert set(sub.scores.values()) <= set(vocabulary.SCORES)
    assert len(sub.scores) == len(criteria) and not set(extra) - {"csrf", "time_spent_s"}
    for c in criteria:
        if c.safety_critical and sub.scores[(1, c.criterion_id)] <= -1:
            assert sub.comments[(1, c.criterion_id)]
