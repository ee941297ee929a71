"""Engines, migrations, and set-based loading and reading of snapshots.

SQLite connections run in WAL mode with foreign keys on and
``synchronous=NORMAL``: a commit reaches the WAL file (the operating system's
cache) before it returns, so an acknowledged write survives the server
process being killed (``tests/test_web_durability.py`` SIGKILLs it), but the
last commits before a power loss or kernel crash may be lost (WAL is synced
at checkpoints only); use ``FULL`` where that matters. SQLAlchemy (not the
sqlite3 module) starts their transactions, so a writer can take the write
lock up front (``BEGIN IMMEDIATE``) instead of failing when it upgrades a read.
Every multi-row write is one transaction: a snapshot is loaded completely or
not at all.
"""

from __future__ import annotations

import json
import sqlite3
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pacsv
import sqlalchemy as sa

from clinieval.contract import tabular
from clinieval.errors import ClinievalError
from clinieval.snapshot import Snapshot
from clinieval.storage import sqlite_read
from clinieval.storage.schema import snapshot as snapshot_tables

if TYPE_CHECKING:  # Alembic is imported only to migrate, not to read or write rows
    from alembic.config import Config

MIGRATIONS = Path(__file__).parent / "migrations"
BATCH_ROWS = 50_000

Progress = Callable[[str, int], None]


def make_engine(url: str, **options) -> sa.Engine:
    """An engine for ``url`` (``options`` go to :func:`sqlalchemy.create_engine`);
    SQLite gets WAL and enforced foreign keys."""
    if url.startswith(("postgresql://", "postgres://")):
        url = "postgresql+psycopg://" + url.split("://", 1)[1]
    if _sqlite_file(url) and "poolclass" not in options:
        # Hand out the connection returned last: the server does its SQLite work on
        # one thread, a request at a time, so that is nearly always the same one and
        # its page cache stays valid (SQLite empties a connection's whole cache when
        # another connection wrote since its last transaction; a FIFO pool of five
        # read every page afresh, 80 reads a submission at paper scale).
        options.setdefault("pool_use_lifo", True)
    engine = sa.create_engine(url, **options)
    if engine.dialect.name == "sqlite":
        sa.event.listen(engine, "connect", _sqlite_pragmas)
        sa.event.listen(engine, "begin", _sqlite_begin)
    return engine


@contextmanager
def writing(engine: sa.Engine) -> Iterator[sa.Connection]:
    """A transaction that will write: on SQLite it holds the write lock from
    its first statement, so concurrent writers queue (busy timeout) rather
    than fail on a snapshot that went stale between their read and write."""
    with engine.connect().execution_options(sqlite_begin="IMMEDIATE") as conn, conn.begin():
        yield conn


def one_at_a_time(conn: sa.Connection, name: str) -> None:
    """Hold, until the transaction ends, a lock that every transaction naming
    ``name`` takes: they run one after the other. On PostgreSQL a transaction
    advisory lock (two studies created at once each found a shared model
    not yet stored, and the second insert failed); on SQLite the write lock
    that :func:`writing` holds already does it."""
    if conn.dialect.name == "postgresql":
        conn.execute(sa.text("SELECT pg_advisory_xact_lock(hashtext(:name))"),
                     {"name": "clinieval: " + name})


def reading(engine: sa.Engine) -> sa.Connection:
    """A connection that only reads. On PostgreSQL it runs in autocommit mode:
    each statement sees the data committed when it starts, as it would inside
    a READ COMMITTED transaction, without a BEGIN and a ROLLBACK round trip
    per use. (SQLite reads keep their deferred transaction: no round trips.)"""
    conn = engine.connect()
    if engine.dialect.name == "postgresql":
        conn.execution_options(isolation_level="AUTOCOMMIT")
    return conn


def analyze(engine: sa.Engine) -> None:
    """Planner statistics for the study tables after a bulk load (PostgreSQL):
    until autovacuum gets to them, a freshly loaded database has none and the
    platform's queries are planned as if its tables were empty. Only these
    tables (those the schema's revision has): the database may hold other
    schemas. SQLite keeps its plans."""
    if engine.dialect.name != "postgresql":
        return
    from clinieval.storage.schema import platform as platform_tables
    names = [*snapshot_tables.BY_NAME, platform_tables.answer_load.name,
             platform_tables.pair_load.name]
    with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
        present = conn.execute(sa.text(
            "SELECT n FROM unnest(CAST(:names AS text[])) AS n"
            " WHERE to_regclass(quote_ident(n)) IS NOT NULL"), {"names": names}).scalars().all()
        if present:
            conn.exec_driver_sql("ANALYZE " + ", ".join(f'"{name}"' for name in present))


