"""Storage on a real database (SQLite and PostgreSQL)."""

from __future__ import annotations

import time
from datetime import UTC, datetime

import pyarrow as pa
import pytest
import sqlalchemy as sa
from alembic import command
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from alembic.script import ScriptDirectory

from clinieval.contract import tabular, vocabulary
from clinieval.errors import InputError
from clinieval.io.importer import import_snapshot
from clinieval.snapshot import Snapshot, current_ratings
from clinieval.sources import read_url
from clinieval.storage import db, sqlite_read
from clinieval.storage.rows import RowStore
from clinieval.storage.schema import metadata
from clinieval.storage.schema import snapshot as snapshot_tables
from clinieval.testing import STAMP, snapshot_from_rows, tiny_snapshot, tiny_tables


def test_migrations_build_exactly_the_declared_schema(engine):
    with engine.connect() as conn:
        diff = compare_metadata(MigrationContext.configure(conn), metadata)
    assert diff == []
    head = ScriptDirectory.from_config(db.alembic_config(engine)).get_current_head()
    assert db.current_revision(engine) == head


def test_database_foreign_keys_are_the_contracts_references():
    """The database's foreign keys are built from the contract's references
    (the validator's list), so neither has one the other lacks."""
    for table in tabular.ALL:
        declared = {(ref.column, *ref.same) for ref in table.references}
        built = {tuple(column.name for column in key.columns)
                 for key in snapshot_tables.BY_NAME[table.name].foreign_key_constraints}
        assert built == declared, table.name


def test_upgrade_keeps_stored_ids_and_continues_after_them(db_url):
    """Rows loaded under 0001 (client ids) keep them; 0002 then assigns the next."""
    engine = db.make_engine(db_url)
    db.upgrade(engine, "0001")
    snap = tiny_snapshot()
    with engine.begin() as conn:
        for table in tabular.ALL:
            if not sa.inspect(conn).has_table(table.name):
                continue  # a table added later (adjudications, 0018): empty in tiny_snapshot
            # Only the columns 0001 had: later migrations add (and fill) the rest.
            at_0001 = {c["name"] for c in sa.inspect(conn).get_columns(table.name)}
            rows = [{k: v for k, v in row.items() if k in at_0001}
                    for row in snap[table.name].to_pylist()]
            if rows:
                conn.execute(snapshot_tables.BY_NAME[table.name].insert(), rows)
    db.upgrade(engine)  # through 0002 and on: later revisions keep the ids too
    assert db.read_snapshot(engine)["ratings"].equals(snap["ratings"])
    assert RowStore(engine).add_ratings([{"answer_id": "ans-1x", "rater_id": "rater-1",
                                          "criterion_id": "accuracy", "score": 0,
                                          "revision": 1}]) == [17]
    engine.dispose()


def test_sqlite_runs_in_wal_mode_with_foreign_keys(tmp_path):
    engine = db.make_engine(f"sqlite:///{tmp_path / 'x.db'}")
    with engine.connect() as conn:
        assert conn.exec_driver_sql("PRAGMA journal_mode").scalar() == "wal"
        assert conn.exec_driver_sql("PRAGMA foreign_keys").scalar() == 1


