"""PostgreSQL: count inserted ratings once per statement, not once per row

Revision ID: 0010_counted_per_statement
Revises: 0009_rater_load
Create Date: 2026-11-24 03:30:00

A submission inserts a rating per criterion (9 with the default rubric, 18
for a pair) in one statement. Row-level triggers ran ``answer_load`` and
``rater_load`` bookkeeping once per row: two function calls and four or
five probes each. Statement-level triggers with a transition table do it in
one call and two set-based statements per INSERT (or per COPY of an
import). SQLite keeps its row triggers: there a trigger is in-process
bytecode, not a call into another language.
"""

from alembic import op

from clinieval.storage import counters

revision = "0010_counted_per_statement"
down_revision = "0009_rater_load"
branch_labels = None
depends_on = None


def upgrade() -> None:
    counters.count_per_statement(op.get_bind())


def downgrade() -> None:
    # The row-level versions are gone from the code; the statement-level ones
    # count the same, so a downgrade keeps them.
    pass
