"""The private and undocumented SQLAlchemy API that ``storage/prepared.py``
runs on still has the shape that module uses.

prepared.py compiles a statement with SQLAlchemy and then runs it on the
driver itself, so it reads compiler internals that SQLAlchemy may change in
any release. pyproject.toml pins SQLAlchemy below the next minor; these
tests are what to run before raising that pin. Each failure names the
private API and the file that depends on it, instead of leaving a wrong
parameter or an unconverted value to surface in a distant web test.
"""

from __future__ import annotations

import datetime
import decimal
import inspect
from collections.abc import Callable, Collection, Mapping, Sequence

import pytest
import sqlalchemy as sa
from sqlalchemy.dialects import postgresql, sqlite

DEPENDENT = "src/clinieval/storage/prepared.py"

_METADATA = sa.MetaData()
_PROBE = sa.Table("probe", _METADATA, sa.Column("id", sa.Integer, primary_key=True),
                  sa.Column("at", sa.DateTime), sa.Column("amount", sa.Numeric))
DIALECTS = {"sqlite": sqlite.dialect, "postgresql+psycopg": postgresql.psycopg.dialect}
"""The dialects prepared.py prepares for (qmark and pyformat paramstyles)."""


def _require(ok: bool, api: str, used_as: str) -> None:
    if not ok:
        pytest.fail(f"SQLAlchemy {sa.__version__} changed the private API {api}, which "
                    f"{DEPENDENT} relies on ({used_as}). Adapt {DEPENDENT} (or let it fall "
                    "back to Connection.execute) before raising the SQLAlchemy pin in "
                    "pyproject.toml.", pytrace=False)


def _compiled(dialect_name: str, statement=None):
    statement = statement if statement is not None else sa.select(_PROBE).where(
        _PROBE.c.at == sa.bindparam("at"), _PROBE.c.id == sa.bindparam("id", 7))
    return statement.compile(dialect=DIALECTS[dialect_name]())


def _keywords(function: Callable) -> set[str]:
    return set(inspect.signature(function).parameters)


@pytest.mark.parametrize("dialect_name", sorted(DIALECTS))
def test_compiled_bind_processors(dialect_name):
    processors = getattr(_compiled(dialect_name), "_bind_processors", None)
    _require(isinstance(processors, Mapping)
             and all(isinstance(k, str) and callable(p) for k, p in processors.items()),
             "SQLCompiler._bind_processors", "a mapping of bind name to value converter")
    if dialect_name == "sqlite":
        _require("at" in processors, "SQLCompiler._bind_processors",
                 "SQLite's DateTime bind converter is looked up by the bind's name")


@pytest.mark.parametrize("dialect_name", sorted(DIALECTS))
def test_compiled_result_columns(dialect_name):
    columns = getattr(_compiled(dialect_name), "_result_columns", None)
    _require(isinstance(columns, Sequence) and len(columns) == len(_PROBE.columns),
             "SQLCompiler._result_columns", "one entry per selected column, in order")
    _require(all(hasattr(c, "keyname") and hasattr(c, "type") for c in columns),
             "SQLCompiler._result_columns", "entries with .keyname and .type")
    _require([c.keyname for c in columns] == ["id", "at", "amount"]
             and all(isinstance(c.type, sa.types.TypeEngine) for c in columns),
             "SQLCompiler._result_columns", ".keyname is the row field, .type a TypeEngine")


def test_type_cached_result_processor():
    method = getattr(sa.types.TypeEngine, "_cached_result_processor", None)
    _require(callable(method) and _keywords(method) >= {"dialect", "coltype"},
             "TypeEngine._cached_result_processor", "called as (dialect, coltype)")
    dialect = sqlite.dialect()
    to_datetime = _PROBE.c.at.type._cached_result_processor(dialect, None)
    _require(callable(to_datetime)
             and to_datetime("2025-01-02 03:04:05") == datetime.datetime(2025, 1, 2, 3, 4, 5),
             "TypeEngine._cached_result_processor", "a converter of the driver's value")
    to_decimal = _PROBE.c.amount.type._cached_result_processor(dialect, None)
    _require(callable(to_decimal) and to_decimal(1.5) == decimal.Decimal("1.5"),
             "TypeEngine._cached_result_processor", "a converter of the driver's value")
    _require(_PROBE.c.id.type._cached_result_processor(dialect, None) is None,
             "TypeEngine._cached_result_processor", "None when no conversion is needed")


