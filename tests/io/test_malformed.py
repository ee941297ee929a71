"""Bad input: each case names file, row and field, and leaves the database unchanged."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from clinieval.cli import app
from clinieval.io.importer import import_snapshot
from clinieval.storage import db
from clinieval.testing import tiny_snapshot
from tests.helpers import renamed_tiny_tables, write_tables

runner = CliRunner()


def _set(table, index, field, value):
    def edit(rows, folder):
        rows[table][index][field] = value
    return edit


def _drop_column(table, field):
    def edit(rows, folder):
        for row in rows[table]:
            row.pop(field, None)
    return edit


CASES = [
    # id, edit of the rows, (file, raw bytes) replacing a table file, fmt, message fragments
    ("wrong-type", _set("cases", 1, "risk_level", "high"), None, "csv",
     ["cases.csv", "row 2", "'risk_level'", "integer risk level from 1 to 5", "'high'"]),
    ("score-out-of-range", _set("ratings", 2, "score", 3), None, "csv",
     ["ratings.csv", "row 3", "'score'", "out of range", "from -2 to 2", "got 3"]),
    ("non-integer-score", _set("ratings", 0, "score", 1.5), None, "csv",
     ["ratings.csv", "row 1", "'score'", "integer score from -2 to 2", "'1.5'"]),
    ("unknown-criterion", _set("ratings", 4, "criterion_id", "bedside_manner"), None, "csv",
     ["ratings.csv", "row 5", "'criterion_id'", "unknown criterion 'bedside_manner'",
      "harmlessness"]),
    ("missing-answer", _set("ratings", 1, "answer_id", "b-ans-9z"), None, "csv",
     ["ratings.csv", "row 2", "'answer_id'", "answer that does not exist", "'b-ans-9z'"]),
    ("duplicate-id", _set("ratings", 3, "rating_id", 1001), None, "csv",
     ["ratings.csv", "row 4", "'rating_id'", "duplicate id", "1001"]),
    ("same-answers", _set("preferences", 0, "answer_b_id", "b-ans-1x"), None, "csv",
     ["preferences.csv", "row 1", "'answer_b_id'", "itself", "A != B"]),
    ("answer-of-other-case", _set("preferences", 0, "answer_b_id", "b-ans-2y"), None, "csv",
     ["preferences.csv", "row 1", "'answer_b_id'", "another case", "case 'b-case-1'"]),
    ("unknown-choice", _set("preferences", 1, "choice", "C"), None, "csv",
     ["preferences.csv", "row 2", "'choice'", "unknown value", "A / B / tie / both_bad", "'C'"]),
    ("truncated-json", None, ("raters.jsonl", b'{"rater_id": "b-r9"}\n{"rater_id": "b-'),
     "jsonl", ["raters.jsonl", "row 2", "invalid JSON"]),
    ("non-utf8", None, ("cases.csv", b"case_id,specialty\nb-case-1,Cardiolog\xff\n"),
     # 18 + 18 bytes precede 0xff
     "csv", ["cases.csv", "not valid UTF-8", "byte offset 36", "line 2"]),
    ("empty-file", None, ("models.csv", b""), "csv", ["models.csv", "file is empty"]),
    ("missing-column", _drop_column("ratings", "score"), None, "csv",
     ["ratings.csv", "'score'", "required column is missing"]),
    ("missing-value", _set("answers", 2, "model_id", None), None, "jsonl",
     ["answers.jsonl", "row 3", "'model_id'", "required value is missing"]),
    ("stored-id-other-values", _set("raters", 1, "rater_id", "rater-1"), None, "csv",
     ["raters.csv", "record 'rater-1'", "'specialty'", "different definition", "'Cardiology'"]),
    ("event-id-already-stored", _set("ratings", 0, "rating_id", 1), None, "csv",
     ["ratings.csv", "row 1", "'rating_id'", "already exists in the database"]),
    ("negative-cost", _set("answers", 1, "cost_usd", -0.5), None, "csv",
     ["answers.csv", "row 2", "'cost_usd'", "out of range", ">= 0", "-0.5"]),
    ("negative-experience", _set("raters", 0, "experience_years", -3), None, "jsonl",
     ["raters.jsonl", "row 1", "'experience_years'", "from 0 to 80"]),
    ("infinite-price", _set("models", 0, "price_input_per_m", "inf"), None, "csv",
     ["models.csv", "row 1", "'price_input_per_m'", "not a finite number"]),
    ("nan-latency", _set("answers", 2, "latency_s", "nan"), None, "csv",
     ["answers.csv", "row 3", "'latency_s'", "not a finite number"]),
    ("nul-in-text", _set("cases", 0, "prompt", "a\x00b"), None, "jsonl",
     ["cases.jsonl", "row 1", "'prompt'", "NUL"]),
    ("boolean-as-number", _set("models", 1, "price_output_per_m", True), None, "jsonl",
     ["models.jsonl", "row 2", "'price_output_per_m'", "wrong type", "JSON number"]),
    ("number-as-id", _set("models", 1, "model_id", 7), None, "jsonl",
     ["models.jsonl", "row 2", "'model_id'", "wrong type", "JSON string"]),
    ("duplicate-column", None, ("models.csv", b"model_id,model_id\nb-model-x,b-model-y\n"),
     "csv", ["models.csv", "'model_id'", "appears twice"]),
    ("integer-beyond-int64", None,
     ("raters.jsonl", b'{"rater_id": "b-r9", "experience_years": 9223372036854775808}\n'),
     "jsonl", ["raters.jsonl", "row 1", "'experience_years'", "wrong type"]),
    ("lone-surrogate", None, ("cases.jsonl", b'{"case_id": "b-c", "specialty": "\\ud800"}\n'),
     "jsonl", ["cases.jsonl", "row 1", "lone UTF-16 surrogate"]),
    ("deep-nesting", None, ("models.jsonl", b'{"model_id": ' + b"[" * 100_000 + b"\n"),
     "jsonl", ["models.jsonl", "row 1", "nested 100001 levels"]),
    ("criteria-bad-id", None, ("criteria.csv", b"criterion_id,name\nBad Id,Harm\n"), "csv",
     ["criteria.csv", "'criteria[0].criterion_id'", "pattern"]),
    ("not-parquet", None, ("models.parquet", b"PAR1 this is not parquet PAR1"), "csv",
     ["models.parquet", "not a readable Parquet file"]),
    ("parquet-invalid-utf8", None, ("models.parquet", "INVALID_UTF8"), "csv",
     ["models.parquet", "'model_id'", "invalid", "UTF-8"]),
]


def _invalid_utf8_parquet() -> bytes:
    """A Parquet file whose string column holds the bytes ff fe (not UTF-8)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    data = b"b-model-x\xff\xfe"
    offsets = pa.py_buffer(pa.array([0, len(data)], pa.int32()).buffers()[1])
    column = pa.Array.from_buffers(pa.string(), 1, [None, offsets, pa.py_buffer(data)])
    sink = pa.BufferOutputStream()
    pq.write_table(pa.table({"model_id": column}), sink)
    return sink.getvalue().to_pybytes()


