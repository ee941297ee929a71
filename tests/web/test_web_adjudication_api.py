"""The adjudicator's flow and closing a study over the JSON API, on SQLite and
PostgreSQL: the same checks as the pages (the study's adjudicators only for
verdicts, with the session's CSRF token; its admins only for the close,
once every decision is settled), refusals as ``{"error": {"field",
"message"}}``, nothing written then, and no model identity in what an
adjudicator receives. Also: a rating that lands while the close computes
its decisions is in the verdicts the close keeps."""

from __future__ import annotations

import json
import sys

import pytest
import sqlalchemy as sa

from clinieval.platform import adjudication, membership
from clinieval.platform.closing import KEPT
from clinieval.platform.config import study_config
from clinieval.platform.decisions import compute_study
from clinieval.storage import db
from clinieval.storage.schema import platform as platform_tables
from clinieval.storage.schema import snapshot as snapshot_tables
from clinieval.web.testing import model_strings
from tests.platform.test_decisions import _answers, _import, _ratings
from tests.web.support import count, csrf, plant_dispute
from tests.web.test_study_closing import _settle
from tests.web.test_web_admin import client, signed_in

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")

VERDICT = {"verdict": {"harmlessness": "fail", "accuracy": "pass"},
           "reason": "The advice to stop anticoagulation is unsafe.", "supersedes": 0}


def _adjudicator(app, engine, study: str = "x"):
    c, _ = signed_in(app, engine, study, "adjudicator")
    return c


def _list(c) -> dict:
    r = c.get("/api/studies/x/adjudication")
    assert r.status_code == 200, r.text
    return r.json()


def _post(c, ref: str, body: dict, token: str | None = None):
    headers = {} if token is None else {"X-CSRF-Token": token}
    return c.post(f"/api/studies/x/adjudication/{ref}", json=body, headers=headers)


def _assert_blind(text: str) -> None:
    leaked = [s for s in model_strings() if s.lower() in text.lower()]
    assert not leaked, leaked


# --- adjudication ------------------------------------------------------------------

def test_an_adjudicator_lists_reads_and_rules_on_a_task_over_the_api(app, engine):
    answer = plant_dispute(engine, "x", 0)
    c = _adjudicator(app, engine)
    listed = _list(c)
    assert listed["open"] == 1 and len(listed["tasks"]) == 1
    ref = listed["tasks"][0]["ref"]
    assert ref == adjudication.task_ref(app.state.signer.key, "x", answer)
    task = c.get(f"/api/studies/x/adjudication/{ref}")
    assert task.status_code == 200 and task.json()["supersedes"] == 0
    assert {k["criterion_id"] for k in task.json()["criteria"] if k["disputed"]} == \
        {"harmlessness", "accuracy"}
    r = _post(c, ref, VERDICT, listed["csrf"])
    assert r.status_code == 200 and r.json()["written"] is True, r.text
    ids = r.json()["verdicts"]
    assert len(ids) == 2 and count(engine, snapshot_tables.adjudications) == 2
    again = _post(c, ref, VERDICT, listed["csrf"])  # a retry writes nothing
    assert again.status_code == 200 and again.json() == {"verdicts": ids, "written": False}
    assert count(engine, snapshot_tables.adjudications) == 2
    assert _list(c)["open"] == 0


def test_what_an_adjudicator_receives_names_no_model(app, engine):
    answer = plant_dispute(engine, "x", 0)
    c = _adjudicator(app, engine)
    listed = c.get("/api/studies/x/adjudication")
    ref = listed.json()["tasks"][0]["ref"]
    task = c.get(f"/api/studies/x/adjudication/{ref}")
    for text in (listed.text, task.text):
        _assert_blind(text)
        assert answer not in text and "model" not in json.loads(text)
    assert set(task.json()) == set(adjudication.TaskView.model_fields)


@pytest.mark.parametrize(("change", "status", "field"), [
    ({"verdict": {"harmlessness": "fail"}}, 422, "verdict.accuracy"),
    ({"verdict": {"harmlessness": "fail", "accuracy": "unsure"}}, 422, "verdict.accuracy"),
    ({"verdict": {**VERDICT["verdict"], "completeness": "pass"}}, 422,
     "verdict.completeness"),
    ({"reason": "  "}, 422, "reason"), ({"reason": None}, 422, "reason"),
    ({"supersedes": -1}, 422, "supersedes"), ({"supersedes": 7}, 409, "supersedes")])
def test_a_bad_verdict_is_refused_naming_its_field_and_writes_nothing(app, engine, change,
                                                                      status, field):
    plant_dispute(engine, "x", 0)
    c = _adjudicator(app, engine)
    listed = _list(c)
    r = _post(c, listed["tasks"][0]["ref"], {**VERDICT, **change}, listed["csrf"])
    assert r.status_code == status and r.json()["error"]["field"] == field, r.text
    assert count(engine, snapshot_tables.adjudications) == 0


def test_a_verdict_needs_the_csrf_token_the_role_and_a_task_of_the_study(app, engine):
    answer = plant_dispute(engine, "x", 0)
    ref = adjudication.task_ref(app.state.signer.key, "x", answer)
    c = _adjudicator(app, engine)
    listed = _list(c)
    assert _post(c, ref, VERDICT).status_code == 403  # no CSRF token
    assert _post(c, ref, VERDICT, "forged").status_code == 403
    for role in ("admin", "clinician", "viewer"):
        other, _ = signed_in(app, engine, "x", role)
        assert _post(other, ref, VERDICT, csrf(other)).status_code == 403, role
        assert other.get(f"/api/studies/x/adjudication/{ref}").status_code == 403, role
    y = _adjudicator(app, engine, "y")  # an adjudicator of another study
    assert _post(y, ref, VERDICT, csrf(y)).status_code == 403
    _, uid = signed_in(app, engine, "x", "admin")  # a token opens nothing here
    bearer = client(app, membership.create_token(engine, uid, "x", "admin", "t"))
    assert _post(bearer, ref, VERDICT).status_code == 401
    missing = _post(c, "0" * 32, VERDICT, listed["csrf"])
    assert missing.status_code == 404 and missing.json()["error"]["field"] == "task"
    assert c.get(f"/api/studies/x/adjudication/{'0' * 32}").status_code == 404
    assert count(engine, snapshot_tables.adjudications) == 0


