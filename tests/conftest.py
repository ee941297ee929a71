"""Shared fixtures: a fresh database per test on every configured backend.

SQLite always runs. PostgreSQL runs when ``CLINIEVAL_TEST_POSTGRES_URL`` is
set (each test gets its own schema); with ``CLINIEVAL_REQUIRE_POSTGRES=1``
an unreachable server fails the run instead of skipping.
"""

from __future__ import annotations

import gc
import os
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
    sep = "&" if "?" in base else "?"
    try:
        # Every connection to the schema carries its name, so that what a test
        # left running (a background refresh, a server's child) can be ended:
        # one still reading the schema made DROP SCHEMA deadlock with it.
        yield f"{base}{sep}options=-csearch_path%3D{schema}&application_name={schema}"
    finally:
        with admin.begin() as conn:
            conn.execute(sa.text("SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
                                 " WHERE application_name = :name AND pid <> pg_backend_pid()"),
                         {"name": schema})
            conn.execute(sa.text(f'DROP SCHEMA "{schema}" CASCADE'))
        admin.dispose()


@pytest.fixture
def engine(db_url):
    """An engine on a fresh, migrated database."""
    eng = db.make_engine(db_url)
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
