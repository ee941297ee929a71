"""``clinieval run BENCHMARK``: everything checked before any call, then
generate (every model at once, through the runner), score, store.

Checked first, each an error naming the file and the key (or the case):
the benchmark file, its cases, every case's reference for a scorer that
needs one and its choices for a multiple-choice answer, the template
against every case's fields, every Python hook, every model and judge file.
During the run, a case a scorer cannot handle is that case's ``error``
(with the message), not the run's end.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import sqlalchemy as sa

from clinieval.errors import InputError
from clinieval.io.foreign.builder import UNSPECIFIED
from clinieval.io.foreign.choice import Item
from clinieval.providers import ModelSpec, load_model_file
from clinieval.runs.keys import canonical
from clinieval.storage.rows import RowStore
from clinieval.tasks import judged
from clinieval.tasks.cases import load_items
from clinieval.tasks.job import BenchmarkJob, Renderer, benchmark_job, case_id
from clinieval.tasks.outputs import result_row, run_outputs
from clinieval.tasks.scorers import Scored, ScoreFn, reference_scorer
from clinieval.tasks.spec import JUDGE_SCORERS, METRIC_OF, Benchmark

DEFAULT_NORMALISATION = {"jury": {"kind": "range", "low": 1, "high": 5},
                         "rubric": {"kind": "range", "low": -2, "high": 2}}
"""A judge-scored benchmark's 0..1 mapping when its file gives none."""


@dataclass
class Prepared:
    bench: Benchmark
    items: list[Item]
    renderer: Renderer
    scorers: list[ScoreFn | None]
    jobs: list[BenchmarkJob]
    judges: dict[int, list[ModelSpec]] = field(default_factory=dict)
    """Judge model specs of each judge scorer, by scorer index."""


def prepare(bench: Benchmark, model_files: list[Path], *, samples: int = 1,
            judge_files: list[Path] | None = None, limit: int | None = None) -> Prepared:
    """Everything a run needs, checked; nothing is called."""
    if not model_files:
        raise InputError(str(bench.path), "no model to run", expected="--model FILE")
    items = load_items(bench)
    items = items[:limit] if limit else items
    d = bench.definition
    for index in range(len(d.scorers)):
        _needs(bench, items, index)
    renderer = Renderer(bench)
    messages = {item.instance_id: renderer.messages(item) for item in items}
    scorers = [None if s.kind in JUDGE_SCORERS else reference_scorer(bench, i)
               for i, s in enumerate(d.scorers)]
    judges = {i: [load_model_file(bench.resolve(s.judge))] if s.judge else
              [load_model_file(p) for p in judge_files or []]
              for i, s in enumerate(d.scorers) if s.kind in JUDGE_SCORERS}
    for i, specs in judges.items():
        if not specs:
            raise InputError(str(bench.path), f"the {d.scorers[i].kind} scorer needs a judge",
                             field=f"scorers[{i}].judge", expected="a judge model file here"
                             " or --judge FILE")
    specs = [load_model_file(path) for path in model_files]
    ids = [s.id for s in specs]
    repeated = next((m for i, m in enumerate(ids) if m in ids[:i]), None)
    if repeated:
        raise InputError(str(model_files[ids.index(repeated, ids.index(repeated) + 1)]),
                         "two model files with the same id", field="id", got=repeated)
    jobs = [benchmark_job(spec, bench, items, renderer, messages, samples) for spec in specs]
    return Prepared(bench, items, renderer, scorers, jobs, judges)


def _needs(bench: Benchmark, items: list[Item], index: int) -> None:
    """Every case has what scorer ``index`` needs."""
    d = bench.definition
    s = d.scorers[index]
    ref_field = {"medqa": "answer_idx", "medmcqa": "cop", "pubmedqa": "final_decision"}
    for item in items:
        if s.needs_reference and not (item.reference or "").strip():
            from clinieval.tasks.cases import case_format

            raise InputError(item.source, f"the case has no reference answer, which the"
                             f" {s.label} scorer needs", row=item.row,
                             field=ref_field.get(case_format(bench), d.cases.reference))
        if d.answer.format == "choice" and not item.choices:
            raise InputError(item.source, "a multiple-choice benchmark's case has no choices",
                             row=item.row, field=d.cases.choices)
        if s.kind == "rule" and not item.rules:
            raise InputError(item.source, "the rule scorer needs rubric items on every case"
                             " (HealthBench's rubrics)", row=item.row, field="rubrics")


