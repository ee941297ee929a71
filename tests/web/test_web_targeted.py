"""Decision-targeted assignment and severity escalation over HTTP, on SQLite
and PostgreSQL: what even spreading guarantees still holds (each answer at
most its target, never twice to one clinician, no over-assignment under
concurrent requests), every targeted lease records its answer's
probability, and an alarm on a safety-critical criterion raises the
answer's target by the study's step, capped."""

from __future__ import annotations

import threading
import time

import numpy as np
import pytest
import sqlalchemy as sa

from clinieval.errors import InputError
from clinieval.platform.targeting import set_assignment
from clinieval.storage import db
from clinieval.storage.schema import platform as platform_tables
from clinieval.web.testing import member_client as member
from tests.web.support import answer_form, clear_answers, csrf

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")
LEASES = platform_tables.task_leases


def _answer_of(engine, url: str) -> str:
    with engine.connect() as conn:
        return conn.execute(sa.select(LEASES.c.answer_id).where(
            LEASES.c.token == url.rsplit("/", 1)[1])).scalar_one()


def _next(c) -> str:
    return c.post("/s/x/next", data={"csrf": csrf(c), "kind": "rating"}).headers["location"]


def _rate_all(c, engine, score: str = "1", **extra) -> set[str]:
    mine = set()
    while (url := _next(c)) != "/s/x?empty=1":
        mine.add(_answer_of(engine, url))
        assert c.post(url, data=answer_form(c, url, score, **extra)).status_code == 303
    return mine


def _only(engine, keep: str) -> None:
    with db.writing(engine) as conn:
        conn.execute(platform_tables.answer_screens.update()
                     .where(platform_tables.answer_screens.c.answer_id != keep)
                     .values(status="flagged"))


def test_targeted_leases_fill_every_answer_to_its_target_and_record_probabilities(app, engine):
    cfg = set_assignment(engine, None, "x", assignment="targeted")
    assert cfg.targeted and cfg.monitoring == 0.10
    raters = [member(app, engine, "x", "clinician") for _ in range(3)]
    seen = [_rate_all(c, engine) for c in raters]
    clear = clear_answers(engine, "x")
    assert seen[0] == seen[1] == clear and seen[2] == set()  # overlap target 2
    with engine.connect() as conn:
        probs = conn.execute(sa.select(LEASES.c.probability).where(
            LEASES.c.study_id == "x")).scalars().all()
    assert len(probs) == 2 * len(clear)
    assert all(p is not None and 0 < p <= 1 for p in probs)
    # the first draw of all: every answer fresh and empty, so each had 1/n
    assert max(probs) >= 1 / len(clear) - 1e-12


def test_an_even_study_records_no_probability(app, engine):
    c = member(app, engine, "x", "clinician")
    url = _next(c)
    with engine.connect() as conn:
        assert conn.execute(sa.select(LEASES.c.probability).where(
            LEASES.c.token == url.rsplit("/", 1)[1])).scalar_one() is None


def test_concurrent_targeted_requests_never_exceed_the_overlap_target(app, engine):
    """Six clinicians ask at once for the one answer left (target 2): two get it."""
    set_assignment(engine, None, "x", assignment="targeted")
    keep = sorted(clear_answers(engine, "x"))[0]
    _only(engine, keep)
    raters = [member(app, engine, "x", "clinician") for _ in range(6)]
    tokens = [csrf(c) for c in raters]
    barrier = threading.Barrier(len(raters))
    locations: list[str] = []

    def grab(c, token: str) -> None:
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


def _alarm(c, engine) -> str:
    """Rate the one answer left with -1 everywhere (rationales given)."""
    url = _next(c)
    form = answer_form(c, url, "-1")
    form |= {k.replace("s1.", "c1.", 1): "Wrong dose, could harm." for k in list(form)
             if k.startswith("s1.")}
    assert c.post(url, data=form).status_code == 303
    return _answer_of(engine, url)


