"""From command-line choices to jobs: which cases or answers, which models
or judges, and the summaries printed after a run."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import sqlalchemy as sa

from clinieval.contract import vocabulary
from clinieval.errors import InputError
from clinieval.providers import load_model_file
from clinieval.runs import data
from clinieval.runs.generate import GenerateJob
from clinieval.runs.judges import JUDGES, JudgeJob, pairs_within_cases, resolve_pair
from clinieval.runs.rules import load_rules
from clinieval.storage.schema import snapshot as snapshot_tables


def generate_jobs(engine: sa.Engine, model_files: list[Path], *, samples: int = 1,
                  variants: tuple[str, ...] = ("default",),
                  temperatures: tuple[float | None, ...] = (None,),
                  case_ids: list[str] | None = None, limit: int | None = None
                  ) -> list[GenerateJob]:
    cases = data.load_cases(engine, case_ids, limit)
    if not cases:
        raise InputError(str(engine.url.render_as_string()), "no cases with a prompt to answer")
    return [GenerateJob(load_model_file(path), cases, samples, variants, temperatures)
            for path in model_files]


def judge_jobs(engine: sa.Engine, kind: str, judge_files: list[Path], *, jurors: int = 1,
               repeats: int = 1, answers_run: str | None = None,
               model_ids: list[str] | None = None, criteria: list[str] | None = None,
               rules_file: Path | None = None, limit: int | None = None) -> list[JudgeJob]:
    """One job per judge model file; jurors are numbered across the files."""
    if kind not in JUDGES:
        raise InputError("judge", "unknown judge kind", expected=", ".join(JUDGES), got=kind)
    answers = data.load_answers(engine, run_id=answers_run, model_ids=model_ids, limit=limit)
    if not answers:
        raise InputError("judge", "no stored answers with text match the selection")
    extra = _kind_inputs(engine, kind, answers, criteria, rules_file)
    cases = data.case_prompts(engine, {a.case_id for a in answers})
    return [JUDGES[kind](load_model_file(path), answers, cases, jurors=jurors, repeats=repeats,
                         juror_offset=i * jurors, **extra)
            for i, path in enumerate(judge_files)]


def _kind_inputs(engine: sa.Engine, kind: str, answers: list, criteria: list[str] | None,
                 rules_file: Path | None) -> dict[str, Any]:
    if kind == "rubric":
        rows = data.load_criteria(engine, criteria)
        if not rows:
            raise InputError("judge", "no stored criteria to judge with", field="--criteria")
        return {"criteria": rows}
    if kind == "pairwise":
        pairs = pairs_within_cases(answers)
        if not pairs:
            raise InputError("judge", "no two answers to the same case to compare")
        return {"pairs": pairs}
    if kind == "rule":
        if rules_file is None:
            raise InputError("judge", "the rule judge needs --rules FILE")
        return {"rules": load_rules(rules_file)}
    return {}


def pairwise_summary(engine: sa.Engine, run_id: str, inconsistent: str = "tie") -> dict[str, int]:
    """Pairs judged in both orders: how many orders agreed, disagreed or lack
    a verdict, and the resolved verdicts (an inconsistent pair as
    ``inconsistent`` says)."""
    j = snapshot_tables.judgments
    query = sa.select(j.c.answer_id, j.c.answer_b_id, j.c.juror, j.c.repeat, j.c.shown_first,
                      j.c.choice).where(j.c.run_id == run_id, j.c.judge_kind == "pairwise")
    orders: dict[tuple, dict[str, str | None]] = {}
    with engine.connect() as conn:
        for a, b, juror, repeat, shown, choice in conn.execute(query):
            orders.setdefault((a, b, juror, repeat), {})[shown] = choice
    counts: Counter[str] = Counter()
    for pair in orders.values():
        first, second = pair.get(vocabulary.SIDES[0]), pair.get(vocabulary.SIDES[1])
        counts["an order without verdict" if None in (first, second) else
               "orders agree" if first == second else "orders disagree"] += 1
        verdict = resolve_pair(first, second, inconsistent)
        counts[f"verdict {verdict}" if verdict else "no verdict"] += 1
    return dict(sorted(counts.items()))
