"""Several runs at once (candidate models, judges): each job's calls go to its
own endpoints under their own limits, and one writer commits the results of
all of them, a batch at a time, so the database sees one writer whatever
the number of runs.

Jobs whose model files name the same endpoints (same API, model name and
URLs) share one provider, so the endpoint's limit holds over all of them.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import replace
from typing import Any

import sqlalchemy as sa

from clinieval.providers import ModelSpec, Provider, make_provider
from clinieval.runs import store
from clinieval.runs.attempts import Journal
from clinieval.runs.engine import Job, Stats, TaskResult
from clinieval.runs.runner import RunOptions, execute


class Lane:
    """One run's side of the shared writer; what ``execute`` expects of a writer."""

    def __init__(self, shared: SharedWriter, run_id: str, spec: ModelSpec,
                 retried: dict[str, list[str]], concurrency: int, journal: Journal) -> None:
        self.shared, self.run_id, self.spec, self.retried = shared, run_id, spec, retried
        self.journal = journal
        journal.wake = shared.wake.set
        self.open_slots = asyncio.Semaphore(concurrency + store.UNFLUSHED)
        self.error: BaseException | None = None
        self.pending: list[TaskResult] = []
        self.committing = 0
        self.closing = False
        self.drained = asyncio.Event()
        self._owner = asyncio.current_task()

    def put(self, result: TaskResult) -> None:
        self.pending.append(result)
        self.shared.wake.set()

    async def close(self) -> None:
        """Wait until everything this run queued is committed; re-raise a failed commit."""
        self.closing = True
        self.shared.wake.set()
        if self.pending or self.committing or self.journal.dirty:
            self.drained.clear()
            await self.drained.wait()
        if self.error is not None:
            raise self.error

    def fail(self, err: BaseException) -> None:
        """A commit failed: stop this run (its workers may wait for slots only
        a commit frees); other runs go on."""
        self.error = err
        self.pending.clear()
        self.drained.set()
        if self._owner is not None and not self.closing:
            self._owner.cancel()


class SharedWriter:
    """One writer task for several runs; call it as a writer factory."""

    def __init__(self, engine: sa.Engine, batch: int = store.BATCH) -> None:
        self.engine, self.batch = engine, batch
        self.lanes: list[Lane] = []
        self.wake = asyncio.Event()
        self._stopping = False
        self._timer: asyncio.TimerHandle | None = None
        self._task = asyncio.create_task(self._loop(), name="clinieval-shared-writer")

    def __call__(self, engine: sa.Engine, run_id: str, spec: ModelSpec,
                 retried: dict[str, list[str]], concurrency: int, journal: Journal) -> Lane:
        lane = Lane(self, run_id, spec, retried, concurrency, journal)
        self.lanes.append(lane)
        return lane

    async def _loop(self) -> None:
        while not (self._stopping and not any(lane.pending or lane.journal.dirty
                                              for lane in self.lanes)):
            await self.wake.wait()
            if not self._urgent():
                # A commit costs about the same however small: let a batch gather.
                await asyncio.sleep(store.GATHER_S)
            self.wake.clear()
            for lane in list(self.lanes):
                if lane.journal.dirty and not lane.pending and lane.error is None:
                    await self._commit(lane)  # calls out, none finished: log them
                while lane.pending:
                    await self._commit(lane)
                if lane.journal.dirty and lane.error is None:
                    self._rewake_later()  # calls still out: log them open next time
                elif lane.closing:
                    lane.drained.set()

    def _rewake_later(self) -> None:
        """Wake one gathering interval on (at once would spin while a lane is urgent)."""
        if self._timer is None:
            self._timer = asyncio.get_running_loop().call_later(store.GATHER_S, self._rewake)

    def _rewake(self) -> None:
        self._timer = None
        self.wake.set()

    def _urgent(self) -> bool:
        return self._stopping or any(
            lane.closing or lane.open_slots.locked() or len(lane.pending) >= self.batch
            for lane in self.lanes)

    async def _commit(self, lane: Lane) -> None:
        results = lane.pending[:self.batch]
        del lane.pending[:self.batch]
        lane.committing = len(results)
        log = lane.journal.drain()
        try:
            if results or not log.empty:
                await asyncio.to_thread(store.write_results, self.engine, lane.run_id,
                                        lane.spec, results, lane.retried, log)
        except Exception as err:
            lane.fail(err)
            return
        finally:
            lane.committing = 0
        for _ in results:
            lane.open_slots.release()

    async def aclose(self) -> None:
        self._stopping = True
        self.wake.set()
        await self._task


def endpoint_key(spec: ModelSpec) -> tuple:
    """Model files with equal keys reach the same servers the same way."""
    return (spec.provider, spec.name, spec.base_urls, spec.api_key_env, spec.concurrency,
            spec.max_concurrency, spec.max_in_flight, spec.timeout_s, spec.max_attempts)


async def execute_many(engine: sa.Engine, jobs: list[Job], options: RunOptions | None = None,
                       *, watch: Callable[[Job, Stats], Any] | None = None
                       ) -> list[dict[str, Any]]:
    """Run ``jobs`` concurrently to the end; their run records, in order.
    ``watch(job, stats)`` is called once per job with its live counters."""
    options = options or RunOptions()
    if len(jobs) > 1 and options.run_id is not None:
        options = replace(options, run_id=None)  # one given id cannot name several runs
    providers: dict[tuple, Provider] = {}
    for job in jobs:
        key = endpoint_key(job.spec)
        if key not in providers:
            providers[key] = make_provider(job.spec)
    writer = SharedWriter(engine)
    try:
        return list(await asyncio.gather(*[
            execute(engine, job, options, provider=providers[endpoint_key(job.spec)],
                    watch=(lambda stats, job=job: watch(job, stats)) if watch else None,
                    writer=writer)
            for job in jobs]))
    finally:
        await writer.aclose()
        for provider in providers.values():
            await provider.aclose()

