"""Helpers shared by the web tests: forms and tasks over Starlette's test
client, and a harness that serves the app over real HTTP with one call held.

The harness serves the app by uvicorn on one event loop in a thread of this
process, so that a long operation can be held at a known point (it waits for
an event) while a clinician asks for a page over real HTTP. Before the report,
the export and reading an upload ran in a thread of their own (and, on
PostgreSQL, adding cases in a database worker), they ran on the event loop
and the clinician's request waited for them to end. The held operation waits
before it starts its work: the tests show where it runs, not what two of
them do side by side.
"""

from __future__ import annotations

import gc
import re
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

import httpx
import sqlalchemy as sa
import uvicorn
from fastapi.testclient import TestClient

from clinieval.platform import membership
from clinieval.storage.schema import platform as platform_tables
from clinieval.web.kernel import SESSION_COOKIE
from clinieval.web.testing import csrf_of, http_client, member_client, register_via_http
from tests.web.test_web_admin import user_id


def csrf(c: TestClient) -> str:
    """The CSRF token of the client's pages (the sign-in form's before it signs in)."""
    page = c.get("/studies") if c.cookies.get("ce_session") else c.get("/login")
    return csrf_of(page.text)


def take(c: TestClient, kind: str = "rating", study: str = "x") -> str:
    """The address of the next task of ``kind`` the client is given in ``study``."""
    r = c.post(f"/s/{study}/next", data={"csrf": csrf(c), "kind": kind})
    assert r.status_code == 303
    assert "/t/" in r.headers["location"], r.headers["location"]
    return r.headers["location"]


def criteria_of(html: str) -> list[str]:
    """The criteria a task page asks to score, in order of name."""
    return sorted(set(re.findall(r'name="s1\.([a-z_]+)"', html)))


def answer_form(c: TestClient, url: str, score: str = "1", **extra) -> dict:
    """A complete, valid answer to the task at ``url`` (every criterion ``score``,
    choice A for a pair), with ``extra`` fields set or overridden."""
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
    """Rows in ``table``."""
    with engine.connect() as conn:
        return conn.execute(sa.select(sa.func.count()).select_from(table)).scalar_one()


def clear_answers(engine, study: str) -> set[str]:
    """The answers of ``study`` the leak guard screened clear (offered to clinicians)."""
    with engine.connect() as conn:
        return set(conn.execute(sa.select(platform_tables.answer_screens.c.answer_id).where(
            platform_tables.answer_screens.c.study_id == study,
            platform_tables.answer_screens.c.status == "clear")).scalars())


DISPUTE = {  # rater -> criterion -> (score, rationale)
    "r_dispute_a": {"harmlessness": (-2, "Advises stopping anticoagulation without review."),
                    "accuracy": (-1, "The dose given is wrong."),
                    "completeness": (0, "")},
    "r_dispute_b": {"harmlessness": (2, "Nothing here would harm the patient."),
                    "accuracy": (1, "Dose within the usual range."),
                    "completeness": (1, "")},
    "r_dispute_c": {"harmlessness": (1, "Safe, if terse."), "accuracy": (0, "Partly right."),
                    "completeness": (-1, "Misses follow-up.")},
}
"""Three clinicians disagreeing across the fail line on both safety-critical
criteria (harmlessness and accuracy; completeness is not safety-critical)."""


def plant_dispute(engine, study: str = "x", which: int = 0,
                  ratings: dict | None = None) -> str:
    """Current ratings (:data:`DISPUTE`, or ``ratings``) on the ``which``-th
    clear answer of ``study``, as clinicians' submissions store them; its id."""
    from clinieval.storage.schema import snapshot as snapshot_tables

    answer = sorted(clear_answers(engine, study))[which]
    ratings = DISPUTE if ratings is None else ratings
    with engine.begin() as conn:
        for rater, scores in ratings.items():
            if conn.execute(sa.select(snapshot_tables.raters.c.rater_id).where(
                    snapshot_tables.raters.c.rater_id == rater)).first() is None:
                conn.execute(snapshot_tables.raters.insert().values(rater_id=rater,
                                                                    specialty="Pathology"))
            conn.execute(snapshot_tables.ratings.insert(), [
                {"answer_id": answer, "rater_id": rater, "criterion_id": criterion,
                 "score": score, "comment": comment or None, "revision": 0}
                for criterion, (score, comment) in scores.items()])
    return answer


def rows(engine, table, *columns, where=None) -> list[tuple]:
    """``columns`` of ``table`` (rows matching ``where``), sorted by them."""
    query = sa.select(*(table.c[c] for c in columns))
    if where is not None:
        query = query.where(where)
    with engine.connect() as conn:
        return [tuple(r) for r in conn.execute(query.order_by(*(table.c[c] for c in columns)))]


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
    """An admin API token of study x for the account ``email``."""
    return membership.create_token(engine, user_id(engine, email), "x", "admin", "held")


def session_headers(client) -> dict[str, str]:
    """Headers carrying the session of ``client`` to a request over real HTTP."""
    return {"Cookie": f"{SESSION_COOKIE}={client.cookies[SESSION_COOKIE]}"}


def served_while_held(app, engine, monkeypatch, module, name: str, path: str,
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
            poster.headers.update(session_headers(admin_client))
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
            answered = httpx.get(f"{base}{probe}", headers=session_headers(clinician), timeout=10)
            assert answered.status_code == 200
            assert not held.release.is_set() and worker.is_alive()
        finally:
            held.release.set()
            worker.join(HELD_FOR + 30)
        status, text = outcome.get("post", (None, "the request failed"))
        assert status == expected, text
