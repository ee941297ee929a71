"""Database tables of a snapshot (SQLAlchemy Core), derived from the Arrow
contract in :mod:`clinieval.contract.tabular` so the two cannot drift, plus the
keys and checks that only a database can enforce.

Invariant: the foreign keys are built from the contract's references
(:attr:`~clinieval.contract.tabular.Table.references`), the same list the
bulk validator checks; none is written here by hand.
"""

from __future__ import annotations

import pyarrow as pa
import sqlalchemy as sa

from clinieval.contract import tabular, vocabulary
from clinieval.storage.schema.shared import metadata, one_of


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


def _columns(table: tabular.Table) -> list[sa.Column]:
    return [_generated_key(f.name) if table.generated_key and f.name == table.key else
            sa.Column(f.name, _sa_type(f.type), primary_key=f.name == table.key,
                      nullable=f.name not in table.required and f.name != table.key,
                      autoincrement=False)
            for f in table.schema]


def _generated_key(name: str) -> sa.Column:
    # BY DEFAULT (not ALWAYS): bundles keep their own ids when imported.
    return sa.Column(name, GENERATED_ID, sa.Identity(always=False), primary_key=True,
                     autoincrement=True)


def _foreign_keys(table: tabular.Table) -> list[sa.ForeignKeyConstraint]:
    """The database's foreign keys of ``table``, from the contract's references:
    single ones first, then composite ones (the order they were always declared
    in, so CREATE TABLE is unchanged)."""
    single = [_foreign_key(table, ref) for ref in table.references if not ref.same]
    return single + [_foreign_key(table, ref) for ref in table.references if ref.same]


def _foreign_key(table: tabular.Table, ref: tabular.Reference) -> sa.ForeignKeyConstraint:
    target = tabular.BY_NAME[ref.target]
    referred = [f"{target.name}.{column}" for column in (target.key, *ref.same)]
    if not ref.same:
        return sa.ForeignKeyConstraint([ref.column], referred)
    # Composite keys make the database itself refuse an answer from another case;
    # their names (fk_preferences_answer_a_case) predate the naming convention.
    parts = [column.removesuffix("_id") for column in (ref.column, *ref.same)]
    return sa.ForeignKeyConstraint([ref.column, *ref.same], referred,
                                   name=f"fk_{table.name}_{'_'.join(parts)}")


studies = sa.Table("studies", metadata, *_columns(tabular.STUDIES))
cases = sa.Table("cases", metadata, *_columns(tabular.CASES), *_foreign_keys(tabular.CASES))
models = sa.Table("models", metadata, *_columns(tabular.MODELS))
answers = sa.Table(
    "answers",
    metadata,
    *_columns(tabular.ANSWERS),
    *_foreign_keys(tabular.ANSWERS),
    sa.UniqueConstraint("answer_id", "case_id"),
)
raters = sa.Table("raters", metadata, *_columns(tabular.RATERS))
criteria = sa.Table("criteria", metadata, *_columns(tabular.CRITERIA))
ratings = sa.Table(
    "ratings",
    metadata,
    *_columns(tabular.RATINGS),
    *_foreign_keys(tabular.RATINGS),
    sa.UniqueConstraint("answer_id", "rater_id", "criterion_id", "revision"),
    sa.CheckConstraint(f"score BETWEEN {vocabulary.SCORE_MIN} AND {vocabulary.SCORE_MAX}",
                       name="score_range"),
    sa.CheckConstraint("revision >= 0", name="revision_nonneg"),
)
preferences = sa.Table(
    "preferences",
    metadata,
    *_columns(tabular.PREFERENCES),
    *_foreign_keys(tabular.PREFERENCES),
    sa.CheckConstraint("answer_a_id <> answer_b_id", name="distinct_answers"),
    sa.CheckConstraint(one_of("choice", vocabulary.CHOICES), name="choice_value"),
    sa.CheckConstraint(one_of("shown_left", vocabulary.SIDES, nullable=True),
                       name="side_value"),
    sa.CheckConstraint("revision >= 0", name="revision_nonneg"),
)
judgments = sa.Table(
    "judgments",
    metadata,
    *_columns(tabular.JUDGMENTS),
    *_foreign_keys(tabular.JUDGMENTS),
    sa.CheckConstraint(one_of("parse_status", vocabulary.PARSE_STATUSES),
                       name="parse_status_value"),
    sa.CheckConstraint(one_of("judge_kind", vocabulary.JUDGE_KINDS, nullable=True),
                       name="judge_kind_value"),
    sa.CheckConstraint(one_of("shown_first", vocabulary.SIDES, nullable=True),
                       name="shown_first_value"),
    sa.CheckConstraint(one_of("choice", vocabulary.CHOICES, nullable=True),
                       name="choice_value"),
)
adjudications = sa.Table(
    "adjudications",
    metadata,
    *_columns(tabular.ADJUDICATIONS),
    *_foreign_keys(tabular.ADJUDICATIONS),
    sa.CheckConstraint(one_of("verdict", vocabulary.ADJUDICATION_VERDICTS),
                       name="verdict_value"),
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
sa.Index("ix_adjudications_answer", adjudications.c.answer_id, adjudications.c.criterion_id)

BY_NAME: dict[str, sa.Table] = {t.name: metadata.tables[t.name] for t in tabular.ALL}
