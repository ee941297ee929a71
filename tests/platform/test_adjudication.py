"""Adjudication services on SQLite and PostgreSQL: which answers are disputed,
verdicts as rows with history, and every refusal writing nothing."""

from __future__ import annotations

import threading

import pytest
import sqlalchemy as sa
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from clinieval.errors import InputError
from clinieval.platform import accounts, adjudication
from clinieval.storage.schema import platform as platform_tables
from clinieval.storage.schema import snapshot as snapshot_tables
from clinieval.web.testing import make_studies
from tests.web.support import count, plant_dispute, rows

KEY = b"k" * 32
GOOD = {"verdict.accuracy": "fail", "verdict.harmlessness": "pass",
        "reason": "The dose is wrong; nothing in it harms.", "supersedes": "0"}


@pytest.fixture
def study(engine):
    make_studies(engine)
    return engine


def _user(engine, role: str, study_id: str = "x") -> str:
    token = accounts.create_invitation(engine, study_id, role)
    return accounts.register(engine, token, f"{role}-{threading.get_ident()}-"
                             f"{count(engine, platform_tables.users)}@example.org",
                             "a long passphrase")


def _ref(answer: str, study_id: str = "x") -> str:
    return adjudication.task_ref(KEY, study_id, answer)


def _ratings(engine) -> list[tuple]:
    return rows(engine, snapshot_tables.ratings, "rating_id", "answer_id", "rater_id",
                "criterion_id", "score", "revision", "comment")


def test_disagreement_across_the_fail_line_on_safety_critical_criteria_is_disputed(study):
    answer = plant_dispute(study)
    other = plant_dispute(study, which=1, ratings={  # -1 against 0: not across the line
        "r_calm_a": {"harmlessness": (-1, "x")}, "r_calm_b": {"harmlessness": (0, "")}})
    with study.connect() as conn:
        found = adjudication.disputed(conn, "x")
        assert adjudication.disputed(conn, "y") == {}
    # completeness (-1 against +1) is not safety-critical; the other answer never crosses
    assert found == {answer: ("accuracy", "harmlessness")}
    assert other not in found


def test_a_revised_rating_ends_the_dispute(study):
    answer = plant_dispute(study)
    with study.begin() as conn:
        conn.execute(snapshot_tables.ratings.insert(), [
            {"answer_id": answer, "rater_id": "r_dispute_a", "criterion_id": c, "score": 1,
             "revision": 1} for c in ("harmlessness", "accuracy")])
    with study.connect() as conn:
        assert adjudication.disputed(conn, "x") == {}


def test_a_verdict_is_rows_and_a_new_verdict_supersedes_without_overwriting(study):
    answer = plant_dispute(study)
    before = _ratings(study)
    judge = _user(study, "adjudicator")
    first = adjudication.submit(study, KEY, "x", judge, _ref(answer), GOOD)
    assert first.written and len(first.ids) == 2
    second = adjudication.submit(study, KEY, "x", judge, _ref(answer), {
        **GOOD, "verdict.harmlessness": "fail", "reason": "On review, harmful.",
        "supersedes": str(max(first.ids))})
    stored = rows(study, snapshot_tables.adjudications, "adjudication_id", "criterion_id",
                  "verdict", "reason", "supersedes")
    by_id = {r[0]: r for r in stored}
    assert len(stored) == 4
    assert [by_id[i][2:4] for i in first.ids] == [("fail", GOOD["reason"]),
                                                  ("pass", GOOD["reason"])]
    assert sorted(by_id[i][4] for i in second.ids) == sorted(first.ids)
    assert _ratings(study) == before  # ratings untouched
    view = adjudication.task_view(study, KEY, "x", _rater(study, judge), _ref(answer))
    assert [h.standing for h in view.history] == [True, True, False, False]
    assert {c.criterion_id: c.verdict for c in view.criteria if c.disputed} == {
        "accuracy": "fail", "harmlessness": "fail"}


def _rater(engine, user_id: str) -> str:
    with engine.connect() as conn:
        return conn.execute(sa.select(platform_tables.users.c.rater_id).where(
            platform_tables.users.c.user_id == user_id)).scalar_one()


def test_the_same_submission_sent_again_writes_nothing(study):
    answer = plant_dispute(study)
    judge = _user(study, "adjudicator")
    first = adjudication.submit(study, KEY, "x", judge, _ref(answer), GOOD)
    again = adjudication.submit(study, KEY, "x", judge, _ref(answer), GOOD)
    assert again == adjudication.Outcome(first.ids, False)
    assert count(study, snapshot_tables.adjudications) == 2


@pytest.mark.parametrize("role", ["clinician", "viewer", "admin"])
def test_only_the_studys_adjudicator_records_a_verdict(study, role):
    answer = plant_dispute(study)
    refused = [_user(study, role), _user(study, "adjudicator", "y")]
    for user in refused:
        with pytest.raises(adjudication.Refused) as err:
            adjudication.submit(study, KEY, "x", user, _ref(answer), GOOD)
        assert err.value.field == "role"
    assert count(study, snapshot_tables.adjudications) == 0


