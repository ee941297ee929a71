"""Row-at-a-time writes (RowStore) on real SQLite and PostgreSQL."""

from __future__ import annotations

import threading

import pytest
import sqlalchemy as sa

from clinieval.errors import InputError
from clinieval.io.importer import import_snapshot
from clinieval.storage import db
from clinieval.storage.rows import RowStore, refusal
from clinieval.storage.schema import snapshot as snapshot_tables
from clinieval.testing import STAMP, tiny_snapshot, tiny_tables


@pytest.fixture
def store(engine):
    import_snapshot(engine, tiny_snapshot())
    return RowStore(engine)


def _rating(**overrides):
    row = {"answer_id": "ans-1x", "rater_id": "rater-1", "criterion_id": "accuracy",
           "score": 1, "revision": 1, "created_at": STAMP}
    return row | overrides


def _ids(engine, table: str) -> list[int]:
    key = snapshot_tables.BY_NAME[table].primary_key.columns.values()[0]
    with engine.connect() as conn:
        return conn.execute(sa.select(key).order_by(key)).scalars().all()


def test_new_ratings_get_the_next_ids_after_imported_ones(store, engine):
    imported = _ids(engine, "ratings")
    ids = store.add_ratings([_rating(), _rating(criterion_id="harmlessness", score=-2)])
    assert ids == [max(imported) + 1, max(imported) + 2]
    stored = {r["rating_id"]: r for r in db.read_snapshot(engine)["ratings"].to_pylist()}
    assert (stored[ids[1]]["criterion_id"], stored[ids[1]]["score"]) == ("harmlessness", -2)


def test_ids_continue_after_a_bundle_with_large_ids(store, engine):
    """A bulk load with explicit ids moves PostgreSQL's sequence past them."""
    big = tiny_tables()["ratings"][0] | {"rating_id": 10_000, "revision": 5}
    from clinieval.testing import snapshot_from_rows

    snap = snapshot_from_rows({"ratings": [big]})
    snap.tables["criteria"] = snap["criteria"].slice(0, 0)
    import_snapshot(engine, snap)
    assert store.add_ratings([_rating()]) == [10_001]


def test_preference_and_judgments_get_ids(store, engine):
    pid = store.add_preference({"case_id": "case-1", "answer_a_id": "ans-1y",
                                "answer_b_id": "ans-1x", "shown_left": "B", "choice": "both_bad",
                                "rater_id": "rater-2", "created_at": STAMP})
    assert pid == 3
    jids = store.add_judgments([{"answer_id": "ans-2x", "judge_model": "judge-1",
                                 "criterion_id": "accuracy", "score": 1.5, "parse_status": "ok"},
                                {"answer_id": "ans-2y", "judge_model": "judge-1",
                                 "criterion_id": "accuracy", "parse_status": "unparsed"}])
    assert jids == [1, 2]
    assert _ids(engine, "judgments") == [1, 2]


@pytest.mark.parametrize(("row", "field", "message"), [
    (_rating(answer_id="ans-9z"), "answer_id", "does not exist"),
    (_rating(score=3), "score", "out of range"),
    (_rating(score="good"), "score", "wrong type"),
    (_rating(rating_id=4), "rating_id", "unknown field"),
    ({"answer_id": "ans-1x", "rater_id": "rater-1", "score": 0}, "criterion_id", "missing"),
])
def test_bad_rows_are_refused_with_table_field_and_nothing_written(store, engine, row, field,
                                                                   message):
    before = _ids(engine, "ratings")
    with pytest.raises(InputError, match=message) as caught:
        store.add_ratings([_rating(criterion_id="harmlessness"), row])
    assert caught.value.source.startswith("ratings")
    assert caught.value.field == field
    assert caught.value.row == 2
    assert _ids(engine, "ratings") == before


def test_a_second_score_in_the_same_revision_names_the_fields_and_value(store):
    store.add_ratings([_rating()])
    with pytest.raises(InputError, match="refused the row.*unique") as caught:
        store.add_ratings([_rating(score=-1)])
    assert caught.value.field == "answer_id, rater_id, criterion_id, revision"
    assert "criterion_id='accuracy'" in str(caught.value)


def test_preference_with_an_answer_of_another_case_is_refused(store):
    with pytest.raises(InputError, match="another case"):
        store.add_preference({"case_id": "case-1", "answer_a_id": "ans-1x",
                              "answer_b_id": "ans-2y", "choice": "A"})


