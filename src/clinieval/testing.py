"""Fixture builders shipped with the package, for tests of clinieval and of
projects built on it."""

from __future__ import annotations

import sqlite3
from datetime import UTC, datetime

import pyarrow as pa

from clinieval.contract import tabular
from clinieval.rubric import load_rubric, rubric_to_rows
from clinieval.snapshot import Snapshot

STAMP = datetime(2025, 3, 1, 12, 0, tzinfo=UTC)


def tiny_tables() -> dict[str, list[dict]]:
    """A hand-sized snapshot as row dicts: 2 cases, 2 models, 4 answers,
    2 raters, ratings on two criteria, 2 preferences. Edit and pass to
    :func:`snapshot_from_rows` to build malformed variants."""
    answers = [
        {"answer_id": f"ans-{c}{m}", "case_id": f"case-{c}", "model_id": f"model-{m}",
         "text": f"Answer {c}{m}.", "length_chars": 10 + len(m)}
        for c in ("1", "2") for m in ("x", "y")
    ]
    ratings = [
        {"rating_id": i, "answer_id": a["answer_id"], "rater_id": r, "criterion_id": crit,
         "score": (i % 5) - 2, "revision": 0, "created_at": STAMP}
        for i, (a, r, crit) in enumerate(
            ((a, r, crit) for a in answers for r in ("rater-1", "rater-2")
             for crit in ("harmlessness", "accuracy")), start=1)
    ]
    return {
        "cases": [{"case_id": "case-1", "specialty": "Cardiology", "prompt": "Chest pain at rest?",
                   "prompt_words": 4},
                  {"case_id": "case-2", "specialty": "Pathology", "prompt": "Read this slide.",
                   "prompt_words": 3}],
        "models": [{"model_id": "model-x", "display_name": "Model X"},
                   {"model_id": "model-y", "display_name": "Model Y"}],
        "answers": answers,
        "raters": [{"rater_id": "rater-1", "specialty": "Cardiology"},
                   {"rater_id": "rater-2", "specialty": "Pathology"}],
        "criteria": rubric_to_rows(load_rubric()),
        "ratings": ratings,
        "preferences": [
            {"preference_id": 1, "case_id": "case-1", "answer_a_id": "ans-1x",
             "answer_b_id": "ans-1y", "shown_left": "A", "choice": "A", "rater_id": "rater-1",
             "created_at": STAMP},
            {"preference_id": 2, "case_id": "case-2", "answer_a_id": "ans-2y",
             "answer_b_id": "ans-2x", "shown_left": "B", "choice": "tie", "rater_id": "rater-2",
             "created_at": STAMP},
        ],
    }


def snapshot_from_rows(rows: dict[str, list[dict]], meta: dict | None = None) -> Snapshot:
    tables = {name: pa.Table.from_pylist(data, schema=_partial(tabular.BY_NAME[name].schema, data))
              for name, data in rows.items()}
    return Snapshot.from_tables(tables, meta or {"source": {"format": "fixture"}})


def _partial(schema: pa.Schema, rows: list[dict]) -> pa.Schema:
    names = dict.fromkeys(k for row in rows for k in row)
    if not names:
        return schema
    return pa.schema([schema.field(n) for n in names if n in schema.names])


def tiny_snapshot() -> Snapshot:
    return snapshot_from_rows(tiny_tables())


class CountingCursor(sqlite3.Cursor):
    """A real sqlite3 cursor that counts the rows it hands to its caller
    (class-wide, in :attr:`fetched`), to show how much a command reads."""

    fetched = 0

    def fetchone(self):
        row = super().fetchone()
        CountingCursor.fetched += row is not None
        return row

    def fetchmany(self, size: int = 1):
        rows = super().fetchmany(size)
        CountingCursor.fetched += len(rows)
        return rows

    def fetchall(self):
        rows = super().fetchall()
        CountingCursor.fetched += len(rows)
        return rows


class CountingConnection(sqlite3.Connection):
    """Pass as ``connect_args={"factory": CountingConnection}`` to count
    the rows an engine's SQLite connections fetch."""

    def cursor(self, factory=CountingCursor):
        return super().cursor(factory)


def later_revisions(snap: Snapshot, n: int) -> Snapshot:
    """``n`` new ratings (revision 1000 of the first ``n`` stored ones) without
    ids, as a foreign export brings them: the database assigns the ids."""
    ratings = snap["ratings"].slice(0, n)
    ratings = ratings.set_column(0, "rating_id", pa.nulls(n, pa.int64()))
    revision = ratings.schema.get_field_index("revision")
    ratings = ratings.set_column(revision, "revision", pa.array([1_000] * n, pa.int16()))
    return Snapshot.from_tables({"ratings": ratings})
