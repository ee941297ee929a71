"""``clinieval generate`` and ``clinieval judge``: run candidate models and LLM
judges through their model files, with a live view, resumable after a stop."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table

from clinieval.cli.common import DatabaseUrl, console, handle_errors, open_engine, out

ModelFiles = Annotated[list[Path], typer.Option("--model", help="Model file (TOML); repeat for"
                                                " several models.")]
Limit = Annotated[int | None, typer.Option(help="At most this many cases (generate) or"
                                           " answers (judge), in id order.")]
DryRunOpt = Annotated[bool, typer.Option("--dry-run", help="Print calls and the estimated cost;"
                                         " call nothing.")]
NoCache = Annotated[bool, typer.Option("--no-cache", help="Call again even when the cache has"
                                       " the answer (a new run).")]
SkipPreflight = Annotated[bool, typer.Option("--skip-preflight", help="Start without first"
                                             " sending one cheap call to every endpoint.")]
AllowFailures = Annotated[bool, typer.Option("--allow-failures", help="Exit 0 even when some"
                                             " calls failed after their retries.")]
Prompts = Annotated[Path | None, typer.Option("--prompts", help="Folder of templates that"
                                              " override the bundled prompts (default: a"
                                              " prompts/ folder beside the model files).")]


def register(app: typer.Typer) -> None:
    app.command()(generate)
    app.command()(judge)


@handle_errors
def generate(
    model: ModelFiles,
    database_url: DatabaseUrl = None,
    samples: Annotated[int, typer.Option(min=1, help="Samples per case (for Worst@k).")] = 1,
    variant: Annotated[list[str] | None, typer.Option(help="System-prompt variant (default,"
                                                      " cautious, none); repeatable.")] = None,
    temperature: Annotated[list[float] | None, typer.Option(
        help="Sampling temperature; repeatable (one set of answers each).")] = None,
    cases: Annotated[str | None, typer.Option(help="Comma-separated case ids.")] = None,
    limit: Limit = None,
    dry_run: DryRunOpt = False,
    no_cache: NoCache = False,
    skip_preflight: SkipPreflight = False,
    allow_failures: AllowFailures = False,
    prompts: Prompts = None,
) -> None:
    """Answer the stored cases with each model: n samples per case, per variant
    and temperature, stored as answers with their run.

    Example: `clinieval generate --model models/smollm2.toml --samples 3 --temperature 0.2
    --temperature 1.0 --limit 10 --dry-run`
    """
    from clinieval.runs.plan import generate_jobs
    from clinieval.runs.prompt_files import folder_beside, use_prompt_folder
    from clinieval.storage import db

    engine = open_engine(database_url)
    db.upgrade(engine)
    with use_prompt_folder(prompts or folder_beside(model)):
        jobs = generate_jobs(engine, model, samples=samples,
                             variants=tuple(variant or ["default"]),
                             temperatures=tuple(temperature or [None]),
                             case_ids=cases.split(",") if cases else None, limit=limit)
    _run_all(engine, jobs, dry_run=dry_run, no_cache=no_cache, parse_retries=0,
             preflight=not skip_preflight, allow_failures=allow_failures)


@handle_errors
def judge(
    kind: Annotated[str, typer.Argument(help="rubric, jury, pairwise or rule.")],
    judge_file: Annotated[list[Path], typer.Option("--judge", help="Judge model file (TOML);"
                                                   " repeat for a jury of several models.")],
    database_url: DatabaseUrl = None,
    jurors: Annotated[int, typer.Option(min=1, help="Jurors per judge file (same model,"
                                        " different seeds).")] = 1,
    repeats: Annotated[int, typer.Option(min=1, help="Repeats of each juror (run-to-run"
                                         " variance).")] = 1,
    answers_run: Annotated[str | None, typer.Option(help="Only answers made by this generate"
                                                    " run.")] = None,
    model_id: Annotated[list[str] | None, typer.Option(help="Only answers of this model;"
                                                       " repeatable.")] = None,
    criteria: Annotated[str | None, typer.Option(help="Rubric judge: comma-separated criterion"
                                                 " ids (default: all stored).")] = None,
    rules: Annotated[Path | None, typer.Option(help="Rule judge: JSON list of {case_id, rule_id,"
                                               " text, points, tags?}, or a HealthBench"
                                               " import's manifest.json (its case_rules).")
                     ] = None,
    parse_retries: Annotated[int, typer.Option(min=0, help="Ask again this many times when the"
                                               " output does not parse.")] = 0,
    inconsistent: Annotated[str, typer.Option(help="Pairwise: a pair whose two orders disagree"
                                              " counts as tie or drop.")] = "tie",
    limit: Limit = None,
    dry_run: DryRunOpt = False,
    no_cache: NoCache = False,
    skip_preflight: SkipPreflight = False,
    allow_failures: AllowFailures = False,
    prompts: Prompts = None,
) -> None:
    """Judge stored answers with LLM judges; outputs that do not parse are kept
    raw as `unparsed` and counted, never given a default score.

    Example: `clinieval judge jury --judge models/judge.toml --jurors 3 --limit 20`
    """
    from clinieval.runs.plan import judge_jobs, pairwise_summary
    from clinieval.runs.prompt_files import folder_beside, use_prompt_folder
    from clinieval.storage import db

    if inconsistent not in ("tie", "drop"):
        raise typer.BadParameter("tie or drop", param_hint="--inconsistent")
    engine = open_engine(database_url)
    db.upgrade(engine)
    with use_prompt_folder(prompts or folder_beside(judge_file)):
        jobs = judge_jobs(engine, kind, judge_file, jurors=jurors, repeats=repeats,
                          answers_run=answers_run, model_ids=model_id,
                          criteria=criteria.split(",") if criteria else None, rules_file=rules,
                          limit=limit)
    for job in jobs:
        job.settings["inconsistent"] = inconsistent
    records = _run_all(engine, jobs, dry_run=dry_run, no_cache=no_cache,
                       parse_retries=parse_retries, preflight=not skip_preflight,
                       allow_failures=allow_failures, exit_on_failure=False)
    if kind == "pairwise":
        for record in records:
            for label, n in pairwise_summary(engine, record["run_id"], inconsistent).items():
                out.print(f"{record['run_id']}: {label}: {n:,}", highlight=False)
    _exit_on_failures(records, allow_failures)


def _run_all(engine, jobs, *, dry_run: bool, no_cache: bool, parse_retries: int,
             preflight: bool = True, allow_failures: bool = False,
             exit_on_failure: bool = True) -> list[dict]:
    from clinieval.runs import RunOptions, estimate

    options = RunOptions(use_cache=not no_cache, parse_retries=parse_retries,
                         allow_failures=allow_failures)
    if dry_run:
        _print_estimates([(job, estimate(engine, job, options)) for job in jobs])
        return []
    if preflight:
        _preflight([job for job in jobs if _has_calls(engine, job, options)])
    records = _run_jobs(engine, jobs, options)
    _print_records(records)
    if exit_on_failure:
        _exit_on_failures(records, allow_failures)
    return records


def _has_calls(engine, job, options) -> bool:
    """Whether the job still has calls to make (a resumed run that has all its
    answers needs no endpoint, and sends nothing)."""
    from clinieval.runs import estimate

    planned = estimate(engine, job, options)
    return planned.calls > planned.cached


def _preflight(jobs) -> None:
    """One cheap call per endpoint before any work: an endpoint that does not
    answer stops the command with its address and the error."""
    from clinieval.providers import preflight

    if not jobs:
        return
    problems = preflight([job.spec for job in jobs])
    for problem in problems:
        console.print(f"[red]error:[/red] endpoint did not answer: {problem}", highlight=False)
    if problems:
        console.print("Start it, fix the model file, or pass --skip-preflight.")
        raise typer.Exit(1)


def _run_jobs(engine, jobs, options) -> list[dict]:
    """Every job at once (each endpoint with its own limits, one writer),
    under one live view."""
    from rich.console import Group

    from clinieval.runs import execute_many
    from clinieval.runs.progress import RunView, live

    views = {id(job): RunView(f"{job.judge_kind or job.kind} with {job.spec.id}")
             for job in jobs}
    try:
        with live(Group(*views.values()), console):
            return asyncio.run(execute_many(
                engine, jobs, options, watch=lambda job, stats: views[id(job)].watch(stats)))
    except KeyboardInterrupt:
        console.print("[yellow]interrupted[/yellow]: finished tasks are stored;"
                      " run the same command again to resume.")
        raise typer.Exit(130) from None


def _exit_on_failures(records: list[dict], allow_failures: bool) -> None:
    """Failures by cause and per endpoint; exit 1 when a call failed after its
    retries, unless --allow-failures."""
    from clinieval.runs import RunOptions, failed_runs
    from clinieval.runs.progress import endpoints_table, failures_table

    for r in records:
        if r.get("failures"):
            out.print(failures_table(f"{r['run_id']}: failures by cause", r["failures"]))
        if r.get("endpoints"):
            out.print(endpoints_table(f"{r['run_id']}: endpoints", r["endpoints"]))
    failed = failed_runs(records, RunOptions(allow_failures=allow_failures))
    if failed:
        console.print(f"[red]error:[/red] calls failed after their retries in {', '.join(failed)};"
                      " see the table above (--allow-failures accepts them).", highlight=False)
        raise typer.Exit(1)


def _print_estimates(estimates) -> None:
    table = Table(title="dry run: nothing was called")
    for column in ("model", "calls", "cached", "input tokens (est.)", "output tokens (max)",
                   "cost USD (max)"):
        table.add_column(column, justify="left" if column == "model" else "right")
    for job, e in estimates:
        table.add_row(job.spec.id, f"{e.calls:,}", f"{e.cached:,}", f"{e.input_tokens:,}",
                      f"{e.max_output_tokens:,}", f"{e.max_cost_usd:,.4f}")
    out.print(table)


def _print_records(records: list[dict]) -> None:
    for r in records:
        out.print(f"[bold]{r['run_id']}[/bold] {r['status']}: {r['planned']:,} tasks,"
                  f" {r['done']:,} called, {r['cached']:,} from cache, {r['failed']:,} failed"
                  f" ({r['skipped']:,} were finished before this start); {r['unparsed']:,}"
                  f" unparsed, {r['parse_retries']:,} parse retries; tokens"
                  f" {r['input_tokens']:,} in / {r['output_tokens']:,} out;"
                  f" spent ${r['cost_usd']:,.4f} (calls that reached the endpoint),"
                  f" ${r['list_price_usd']:,.4f} at list price (cache hits included)",
                  highlight=False)
