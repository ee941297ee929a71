"""What the runs in a database did, read back: one summary per run (kind,
models, judges, tasks by status, attempts, what was spent, when) and a run's
failures by cause with an example each. ``clinieval runs`` prints these."""

from __future__ import annotations

import json
from collections import defaultdict
from typing import Any

import sqlalchemy as sa

from clinieval.errors import InputError
from clinieval.providers import failures_by_cause
from clinieval.providers.failure import LENGTH, UNPARSED, cause_of
from clinieval.runs.store import list_price_usd
from clinieval.storage.schema import snapshot as snapshot_tables
from clinieval.storage.schema.runs import RUN_TABLES

RUNS = RUN_TABLES["llm_runs"]
CALLS = RUN_TABLES["llm_run_calls"]
ATTEMPTS = RUN_TABLES["llm_call_attempts"]
CACHE = RUN_TABLES["llm_cache"]
INTERRUPTED = "interrupted"


def _has_runs(engine: sa.Engine) -> bool:
    return sa.inspect(engine).has_table(RUNS.name)


def list_runs(engine: sa.Engine) -> list[dict[str, Any]]:
    """Every run, oldest first: ``run`` (its kind: generate or the judge's),
    ``model`` (the model it called: the candidate, or the judge),
    ``judged_models`` (a judge run's candidates), ``tasks`` by status,
    ``attempts`` by status, ``spent_usd``, ``list_price_usd``, times."""
    if not _has_runs(engine):
        return []
    judgments, answers = snapshot_tables.judgments, snapshot_tables.answers
    with engine.connect() as conn:
        runs = [dict(r) for r in conn.execute(RUNS.select().order_by(RUNS.c.started_at,
                                                                     RUNS.c.run_id)).mappings()]
        tasks = _counts(conn, CALLS, CALLS.c.status)
        attempts = _counts(conn, ATTEMPTS, ATTEMPTS.c.status)
        judged: dict[str, set[str]] = defaultdict(set)
        query = (sa.select(judgments.c.run_id, answers.c.model_id).distinct()
                 .select_from(judgments.join(answers, judgments.c.answer_id == answers.c.answer_id))
                 .where(judgments.c.run_id.is_not(None)))
        for run_id, model_id in conn.execute(query):
            judged[run_id].add(model_id)
        out = []
        for r in runs:
            run_id = r["run_id"]
            out.append({
                "run_id": run_id, "run": r["judge_kind"] or r["kind"], "kind": r["kind"],
                "judge_kind": r["judge_kind"], "model": r["model_id"],
                "judged_models": sorted(judged.get(run_id, ())), "status": r["status"],
                "planned": r["planned"],
                "tasks": {s: tasks[run_id].get(s, 0) for s in ("done", "cached", "failed")},
                "unparsed": r["unparsed"], "attempts": dict(sorted(attempts[run_id].items())),
                "spent_usd": r["cost_usd"],
                "list_price_usd": list_price_usd(conn, run_id, r["kind"]),
                "input_tokens": r["input_tokens"], "output_tokens": r["output_tokens"],
                "started_at": _iso(r["started_at"]), "finished_at": _iso(r["finished_at"]),
                "created_by": r["created_by"], "settings": json.loads(r["settings"])})
    return out


def _counts(conn: sa.Connection, table: sa.Table, column) -> dict[str, dict[str, int]]:
    counts: dict[str, dict[str, int]] = defaultdict(dict)
    query = sa.select(table.c.run_id, column, sa.func.count()).group_by(table.c.run_id, column)
    for run_id, value, n in conn.execute(query):
        counts[run_id][value] = n
    return counts


def _iso(value) -> str | None:
    return None if value is None else value.isoformat()


def show_run(engine: sa.Engine, run_id: str) -> dict[str, Any]:
    """One run's summary (as :func:`list_runs`) with ``failures``: its failed
    and unparsed tasks by cause, most frequent first, an example each (the
    error text, or the start of the unparsed output), and attempts a stop cut
    short. An error naming the run when the database has no such run."""
    found = [r for r in list_runs(engine) if r["run_id"] == run_id]
    if not found:
        known = [r["run_id"] for r in list_runs(engine)]
        raise InputError("runs show", "no such run in this database", field="RUN", got=run_id,
                         expected=", ".join(known[-5:]) if known else "a run (there are none)")
    record = found[0]
    pairs: list[tuple[str, str]] = []
    query = (sa.select(CALLS.c.task_key, CALLS.c.error, CALLS.c.parse_status, CACHE.c.text,
                       CACHE.c.finish_reason)
             .select_from(CALLS.outerjoin(CACHE, CALLS.c.call_key == CACHE.c.call_key))
             .where(CALLS.c.run_id == run_id,
                    sa.or_(CALLS.c.status == "failed", CALLS.c.parse_status == "unparsed"))
             .order_by(CALLS.c.task_key))
    interrupted = (sa.select(ATTEMPTS.c.task_key, ATTEMPTS.c.start, ATTEMPTS.c.started_at,
                             ATTEMPTS.c.endpoint)
                   .where(ATTEMPTS.c.run_id == run_id, ATTEMPTS.c.status == INTERRUPTED)
                   .order_by(ATTEMPTS.c.start, ATTEMPTS.c.seq))
    with engine.connect() as conn:
        for task_key, error, _status, text, finish in conn.execute(query):
            if error:
                pairs.append((cause_of(error), f"task {task_key[:12]}: {error}"))
            else:
                cause = LENGTH if finish == LENGTH else UNPARSED
                pairs.append((cause, f"task {task_key[:12]}: {cause} output:"
                                     f" {(text or '')[:120]!r}"))
        for task_key, start, started, endpoint in conn.execute(interrupted):
            pairs.append((INTERRUPTED, f"task {task_key[:12]}: sent at {_iso(started)} in start"
                                       f" {start}{f' to {endpoint}' if endpoint else ''}, cut"
                                       " short by a stop (cost not known)"))
    record["failures"] = [{"cause": c.cause, "count": c.count, "example": c.example,
                           "fatal": c.fatal and c.cause != INTERRUPTED}
                          for c in failures_by_cause(pairs)]
    return record
