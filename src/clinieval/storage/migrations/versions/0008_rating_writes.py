"""fewer index pages written per submission

Revision ID: 0008_rating_writes
Revises: 0007_lease_probe
Create Date: 2026-11-23 23:20:00

Each submission writes one rating per criterion. The index on the criterion
alone put those rows in as many places as there are criteria (a page each,
written again at every commit): at paper scale it was 10.6 of the 38 pages
per commit that the server wrote to SQLite's log (counted from the log's
frame headers in one run), and no query reads ratings by criterion alone
(the audit reads whole tables; criteria are looked up by their key).

The audit events' index (kind, subject, time) stays as it is, although a
submission's event (a random token as subject) lands on a random page of it:
with time before subject, the sign-in rate limit would read every failed
sign-in of the last minutes instead of one address's.
"""

from alembic import op

revision = "0008_rating_writes"
down_revision = "0007_lease_probe"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.drop_index("ix_ratings_criterion", table_name="ratings")


def downgrade() -> None:
    op.create_index("ix_ratings_criterion", "ratings", ["criterion_id"], unique=False)
