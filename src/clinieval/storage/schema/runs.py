"""Tables of the automated runs: run records, the call cache, and which calls
each run has finished. Not part of the snapshot: a bundle carries answers and
judgments; these tables carry how they were made."""

from __future__ import annotations

import sqlalchemy as sa

from clinieval.contract import vocabulary
from clinieval.storage.schema.shared import metadata, one_of

RUN_KINDS = ("generate", "judge")
RUN_STATUSES = ("running", "finished", "interrupted", "failed")
CALL_STATUSES = ("done", "cached", "failed")
"""A task's outcome in a run: answered by a fresh call, answered from the
cache, or failed after every retry (tried again when the run resumes)."""

llm_runs = sa.Table(
    "llm_runs", metadata,
    sa.Column("run_id", sa.Text, primary_key=True),
    sa.Column("kind", sa.Text, nullable=False),
    sa.Column("judge_kind", sa.Text),
    sa.Column("model_id", sa.Text, nullable=False),
    sa.Column("created_by", sa.Text, nullable=False),
    sa.Column("started_at", sa.DateTime(timezone=True), nullable=False),
    sa.Column("finished_at", sa.DateTime(timezone=True)),
    sa.Column("status", sa.Text, nullable=False),
    sa.Column("settings", sa.Text, nullable=False),
    *[sa.Column(name, sa.BigInteger, nullable=False, server_default="0")
      for name in ("planned", "done", "cached", "failed", "unparsed", "parse_retries",
                   "input_tokens", "output_tokens")],
    sa.Column("cost_usd", sa.Float(precision=53), nullable=False, server_default="0"),
    sa.CheckConstraint(one_of("kind", RUN_KINDS), name="kind_value"),
    sa.CheckConstraint(one_of("judge_kind", vocabulary.JUDGE_KINDS, nullable=True),
                       name="judge_kind_value"),
    sa.CheckConstraint(one_of("status", RUN_STATUSES), name="status_value"),
)

llm_cache = sa.Table(
    "llm_cache", metadata,
    sa.Column("call_key", sa.Text, primary_key=True),
    sa.Column("model_version", sa.Text, nullable=False),
    sa.Column("settings", sa.Text, nullable=False),
    sa.Column("text", sa.Text, nullable=False),
    sa.Column("finish_reason", sa.Text),
    sa.Column("input_tokens", sa.Integer, nullable=False),
    sa.Column("output_tokens", sa.Integer, nullable=False),
    sa.Column("latency_s", sa.Float(precision=53), nullable=False),
    sa.Column("cost_usd", sa.Float(precision=53), nullable=False),
    sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
)

llm_run_calls = sa.Table(
    "llm_run_calls", metadata,
    sa.Column("run_id", sa.Text, sa.ForeignKey("llm_runs.run_id"), primary_key=True),
    sa.Column("task_key", sa.Text, primary_key=True),
    sa.Column("call_key", sa.Text, nullable=False),
    sa.Column("status", sa.Text, nullable=False),
    sa.Column("answer_id", sa.Text),
    sa.Column("parse_status", sa.Text),
    sa.Column("attempts", sa.Integer, nullable=False),
    sa.Column("parse_attempts", sa.Integer, nullable=False),
    sa.Column("error", sa.Text),
    sa.Column("input_tokens", sa.Integer, nullable=False),
    sa.Column("output_tokens", sa.Integer, nullable=False),
    sa.Column("latency_s", sa.Float(precision=53)),
    sa.Column("cost_usd", sa.Float(precision=53), nullable=False),
    sa.CheckConstraint(one_of("status", CALL_STATUSES), name="status_value"),
    sa.CheckConstraint(one_of("parse_status", vocabulary.PARSE_STATUSES, nullable=True),
                       name="parse_status_value"),
)

RUN_TABLES: dict[str, sa.Table] = {t.name: t for t in (llm_runs, llm_cache, llm_run_calls)}
"""The run tables by name."""
