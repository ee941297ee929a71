"""Database tables (SQLAlchemy Core), derived from the Arrow contract in
:mod:`clinieval.tables` so the two cannot drift, plus the keys and checks
that only a database can enforce."""

from __future__ import annotations

import pyarrow as pa
import sqlalchemy as sa

from clinieval import tables as T
from clinieval.storage import runs_tables

metadata = sa.MetaData(
    naming_convention={
        "pk": "pk_%(table_name)s",
        "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
        "uq": "uq_%(table_name)s_%(column_0_N_name)s",
        "ck": "ck_%(table_name)s_%(constraint_name)s",
        "ix": "ix_%(table_name)s_%(column_0_N_name)s",
    }
)


def _sa_type(arrow_type: pa.DataType) -> sa.types.TypeEngine:
    if pa.types.is_string(arrow_type):
        return sa.Text()
    if pa.types.is_int64(arrow_type):
        return sa.BigInteger()
    if pa.types.is_integer(arrow_type):
        return sa.Integer() if arrow_type.bit_width > 16 else sa.SmallInteger()
    if pa.types.is_floating(arrow_type):
        return sa.Float(precision=53)
    if pa.types.is_boolean(arrow_type):
        return sa.Boolean()
    if pa.types.is_timestamp(arrow_type):
        return sa.DateTime(timezone=True)
    raise TypeError(f"no SQL type for {arrow_type}")


GENERATED_ID = sa.BigInteger().with_variant(sa.Integer(), "sqlite")
"""A database-assigned id: an identity column on PostgreSQL; on SQLite exactly
``INTEGER PRIMARY KEY``, which makes the column an alias of the rowid."""


def _columns(table: T.Table) -> list[sa.Column]:
    return [_generated_key(f.name) if table.generated_key and f.name == table.key else
            sa.Column(f.name, _sa_type(f.type), primary_key=f.name == table.key,
                      nullable=f.name not in table.required and f.name != table.key,
                      autoincrement=False)
            for f in table.schema]


def _generated_key(name: str) -> sa.Column:
    # BY DEFAULT (not ALWAYS): bundles keep their own ids when imported.
    return sa.Column(name, GENERATED_ID, sa.Identity(always=False), primary_key=True,
                     autoincrement=True)


def _one_of(column: str, values: tuple[str, ...]) -> str:
    """SQL for "``column`` is one of ``values``" (the contract's vocabulary)."""
    quoted = ", ".join("'" + v.replace("'", "''") + "'" for v in values)
    return f"{column} IN ({quoted})"


def _fk(column: str, target: str) -> sa.ForeignKeyConstraint:
    return sa.ForeignKeyConstraint([column], [target])


studies = sa.Table("studies", metadata, *_columns(T.STUDIES))
cases = sa.Table("cases", metadata, *_columns(T.CASES), _fk("study_id", "studies.study_id"))
models = sa.Table("models", metadata, *_columns(T.MODELS))
answers = sa.Table(
    "answers",
    metadata,
    *_columns(T.ANSWERS),
    _fk("case_id", "cases.case_id"),
    _fk("model_id", "models.model_id"),
    sa.UniqueConstraint("answer_id", "case_id"),
)
raters = sa.Table("raters", metadata, *_columns(T.RATERS))
criteria = sa.Table("criteria", metadata, *_columns(T.CRITERIA))
ratings = sa.Table(
    "ratings",
    metadata,
    *_columns(T.RATINGS),
    _fk("answer_id", "answers.answer_id"),
    _fk("rater_id", "raters.rater_id"),
    _fk("criterion_id", "criteria.criterion_id"),
    sa.UniqueConstraint("answer_id", "rater_id", "criterion_id", "revision"),
    sa.CheckConstraint(f"score BETWEEN {T.SCORE_MIN} AND {T.SCORE_MAX}", name="score_range"),
    sa.CheckConstraint("revision >= 0", name="revision_nonneg"),
)
preferences = sa.Table(
    "preferences",
    metadata,
    *_columns(T.PREFERENCES),
    _fk("case_id", "cases.case_id"),
    _fk("rater_id", "raters.rater_id"),
    # Composite keys make the database itself refuse an answer from another case.
    sa.ForeignKeyConstraint(["answer_a_id", "case_id"], ["answers.answer_id", "answers.case_id"],
                            name="fk_preferences_answer_a_case"),
    sa.ForeignKeyConstraint(["answer_b_id", "case_id"], ["answers.answer_id", "answers.case_id"],
                            name="fk_preferences_answer_b_case"),
    sa.CheckConstraint("answer_a_id <> answer_b_id", name="distinct_answers"),
    sa.CheckConstraint(_one_of("choice", T.CHOICES), name="choice_value"),
    sa.CheckConstraint(f"shown_left IS NULL OR {_one_of('shown_left', T.SIDES)}",
                       name="side_value"),
    sa.CheckConstraint("revision >= 0", name="revision_nonneg"),
)
judgments = sa.Table(
    "judgments",
    metadata,
    *_columns(T.JUDGMENTS),
    _fk("answer_id", "answers.answer_id"),
    _fk("answer_b_id", "answers.answer_id"),
    sa.CheckConstraint(_one_of("parse_status", T.PARSE_STATUSES), name="parse_status_value"),
    sa.CheckConstraint(f"judge_kind IS NULL OR {_one_of('judge_kind', T.JUDGE_KINDS)}",
                       name="judge_kind_value"),
    sa.CheckConstraint(f"shown_first IS NULL OR {_one_of('shown_first', T.SIDES)}",
                       name="shown_first_value"),
    sa.CheckConstraint(f"choice IS NULL OR {_one_of('choice', T.CHOICES)}", name="choice_value"),
)
snapshot_meta = sa.Table(
    "snapshot_meta",
    metadata,
    sa.Column("key", sa.Text, primary_key=True),
    sa.Column("value", sa.Text, nullable=False),
)
"""Provenance as JSON text: rubric version, criterion map, generator settings."""

sa.Index("ix_ratings_rater", ratings.c.rater_id)
sa.Index("ix_answers_model", answers.c.model_id)
sa.Index("ix_preferences_case", preferences.c.case_id)
sa.Index("ix_judgments_run", judgments.c.run_id)
RUN_TABLES = runs_tables.define(metadata)

BY_NAME: dict[str, sa.Table] = {t.name: metadata.tables[t.name] for t in T.ALL}

# The platform's tables share this metadata (and so the migrations check).
from clinieval.storage import platform_tables  # noqa: E402, F401
