"""Our own tables as CSV, JSONL or Parquet files: ``<folder>/<table>.<ext>``.

Readers check the bytes (empty file, UTF-8, JSON syntax) before parsing and
cast every column to the contract's type, naming the file, row and field of
the first value that does not fit.
"""

from __future__ import annotations

import csv
import io
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pacsv
import pyarrow.parquet as pq

from clinieval.contract import tabular
from clinieval.contract.validate import check_types
from clinieval.contract.vocabulary import SCORE_MAX, SCORE_MIN
from clinieval.errors import InputError
from clinieval.io.jsontext import decode, iter_json_lines, read_bytes
from clinieval.rubric import IDENTITY, CriterionMap, rubric_from_rows, rubric_to_rows
from clinieval.schema.domain import Rubric
from clinieval.snapshot import Snapshot, conform

EXTENSIONS = (".parquet", ".csv", ".jsonl")


def find_table_files(folder: Path) -> dict[str, Path]:
    """Table files in ``folder`` by table name; more than one format per table is an error."""
    found: dict[str, Path] = {}
    for path in sorted(folder.iterdir()):
        if path.stem in tabular.BY_NAME and path.suffix in EXTENSIONS:
            if path.stem in found:
                raise InputError(str(path), f"table {path.stem!r} is given twice"
                                 f" (also {found[path.stem].name}); keep one file per table")
            found[path.stem] = path
    return found


def read_table_file(path: Path) -> pa.Table:
    """Read one table file with the contract's column types as written:
    text columns of a CSV stay text ("007" stays "007", "NA" is not null)."""
    table = tabular.BY_NAME[path.stem]
    raw = read_bytes(path)
    if not raw:
        raise InputError(str(path), "file is empty", expected="a header and data rows")
    if path.suffix == ".parquet":
        data = _read_parquet(raw, path)
        check_types(data, table, str(path))
        return data
    text = decode(raw, str(path))
    return _read_csv(raw, text, path, table) if path.suffix == ".csv" \
        else _read_jsonl(text, path, table)


def _read_parquet(raw: bytes, path: Path) -> pa.Table:
    try:
        # On this thread: see clinieval.io.bundle._read_parquet.
        data = pq.read_table(pa.BufferReader(raw), use_threads=False, pre_buffer=False)
    except (pa.ArrowException, OSError, UnicodeDecodeError) as err:  # a column path not UTF-8
        raise InputError(str(path), f"not a readable Parquet file: {err}") from None
    for name, column in zip(data.column_names, data.columns, strict=True):
        try:
            column.validate(full=True)  # catches strings that are not UTF-8
        except pa.ArrowInvalid as err:
            raise InputError(str(path), f"column holds invalid data: {err}", field=name,
                             expected="valid UTF-8 text") from None
    _check_unique_columns(data.column_names, path)
    return data


def _check_unique_columns(names: list[str], path: Path) -> None:
    seen = set()
    for name in names:
        if name in seen:
            raise InputError(str(path), "column name appears twice", field=name,
                             expected="each column once")
        seen.add(name)


def _read_csv(raw: bytes, text: str, path: Path, table: tabular.Table) -> pa.Table:
    """Every column as text; only an empty unquoted field is null. The cast to
    the contract's types happens later, naming the row of a bad value."""
    try:
        header = next(csv.reader(io.StringIO(text)))
    except (csv.Error, StopIteration) as err:
        raise InputError(str(path), f"malformed CSV header: {err}", row=1) from None
    _check_unique_columns(header, path)
    # Parsed on this thread: a malformed file's error otherwise returns while
    # Arrow's pool still parses later blocks, and a worker alive at exit
    # aborts the process after the error line is printed.
    reading = pacsv.ReadOptions(use_threads=False)
    options = pacsv.ConvertOptions(column_types={name: pa.string() for name in header},
                                   null_values=[""], strings_can_be_null=True,
                                   quoted_strings_can_be_null=False)
    try:
        return pacsv.read_csv(pa.BufferReader(raw), read_options=reading,
                              convert_options=options)
    except pa.ArrowInvalid as err:
        raise InputError(str(path), f"malformed CSV: {err}") from None


JSONL_SLICE = 1 << 15
"""Lines parsed before they become Arrow columns: a slice's Python objects are
all a reader holds beside the columns, whatever the file's length."""


def _read_jsonl(text: str, path: Path, table: tabular.Table) -> pa.Table:
    parts, records = [], []
    for number, record in iter_json_lines(text, str(path)):
        if not isinstance(record, dict):
            raise InputError(str(path), "line is not a JSON object", row=number,
                             expected="a JSON object", got=record)
        records.append((number, record))
        if len(records) == JSONL_SLICE:
            parts.append(_json_table(records, path, table))
            records = []
    if records or not parts:
        parts.append(_json_table(records, path, table))
    return pa.concat_tables(parts, promote_options="default")


def _json_table(records: list[tuple[int, dict]], path: Path, table: tabular.Table) -> pa.Table:
    if not records:
        raise InputError(str(path), "file has no records", expected="one JSON object per line")
    names = [n for n in dict.fromkeys(k for _, r in records for k in r) if n in table.columns]
    if not names:
        return pa.table({"_": pa.nulls(len(records))})
    return pa.table({name: _json_column(records, name, table.schema.field(name).type, path)
                     for name in names})


