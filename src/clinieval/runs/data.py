"""What runs read from the database: cases to answer, answers to judge, the
rubric's criteria. Small selective queries, not whole snapshots."""

from __future__ import annotations

from dataclasses import dataclass

import sqlalchemy as sa

from clinieval.storage.schema import snapshot as snapshot_tables
from clinieval.storage.schema.runs import RUN_TABLES


@dataclass(frozen=True)
class CaseText:
    case_id: str
    prompt: str


@dataclass(frozen=True)
class AnswerText:
    answer_id: str
    case_id: str
    model_id: str
    text: str
    sample_index: int
    temperature: float | None
    variant: str | None


def load_cases(engine: sa.Engine, case_ids: list[str] | None = None,
               limit: int | None = None) -> list[CaseText]:
    """Cases with a prompt, in id order."""
    cases = snapshot_tables.cases
    query = sa.select(cases.c.case_id, cases.c.prompt).where(cases.c.prompt.is_not(None))
    if case_ids:
        query = query.where(cases.c.case_id.in_(case_ids))
    with engine.connect() as conn:
        rows = conn.execute(query.order_by(cases.c.case_id).limit(limit)).all()
    return [CaseText(*row) for row in rows]


def load_answers(engine: sa.Engine, *, run_id: str | None = None,
                 model_ids: list[str] | None = None, limit: int | None = None
                 ) -> list[AnswerText]:
    """Answers with text, in id order; ``run_id`` keeps those a generate run made."""
    answers = snapshot_tables.answers
    query = sa.select(answers.c.answer_id, answers.c.case_id, answers.c.model_id, answers.c.text,
                      sa.func.coalesce(answers.c.sample_index, 0), answers.c.temperature,
                      answers.c.system_prompt_variant).where(answers.c.text.is_not(None))
    if run_id:
        calls = RUN_TABLES["llm_run_calls"]
        made = sa.select(calls.c.answer_id).where(calls.c.run_id == run_id)
        query = query.where(answers.c.answer_id.in_(made))
    if model_ids:
        query = query.where(answers.c.model_id.in_(model_ids))
    with engine.connect() as conn:
        rows = conn.execute(query.order_by(answers.c.answer_id).limit(limit)).all()
    return [AnswerText(*row) for row in rows]


def case_prompts(engine: sa.Engine, case_ids: set[str]) -> dict[str, str]:
    cases = snapshot_tables.cases
    found: dict[str, str] = {}
    with engine.connect() as conn:
        ids = sorted(case_ids)
        for start in range(0, len(ids), 500):
            query = sa.select(cases.c.case_id, cases.c.prompt).where(
                cases.c.case_id.in_(ids[start:start + 500]))
            found.update({cid: prompt or "" for cid, prompt in conn.execute(query)})
    return found


def load_criteria(engine: sa.Engine, criterion_ids: list[str] | None = None) -> list[dict]:
    """The stored rubric's criteria with anchors, in rubric order."""
    criteria = snapshot_tables.criteria
    query = sa.select(criteria).order_by(criteria.c.position, criteria.c.criterion_id)
    if criterion_ids:
        query = query.where(criteria.c.criterion_id.in_(criterion_ids))
    with engine.connect() as conn:
        return [dict(row) for row in conn.execute(query).mappings()]
