"""An admin's long operations (the full report, an export, reading and
writing an upload of cases) and password hashing do not hold up clinicians:
while one runs, held at a known point, a clinician's request is served
(see :func:`tests.web.support.served_while_held`)."""

from __future__ import annotations

import io
import threading
import time
import zipfile

import httpx
import pytest

from clinieval.platform import accounts, studies, study_export, uploads
from clinieval.web import admin
from clinieval.web.testing import csrf_of, member_client
from tests.web.support import served_while_held, serving, session_headers

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")


def test_a_clinician_is_served_while_the_full_report_runs(app, engine, monkeypatch):
    served_while_held(app, engine, monkeypatch, admin, "full_report", "/s/x/admin/report")


def test_a_clinician_is_served_while_an_export_is_made(app, engine, monkeypatch):
    served_while_held(app, engine, monkeypatch, study_export, "export_zip", "/s/x/admin/export")


def _more_cases() -> dict:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as zf:
        zf.writestr("src/cases.csv", "case_id,prompt,specialty\n"
                                     "more-c1,A pruritic rash: what next?,Pathology\n")
        zf.writestr("src/answers.csv", "answer_id,case_id,model_id,text\nmore-a1,more-c1,"
                                       "claude-3-5-sonnet-20240620,Start a topical steroid.\n")
    return {"source": ("src.zip", buffer.getvalue(), "application/zip")}


def test_a_clinician_is_served_while_an_upload_of_cases_is_read(app, engine, monkeypatch):
    served_while_held(app, engine, monkeypatch, uploads, "read_upload", "/s/x/admin/cases",
                      files=_more_cases())


def test_a_clinician_is_served_while_cases_are_written_on_postgresql(app, engine, monkeypatch):
    """On PostgreSQL the write runs in a database worker thread. On SQLite it
    runs on the event loop, as every SQLite write does: a clinician's request
    waits for its transaction (the upload was read beside them, above)."""
    if engine.dialect.name != "postgresql":
        pytest.skip("SQLite writes run on the event loop (a known limitation)")
    served_while_held(app, engine, monkeypatch, studies, "add_cases_by", "/s/x/admin/cases",
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
            headers = session_headers(c)
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
    served_while_held(app, engine, monkeypatch, accounts, "_verify", "/login",
                      fields={"email": "nobody@example.org", "password": "not the password"},
                      anonymous=True, expected=401)


def test_a_clinician_is_served_while_a_new_password_is_hashed(app, engine, monkeypatch):
    token = accounts.create_invitation(engine, "x", "clinician")
    password = "correct horse battery"
    served_while_held(app, engine, monkeypatch, accounts, "hash_password", f"/invite/{token}",
                      fields={"email": "new@example.org", "password": password,
                              "password2": password}, anonymous=True, expected=303)