@pytest.mark.parametrize(("edit", "raw", "fmt", "fragments"),
                         [pytest.param(*c[1:], id=c[0]) for c in CASES])
def test_bad_input_is_named_and_nothing_is_written(engine, db_url, tmp_path, edit, raw, fmt,
                                                    fragments):
    import_snapshot(engine, tiny_snapshot())
    before = db.counts(engine)
    rows = renamed_tiny_tables("b-", 1000)
    if edit:
        edit(rows, tmp_path)
    folder = write_tables(tmp_path / "bad", rows, fmt)
    if raw:
        name, data = raw
        data = _invalid_utf8_parquet() if data == "INVALID_UTF8" else data
        for stale in folder.glob(f"{name.split('.')[0]}.*"):
            stale.unlink()
        (folder / name).write_bytes(data)

    result = runner.invoke(app, ["import", str(folder), "--database-url", db_url])

    assert result.exit_code == 2, result.output
    message = " ".join(result.output.split())
    for fragment in fragments:
        assert fragment in message, (fragment, message)
    assert db.counts(engine) == before


def test_good_append_is_accepted(engine, db_url, tmp_path):
    """The control for the cases above: the unedited files import cleanly."""
    import_snapshot(engine, tiny_snapshot())
    folder = write_tables(tmp_path / "good", renamed_tiny_tables("b-", 1000))
    result = runner.invoke(app, ["import", str(folder), "--database-url", db_url])
    assert result.exit_code == 0, result.output
    assert db.counts(engine)["ratings"] == 2 * tiny_snapshot().counts()["ratings"]


def test_repeated_score_names_the_first_repeat():
    """Rows 3 and 5 repeat rows 1 and 2 (same answer, rater, criterion,
    revision): the message names row 3, the first repeat."""
    from clinieval.contract.validate import validate
    from clinieval.errors import InputError
    from clinieval.testing import snapshot_from_rows, tiny_tables

    rows = tiny_tables()
    first, second = rows["ratings"][0], rows["ratings"][1]
    rows["ratings"] = [first, second, first | {"rating_id": 901}, rows["ratings"][2],
                       second | {"rating_id": 902}]
    with pytest.raises(InputError, match=r"ratings table, row 3, field 'criterion_id'"):
        validate(snapshot_from_rows(rows))


