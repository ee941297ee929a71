"""audit events remember the client address a sign-in came from

Revision ID: 0013_signin_client
Revises: 0012_invitation_email
Create Date: 2026-11-27 16:30:00

Sign-in failures were counted per e-mail address only, and five of them
locked the address for everyone: anyone who knew a clinician's address could
keep them out. Failures are now throttled per address and client, per
address, and per client, so the client's address is kept with each sign-in
event (rows made before this revision have none and count for no client).
"""

import sqlalchemy as sa
from alembic import op

revision = "0013_signin_client"
down_revision = "0012_invitation_email"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("audit_events") as batch_op:
        batch_op.add_column(sa.Column("client", sa.Text(), nullable=True))
    op.create_index("ix_audit_events_client", "audit_events", ["kind", "client", "at"])


def downgrade() -> None:
    op.drop_index("ix_audit_events_client", table_name="audit_events")
    with op.batch_alter_table("audit_events") as batch_op:
        batch_op.drop_column("client")
