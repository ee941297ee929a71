"""every attempt at a call, and the prompts and settings they sent

Revision ID: 0015_call_log
Revises: 0014_study_gates
Create Date: 2026-12-01 19:30:00

``llm_prompts`` and ``llm_settings`` keep each rendered prompt and each set of
request settings once by hash; ``llm_call_attempts``
records every attempt at a call with its prompt, template, settings, endpoint,
times, status, error, tokens and cost, so that calls repeated after a stop
are counted as spent (issue 31). Runs made before this revision have no
attempt rows; their records are unchanged.
"""

import sqlalchemy as sa
from alembic import op

revision = "0015_call_log"
down_revision = "0014_study_gates"
branch_labels = None
depends_on = None

STATUSES = "'open', 'ok', 'failed', 'cached', 'interrupted'"


def upgrade() -> None:
    op.create_table(
        "llm_prompts",
        sa.Column("prompt_hash", sa.Text(), nullable=False),
        sa.Column("messages", sa.Text(), nullable=False),
        sa.PrimaryKeyConstraint("prompt_hash", name=op.f("pk_llm_prompts")),
    )
    op.create_table(
        "llm_settings",
        sa.Column("settings_hash", sa.Text(), nullable=False),
        sa.Column("settings", sa.Text(), nullable=False),
        sa.PrimaryKeyConstraint("settings_hash", name=op.f("pk_llm_settings")),
    )
    op.create_table(
        "llm_call_attempts",
        sa.Column("run_id", sa.Text(), nullable=False),
        sa.Column("start", sa.Integer(), nullable=False),
        sa.Column("seq", sa.Integer(), nullable=False),
        sa.Column("task_key", sa.Text(), nullable=False),
        sa.Column("call_index", sa.Integer(), nullable=False),
        sa.Column("parse_attempt", sa.Integer(), nullable=False),
        sa.Column("call_key", sa.Text(), nullable=False),
        sa.Column("prompt_hash", sa.Text(), nullable=False),
        sa.Column("template", sa.Text(), nullable=True),
        sa.Column("template_hash", sa.Text(), nullable=True),
        sa.Column("settings_hash", sa.Text(), nullable=False),
        sa.Column("status", sa.Text(), nullable=False),
        sa.Column("started_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("ended_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("endpoint", sa.Text(), nullable=True),
        sa.Column("tries", sa.Integer(), nullable=False),
        sa.Column("error", sa.Text(), nullable=True),
        sa.Column("cause", sa.Text(), nullable=True),
        sa.Column("finish_reason", sa.Text(), nullable=True),
        sa.Column("input_tokens", sa.Integer(), nullable=False),
        sa.Column("output_tokens", sa.Integer(), nullable=False),
        sa.Column("latency_s", sa.Float(precision=53), nullable=True),
        sa.Column("cost_usd", sa.Float(precision=53), nullable=True),
        sa.CheckConstraint(f"status IN ({STATUSES})",
                           name=op.f("ck_llm_call_attempts_status_value")),
        sa.ForeignKeyConstraint(["prompt_hash"], ["llm_prompts.prompt_hash"],
                                name=op.f("fk_llm_call_attempts_prompt_hash_llm_prompts")),
        sa.ForeignKeyConstraint(["run_id"], ["llm_runs.run_id"],
                                name=op.f("fk_llm_call_attempts_run_id_llm_runs")),
        sa.ForeignKeyConstraint(["settings_hash"], ["llm_settings.settings_hash"],
                                name=op.f("fk_llm_call_attempts_settings_hash_llm_settings")),
        sa.PrimaryKeyConstraint("run_id", "start", "seq", name=op.f("pk_llm_call_attempts")),
    )


def downgrade() -> None:
    op.drop_table("llm_call_attempts")
    op.drop_table("llm_settings")
    op.drop_table("llm_prompts")
