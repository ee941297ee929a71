"""Storage on a real database (SQLite and PostgreSQL)."""

from __future__ import annotations

import pyarrow as pa
import pytest
import sqlalchemy as sa
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext

from clinieval.io.load import import_snapshot
from clinieval.snapshot import Snapshot, current_ratings
from clinieval.storage import db, sqltables
from clinieval.testing import STAMP, snapshot_from_rows, tiny_snapshot, tiny_tables


def test_migrations_build_exactly_the_declared_schema(engine):
    with engine.connect() as conn:
        diff = compare_metadata(MigrationContext.configure(conn), sqltables.metadata)
    assert diff == []
    assert db.current_revision(engine) == "0003"


def test_sqlite_runs_in_wal_mode_with_foreign_keys(tmp_path):
    engine = db.make_engine(f"sqlite:///{tmp_path / 'x.db'}")
    with engine.connect() as conn:
        assert conn.exec_driver_sql("PRAGMA journal_mode").scalar() == "wal"
        assert conn.exec_driver_sql("PRAGMA foreign_keys").scalar() == 1


def test_round_trip_keeps_every_table(engine):
    snap = tiny_snapshot()
    import_snapshot(engine, snap)
    back = db.read_snapshot(engine)
    for name in snap.tables:
        assert back[name].equals(snap[name]), name


def test_rating_edits_are_kept_as_history(engine):
    import_snapshot(engine, tiny_snapshot())
    edit = tiny_tables()["ratings"][0] | {"rating_id": 500, "revision": 1, "score": 2}
    edit_snap = snapshot_from_rows({"ratings": [edit]})
    import_snapshot(engine, Snapshot({**edit_snap.tables, "criteria": edit_snap["criteria"]
                                      .slice(0, 0)}, {}))
    back = db.read_snapshot(engine)["ratings"]
    same = [r for r in back.to_pylist() if (r["answer_id"], r["rater_id"], r["criterion_id"])
            == (edit["answer_id"], edit["rater_id"], edit["criterion_id"])]
    assert sorted((r["revision"], r["score"]) for r in same) == [(0, -1), (1, 2)]
    current = current_ratings(back).to_pylist()
    assert len(current) == back.num_rows - 1
    assert [r["score"] for r in current if r["rating_id"] in (1, 500)] == [2]


def test_database_refuses_an_answer_from_another_case(engine):
    import_snapshot(engine, tiny_snapshot())
    bad = {"preference_id": 9, "case_id": "case-1", "answer_a_id": "ans-1x",
           "answer_b_id": "ans-2y", "choice": "A", "created_at": STAMP}
    with pytest.raises(sa.exc.IntegrityError), engine.begin() as conn:
        conn.execute(sqltables.preferences.insert(), [bad])


def test_a_failing_load_writes_nothing(engine):
    """Bypass validation and break the last table: the whole load rolls back."""
    rows = tiny_tables()
    rows["preferences"][1]["choice"] = "maybe"
    snap = snapshot_from_rows(rows)
    with pytest.raises(db.StorageError, match="table preferences.*nothing was written"):
        db.load_snapshot(engine, snap)
    assert set(db.counts(engine).values()) == {0}


def test_read_from_empty_database_says_what_to_do(tmp_path):
    engine = db.make_engine(f"sqlite:///{tmp_path / 'empty.db'}")
    with pytest.raises(Exception, match="clinieval db upgrade"):
        db.read_snapshot(engine)


def test_current_ratings_without_edits_is_identity():
    ratings = tiny_snapshot()["ratings"]
    assert current_ratings(ratings) is ratings
    assert isinstance(ratings, pa.Table)
