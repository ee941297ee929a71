"""a clinician's leases indexed with their status (the open-task lookup)

Revision ID: 0011_open_lease_index
Revises: 0010_counted_per_statement
Create Date: 2026-11-24 09:00:00

Every request for a task first looks for the clinician's open lease
(``user_id = ? AND study_id = ? AND status = 'open'``). With the clinician's
index on (user, study) and the study's on (study, status, expiry), SQLite
(without planner statistics) took the study's in the load benchmark's
paper-scale database: every open lease of the study (one per active
clinician, 200 there) read to find one, 120 us a request under load (on a
small test database it took the clinician's). With the status in the
clinician's index that index matches all three terms and is taken: 16 us.
"""

from alembic import op

revision = "0011_open_lease_index"
down_revision = "0010_counted_per_statement"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.drop_index("ix_task_leases_user", table_name="task_leases")
    op.create_index("ix_task_leases_user", "task_leases", ["user_id", "study_id", "status"],
                    unique=False)


def downgrade() -> None:
    op.drop_index("ix_task_leases_user", table_name="task_leases")
    op.create_index("ix_task_leases_user", "task_leases", ["user_id", "study_id"], unique=False)
