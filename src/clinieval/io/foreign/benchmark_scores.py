"""Per-instance benchmark scores from evaluation harness exports.

Two shapes are read into one table (:data:`COLUMNS`), one row per model,
benchmark and instance:

- **Flat records** (JSON Lines, a JSON array, or CSV with a header): one
  score per row, with ``model``, ``benchmark``, ``instance_id`` and
  ``score`` (the aliases in :data:`ALIASES` are accepted, as inspect-style
  and spreadsheet exports name them), and optionally ``input_tokens``,
  ``output_tokens`` and ``cost_usd`` of answering that instance.
- **HELM's ``per_instance_stats.json``**: a JSON array of instances, each with
  ``instance_id`` and ``stats`` (``{"name": {"name": ...}, "mean": ...}``).
  The model and benchmark come from the ``run_spec.json`` beside it (its
  ``adapter_spec.model`` and the part of its ``name`` before ``:``) unless
  given; the score is the first stat of :data:`HELM_STATS` present (or the
  one named by ``stat``), averaged over train trials.

A folder is read file by file (``*.jsonl``, ``*.json``, ``*.csv``, and
HELM run folders). Bad input is an :class:`~clinieval.errors.InputError`
naming the file, the row and the field.

Flat JSON Lines and CSV files are first read column-wise by Arrow and
checked with vectorised tests; only when a test fails (or Arrow cannot read
the file) are they read record by record, which finds and names the first
bad row. The fast path accepts nothing the record reader would refuse.
"""

from __future__ import annotations

import csv
import io
import math
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pacsv
import pyarrow.json as pajson

from clinieval.errors import InputError
from clinieval.io.foreign.records import Record, parse, split_records
from clinieval.io.jsontext import read_bytes, read_text

COLUMNS = pa.schema([
    pa.field("model_id", pa.string(), nullable=False),
    pa.field("benchmark_id", pa.string(), nullable=False),
    pa.field("instance_id", pa.string(), nullable=False),
    pa.field("score", pa.float64(), nullable=False),
    pa.field("input_tokens", pa.int64()),
    pa.field("output_tokens", pa.int64()),
    pa.field("cost_usd", pa.float64()),
])
"""The table every shape is read into."""

ALIASES = {"model_id": ("model", "model_id", "model_name"),
           "benchmark_id": ("benchmark", "benchmark_id", "task", "dataset"),
           "instance_id": ("instance_id", "instance", "sample_id", "id"),
           "score": ("score", "value")}
"""Accepted field names of flat records, first match wins."""

HELM_STATS = ("exact_match", "quasi_exact_match", "f1_score", "jury_score", "accuracy")
"""The per-instance stats of a HELM export tried in order when none is named."""

_OPTIONAL = {"input_tokens": int, "output_tokens": int, "cost_usd": float}


def read_benchmark_scores(path: str | Path, *, model: str | None = None,
                          benchmark: str | None = None, stat: str | None = None) -> pa.Table:
    """Per-instance scores from a file or a folder of exports (see module doc)."""
    path = Path(path)
    if path.is_dir():
        files = sorted(p for p in path.rglob("*") if p.is_file() and _readable(p))
        if not files:
            raise InputError(str(path), "folder holds no score files",
                             expected="*.jsonl, *.json or *.csv files")
    else:
        if not path.exists():
            raise InputError(str(path), "no such file or folder")
        files = [path]
    fast = [_columnar(f) for f in files]
    if all(t is not None for t in fast):
        table = pa.concat_tables(fast)
        if not _has_duplicates(table):
            return table
    rows = [r for f in files for r in _read_file(f, model, benchmark, stat)]
    _no_duplicates(rows)
    return pa.Table.from_pylist([r for _, _, r in rows], schema=COLUMNS)


_ID_ALIASES = [n for c in ("model_id", "benchmark_id", "instance_id") for n in ALIASES[c]]


def _columnar(path: Path) -> pa.Table | None:
    """A flat JSON Lines or CSV file read by Arrow, or None when anything is
    unusual (the record reader then names the problem). Only plain ASCII
    without escapes, primitive columns, no nulls where a value is required."""
    if path.suffix not in (".jsonl", ".csv"):
        return None
    data = read_bytes(path)
    if not data.isascii() or b"\\" in data or not data.strip():
        return None
    if path.suffix == ".jsonl" and not _flat_objects(data):
        return None
    # Parsed on this thread, as every reader of a file we did not write: see
    # clinieval.io.bundle._read_parquet.
    try:
        if path.suffix == ".csv":
            options = pacsv.ConvertOptions(column_types=dict.fromkeys(_ID_ALIASES, pa.string()))
            table = pacsv.read_csv(pa.BufferReader(data), convert_options=options,
                                   read_options=pacsv.ReadOptions(use_threads=False))
        else:
            table = pajson.read_json(pa.BufferReader(data),
                                     read_options=pajson.ReadOptions(use_threads=False))
    except (pa.ArrowException, ValueError):
        return None
    names = table.column_names
    if len(set(names)) != len(names) or any(
            pa.types.is_nested(t) for t in table.schema.types):
        return None
    return _conformed(table)


