"""web features: sign-in links, rubric versions per rating, vote revisions

Revision ID: 0006_webfeat
Revises: 0005
Create Date: 2026-11-23 06:10:00
"""

import sqlalchemy as sa
from alembic import op

revision = "0006_webfeat"
down_revision = "0005"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "signin_links",
        sa.Column("token_hash", sa.Text(), nullable=False),
        sa.Column("user_id", sa.Text(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("expires_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("used_at", sa.DateTime(timezone=True), nullable=True),
        sa.ForeignKeyConstraint(["user_id"], ["users.user_id"],
                                name=op.f("fk_signin_links_user_id_users")),
        sa.PrimaryKeyConstraint("token_hash", name=op.f("pk_signin_links")),
    )
    op.create_table(
        "study_rubric_versions",
        sa.Column("study_id", sa.Text(), nullable=False),
        sa.Column("version", sa.Text(), nullable=False),
        sa.Column("rubric_id", sa.Text(), nullable=False),
        sa.Column("rubric", sa.Text(), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("created_by", sa.Text(), nullable=True),
        sa.ForeignKeyConstraint(["created_by"], ["users.user_id"],
                                name=op.f("fk_study_rubric_versions_created_by_users")),
        sa.ForeignKeyConstraint(["study_id"], ["studies.study_id"],
                                name=op.f("fk_study_rubric_versions_study_id_studies")),
        sa.PrimaryKeyConstraint("study_id", "version", name=op.f("pk_study_rubric_versions")),
    )
    # A study's rubric was fixed before this revision: its version so far is the current one.
    op.execute("INSERT INTO study_rubric_versions (study_id, version, rubric_id, created_at)"
               " SELECT study_id, version, rubric_id, CURRENT_TIMESTAMP FROM study_rubrics")
    with op.batch_alter_table("ratings") as batch_op:
        batch_op.add_column(sa.Column("rubric_version", sa.Text(), nullable=True))
    op.execute("UPDATE ratings SET rubric_version = (SELECT sr.version FROM study_rubrics sr"
               " JOIN cases c ON c.study_id = sr.study_id"
               " JOIN answers a ON a.case_id = c.case_id"
               " WHERE a.answer_id = ratings.answer_id)")
    with op.batch_alter_table("preferences") as batch_op:
        batch_op.add_column(sa.Column("revision", sa.SmallInteger(), nullable=True))
    op.execute("UPDATE preferences SET revision = 0")
    with op.batch_alter_table("preferences") as batch_op:
        batch_op.create_check_constraint("revision_nonneg", "revision >= 0")


def downgrade() -> None:
    with op.batch_alter_table("preferences") as batch_op:
        batch_op.drop_constraint("revision_nonneg", type_="check")
        batch_op.drop_column("revision")
    with op.batch_alter_table("ratings") as batch_op:
        batch_op.drop_column("rubric_version")
    op.drop_table("study_rubric_versions")
    op.drop_table("signin_links")
