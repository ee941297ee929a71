"""Column-wise validation of a whole snapshot before anything is written.

Each check is vectorised (pyarrow compute); on failure it finds the first
offending row and raises :class:`InputError` naming the source file, the row
(1-based, data rows only, header not counted), the field and the expectation.
"""

from __future__ import annotations

from collections.abc import Mapping

import pyarrow as pa
import pyarrow.compute as pc

from clinieval import tables as T
from clinieval.errors import InputError
from clinieval.snapshot import Snapshot

FOREIGN_KEYS: dict[str, tuple[tuple[str, str], ...]] = {
    "cases": (("study_id", "studies"),),
    "answers": (("case_id", "cases"), ("model_id", "models")),
    "ratings": (("answer_id", "answers"), ("rater_id", "raters"), ("criterion_id", "criteria")),
    "preferences": (("case_id", "cases"), ("answer_a_id", "answers"), ("answer_b_id", "answers"),
                    ("rater_id", "raters")),
    "judgments": (("answer_id", "answers"),),
}

SINGULAR = {"studies": "study", "cases": "case", "models": "model", "answers": "answer",
             "raters": "rater", "criteria": "criterion"}

ALLOWED: dict[tuple[str, str], tuple[str, ...]] = {
    ("preferences", "choice"): T.CHOICES,
    ("preferences", "shown_left"): T.SIDES,
    ("judgments", "parse_status"): T.PARSE_STATUSES,
}

RANGES: dict[tuple[str, str], tuple[int, int]] = {
    ("ratings", "score"): (T.SCORE_MIN, T.SCORE_MAX),
    ("ratings", "revision"): (0, 32_000),
    ("cases", "risk_level"): (1, 5),
    ("answers", "length_chars"): (0, 2**31 - 1),
    ("answers", "sample_index"): (0, 32_000),
}


def validate(snapshot: Snapshot, *, sources: Mapping[str, str] | None = None,
             existing: Mapping[str, pa.Array] | None = None) -> None:
    """Raise :class:`InputError` at the first problem in ``snapshot``.

    ``existing`` maps table names to the keys already stored (for imports
    into a non-empty database): they satisfy references and may not be
    re-used as new keys.
    """
    sources = dict(sources or {})
    existing = dict(existing or {})
    for table in T.ALL:
        data = snapshot[table.name]
        where = sources.get(table.name, f"{table.name} table")
        _check_required(data, table, where)
        _check_unique(data, table, where, existing.get(table.name))
        _check_values(data, table.name, where)
        for column, target in FOREIGN_KEYS.get(table.name, ()):
            keys = _keys(snapshot, target, existing)
            _check_reference(data, column, keys, target, where)
    _check_preferences(snapshot, sources.get("preferences", "preferences table"), existing)
    _check_rating_uniqueness(snapshot["ratings"], sources.get("ratings", "ratings table"))


def _first(mask: pa.ChunkedArray | pa.Array) -> int:
    """Index of the first True in a boolean mask (nulls count as False), or -1."""
    return pc.index(pc.fill_null(mask, False), True).as_py()


def _fail(data: pa.Table, where: str, index: int, column: str, message: str, expected: str):
    raise InputError(where, message, row=index + 1, field=column, expected=expected,
                     got=data.column(column)[index].as_py())


def _check_required(data: pa.Table, table: T.Table, where: str) -> None:
    for column in table.required:
        index = _first(pc.is_null(data.column(column)))
        if index >= 0:
            raise InputError(where, "required value is missing", row=index + 1, field=column,
                             expected="a value")
        if pa.types.is_string(data.schema.field(column).type):
            index = _first(pc.equal(pc.utf8_trim_whitespace(data.column(column)), ""))
            if index >= 0:
                _fail(data, where, index, column, "required value is empty", "a non-empty string")


