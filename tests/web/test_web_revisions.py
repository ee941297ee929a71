"""Edits kept as revisions over HTTP, on SQLite and PostgreSQL: edited ratings
and votes append a revision, the audit and the history read the latest, and a
vote counts once however often it is edited."""

from __future__ import annotations

import re

import pytest
import sqlalchemy as sa
from fastapi.testclient import TestClient

from clinieval.audit.data import from_bundle, from_snapshot
from clinieval.io.bundle import read_bundle
from clinieval.platform import events
from clinieval.platform.study_export import export_study, study_snapshot
from clinieval.storage.schema import platform as platform_tables
from clinieval.storage.schema import snapshot as snapshot_tables
from clinieval.web.testing import member_client as member
from tests.web.support import answer_form, count, csrf, rows, take

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")


def test_a_second_tab_submitting_a_submitted_task_is_told_it_made_a_revision(app, engine):
    """Its answers became revision 1 while it said only "Saved. Thank you."."""
    c = member(app, engine, "x", "clinician")
    url = take(c)
    # Two tabs on the task, each sending its form as the page does ("next": auto).
    first = answer_form(c, url) | {"next": "auto"}
    second = answer_form(c, url, **{"s1.accuracy": "2"}) | {"next": "auto"}
    assert c.post(url, data=first).headers["location"].endswith("?saved=1")
    r = c.post(url, data=second)
    assert r.status_code == 303 and r.headers["location"].endswith("?saved=2"), r.headers
    assert "Saved as a new revision of a task you had submitted already" in c.get(
        r.headers["location"]).text
    with engine.connect() as conn:
        assert sorted(set(conn.execute(sa.select(snapshot_tables.ratings.c.revision))
                          .scalars())) == [0, 1]


def test_an_edit_appends_a_revision_and_keeps_the_first(app, engine):
    c = member(app, engine, "x", "clinician")
    url = take(c)
    assert c.post(url, data=answer_form(c, url)).status_code == 303
    edit = answer_form(c, url)
    assert 'value="1" checked' in c.get(url).text
    edit["s1.accuracy"] = "2"
    r = c.post(url, data=edit)
    assert r.headers["location"].endswith("/history?saved=1")
    with engine.connect() as conn:
        ratings = snapshot_tables.ratings
        rows = conn.execute(sa.select(ratings.c.revision, ratings.c.score)
                            .where(ratings.c.criterion_id == "accuracy")
                            .order_by(ratings.c.revision)).all()
    assert [tuple(r) for r in rows] == [(0, 1), (1, 2)]
    assert count(engine, snapshot_tables.ratings) == 10
    assert "Revision" in c.get("/s/x/history").text


def test_an_edited_vote_appends_a_revision_and_the_audit_uses_the_latest(app, engine, tmp_path):
    c = member(app, engine, "x", "clinician")
    url = take(c, "pair")
    assert c.post(url, data=answer_form(c, url, choice="A")).status_code == 303
    same = c.post(url, data=answer_form(c, url, choice="A"))  # nothing changed: no new row
    assert same.status_code == 303
    assert len(rows(engine, snapshot_tables.preferences, "preference_id")) == 1
    assert 'value="A" checked' in c.get(url).text
    r = c.post(url, data=answer_form(c, url, choice="tie"), headers={"Accept": "application/json"})
    assert r.status_code == 200 and r.json()["revision"] == 1
    assert 'value="tie" checked' in c.get(url).text  # the task page shows the latest vote
    votes = rows(engine, snapshot_tables.preferences, "revision", "choice")
    assert votes == [(0, votes[0][1]), (1, "tie")] and votes[0][1] in ("A", "B")
    history = c.get("/s/x/history").text
    assert re.search(r"<td>1</td>", history)  # the pair task's revision
    # The export keeps both rows; the audit (live view and bundle) counts one vote: the tie.
    bundle = tmp_path / "export"
    export_study(engine, "x", bundle, salt="s")
    assert read_bundle(bundle)["preferences"].num_rows == 2
    for data in (from_bundle(bundle), from_snapshot(study_snapshot(engine, "x"))):
        assert data.pref_outcome.tolist() == [2]  # index of "tie" in tables.CHOICES


def _history_rows(c: TestClient) -> list[tuple[str, str, int, str]]:
    html = c.get("/s/x/history").text
    return [(token, kind, int(revision), when) for kind, revision, when, token in re.findall(
        r'<tr><td>(Rating|Comparison)</td><td>.*?</td>\s*<td>(\d+)</td><td>([^<]*)</td>\s*'
        r'<td><a href="/s/x/t/([^"]+)">', html, re.S)]


def _statements_of(engine, fn) -> int:
    """Statements that ``fn`` ran through SQLAlchemy's execute."""
    seen = []

    def count(*_args) -> None:
        seen.append(1)

    sa.event.listen(engine, "before_cursor_execute", count)
    try:
        fn()
    finally:
        sa.event.remove(engine, "before_cursor_execute", count)
    return len(seen)


