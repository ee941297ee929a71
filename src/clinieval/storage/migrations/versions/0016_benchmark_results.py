"""benchmark runs and their per-instance results

Revision ID: 0016_benchmark_results
Revises: 0015_call_log
Create Date: 2026-12-01 19:30:00

``clinieval run BENCHMARK`` stores what each run of a benchmark file was
and one row per (scorer, instance, sample), read by the audit's benchmarks
section without an import step (issue 30). Two new tables; nothing else
changes.
"""

import sqlalchemy as sa
from alembic import op

revision = "0016_benchmark_results"
down_revision = "0015_call_log"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "benchmark_runs",
        sa.Column("run_id", sa.Text(), nullable=False),
        sa.Column("benchmark_id", sa.Text(), nullable=False),
        sa.Column("model_id", sa.Text(), nullable=False),
        sa.Column("label", sa.Text(), nullable=True),
        sa.Column("category", sa.Text(), nullable=False),
        sa.Column("subcategory", sa.Text(), nullable=False),
        sa.Column("metric", sa.Text(), nullable=False),
        sa.Column("normalisation", sa.Text(), nullable=False),
        sa.Column("primary_scorer", sa.Text(), nullable=False),
        sa.Column("samples", sa.Integer(), nullable=False),
        sa.Column("file_sha256", sa.Text(), nullable=False),
        sa.Column("template_name", sa.Text(), nullable=False),
        sa.Column("template_sha256", sa.Text(), nullable=False),
        sa.Column("scored_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(["run_id"], ["llm_runs.run_id"],
                                name=op.f("fk_benchmark_runs_run_id_llm_runs")),
        sa.PrimaryKeyConstraint("run_id", name=op.f("pk_benchmark_runs")),
    )
    op.create_table(
        "benchmark_results",
        sa.Column("run_id", sa.Text(), nullable=False),
        sa.Column("scorer", sa.Text(), nullable=False),
        sa.Column("instance_id", sa.Text(), nullable=False),
        sa.Column("sample_index", sa.Integer(), nullable=False),
        sa.Column("case_id", sa.Text(), nullable=False),
        sa.Column("answer_id", sa.Text(), nullable=True),
        sa.Column("status", sa.Text(), nullable=False),
        sa.Column("score", sa.Float(precision=53), nullable=True),
        sa.Column("extracted", sa.Text(), nullable=True),
        sa.Column("reference", sa.Text(), nullable=True),
        sa.Column("detail", sa.Text(), nullable=True),
        sa.Column("input_tokens", sa.Integer(), nullable=True),
        sa.Column("output_tokens", sa.Integer(), nullable=True),
        sa.Column("cost_usd", sa.Float(precision=53), nullable=True),
        sa.CheckConstraint("status IN ('ok', 'unparsed', 'error', 'failed')",
                           name=op.f("ck_benchmark_results_status_value")),
        sa.CheckConstraint("(status = 'ok') = (score IS NOT NULL)",
                           name=op.f("ck_benchmark_results_score_when_ok")),
        sa.ForeignKeyConstraint(["run_id"], ["benchmark_runs.run_id"],
                                name=op.f("fk_benchmark_results_run_id_benchmark_runs")),
        sa.PrimaryKeyConstraint("run_id", "scorer", "instance_id", "sample_index",
                                name=op.f("pk_benchmark_results")),
    )


def downgrade() -> None:
    op.drop_table("benchmark_results")
    op.drop_table("benchmark_runs")