def _manifest_edit(edit):
    def apply(folder):
        path = folder / "manifest.json"
        manifest = json.loads(path.read_text())
        edit(manifest)
        path.write_text(json.dumps(manifest))
    return apply


def _retarget(file):
    def edit(manifest):
        manifest["tables"]["models"]["file"] = file
    return edit


def _symlink(folder):
    (folder / "models.parquet").rename(folder / "real.parquet")
    (folder / "models.parquet").symlink_to(folder / "real.parquet")


def _tamper_content(folder):
    """Other rows with a matching file checksum: only content_sha256 can tell."""
    import hashlib

    import pyarrow.parquet as pq

    path = folder / "models.parquet"
    data = pq.read_table(path)
    pq.write_table(data.slice(0, 1), path)
    _manifest_edit(lambda m: m["tables"]["models"].update(
        rows=1, sha256=hashlib.sha256(path.read_bytes()).hexdigest()))(folder)


def _manifest_is_folder(folder):
    (folder / "manifest.json").unlink()
    (folder / "manifest.json").mkdir()


def _pop(*keys):
    def edit(manifest):
        target = manifest
        for key in keys[:-1]:
            target = target[key]
        target.pop(keys[-1])
    return edit


BUNDLES = [
    # id, edit of the written bundle folder, extra CLI args, message fragments
    ("no-tables", _manifest_edit(_pop("tables")), [], ["manifest.json", "'tables'", "required"]),
    ("no-file", _manifest_edit(_pop("tables", "models", "file")), [],
     ["manifest.json", "'tables.models.file'"]),
    ("no-sha256", _manifest_edit(_pop("tables", "models", "sha256")), [],
     ["'tables.models.sha256'"]),
    ("no-rows", _manifest_edit(_pop("tables", "models", "rows")), [], ["'tables.models.rows'"]),
    ("tables-is-a-list", _manifest_edit(lambda m: m.update(tables=[1, 2])), [],
     ["'tables'", "valid dictionary"]),
    ("notes-not-a-list", _manifest_edit(lambda m: m.update(notes="hello")), [],
     ["'notes'", "valid list"]),
    ("version-true", _manifest_edit(lambda m: m.update(schema_version=True)), [],
     ["'schema_version'", "got True"]),
    ("rows-negative", _manifest_edit(lambda m: m["tables"]["models"].update(rows=-1)), [],
     ["'tables.models.rows'"]),
    ("unknown-table", _manifest_edit(lambda m: m["tables"].update(secrets=m["tables"]["models"])),
     [], ["'tables.secrets'"]),
    ("manifest-is-a-list", lambda f: (f / "manifest.json").write_text("[1]"), [],
     ["manifest.json", "valid dictionary"]),
    ("manifest-deeply-nested", lambda f: (f / "manifest.json").write_text("[" * 50_000), [],
     ["manifest.json", "nested 50000 levels"]),
    ("manifest-is-a-folder", _manifest_is_folder, ["--format", "bundle"],
     ["manifest.json", "it is a folder"]),
    ("dot-dot-path", _manifest_edit(_retarget("../outside.parquet")), [],
     ["'tables.models.file'", "pattern"]),
    ("absolute-path", _manifest_edit(_retarget("/etc/passwd")), [],
     ["'tables.models.file'", "pattern"]),
    ("symlink", _symlink, [], ["models.parquet", "symbolic link"]),
    ("device", lambda f: (f / "models.parquet").unlink() or (f / "models.parquet").symlink_to(
        "/dev/zero"), [], ["models.parquet", "symbolic link"]),
    ("content-tampered", _tamper_content, [], ["models.parquet", "'models'", "content_sha256"]),
    ("snapshot-sum-tampered", _manifest_edit(lambda m: m.update(snapshot_sha256="0" * 64)), [],
     ["manifest.json", "'snapshot_sha256'", "does not match"]),
    ("not-parquet", lambda f: (f / "models.parquet").write_bytes(b"PAR1 nonsense"), [],
     ["models.parquet", "SHA-256"]),
    ("unknown-format", lambda f: None, ["--format", "zip"],
     ["unknown format 'zip'", "auto, bundle, tables"]),
    ("tables-format-on-a-file", lambda f: None, ["--format", "tables", "FILE"],
     ["manifest.json", "needs a folder"]),
    ("bundle-format-on-tables", lambda f: (f / "manifest.json").unlink(), ["--format", "bundle"],
     ["manifest.json", "missing"]),
]


