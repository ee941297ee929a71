"""Reading any supported source into a snapshot, and importing it.

Sources: a bundle folder, a folder of our CSV / JSONL / Parquet tables, or a
single foreign file (one of :data:`clinieval.io.foreign.FORMATS`). This is
the one place a format name is turned into a reader.
"""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import sqlalchemy as sa

from clinieval import tables as T
from clinieval.errors import InputError
from clinieval.io import archive, bundle
from clinieval.io.foreign import FORMATS, sniff_format
from clinieval.io.foreign.builder import LOCAL_IDS
from clinieval.io.foreign.records import keys_or, parse
from clinieval.io.tables_io import read_table_folder
from clinieval.io.validate import check_no_nul, validate
from clinieval.rubric import IDENTITY, CriterionMap, load_rubric
from clinieval.schema.domain import Rubric
from clinieval.snapshot import Snapshot
from clinieval.storage import db, lookup, sqltables

SOURCE_FORMATS = ("auto", "bundle", "tables", *FORMATS)
"""Every value ``--format`` accepts."""


def detect_format(path: Path) -> str:
    """The format of ``path``: a bundle, a tables folder, or a sniffed foreign file."""
    if bundle.is_bundle(path):
        return "bundle"
    if path.is_dir():
        return "tables"
    if not path.exists():
        raise InputError(str(path), "no such file or folder")
    fmt = sniff_format(path)
    if fmt == "unknown":
        parsed = parse(path)  # raises the precise error for broken files
        raise InputError(parsed.source, "cannot tell the file's format from its first record",
                         expected="a MOOVE contribution export, an arena battle log or"
                         " HealthBench rubric examples", got=keys_or(parsed.first()))
    return fmt


def read_source(path: str | Path, *, fmt: str = "auto", rubric: Rubric | None = None,
                criterion_map: CriterionMap | None = None) -> tuple[Snapshot, dict[str, str]]:
    """Read ``path`` into a snapshot, returning it and each table's source file.
    A ``.zip`` file is read as the bundle or tables folder it holds (the
    platform's export too)."""
    path = Path(path)
    if fmt not in SOURCE_FORMATS:
        raise InputError(str(path), f"unknown format {fmt!r}",
                         expected="one of " + ", ".join(SOURCE_FORMATS))
    if fmt in ("auto", "bundle", "tables") and archive.is_zip(path):
        with archive.opened(path) as (folder, inner):
            snap, sources = read_source(inner, fmt=fmt, rubric=rubric,
                                        criterion_map=criterion_map)
        return snap, {name: where.replace(str(folder), str(path))
                      for name, where in sources.items()}
    fmt = detect_format(path) if fmt == "auto" else fmt
    rubric = rubric or load_rubric()
    if fmt == "bundle":
        snap = bundle.read_bundle(path)
        return snap, {name: str(path / f"{name}.parquet") for name in snap.tables}
    if fmt == "tables":
        if not path.is_dir():
            raise InputError(str(path), "--format tables needs a folder",
                             expected="a folder of <table>.csv/.jsonl/.parquet files")
        return read_table_folder(path, rubric=rubric, criterion_map=criterion_map or IDENTITY)
    options = {} if criterion_map is None else {"criterion_map": criterion_map}
    snap = FORMATS[fmt].read(path, rubric=rubric, **options)
    return snap, {name: str(path) for name in snap.tables}


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
    column = sqltables.preferences.c.preference_id
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
        contract, data = T.BY_NAME[name], tables[name]
        keys = data.column(contract.key).combine_chunks().drop_null()
        if len(keys) and lookup.stored_rows(conn, contract, keys).num_rows:
            tables[name] = lookup.unchanged_or_new(conn, contract, data,
                                                   where=(sources or {}).get(name))
    return Snapshot(tables, snapshot.meta)