def test_the_history_lists_each_task_with_its_latest_revision_in_one_statement(app, engine):
    c = member(app, engine, "x", "clinician")
    first = take(c, "rating")
    assert c.post(first, data=answer_form(c, first)).status_code == 303
    one_task = _statements_of(engine, lambda: _history_rows(c))
    for score in ("2", "0"):  # two edits: revision 2
        assert c.post(first, data=answer_form(c, first, score=score)).status_code == 303
    pair = take(c, "pair")
    assert c.post(pair, data=answer_form(c, pair, choice="A")).status_code == 303
    # Only the vote changes: the ratings stay at revision 0, the task is at 1.
    assert c.post(pair, data=answer_form(c, pair, choice="tie")).status_code == 303
    second_pair = take(c, "pair")
    assert c.post(second_pair, data=answer_form(c, second_pair, choice="A")).status_code == 303
    for score in ("2", "0"):  # only answer B's first criterion changes, twice: revision 2
        form = answer_form(c, second_pair, choice="A")
        form[min(k for k in form if k.startswith("s2."))] = score
        assert c.post(second_pair, data=form).status_code == 303
    last = take(c, "rating")
    assert c.post(last, data=answer_form(c, last)).status_code == 303
    # Another clinician of the study, and one of another study, with tasks of their own.
    for other in (member(app, engine, "x", "clinician"), member(app, engine, "y", "clinician")):
        study = "x" if other.get("/s/x").status_code == 200 else "y"
        url = other.post(f"/s/{study}/next", data={"csrf": csrf(other), "kind": "rating"}
                         ).headers["location"]
        assert other.post(url, data=answer_form(other, url)).status_code == 303

    token = {url: url.rsplit("/", 1)[1] for url in (first, pair, second_pair, last)}
    with engine.connect() as conn:
        tl = platform_tables.task_leases
        user_id = conn.execute(sa.select(tl.c.user_id).where(tl.c.token == token[first])).scalar()
        rater_id = conn.execute(sa.select(platform_tables.users.c.rater_id).where(
            platform_tables.users.c.user_id == user_id)).scalar()
        expected = {}
        for lease in conn.execute(sa.select(tl).where(tl.c.status == "submitted",
                                                      tl.c.user_id == user_id)):
            rated = conn.execute(sa.select(snapshot_tables.ratings.c.created_at).where(
                snapshot_tables.ratings.c.rater_id == rater_id,
                snapshot_tables.ratings.c.answer_id.in_(
                    [x for x in (lease.answer_id, lease.answer_b_id) if x]))).scalars().all()
            voted = conn.execute(sa.select(snapshot_tables.preferences.c.created_at).where(
                snapshot_tables.preferences.c.preference_id == lease.preference_id)).scalars().all()
            when = max(events.aware(x) for x in rated + voted).strftime("%Y-%m-%d %H:%M UTC")
            expected[lease.token] = when
    assert _history_rows(c) == [  # newest task first, none of the others'
        (token[last], "Rating", 0, expected[token[last]]),
        (token[second_pair], "Comparison", 2, expected[token[second_pair]]),
        (token[pair], "Comparison", 1, expected[token[pair]]),
        (token[first], "Rating", 2, expected[token[first]]),
    ]
    # One statement however many tasks (it was one more per task, and per vote).
    assert _statements_of(engine, lambda: _history_rows(c)) == one_task


def test_a_vote_edit_with_a_bad_choice_writes_nothing(app, engine):
    c = member(app, engine, "x", "clinician")
    url = take(c, "pair")
    c.post(url, data=answer_form(c, url, choice="B"))
    r = c.post(url, data=answer_form(c, url, choice="maybe"),
               headers={"Accept": "application/json"})
    assert r.status_code == 422 and r.json()["error"]["field"] == "choice"
    assert len(rows(engine, snapshot_tables.preferences, "preference_id")) == 1


def test_each_vote_counts_once_in_pair_balancing_and_progress(app, engine):
    from clinieval.platform import live
    from clinieval.platform.assignment import _pair_load
    from clinieval.platform.config import study_config

    c = member(app, engine, "x", "clinician")
    url = take(c, "pair")
    c.post(url, data=answer_form(c, url, choice="A"))
    c.post(url, data=answer_form(c, url, choice="B"))
    c.post(url, data=answer_form(c, url, choice="both_bad"))
    (a, b), = set(rows(engine, snapshot_tables.preferences, "answer_a_id", "answer_b_id"))
    with engine.connect() as conn:
        assert _pair_load(conn, a, b) == 1
        cfg = study_config(conn, "x")
    people = live.progress(engine, cfg, per_clinician=True)["clinicians"]
    assert [p["votes"] for p in people] == [1]
