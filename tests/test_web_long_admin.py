"""An admin's long operations (the full report, an export, adding cases)
do not hold up clinicians: while one runs, a clinician's request is served.

The app is served by uvicorn on one event loop in a thread of this process,
so that the long operation can be held at a known point (it waits for an
event) while a clinician asks for a page over real HTTP. Before the report,
the export and reading an upload ran in a thread of their own (and, on
PostgreSQL, adding cases in a database worker), they ran on the event loop
and the clinician's request waited for them to end. The held operation waits
before it starts its work: these tests show where it runs, not what two of
them do side by side (a test here does that for reports). On PostgreSQL every
admin page, API call and clinician page goes through blocking() (a worker
thread): the tests at the end hold one such call each.
"""

from __future__ import annotations

import gc
import io
import socket
import threading
import time
import zipfile
from collections.abc import Iterator
from contextlib import contextmanager

import httpx
import pytest
import uvicorn

from clinieval.platform import (
    accounts,
    events,
    membership,
    screening,
    studies,
    study_export,
    uploads,
)
from clinieval.web import admin, api, clinician
from clinieval.web.kernel import SESSION_COOKIE
from clinieval.web.testing import (
    SPECIALTIES,
    csrf_of,
    http_client,
    member_client,
    register_via_http,
)
from tests.test_web_admin import user_id

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")

HELD_FOR = 30.0
"""Longest the held operation waits (the test releases it far sooner)."""


@contextmanager
def serving(app) -> Iterator[str]:
    """``app`` served over HTTP by uvicorn on one event loop in a thread."""
    sock = socket.socket()  # bound here: no other test takes the port meanwhile
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started:
        assert thread.is_alive() and time.monotonic() < deadline, "server did not start"
        time.sleep(0.02)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(30)
        # The app's startup freezes the objects alive then out of cyclic collection
        # (right for a server process); this test process goes on to other tests.
        gc.unfreeze()
    assert not thread.is_alive(), "the server did not stop"


class Held:
    """Wraps a function so that each call waits, once started, until released."""

    def __init__(self, fn) -> None:
        self.fn, self.started, self.release = fn, threading.Event(), threading.Event()

    def __call__(self, *args, **kwargs):
        self.started.set()
        self.release.wait(HELD_FOR)
        return self.fn(*args, **kwargs)


def _admin_token(engine, email: str) -> str:
    return membership.create_token(engine, user_id(engine, email), "x", "admin", "held")


def _session(client) -> dict[str, str]:
    return {"Cookie": f"{SESSION_COOKIE}={client.cookies[SESSION_COOKIE]}"}


def _served_while_held(app, engine, monkeypatch, module, name: str, path: str,
                       files: dict | None = None, *, fields: dict | None = None,
                       anonymous: bool = False, expected: int = 200, method: str = "POST",
                       api: bool = False, role: str = "admin", probe: str = "/s/x",
                       csrf_from: str | None = None) -> None:
    """Hold ``module.name`` once it is called by a request to ``path`` (an
    admin's or ``role``'s, with ``api`` through an admin API token, with
    ``anonymous`` a visitor's), and meanwhile get a clinician's page ``probe``."""
    admin_client = http_client(app)
    email = register_via_http(admin_client, engine, "x", role)
    clinician = member_client(app, engine, "x", "clinician")
    bearer = _admin_token(engine, email) if api else None  # before the hold (create_token)
    held = Held(getattr(module, name))
    monkeypatch.setattr(module, name, held)
    with serving(app) as base, httpx.Client(base_url=base) as poster:
        form: dict[str, object] = dict(fields or {})
        if bearer:
            poster.headers["Authorization"] = "Bearer " + bearer
        elif anonymous:  # the visitor's pre-session cookie and its CSRF token
            if method == "POST":
                form["csrf"] = csrf_of(poster.get(csrf_from or path).text)
        else:
            poster.headers.update(_session(admin_client))
            if method == "POST":
                form["csrf"] = csrf_of(poster.get(csrf_from or "/studies").text)
        outcome: dict[str, object] = {}

        def long_operation() -> None:
            if method == "GET":
                r = poster.get(path, timeout=HELD_FOR + 30)
            elif api:
                r = poster.post(path, json=fields or {}, timeout=HELD_FOR + 30)
            else:
                r = poster.post(path, data=form, files=files, timeout=HELD_FOR + 30)
            outcome["post"] = r.status_code, r.text[-3000:]

        worker = threading.Thread(target=long_operation)
        worker.start()
        try:
            assert held.started.wait(20), "the held operation did not start"
            # The operation is now held mid-way; a clinician asks for their task list.
            answered = httpx.get(f"{base}{probe}", headers=_session(clinician), timeout=10)
            assert answered.status_code == 200
            assert not held.release.is_set() and worker.is_alive()
        finally:
            held.release.set()
            worker.join(HELD_FOR + 30)
        status, text = outcome.get("post", (None, "the request failed"))
        assert status == expected, text


