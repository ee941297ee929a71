"""The audit holds every source to the contract ``clinieval import`` holds it
to: one validation, row counts and content checksums checked, and never a
snapshot id the content does not match, whatever way the snapshot comes in
(bundle, zip, tables folder, SQLite file, database URL)."""

from __future__ import annotations

import hashlib
import json
import shutil
import sqlite3
import zipfile

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from clinieval.audit import audit
from clinieval.demo import demo_bundle
from clinieval.errors import InputError
from clinieval.io.bundle import MANIFEST, read_bundle
from clinieval.io.importer import import_snapshot
from clinieval.io.tables_io import write_table_files
from clinieval.sources import read_source
from clinieval.storage import db


def _edited(table: pa.Table, column: str, row: int, value) -> pa.Table:
    values = table.column(column).to_pylist()
    values[row] = value
    return table.set_column(table.column_names.index(column), column,
                            pa.array(values, table.schema.field(column).type))


def _duplicate_rating_id(ratings: pa.Table) -> pa.Table:
    return _edited(ratings, "rating_id", 1, ratings["rating_id"][0].as_py())


def _same_two_answers(prefs: pa.Table) -> pa.Table:
    return _edited(prefs, "answer_b_id", 0, prefs["answer_a_id"][0].as_py())


EDITS = {
    "score 7": ("ratings", lambda t: _edited(t, "score", 0, 7)),
    "duplicate rating ids": ("ratings", _duplicate_rating_id),
    "vote with the same two answers": ("preferences", _same_two_answers),
    "case weight -5": ("cases", lambda t: _edited(t, "weight", 0, -5.0)),
    "risk level 9": ("cases", lambda t: _edited(t, "risk_level", 0, 9)),
    "empty specialty": ("cases", lambda t: _edited(t, "specialty", 0, "")),
    "negative latency": ("answers", lambda t: _edited(t, "latency_s", 0, -1.0)),
}
"""The edits the audit's fast bundle reader let through (issue 29, section 5)."""


def _rechecksummed(folder, name: str, table: pa.Table) -> None:
    """Write ``table`` and bring its file SHA-256 and row count in step, as a
    careful forger would, leaving the content and snapshot checksums stale."""
    path = folder / f"{name}.parquet"
    pq.write_table(table, path)
    manifest = json.loads((folder / MANIFEST).read_text())
    manifest["tables"][name].update(sha256=hashlib.sha256(path.read_bytes()).hexdigest(),
                                    rows=table.num_rows)
    (folder / MANIFEST).write_text(json.dumps(manifest))


@pytest.fixture
def bundle_copy(tmp_path):
    return shutil.copytree(demo_bundle(), tmp_path / "b")


@pytest.mark.parametrize("edit", list(EDITS))
def test_an_edited_and_rechecksummed_bundle_is_refused_by_the_audit(bundle_copy, edit):
    name, change = EDITS[edit]
    _rechecksummed(bundle_copy, name, change(pq.read_table(bundle_copy / f"{name}.parquet")))
    with pytest.raises(InputError) as import_err:
        read_source(bundle_copy)
    with pytest.raises(InputError) as audit_err:
        audit(bundle_copy, bootstrap=50)
    assert str(audit_err.value) == str(import_err.value)


def test_a_manifest_claiming_more_rows_than_the_file_is_refused(bundle_copy):
    manifest = json.loads((bundle_copy / MANIFEST).read_text())
    manifest["tables"]["ratings"]["rows"] = 10**12
    (bundle_copy / MANIFEST).write_text(json.dumps(manifest))
    with pytest.raises(InputError, match="row count differs from the manifest"):
        audit(bundle_copy, bootstrap=50)


def test_a_zipped_edited_bundle_is_refused(bundle_copy, tmp_path):
    name, change = EDITS["score 7"]
    _rechecksummed(bundle_copy, name, change(pq.read_table(bundle_copy / f"{name}.parquet")))
    archive = tmp_path / "b.zip"
    with zipfile.ZipFile(archive, "w") as zf:
        for path in bundle_copy.iterdir():
            zf.write(path, f"b/{path.name}")
    with pytest.raises(InputError, match="content_sha256"):
        audit(archive, bootstrap=50)


def test_a_tables_folder_is_validated_before_the_audit(tmp_path):
    snap = read_bundle(demo_bundle())
    folder = tmp_path / "t"
    write_table_files(snap, folder, "parquet")
    (folder / "criteria.parquet").unlink()
    pq.write_table(_edited(snap["ratings"], "score", 2, 7), folder / "ratings.parquet")
    with pytest.raises(InputError, match="value out of range") as err:
        audit(folder, bootstrap=50)
    assert err.value.row == 3 and "ratings.parquet" in str(err.value)


def test_a_sqlite_file_is_validated_before_the_audit(tmp_path):
    path = tmp_path / "a.db"
    engine = db.make_engine(f"sqlite:///{path}")
    db.upgrade(engine)
    import_snapshot(engine, *read_source(demo_bundle())[:1])
    engine.dispose()
    with sqlite3.connect(path) as conn:  # what a hand-edited file may hold
        conn.execute("UPDATE answers SET latency_s = -1 WHERE rowid = 1")
    for source in (str(path), f"sqlite:///{path}"):
        with pytest.raises(InputError, match="value out of range"):
            audit(source, bootstrap=50)


def test_the_snapshot_id_of_an_audited_bundle_is_its_verified_one(bundle_copy):
    manifest = json.loads((bundle_copy / MANIFEST).read_text())
    assert audit(bundle_copy, bootstrap=50).snapshot["sha256"] == manifest["snapshot_sha256"]