def store_cases(engine: sa.Engine, prepared: Prepared) -> None:
    """The items as cases (id ``BENCHMARK/INSTANCE``), so answers can refer to
    them. The case's prompt is the question as the cases file has it (the
    rendered prompt only when there is no ``question``), so a changed template
    runs again on the same stored cases."""
    d = prepared.bench.definition
    rows = [{"case_id": case_id(prepared.bench, item),
             "prompt": item.fields["question"] if isinstance(item.fields.get("question"), str)
             else prepared.jobs[0].messages[item.instance_id][-1]["content"],
             "specialty": item.specialty or UNSPECIFIED, "category": d.category,
             "subcategory": d.subcategory, "reference_answer": item.reference}
            for item in prepared.items]
    RowStore(engine).add_entities("cases", rows)


def normalisation(bench: Benchmark) -> dict[str, Any]:
    d = bench.definition
    if "normalisation" in bench.keys:
        return d.normalisation.model_dump()
    return DEFAULT_NORMALISATION.get(bench.primary.kind, d.normalisation.model_dump())


Runner = Callable[[list], list[dict]]
"""Runs jobs (the CLI's pre-flight, live view and failure table) and returns their records."""


def score_runs(engine: sa.Engine, prepared: Prepared, records: list[dict],
               run_jobs: Runner) -> list[dict[str, Any]]:
    """Score each model's run and store its results; the per-scorer summaries."""
    summaries = []
    for job, record in zip(prepared.jobs, records, strict=True):
        rows = _reference_rows(engine, prepared, job, record["run_id"])
        for index, specs in prepared.judges.items():
            rows += judged.judge_rows(engine, prepared, index, specs, record["run_id"], job,
                                      run_jobs)
        bench = prepared.bench
        from clinieval.tasks.results import write_run

        write_run(engine, {
            "run_id": record["run_id"], "benchmark_id": bench.id, "model_id": job.spec.id,
            "label": bench.definition.label or None, "category": bench.definition.category,
            "subcategory": bench.definition.subcategory,
            "metric": METRIC_OF[bench.primary.kind], "normalisation": canonical(
                normalisation(bench)), "primary_scorer": bench.primary.label,
            "samples": job.samples, "file_sha256": bench.sha256,
            "template_name": job.template.name, "template_sha256": job.template.sha256}, rows)
        summaries += summarise(job.spec.id, bench, rows)
    return summaries


def _reference_rows(engine: sa.Engine, prepared: Prepared, job: BenchmarkJob,
                    run_id: str) -> list[dict[str, Any]]:
    outputs = run_outputs(engine, run_id)
    by_id = {item.instance_id: item for item in prepared.items}
    rows = []
    for task in job.tasks:
        item = by_id[task.info["instance_id"]]
        out = outputs.get(task.key)
        for scorer, fn in zip(prepared.bench.definition.scorers, prepared.scorers, strict=True):
            if fn is None:
                continue
            if out is None or out["status"] == "failed" or out["text"] is None:
                result = Scored("failed", detail=(out or {}).get("error") or "no answer")
            else:
                try:
                    result = fn(out["text"], item)
                except Exception as err:  # a bad instance is its own error
                    result = Scored("error", detail=f"{type(err).__name__}: {err}"[:500])
            rows.append(result_row(run_id, scorer.label, item, task, out, result, prepared))
    return rows


def summarise(model_id: str, bench: Benchmark, rows: list[dict]) -> list[dict[str, Any]]:
    """Per scorer: samples by status, the mean over scored samples, and
    Worst@k (the mean over cases of each case's lowest score over its k
    samples; cases with an unscored sample left out)."""
    out = []
    for scorer in bench.definition.scorers:
        mine = [r for r in rows if r["scorer"] == scorer.label]
        counts = {s: sum(r["status"] == s for r in mine) for s in ("ok", "unparsed", "error",
                                                                     "failed")}
        scores = [r["score"] for r in mine if r["status"] == "ok"]
        by_case: dict[str, list] = {}
        for r in mine:
            by_case.setdefault(r["instance_id"], []).append(r["score"])
        worst = [min(v) for v in by_case.values() if None not in v]
        k = max((len(v) for v in by_case.values()), default=0)
        out.append({"model": model_id, "benchmark": bench.id, "scorer": scorer.label,
                    **counts, "mean": sum(scores) / len(scores) if scores else None,
                    "k": k, "worst_at_k": sum(worst) / len(worst) if worst and k > 1 else None,
                    "worst_n": len(worst)})
    return out


def describe(prepared: Prepared) -> str:
    d = prepared.bench.definition
    return json.dumps({"benchmark": d.id, "cases": len(prepared.items),
                       "models": [j.spec.id for j in prepared.jobs],
                       "scorers": [s.label for s in d.scorers]})
