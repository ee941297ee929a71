"""What a source string means: the one resolver every way in goes through.

A source is ``demo``, a SQLite database file, a database URL, a bundle
folder, a zip of a bundle or tables folder (the platform's export too), a
folder of our CSV / JSONL / Parquet tables, or a single foreign file (one of
:data:`clinieval.io.foreign.FORMATS`). :data:`RECOGNISERS` tries them in that
order and the first that matches reads the source; this is the one place a
source string or a format name is turned into a reader.

Invariants:

- The order is fixed: ``demo`` always means the bundled demo (even beside a
  file of that name), a file with SQLite's header is a database whatever its
  suffix, and text with ``://`` is a database URL, before any path test.
- ``clinieval import`` and uploads read files only (:data:`FILE_RECOGNISERS`,
  through :func:`read_source`): never the demo, a database or a URL.
- The audit reads a SQLite file through the ``sqlite3`` module
  (:func:`read_url`) and holds every source, a bundle's too, to the import's
  contract before it reads a number (:func:`read_for_audit`).
- Importing this module adds only the zip module to what the audit has
  already imported (its read-ahead child imports it); each reader imports
  what it needs when it runs.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from clinieval.errors import InputError
from clinieval.io import archive, bundle

if TYPE_CHECKING:
    from clinieval.rubric import CriterionMap
    from clinieval.schema.domain import Rubric
    from clinieval.snapshot import Snapshot


Read = tuple["Snapshot", dict[str, str]]
"""A snapshot and the source of each of its tables (for error messages)."""


@dataclass(frozen=True)
class Recogniser:
    """One kind of source: how to tell it from its text, and how to read it.

    ``read(text, rubric, criterion_map)`` gives the snapshot and each table's
    source; ``bundle(text)`` is the bundle folder whose verified checksum
    names the snapshot (the audit's); ``opens(text)`` is a context in which the source
    is a folder to resolve again (a zip's extracted contents)."""

    name: str
    matches: Callable[[str], bool]
    read: Callable[..., Read]
    bundle: Callable[[str], Path] | None = None
    opens: Callable[[str], AbstractContextManager[Path]] | None = None


def read_url(url: str) -> Snapshot:
    """The snapshot stored at the database ``url``: through the ``sqlite3``
    module alone for a plain ``sqlite:///<path>`` URL of an existing file
    (SQLAlchemy's import costs about 0.2 s and nothing else), else through
    SQLAlchemy; both give the same tables."""
    import sqlite3
    from contextlib import closing

    from clinieval.storage.sqlite_read import read_sqlite, sqlite_path

    path = sqlite_path(url)
    if path is not None:
        try:
            conn = sqlite3.connect(f"{path.resolve().as_uri()}?mode=rw", uri=True,
                                   isolation_level=None)
        except sqlite3.OperationalError:  # no such file: SQLAlchemy's path says so
            conn = None
        if conn is not None:
            with closing(conn):
                return read_sqlite(conn, url)
    from clinieval.storage.db import make_engine, read_snapshot

    return read_snapshot(make_engine(url))


def _by_tables(snap: Snapshot, where: str) -> Read:
    return snap, {name: where for name in snap.tables}


def _read_demo(text: str, rubric: Rubric | None = None,
               criterion_map: CriterionMap | None = None) -> Read:
    from clinieval.demo import demo_bundle, demo_snapshot

    return _by_tables(demo_snapshot(), str(demo_bundle()))


def _demo_folder(text: str) -> Path:
    from clinieval.demo import demo_bundle

    return demo_bundle()


def _is_sqlite_file(text: str) -> bool:
    from clinieval.storage.sqlite_read import sqlite_file_url

    return "://" not in text and sqlite_file_url(text) is not None


def _read_sqlite_file(text: str, rubric: Rubric | None = None,
                      criterion_map: CriterionMap | None = None) -> Read:
    from clinieval.storage.sqlite_read import sqlite_file_url

    url = sqlite_file_url(text)
    return _by_tables(read_url(url), url)


def _read_database(text: str, rubric: Rubric | None = None,
                   criterion_map: CriterionMap | None = None) -> Read:
    return _by_tables(read_url(text), text)


def _read_bundle(text: str, rubric: Rubric | None = None,
                 criterion_map: CriterionMap | None = None) -> Read:
    return _read_format(Path(text), "bundle", rubric, criterion_map)


def _read_zip(text: str, rubric: Rubric | None = None,
              criterion_map: CriterionMap | None = None, *, fmt: str = "auto") -> Read:
    """The bundle or tables folder a ``.zip`` holds, its tables' sources
    named inside the archive rather than the temporary folder."""
    path = Path(text)
    with archive.opened(path) as (folder, inner):
        snap, sources = read_source(inner, fmt=fmt, rubric=rubric, criterion_map=criterion_map)
    return snap, {name: where.replace(str(folder), str(path))
                  for name, where in sources.items()}


@contextmanager
def _zip_contents(text: str) -> Iterator[Path]:
    with archive.opened(Path(text)) as (_, inner):
        yield inner


def _read_tables(text: str, rubric: Rubric | None = None,
                 criterion_map: CriterionMap | None = None) -> Read:
    return _read_format(Path(text), "tables", rubric, criterion_map)


def _read_foreign(text: str, rubric: Rubric | None = None,
                  criterion_map: CriterionMap | None = None) -> Read:
    path = Path(text)
    return _read_format(path, _foreign_format(path), rubric, criterion_map)


DEMO = Recogniser("demo", lambda text: text == "demo", _read_demo, bundle=_demo_folder)
SQLITE_FILE = Recogniser("sqlite", _is_sqlite_file, _read_sqlite_file)
DATABASE_URL = Recogniser("database", lambda text: "://" in text, _read_database)
BUNDLE = Recogniser("bundle", lambda text: bundle.is_bundle(Path(text)), _read_bundle,
                    bundle=Path)
ZIP = Recogniser("zip", lambda text: archive.is_zip(Path(text)), _read_zip,
                 opens=_zip_contents)
TABLES = Recogniser("tables", lambda text: Path(text).is_dir(), _read_tables)
FOREIGN = Recogniser("foreign", lambda text: True, _read_foreign)
"""Last: anything else is a foreign file, whose reader says what is wrong with it."""

RECOGNISERS = (DEMO, SQLITE_FILE, DATABASE_URL, BUNDLE, ZIP, TABLES, FOREIGN)
FILE_RECOGNISERS = (BUNDLE, ZIP, TABLES, FOREIGN)
"""What ``clinieval import`` and uploads read: files and folders only."""


def recognise(text: str, recognisers: tuple[Recogniser, ...] = RECOGNISERS) -> Recogniser:
    """The first of ``recognisers`` that matches ``text`` (the last matches anything)."""
    return next(r for r in recognisers if r.matches(text))


def read_any(source: str | Path) -> Snapshot:
    """The snapshot any source names (``clinieval info``, ``clinieval demo``)."""
    text = str(source)
    return recognise(text).read(text)[0]


def read_for_audit(source: str | Path) -> tuple[Snapshot, str | None]:
    """The snapshot ``source`` names, held to the contract ``clinieval import``
    holds it to (:func:`clinieval.contract.validate.validate`) whatever the way
    in, and a bundle's snapshot checksum once every file, row count and
    content checksum has matched its manifest (None for other sources: the
    caller hashes their content). A report names its snapshot by that
    checksum, so it is only ever one the content matches."""
    from clinieval.contract.validate import validate

    text = str(source)
    found = recognise(text)
    if found.opens is not None:
        with found.opens(text) as inner:
            return read_for_audit(inner)
    if found.bundle is not None:
        snap, sources = _read_format(found.bundle(text), "bundle", None, None)
    else:
        snap, sources = found.read(text)
    validate(snap, sources=sources)
    return snap, snap.meta.get("snapshot_sha256") if found.bundle is not None else None


def source_formats() -> tuple[str, ...]:
    """Every value ``--format`` accepts (a function: the foreign readers are
    imported only when a source needs them)."""
    from clinieval.io.foreign import FORMATS

    return ("auto", "bundle", "tables", *FORMATS)


def detect_format(path: Path) -> str:
    """The format of ``path``: a bundle, a tables folder, or a sniffed foreign file."""
    for recogniser in (BUNDLE, TABLES):
        if recogniser.matches(str(path)):
            return recogniser.name
    return _foreign_format(path)


def _foreign_format(path: Path) -> str:
    """The foreign format sniffed from the file's first record; an error for a
    missing file or one no reader recognises."""
    from clinieval.io.foreign import sniff_format
    from clinieval.io.foreign.records import keys_or, parse

    if not path.exists():
        raise InputError(str(path), "no such file or folder")
    fmt = sniff_format(path)
    if fmt == "unknown":
        parsed = parse(path)  # raises the precise error for broken files
        raise InputError(parsed.source, "cannot tell the file's format from its first record",
                         expected="a MOOVE contribution export, an arena battle log,"
                         " HealthBench rubric examples or an inspect_ai log (.eval, .json)",
                         got=keys_or(parsed.first()))
    return fmt


def read_source(path: str | Path, *, fmt: str = "auto", rubric: Rubric | None = None,
                criterion_map: CriterionMap | None = None) -> Read:
    """Read the file or folder ``path`` into a snapshot, returning it and each
    table's source file. A ``.zip`` file is read as the bundle or tables
    folder it holds (the platform's export too)."""
    path = Path(path)
    formats = source_formats()
    if fmt not in formats:
        raise InputError(str(path), f"unknown format {fmt!r}",
                         expected="one of " + ", ".join(formats))
    if fmt == "auto":
        text = str(path)
        return recognise(text, FILE_RECOGNISERS).read(text, rubric, criterion_map)
    if fmt in ("bundle", "tables") and archive.is_zip(path):
        return _read_zip(str(path), rubric, criterion_map, fmt=fmt)
    return _read_format(path, fmt, rubric, criterion_map)


def _read_format(path: Path, fmt: str, rubric: Rubric | None,
                 criterion_map: CriterionMap | None) -> Read:
    """``path`` read by the reader of the format named ``fmt``."""
    from clinieval.rubric import IDENTITY, load_rubric

    rubric = rubric or load_rubric()
    if fmt == "bundle":
        snap = bundle.read_bundle(path)
        return snap, {name: str(path / f"{name}.parquet") for name in snap.tables}
    if fmt == "tables":
        from clinieval.io.tables_io import read_table_folder

        if not path.is_dir():
            raise InputError(str(path), "--format tables needs a folder",
                             expected="a folder of <table>.csv/.jsonl/.parquet files")
        return read_table_folder(path, rubric=rubric, criterion_map=criterion_map or IDENTITY)
    from clinieval.io.foreign import FORMATS

    options = {} if criterion_map is None else {"criterion_map": criterion_map}
    snap = FORMATS[fmt].read(path, rubric=rubric, **options)
    return snap, {name: str(path) for name in snap.tables}
