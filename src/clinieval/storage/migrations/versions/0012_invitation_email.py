"""invitations remember the e-mail address they were made for

Revision ID: 0012_invitation_email
Revises: 0011_open_lease_index
Create Date: 2026-11-24 21:00:00

An invitation made for an address (pasted on *People*, a CSV, the API's
``emails``) now registers or admits only that address, and revoking a
member voids the unused invitations made for their address. Before, every
link was a bearer link: a revoked clinician opened a second, unused link
from the same admin and was back in the study. Links made as a number
("10 links") keep no address and stay bearer links; rows made before this
revision have none either.
"""

import sqlalchemy as sa
from alembic import op

revision = "0012_invitation_email"
down_revision = "0011_open_lease_index"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("invitations") as batch_op:
        batch_op.add_column(sa.Column("email", sa.Text(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("invitations") as batch_op:
        batch_op.drop_column("email")