def _flat_objects(data: bytes) -> bool:
    """Every non-blank line one JSON object with nothing nested: Arrow's JSON
    reader is given nothing else (it crashes on some other top-level values)."""
    if b"[" in data or data.count(b"{") > data.count(b"\n") + 1:
        return False
    lines = (line.strip() for line in data.split(b"\n"))
    return all(line[:1] == b"{" and line[-1:] == b"}" for line in lines if line)


def _conformed(table: pa.Table) -> pa.Table | None:
    """The table in :data:`COLUMNS` if every value passes the record reader's
    checks, else None."""
    out = {}
    for column, names in ALIASES.items():
        name = next((n for n in names if n in table.column_names), None)
        if name is None or table[name].null_count:
            return None
        values = table[name]
        if column == "score":
            if not _finite_number(values):
                return None
            out[column] = values.cast(pa.float64())
        elif not _id_column(values):
            return None
        else:
            out[column] = values.cast(pa.string())
    for key, kind in _OPTIONAL.items():
        out[key] = _optional_column(table, key, kind)
        if out[key] is False:
            return None
    return pa.table(out, schema=COLUMNS)


def _finite_number(values: pa.ChunkedArray) -> bool:
    if not (pa.types.is_integer(values.type) or pa.types.is_floating(values.type)):
        return False
    return bool(pc.all(pc.is_finite(values.cast(pa.float64()))).as_py() is not False)


def _id_column(values: pa.ChunkedArray) -> bool:
    if pa.types.is_integer(values.type):
        return True
    if not pa.types.is_string(values.type):
        return False
    blank = pc.equal(pc.utf8_length(pc.utf8_trim_whitespace(values)), 0)
    control = pc.match_substring_regex(values, r"[\x00-\x1f\x7f]")
    return not (pc.any(blank).as_py() or pc.any(control).as_py())


def _optional_column(table: pa.Table, key: str, kind: type):
    """The optional column cast to its type; None when absent; False when a
    value would be refused."""
    if key not in table.column_names or table[key].null_count == len(table):
        return pa.nulls(len(table), COLUMNS.field(key).type)
    values = table[key]
    if not (pa.types.is_integer(values.type) or pa.types.is_floating(values.type)):
        return False
    number = values.cast(pa.float64())
    ok = pc.and_(pc.is_finite(number), pc.greater_equal(number, 0))
    if kind is int:
        ok = pc.and_(ok, pc.and_(pc.equal(pc.floor(number), number), pc.less(number, 2.0**62)))
    if pc.any(pc.invert(ok)).as_py():  # nulls are skipped: missing values are allowed
        return False
    return number.cast(COLUMNS.field(key).type)


def _has_duplicates(table: pa.Table) -> bool:
    keys = table.select(["model_id", "benchmark_id", "instance_id"])
    return keys.group_by(keys.column_names).aggregate([]).num_rows != keys.num_rows


def _readable(path: Path) -> bool:
    return path.suffix in (".jsonl", ".csv") or (path.suffix == ".json"
                                                 and path.name != "run_spec.json")


def _read_file(path: Path, model, benchmark, stat) -> list[tuple[str, int | str, dict]]:
    """(source, row, record) triples of one file."""
    if path.suffix == ".csv":
        return _csv_rows(path)
    parsed = parse(path)
    records = split_records(parsed, what="per-instance scores",
                            is_record=lambda d: "instance_id" in d or "score" in d)
    if "stats" in records[0].data:
        return _helm_rows(path, records, model, benchmark, stat)
    return [(r.source, r.row, _flat(r)) for r in records]


def _csv_rows(path: Path) -> list[tuple[str, int, dict]]:
    source, text = read_text(path)
    reader = csv.DictReader(io.StringIO(text))
    try:
        header = reader.fieldnames  # reads the header row
    except csv.Error as err:
        raise InputError(source, f"not valid CSV: {err}", row=1) from None
    if not header:
        raise InputError(source, "CSV file has no header", expected="a header row naming"
                         " model, benchmark, instance_id and score")
    out = []
    try:
        for line, raw in enumerate(reader, start=2):
            if None in raw:
                raise InputError(source, "row has more cells than the header", row=line,
                                 got=raw[None])
            data = {k: _csv_value(v, k in _NUMERIC) for k, v in raw.items()}
            out.append((source, line, _flat(Record(source, line, data))))
    except csv.Error as err:  # a stray carriage return inside a cell, say
        raise InputError(source, f"not valid CSV: {err}", row=reader.line_num) from None
    if not out:
        raise InputError(source, "file contains no records", expected="at least one score row")
    return out


