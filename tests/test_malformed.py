"""Bad input: each case names file, row and field, and leaves the database unchanged."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from clinieval.cli import app
from clinieval.io.importer import import_snapshot
from clinieval.storage import db
from clinieval.testing import tiny_snapshot

from .helpers import renamed_tiny_tables, write_tables

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
    ("id-already-stored", _set("raters", 0, "rater_id", "rater-1"), None, "csv",
     ["raters.csv", "row 1", "'rater_id'", "already exists in the database"]),
]


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
    from clinieval.errors import InputError
    from clinieval.io.validate import validate
    from clinieval.testing import snapshot_from_rows, tiny_tables

    rows = tiny_tables()
    first, second = rows["ratings"][0], rows["ratings"][1]
    rows["ratings"] = [first, second, first | {"rating_id": 901}, rows["ratings"][2],
                       second | {"rating_id": 902}]
    with pytest.raises(InputError, match=r"ratings table, row 3, field 'criterion_id'"):
        validate(snapshot_from_rows(rows))