@pytest.mark.parametrize("targeted", [False, True])
def test_an_alarm_raises_the_answers_target_by_the_step_up_to_the_cap(app, engine, targeted):
    """Target 2, step 2, cap 3: one alarm makes the target 4; a second alarm
    would add 2 more, but the cap stops the raise at 3 (target 5)."""
    set_assignment(engine, None, "x", escalation_step=2, escalation_cap=3,
                   assignment="targeted" if targeted else "even")
    keep = sorted(clear_answers(engine, "x"))[0]
    _only(engine, keep)
    assert _alarm(member(app, engine, "x", "clinician"), engine) == keep
    assert _rate_all(member(app, engine, "x", "clinician"), engine) == {keep}
    assert _rate_all(member(app, engine, "x", "clinician"), engine) == {keep}
    assert _alarm(member(app, engine, "x", "clinician"), engine) == keep  # 4th of target 4
    got = [_rate_all(member(app, engine, "x", "clinician"), engine) for _ in range(2)]
    assert got == [{keep}, set()]  # the 5th rater, then the answer is full
    with engine.connect() as conn:
        extra = conn.execute(sa.select(platform_tables.answer_priorities.c.extra).where(
            platform_tables.answer_priorities.c.answer_id == keep)).scalar_one()
    assert extra == 3


def test_without_an_alarm_the_target_stays(app, engine):
    keep = sorted(clear_answers(engine, "x"))[0]
    _only(engine, keep)
    got = [_rate_all(member(app, engine, "x", "clinician"), engine) for _ in range(3)]
    assert got == [{keep}, {keep}, set()]


@pytest.mark.parametrize(("field", "value"), [("assignment", "argmax"),
                                              ("monitor_share", 1.0),
                                              ("escalation_step", -1),
                                              ("escalation_cap", 99)])
def test_bad_settings_name_the_field_and_write_nothing(app, engine, field, value):
    with pytest.raises(InputError) as err:
        set_assignment(engine, None, "x", **{field: value})
    assert err.value.field == field
    with engine.connect() as conn:
        row = conn.execute(sa.select(platform_tables.study_settings).where(
            platform_tables.study_settings.c.study_id == "x")).one()
    assert row.assignment is None and row.monitor_share is None
    assert row.escalation_step is None and row.escalation_cap is None


def test_the_recorded_probabilities_reach_the_export_and_the_audit_weights_them(
        app, engine, tmp_path):
    """A targeted study's export carries each rated answer's first-lease
    probability (answer ids only, no rater), and its audit shows the
    weighted Fail % and means beside the plain ones; an even study's shows
    neither."""
    from clinieval.audit.context import Context
    from clinieval.audit.data import audit_data, from_snapshot
    from clinieval.audit.sections import targeted_weights
    from clinieval.audit.settings import AuditSettings
    from clinieval.platform.study_export import export_study, study_snapshot

    even = from_snapshot(study_snapshot(engine, "x"))
    assert even.assignment is None
    # A near-full monitoring share: the second clinician is offered every answer even once
    # the first one's passes have settled a cell (the test is about the weights).
    set_assignment(engine, None, "x", assignment="targeted", monitor_share=0.999)
    raters = [member(app, engine, "x", "clinician") for _ in range(2)]
    _rate_all(raters[0], engine, "1")
    _rate_all(raters[1], engine, "-1", **{f"c1.{c}": "Unsafe." for c in ("harmlessness",
                                                                          "accuracy")})
    snap = study_snapshot(engine, "x")
    recorded = snap.meta["assignment"]
    assert recorded["mode"] == "targeted"
    assert set(recorded["probability"]) == clear_answers(engine, "x")
    assert all(0 < p <= 1 for p in recorded["probability"].values())
    export_study(engine, "x", tmp_path / "bundle", salt="s" * 16)
    data = audit_data(tmp_path / "bundle")
    assert data.assignment == "targeted"
    assert np.isfinite(data.answer_probability).sum() == len(recorded["probability"])
    got = targeted_weights.section(Context(data, AuditSettings()))
    frame = got.tables["weighted"]
    danger = frame[frame["measure"] == "dangerous answers %"]
    assert len(danger) == len(set(data.answer_model[np.isfinite(data.answer_probability)]))
    assert (danger["weighted"] == 1.0).all()  # the second clinician failed every answer
    assert ((frame["lower"] <= frame["weighted"]) & (frame["weighted"] <= frame["upper"])).all()
    skipped = targeted_weights.section(Context(even, AuditSettings()))
    assert "weighted" not in skipped.tables


