"""Targeted reads for validating writes: only the stored keys a write touches.

Validation of an append needs to know, for the incoming rows, which of their
keys are already taken and which of the rows they refer to exist. Both are
answered by ``WHERE key IN (...)`` queries over the incoming values, so the
cost follows the size of the write, not the size of the database.
"""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc
import sqlalchemy as sa

from clinieval.contract import tabular
from clinieval.errors import InputError
from clinieval.snapshot import Snapshot
from clinieval.storage.schema import snapshot as snapshot_tables

IN_CHUNK = 5_000
"""Values per IN list (well below SQLite's and PostgreSQL's parameter limits)."""

ENTITY_TABLES = tuple(t.name for t in tabular.ALL if not t.generated_key)
"""String-keyed tables whose rows are defined, not recorded: a stored row may
be sent again identically."""


def needed_keys(conn: sa.Connection, snapshot: Snapshot) -> dict[str, pa.Array]:
    """Stored keys that ``snapshot`` touches, in the form
    :func:`clinieval.contract.validate.validate` takes as ``existing``: per table,
    the stored ones among the snapshot's own keys and the keys it refers to;
    ``answer_cases`` pairs for the answers its preferences compare."""
    found: dict[str, pa.Array] = {}
    for table in tabular.ALL:
        wanted = _wanted(snapshot, table)
        if len(wanted):
            found[table.name] = _select_in(conn, table.name, table.key, wanted)
    compared = _unique(pc.unique(pa.chunked_array(
        [snapshot["preferences"].column(c) for c in ("answer_a_id", "answer_b_id")],
        type=pa.string())))
    if len(compared):
        found["answer_cases"] = _answer_cases(conn, compared)
    return found


def _wanted(snapshot: Snapshot, table: tabular.Table) -> pa.Array:
    columns = [snapshot[table.name].column(table.key)]
    for referring in tabular.ALL:
        columns += [snapshot[referring.name].column(ref.column) for ref in referring.references
                    if ref.target == table.name]
    key_type = table.schema.field(table.key).type
    return _unique(pa.chunked_array([c.cast(key_type) for c in columns], type=key_type))


def _unique(values: pa.ChunkedArray) -> pa.Array:
    return pc.unique(values).drop_null()


def _select_in(conn: sa.Connection, table: str, key: str, values: pa.Array) -> pa.Array:
    column = snapshot_tables.BY_NAME[table].c[key]
    found: list = []
    for start in range(0, len(values), IN_CHUNK):
        chunk = values.slice(start, IN_CHUNK).to_pylist()
        found += conn.execute(sa.select(column).where(column.in_(chunk))).scalars().all()
    return pa.array(found, type=values.type)


def _answer_cases(conn: sa.Connection, answer_ids: pa.Array) -> pa.Array:
    answers = snapshot_tables.answers
    pairs: list[str] = []
    for start in range(0, len(answer_ids), IN_CHUNK):
        chunk = answer_ids.slice(start, IN_CHUNK).to_pylist()
        query = sa.select(answers.c.answer_id, answers.c.case_id).where(
            answers.c.answer_id.in_(chunk))
        pairs += [f"{a}\x1f{c}" for a, c in conn.execute(query)]
    return pa.array(pairs, type=pa.string())


def stored_rows(conn: sa.Connection, table: tabular.Table, keys: pa.Array) -> pa.Table:
    """The stored rows of ``table`` whose keys are among ``keys``, conformed to
    the contract (so they compare with incoming rows value for value)."""
    sa_table = snapshot_tables.BY_NAME[table.name]
    rows: list[dict] = []
    for start in range(0, len(keys), IN_CHUNK):
        chunk = keys.slice(start, IN_CHUNK).to_pylist()
        query = sa.select(sa_table).where(sa_table.c[table.key].in_(chunk))
        rows += [dict(r) for r in conn.execute(query).mappings()]
    return pa.Table.from_pylist(rows, schema=table.schema)


def unchanged_or_new(conn: sa.Connection, contract: tabular.Table, data: pa.Table,
                     where: str | None = None) -> pa.Table:
    """The rows of ``data`` not yet stored. A row stored exactly as sent is
    dropped; one stored with any different value is an :class:`InputError`
    naming the row's id and the first differing field."""
    keys = data.column(contract.key).combine_chunks()
    before = {row[contract.key]: row for row in stored_rows(conn, contract, keys).to_pylist()}
    keep = []
    for row in data.to_pylist():
        old = before.get(row[contract.key])
        changed = [] if old is None else [c for c in contract.columns if row[c] != old[c]]
        if changed:
            raise InputError(where or contract.name, "already stored with a different definition",
                             row=row[contract.key], field=changed[0],
                             expected=f"the stored value {old[changed[0]]!r}", got=row[changed[0]])
        keep.append(old is None)
    return data.filter(pa.array(keep, type=pa.bool_()))