def test_a_clinician_is_served_while_the_full_report_runs(app, engine, monkeypatch):
    _served_while_held(app, engine, monkeypatch, admin, "full_report", "/s/x/admin/report")


def test_a_clinician_is_served_while_an_export_is_made(app, engine, monkeypatch):
    _served_while_held(app, engine, monkeypatch, study_export, "export_zip", "/s/x/admin/export")


def _more_cases() -> dict:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as zf:
        zf.writestr("src/cases.csv", "case_id,prompt,specialty\n"
                                     "more-c1,A pruritic rash: what next?,Pathology\n")
        zf.writestr("src/answers.csv", "answer_id,case_id,model_id,text\nmore-a1,more-c1,"
                                       "claude-3-5-sonnet-20240620,Start a topical steroid.\n")
    return {"source": ("src.zip", buffer.getvalue(), "application/zip")}


def test_a_clinician_is_served_while_an_upload_of_cases_is_read(app, engine, monkeypatch):
    _served_while_held(app, engine, monkeypatch, uploads, "read_upload", "/s/x/admin/cases",
                       files=_more_cases())


def test_a_clinician_is_served_while_cases_are_written_on_postgresql(app, engine, monkeypatch):
    """On PostgreSQL the write runs in a database worker thread. On SQLite it
    runs on the event loop, as every SQLite write does: a clinician's request
    waits for its transaction (the upload was read beside them, above)."""
    if engine.dialect.name != "postgresql":
        pytest.skip("SQLite writes run on the event loop (a known limitation)")
    _served_while_held(app, engine, monkeypatch, studies, "add_cases_by", "/s/x/admin/cases",
                       files=_more_cases())


def test_reports_asked_for_at_once_are_made_one_at_a_time(app, engine, monkeypatch):
    """Three admins' reports at once all arrive, made one after the other: in
    threads side by side, a fork for the figures could copy matplotlib's lock
    held by another report's thread and hang for ever."""
    from clinieval.report import render

    clients = [member_client(app, engine, "x", "admin") for _ in range(3)]
    original, active, most = render.render_report, [0], [0]
    lock = threading.Lock()

    def counted(*args, **kwargs):
        with lock:
            active[0] += 1
            most[0] = max(most[0], active[0])
        try:
            time.sleep(0.3)  # long enough for the other requests to arrive meanwhile
            return original(*args, **kwargs)
        finally:
            with lock:
                active[0] -= 1

    monkeypatch.setattr(render, "render_report", counted)
    with serving(app) as base:
        asks = []
        for c in clients:
            headers = _session(c)
            csrf = csrf_of(httpx.get(f"{base}/s/x/progress", headers=headers).text)
            asks.append((headers, csrf))
        statuses: list[int] = []

        def ask(headers: dict, csrf: str) -> None:
            statuses.append(httpx.post(f"{base}/s/x/admin/report", headers=headers,
                                       data={"csrf": csrf}, timeout=120).status_code)

        threads = [threading.Thread(target=ask, args=a) for a in asks]
        for t in threads:
            t.start()
        for t in threads:
            t.join(150)
    assert statuses == [200, 200, 200]
    assert most[0] == 1


def test_a_clinician_is_served_while_a_password_is_checked(app, engine, monkeypatch):
    """argon2 takes about 0.1 s a sign-in; on the event loop it held up everyone."""
    _served_while_held(app, engine, monkeypatch, accounts, "_verify", "/login",
                       fields={"email": "nobody@example.org", "password": "not the password"},
                       anonymous=True, expected=401)


def test_a_clinician_is_served_while_a_new_password_is_hashed(app, engine, monkeypatch):
    token = accounts.create_invitation(engine, "x", "clinician")
    password = "correct horse battery"
    _served_while_held(app, engine, monkeypatch, accounts, "hash_password", f"/invite/{token}",
                       fields={"email": "new@example.org", "password": password,
                               "password2": password}, anonymous=True, expected=303)


