"""lease index by answer and clinician (the "not already theirs" probe)

Revision ID: 0007_lease_probe
Revises: 0006_webperf
Create Date: 2026-11-23 21:00:00

Assignment tests each candidate answer for an earlier lease of the same
clinician (``answer_id = ? AND user_id = ?``). With an index on the answer
and one on the clinician, SQLite took the clinician's (every lease they ever
held, scanned per candidate): a clinician with 500 past tasks paid 1.8 ms per
page of 20 candidates, 0.08 ms with this index.
"""

from alembic import op

revision = "0007_lease_probe"
down_revision = "0006_webperf"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_index("ix_task_leases_answer_user", "task_leases", ["answer_id", "user_id"],
                    unique=False)


def downgrade() -> None:
    op.drop_index("ix_task_leases_answer_user", table_name="task_leases")
