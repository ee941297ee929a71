"""Sign-in failures are throttled per address and client with growing delays,
not locked out for everyone: before, five wrong passwords from anyone kept the
address's owner out for 15 minutes. Each client is a TestClient with its own
peer address (the server's idea of the client; a forwarded header is trusted
only from a proxy uvicorn trusts)."""

from __future__ import annotations

import json
from datetime import timedelta

import sqlalchemy as sa
from starlette.testclient import TestClient

from clinieval.platform import accounts
from clinieval.storage.schema import platform as platform_tables
from clinieval.web.testing import csrf_of, register_via_http

PASSWORD = "correct horse battery"  # register_via_http's


def from_address(app, host: str) -> TestClient:
    return TestClient(app, follow_redirects=False, client=(host, 40000))


def sign_in(c: TestClient, email: str, password: str):
    token = csrf_of(c.get("/login").text)
    return c.post("/login", data={"csrf": token, "email": email, "password": password})


def earlier(engine, seconds: float) -> None:
    """Move every event back in time, as if the clock had run on."""
    events = platform_tables.audit_events
    with engine.begin() as conn:
        for event_id, at in conn.execute(sa.select(events.c.event_id, events.c.at)).all():
            conn.execute(events.update().where(events.c.event_id == event_id)
                         .values(at=at - timedelta(seconds=seconds)))


def test_an_attackers_failures_do_not_stop_the_owner_from_another_client(app, engine):
    email = register_via_http(from_address(app, "198.51.100.7"), engine, "x", "clinician")
    attacker = from_address(app, "203.0.113.5")
    statuses = [sign_in(attacker, email, f"guess {i}").status_code
                for i in range(accounts.LOGIN_MAX_FAILURES + 1)]
    assert statuses == [401] * accounts.LOGIN_MAX_FAILURES + [429]
    assert sign_in(attacker, email, PASSWORD).status_code == 429  # its guessing stays bounded
    owner = from_address(app, "198.51.100.7")
    assert sign_in(owner, email, PASSWORD).status_code == 303
    assert sign_in(from_address(app, "192.0.2.1"), email, PASSWORD).status_code == 303


def test_the_delays_grow_with_each_failure_beyond_the_limit(app, engine):
    email = register_via_http(from_address(app, "198.51.100.7"), engine, "x", "clinician")
    attacker = from_address(app, "203.0.113.5")
    for i in range(accounts.LOGIN_MAX_FAILURES):
        assert sign_in(attacker, email, f"guess {i}").status_code == 401
    assert "1 minute(s)" in sign_in(attacker, email, "too soon").text
    earlier(engine, accounts.LOGIN_DELAY.total_seconds() + 1)
    assert sign_in(attacker, email, "after the first delay").status_code == 401
    refused = sign_in(attacker, email, "too soon")
    assert refused.status_code == 429 and "2 minute(s)" in refused.text  # doubled
    earlier(engine, accounts.LOGIN_DELAY.total_seconds() + 1)
    assert sign_in(attacker, email, "still too soon").status_code == 429


def test_throttling_is_logged_with_the_limit_and_the_client(app, engine):
    email = register_via_http(from_address(app, "198.51.100.7"), engine, "x", "clinician")
    attacker = from_address(app, "203.0.113.5")
    for i in range(accounts.LOGIN_MAX_FAILURES + 1):
        sign_in(attacker, email, f"guess {i}")
    events = platform_tables.audit_events
    with engine.connect() as conn:
        logged = conn.execute(sa.select(events.c.subject, events.c.client, events.c.detail)
                              .where(events.c.kind == "login_throttled")).all()
    assert [(s, c) for s, c, _ in logged] == [(email, "203.0.113.5")]
    detail = json.loads(logged[0].detail)
    assert detail["limit"] == "address and client"
    assert detail["failures"] == accounts.LOGIN_MAX_FAILURES and detail["wait_seconds"] > 0


def test_guesses_from_many_clients_slow_the_address_but_not_its_sign_in_link(
        app, engine, monkeypatch):
    monkeypatch.setattr(accounts, "LOGIN_ADDRESS_FAILURES", 4)
    email = register_via_http(from_address(app, "198.51.100.7"), engine, "x", "clinician")
    for i in range(4):
        assert sign_in(from_address(app, f"203.0.113.{i}"), email, "guess").status_code == 401
    owner = from_address(app, "198.51.100.7")
    assert sign_in(owner, email, PASSWORD).status_code == 429
    with engine.connect() as conn:
        user_id = conn.execute(sa.select(platform_tables.users.c.user_id)
                               .where(platform_tables.users.c.email == email)).scalar_one()
    link = accounts.create_signin_link(engine, user_id)
    token = csrf_of(owner.get(f"/signin/{link}").text)
    signed_in = owner.post(f"/signin/{link}", data={"csrf": token})
    assert signed_in.status_code == 303 and owner.get("/studies").status_code == 200


def test_one_client_spraying_many_addresses_is_slowed(app, engine, monkeypatch):
    monkeypatch.setattr(accounts, "LOGIN_CLIENT_FAILURES", 3)
    sprayer = from_address(app, "203.0.113.9")
    for i in range(3):
        assert sign_in(sprayer, f"someone{i}@example.org", "Winter2026!").status_code == 401
    assert sign_in(sprayer, "someone9@example.org", "Winter2026!").status_code == 429
