"""Shared fixtures: a fresh database per test on every configured backend.

SQLite always runs. PostgreSQL runs when ``CLINIEVAL_TEST_POSTGRES_URL`` is
set (each test gets its own schema); with ``CLINIEVAL_REQUIRE_POSTGRES=1``
an unreachable server fails the run instead of skipping.
"""

from __future__ import annotations

import gc
import os
import shutil
import subprocess
import time
import uuid
from pathlib import Path

import pytest
import sqlalchemy as sa

from clinieval.storage import db

POSTGRES_URL = os.environ.get("CLINIEVAL_TEST_POSTGRES_URL")
REQUIRE_POSTGRES = os.environ.get("CLINIEVAL_REQUIRE_POSTGRES") == "1"

BACKENDS = [pytest.param("sqlite", id="sqlite"),
            pytest.param("postgresql", id="postgresql", marks=pytest.mark.postgres)]


def _postgres_url() -> str:
    if not POSTGRES_URL:
        if REQUIRE_POSTGRES:
            pytest.fail("CLINIEVAL_REQUIRE_POSTGRES=1 but CLINIEVAL_TEST_POSTGRES_URL is unset")
        pytest.skip("set CLINIEVAL_TEST_POSTGRES_URL to run the PostgreSQL suite")
    try:
        with db.make_engine(POSTGRES_URL).connect():
            pass
    except sa.exc.OperationalError as err:
        if REQUIRE_POSTGRES:
            pytest.fail(f"PostgreSQL required but unreachable: {err}")
        pytest.skip(f"PostgreSQL unreachable: {err}")
    return POSTGRES_URL


def schema_url(base: str, schema: str) -> str:
    """``base`` with every connection in ``schema`` (its search path), named
    after it (its application name)."""
    sep = "&" if "?" in base else "?"
    return f"{base}{sep}options=-csearch_path%3D{schema}&application_name={schema}"


def schema_of(url: str) -> str:
    """The schema a :func:`schema_url` URL connects to."""
    return sa.make_url(url).query["options"].removeprefix("-csearch_path=")


@pytest.fixture(params=BACKENDS)
def db_url(request, tmp_path):
    """A URL of an empty database: a SQLite file, or a fresh PostgreSQL schema."""
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'test.db'}"
        return
    base = _postgres_url()
    schema = f"t_{uuid.uuid4().hex[:12]}"
    admin = db.make_engine(base)
    with admin.begin() as conn:
        conn.execute(sa.text(f'CREATE SCHEMA "{schema}"'))
    try:
        # Every connection to the schema carries its name, so that what a test
        # left running (a background refresh, a server's child) can be ended:
        # one still reading the schema made DROP SCHEMA deadlock with it.
        yield schema_url(base, schema)
    finally:
        _drop_schema(admin, schema)
        admin.dispose()


def _drop_schema(admin: sa.Engine, schema: str, attempts: int = 10) -> None:
    """End the connections that carry the schema's name, then drop it; again
    if the drop deadlocks. A test's background process (the live view's
    priorities pass) can connect again between the two: in a clean-clone CI
    run DROP SCHEMA deadlocked with one reading the schema, and PostgreSQL
    aborted the drop."""
    for attempt in range(attempts):
        try:
            with admin.begin() as conn:
                conn.execute(sa.text("SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
                                     " WHERE application_name = :name"
                                     " AND pid <> pg_backend_pid()"), {"name": schema})
                conn.execute(sa.text(f'DROP SCHEMA "{schema}" CASCADE'))
            return
        except sa.exc.OperationalError:
            if attempt == attempts - 1:
                raise
            time.sleep(0.2)


TEST_ARGON2 = {"time_cost": 1, "memory_cost": 1024, "parallelism": 1}
"""argon2id as the tests hash and check passwords in this process: the
product's cost (t=3, 64 MiB, p=4, about 0.1 s a hash on an idle core and
0.19 s beside the other worker) was 157 s of the web, platform and viewer
tests' 1,030 worker-seconds, for 807 hashes and checks. The product's own
parameters are asserted by the test marked ``argon2_cost``
(tests/web/test_web_auth.py), which keeps them; servers the tests start as
processes of their own keep them too."""


@pytest.fixture(autouse=True)
def _cheap_argon2(request, monkeypatch):
    if request.node.get_closest_marker("argon2_cost") is None:
        from argon2 import PasswordHasher

        from clinieval.platform import accounts

        monkeypatch.setattr(accounts, "_hasher", PasswordHasher(**TEST_ARGON2))


@pytest.fixture(scope="session")
def migrated_templates(tmp_path_factory):
    """Per pytest process, a database migrated to head once for each backend,
    which :func:`engine` copies: the migrations took 0.2-0.4 s per test (the
    SQLite batch alterations rebuild tables), and about 900 tests ask for an
    engine. SQLite: a file. PostgreSQL: its schema as ``pg_dump`` writes it,
    to be replayed into each test's schema (None when there is no pg_dump:
    then every test migrates its own). tests/storage/test_templates.py checks
    that a copy equals a migrated database on both backends."""
    made: dict[str, object] = {}

    def template(backend: str):
        if backend not in made:
            made[backend] = (_sqlite_template(tmp_path_factory.mktemp("head")) if
                             backend == "sqlite" else _postgres_template())
        return made[backend]

    return template


