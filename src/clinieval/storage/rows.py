"""Row-at-a-time writes for a live platform (web forms, automated judges).

Each call is one short transaction that validates its rows against the table
contract and the stored rows they refer to (targeted ``WHERE key IN`` reads,
never the whole table), inserts them, and lets the database assign the ids of
ratings, preferences and judgments. Whatever the database still refuses (a
concurrent writer got there first) comes back as an :class:`InputError` that
names the table, the field and the value.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

import pyarrow as pa
import sqlalchemy as sa

from clinieval.contract import tabular
from clinieval.contract.validate import validate
from clinieval.errors import InputError
from clinieval.snapshot import Snapshot, conform
from clinieval.storage import db, lookup
from clinieval.storage.schema import snapshot as snapshot_tables


class RowStore:
    """Writes rows one call = one transaction. Use an engine from
    :func:`clinieval.storage.db.make_engine` (SQLite needs its settings)."""

    def __init__(self, engine: sa.Engine) -> None:
        if engine.dialect.name == "sqlite" and not db.begins_transactions(engine):
            # Without it, concurrent writers would not take the write lock first.
            raise ValueError("RowStore needs a SQLite engine from"
                             " clinieval.storage.db.make_engine")
        self.engine = engine

    def add_ratings(self, rows: Sequence[Mapping[str, Any]]) -> list[int]:
        """Insert ratings (every column but ``rating_id``); their new ids, in order."""
        return self._add_events(tabular.RATINGS, rows)

    def add_preference(self, row: Mapping[str, Any]) -> int:
        """Insert one preference (every column but ``preference_id``); its new id."""
        return self._add_events(tabular.PREFERENCES, [row])[0]

    def add_judgments(self, rows: Sequence[Mapping[str, Any]]) -> list[int]:
        """Insert judgments (every column but ``judgment_id``); their new ids, in order."""
        return self._add_events(tabular.JUDGMENTS, rows)

    def add_entities(self, table: str, rows: Sequence[Mapping[str, Any]]) -> None:
        """Insert rows of a string-keyed table (studies, cases, models,
        answers, raters, criteria). A row already stored identically is
        skipped; one stored with a different value is an :class:`InputError`
        naming the row's id and the field."""
        if table not in lookup.ENTITY_TABLES:
            raise ValueError(f"add_entities takes one of {', '.join(lookup.ENTITY_TABLES)};"
                             f" got {table!r}")
        contract = tabular.BY_NAME[table]
        data = _arrow(contract, rows, allowed=contract.columns)
        with db.writing(self.engine) as conn:
            fresh = lookup.unchanged_or_new(conn, contract, data)
            _validate(conn, contract, fresh)
            _insert(conn, contract, fresh.to_pylist())

    def _add_events(self, contract: tabular.Table, rows: Sequence[Mapping[str, Any]]) -> list[int]:
        allowed = [c for c in contract.columns if c != contract.key]
        data = _arrow(contract, rows, allowed=allowed)
        with db.writing(self.engine) as conn:
            _validate(conn, contract, data)
            return _insert(conn, contract, data.drop_columns([contract.key]).to_pylist())


def _arrow(contract: tabular.Table, rows: Sequence[Mapping[str, Any]],
           allowed: list[str]) -> pa.Table:
    """The rows as an Arrow table of the contract's schema; an unknown field
    (including an id the database assigns) is an error, not silently dropped."""
    for index, row in enumerate(rows):
        unknown = sorted(set(row) - set(allowed))
        if unknown:
            raise InputError(contract.name, "unknown field", row=index + 1, field=unknown[0],
                             expected=f"one of {', '.join(allowed)}")
    raw = pa.table({name: _column(contract, name, [row.get(name) for row in rows])
                    for name in allowed})
    return conform(raw, contract, contract.name)


def _column(contract: tabular.Table, name: str, values: list) -> pa.Array:
    try:
        return pa.array(values)
    except (pa.ArrowInvalid, pa.ArrowTypeError):
        # Mixed Python types: name the first value that is not of the column's type.
        target = contract.schema.field(name).type
        for index, value in enumerate(values):
            try:
                pa.array([value], type=target)
            except (pa.ArrowInvalid, pa.ArrowTypeError):
                raise InputError(contract.name, "value has the wrong type", row=index + 1,
                                 field=name, expected=str(target), got=value) from None
        return pa.array(values, type=target)


def _validate(conn: sa.Connection, contract: tabular.Table, data: pa.Table) -> None:
    snapshot = Snapshot.from_tables({contract.name: data})
    validate(snapshot, sources={contract.name: contract.name},
             existing=lookup.needed_keys(conn, snapshot))


def _insert(conn: sa.Connection, contract: tabular.Table, rows: list[dict]) -> list:
    """Insert row by row (so a refusal names its row) and return the keys."""
    table = snapshot_tables.BY_NAME[contract.name]
    statement = table.insert().returning(table.c[contract.key])
    keys = []
    for index, row in enumerate(rows):
        try:
            keys.append(conn.execute(statement, row).scalar_one())
        except sa.exc.IntegrityError as err:
            raise refusal(err, contract.name, row, index) from None
    return keys


_SQLITE_COLUMNS = re.compile(r"constraint failed: (.+)$")


def refusal(err: sa.exc.IntegrityError, table: str, row: Mapping[str, Any],
            index: int) -> InputError:
    """Turn a constraint violation on ``row`` into an error naming the
    table, the field(s) the constraint covers and their values."""
    fields = _violated_fields(err, table)
    values = "; ".join(f"{f}={row.get(f)!r}" for f in fields) or "see the row"
    return InputError(table, f"the database refused the row ({_kind(err)}: {values})",
                      row=index + 1, field=", ".join(fields) or None,
                      expected=_EXPECTED[_kind(err)])


_EXPECTED = {
    "foreign key": "a value that refers to a stored row",
    "unique": "a combination not yet stored",
    "check": "a value the contract allows",
    "not null": "a value",
    "constraint": "a row the database accepts",
}


def _kind(err: sa.exc.IntegrityError) -> str:
    text = str(err.orig).lower()
    for kind in ("foreign key", "unique", "check", "not null"):
        if kind in text or kind.replace(" ", "-") in text or kind.replace(" ", "_") in text:
            return kind
    return "constraint"


def _violated_fields(err: sa.exc.IntegrityError, table: str) -> list[str]:
    diag = getattr(err.orig, "diag", None)
    if diag is not None:  # PostgreSQL names the constraint or the column.
        if diag.column_name:
            return [diag.column_name]
        return _constraint_columns(table, diag.constraint_name)
    match = _SQLITE_COLUMNS.search(str(err.orig))
    if match is None:  # SQLite does not say which foreign key failed.
        return sorted({c.parent.name for c in snapshot_tables.BY_NAME[table].foreign_keys})
    detail = match.group(1).strip()
    if "." in detail:  # UNIQUE / NOT NULL: "table.col, table.col"
        return [part.split(".", 1)[1] for part in detail.split(", ")]
    return _constraint_columns(table, detail)


def _constraint_columns(table: str, name: str | None) -> list[str]:
    for constraint in snapshot_tables.BY_NAME[table].constraints:
        if constraint.name == name:
            columns = [c.name for c in constraint.columns]
            if not columns and isinstance(constraint, sa.CheckConstraint):
                columns = [c.name for c in snapshot_tables.BY_NAME[table].columns
                           if re.search(rf"\b{c.name}\b", str(constraint.sqltext))]
            return columns
    return []
