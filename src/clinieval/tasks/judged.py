"""Judge scorers: the run's answers judged by the existing LLM judges, one
score per answer from its judgments.

- ``rubric``: the mean over the stored rubric's criteria (the bundled
  rubric when none is stored) and jurors, on -2..+2;
- ``jury``: the mean over axes and jurors, on 1..5 (MedHELM's jury);
- ``rule``: HealthBench's example score from the case's own rubric items
  (as imported, tags and all): points of the items met over the positive
  points, clipped to 0..1; averaged over jurors.

An answer with no parsed judgment (for ``rule``: any of its items
unparsed) is ``unparsed``; a judge call that failed is ``failed``.
"""

from __future__ import annotations

from collections import defaultdict
from typing import TYPE_CHECKING, Any

import sqlalchemy as sa

from clinieval.providers import ModelSpec
from clinieval.runs import data
from clinieval.runs.judges import JUDGES, Rule
from clinieval.storage.schema import snapshot as snapshot_tables
from clinieval.tasks.outputs import result_row, run_outputs
from clinieval.tasks.scorers import Scored

if TYPE_CHECKING:
    from clinieval.tasks.job import BenchmarkJob
    from clinieval.tasks.run import Prepared, Runner


def judge_jobs(engine: sa.Engine, prepared: Prepared, index: int, specs: list[ModelSpec],
               run_id: str) -> list:
    from clinieval.tasks.job import case_id

    scorer = prepared.bench.definition.scorers[index]
    answers = data.load_answers(engine, run_id=run_id)
    if not answers:
        return []
    cases = data.case_prompts(engine, {a.case_id for a in answers})
    extra: dict[str, Any] = {}
    if scorer.kind == "rubric":
        criteria = data.load_criteria(engine)
        if not criteria:
            from clinieval.rubric import load_rubric, rubric_to_rows
            from clinieval.storage.rows import RowStore

            criteria = rubric_to_rows(load_rubric())
            RowStore(engine).add_entities("criteria", criteria)  # judgments refer to them
        extra["criteria"] = criteria
    elif scorer.kind == "rule":
        extra["rules"] = [Rule(case_id=case_id(prepared.bench, item), rule_id=r["rule_id"],
                               text=r["text"], points=r["points"])
                          for item in prepared.items for r in item.rules]
    return [JUDGES[scorer.kind](spec, answers, cases, jurors=scorer.jurors, repeats=1,
                                juror_offset=i * scorer.jurors, **extra)
            for i, spec in enumerate(specs)]


def judge_rows(engine: sa.Engine, prepared: Prepared, index: int, specs: list[ModelSpec],
               run_id: str, job: BenchmarkJob, run_jobs: Runner) -> list[dict[str, Any]]:
    """Judge the run's answers with scorer ``index`` and score each sample."""
    jobs = judge_jobs(engine, prepared, index, specs, run_id)
    records = run_jobs(jobs) if jobs else []
    kind = prepared.bench.definition.scorers[index].kind
    verdicts = _verdicts(engine, [r["run_id"] for r in records])
    outputs = run_outputs(engine, run_id)
    by_id = {item.instance_id: item for item in prepared.items}
    rows = []
    for task in job.tasks:
        item = by_id[task.info["instance_id"]]
        out = outputs.get(task.key)
        if out is None or out["answer_id"] is None:
            result = Scored("failed", detail=(out or {}).get("error") or "no answer")
        else:
            result = _score(kind, verdicts.get(out["answer_id"], []))
        rows.append(result_row(run_id, prepared.bench.definition.scorers[index].label, item,
                               task, out, result, prepared))
    return rows


def _verdicts(engine: sa.Engine, run_ids: list[str]) -> dict[str, list[dict]]:
    j = snapshot_tables.judgments
    found: dict[str, list[dict]] = defaultdict(list)
    if not run_ids:
        return found
    query = sa.select(j.c.answer_id, j.c.juror, j.c.criterion_id, j.c.score, j.c.points,
                      j.c.parse_status).where(j.c.run_id.in_(run_ids))
    with engine.connect() as conn:
        for row in conn.execute(query).mappings():
            found[row["answer_id"]].append(dict(row))
    return found


def _score(kind: str, rows: list[dict]) -> Scored:
    if not rows:
        return Scored("failed", detail="no judgment")
    if all(r["parse_status"] == "error" for r in rows):
        return Scored("failed", detail="every judge call failed")
    if kind in ("rubric", "jury"):
        scores = [r["score"] for r in rows if r["parse_status"] == "ok"]
        if not scores:
            return Scored("unparsed", detail="no judgment parsed")
        return Scored("ok", sum(scores) / len(scores), detail=f"{len(scores)} judgments")
    by_juror: dict[int, list[dict]] = defaultdict(list)
    for r in rows:
        by_juror[r["juror"]].append(r)
    per_juror = []
    for items in by_juror.values():
        if any(r["parse_status"] != "ok" for r in items):
            return Scored("unparsed", detail="a rubric item's judgment did not parse")
        possible = sum(r["points"] for r in items if r["points"] > 0)
        earned = sum(r["points"] for r in items if r["score"] == 1.0)
        per_juror.append(min(1.0, max(0.0, earned / possible)) if possible > 0 else 0.0)
    return Scored("ok", sum(per_juror) / len(per_juror), detail=f"{len(rows)} item judgments")