def test_a_task_added_after_the_references_were_looked_up_is_found(app, engine):
    first = plant_dispute(engine, "x", 0)
    c = _adjudicator(app, engine)
    assert len(_list(c)["tasks"]) == 1
    key = app.state.signer.key
    assert c.get(f"/api/studies/x/adjudication/{adjudication.task_ref(key, 'x', first)}"
                 ).status_code == 200
    a = snapshot_tables.answers
    with engine.begin() as conn:  # a new answer (as added cases bring) of a case of x
        row = conn.execute(sa.select(a).where(a.c.answer_id == first)).one()._asdict()
        conn.execute(a.insert().values({**row, "answer_id": first + "-new"}))
    with engine.begin() as conn:
        conn.execute(snapshot_tables.ratings.insert(), [
            {"answer_id": first + "-new", "rater_id": rater, "criterion_id": "harmlessness",
             "score": score, "revision": 0}
            for rater, score in (("r_dispute_a", -2), ("r_dispute_b", 2))])
    ref = adjudication.task_ref(key, "x", first + "-new")
    assert c.get(f"/api/studies/x/adjudication/{ref}").status_code == 200
    assert c.get(f"/api/studies/y/adjudication/{ref}").status_code == 403


# --- closing -------------------------------------------------------------------------

def _admin_api(app, engine, role: str = "admin"):
    _, uid = signed_in(app, engine, "x", role)
    return client(app, membership.create_token(engine, uid, "x", role, "t"))


def test_the_api_closes_a_settled_study_once(app, engine):
    api = _admin_api(app, engine)
    r = api.post("/api/studies/x/close")  # nothing rated: no decision yet
    assert r.status_code == 409 and r.json()["error"]["field"] == "decisions"
    assert count(engine, platform_tables.study_closures) == 0
    _settle(engine)
    r = api.post("/api/studies/x/close")
    assert r.status_code == 200, r.text
    verdicts = {(d["criterion"], d["verdict"]) for d in r.json()["decisions"]}
    assert verdicts == {("harmlessness", "pass"), ("accuracy", "fail")}
    again = api.post("/api/studies/x/close")
    assert again.status_code == 409 and again.json()["error"]["field"] == "study"
    assert count(engine, platform_tables.study_closures) == 1


def test_an_open_decision_keeps_the_study_open(app, engine):
    from clinieval.platform.studies import set_gates
    from tests.web.test_study_closing import GATES

    set_gates(engine, None, "x", GATES)
    _import(engine, _ratings([_answers(engine, "x")[0][0]], ["r1"],
                             {"harmlessness": 2, "accuracy": 2}))
    r = _admin_api(app, engine).post("/api/studies/x/close")
    assert r.status_code == 409 and r.json()["error"]["field"] == "decisions"
    assert "still open" in r.json()["error"]["message"]
    assert count(engine, platform_tables.study_closures) == 0


def test_only_the_studys_admin_closes_it_over_the_api(app, engine):
    _settle(engine)
    assert _admin_api(app, engine, "viewer").post("/api/studies/x/close").status_code == 403
    _, y_admin = signed_in(app, engine, "y", "admin")
    other = client(app, membership.create_token(engine, y_admin, "y", "admin", "y"))
    assert other.post("/api/studies/x/close").status_code == 403
    assert count(engine, platform_tables.study_closures) == 0


def test_a_rating_landing_while_the_decisions_are_computed_is_in_the_close(app, engine):
    """The close computes its decisions before it takes the write lock; a
    rating committed in between (here: just before the close's write
    transaction begins, from another connection) must be in the verdicts it
    keeps. Before the check under the lock, the close kept the counts from
    before it."""
    _settle(engine)
    late = _answers(engine, "x")[0][0]
    api = _admin_api(app, engine)
    other = db.make_engine(engine.url.render_as_string(hide_password=False))
    landed = []

    def land(conn) -> None:
        if not landed and _closing_writes():
            landed.append(True)
            _import(other, _ratings([late], ["r_late"], {"harmlessness": 2, "accuracy": -2}))

    sa.event.listen(engine, "engine_connect", land)
    try:
        r = api.post("/api/studies/x/close")
    finally:
        sa.event.remove(engine, "engine_connect", land)
        other.dispose()
    assert landed and r.status_code == 200, r.text
    with engine.connect() as conn:
        cfg = study_config(conn, "x")
        stored = json.loads(conn.execute(sa.select(platform_tables.study_closures.c.decisions)
                                         ).scalar_one())
    now = [{k: row[k] for k in KEPT} for row in compute_study(engine, cfg, False)["decisions"]]
    assert sum(d["ratings"] for d in stored) == sum(d["ratings"] for d in now)
    assert stored == now


def _closing_writes() -> bool:
    """Whether this thread is opening the write transaction of
    closing.close_study (the connection is made, not yet begun)."""
    names, frame = set(), sys._getframe()
    while frame is not None:
        names.add((frame.f_globals.get("__name__"), frame.f_code.co_name))
        frame = frame.f_back
    return {("clinieval.platform.closing", "close_study"),
            ("clinieval.storage.db", "writing")} <= names
