"""Per-instance benchmark score exports: the shapes read, errors that name
file, row and field, and a fuzz test in the manner of test_fuzz_import: the
only exception is InputError naming the input, and whatever is accepted
holds finite scores and non-empty ids."""

from __future__ import annotations

import json
import math
import shutil
from pathlib import Path

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from clinieval.errors import InputError
from clinieval.io.foreign.benchmark_scores import COLUMNS, read_benchmark_scores

from .test_fuzz_import import _csv_bytes, _jsonl_bytes, dumps, mutate, mutate_bytes

DATA = Path(__file__).parents[1] / "data" / "benchmarks"
HELM = DATA / "helm_run"


def test_flat_jsonl_is_read_with_optional_tokens_and_cost():
    table = read_benchmark_scores(DATA / "hand_worked.jsonl")
    assert table.schema == COLUMNS and table.num_rows == 18
    first = table.to_pylist()[12]
    assert first == {"model_id": "m0", "benchmark_id": "note_summary", "instance_id": "j1",
                     "score": 2.0, "input_tokens": 1000, "output_tokens": 200, "cost_usd": 0.5}


def test_csv_keeps_ids_as_text_and_reads_numbers(tmp_path):
    path = tmp_path / "s.csv"
    path.write_text("model,task,sample_id,value,cost_usd\nm,b,007,0.5,\nm,b,8,1,0.01\n")
    rows = read_benchmark_scores(path).to_pylist()
    assert [r["instance_id"] for r in rows] == ["007", "8"]
    assert [r["score"] for r in rows] == [0.5, 1.0]
    assert rows[0]["cost_usd"] is None and rows[1]["cost_usd"] == 0.01


def test_helm_per_instance_stats_average_trials_and_name_from_run_spec():
    rows = read_benchmark_scores(HELM / "per_instance_stats.json").to_pylist()
    # id1: exact_match 1 in trial 0 and 0 in trial 1 -> 0.5; id2: 1
    assert [(r["model_id"], r["benchmark_id"], r["instance_id"], r["score"]) for r in rows] == [
        ("vendor/m9", "exam_mcq", "id1", 0.5), ("vendor/m9", "exam_mcq", "id2", 1.0)]


def test_a_folder_reads_every_export_in_it(tmp_path):
    shutil.copytree(HELM, tmp_path / "run")
    shutil.copy(DATA / "hand_worked.jsonl", tmp_path / "flat.jsonl")
    assert read_benchmark_scores(tmp_path).num_rows == 20


@pytest.mark.parametrize(("text", "message"), [
    ('{"model": "m", "benchmark": "b", "instance_id": "i", "score": "high"}',
     r"s.jsonl, row 1, field 'score': wrong type: JSON string"),
    ('{"model": "m", "benchmark": "b", "score": 1}',
     r"s.jsonl, row 1, field 'instance_id': required field is missing"),
    ('{"model": "m", "benchmark": "b", "instance_id": 1, "score": 1}\n'
     '{"model": "m", "benchmark": "b", "instance_id": 1, "score": 0}',
     r"s.jsonl, row 2, field 'instance_id': the same model, benchmark and instance twice"),
    ('{"model": "", "benchmark": "b", "instance_id": 1, "score": 1}',
     r"s.jsonl, row 1, field 'model': value is an empty string"),
    ('{"model": "m", "benchmark": "b", "instance_id": 1, "score": 1, "output_tokens": -3}',
     r"s.jsonl, row 1, field 'output_tokens': value out of range"),
])
def test_bad_rows_are_named(tmp_path, text, message):
    path = tmp_path / "s.jsonl"
    path.write_text(text)
    with pytest.raises(InputError, match=message):
        read_benchmark_scores(path)


def test_helm_errors_name_the_missing_run_spec_and_the_stats(tmp_path):
    shutil.copy(HELM / "per_instance_stats.json", tmp_path / "per_instance_stats.json")
    with pytest.raises(InputError, match="needs its run_spec.json"):
        read_benchmark_scores(tmp_path / "per_instance_stats.json")
    rows = read_benchmark_scores(tmp_path / "per_instance_stats.json", model="m",
                                 benchmark="b")
    assert rows.num_rows == 2
    with pytest.raises(InputError, match=r"row 1, field 'stats': no usable stat .*exact_match"):
        read_benchmark_scores(tmp_path / "per_instance_stats.json", model="m", benchmark="b",
                              stat="f1_score")