def _check_unique(data: pa.Table, table: T.Table, where: str, stored: pa.Array | None) -> None:
    keys = data.column(table.key)
    if stored is not None and len(stored):
        index = _first(pc.is_in(keys, value_set=stored))
        if index >= 0:
            _fail(data, where, index, table.key, "id already exists in the database",
                  "an id not yet stored")
    # A missing generated key is not a duplicate: the database will assign it.
    if pc.count_distinct(keys).as_py() == data.num_rows - keys.null_count:
        return
    import numpy as np

    present = np.flatnonzero(pc.is_valid(keys).to_numpy(zero_copy_only=False))
    values = keys.take(present).to_numpy(zero_copy_only=False)
    _, first_seen, counts = np.unique(values, return_index=True, return_counts=True)
    seen_once = np.zeros(len(values), dtype=bool)
    seen_once[first_seen] = True
    dup = int(present[np.flatnonzero(~seen_once)[0]]) if counts.max() > 1 else -1
    _fail(data, where, dup, table.key, "duplicate id", "each id once")


def _check_values(data: pa.Table, name: str, where: str) -> None:
    for (table, column), allowed in ALLOWED.items():
        if table == name:
            bad = pc.invert(pc.is_in(data.column(column), value_set=pa.array(allowed)))
            index = _first(pc.and_(bad, pc.is_valid(data.column(column))))
            if index >= 0:
                _fail(data, where, index, column, "unknown value", " / ".join(allowed))
    for (table, column), (lo, hi) in RANGES.items():
        if table == name:
            values = data.column(column)
            index = _first(pc.or_(pc.less(values, lo), pc.greater(values, hi)))
            if index >= 0:
                _fail(data, where, index, column, "value out of range",
                      f"an integer from {lo} to {hi}")


def _keys(snapshot: Snapshot, target: str, existing: Mapping[str, pa.Array]) -> pa.Array:
    own = snapshot[target].column(T.BY_NAME[target].key).combine_chunks()
    stored = existing.get(target)
    return pa.concat_arrays([own, stored.cast(own.type)]) if stored is not None else own


def _check_reference(data: pa.Table, column: str, keys: pa.Array, target: str, where: str) -> None:
    values = data.column(column)
    missing = pc.and_(pc.is_valid(values), pc.invert(pc.is_in(values, value_set=keys)))
    index = _first(missing)
    if index >= 0:
        _fail(data, where, index, column, f"refers to a {SINGULAR[target]} that does not exist",
              f"an id present in {target}")


def _check_preferences(snapshot: Snapshot, where: str, existing: Mapping[str, pa.Array]) -> None:
    prefs = snapshot["preferences"]
    if prefs.num_rows == 0:
        return
    index = _first(pc.equal(prefs.column("answer_a_id"), prefs.column("answer_b_id")))
    if index >= 0:
        _fail(prefs, where, index, "answer_b_id", "compares an answer with itself",
              "two different answers (A != B)")
    answer_case = _answer_cases(snapshot, existing)
    for column in ("answer_a_id", "answer_b_id"):
        pair = pc.binary_join_element_wise(prefs.column(column), prefs.column("case_id"), "\x1f")
        index = _first(pc.invert(pc.is_in(pair, value_set=answer_case)))
        if index >= 0:
            _fail(prefs, where, index, column, "answer belongs to another case",
                  f"an answer of case {prefs.column('case_id')[index].as_py()!r}")


def _answer_cases(snapshot: Snapshot, existing: Mapping[str, pa.Array]) -> pa.Array:
    answers = snapshot["answers"]
    pairs = pc.binary_join_element_wise(answers.column("answer_id"), answers.column("case_id"),
                                        "\x1f").combine_chunks()
    stored = existing.get("answer_cases")
    return pa.concat_arrays([pairs, stored]) if stored is not None else pairs


def _check_rating_uniqueness(ratings: pa.Table, where: str) -> None:
    if ratings.num_rows == 0:
        return
    import polars as pl

    keys = ["answer_id", "rater_id", "criterion_id", "revision"]
    frame = pl.from_arrow(ratings.select(keys)).with_columns(pl.col("revision").fill_null(0))
    repeat = frame.select(pl.struct(keys).is_first_distinct().not_().alias("repeat"))["repeat"]
    if repeat.any():
        index = int(repeat.arg_true()[0])
        raise InputError(where, "the same rater scored this answer on this criterion twice"
                         " in one revision", row=index + 1, field="criterion_id",
                         expected="one score per (answer, rater, criterion, revision);"
                         " record edits as a higher revision",
                         got=ratings.column("criterion_id")[index].as_py())