def begins_transactions(engine: sa.Engine) -> bool:
    """Whether ``engine`` starts SQLite transactions itself (see :func:`writing`)."""
    return sa.event.contains(engine, "begin", _sqlite_begin)


SQLITE_CACHE_KIB = 64 * 1024
"""Page cache per SQLite connection, at most."""


def _sqlite_file(url: str) -> bool:
    """Whether ``url`` names a SQLite database file (not one in memory)."""
    if not url.startswith("sqlite"):
        return False
    parsed = sa.engine.make_url(url)
    return parsed.database not in (None, "", ":memory:") and \
        parsed.query.get("mode") != "memory"


CHECKPOINT_EVERY_S = 0.25
WAL_FALLBACK_PAGES = 10_000
"""With checkpoints in the background, a commit checkpoints only past this
many WAL pages (40 MiB), should the checkpointing thread fall behind."""


@contextmanager
def checkpoints_in_background(engine: sa.Engine, every_s: float = CHECKPOINT_EVERY_S
                              ) -> Iterator[None]:
    """SQLite (a file): while the block runs, WAL checkpoints are made by a
    thread of their own, a passive one every ``every_s`` seconds, instead of
    by whichever commit finds the WAL past 1,000 pages. The server runs its
    SQLite work on the event loop, so a checkpoint there (copying pages into
    the database file and syncing it) held up every request in flight; the
    sqlite3 module lets go of the interpreter while SQLite works, so on its
    own thread it takes the other core. Does nothing on other databases."""
    if engine.dialect.name != "sqlite" or not _sqlite_file(str(engine.url)):
        yield
        return

    def fallback_only(dbapi_conn, _record) -> None:
        dbapi_conn.execute(f"PRAGMA wal_autocheckpoint={WAL_FALLBACK_PAGES}")

    sa.event.listen(engine, "connect", fallback_only)
    engine.dispose()  # pooled connections come back with the setting
    stop = threading.Event()
    thread = threading.Thread(target=_checkpointing, args=(engine.url.database, every_s, stop),
                              name="clinieval-checkpoints", daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join()
        sa.event.remove(engine, "connect", fallback_only)
        engine.dispose()


def _checkpointing(path: str, every_s: float, stop: threading.Event) -> None:
    conn = sqlite3.connect(path, check_same_thread=False)
    try:
        while not stop.wait(every_s):
            try:
                # PASSIVE waits for no reader or writer: it copies what it can.
                conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchall()
            except sqlite3.OperationalError:  # busy with another checkpoint: next time
                pass
    finally:
        conn.close()


def _sqlite_pragmas(dbapi_conn, _record) -> None:
    # Transactions are begun by _sqlite_begin, never implicitly by sqlite3.
    dbapi_conn.isolation_level = None
    cursor = dbapi_conn.cursor()
    cursor.execute("PRAGMA journal_mode=WAL")
    cursor.execute("PRAGMA foreign_keys=ON")
    cursor.execute("PRAGMA synchronous=NORMAL")
    # Room for a paper-scale study's working set (the default is 2 MiB; memory is
    # taken only as pages are read).
    cursor.execute(f"PRAGMA cache_size=-{SQLITE_CACHE_KIB}")
    cursor.close()


def _sqlite_begin(conn: sa.Connection) -> None:
    mode = conn.get_execution_options().get("sqlite_begin", "DEFERRED")
    # Straight to the driver: this runs for every transaction, and SQLAlchemy's
    # statement machinery would cost more than the BEGIN itself.
    conn.connection.driver_connection.execute(_BEGIN[mode])


_BEGIN = {mode: f"BEGIN {mode}" for mode in ("DEFERRED", "IMMEDIATE", "EXCLUSIVE")}


def alembic_config(engine: sa.Engine) -> Config:
    from alembic.config import Config

    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS))
    url = engine.url.render_as_string(hide_password=False)
    config.set_main_option("sqlalchemy.url", url.replace("%", "%%"))
    return config


def upgrade(engine: sa.Engine, revision: str = "head") -> None:
    """Bring the schema to ``revision`` with the packaged Alembic migrations."""
    from alembic import command

    config = alembic_config(engine)
    with engine.begin() as conn:
        config.attributes["connection"] = conn
        command.upgrade(config, revision)


def current_revision(engine: sa.Engine) -> str | None:
    with engine.connect() as conn:
        if not sa.inspect(conn).has_table("alembic_version"):
            return None
        return conn.execute(sa.text("SELECT version_num FROM alembic_version")).scalar()