def test_csv_row_with_extra_cells_is_named(tmp_path):
    path = tmp_path / "s.csv"
    path.write_text("model,benchmark,instance_id,score\nm,b,1,1,oops\n")
    with pytest.raises(InputError, match=r"s.csv, row 2: row has more cells than the header"):
        read_benchmark_scores(path)


# ---------------------------------------------------------------------------
# Fuzzing

FLAT = [json.loads(line) for line in (DATA / "hand_worked.jsonl").read_text().splitlines()]
HELM_DOC = json.loads((HELM / "per_instance_stats.json").read_text())


def _check(path: Path) -> str:
    try:
        table = read_benchmark_scores(path)
    except InputError as err:
        assert str(path.name) in str(err) or str(path.parent) in str(err)
        return "refused"
    for row in table.to_pylist():
        assert math.isfinite(row["score"])
        assert all(row[k] for k in ("model_id", "benchmark_id", "instance_id"))
    return "accepted"


@settings(max_examples=150, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(data=st.data(), shape=st.sampled_from(["jsonl", "json", "csv", "helm"]))
def test_fuzzed_exports_fail_only_with_input_errors(tmp_path_factory, data, shape):
    folder = tmp_path_factory.mktemp("fuzz")
    draw = data.draw
    if shape == "helm":
        (folder / "run_spec.json").write_text((HELM / "run_spec.json").read_text())
        doc = mutate(draw, HELM_DOC)
        path = folder / "per_instance_stats.json"
        path.write_bytes(mutate_bytes(draw, dumps(doc, draw)))
    else:
        doc = mutate(draw, FLAT)
        rows = doc if isinstance(doc, list) else [doc]
        raw = {"jsonl": lambda: _jsonl_bytes(rows, draw), "json": lambda: dumps(doc, draw),
               "csv": lambda: _csv_bytes(rows)}[shape]()
        path = folder / f"scores.{'json' if shape == 'json' else shape}"
        path.write_bytes(mutate_bytes(draw, raw))
    _check(path)


def test_numbers_beyond_float_range_are_refused(tmp_path):
    path = tmp_path / "s.jsonl"
    path.write_text('{"model": "m", "benchmark": "b", "instance_id": 1, "score": 1' + "0" * 400
                    + "}")
    with pytest.raises(InputError, match=r"row 1, field 'score': value is not finite"):
        read_benchmark_scores(path)


@pytest.mark.parametrize("name", ["hand_worked.jsonl", "scores.csv"])
def test_columnar_path_gives_the_record_readers_table(tmp_path, name):
    from clinieval.io.foreign import benchmark_scores as bs

    path = DATA / name
    if name.endswith(".csv"):
        path = tmp_path / name
        path.write_text("model,benchmark,instance_id,score,input_tokens,cost_usd\n"
                        "m,b,007,0.5,10,\nm,b,8,1,,0.01\nm2,b,8,0,3,0\n")
    fast = bs._columnar(path)
    assert fast is not None  # a clean file takes the columnar path
    slow = pa.Table.from_pylist([r for _, _, r in bs._read_file(path, None, None, None)],
                                schema=COLUMNS)
    assert fast.equals(slow)


def test_fuzzed_flat_rows_are_read_alike_both_ways(tmp_path):
    # a duplicate, a bad score type and a blank id fall back to the record
    # reader, which names them
    from clinieval.io.foreign import benchmark_scores as bs

    for text, field in [('{"model": "m", "benchmark": "b", "instance_id": "x", "score": 1}\n'
                         '{"model": "m", "benchmark": "b", "instance_id": "x", "score": 2}',
                         "instance_id"),
                        ('{"model": "m", "benchmark": "b", "instance_id": "x", "score": "1"}',
                         "score"),
                        ('{"model": " ", "benchmark": "b", "instance_id": "x", "score": 1}',
                         "model")]:
        path = tmp_path / "s.jsonl"
        path.write_text(text)
        with pytest.raises(InputError, match=f"field '{field}'"):
            read_benchmark_scores(path)
    assert bs._columnar(tmp_path / "s.jsonl") is None
