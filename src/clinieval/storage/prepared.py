"""Statements built once and run straight on the database driver.

SQLAlchemy's ``Connection.execute`` computes a cache key of the statement,
looks it up, creates an execution context, fires events and builds result
metadata on every call: for the platform's small prepared statements that is
several times what SQLite spends running them (a third of the server's CPU
per submission). A :class:`Prepared` statement is compiled by SQLAlchemy once
per dialect (same SQL, same parameter and result type processing) and then
executed on the DBAPI cursor of the caller's connection, inside the caller's
transaction. Statements whose SQL depends on the values (expanding ``IN``
lists, literal-rendered parameters) fall back to ``Connection.execute``.
"""

from __future__ import annotations

import weakref
from collections import namedtuple
from collections.abc import Mapping
from typing import Any

import sqlalchemy as sa

_NO_PARAMS: Mapping[str, Any] = {}


class Prepared:
    """A Core statement compiled once per dialect (see the module)."""

    __slots__ = ("statement", "_plans")

    def __init__(self, statement: sa.Executable) -> None:
        self.statement = statement
        self._plans: weakref.WeakKeyDictionary[sa.Dialect, _Plan | None] = \
            weakref.WeakKeyDictionary()

    def plan(self, dialect: sa.Dialect) -> _Plan | None:
        try:
            return self._plans[dialect]
        except KeyError:
            plan = self._plans[dialect] = _Plan.of(self.statement, dialect)
            return plan


class _Plan:
    __slots__ = ("sql", "defaults", "order", "names", "binds", "row", "types", "results",
                 "dialect")

    @classmethod
    def of(cls, statement: sa.Executable, dialect: sa.Dialect) -> _Plan | None:
        compiled = statement.compile(dialect=dialect)
        if (compiled.literal_execute_params or compiled.post_compile_params
                or any(b.expanding for b in compiled.binds.values())
                or compiled.dialect.paramstyle not in ("qmark", "pyformat")):
            return None
        plan = cls()
        plan.dialect = dialect
        plan.sql = compiled.string
        plan.defaults = compiled.construct_params(escape_names=False, _check=False)
        plan.binds = dict(compiled._bind_processors)
        if compiled.positional:
            plan.order, plan.names = tuple(compiled.positiontup), None
        else:
            escaped = compiled.escaped_bind_names or {}
            plan.order = None
            plan.names = tuple((name, escaped.get(name, name)) for name in plan.defaults)
        columns = compiled._result_columns
        plan.row = namedtuple("Row", [c.keyname for c in columns], rename=True) \
            if columns else None
        plan.types = tuple(c.type for c in columns)
        plan.results = None  # from the first result's column types (as SQLAlchemy does)
        return plan

    def parameters(self, params: Mapping[str, Any]) -> tuple | dict:
        values = {**self.defaults, **params} if params else self.defaults
        binds = self.binds
        if self.order is not None:
            return tuple(binds[n](values[n]) if n in binds else values[n] for n in self.order)
        return {to: binds[n](values[n]) if n in binds else values[n] for n, to in self.names}

    def rows(self, cursor) -> list:
        raw = cursor.fetchall()
        procs = self.results
        if procs is None:
            procs = self.results = tuple(
                t._cached_result_processor(self.dialect, d[1])
                for t, d in zip(self.types, cursor.description, strict=True))
        make = self.row._make
        if not any(procs):
            return [make(r) for r in raw]
        return [make([p(v) if p else v for p, v in zip(procs, r, strict=True)]) for r in raw]


def run(conn: sa.Connection, prepared: Prepared, params: Mapping[str, Any] = _NO_PARAMS,
        ) -> Rows | sa.CursorResult:
    """Execute ``prepared`` with ``params`` in ``conn``'s transaction (begun
    as ``conn.execute`` would begin it); returns its rows (:class:`Rows`, or
    SQLAlchemy's result where the statement cannot be prepared). A driver
    error is raised as SQLAlchemy raises it (``sa.exc.IntegrityError`` and
    the like)."""
    plan = prepared.plan(conn.dialect)
    if plan is None:
        return conn.execute(prepared.statement, dict(params))
    if not conn.in_transaction():
        conn.begin()
    values = plan.parameters(params)
    driver = conn.connection.driver_connection
    cursor = driver.cursor()
    try:
        cursor.execute(plan.sql, values)
        return Rows(plan.rows(cursor) if plan.row is not None else [])
    except plan.dialect.loaded_dbapi.Error as err:
        if plan.dialect.is_disconnect(err, driver, cursor):
            conn.invalidate(err)
        raise sa.exc.DBAPIError.instance(plan.sql, values, err, plan.dialect.loaded_dbapi.Error,
                                         dialect=plan.dialect) from err
    finally:
        cursor.close()


class Rows(list):
    """The rows of a prepared statement, with the accessors of a SQLAlchemy
    result that the platform uses."""

    __slots__ = ()

    def first(self):
        return self[0] if self else None

    def all(self) -> list:
        return list(self)

    def one(self):
        if len(self) != 1:
            raise sa.exc.NoResultFound("expected one row") if not self else \
                sa.exc.MultipleResultsFound("expected one row")
        return self[0]

    def scalar(self):
        return self[0][0] if self else None

    def scalar_one(self):
        return self.one()[0]

    def scalars(self) -> list:
        return [r[0] for r in self]


def insert(table: sa.Table, *keys: str) -> Prepared:
    """An INSERT of one row of ``table`` giving exactly the columns ``keys``
    (parameters of the same names); the others get their database default."""
    return Prepared(table.insert().values({key: sa.bindparam(key) for key in keys}))
