"""Running a job: open (or resume) its run record, skip what it finished,
answer what the cache holds, call the model for the rest, and record the
outcome of every task as it finishes."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa

from clinieval.providers import Provider, failures_by_cause, make_provider
from clinieval.runs import store
from clinieval.runs.attempts import Journal, template_of
from clinieval.runs.engine import Job, Stats, Task, attempt_keys, run_task
from clinieval.runs.keys import digest


@dataclass(frozen=True)
class RunOptions:
    """``use_cache`` False makes every call fresh (a new run); ``parse_retries``
    is how many more times an unparseable judge output is asked again;
    ``allow_failures`` accepts a run in which some calls failed after their
    retries (see :func:`failed_runs`)."""

    use_cache: bool = True
    parse_retries: int = 0
    run_id: str | None = None
    allow_failures: bool = False


def failed_runs(records: list[dict[str, Any]], options: RunOptions) -> list[str]:
    """Runs with calls that failed after their retries, unless the options
    allow failures: a command should exit non-zero when this is not empty."""
    if options.allow_failures:
        return []
    return [r["run_id"] for r in records if r["failed_after_retries"]]


def plan_run_id(job: Job, options: RunOptions) -> str:
    """The same job (same model version, settings, prompts, selection) gets
    the same run id, so starting it again resumes it; ``--no-cache`` runs are
    always new."""
    if options.run_id:
        return options.run_id
    base = digest([job.kind, job.judge_kind or "", *sorted(t.key for t in job.tasks)], 12)
    fresh = "" if options.use_cache else "-" + uuid.uuid4().hex[:6]
    return f"{job.judge_kind or job.kind}-{base}{fresh}"


@dataclass(frozen=True)
class DryRun:
    """What a run would do before anything is spent."""

    calls: int
    cached: int
    input_tokens: int
    max_output_tokens: int
    max_cost_usd: float


def estimate(engine: sa.Engine, job: Job, options: RunOptions) -> DryRun:
    """Calls a run would make and their cost at most: input tokens estimated
    at 4 characters per token, output at the ``max_tokens`` limit."""
    spec = job.spec
    calls = [c for t in job.tasks for c in t.calls]
    keys = [c.key(spec.version, 0) for c in calls]
    cached = set(store.lookup_cache(engine, keys)) if options.use_cache else set()
    todo = [c for c, k in zip(calls, keys, strict=True) if k not in cached]
    tin = sum(sum(len(m["content"]) for m in c.messages) // 4 + 1 for c in todo)
    tout = sum(int(c.settings.get("max_tokens") or 1024) for c in todo)
    return DryRun(len(todo), len(calls) - len(todo), tin, tout, spec.prices.cost(tin, tout))


async def execute(engine: sa.Engine, job: Job, options: RunOptions = RunOptions(), *,
                  provider: Provider | None = None,
                  watch: Callable[[Stats], Any] | None = None,
                  writer: Callable[..., Any] = store.Writer) -> dict[str, Any]:
    """Run ``job`` to the end (or until cancelled) and return its run record,
    with ``skipped`` (tasks finished before this start), ``failures`` (this
    start's failed and unparsed calls grouped by cause, ``CauseCount``),
    ``endpoints`` (per replica: calls, failures, settled concurrency) and
    ``failed_after_retries``. ``writer`` makes the object that commits the
    results (``store.Writer``, or a lane of ``multi.SharedWriter``)."""
    run_id = plan_run_id(job, options)
    settings = job.settings | {"use_cache": options.use_cache,
                               "parse_retries": options.parse_retries}
    finished, failed, start = store.open_run(engine, run_id, job.kind, job.judge_kind,
                                             job.spec, settings, len(job.tasks))
    todo = [t for t in job.tasks if t.key not in finished]
    stats = Stats(planned=len(job.tasks), skipped=len(job.tasks) - len(todo))
    retried = {t.key: attempt_keys(job.spec, t, options.parse_retries)
               for t in todo if t.key in failed}
    cache = (store.lookup_cache(engine, [k for t in todo for k in
                                         attempt_keys(job.spec, t, options.parse_retries)])
             if options.use_cache and todo else {})
    own = provider is None
    provider = provider or make_provider(job.spec)
    journal = Journal(run_id, start, job.spec, *template_of(job))
    writer = writer(engine, run_id, job.spec, retried, provider.concurrency, journal)
    status = "failed"
    try:
        if watch:
            watch(stats)
        await _work(job, provider, todo, cache, options, run_id, writer, stats, journal)
        status = "finished"
    except (asyncio.CancelledError, KeyboardInterrupt):
        if writer.error is None:
            status = "interrupted"
            raise
        # The writer stopped the workers: report its error, not the cancel.
        asyncio.current_task().uncancel()
    finally:
        try:
            await writer.close()
        finally:
            store.finish_run(engine, run_id, status)
            if own:
                await provider.aclose()
    record = store.run_record(engine, run_id)
    report = getattr(provider, "report", None)
    return record | {"skipped": stats.skipped, "failures": failures_by_cause(stats.failures),
                     "endpoints": report() if report else [],
                     "failed_after_retries": record["failed"] > 0}


async def _work(job: Job, provider: Provider, todo: list[Task], cache: dict,
                options: RunOptions, run_id: str, writer: store.Writer, stats: Stats,
                journal: Journal) -> None:
    """``provider.concurrency`` workers take tasks in turn; each first takes
    one of the writer's open slots, so that tasks started and not yet
    committed stay within the writer's bound."""
    pending = iter(todo)

    async def worker() -> None:
        for task in pending:
            await writer.open_slots.acquire()
            result = await run_task(job, provider, task, cache, options.parse_retries, run_id,
                                    journal)
            stats.add(result, job.spec)
            writer.put(result)

    try:
        async with asyncio.TaskGroup() as group:
            for _ in range(min(provider.concurrency, len(todo))):
                group.create_task(worker())
    except BaseExceptionGroup as err:
        # The first failure (a refused database write, say) is the one to report.
        raise err.exceptions[0] from None
