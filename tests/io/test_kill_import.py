"""kill -9 in the middle of `clinieval import`: the database holds all of the
snapshot or none of it, and the next import works."""

from __future__ import annotations

import re
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest
import sqlalchemy as sa

from clinieval.io.bundle import read_manifest, write_bundle
from clinieval.io.importer import import_snapshot
from clinieval.sources import read_source
from clinieval.storage import db
from clinieval.synth import generate


@pytest.fixture(scope="module")
def big_bundle(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("big") / "snap"
    write_bundle(generate(seed=5, scale=0.05), folder)
    return folder


def _loading_sqlite(path: Path, start: int) -> bool:
    """The import's open transaction spills pages into the WAL as it inserts."""
    wal = Path(f"{path}-wal")
    return wal.exists() and wal.stat().st_size > start + (2 << 20)


def _loading_postgres(admin: sa.Engine, tag: str) -> bool:
    query = sa.text("SELECT count(*) FROM pg_stat_activity WHERE application_name = :tag"
                    " AND state = 'active' AND query ILIKE 'COPY%'")
    with admin.connect() as conn:
        return conn.execute(query, {"tag": tag}).scalar_one() > 0


def test_kill_9_during_an_import_leaves_all_or_nothing(db_url, big_bundle, tmp_path):
    engine = db.make_engine(db_url)
    db.upgrade(engine)  # so that the kill lands in the load, not the migration
    expected = {name: entry["rows"] for name, entry in read_manifest(big_bundle)["tables"].items()}
    tag = f"clinieval-kill-{uuid.uuid4().hex[:8]}"
    if engine.dialect.name == "sqlite":
        path = Path(engine.url.database)
        start = Path(f"{path}-wal").stat().st_size if Path(f"{path}-wal").exists() else 0
        url, loading = db_url, lambda: _loading_sqlite(path, start)
    else:
        # The import's connections carry the tag in place of the schema's name.
        url = re.sub(r"application_name=[^&]*", f"application_name={tag}", db_url)
        if tag not in url:
            url = f"{db_url}&application_name={tag}"
        loading = lambda: _loading_postgres(engine, tag)  # noqa: E731
    process = subprocess.Popen([sys.executable, "-m", "clinieval.cli", "import", str(big_bundle),
                                "--database-url", url],
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 120
    while not loading() and process.poll() is None and time.monotonic() < deadline:
        time.sleep(0.005)
    still_running = process.poll() is None
    process.send_signal(signal.SIGKILL)  # nothing when it has ended already
    process.wait()
    assert still_running, "the import ended before it could be killed mid-way"

    counts = db.counts(engine)
    # Tables the bundle does not carry (an optional one without rows) stay empty either way.
    assert {name: n for name, n in counts.items() if name not in expected} == {
        name: 0 for name in counts if name not in expected}, counts
    counts = {name: counts[name] for name in expected}
    assert counts in ({name: 0 for name in expected}, expected), counts
    snap, sources = read_source(big_bundle)
    import_snapshot(engine, snap, sources=sources, replace=True)
    assert db.counts(engine) == {**{name: 0 for name in db.counts(engine)}, **expected}
    engine.dispose()
