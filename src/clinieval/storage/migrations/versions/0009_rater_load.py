"""per-rater counters for the progress page (rater_load, kept by triggers)

Revision ID: 0009_rater_load
Revises: 0008_rating_writes
Create Date: 2026-11-24 01:50:00

The progress page lists every clinician of a study with the answers they
rated, their votes and the time they spent. Counted from the ratings, that
read every rating of the study at each page load: about 330 ms at paper
scale (736 clinicians, 375,614 ratings), on the server's event loop. The
triggers keep the three numbers per rater in the transaction of every write.
"""

import sqlalchemy as sa
from alembic import op

from clinieval.storage import counters

revision = "0009_rater_load"
down_revision = "0008_rating_writes"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "rater_load",
        sa.Column("study_id", sa.Text(), nullable=False),
        sa.Column("rater_id", sa.Text(), nullable=False),
        sa.Column("answers", sa.Integer(), nullable=False),
        sa.Column("votes", sa.Integer(), nullable=False),
        sa.Column("ms", sa.Float(), nullable=False),
        sa.PrimaryKeyConstraint("study_id", "rater_id", name=op.f("pk_rater_load")),
    )
    counters.install_raters(op.get_bind())


def downgrade() -> None:
    counters.uninstall_raters(op.get_bind())
    op.drop_table("rater_load")