@pytest.mark.parametrize(("column", "value", "kind", "field"), [
    ("score", 7, "check", "score"),
    ("rater_id", "nobody", "foreign key", "rater_id"),
])
def test_constraint_violations_become_input_errors(engine, column, value, kind, field):
    """What the database itself refuses (validation bypassed) is named too."""
    import_snapshot(engine, tiny_snapshot())
    row = _rating() | {column: value}
    with pytest.raises(sa.exc.IntegrityError) as caught, engine.begin() as conn:
        conn.execute(snapshot_tables.ratings.insert(), row)
    error = refusal(caught.value, "ratings", row, 0)
    assert isinstance(error, InputError)
    assert kind in str(error)
    assert field in error.field.split(", ")
    assert repr(value) in str(error)


def test_entities_identical_rows_are_skipped_changed_ones_refused(store, engine):
    criteria = tiny_tables()["criteria"]
    store.add_entities("criteria", criteria)  # the stored rubric again: fine
    store.add_entities("models", [{"model_id": "model-z", "display_name": "Model Z"}])
    store.add_entities("answers", [{"answer_id": "ans-1z", "case_id": "case-1",
                                    "model_id": "model-z", "text": "Z."}])
    changed = [dict(criteria[0]) | {"definition": "Something else entirely."}]
    with pytest.raises(InputError, match="different definition") as caught:
        store.add_entities("criteria", changed)
    assert caught.value.row == criteria[0]["criterion_id"]
    assert caught.value.field == "definition"
    assert db.counts(engine)["answers"] == 5


def test_entities_refer_only_to_stored_rows(store):
    with pytest.raises(InputError, match="model that does not exist"):
        store.add_entities("answers", [{"answer_id": "ans-1q", "case_id": "case-1",
                                        "model_id": "model-q"}])
    with pytest.raises(ValueError, match="ratings"):
        store.add_entities("ratings", [])


def test_concurrent_writers_lose_and_duplicate_nothing(store, engine):
    """Eight threads append at once; two of them race for the same
    (answer, rater, criterion, revision): exactly one of those two wins."""
    answers = [f"ans-{c}{m}" for c in "12" for m in "xy"]
    errors: list[Exception] = []
    returned: list[int] = []
    lock = threading.Lock()

    def write(worker: int) -> None:
        revision = 10 + worker if worker < 7 else 10  # workers 0 and 7 collide
        rows = [_rating(answer_id=a, criterion_id=c, revision=revision, score=worker % 5 - 2)
                for a in answers for c in ("accuracy", "harmlessness")]
        try:
            for start in range(0, len(rows), 2):
                ids = store.add_ratings(rows[start:start + 2])
                with lock:
                    returned.extend(ids)
        except InputError as err:
            with lock:
                errors.append(err)

    threads = [threading.Thread(target=write, args=(w,)) for w in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(errors) == 1 and "unique" in str(errors[0])
    stored = _ids(engine, "ratings")
    # The loser is refused on its first pair (the winner wrote it first), so
    # seven workers wrote all 8 rows each, next to the 16 imported ones.
    assert len(returned) == len(set(returned)) == 7 * 8
    assert sorted(returned) == stored[16:]
    assert len(stored) == 16 + 7 * 8


def test_a_sqlite_engine_without_clinieval_settings_is_refused(tmp_path):
    with pytest.raises(ValueError, match="make_engine"):
        RowStore(sa.create_engine(f"sqlite:///{tmp_path / 'plain.db'}"))


def _pairwise(answer_b_id: str) -> dict:
    return {"answer_id": "ans-1x", "answer_b_id": answer_b_id, "judge_model": "judge-1",
            "criterion_id": "preference", "judge_kind": "pairwise", "choice": "A",
            "score": 1.0, "parse_status": "ok"}


def test_pairwise_judgment_refers_to_a_stored_answer_b(store, engine):
    """Answer B is looked up among the stored answers like answer A: a stored
    one is accepted, a missing one refused by validation naming the field."""
    assert store.add_judgments([_pairwise("ans-1y")]) == [1]
    with pytest.raises(InputError, match="refers to a.* answer that does not exist") as caught:
        store.add_judgments([_pairwise("ans-9z")])
    assert (caught.value.source, caught.value.row, caught.value.field) == \
        ("judgments", 1, "answer_b_id")
    assert _ids(engine, "judgments") == [1]