def counts(engine: sa.Engine) -> dict[str, int]:
    with engine.connect() as conn:
        return {name: conn.execute(sa.select(sa.func.count()).select_from(tbl)).scalar_one()
                for name, tbl in snapshot_tables.BY_NAME.items()}


def load_snapshot(engine: sa.Engine, snapshot: Snapshot, *, progress: Progress | None = None,
                  replace: bool = False) -> dict[str, int]:
    """Insert every table of ``snapshot`` in one transaction.

    With ``replace`` the existing rows are deleted first (same transaction).
    Returns the inserted row counts. Nothing is written if anything fails.
    """
    with writing(engine) as conn:
        if replace:
            clear(conn)
        insert_snapshot(conn, snapshot, progress=progress)
    return snapshot.counts()


def clear(conn: sa.Connection) -> None:
    """Delete every stored row (inside the caller's transaction)."""
    for name in reversed(list(snapshot_tables.BY_NAME)):
        conn.execute(snapshot_tables.BY_NAME[name].delete())
    conn.execute(snapshot_tables.snapshot_meta.delete())


def insert_snapshot(conn: sa.Connection, snapshot: Snapshot, *,
                    progress: Progress | None = None) -> None:
    """Insert every table of ``snapshot`` in the caller's transaction. Rows of
    ratings, preferences and judgments without an id get one from the database."""
    meta = dict(snapshot.meta)
    if _stored_flag(conn) != meta.get("rater_ids") and _has_raters(conn):
        # Appending to stored raters: the ids are only pseudonymous if both were.
        meta["rater_ids"] = "mixed"
    for table in tabular.ALL:
        _insert(conn, table, snapshot[table.name], progress)
    advance_id_sequences(conn)
    _write_meta(conn, meta)


def advance_id_sequences(conn: sa.Connection) -> None:
    """After rows arrived with their own ids, move PostgreSQL's identity
    sequences past the largest stored id, so the next generated id is free.
    (SQLite's rowid always continues from the largest id.)"""
    if conn.dialect.name != "postgresql":
        return
    present = set(sa.inspect(conn).get_table_names())
    for table in tabular.ALL:
        # A database at an older revision lacks the tables added since
        # (adjudications, 0018); it holds no rows of them to advance past.
        if table.generated_key and table.name in present:
            conn.exec_driver_sql(
                f"SELECT setval(pg_get_serial_sequence('\"{table.name}\"', '{table.key}'),"
                f' GREATEST(MAX("{table.key}"), 0) + 1, false) FROM "{table.name}"')


class StorageError(ClinievalError):
    """The database refused a write; nothing of that write was kept."""


def _insert(conn: sa.Connection, table: tabular.Table, data: pa.Table,
            progress: Progress | None) -> None:
    if data.num_rows == 0:
        return
    try:
        _insert_rows(conn, table, data, progress)
    except (sa.exc.DBAPIError, conn.dialect.dbapi.Error) as err:
        detail = str(getattr(err, "orig", err)).strip().splitlines()[0]
        raise StorageError(f"table {table.name}: the database refused the rows ({detail});"
                           " nothing was written") from err


def _insert_rows(conn: sa.Connection, table: tabular.Table, data: pa.Table,
                 progress: Progress | None) -> None:
    """Set-based loading: COPY on PostgreSQL, ``executemany`` of plain tuples
    on SQLite, one batch of Arrow rows at a time."""
    load = _copy_postgres if conn.dialect.name == "postgresql" else _executemany
    cursor = conn.connection.driver_connection.cursor()
    for batch in data.to_batches(BATCH_ROWS):
        load(cursor, table, batch)
        if progress:
            progress(table.name, batch.num_rows)


def _quoted(table: tabular.Table) -> str:
    return ", ".join(f'"{c}"' for c in table.columns)


def _copy_postgres(cursor, table: tabular.Table, batch: pa.RecordBatch) -> None:
    """COPY in CSV form written by Arrow: unquoted empty is NULL, quoted empty
    is an empty string, exactly PostgreSQL's CSV rules. Rows without a
    generated id are copied without that column, so the identity fills it."""
    data = pa.Table.from_batches([batch])
    if table.generated_key and data.column(table.key).null_count:
        given = pc.is_valid(data.column(table.key))
        _copy_csv(cursor, table.name, data.filter(given))
        _copy_csv(cursor, table.name, data.filter(pc.invert(given)).drop_columns([table.key]))
        return
    _copy_csv(cursor, table.name, data)


def _copy_csv(cursor, name: str, data: pa.Table) -> None:
    if data.num_rows == 0:
        return
    sink = pa.BufferOutputStream()
    pacsv.write_csv(data, sink, pacsv.WriteOptions(include_header=False))
    columns = ", ".join(f'"{c}"' for c in data.column_names)
    with cursor.copy(f'COPY "{name}" ({columns}) FROM STDIN WITH (FORMAT csv)') as cp:
        cp.write(sink.getvalue().to_pybytes())


