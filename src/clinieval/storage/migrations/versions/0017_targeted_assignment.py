"""decision-targeted assignment: per-answer priorities, lease probabilities,
escalation settings

Revision ID: 0017_targeted_assignment
Revises: 0016_benchmark_results
Create Date: 2026-12-01 19:30:00

A study may collect where its decisions are still open (issue 33 §2):
``study_settings.assignment`` ('even' or 'targeted'; NULL: even, as before)
and ``monitor_share`` (the share kept on settled cells; NULL: 10 %). Each
lease records the probability its answer had of being chosen
(``task_leases.probability``; NULL: an even-spreading lease). The priorities
a background pass computes from the decisions, and the raised rater target
of an answer a clinician alarmed on (``escalation_step`` raters per alarm up
to ``escalation_cap``; NULL: 2 and 4), live in ``answer_priorities``; the
probability a clinician of a specialty is offered a task at all (below 1
once all its decisions are settled) in ``assignment_offers``.
Additive: studies made before it keep NULLs and behave as they did.
"""

import sqlalchemy as sa
from alembic import op

revision = "0017_targeted_assignment"
down_revision = "0016_benchmark_results"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("study_settings") as batch_op:
        batch_op.add_column(sa.Column("assignment", sa.Text(), nullable=True))
        batch_op.add_column(sa.Column("monitor_share", sa.Float(precision=53), nullable=True))
        batch_op.add_column(sa.Column("escalation_step", sa.Integer(), nullable=True))
        batch_op.add_column(sa.Column("escalation_cap", sa.Integer(), nullable=True))
    with op.batch_alter_table("task_leases") as batch_op:
        batch_op.add_column(sa.Column("probability", sa.Float(precision=53), nullable=True))
    op.create_table(
        "answer_priorities",
        sa.Column("study_id", sa.Text(), sa.ForeignKey("studies.study_id"), primary_key=True),
        sa.Column("answer_id", sa.Text(), sa.ForeignKey("answers.answer_id"), primary_key=True),
        sa.Column("specialty", sa.Text(), nullable=False),
        sa.Column("extra", sa.Integer(), nullable=False, server_default="0"),
        sa.Column("share", sa.Float(precision=53)),
        sa.Column("pick_key", sa.Float(precision=53)),
    )
    op.create_index("ix_answer_priorities_pick", "answer_priorities",
                    ["study_id", "specialty", "pick_key"])
    op.create_table(
        "assignment_offers",
        sa.Column("study_id", sa.Text(), sa.ForeignKey("studies.study_id"), primary_key=True),
        sa.Column("specialty", sa.Text(), primary_key=True),
        sa.Column("offer", sa.Float(precision=53), nullable=False),
    )


def downgrade() -> None:
    op.drop_table("assignment_offers")
    op.drop_index("ix_answer_priorities_pick", table_name="answer_priorities")
    op.drop_table("answer_priorities")
    with op.batch_alter_table("task_leases") as batch_op:
        batch_op.drop_column("probability")
    with op.batch_alter_table("study_settings") as batch_op:
        for name in ("escalation_cap", "escalation_step", "monitor_share", "assignment"):
            batch_op.drop_column(name)