def _json_column(records: list[tuple[int, dict]], name: str, kind: pa.DataType,
                 path: Path) -> pa.Array:
    """A column with the contract's type, from JSON values of the matching JSON
    type only (timestamps are text, cast later; a boolean is not a number)."""
    values = [r.get(name) for _, r in records]
    target = pa.string() if pa.types.is_timestamp(kind) else kind
    numeric = pa.types.is_integer(target) or pa.types.is_floating(target)
    try:
        if numeric and any(type(v) is bool for v in values):
            raise TypeError("a boolean is not a number")
        return pa.array(values, type=target)
    except (pa.ArrowException, TypeError, OverflowError):
        for (number, _), value in zip(records, values, strict=True):
            try:
                if numeric and type(value) is bool:
                    raise TypeError
                pa.array([value], type=target)
            except (pa.ArrowException, TypeError, OverflowError):
                raise InputError(str(path), "value has the wrong type", row=number, field=name,
                                 expected=_JSON_EXPECTED.get(str(target), str(target)),
                                 got=value) from None
        raise


_JSON_EXPECTED = {"string": "a JSON string", "bool": "true or false", "double": "a JSON number",
                  "int8": "a JSON integer", "int16": "a JSON integer",
                  "int32": "a JSON integer", "int64": "a JSON integer"}


def read_table_folder(folder: Path, *, rubric: Rubric,
                      criterion_map: CriterionMap = IDENTITY) -> tuple[Snapshot, dict[str, str]]:
    """Read every ``<table>.<ext>`` in ``folder``; return the snapshot and the
    file behind each table (for error messages downstream)."""
    files = find_table_files(folder)
    if not files:
        raise InputError(str(folder), "no table files found",
                         expected="files named " + ", ".join(f"{t}.csv" for t in tabular.BY_NAME))
    raw = {name: read_table_file(path) for name, path in files.items()}
    if "criteria" in raw:
        source = str(files["criteria"])
        rubric = rubric_from_rows(conform(raw["criteria"], tabular.CRITERIA, source).to_pylist(),
                                  rubric.model_dump(), source)
    raw["criteria"] = pa.Table.from_pylist(rubric_to_rows(rubric), schema=tabular.CRITERIA.schema)
    if "ratings" in raw:
        raw["ratings"] = map_criteria(raw["ratings"], rubric, criterion_map, str(files["ratings"]))
    tables = {name: conform(table, tabular.BY_NAME[name], str(files.get(name, name)))
              for name, table in raw.items()}
    meta = {"source": {"format": "tables", "path": str(folder)},
            "rubric": {"rubric_id": rubric.rubric_id, "version": rubric.version},
            "criterion_map": criterion_map.describe()}
    return Snapshot.from_tables(tables, meta), {n: str(p) for n, p in files.items()}


def map_criteria(ratings: pa.Table, rubric: Rubric, cmap: CriterionMap, source: str) -> pa.Table:
    """Resolve criterion names to rubric ids and rescale scores through ``cmap``.

    Rows whose criterion the map drops are removed."""
    for column in ("criterion_id", "score"):
        if column not in ratings.column_names:
            raise InputError(source, "required column is missing", field=column,
                             expected=f"a column named {column!r}")
    names = pc.cast(ratings.column("criterion_id"), pa.string())
    resolved = {}
    for name in pc.unique(names).to_pylist():
        try:
            resolved[name] = None if name is None else cmap.resolve(rubric, name)
        except KeyError as err:
            row = pc.index(names, name).as_py() + 1
            raise InputError(source, err.args[0], row=row, field="criterion_id") from None
    mapped = pa.array([resolved[n] for n in names.to_pylist()], pa.string())
    ratings = ratings.set_column(ratings.column_names.index("criterion_id"), "criterion_id", mapped)
    ratings = ratings.filter(pc.is_valid(mapped))
    if cmap.source_scale != (SCORE_MIN, SCORE_MAX):
        ratings = _rescale(ratings, cmap, source)
    return ratings


def _rescale(ratings: pa.Table, cmap: CriterionMap, source: str) -> pa.Table:
    raw = ratings.column("score").to_pylist()
    try:
        mapped = cmap.rescale(np.array(raw, dtype=float))
    except (TypeError, ValueError):
        mapped = None
    if mapped is None or np.isnan(mapped).any():
        for row, value in enumerate(raw, start=1):
            cmap.rescale_one(value, source=source, row=row, field="score")
    index = ratings.column_names.index("score")
    return ratings.set_column(index, "score", pa.array(mapped.astype("int8")))


def write_table_files(snapshot: Snapshot, folder: Path, fmt: str) -> dict[str, Path]:
    """Write every table as ``<table>.<fmt>`` (csv or parquet)."""
    folder.mkdir(parents=True, exist_ok=True)
    written = {}
    for table in tabular.ALL:
        path = folder / f"{table.name}.{fmt}"
        data = snapshot[table.name]
        if fmt == "parquet":
            pq.write_table(data, path, compression="zstd")
        elif fmt == "csv":
            pacsv.write_csv(data, path)
        else:
            raise ValueError(f"unknown table format {fmt!r} (csv or parquet)")
        written[table.name] = path
    return written
