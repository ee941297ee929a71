"""Reading a snapshot from a SQLite file through the ``sqlite3`` module alone.

The audit of a SQLite database only reads: going through SQLAlchemy costs its
import (about 0.2 s) and nothing else, since the rows come from the driver's
cursor either way. :func:`clinieval.sources.read_url` takes this path for a
plain ``sqlite:///<path>`` URL of an existing file and SQLAlchemy's for any
other URL; both give the same tables (``storage.db`` reads SQLite rows through
:func:`sqlite_table` too). This module sits below ``storage.db`` and imports
nothing of it.
"""

from __future__ import annotations

import json
import re
import sqlite3
from pathlib import Path

import pyarrow as pa

from clinieval.contract import tabular
from clinieval.errors import ClinievalError
from clinieval.snapshot import Snapshot

_PLAIN_URL = re.compile(r"sqlite:///([A-Za-z0-9_./-]+)")
"""A file URL SQLAlchemy renders back unchanged (no driver, query or escapes)."""


SQLITE_HEADER = b"SQLite format 3\x00"
"""The first 16 bytes of every SQLite database file (its file format's header)."""


def sqlite_file_url(source: str | Path) -> str | None:
    """The ``sqlite:///`` URL of ``source`` when it is a path to a SQLite
    database file (recognised by its header, whatever its suffix); None for
    anything else, a file that cannot be read included (its reader says why)."""
    path = Path(source)
    try:
        with path.open("rb") as handle:
            if handle.read(len(SQLITE_HEADER)) != SQLITE_HEADER:
                return None
    except OSError:
        return None
    return f"sqlite:///{path.resolve()}"


def sqlite_path(url: str) -> Path | None:
    """The file of a plain ``sqlite:///<path>`` URL; None for any other URL."""
    match = _PLAIN_URL.fullmatch(url)
    return Path(match.group(1)) if match else None


def read_sqlite(conn: sqlite3.Connection, source: str) -> Snapshot:
    """Every table in one read transaction, ordered as ``storage.db`` orders them."""
    conn.execute("BEGIN")
    try:
        if not conn.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND"
                            " name = 'ratings'").fetchone():
            raise ClinievalError(f"database {source} has no clinieval tables; run"
                                 " `clinieval db upgrade` and `clinieval import` first")
        raw = {t.name: sqlite_table(conn.cursor(), t, order_by(t)) for t in tabular.ALL}
        rows = conn.execute("SELECT key, value FROM snapshot_meta").fetchall()
    finally:
        conn.execute("COMMIT")
    return Snapshot.from_tables(raw, {key: json.loads(value) for key, value in rows},
                                source=source)


def order_by(table: tabular.Table) -> str:
    """Rows in position order where a table has one, then by key."""
    return ", ".join(f'"{c}"' for c in ("position", table.key) if c in table.columns)


def sqlite_table(cursor, table: tabular.Table, order: str) -> pa.Table:
    """The driver's row tuples go to Arrow in one conversion (as a struct
    array), read as SQLite stores them: timestamps as UTC text, booleans 0/1."""
    columns = ", ".join(f'"{c}"' for c in table.columns)
    rows = cursor.execute(f'SELECT {columns} FROM "{table.name}" ORDER BY {order}').fetchall()
    stored = pa.struct([pa.field(f.name, _SQLITE_STORED.get(f.type.id, f.type))
                        for f in table.schema])
    arrays = pa.array(rows, type=stored).flatten()
    return pa.table([_from_sqlite(array, field) for array, field in
                     zip(arrays, table.schema, strict=True)], schema=table.schema)


_SQLITE_STORED = {pa.timestamp("us").id: pa.string(), pa.bool_().id: pa.int64()}


def _from_sqlite(column: pa.Array, field: pa.Field) -> pa.Array:
    if pa.types.is_timestamp(field.type):  # UTC wall time, no offset
        return column.cast(pa.timestamp("us")).cast(field.type)
    return column.cast(field.type)
