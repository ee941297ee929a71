"""Shared fixtures: a fresh database per test on every configured backend.

SQLite always runs. PostgreSQL runs when ``CLINIEVAL_TEST_POSTGRES_URL`` is
set (each test gets its own schema); with ``CLINIEVAL_REQUIRE_POSTGRES=1``
an unreachable server fails the run instead of skipping.
"""

from __future__ import annotations

import os
import uuid

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
        yield f"{base}{sep}options=-csearch_path%3D{schema}"
    finally:
        with admin.begin() as conn:
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


LONGEST_FIRST = ("test_llm_local.py",)
"""Files that run for minutes (a real local model generating and judging)."""


def pytest_collection_modifyitems(config, items):
    """The longest files first: pytest-xdist hands out files in this order,
    and the one that takes minutes, handed out late, kept one worker busy
    for minutes after the other had finished."""
    items.sort(key=lambda item: item.path.name not in LONGEST_FIRST)
