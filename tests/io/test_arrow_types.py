"""Typed files (Parquet tables, bundle files) are held to the contract's Arrow
types: a column whose type would change what its values mean (integers as
timestamps, booleans as counts) is refused naming file and field, and binary
that is not UTF-8 names its row, in ``import`` and in the audit alike."""

from __future__ import annotations

import hashlib
import json
import shutil

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from clinieval.audit import audit
from clinieval.contract import tabular
from clinieval.demo import demo_bundle
from clinieval.errors import InputError
from clinieval.io.bundle import MANIFEST, content_sha256, read_bundle, snapshot_checksum
from clinieval.io.tables_io import write_table_files
from clinieval.snapshot import conform
from clinieval.sources import read_source


def _replaced(table: pa.Table, column: str, values: pa.Array) -> pa.Table:
    return table.set_column(table.column_names.index(column), column, values)


def _integer_times(ratings: pa.Table) -> pa.Table:
    return _replaced(ratings, "created_at", pa.array(range(ratings.num_rows), pa.int64()))


def _boolean_years(raters: pa.Table) -> pa.Table:
    return _replaced(raters, "experience_years", pa.array([True] * raters.num_rows))


def _binary_criteria(ratings: pa.Table) -> pa.Table:
    values = [v.encode() for v in ratings["criterion_id"].to_pylist()]
    values[4] = b"\xff\xfeaccuracy"
    return _replaced(ratings, "criterion_id", pa.array(values, pa.binary()))


WRONG = {
    "integer created_at": ("ratings", _integer_times, "created_at", None),
    "boolean experience_years": ("raters", _boolean_years, "experience_years", None),
    "non-UTF-8 criterion_id": ("ratings", _binary_criteria, "criterion_id", 5),
}


@pytest.fixture(scope="module")
def demo():
    return read_bundle(demo_bundle())


def _tables_folder(tmp_path, demo, name, change):
    folder = tmp_path / "t"
    write_table_files(demo, folder, "parquet")
    (folder / "criteria.parquet").unlink()
    pq.write_table(change(demo[name]), folder / f"{name}.parquet")
    return folder


def _forged_bundle(tmp_path, name, change):
    """A bundle whose every checksum agrees with the changed file, as a forger
    who recomputes them all would leave it."""
    folder = shutil.copytree(demo_bundle(), tmp_path / "b")
    path = folder / f"{name}.parquet"
    table = change(pq.read_table(path))
    pq.write_table(table, path)
    manifest = json.loads((folder / MANIFEST).read_text())
    entry = manifest["tables"][name]
    entry["sha256"] = hashlib.sha256(path.read_bytes()).hexdigest()
    try:
        entry["content_sha256"] = content_sha256(conform(table, tabular.BY_NAME[name]),
                                                 tabular.BY_NAME[name].key)
    except InputError:  # no longer castable: the file checksum alone reaches the reader
        pass
    manifest["snapshot_sha256"] = snapshot_checksum(
        {k: v["content_sha256"] for k, v in manifest["tables"].items()})
    (folder / MANIFEST).write_text(json.dumps(manifest))
    return folder


def _refused(source, name: str, field: str, row: int | None) -> None:
    for read in (read_source, lambda s: audit(s, bootstrap=50)):
        with pytest.raises(InputError) as err:
            read(source)
        assert err.value.field == field and f"{name}.parquet" in str(err.value)
        assert err.value.row == row


@pytest.mark.parametrize("wrong", list(WRONG))
def test_a_parquet_table_of_the_wrong_type_is_refused(tmp_path, demo, wrong):
    name, change, field, row = WRONG[wrong]
    _refused(_tables_folder(tmp_path, demo, name, change), name, field, row)


@pytest.mark.parametrize("wrong", list(WRONG))
def test_a_bundle_file_of_the_wrong_type_is_refused(tmp_path, wrong):
    name, change, field, row = WRONG[wrong]
    _refused(_forged_bundle(tmp_path, name, change), name, field, row)


@pytest.mark.parametrize(("found", "target", "ok"), [
    (pa.int8(), pa.int16(), True), (pa.int64(), pa.int8(), True),  # range checked later
    (pa.int32(), pa.float64(), True), (pa.string(), pa.timestamp("us", tz="UTC"), True),
    (pa.timestamp("ms"), pa.timestamp("us", tz="UTC"), True), (pa.null(), pa.bool_(), True),
    (pa.int64(), pa.timestamp("us", tz="UTC"), False), (pa.bool_(), pa.int16(), False),
    (pa.float64(), pa.int8(), False), (pa.int64(), pa.string(), False),
    (pa.bool_(), pa.float64(), False), (pa.int8(), pa.bool_(), False),
])
def test_which_arrow_types_convert_to_the_contracts(found, target, ok):
    from clinieval.contract.validate import check_types

    data = pa.table({"x": pa.nulls(1, found)})
    table = tabular.Table("t", pa.schema([pa.field("x", target)]), "x", ())
    if ok:
        check_types(data, table, "f")
    else:
        with pytest.raises(InputError, match="wrong type"):
            check_types(data, table, "f")