def _wal_pages_written(engine, rows: int) -> None:
    with engine.begin() as conn:
        conn.execute(sa.text("CREATE TABLE IF NOT EXISTS blobs (b BLOB)"))
    for _ in range(rows // 100):  # a commit per 100 rows of 4 KiB: ~100 pages each
        with engine.begin() as conn:
            conn.execute(sa.text("INSERT INTO blobs VALUES (randomblob(4096))"), [{}] * 100)


@pytest.mark.parametrize("background", [True, False])
def test_checkpoints_run_on_their_own_thread_while_serving(tmp_path, background):
    """With checkpoints in the background, 2,000 pages of commits (past
    SQLite's own threshold of 1,000, below the fallback of 10,000) reach
    the database file by the checkpointing thread, not by a commit: without
    it, the same commits under the same setting stay in the WAL."""
    path = tmp_path / "c.db"
    engine = db.make_engine(f"sqlite:///{path}")
    with engine.connect() as conn:  # WAL mode is a property of the file
        conn.exec_driver_sql("SELECT 1")
    if background:
        with db.checkpoints_in_background(engine, every_s=0.05):
            with engine.connect() as conn:
                assert conn.exec_driver_sql("PRAGMA wal_autocheckpoint").scalar() == \
                    db.WAL_FALLBACK_PAGES
            _wal_pages_written(engine, 2000)
            deadline = time.monotonic() + 10
            while path.stat().st_size < 2000 * 4096 and time.monotonic() < deadline:
                time.sleep(0.05)
            assert path.stat().st_size >= 2000 * 4096
        with engine.connect() as conn:  # the usual threshold is back afterwards
            assert conn.exec_driver_sql("PRAGMA wal_autocheckpoint").scalar() == 1000
    else:
        engine = db.make_engine(f"sqlite:///{path}")
        sa.event.listen(engine, "connect", lambda c, _r: c.execute(
            f"PRAGMA wal_autocheckpoint={db.WAL_FALLBACK_PAGES}"))
        _wal_pages_written(engine, 2000)
        time.sleep(0.3)
        assert path.stat().st_size < 100 * 4096
    engine.dispose()


def test_sqlite_connections_keep_their_page_cache_warm(tmp_path):
    """The server does its SQLite work a request at a time: the pool hands out
    the connection returned last (SQLite empties a connection's whole cache
    once another one has written), with room for a large study's pages."""
    engine = db.make_engine(f"sqlite:///{tmp_path / 'x.db'}")
    first, second = engine.connect(), engine.connect()
    driver = second.connection.driver_connection
    first.close()
    second.close()  # returned last: handed out next (a FIFO pool would give `first`'s)
    with engine.connect() as conn:
        assert conn.connection.driver_connection is driver
        assert conn.exec_driver_sql("PRAGMA cache_size").scalar() == -db.SQLITE_CACHE_KIB
    engine.dispose()
    for url in ("sqlite://", "sqlite:///:memory:"):  # no pool of several connections there
        memory = db.make_engine(url)
        with memory.connect() as conn:
            assert conn.exec_driver_sql("SELECT 1").scalar() == 1
        memory.dispose()


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
        conn.execute(snapshot_tables.preferences.insert(), [bad])


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


def test_sqlite_files_are_read_without_sqlalchemy_to_the_same_snapshot(tmp_path):
    url = f"sqlite:///{tmp_path / 'x.db'}"
    engine = db.make_engine(url)
    db.upgrade(engine)
    import_snapshot(engine, tiny_snapshot())
    assert sqlite_read.sqlite_path(url) == tmp_path / "x.db"
    fast, slow = read_url(url), db.read_snapshot(engine)
    assert fast.meta == slow.meta
    for table in tabular.ALL:
        assert fast[table.name].equals(slow[table.name]), table.name
    engine.dispose()


@pytest.mark.parametrize("url", ["sqlite://", "sqlite:///:memory:", "sqlite+pysqlite:///x.db",
                                 "sqlite:///x.db?mode=ro", "sqlite:///a%20b.db",
                                 "postgresql://localhost/x"])
def test_other_database_urls_go_through_sqlalchemy(url):
    assert sqlite_read.sqlite_path(url) is None


def test_a_missing_or_empty_sqlite_file_says_what_to_do(tmp_path):
    (tmp_path / "empty.db").touch()
    for name in ("missing.db", "empty.db"):
        with pytest.raises(Exception, match="clinieval db upgrade"):
            read_url(f"sqlite:///{tmp_path / name}")


def test_current_ratings_without_edits_is_identity():
    ratings = tiny_snapshot()["ratings"]
    assert set(ratings.column("revision").to_pylist()) == {0}  # no edits in the fixture
    assert current_ratings(ratings) is ratings
    edit = ratings.slice(0, 1).to_pylist()[0] | {"rating_id": 99, "revision": 1}
    edited = pa.concat_tables([ratings, pa.Table.from_pylist([edit], schema=ratings.schema)])
    ids = current_ratings(edited).column("rating_id").to_pylist()
    assert len(ids) == ratings.num_rows and 99 in ids and 1 not in ids


def _refused(engine, table: str, row: dict) -> bool:
    try:
        with engine.begin() as conn:
            conn.execute(snapshot_tables.BY_NAME[table].insert(), row)
    except sa.exc.IntegrityError:
        return True
    return False


def test_database_checks_accept_exactly_the_vocabulary(engine):
    """The CHECK constraints come from tables.py: every listed value is
    accepted, its neighbours are not (inserted bypassing validation)."""
    import_snapshot(engine, tiny_snapshot())
    rating = {"answer_id": "ans-2y", "rater_id": "rater-2", "criterion_id": "accuracy"}
    scores = (*vocabulary.SCORES, vocabulary.SCORE_MIN - 1, vocabulary.SCORE_MAX + 1)
    for revision, score in enumerate(scores, start=1):
        refused = _refused(engine, "ratings", rating | {"score": score, "revision": revision})
        assert refused == (score not in vocabulary.SCORES), score
    pref = {"case_id": "case-2", "answer_a_id": "ans-2x", "answer_b_id": "ans-2y"}
    for choice in (*vocabulary.CHOICES, "both_good", "a"):
        assert _refused(engine, "preferences", pref | {"choice": choice}) == (
            choice not in vocabulary.CHOICES), choice
    for side in (*vocabulary.SIDES, None, "C"):
        assert _refused(engine, "preferences", pref | {"choice": "tie", "shown_left": side}) == (
            side == "C"), side
    judgment = {"answer_id": "ans-2x", "judge_model": "j", "criterion_id": "accuracy"}
    for status in (*vocabulary.PARSE_STATUSES, "OK", "timeout"):
        assert _refused(engine, "judgments", judgment | {"parse_status": status}) == (
            status not in vocabulary.PARSE_STATUSES), status


def _criteria_only(rows: list[dict]) -> Snapshot:
    return snapshot_from_rows({"criteria": rows})


def test_appended_criteria_identical_are_skipped_changed_are_named(engine):
    import_snapshot(engine, tiny_snapshot())
    criteria = tiny_tables()["criteria"]
    assert import_snapshot(engine, _criteria_only(criteria))["criteria"] == 0
    changed = [dict(c) for c in criteria]
    changed[1]["anchor_p2"] = "Reworded anchor."
    with pytest.raises(InputError, match="different definition") as caught:
        import_snapshot(engine, _criteria_only(changed), sources={"criteria": "crit.csv"})
    assert (caught.value.source, caught.value.row, caught.value.field) == (
        "crit.csv", criteria[1]["criterion_id"], "anchor_p2")


def test_bulk_rows_without_ids_get_them_from_the_database(engine):
    import_snapshot(engine, tiny_snapshot())
    base = tiny_tables()["ratings"][0]
    new = [base | {"rating_id": None, "revision": 1},
           base | {"rating_id": 40, "revision": 2},
           base | {"rating_id": None, "revision": 3}]
    prefs = [tiny_tables()["preferences"][0] | {"preference_id": None}]
    snap = snapshot_from_rows({"ratings": new, "preferences": prefs})
    import_snapshot(engine, Snapshot({**snap.tables, "criteria": snap["criteria"].slice(0, 0)}))
    back = db.read_snapshot(engine)
    ids = back["ratings"].column("rating_id").to_pylist()
    assert len(ids) == len(set(ids)) == 19 and None not in ids and 40 in ids
    assert back["preferences"].column("preference_id").to_pylist() == [1, 2, 3]
    # Rows without an id may arrive again: they are new events, not duplicates.
    fields = {k: v for k, v in base.items() if k != "rating_id"}
    assert RowStore(engine).add_ratings([fields | {"revision": 4}])[0] > 40


def test_column_wise_read_keeps_awkward_values_exactly(engine):
    """Empty text vs null, quotes, commas, newlines, unicode separators,
    booleans, exact floats and microsecond timestamps survive the read."""
    import_snapshot(engine, tiny_snapshot())
    awkward = ["", None, 'say "no", twice', "line\nbreak\r\nend", "sep\u2028x", "∅ ü 中"]
    with engine.begin() as conn:
        conn.execute(snapshot_tables.studies.insert(), [
            {"study_id": f"s{i}", "name": "n", "description": text, "blinded": [True, False,
             None][i % 3], "created_at": datetime(2024, 2, 29, 23, 59, 59, 999_999 - i, UTC)}
            for i, text in enumerate(awkward)])
        conn.execute(snapshot_tables.models.insert(), [
            {"model_id": "m-float", "price_input_per_m": 0.1 + 0.2,
             "price_output_per_m": -1.5e-300}])
    back = db.read_snapshot(engine)
    studies = {r["study_id"]: r for r in back["studies"].to_pylist()}
    assert [studies[f"s{i}"]["description"] for i in range(len(awkward))] == awkward
    assert [studies[f"s{i}"]["blinded"] for i in range(3)] == [True, False, None]
    assert studies["s5"]["created_at"] == datetime(2024, 2, 29, 23, 59, 59, 999_994, UTC)
    model = next(r for r in back["models"].to_pylist() if r["model_id"] == "m-float")
    assert (model["price_input_per_m"], model["price_output_per_m"]) == (0.1 + 0.2, -1.5e-300)


def test_downgrade_to_client_ids_and_back_keeps_every_row(engine):
    import_snapshot(engine, tiny_snapshot())
    config = db.alembic_config(engine)
    with engine.begin() as conn:
        config.attributes["connection"] = conn
        command.downgrade(config, "0001")
    assert db.current_revision(engine) == "0001"
    db.upgrade(engine)
    back = db.read_snapshot(engine)
    for name in ("ratings", "preferences"):
        assert back[name].equals(tiny_snapshot()[name]), name
