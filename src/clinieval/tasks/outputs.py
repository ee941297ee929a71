"""What a benchmark run's tasks produced (status, error, answer text, cost),
and the result row of one scored sample."""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa

from clinieval.io.foreign.choice import Item
from clinieval.runs.engine import Task
from clinieval.tasks.job import case_id
from clinieval.tasks.scorers import Scored


def run_outputs(engine: sa.Engine, run_id: str) -> dict[str, dict[str, Any]]:
    """Each task of the run: its status, error, answer text and cost."""
    from clinieval.storage.schema import snapshot as snapshot_tables
    from clinieval.storage.schema.runs import RUN_TABLES

    calls, answers = RUN_TABLES["llm_run_calls"], snapshot_tables.answers
    query = sa.select(calls.c.task_key, calls.c.status, calls.c.error, calls.c.answer_id,
                      answers.c.text, answers.c.tokens, answers.c.cost_usd).select_from(
        calls.outerjoin(answers, answers.c.answer_id == calls.c.answer_id)).where(
        calls.c.run_id == run_id)
    with engine.connect() as conn:
        return {row.task_key: dict(row._mapping) for row in conn.execute(query)}


def result_row(run_id: str, scorer: str, item: Item, task: Task, out: dict | None, result: Scored,
               prepared) -> dict[str, Any]:
    return {"run_id": run_id, "scorer": scorer, "instance_id": item.instance_id,
            "sample_index": task.info["sample"], "case_id": case_id(prepared.bench, item),
            "answer_id": (out or {}).get("answer_id"), "status": result.status,
            "score": result.score if result.status == "ok" else None,
            "extracted": result.extracted, "reference": item.reference,
            "detail": result.detail, "input_tokens": None,
            "output_tokens": (out or {}).get("tokens"), "cost_usd": (out or {}).get("cost_usd")}