TEMPLATE_SCHEMA = "clinieval_head_template"
"""The name the PostgreSQL template's dump is written under (and replaced in)."""


def _sqlite_template(folder: Path) -> Path:
    path = folder / "head.db"
    eng = db.make_engine(f"sqlite:///{path}")
    db.upgrade(eng)
    with eng.connect() as conn:
        conn.exec_driver_sql("PRAGMA wal_checkpoint(TRUNCATE)")
    eng.dispose()
    return path


def _postgres_template() -> str | None:
    if shutil.which("pg_dump") is None:
        return None
    base = _postgres_url()
    schema = f"{TEMPLATE_SCHEMA}_{uuid.uuid4().hex[:8]}"
    admin = db.make_engine(base)
    with admin.begin() as conn:
        conn.execute(sa.text(f'CREATE SCHEMA "{schema}"'))
    try:
        eng = db.make_engine(schema_url(base, schema))
        db.upgrade(eng)
        eng.dispose()
        dump = subprocess.run(["pg_dump", "--no-owner", "--no-privileges", "--inserts",
                               f"--schema={schema}", "--dbname", base],
                              capture_output=True, text=True, check=True).stdout
    finally:
        with admin.begin() as conn:
            conn.execute(sa.text(f'DROP SCHEMA "{schema}" CASCADE'))
        admin.dispose()
    # psql's meta-commands (``\restrict``) and the schema's own creation go:
    # each test's schema exists already.
    lines = [line for line in dump.splitlines()
             if not line.startswith("\\") and not line.startswith("CREATE SCHEMA ")]
    return "\n".join(lines).replace(schema, TEMPLATE_SCHEMA)


def copy_template(templates, db_url: str) -> bool:
    """Give the empty database at ``db_url`` the migrated template's schema
    (and rows); False when there is no template to copy."""
    url = sa.make_url(db_url)
    if url.get_backend_name() == "sqlite":
        shutil.copyfile(templates("sqlite"), url.database)
        return True
    sql = templates("postgresql")
    if sql is None:
        return False
    schema = schema_of(db_url)
    base = db.make_engine(url.set(query={}).render_as_string(hide_password=False))
    try:
        with base.begin() as conn:
            conn.exec_driver_sql(sql.replace(TEMPLATE_SCHEMA, schema))
    finally:
        base.dispose()
    return True


@pytest.fixture
def engine(db_url, migrated_templates):
    """An engine on a fresh, migrated database (a copy of the template)."""
    copied = copy_template(migrated_templates, db_url)
    eng = db.make_engine(db_url)
    if not copied:
        db.upgrade(eng)
    yield eng
    eng.dispose()


@pytest.fixture
def app(engine):
    """The clinician platform on a database holding the test studies x and y
    (:func:`clinieval.web.testing.make_studies`)."""
    from clinieval.web.app import create_app
    from clinieval.web.testing import make_studies

    make_studies(engine)
    return create_app(engine)


LLM_BUILD = Path(__file__).parents[1] / ".venv-llm.building"
"""Present while `make test` builds llama.cpp behind the tests (see the
Makefile's `llm-behind`): it holds the build's process id, and its log is
beside it as ``.venv-llm.log``."""


LONGEST_FIRST = ("test_llm_local.py", "test_fleet.py")
"""Of those, the files that run for minutes go first: handed out last, one
kept a worker busy for minutes after the other had finished."""


def _needs_llm(item) -> bool:
    return ("llama" in getattr(item, "fixturenames", ())
            or item.get_closest_marker("llm") is not None)


def pytest_collection_modifyitems(config, items):
    """The files that need the real local model last, each file whole:
    pytest-xdist hands out files in this order, so on a new machine the
    others run while llama.cpp still compiles behind them."""
    late = {item.path for item in items if _needs_llm(item)}
    items.sort(key=lambda item: (item.path in late, item.path.name not in LONGEST_FIRST))


def pytest_collection_finish(session):
    """What is alive once the tests are collected (every imported module:
    numpy, pandas, SQLAlchemy, the app) lives to the end, so it is frozen
    out of the cyclic collector's full scans (gc.freeze), which otherwise
    walk it again and again: 8-10% of a worker's time on web, import and
    audit test files (measured on three files, sequentially, twice), and a
    second a call of statsmodels' multipletests, which collects on every
    call. Objects made by the tests are collected as before."""
    gc.collect()
    gc.freeze()


def _build_running() -> bool:
    try:
        pid = int(LLM_BUILD.read_text().strip() or 0)
        os.kill(pid, 0)
    except (OSError, ValueError):
        return False
    return True


def pytest_runtest_setup(item):
    """A test that needs the real local model waits for a build of llama.cpp
    still running behind the suite (bounded), then finds it as usual."""
    if not _needs_llm(item) or not LLM_BUILD.exists():
        return
    deadline = time.monotonic() + 45 * 60
    while _build_running():
        if time.monotonic() > deadline:
            pytest.fail("llama.cpp is still building after 45 minutes: see .venv-llm.log")
        time.sleep(2)
    log = LLM_BUILD.with_suffix(".log")
    lines = log.read_text(errors="replace").splitlines() if log.exists() else []
    if lines and lines[-1].startswith("exit ") and lines[-1] != "exit 0":
        pytest.fail("building llama.cpp behind the tests failed; the end of .venv-llm.log:\n"
                    + "\n".join(lines[-20:]))
