"""Signing in and staying signed in over HTTP, on SQLite and PostgreSQL: CSRF
tokens, sessions and their cookies, invitations, the sign-in rate limit,
password hashes and one-time sign-in links."""

from __future__ import annotations

import pytest
import sqlalchemy as sa
from fastapi.testclient import TestClient

from clinieval.platform import accounts
from clinieval.platform.demo import DEMO_STUDY, setup_demo
from clinieval.storage.schema import platform as platform_tables
from clinieval.storage.schema import snapshot as snapshot_tables
from clinieval.web.app import create_app
from clinieval.web.testing import csrf_of, register_via_http
from clinieval.web.testing import http_client as client
from clinieval.web.testing import member_client as member
from tests.web.support import answer_form, count, csrf, take

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")


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
                            .where(snapshot_tables.studies.c.study_id == "x")).scalar_one()
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


@pytest.mark.argon2_cost
def test_passwords_are_stored_as_argon2_hashes(app, engine):
    """At the product's cost: argon2id, 64 MiB, three passes, four lanes (RFC
    9106's second recommended option); the other tests hash more cheaply."""
    register_via_http(client(app), engine, "x", "clinician")
    with engine.connect() as conn:
        stored = conn.execute(sa.select(platform_tables.users.c.password_hash)).scalar_one()
    assert stored.startswith("$argon2id$v=19$m=65536,t=3,p=4$") and "correct horse" not in stored


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