@pytest.mark.parametrize(("edit", "args", "fragments"),
                         [pytest.param(*c[1:], id=c[0]) for c in BUNDLES])
def test_hostile_bundles_are_refused_in_one_line(tmp_path, edit, args, fragments):
    """SQLite only: a bundle is refused before the database is asked anything."""
    from clinieval.io.bundle import write_bundle
    from clinieval.testing import snapshot_from_rows

    db_url = f"sqlite:///{tmp_path / 'db.sqlite'}"
    engine = db.make_engine(db_url)
    db.upgrade(engine)
    import_snapshot(engine, tiny_snapshot())
    before = db.counts(engine)
    folder = tmp_path / "bundle"
    write_bundle(snapshot_from_rows(renamed_tiny_tables("b-", 1000)), folder)
    edit(folder)
    source = str(folder / "manifest.json") if "FILE" in args else str(folder)
    args = [a for a in args if a != "FILE"]

    result = runner.invoke(app, ["import", source, "--database-url", db_url, *args])

    assert result.exit_code == 2, result.output
    assert result.output.startswith("error:") and "Traceback" not in result.output
    message = " ".join(result.output.split())
    for fragment in fragments:
        assert fragment in message, (fragment, message)
    assert "root:" not in message  # nothing of /etc/passwd is read or revealed
    assert db.counts(engine) == before


RUBRIC = {"rubric_id": "r", "version": "1", "default_anchors": {k: "x" for k in
                                                               ("-2", "-1", "0", "1", "2")},
          "criteria": [{"criterion_id": "harmlessness", "name": "Harmlessness",
                        "definition": "d"},
                       {"criterion_id": "accuracy", "name": "Accuracy", "definition": "d",
                        "weight": "heavy"}]}

CONFIG_FILES = [
    # id, option, file content, message fragments
    ("rubric-bad-weight", "--rubric", json.dumps(RUBRIC), ["rubric.json", "'criteria[1].weight'"]),
    ("rubric-no-criteria", "--rubric", json.dumps({"rubric_id": "r", "version": "1"}),
     ["rubric.json", "'criteria'", "required"]),
    ("rubric-not-json", "--rubric", "{criteria: []}", ["rubric.json", "invalid JSON"]),
    ("rubric-is-a-list", "--rubric", "[]", ["rubric.json", "valid dictionary"]),
    ("map-bad-scale", "--criterion-map", json.dumps({"source_scale": [5, 1]}),
     ["map.json", "'source_scale'", "cannot map"]),
    ("map-rename-list", "--criterion-map", json.dumps({"rename": ["a"]}),
     ["map.json", "'rename'"]),
    ("map-unknown-key", "--criterion-map", json.dumps({"renames": {}}),
     ["map.json", "'renames'", "not permitted"]),
]


@pytest.mark.parametrize(("option", "content", "fragments"),
                         [pytest.param(*c[1:], id=c[0]) for c in CONFIG_FILES])
def test_bad_rubric_or_map_file_names_file_and_field(tmp_path, option, content, fragments):
    path = tmp_path / ("rubric.json" if option == "--rubric" else "map.json")
    path.write_text(content)
    folder = write_tables(tmp_path / "t", renamed_tiny_tables("b-", 1000))
    result = runner.invoke(app, ["import", str(folder), option, str(path),
                                 "--database-url", f"sqlite:///{tmp_path / 'x.db'}"])
    assert result.exit_code == 2, result.output
    message = " ".join(result.output.split())
    for fragment in fragments:
        assert fragment in message, (fragment, message)
    assert "--name" not in message


def test_pairwise_judgment_of_a_missing_answer_b_names_file_row_and_field():
    """``judgments.answer_b_id`` refers to an answer like ``answer_id`` does: a
    pairwise judgment naming a missing answer B is refused by validation
    (file, row, field), not left for the database to refuse."""
    from clinieval.contract.validate import validate
    from clinieval.errors import InputError
    from clinieval.testing import snapshot_from_rows, tiny_tables

    rows = tiny_tables()
    pairwise = {"answer_id": "ans-1x", "judge_model": "judge-1", "criterion_id": "preference",
                "parse_status": "ok", "score": 1.0, "judge_kind": "pairwise", "choice": "A"}
    rows["judgments"] = [pairwise | {"judgment_id": 1, "answer_b_id": "ans-1y"},
                         pairwise | {"judgment_id": 2, "answer_b_id": "ans-9z"}]
    with pytest.raises(InputError, match=r"judgments\.jsonl, row 2, field 'answer_b_id': refers"
                       r" to a.* answer that does not exist") as caught:
        validate(snapshot_from_rows(rows), sources={"judgments": "judgments.jsonl"})
    assert caught.value.got == "ans-9z"
