"""``clinieval run BENCHMARK`` and ``clinieval benchmarks``: benchmarks as
data files, run on several models at once, scored and stored for the audit."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from clinieval.cli.common import DatabaseUrl, console, handle_errors, open_engine, out
from clinieval.cli.runs import (
    AllowFailures,
    DryRunOpt,
    ModelFiles,
    NoCache,
    SkipPreflight,
    _exit_on_failures,
    _run_all,
)

Folder = Annotated[Path | None, typer.Option("--folder", help="The user's benchmark folder"
                                             " (default: $CLINIEVAL_BENCHMARKS, else"
                                             " ./benchmarks).")]
Prompts = Annotated[Path | None, typer.Option("--prompts", help="Folder of templates that"
                                              " override the bundled prompts (default: a"
                                              " prompts/ folder beside the model files).")]


def register(app: typer.Typer) -> None:
    app.command("run")(run_benchmark)
    app.command("benchmarks")(list_benchmarks)


@handle_errors
def run_benchmark(
    benchmark: Annotated[str, typer.Argument(help="Benchmark file (TOML or YAML), or the id of a"
                                             " bundled or user benchmark.")],
    model: ModelFiles,
    database_url: DatabaseUrl = None,
    samples: Annotated[int, typer.Option(min=1, help="Answers per case (repeats/epochs;"
                                         " Worst@k over them).")] = 1,
    judge: Annotated[list[Path] | None, typer.Option("--judge", help="Judge model file for"
                                                     " judge scorers without their own.")] = None,
    limit: Annotated[int | None, typer.Option(min=1, help="At most this many cases.")] = None,
    prompts: Prompts = None,
    folder: Folder = None,
    dry_run: DryRunOpt = False,
    no_cache: NoCache = False,
    skip_preflight: SkipPreflight = False,
    allow_failures: AllowFailures = False,
) -> None:
    """Run a benchmark on each model at once: generate, score, store the
    per-case results the audit's Benchmarks section reads.

    Everything is checked before any call. Example: `clinieval run
    medqa-sample --model models/a.toml --model models/b.toml --samples 3`
    """
    from clinieval.runs.prompt_files import folder_beside, use_prompt_folder
    from clinieval.storage import db
    from clinieval.tasks.catalog import find
    from clinieval.tasks.run import prepare, score_runs, store_cases

    bench = find(benchmark, folder)
    with use_prompt_folder(prompts or folder_beside(model)):
        prepared = prepare(bench, model, samples=samples, judge_files=judge, limit=limit)
        engine = open_engine(database_url)
        db.upgrade(engine)
        options = {"no_cache": no_cache, "preflight": not skip_preflight,
                   "allow_failures": allow_failures}
        if dry_run:
            _run_all(engine, prepared.jobs, dry_run=True, parse_retries=0, **options)
            return
        store_cases(engine, prepared)
        records = _run_all(engine, prepared.jobs, dry_run=False, parse_retries=0,
                           exit_on_failure=False, **options)
        judged: list[dict] = []

        def run_judges(jobs):
            found = _run_all(engine, jobs, dry_run=False, parse_retries=1,
                             exit_on_failure=False, **options)
            judged.extend(found)
            return found

        summaries = score_runs(engine, prepared, records, run_judges)
    _print_summaries(bench.id, summaries)
    _exit_on_failures(records + judged, allow_failures)


def _print_summaries(bench_id: str, summaries: list[dict]) -> None:
    """One line per model and scorer: samples by outcome (unparsed, errors and
    failed calls are counted, never scored), the mean and Worst@k."""
    out.print(f"[bold]{bench_id}[/bold]", highlight=False)
    for s in summaries:
        mean = ("no sample scored" if s["mean"] is None
                else f"mean {s['mean']:.3f} (n = {s['ok']:,} samples)")
        worst = "" if s["worst_at_k"] is None else (f"; Worst@{s['k']} {s['worst_at_k']:.3f}"
                                                   f" (n = {s['worst_n']:,} cases)")
        out.print(f"{s['model']}, {s['scorer']}: {s['ok']:,} scored, {s['unparsed']:,} unparsed,"
                  f" {s['error']:,} errors, {s['failed']:,} failed calls; {mean}{worst}",
                  highlight=False, soft_wrap=True)
    out.print("audit them: clinieval audit DATABASE (the Benchmarks section reads them as"
              " stored)", highlight=False)


@handle_errors
def list_benchmarks(folder: Folder = None) -> None:
    """List the benchmarks defined: the bundled examples and the user's folder.

    Example: `clinieval benchmarks --folder my-benchmarks`
    """
    from clinieval.tasks.cases import case_format
    from clinieval.tasks.catalog import entries, user_folder

    found = entries(folder)
    out.print(f"benchmarks: bundled, and {user_folder(folder)}", highlight=False)
    for e in found:
        if e.bench is None:
            out.print(f"unreadable ({e.origin}) {e.path.name}: {e.problem}", highlight=False,
                      soft_wrap=True)
            continue
        d = e.bench.definition
        out.print(f"{d.id} ({e.origin}): {d.category} / {d.subcategory}; cases {d.cases.path}"
                  f" ({case_format(e.bench)}); answer {d.answer.format}; scorers"
                  f" {', '.join(s.label for s in d.scorers)}; file {e.path}", highlight=False,
                  soft_wrap=True)
    if not found:
        console.print("no benchmark files found")
