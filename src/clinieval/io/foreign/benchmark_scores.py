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
"""

from __future__ import annotations

import csv
import io
import math
from pathlib import Path

import pyarrow as pa

from clinieval.errors import InputError
from clinieval.io.foreign.records import Record, parse, split_records
from clinieval.io.jsontext import read_text

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
        rows = [r for f in files for r in _read_file(f, model, benchmark, stat)]
    else:
        if not path.exists():
            raise InputError(str(path), "no such file or folder")
        rows = _read_file(path, model, benchmark, stat)
    _no_duplicates(rows)
    return pa.Table.from_pylist([r for _, _, r in rows], schema=COLUMNS)


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
    if not reader.fieldnames:
        raise InputError(source, "CSV file has no header", expected="a header row naming"
                         " model, benchmark, instance_id and score")
    out = []
    for line, raw in enumerate(reader, start=2):
        if None in raw:
            raise InputError(source, "row has more cells than the header", row=line,
                             got=raw[None])
        data = {k: _csv_value(v, k in _NUMERIC) for k, v in raw.items()}
        out.append((source, line, _flat(Record(source, line, data))))
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