_NUMERIC = {*ALIASES["score"], *_OPTIONAL}


def _csv_value(text: str | None, numeric: bool) -> object:
    """CSV cells are text: empty cells are missing values, and the score and
    token columns become numbers when they read as one (ids stay text)."""
    if text is None or not text.strip():
        return None
    if not numeric:
        return text
    try:
        return int(text)
    except ValueError:
        pass
    try:
        return float(text)
    except ValueError:
        return text


def _flat(rec: Record) -> dict:
    out = {}
    for column, names in ALIASES.items():
        key = next((n for n in names if n in rec.data), names[0])
        if column == "score":
            out[column] = _number(rec, key, "the instance's score")
        else:
            out[column] = rec.ident(key, column.removesuffix("_id"))
    for key, kind in _OPTIONAL.items():
        value = rec.data.get(key)
        out[key] = None if value is None else _optional(rec, key, kind)
    return out


def _number(rec: Record, key: str, what: str) -> float:
    value = rec.typed(key, (int, float), f"a finite number ({what})")
    try:
        value = float(value)
    except OverflowError:  # an integer beyond float range
        value = math.inf
    if not math.isfinite(value):
        rec.fail("value is not finite", key, expected=f"a finite number ({what})",
                 got=rec.data[key])
    return value


def _optional(rec: Record, key: str, kind: type) -> int | float:
    value = _number(rec, key, key.replace("_", " "))
    if value < 0 or (kind is int and (value != int(value) or value >= 2**62)):
        rec.fail("value out of range", key, expected=f"a non-negative {kind.__name__}",
                 got=rec.data[key])
    return kind(value)


def _helm_rows(path: Path, records: list[Record], model, benchmark, stat):
    model, benchmark = _helm_run(path, model, benchmark)
    trials: dict[str, list[float]] = {}
    first_row: dict[str, int | str] = {}
    for rec in records:
        instance = rec.ident("instance_id", "instance")
        trials.setdefault(instance, []).append(_helm_stat(rec, stat))
        first_row.setdefault(instance, rec.row)
    return [(records[0].source, first_row[i],
             {"model_id": model, "benchmark_id": benchmark, "instance_id": i,
              "score": sum(v) / len(v), "input_tokens": None, "output_tokens": None,
              "cost_usd": None}) for i, v in trials.items()]


def _helm_stat(rec: Record, stat: str | None) -> float:
    stats = rec.objects("stats", rec.array("stats", "of per-instance stats"),
                        "{name: {name}, mean}")
    by_name: dict[str, Record] = {}
    for s in stats:
        name = s.obj("name", "the stat's name")
        by_name.setdefault(s.child("name", name).text("name", "the stat's name"), s)
    wanted = (stat,) if stat else HELM_STATS
    found = next((n for n in wanted if n in by_name), None)
    if found is None:
        rec.fail("no usable stat", "stats", expected="one of " + ", ".join(wanted),
                 got=sorted(by_name)[:8])
    return _number(by_name[found], "mean", f"the mean of {found}")


def _helm_run(path: Path, model: str | None, benchmark: str | None) -> tuple[str, str]:
    """Model and benchmark of a HELM run folder, from its ``run_spec.json``."""
    if model and benchmark:
        return model, benchmark
    spec_path = path.parent / "run_spec.json"
    if not spec_path.exists():
        raise InputError(str(path), "a HELM per-instance export needs its run_spec.json"
                         " (or the model and benchmark given)", expected=str(spec_path))
    spec = split_records(parse(spec_path), what="a HELM run spec",
                         is_record=lambda d: True)[0]
    name = spec.text("name", "the run name, benchmark:settings")
    adapter = spec.child("adapter_spec", spec.obj("adapter_spec", "the adapter spec"))
    return (model or adapter.text("model", "the model"),
            benchmark or name.split(":", 1)[0])


def _no_duplicates(rows: list[tuple[str, int | str, dict]]) -> None:
    seen: dict[tuple[str, str, str], tuple[str, int | str]] = {}
    for source, row, r in rows:
        key = (r["model_id"], r["benchmark_id"], r["instance_id"])
        if key in seen:
            first = seen[key]
            raise InputError(source, "the same model, benchmark and instance twice",
                             row=row, field="instance_id",
                             expected=f"one score (first seen in {first[0]}, row {first[1]})",
                             got=list(key))
        seen[key] = (source, row)
