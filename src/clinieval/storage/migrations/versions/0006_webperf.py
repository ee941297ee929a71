"""platform load counters (answer_load, pair_load, kept by triggers) and lease indexes

Revision ID: 0006_webperf
Revises: 0006_webfeat
Create Date: 2026-11-23 06:00:00
"""

import sqlalchemy as sa
from alembic import op

from clinieval.storage import counters

revision = "0006_webperf"
down_revision = "0006_webfeat"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "answer_load",
        sa.Column("answer_id", sa.Text(), nullable=False),
        sa.Column("study_id", sa.Text(), nullable=False),
        sa.Column("case_id", sa.Text(), nullable=False),
        sa.Column("model_id", sa.Text(), nullable=False),
        sa.Column("specialty", sa.Text(), nullable=False),
        sa.Column("submitted", sa.Integer(), nullable=False),
        sa.PrimaryKeyConstraint("answer_id", "study_id", name=op.f("pk_answer_load")),
    )
    op.create_index("ix_answer_load_pick", "answer_load",
                    ["study_id", "specialty", "submitted", "answer_id"], unique=False)
    op.create_table(
        "pair_load",
        sa.Column("study_id", sa.Text(), nullable=False),
        sa.Column("model_lo", sa.Text(), nullable=False),
        sa.Column("model_hi", sa.Text(), nullable=False),
        sa.Column("votes", sa.Integer(), nullable=False),
        sa.PrimaryKeyConstraint("study_id", "model_lo", "model_hi", name=op.f("pk_pair_load")),
    )
    op.create_index("ix_task_leases_answer_b", "task_leases", ["answer_b_id", "status"],
                    unique=False)
    op.create_index("ix_task_leases_study", "task_leases", ["study_id", "status", "expires_at"],
                    unique=False)
    counters.install(op.get_bind())


def downgrade() -> None:
    counters.uninstall(op.get_bind())
    op.drop_index("ix_task_leases_study", table_name="task_leases")
    op.drop_index("ix_task_leases_answer_b", table_name="task_leases")
    op.drop_table("pair_load")
    op.drop_index("ix_answer_load_pick", table_name="answer_load")
    op.drop_table("answer_load")
