"""What the viewer shows, read from the database: every answer with its case
and the prompt that made it, and every judgment of it with the judge's raw
output, rationale, score and parse status, and the prompt the judge got."""

from __future__ import annotations

import hashlib
import json
import math
from dataclasses import dataclass, field

import sqlalchemy as sa

from clinieval.storage.schema import snapshot as snapshot_tables
from clinieval.storage.schema.runs import RUN_TABLES


def page_name(answer_id: str) -> str:
    """The file of an answer's page: a hash of its id (ids are free text),
    the same in every build, so links to it stay valid."""
    return hashlib.sha256(answer_id.encode()).hexdigest()[:20] + ".html"


@dataclass
class Judgment:
    judgment_id: int
    judge_kind: str | None
    judge_model: str
    criterion_id: str | None
    score: float | None
    choice: str | None
    points: float | None
    parse_status: str | None
    raw_output: str | None
    reason: str | None
    juror: int | None
    repeat: int | None
    run_id: str | None
    answer_b_id: str | None
    shown_first: str | None
    prompt: list[dict] | None = None

    @property
    def judge(self) -> str:
        return f"{self.judge_kind or 'judge'}: {self.judge_model}"

    @property
    def value(self) -> str:
        """The verdict as shown and filtered on: the score, the pairwise
        choice, or the rule's points; empty when there is none."""
        for v in (self.score, self.points):
            if v is not None and not (isinstance(v, float) and math.isnan(v)):
                return f"{v:g}"
        return self.choice or ""


@dataclass
class Answer:
    answer_id: str
    case_id: str
    model_id: str
    sample_index: int | None
    temperature: float | None
    variant: str | None
    text: str | None
    case_prompt: str
    specialty: str | None
    prompt: list[dict] | None = None
    judgments: list[Judgment] = field(default_factory=list)

    @property
    def page(self) -> str:
        return page_name(self.answer_id)


def load(engine: sa.Engine) -> list[Answer]:
    """Every answer (by case, model, sample) with its judgments; the rendered
    prompts where the call log holds them (runs made with it)."""
    answers_t, cases, judgments = (snapshot_tables.answers, snapshot_tables.cases,
                                   snapshot_tables.judgments)
    inspector = sa.inspect(engine)
    logged = inspector.has_table("llm_call_attempts")
    query = (sa.select(answers_t.c.answer_id, answers_t.c.case_id, answers_t.c.model_id,
                       answers_t.c.sample_index, answers_t.c.temperature,
                       answers_t.c.system_prompt_variant, answers_t.c.text, cases.c.prompt,
                       cases.c.specialty)
             .select_from(answers_t.join(cases, answers_t.c.case_id == cases.c.case_id))
             .order_by(answers_t.c.case_id, answers_t.c.model_id, answers_t.c.sample_index,
                       answers_t.c.answer_id))
    jcols = [judgments.c[name] for name in (
        "judgment_id", "judge_kind", "judge_model", "criterion_id", "score", "choice", "points",
        "parse_status", "raw_output", "reason", "juror", "repeat", "run_id", "answer_b_id",
        "shown_first")]
    with engine.connect() as conn:
        answers = {row[0]: Answer(*row) for row in conn.execute(query)}
        keys: dict[int, str | None] = {}
        for row in conn.execute(sa.select(judgments.c.answer_id, judgments.c.call_key, *jcols)
                                .order_by(judgments.c.judgment_id)):
            answer = answers.get(row[0])
            if answer is not None:
                j = Judgment(*row[2:])
                keys[id(j)] = row[1]
                answer.judgments.append(j)
        prompts = _prompts(conn) if logged else {}
        made = _answer_calls(conn) if logged else {}
    for answer in answers.values():
        answer.prompt = prompts.get(made.get(answer.answer_id, ""))
        for j in answer.judgments:
            j.prompt = prompts.get(keys.get(id(j)) or "")
    return list(answers.values())


def _prompts(conn: sa.Connection) -> dict[str, list[dict]]:
    """The messages sent under each call key (any attempt's: they share them)."""
    attempts, prompts = RUN_TABLES["llm_call_attempts"], RUN_TABLES["llm_prompts"]
    texts = dict(conn.execute(sa.select(prompts.c.prompt_hash, prompts.c.messages)).all())
    by_key: dict[str, list[dict]] = {}
    for key, digest in conn.execute(sa.select(attempts.c.call_key,
                                              attempts.c.prompt_hash).distinct()):
        if key not in by_key and digest in texts:
            by_key[key] = json.loads(texts[digest])
    return by_key


def _answer_calls(conn: sa.Connection) -> dict[str, str]:
    """The call key that made each answer of a generate run."""
    calls = RUN_TABLES["llm_run_calls"]
    runs = RUN_TABLES["llm_runs"]
    query = (sa.select(calls.c.answer_id, calls.c.call_key)
             .select_from(calls.join(runs)).where(runs.c.kind == "generate",
                                                  calls.c.answer_id.is_not(None)))
    return dict(conn.execute(query).all())


def facets(answers: list[Answer]) -> dict[str, list[str]]:
    """The values each filter offers, sorted."""
    values: dict[str, set[str]] = {"model": set(), "judge": set(), "criterion": set(),
                                   "parse": set(), "score": set()}
    for a in answers:
        values["model"].add(a.model_id)
        for j in a.judgments:
            values["judge"].add(j.judge)
            if j.criterion_id:
                values["criterion"].add(j.criterion_id)
            values["parse"].add(j.parse_status or "")
            values["score"].add(j.value)
    return {k: sorted(v - {""}) for k, v in values.items()}

