"""Tables of benchmark runs (``clinieval run``): what each run of a benchmark
file was (its taxonomy place, metric, normalisation, file and template
hashes) and the per-instance results of its scorers, read by the audit's
benchmarks section as they are.

A result's ``status`` says what became of one sample of one instance under
one scorer: ``ok`` (scored), ``unparsed`` (no answer could be read from the
output: counted and shown, never a zero), ``error`` (the instance or the
scorer failed: the message is in ``detail``) or ``failed`` (the model call
failed after its retries; no answer)."""

from __future__ import annotations

import sqlalchemy as sa

from clinieval.storage.schema.shared import metadata, one_of

RESULT_STATUSES = ("ok", "unparsed", "error", "failed")

benchmark_runs = sa.Table(
    "benchmark_runs", metadata,
    sa.Column("run_id", sa.Text, sa.ForeignKey("llm_runs.run_id"), primary_key=True),
    sa.Column("benchmark_id", sa.Text, nullable=False),
    sa.Column("model_id", sa.Text, nullable=False),
    sa.Column("label", sa.Text),
    sa.Column("category", sa.Text, nullable=False),
    sa.Column("subcategory", sa.Text, nullable=False),
    sa.Column("metric", sa.Text, nullable=False),
    sa.Column("normalisation", sa.Text, nullable=False),
    sa.Column("primary_scorer", sa.Text, nullable=False),
    sa.Column("samples", sa.Integer, nullable=False),
    sa.Column("file_sha256", sa.Text, nullable=False),
    sa.Column("template_name", sa.Text, nullable=False),
    sa.Column("template_sha256", sa.Text, nullable=False),
    sa.Column("scored_at", sa.DateTime(timezone=True), nullable=False),
)

benchmark_results = sa.Table(
    "benchmark_results", metadata,
    sa.Column("run_id", sa.Text, sa.ForeignKey("benchmark_runs.run_id"), primary_key=True),
    sa.Column("scorer", sa.Text, primary_key=True),
    sa.Column("instance_id", sa.Text, primary_key=True),
    sa.Column("sample_index", sa.Integer, primary_key=True),
    sa.Column("case_id", sa.Text, nullable=False),
    sa.Column("answer_id", sa.Text),
    sa.Column("status", sa.Text, nullable=False),
    sa.Column("score", sa.Float(precision=53)),
    sa.Column("extracted", sa.Text),
    sa.Column("reference", sa.Text),
    sa.Column("detail", sa.Text),
    sa.Column("input_tokens", sa.Integer),
    sa.Column("output_tokens", sa.Integer),
    sa.Column("cost_usd", sa.Float(precision=53)),
    sa.CheckConstraint(one_of("status", RESULT_STATUSES), name="status_value"),
    sa.CheckConstraint("(status = 'ok') = (score IS NOT NULL)", name="score_when_ok"),
)

BENCHMARK_TABLES: dict[str, sa.Table] = {t.name: t for t in (benchmark_runs, benchmark_results)}
