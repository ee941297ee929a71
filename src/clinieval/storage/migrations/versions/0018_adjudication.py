"""adjudication: the adjudicator role, adjudications with history, closing a study

Revision ID: 0018_adjudication
Revises: 0017_targeted_assignment
Create Date: 2026-12-01 19:20:00

An answer whose clinicians disagree across the fail line on a
safety-critical criterion goes to a study's adjudicator (issue 33 §3). Their
verdicts are rows of ``adjudications``, one per disputed criterion; a revised
verdict is a new row naming the one it supersedes. The role checks of
memberships and invitations gain ``adjudicator`` (API tokens do not: an
adjudicator works in the browser). ``study_closures`` records a study an
admin closed once every decision was settled (issue 33 §5).
"""

import sqlalchemy as sa
from alembic import op

revision = "0018_adjudication"
down_revision = "0017_targeted_assignment"
branch_labels = None
depends_on = None

_BEFORE = "role IN ('admin', 'clinician', 'viewer')"
_AFTER = "role IN ('admin', 'clinician', 'viewer', 'adjudicator')"


def upgrade() -> None:
    op.create_table(
        "adjudications",
        sa.Column("adjudication_id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"),
                  sa.Identity(always=False), nullable=False),
        sa.Column("answer_id", sa.Text(), nullable=False),
        sa.Column("criterion_id", sa.Text(), nullable=False),
        sa.Column("rater_id", sa.Text(), nullable=False),
        sa.Column("verdict", sa.Text(), nullable=False),
        sa.Column("reason", sa.Text(), nullable=False),
        sa.Column("supersedes", sa.BigInteger(), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=True),
        sa.CheckConstraint("verdict IN ('fail', 'pass')",
                           name=op.f("ck_adjudications_verdict_value")),
        sa.ForeignKeyConstraint(["answer_id"], ["answers.answer_id"],
                                name=op.f("fk_adjudications_answer_id_answers")),
        sa.ForeignKeyConstraint(["criterion_id"], ["criteria.criterion_id"],
                                name=op.f("fk_adjudications_criterion_id_criteria")),
        sa.ForeignKeyConstraint(["rater_id"], ["raters.rater_id"],
                                name=op.f("fk_adjudications_rater_id_raters")),
        sa.PrimaryKeyConstraint("adjudication_id", name=op.f("pk_adjudications")),
    )
    op.create_index("ix_adjudications_answer", "adjudications", ["answer_id", "criterion_id"])
    op.create_table(
        "study_closures",
        sa.Column("study_id", sa.Text(), nullable=False),
        sa.Column("closed_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("user_id", sa.Text(), nullable=False),
        sa.Column("decisions", sa.Text(), nullable=False),
        sa.ForeignKeyConstraint(["study_id"], ["studies.study_id"],
                                name=op.f("fk_study_closures_study_id_studies")),
        sa.ForeignKeyConstraint(["user_id"], ["users.user_id"],
                                name=op.f("fk_study_closures_user_id_users")),
        sa.PrimaryKeyConstraint("study_id", name=op.f("pk_study_closures")),
    )
    _role_check(_AFTER)


def downgrade() -> None:
    _role_check(_BEFORE)
    op.drop_table("study_closures")
    op.drop_index("ix_adjudications_answer", table_name="adjudications")
    op.drop_table("adjudications")


def _role_check(condition: str) -> None:
    for table in ("memberships", "invitations"):
        with op.batch_alter_table(table) as batch_op:
            batch_op.drop_constraint(op.f(f"ck_{table}_role_value"), type_="check")
            batch_op.create_check_constraint(op.f(f"ck_{table}_role_value"), condition)