# --- switching targeted on from the web: the first pass off the request path ----------

def _keyed(engine) -> int:
    ap = platform_tables.answer_priorities
    with engine.connect() as conn:
        return conn.execute(sa.select(sa.func.count()).where(
            ap.c.study_id == "x", ap.c.pick_key.is_not(None))).scalar_one()


def _switch_on(app, engine, route: str):
    from clinieval.platform import membership
    from clinieval.web.testing import csrf_of
    from tests.web.test_web_admin import client, signed_in

    admin, uid = signed_in(app, engine, "x", "admin")
    if route == "api":
        api = client(app, membership.create_token(engine, uid, "x", "admin", "t"))
        return api.post("/api/studies/x/assignment", json={"assignment": "targeted"})
    form = {"csrf": csrf_of(admin.get("/s/x/admin/content").text), "assignment": "targeted"}
    return admin.post("/s/x/admin/assignment", data=form)


@pytest.mark.parametrize("route", ["api", "form"])
def test_switching_targeted_on_returns_before_the_first_pass(app, engine, monkeypatch, route):
    """The admin's request does not run the pass (here one that would take
    30 s if it ran in the request's process); the background process writes
    the first priorities after the answer has come back."""
    from clinieval.platform import targeting

    def slow(*args, **kwargs):
        time.sleep(30)
        raise AssertionError("the priorities pass ran in the admin's request")

    monkeypatch.setattr(targeting, "refresh_priorities", slow)
    start = time.monotonic()
    r = _switch_on(app, engine, route)
    took = time.monotonic() - start
    assert r.status_code == 200, r.text[-2000:]
    assert took < 10, took
    deadline = time.monotonic() + 120
    state = targeting._passes[(str(engine.url), "x")]
    while (state.busy or not _keyed(engine)) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not state.busy and _keyed(engine) == len(clear_answers(engine, "x"))


def test_until_the_first_pass_requests_spread_evenly_recording_their_chance(
        app, engine, monkeypatch):
    """Switched on again after an even period, the earlier period's keys are
    dropped (their escalations kept); until the background pass writes new
    ones a request gets a task by even spreading and records one over its
    specialty's answers with room."""
    from clinieval.platform import targeting

    set_assignment(engine, None, "x", assignment="targeted")  # a pass: keys written
    assert _keyed(engine) > 0
    set_assignment(engine, None, "x", assignment="even")
    scheduled = []
    monkeypatch.setattr(targeting, "schedule_refresh", lambda e, cfg: scheduled.append(cfg))
    cfg = set_assignment(engine, None, "x", assignment="targeted", background=True)
    assert cfg.targeted and [c.study_id for c in scheduled] == ["x"]
    assert _keyed(engine) == 0
    with engine.connect() as conn:
        assert not conn.execute(sa.select(platform_tables.assignment_offers).where(
            platform_tables.assignment_offers.c.study_id == "x")).all()
    url = _next(member(app, engine, "x", "clinician"))
    assert "/t/" in url
    al, lease = platform_tables.answer_load, LEASES
    with engine.connect() as conn:
        probability, specialty = conn.execute(
            sa.select(lease.c.probability, al.c.specialty)
            .join(al, sa.and_(al.c.answer_id == lease.c.answer_id,
                              al.c.study_id == lease.c.study_id))
            .where(lease.c.token == url.rsplit("/", 1)[1])).one()
        same = set(conn.execute(sa.select(al.c.answer_id).where(
            al.c.study_id == "x", al.c.specialty == specialty)).scalars())
    assert probability == pytest.approx(1 / len(same & clear_answers(engine, "x")))