def _executemany(cursor, table: tabular.Table, batch: pa.RecordBatch) -> None:
    marks = ", ".join("?" for _ in table.columns)
    columns = [_sqlite_column(column) for column in batch.columns]
    cursor.executemany(f'INSERT INTO "{table.name}" ({_quoted(table)}) VALUES ({marks})',
                       zip(*columns, strict=True))


def _sqlite_column(column: pa.Array) -> list:
    """Python values as SQLAlchemy's SQLite types store them (timestamps as
    'YYYY-MM-DD HH:MM:SS.ffffff' text in UTC)."""
    if pa.types.is_timestamp(column.type):
        column = pc.strftime(column, format="%Y-%m-%d %H:%M:%S")
    return column.to_pylist()


def _stored_flag(conn: sa.Connection) -> str | None:
    query = sa.select(snapshot_tables.snapshot_meta.c.value).where(
        snapshot_tables.snapshot_meta.c.key ==
                                                          "rater_ids")
    value = conn.execute(query).scalar()
    return None if value is None else json.loads(value)


def _has_raters(conn: sa.Connection) -> bool:
    return conn.execute(sa.select(snapshot_tables.raters.c.rater_id).limit(1)).first() is not None


def _write_meta(conn: sa.Connection, meta: dict) -> None:
    rows = [{"key": k, "value": json.dumps(v, sort_keys=True, default=str)}
            for k, v in meta.items()]
    for row in rows:
        meta_table = snapshot_tables.snapshot_meta
        conn.execute(meta_table.delete().where(meta_table.c.key == row["key"]))
    if rows:
        conn.execute(snapshot_tables.snapshot_meta.insert(), rows)


def read_snapshot(engine: sa.Engine) -> Snapshot:
    """Read every table back into Arrow (ordered by primary key)."""
    with engine.connect() as conn:
        if not sa.inspect(conn).has_table("ratings"):
            raise ClinievalError(
                f"database {engine.url.render_as_string()} has no clinieval tables;"
                " run `clinieval db upgrade` and `clinieval import` first"
            )
        raw = {t.name: _read_table(conn, t) for t in tabular.ALL}
        rows = conn.execute(snapshot_tables.snapshot_meta.select())
        meta = {row.key: json.loads(row.value) for row in rows}
    return Snapshot.from_tables(raw, meta, source=engine.url.render_as_string())


def _read_table(conn: sa.Connection, table: tabular.Table) -> pa.Table:
    """One query per table, turned into Arrow columns without per-row
    Python objects on PostgreSQL (COPY to CSV, parsed by Arrow) and with
    only the driver's tuples on SQLite."""
    order = sqlite_read.order_by(table)
    if conn.dialect.name == "postgresql":
        return _read_postgres(conn, table, order)
    return sqlite_read.sqlite_table(conn.connection.driver_connection.cursor(), table, order)


def _read_postgres(conn: sa.Connection, table: tabular.Table, order: str) -> pa.Table:
    """COPY the table out as CSV, with timestamps as integer microseconds
    since the epoch (exact, independent of the session's time zone)."""
    select = ", ".join(_pg_column(f) for f in table.schema)
    query = (f'COPY (SELECT {select} FROM "{table.name}" ORDER BY {order})'
             " TO STDOUT WITH (FORMAT csv)")
    sink = bytearray()
    with conn.connection.driver_connection.cursor().copy(query) as copy:
        for chunk in copy:
            sink += chunk
    if not sink:
        return table.schema.empty_table()
    read_types = {f.name: pa.int64() if pa.types.is_timestamp(f.type) else f.type
                  for f in table.schema}
    data = pacsv.read_csv(
        pa.BufferReader(bytes(sink)),
        read_options=pacsv.ReadOptions(column_names=table.columns),
        parse_options=pacsv.ParseOptions(newlines_in_values=True),
        # PostgreSQL's CSV: unquoted empty is NULL, quoted empty is "".
        convert_options=pacsv.ConvertOptions(column_types=read_types, strings_can_be_null=True,
                                             quoted_strings_can_be_null=False,
                                             null_values=[""], true_values=["t"],
                                             false_values=["f"]))
    return pa.table([data.column(f.name).cast(f.type) for f in table.schema], schema=table.schema)


def _pg_column(field: pa.Field) -> str:
    if pa.types.is_timestamp(field.type):
        return f"""(EXTRACT(EPOCH FROM "{field.name}") * 1000000)::bigint"""
    return f'"{field.name}"'
