"""Submitting a rating or a vote over HTTP, on SQLite and PostgreSQL: bad input
named by field, leases, idempotency keys, safety rationales, repeated and
simultaneous submissions, and the ids of the stored rows."""

from __future__ import annotations

import re
import threading
from datetime import timedelta

import pytest
import sqlalchemy as sa

from clinieval.platform import events
from clinieval.storage import db
from clinieval.storage.schema import platform as platform_tables
from clinieval.storage.schema import snapshot as snapshot_tables
from clinieval.web.testing import member_client as member
from tests.web.support import answer_form, count, take

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")


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
    r = c.post(url, data=form, headers={"accept": "application/json"})
    assert r.json()["error"]["field"] == "choice"
    leases, study = platform_tables.task_leases, platform_tables.study_settings
    with db.writing(engine) as conn:
        conn.execute(leases.update().values(expires_at=events.now() - timedelta(minutes=1)))
        lapsed = conn.execute(sa.select(leases)).one()
        target = conn.execute(sa.select(study.c.overlap_target)
                              .where(study.c.study_id == "x")).scalar_one()
        # Meanwhile another clinician took the pair, and that is all the ratings wanted.
        conn.execute(study.update().where(study.c.study_id == "x").values(overlap_target=1))
        conn.execute(leases.insert().values(
            {**lapsed._asdict(), "token": "other", "user_id": other,
             "expires_at": events.now() + timedelta(minutes=30)}))
    r = c.post(url, data=answer_form(c, url), headers={"accept": "application/json"})
    assert r.status_code == 422 and r.json()["error"]["field"] == "lease"
    # Or took one of its answers alone, in a rating task: the pair would over-fill it.
    with db.writing(engine) as conn:
        conn.execute(leases.update().where(leases.c.token == "other")
                     .values(kind="rating", answer_b_id=None, shown_left=None))
    r = c.post(url, data=answer_form(c, url), headers={"accept": "application/json"})
    assert r.status_code == 422 and r.json()["error"]["field"] == "lease", r.text
    assert count(engine, snapshot_tables.preferences) == count(engine, snapshot_tables.ratings) == 0
    # With room left, a lease that lapsed while the clinician rated is renewed: stored.
    with db.writing(engine) as conn:
        conn.execute(study.update().where(study.c.study_id == "x")
                     .values(overlap_target=target))
        conn.execute(leases.delete().where(leases.c.token == "other"))
    r = c.post(url, data=answer_form(c, url), headers={"accept": "application/json"})
    assert r.status_code == 200, r.text
    assert count(engine, snapshot_tables.preferences) == 1
    assert count(engine, snapshot_tables.ratings) == 18
    # A lease marked expired (taken back) is not renewed.
    url = take(c)
    with db.writing(engine) as conn:
        conn.execute(leases.update().where(leases.c.status == "open").values(status="expired"))
    r = c.post(url, data=answer_form(c, url), headers={"accept": "application/json"})
    assert r.status_code == 422 and r.json()["error"]["field"] == "lease"


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
    fields = re.findall(r'name="s([12])\.([a-z_]+)"', html)
    shown = [(int(p), k) for p, k in dict.fromkeys(fields)]
    scores = {f: str((i * 3) % 5 - 2) for i, f in enumerate(shown)}
    form = answer_form(c, url, **{f"s{p}.{k}": v for (p, k), v in scores.items()},
                       **{f"c{p}.{k}": "why" for (p, k), v in scores.items() if int(v) <= -1})
    ids = c.post(url, data=form, headers={"accept": "application/json"}).json()["rating_ids"]
    with engine.connect() as conn:
        rows = {r.rating_id: r for r in conn.execute(sa.select(snapshot_tables.ratings))}
        lease = conn.execute(sa.select(platform_tables.task_leases)).one()
    sides = ({1: lease.answer_id, 2: lease.answer_b_id} if lease.shown_left == "A"
             else {1: lease.answer_b_id, 2: lease.answer_id})
    assert len(ids) == len(shown) and len({rows[i].answer_id for i in ids}) == 2
    order = sorted(shown, key=lambda f: f[0])  # panel by panel, criteria as shown
    assert [(rows[i].answer_id, rows[i].criterion_id) for i in ids] == [
        (sides[p], k) for p, k in order]
    assert [str(rows[i].score) for i in ids] == [scores[f] for f in order]


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
