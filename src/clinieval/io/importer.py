"""Importing a snapshot into the database, all or nothing.

Reading a source into a snapshot is :mod:`clinieval.sources`' job (the one
place a source string or a format name is turned into a reader); this module
validates what was read against the stored rows and writes it.
"""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc
import sqlalchemy as sa

from clinieval.contract import tabular
from clinieval.contract.validate import check_no_nul, validate
from clinieval.io.foreign.builder import LOCAL_IDS
from clinieval.snapshot import Snapshot
from clinieval.storage import db, lookup
from clinieval.storage.schema import snapshot as snapshot_tables


def import_snapshot(engine: sa.Engine, snapshot: Snapshot, *, sources: dict[str, str] | None = None,
                    replace: bool = False, progress=None) -> dict[str, int]:
    """Validate ``snapshot`` against itself and the stored rows it touches,
    then load it, all in one transaction. Entities (cases, models, answers,
    raters, criteria, studies) already stored with the same values are reused;
    a changed one is an error naming it and the field."""
    with db.writing(engine) as conn:
        # One at a time with a study being made or added to on the platform:
        # both may bring the same model rows.
        db.one_at_a_time(conn, "study content")
        if replace:
            db.clear(conn)
        counts = import_into(conn, snapshot, sources=sources, progress=progress)
    db.analyze(engine)
    return counts


def import_into(conn: sa.Connection, snapshot: Snapshot, *,
                sources: dict[str, str] | None = None, progress=None) -> dict[str, int]:
    """:func:`import_snapshot` in the caller's write transaction, so that what
    the caller writes beside the import (a study's settings, say) commits or
    rolls back with it. Does not refresh the planner's statistics."""
    check_no_nul(snapshot, sources)
    snapshot = _after_stored_ids(conn, _without_stored_entities(conn, snapshot, sources))
    validate(snapshot, sources=sources, existing=lookup.needed_keys(conn, snapshot))
    db.insert_snapshot(conn, snapshot, progress=progress)
    return snapshot.counts()


def _after_stored_ids(conn: sa.Connection, snapshot: Snapshot) -> Snapshot:
    """Move file-local preference numbers (and the ``review_id`` of ratings that
    point at them) past the largest stored preference id, inside the import's
    write transaction, so that a second foreign file appends."""
    meta = dict(snapshot.meta)
    if meta.pop("event_ids", None) != LOCAL_IDS:
        return snapshot
    column = snapshot_tables.preferences.c.preference_id
    offset = conn.execute(sa.select(sa.func.max(column))).scalar() or 0
    tables = dict(snapshot.tables)
    for name, key in (("preferences", "preference_id"), ("ratings", "review_id")):
        data = tables[name]
        shifted = pc.add(data.column(key), pa.scalar(offset, pa.int64()))
        tables[name] = data.set_column(data.column_names.index(key), key, shifted)
    return Snapshot(tables, meta)


def _without_stored_entities(conn: sa.Connection, snapshot: Snapshot,
                             sources: dict[str, str] | None) -> Snapshot:
    """Drop entity rows stored exactly as sent, so that a second file naming the
    same models, raters or cases appends its events."""
    tables = dict(snapshot.tables)
    for name in lookup.ENTITY_TABLES:
        contract, data = tabular.BY_NAME[name], tables[name]
        keys = data.column(contract.key).combine_chunks().drop_null()
        if len(keys) and lookup.stored_rows(conn, contract, keys).num_rows:
            tables[name] = lookup.unchanged_or_new(conn, contract, data,
                                                   where=(sources or {}).get(name))
    return Snapshot(tables, snapshot.meta)
