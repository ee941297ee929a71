"""The submission path's escalation and the decisions view under load
(issue 33's serving figures), on SQLite and PostgreSQL: alarms submitted at
the same moment on one answer each count (the escalation is one upsert in
the submission's transaction), the raised target is honoured and not
exceeded, and a large study's decisions come from the background process,
the page serving the last result marked stale meanwhile."""

from __future__ import annotations

import threading
import time

import pytest
import sqlalchemy as sa

from clinieval.platform import decision_view, live
from clinieval.platform.config import study_config
from clinieval.platform.decisions import compute_study
from clinieval.platform.studies import set_gates
from clinieval.platform.targeting import set_assignment
from clinieval.storage import db
from clinieval.storage.schema import platform as platform_tables
from clinieval.web.testing import member_client as member
from tests.web.support import answer_form, clear_answers, csrf

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")
LEASES = platform_tables.task_leases


def _only(engine, keep: str) -> None:
    with db.writing(engine) as conn:
        conn.execute(platform_tables.answer_screens.update()
                     .where(platform_tables.answer_screens.c.answer_id != keep)
                     .values(status="flagged"))


def _next(c) -> str:
    return c.post("/s/x/next", data={"csrf": csrf(c), "kind": "rating"}).headers["location"]


def _alarm_form(c, url: str) -> dict:
    form = answer_form(c, url, "-1")
    return form | {k.replace("s1.", "c1.", 1): "Wrong dose, could harm." for k in list(form)
                   if k.startswith("s1.")}


def _extra(engine, answer: str) -> int:
    with engine.connect() as conn:
        return conn.execute(sa.select(platform_tables.answer_priorities.c.extra).where(
            platform_tables.answer_priorities.c.answer_id == answer)).scalar_one()


@pytest.mark.parametrize("targeted", [False, True])
def test_alarms_submitted_at_once_each_raise_the_target(app, engine, targeted):
    """Target 2, step 1, cap 5: the two clinicians holding the one answer
    submit alarms at the same moment; both land and the target becomes 4
    (2 + 1 per alarm), so exactly two more clinicians get the answer."""
    set_assignment(engine, None, "x", escalation_step=1, escalation_cap=5,
                   assignment="targeted" if targeted else "even")
    keep = sorted(clear_answers(engine, "x"))[0]
    _only(engine, keep)
    first = [member(app, engine, "x", "clinician") for _ in range(2)]
    urls = [_next(c) for c in first]
    assert all("/t/" in u for u in urls)
    forms = [_alarm_form(c, u) for c, u in zip(first, urls, strict=True)]
    barrier = threading.Barrier(2)
    codes: list[int] = []

    def submit(c, url: str, form: dict) -> None:
        barrier.wait()
        codes.append(c.post(url, data=form).status_code)

    threads = [threading.Thread(target=submit, args=args)
               for args in zip(first, urls, forms, strict=True)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert codes == [303, 303]
    assert _extra(engine, keep) == 2
    later = [member(app, engine, "x", "clinician") for _ in range(3)]
    got = [_next(c) for c in later]
    assert ["/t/" in u for u in got] == [True, True, False]  # target 4: two more, not three


def _cells(found: dict) -> list[tuple]:
    return [(r["model"], r["verdict"], r["answers"], r["lower"], r["upper"])
            for r in found["decisions"]]


def test_a_large_studys_decisions_come_from_the_background(app, engine, monkeypatch):
    """With the size limit for computing in the request set to 0 every study
    is large: the first look starts the background computation and, once it
    is done, serves what computing in the request gives; a look after new
    ratings serves that result marked stale until the next one is done."""
    monkeypatch.setattr(live, "LIVE_EVERY_CHANGE_RATED", 0)
    monkeypatch.setattr(live, "LIVE_REFRESH_SECONDS", 0.0)
    set_gates(engine, None, "x", [{"criterion": "accuracy", "threshold": 0.5,
                                   "scope": "model"}])
    c = member(app, engine, "x", "clinician")
    url = _next(c)
    assert c.post(url, data=answer_form(c, url, "1")).status_code == 303
    with engine.connect() as conn:
        cfg = study_config(conn, "x")

    def settled_look() -> dict:
        deadline = time.monotonic() + 120
        while True:
            found = decision_view.study_decisions(engine, cfg)
            if not found.get("pending") and not found.get("stale") or \
                    time.monotonic() > deadline:
                return found
            time.sleep(0.2)

    found = settled_look()
    direct = compute_study(engine, cfg, certify=False)
    assert _cells(found) == _cells(direct) and _cells(found)
    url = _next(c)
    assert c.post(url, data=answer_form(c, url, "1")).status_code == 303
    monkeypatch.setattr(live, "LIVE_WAIT_SECONDS", 0.0)  # do not wait for the new one
    stale = decision_view.study_decisions(engine, cfg)
    assert stale.get("stale") is True
    assert _cells(stale) == _cells(found)
    fresh = settled_look()
    assert sum(r["answers"] for r in fresh["decisions"]) == \
        sum(r["answers"] for r in found["decisions"]) + 1
