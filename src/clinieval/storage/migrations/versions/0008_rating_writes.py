"""fewer index pages written per submission

Revision ID: 0008_rating_writes
Revises: 0007_lease_probe
Create Date: 2026-11-23 23:20:00

Each submission writes one rating per criterion. The index on the criterion
alone put those rows in as many places as there are criteria (a page each,
written again at every commit): at paper scale it was over a quarter of the
pages a submission wrote to SQLite's log, and no query reads by criterion
alone (the audit reads whole tables; criteria are looked up by their key).

The audit events' index led with the event kind, then the subject: a
submission's or assignment's event, whose subject is a random task token,
landed on a random page of it. With the time second, such events append at
the end of their kind's range; the sign-in rate limit (kind, time window,
then subject) and the admin log (by kind) read it as before.
"""

from alembic import op

revision = "0008_rating_writes"
down_revision = "0007_lease_probe"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.drop_index("ix_ratings_criterion", table_name="ratings")
    op.drop_index("ix_audit_events_kind", table_name="audit_events")
    op.create_index("ix_audit_events_kind", "audit_events", ["kind", "at", "subject"],
                    unique=False)


def downgrade() -> None:
    op.drop_index("ix_audit_events_kind", table_name="audit_events")
    op.create_index("ix_audit_events_kind", "audit_events", ["kind", "subject", "at"],
                    unique=False)
    op.create_index("ix_ratings_criterion", "ratings", ["criterion_id"], unique=False)
