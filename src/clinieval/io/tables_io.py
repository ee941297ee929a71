"""Our own tables as CSV, JSONL or Parquet files: ``<folder>/<table>.<ext>``.

Readers check the bytes (empty file, UTF-8, JSON syntax) before parsing and
cast every column to the contract's type, naming the file, row and field of
the first value that does not fit.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pacsv
import pyarrow.parquet as pq

from clinieval import tables as T
from clinieval.errors import InputError
from clinieval.rubric import IDENTITY, CriterionMap, rubric_from_rows, rubric_to_rows
from clinieval.schema.domain import Rubric
from clinieval.snapshot import Snapshot, conform

EXTENSIONS = (".parquet", ".csv", ".jsonl")


def find_table_files(folder: Path) -> dict[str, Path]:
    """Table files in ``folder`` by table name; more than one format per table is an error."""
    found: dict[str, Path] = {}
    for path in sorted(folder.iterdir()):
        if path.stem in T.BY_NAME and path.suffix in EXTENSIONS:
            if path.stem in found:
                raise InputError(str(path), f"table {path.stem!r} is given twice"
                                 f" (also {found[path.stem].name}); keep one file per table")
            found[path.stem] = path
    return found


def read_table_file(path: Path) -> pa.Table:
    """Read one table file as written, untyped columns as strings."""
    raw = path.read_bytes() if path.suffix != ".parquet" else None
    if path.stat().st_size == 0:
        raise InputError(str(path), "file is empty", expected="a header and data rows")
    if path.suffix == ".parquet":
        try:
            return pq.read_table(path)
        except (pa.ArrowInvalid, OSError) as err:
            raise InputError(str(path), f"not a readable Parquet file: {err}") from None
    text = _decode(raw, path)
    return _read_csv(raw, path) if path.suffix == ".csv" else _read_jsonl(text, path)


def _decode(raw: bytes, path: Path) -> str:
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as err:
        line = raw[: err.start].count(b"\n") + 1
        raise InputError(str(path), f"bytes are not UTF-8 at byte offset {err.start} (line {line})",
                         expected="UTF-8 text", got=raw[err.start:err.start + 4]) from None


def _read_csv(raw: bytes, path: Path) -> pa.Table:
    header = raw.split(b"\n", 1)[0].decode("utf-8").strip().split(",")
    options = pacsv.ConvertOptions(column_types={name: pa.string() for name in header},
                                   strings_can_be_null=True)
    try:
        return pacsv.read_csv(pa.BufferReader(raw), convert_options=options)
    except pa.ArrowInvalid as err:
        raise InputError(str(path), f"malformed CSV: {err}") from None


def _read_jsonl(text: str, path: Path) -> pa.Table:
    records = []
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError as err:
            raise InputError(str(path), f"invalid JSON at column {err.colno}: {err.msg}",
                             row=number, expected="one JSON object per line") from None
        if not isinstance(record, dict):
            raise InputError(str(path), "line is not a JSON object", row=number,
                             expected="a JSON object", got=record)
        records.append(record)
    if not records:
        raise InputError(str(path), "file has no records", expected="one JSON object per line")
    return _records_to_table(records, path)


def _records_to_table(records: list[dict], path: Path) -> pa.Table:
    names = list(dict.fromkeys(k for r in records for k in r))
    columns = {}
    for name in names:
        values = [r.get(name) for r in records]
        try:
            columns[name] = pa.array(values)
        except (pa.ArrowInvalid, pa.ArrowTypeError):
            # Mixed types in one column: keep them as text and let the cast name the row.
            columns[name] = pa.array([None if v is None else str(v) for v in values])
    return pa.table(columns)


def read_table_folder(folder: Path, *, rubric: Rubric,
                      criterion_map: CriterionMap = IDENTITY) -> tuple[Snapshot, dict[str, str]]:
    """Read every ``<table>.<ext>`` in ``folder``; return the snapshot and the
    file behind each table (for error messages downstream)."""
    files = find_table_files(folder)
    if not files:
        raise InputError(str(folder), "no table files found",
                         expected="files named " + ", ".join(f"{t}.csv" for t in T.BY_NAME))
    raw = {name: read_table_file(path) for name, path in files.items()}
    if "criteria" in raw:
        rubric = rubric_from_rows(conform(raw["criteria"], T.CRITERIA, str(files["criteria"]))
                                  .to_pylist(), rubric.model_dump())
    raw["criteria"] = pa.Table.from_pylist(rubric_to_rows(rubric), schema=T.CRITERIA.schema)
    if "ratings" in raw:
        raw["ratings"] = map_criteria(raw["ratings"], rubric, criterion_map, str(files["ratings"]))
    tables = {name: conform(table, T.BY_NAME[name], str(files.get(name, name)))
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
    if cmap.source_scale != (T.SCORE_MIN, T.SCORE_MAX):
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
    for table in T.ALL:
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
