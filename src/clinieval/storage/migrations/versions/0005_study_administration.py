"""study administration: API tokens, flagged-answer decisions, study rubrics

Revision ID: 0005
Revises: 0004
Create Date: 2026-11-23 04:15:00
"""

import sqlalchemy as sa
from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "api_tokens",
        sa.Column("token_hash", sa.Text(), nullable=False),
        sa.Column("label", sa.Text(), nullable=False),
        sa.Column("study_id", sa.Text(), nullable=True),
        sa.Column("user_id", sa.Text(), nullable=False),
        sa.Column("role", sa.Text(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("revoked_at", sa.DateTime(timezone=True), nullable=True),
        sa.CheckConstraint("role IN ('admin', 'viewer')", name=op.f("ck_api_tokens_role_value")),
        sa.ForeignKeyConstraint(["study_id"], ["studies.study_id"],
                                name=op.f("fk_api_tokens_study_id_studies")),
        sa.ForeignKeyConstraint(["user_id"], ["users.user_id"],
                                name=op.f("fk_api_tokens_user_id_users")),
        sa.PrimaryKeyConstraint("token_hash", name=op.f("pk_api_tokens")),
    )
    op.create_table(
        "screen_decisions",
        sa.Column("decision_id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("study_id", sa.Text(), nullable=False),
        sa.Column("answer_id", sa.Text(), nullable=False),
        sa.Column("decision", sa.Text(), nullable=False),
        sa.Column("user_id", sa.Text(), nullable=False),
        sa.Column("decided_at", sa.DateTime(timezone=True), nullable=False),
        sa.CheckConstraint("decision IN ('release', 'withdraw')",
                           name=op.f("ck_screen_decisions_decision_value")),
        sa.ForeignKeyConstraint(["answer_id"], ["answers.answer_id"],
                                name=op.f("fk_screen_decisions_answer_id_answers")),
        sa.ForeignKeyConstraint(["study_id"], ["studies.study_id"],
                                name=op.f("fk_screen_decisions_study_id_studies")),
        sa.ForeignKeyConstraint(["user_id"], ["users.user_id"],
                                name=op.f("fk_screen_decisions_user_id_users")),
        sa.PrimaryKeyConstraint("decision_id", name=op.f("pk_screen_decisions")),
    )
    op.create_table(
        "study_rubrics",
        sa.Column("study_id", sa.Text(), nullable=False),
        sa.Column("rubric_id", sa.Text(), nullable=False),
        sa.Column("version", sa.Text(), nullable=False),
        sa.Column("rationale_required", sa.Boolean(), nullable=False),
        sa.ForeignKeyConstraint(["study_id"], ["studies.study_id"],
                                name=op.f("fk_study_rubrics_study_id_studies")),
        sa.PrimaryKeyConstraint("study_id", name=op.f("pk_study_rubrics")),
    )


def downgrade() -> None:
    op.drop_table("study_rubrics")
    op.drop_table("screen_decisions")
    op.drop_table("api_tokens")