def test_an_answer_that_is_not_disputed_is_refused_naming_the_task(study):
    plant_dispute(study)
    calm = plant_dispute(study, which=1, ratings={"r_calm": {"harmlessness": (2, "fine")}})
    judge = _user(study, "adjudicator")
    with pytest.raises(adjudication.Conflict) as err:
        adjudication.submit(study, KEY, "x", judge, _ref(calm), GOOD)
    assert err.value.field == "task"
    with pytest.raises(adjudication.NotFound) as err:  # a reference of no answer here
        adjudication.submit(study, KEY, "x", judge, "0" * 32, GOOD)
    assert err.value.field == "task"
    assert count(study, snapshot_tables.adjudications) == 0


@pytest.mark.parametrize(("change", "field"), [
    ({"verdict.accuracy": None}, "verdict.accuracy"),
    ({"verdict.harmlessness": "maybe"}, "verdict.harmlessness"),
    ({"verdict.completeness": "fail"}, "verdict.completeness"),
    ({"reason": "   "}, "reason"),
    ({"reason": "bad\x00reason"}, "reason"),
    ({"reason": "x" * 5001}, "reason"),
    ({"supersedes": "-1"}, "supersedes"),
    ({"supersedes": None}, "supersedes"),
    ({"supersedes": "7"}, "supersedes"),  # no verdict 7 was ever shown: a stale page
])
def test_a_bad_field_is_named_and_nothing_is_written(study, change, field):
    answer = plant_dispute(study)
    judge = _user(study, "adjudicator")
    form = {k: v for k, v in {**GOOD, **change}.items() if v is not None}
    with pytest.raises(InputError) as err:
        adjudication.submit(study, KEY, "x", judge, _ref(answer), form)
    assert err.value.field == field
    assert count(study, snapshot_tables.adjudications) == 0


def test_a_page_older_than_the_newest_verdict_is_refused(study):
    answer = plant_dispute(study)
    one, two = _user(study, "adjudicator"), _user(study, "adjudicator")
    adjudication.submit(study, KEY, "x", one, _ref(answer), GOOD)
    with pytest.raises(adjudication.Conflict) as err:  # two saw the page before one's verdict
        adjudication.submit(study, KEY, "x", two, _ref(answer), GOOD)
    assert err.value.field == "supersedes"
    assert count(study, snapshot_tables.adjudications) == 2


def test_conflicting_verdicts_submitted_at_once_land_one(study):
    """Two adjudicators submit opposite verdicts from the same page at the
    same moment: exactly one is written, the other is refused naming
    ``supersedes``, on either database."""
    answer = plant_dispute(study)
    judges = [_user(study, "adjudicator") for _ in range(2)]
    forms = [GOOD, {**GOOD, "verdict.accuracy": "pass", "verdict.harmlessness": "fail",
                    "reason": "The opposite view."}]
    start, results = threading.Barrier(2), [None, None]

    def go(i: int) -> None:
        start.wait()
        try:
            results[i] = adjudication.submit(study, KEY, "x", judges[i], _ref(answer), forms[i])
        except InputError as err:
            results[i] = err

    threads = [threading.Thread(target=go, args=(i,)) for i in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    written = [r for r in results if isinstance(r, adjudication.Outcome)]
    refused = [r for r in results if isinstance(r, InputError)]
    assert len(written) == 1 and written[0].written
    assert len(refused) == 1 and refused[0].field == "supersedes"
    stored = rows(study, snapshot_tables.adjudications, "rater_id", "verdict")
    assert len(stored) == 2 and len({r[0] for r in stored}) == 1


_form_values = st.one_of(st.none(), st.sampled_from(["fail", "pass", "", "0", "1"]),
                         st.text(max_size=30))


@settings(max_examples=40, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(form=st.fixed_dictionaries({}, optional={
    "verdict.accuracy": _form_values, "verdict.harmlessness": _form_values,
    "verdict.completeness": _form_values, "reason": _form_values, "supersedes": _form_values,
    "other": _form_values}))
def test_any_form_is_recorded_whole_or_refused_naming_a_field(study_once, form):
    engine, judge, answer = study_once
    form = {k: v for k, v in form.items() if v is not None}
    before = count(engine, snapshot_tables.adjudications)
    try:
        outcome = adjudication.submit(engine, KEY, "x", judge, _ref(answer), form)
    except InputError as err:
        assert err.field
        assert count(engine, snapshot_tables.adjudications) == before
        return
    assert count(engine, snapshot_tables.adjudications) == before + (2 if outcome.written else 0)


@pytest.fixture
def study_once(study):
    return study, _user(study, "adjudicator"), plant_dispute(study)