@pytest.mark.parametrize("dialect_name", sorted(DIALECTS))
def test_compiler_construct_params_check_keyword(dialect_name):
    compiled = _compiled(dialect_name)
    _require(_keywords(compiled.construct_params) >= {"escape_names", "_check"},
             "SQLCompiler.construct_params(_check=...)",
             "construct_params(escape_names=False, _check=False) gives the defaults")
    defaults = compiled.construct_params(escape_names=False, _check=False)
    _require(dict(defaults) == {"at": None, "id": 7},
             "SQLCompiler.construct_params(_check=...)",
             "every bind name with its default, unset ones as None, no error")


@pytest.mark.parametrize("dialect_name", sorted(DIALECTS))
def test_compiler_parameter_layout(dialect_name):
    compiled = _compiled(dialect_name)
    _require(compiled.dialect.paramstyle in ("qmark", "pyformat"),
             "Dialect.paramstyle", "prepared statements are built for qmark or pyformat")
    _require(isinstance(compiled.escaped_bind_names or {}, Mapping),
             "SQLCompiler.escaped_bind_names", "a mapping of bind name to the name in the SQL")
    if compiled.positional:
        _require(list(getattr(compiled, "positiontup", None) or []) == ["at", "id"],
                 "SQLCompiler.positiontup", "the bind names in the order of the SQL's ?")


@pytest.mark.parametrize("dialect_name", sorted(DIALECTS))
def test_value_dependent_statements_are_recognised(dialect_name):
    """prepared.py falls back to Connection.execute when the SQL depends on
    the values; missing that would run a statement with the wrong SQL."""
    plain = _compiled(dialect_name)
    for api in ("literal_execute_params", "post_compile_params"):
        _require(isinstance(getattr(plain, api, None), Collection) and not getattr(plain, api),
                 f"SQLCompiler.{api}", "an empty collection for a plain statement")
    _require(not any(b.expanding for b in plain.binds.values()),
             "BindParameter.expanding", "False for a plain bind")
    expanding = _compiled(dialect_name, sa.select(_PROBE.c.id).where(
        _PROBE.c.id.in_(sa.bindparam("ids", expanding=True))))
    _require(any(b.expanding for b in expanding.binds.values()),
             "BindParameter.expanding", "True for an expanding IN list")
    literal = _compiled(dialect_name, sa.select(_PROBE.c.id).where(
        _PROBE.c.id == sa.bindparam("id", 3, literal_execute=True)))
    _require(bool(literal.literal_execute_params),
             "SQLCompiler.literal_execute_params", "non-empty for a literal-rendered bind")


def test_dbapi_error_instance():
    method = getattr(sa.exc.DBAPIError, "instance", None)
    _require(callable(method) and _keywords(method) >= {"statement", "params", "orig",
                                                        "dbapi_base_err", "dialect"},
             "DBAPIError.instance", "instance(sql, params, err, dbapi.Error, dialect=...)")

    class DriverError(Exception):
        pass

    class DriverIntegrityError(DriverError):
        pass

    DriverIntegrityError.__name__ = "IntegrityError"
    wrapped = method("SELECT 1", (), DriverIntegrityError("duplicate"), DriverError,
                     dialect=sqlite.dialect())
    _require(isinstance(wrapped, sa.exc.IntegrityError), "DBAPIError.instance",
             "a driver's IntegrityError becomes sa.exc.IntegrityError")
