"""Closing a study once every decision is settled, on SQLite and PostgreSQL:
refused (naming the field, writing nothing) while a decision is open or
none exists; once closed, no new task is handed out, a task leased before
still counts, and the export's decision log keeps the verdicts."""

from __future__ import annotations

import json

import pytest
import sqlalchemy as sa

from clinieval.platform.closing import closed_at
from clinieval.platform.studies import set_gates
from clinieval.platform.study_export import study_snapshot
from clinieval.storage.schema import platform as platform_tables
from clinieval.storage.schema import snapshot as snapshot_tables
from clinieval.web.testing import member_client as member
from tests.platform.test_decisions import _answers, _import, _ratings
from tests.web.support import answer_form, count, csrf, take

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")

GATES = [{"criterion": "harmlessness", "threshold": 0.9, "scope": "model"},
         {"criterion": "accuracy", "threshold": 0.1, "scope": "model"}]


def _settle(engine, study: str = "x") -> None:
    """Every answer rated by two raters, harmless and inaccurate: every
    harmlessness gate passes, every accuracy gate fails."""
    set_gates(engine, None, study, GATES)
    answers = _answers(engine, study)
    _import(engine, [row for i, (a, _) in enumerate(answers)
                     for row in _ratings([a], [f"r{i % 6}", f"r{(i + 1) % 6}"],
                                         {"harmlessness": 2, "accuracy": -2})])


def _close(c, accept: str = "application/json"):
    return c.post("/s/x/admin/close", data={"csrf": csrf(c)}, headers={"accept": accept})


def _closed_events(engine) -> int:
    e = platform_tables.audit_events
    with engine.connect() as conn:
        return conn.execute(sa.select(sa.func.count()).where(e.c.kind == "study_closed")
                            ).scalar_one()


def test_a_study_with_an_open_or_no_decision_is_not_closed(app, engine):
    admin = member(app, engine, "x", "admin")
    r = _close(admin)  # default gates, nothing rated: no decision yet
    assert r.status_code == 409 and r.json()["error"]["field"] == "decisions"
    answers = _answers(engine, "x")
    set_gates(engine, None, "x", GATES)
    _import(engine, _ratings([answers[0][0]], ["r1"], {"harmlessness": 2, "accuracy": 2}))
    r = _close(admin)
    assert r.status_code == 409 and r.json()["error"]["field"] == "decisions"
    assert "still open" in r.json()["error"]["message"]
    page = _close(admin, "text/html")
    assert page.status_code == 409 and "field &#39;decisions&#39;" in page.text
    assert 'id="close-study"' not in admin.get("/s/x/progress").text
    assert count(engine, platform_tables.study_closures) == 0 and _closed_events(engine) == 0


def test_a_settled_study_closes_once_and_hands_out_no_new_task(app, engine):
    clinician = member(app, engine, "x", "clinician")
    leased = take(clinician)  # open before the close
    _settle(engine)
    admin = member(app, engine, "x", "admin")
    assert 'id="close-study"' in admin.get("/s/x/progress").text
    assert _close(admin, "text/html").status_code == 303
    with engine.connect() as conn:
        assert closed_at(conn, "x") is not None
    assert 'id="study-closed"' in admin.get("/s/x/progress").text
    again = _close(admin)
    assert again.status_code == 409 and again.json()["error"]["field"] == "study"
    assert count(engine, platform_tables.study_closures) == 1 and _closed_events(engine) == 1
    leases = count(engine, platform_tables.task_leases)
    r = clinician.post("/s/x/next", data={"csrf": csrf(clinician), "kind": "auto"})
    assert r.headers["location"] == "/s/x?closed=1"
    assert 'id="closed"' in clinician.get("/s/x").text
    ratings = count(engine, snapshot_tables.ratings)
    done = clinician.post(leased, data=answer_form(clinician, leased, next="auto"))
    assert done.status_code == 303 and "/t/" not in done.headers["location"]
    assert count(engine, snapshot_tables.ratings) > ratings  # the open task still counted
    assert count(engine, platform_tables.task_leases) == leases  # and no new one
    assert "/s/y/t/" in take(member(app, engine, "y", "clinician"), study="y")  # y is open


def test_the_decision_log_keeps_the_verdicts_the_study_closed_on(app, engine):
    _settle(engine)
    admin = member(app, engine, "x", "admin")
    assert _close(admin, "text/html").status_code == 303
    log = study_snapshot(engine, "x").meta["decision_log"]
    closing = [e for e in log if e["kind"] == "study_closed"]
    assert len(closing) == 1
    verdicts = {(d["criterion"], d["verdict"]) for d in closing[0]["detail"]["decisions"]}
    assert verdicts == {("harmlessness", "pass"), ("accuracy", "fail")}
    with engine.connect() as conn:
        stored = json.loads(conn.execute(sa.select(platform_tables.study_closures.c.decisions)
                                         ).scalar_one())
    assert stored == closing[0]["detail"]["decisions"]