# Every other admin page and action, the API's token check and signing out make a few
# database calls each: on PostgreSQL they go through blocking() (a worker
# thread), so a clinician is served while one waits. (On SQLite blocking()
# calls them in place; the tests above hold work that runs in a thread there.)
_ADMIN_CALLS = [
    # (module, function held, method, path, form or JSON fields, status, API token)
    (membership, "members", "GET", "/s/x/admin/people", None, 200, False),
    (studies, "content_counts", "GET", "/s/x/admin/content", None, 200, False),
    (screening, "flagged_queue", "GET", "/s/x/admin/flagged", None, 200, False),
    (events, "audit_log", "GET", "/s/x/admin/log", None, 200, False),
    (membership, "revoke", "POST", "/s/x/admin/revoke", {"rater_id": "nobody"}, 422, False),
    (membership, "create_token", "POST", "/s/x/admin/tokens", {"role": "viewer", "label": "t"},
     200, False),
    (membership, "revoke_token", "POST", "/s/x/admin/tokens/revoke", {"token_id": "nope"}, 422,
     False),
    (screening, "decide", "POST", "/s/x/admin/flagged",
     {"answer_id": "nope", "decision": "release", "confirm": "yes"}, 422, False),
    (api, "_grant", "GET", "/api/studies/x/progress", None, 200, True),
    (membership, "members", "GET", "/api/studies/x/members", None, 200, True),
    (screening, "flagged_queue", "GET", "/api/studies/x/flagged", None, 200, True),
    (events, "audit_log", "GET", "/api/studies/x/log", None, 200, True),
    (membership, "create_token", "POST", "/api/studies/x/tokens", {"role": "viewer"}, 201, True),
    (accounts, "sign_out", "POST", "/logout", None, 303, False),
    (studies, "may_create_studies", "GET", "/admin/new", None, 200, False),
    (membership, "revoke", "POST", "/api/studies/x/members/nobody/revoke", None, 422, True),
    (membership, "revoke_token", "POST", "/api/studies/x/tokens/nope/revoke", None, 422, True),
]


@pytest.mark.parametrize(("module", "name", "method", "path", "fields", "expected", "api"),
                         _ADMIN_CALLS, ids=[f"{c[2]} {c[3]}" for c in _ADMIN_CALLS])
def test_a_clinician_is_served_while_an_admin_call_waits_on_postgresql(
        app, engine, monkeypatch, module, name, method, path, fields, expected, api):
    if engine.dialect.name != "postgresql":
        pytest.skip("on SQLite these calls run in place (in-process work, no round trips)")
    _served_while_held(app, engine, monkeypatch, module, name, path, fields=fields,
                       expected=expected, method=method, api=api)


_CLINICIAN_CALLS = [  # (function held, page asked for, the other clinician's page meanwhile)
    ("_done", "/s/x", "/s/x/history"),
    ("_history", "/s/x/history", "/s/x"),
    ("_studies", "/studies", "/s/x"),
]


@pytest.mark.parametrize(("name", "path", "probe"), _CLINICIAN_CALLS,
                         ids=[c[1] for c in _CLINICIAN_CALLS])
def test_a_clinician_is_served_while_another_clinicians_page_waits_on_postgresql(
        app, engine, monkeypatch, name, path, probe):
    """The task list, the history (a query per task) and the list of studies."""
    if engine.dialect.name != "postgresql":
        pytest.skip("on SQLite these calls run in place (in-process work, no round trips)")
    _served_while_held(app, engine, monkeypatch, clinician, name, path, method="GET",
                       role="clinician", probe=probe)


def test_a_clinician_is_served_while_a_profile_is_saved_on_postgresql(app, engine, monkeypatch):
    if engine.dialect.name != "postgresql":
        pytest.skip("on SQLite these calls run in place (in-process work, no round trips)")
    _served_while_held(app, engine, monkeypatch, clinician, "_save_profile", "/s/x/profile",
                       fields={"specialty": SPECIALTIES["x"], "country": "Chile",
                               "organisation": "Clinic", "experience_years": "3",
                               "role": "specialist", "consent": "yes"},
                       role="clinician", csrf_from="/s/x/profile", expected=303)


def test_a_clinician_is_served_while_an_invitation_is_opened_on_postgresql(
        app, engine, monkeypatch):
    if engine.dialect.name != "postgresql":
        pytest.skip("on SQLite these calls run in place (in-process work, no round trips)")
    token = accounts.create_invitation(engine, "x", "clinician")
    _served_while_held(app, engine, monkeypatch, accounts, "open_invitation", f"/invite/{token}",
                       method="GET", anonymous=True)
