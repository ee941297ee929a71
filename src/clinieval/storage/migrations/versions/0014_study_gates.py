"""a study's decision gates, stored with its settings

Revision ID: 0014_study_gates
Revises: 0013_signin_client
Create Date: 2026-11-27 16:20:00

A gate (criterion or dangerous answers, threshold, scope, alpha) turns a
cell's rate into a decision: pass, fail or open (issue 33). The gates are a
JSON list in ``study_settings.gates``; studies made before this revision
keep NULL, which means no gates, so they behave as they did.
"""

import sqlalchemy as sa
from alembic import op

revision = "0014_study_gates"
down_revision = "0013_signin_client"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("study_settings") as batch_op:
        batch_op.add_column(sa.Column("gates", sa.Text(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("study_settings") as batch_op:
        batch_op.drop_column("gates")
