"""Tables of the automated runs: run records, the call cache, which calls
each run has finished, every attempt at a call (fresh, cached, failed or
cut short by a stop) and the prompts they sent, stored once per hash. Not
part of the snapshot: a bundle carries answers and judgments; these tables
carry how they were made."""

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

ATTEMPT_STATUSES = ("open", "ok", "failed", "cached", "interrupted")
"""An attempt is ``open`` while its request is out (a stop leaves it so, and
the next start of the run marks it ``interrupted``: sent and paid for, its
cost not known), ``ok`` when it was answered, ``failed`` after its HTTP
retries, ``cached`` when the cache answered it (nothing was sent)."""

llm_prompts = sa.Table(
    "llm_prompts", metadata,
    sa.Column("prompt_hash", sa.Text, primary_key=True),
    sa.Column("messages", sa.Text, nullable=False),
)
"""Rendered prompts (the messages of a call, canonical JSON) by SHA-256:
calls that send the same messages, repeats and other runs share one row."""

llm_settings = sa.Table(
    "llm_settings", metadata,
    sa.Column("settings_hash", sa.Text, primary_key=True),
    sa.Column("settings", sa.Text, nullable=False),
)
"""Request settings (canonical JSON, a judge's response schema included) by
SHA-256: the calls of a juror share one row."""

llm_call_attempts = sa.Table(
    "llm_call_attempts", metadata,
    sa.Column("run_id", sa.Text, sa.ForeignKey("llm_runs.run_id"), primary_key=True),
    sa.Column("start", sa.Integer, primary_key=True),
    sa.Column("seq", sa.Integer, primary_key=True),
    sa.Column("task_key", sa.Text, nullable=False),
    sa.Column("call_index", sa.Integer, nullable=False),
    sa.Column("parse_attempt", sa.Integer, nullable=False),
    sa.Column("call_key", sa.Text, nullable=False),
    sa.Column("prompt_hash", sa.Text, sa.ForeignKey("llm_prompts.prompt_hash"),
              nullable=False),
    sa.Column("template", sa.Text),
    sa.Column("template_hash", sa.Text),
    sa.Column("settings_hash", sa.Text, sa.ForeignKey("llm_settings.settings_hash"),
              nullable=False),
    sa.Column("status", sa.Text, nullable=False),
    sa.Column("started_at", sa.DateTime(timezone=True), nullable=False),
    sa.Column("ended_at", sa.DateTime(timezone=True)),
    sa.Column("endpoint", sa.Text),
    sa.Column("tries", sa.Integer, nullable=False),
    sa.Column("error", sa.Text),
    sa.Column("cause", sa.Text),
    sa.Column("finish_reason", sa.Text),
    sa.Column("input_tokens", sa.Integer, nullable=False),
    sa.Column("output_tokens", sa.Integer, nullable=False),
    sa.Column("latency_s", sa.Float(precision=53)),
    sa.Column("cost_usd", sa.Float(precision=53)),
    sa.CheckConstraint(one_of("status", ATTEMPT_STATUSES), name="status_value"),
)
"""One row per attempt at a call: each parse attempt of each call of a task,
in each start of the run (``start`` counts the starts, ``seq`` the attempts
within one). ``tries`` counts the HTTP tries inside it, ``endpoint`` is the
replica that answered (or last failed). ``cost_usd`` is what the attempt
spent: 0 for a cache hit, NULL when a stop cut it short."""

RUN_TABLES: dict[str, sa.Table] = {t.name: t for t in (
    llm_runs, llm_cache, llm_run_calls, llm_prompts, llm_settings, llm_call_attempts)}
"""The run tables by name."""
