"""The runner: many calls in flight, each answered from the cache when it can
be, retried on unparseable output when asked, and written to the database in
small batches (``store.Writer``).

A job is a list of tasks. A task is one or two calls (a pairwise verdict
needs both orders) whose outcomes become rows (answers or judgments). A task
counts as finished once its rows are committed: a run stopped by Ctrl-C or
SIGKILL and started again repeats no finished task, and answers the calls of
unfinished ones from the cache where they completed before the stop.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, Protocol

from clinieval.providers import CallFailed, Completion, ModelSpec, Provider, cause_of
from clinieval.providers.failure import LENGTH, UNPARSED
from clinieval.runs.keys import call_key

if TYPE_CHECKING:
    from clinieval.runs.attempts import Journal


@dataclass(frozen=True)
class Call:
    """One chat call of a task: messages, request settings, sample index."""

    messages: tuple[Mapping[str, str], ...]
    settings: Mapping[str, Any]
    sample: int = 0
    first_key: str = ""
    """The cache key of attempt 0, when the job computed it already (hashing
    long prompts is a real share of the runner's time at scale)."""
    settings_text: str | None = None
    """``canonical(settings)``, when the job has it (calls share settings)."""

    def key(self, model_version: str, number: int) -> str:
        if number == 0 and self.first_key:
            return self.first_key
        return call_key(model_version, self.messages, self.attempt(number), self.sample,
                        self.settings_text if number == 0 else None)

    def keyed(self, model_version: str) -> Call:
        return replace(self, first_key=self.key(model_version, 0))

    def attempt(self, number: int) -> Mapping[str, Any]:
        """Settings of parse attempt ``number``: a retry after unparseable
        output moves the seed on, or it would get the same output again."""
        if number == 0:
            return self.settings
        return {**self.settings, "seed": int(self.settings.get("seed") or 0) + number}


@dataclass(frozen=True)
class Task:
    """One unit of a run (an answer to generate, an answer or pair to judge):
    its cache key, its calls, the answer it concerns, and what the judge
    needs to store its result (``info``)."""

    key: str
    calls: tuple[Call, ...]
    answer_id: str | None
    info: Mapping[str, Any] = field(default_factory=dict)


@dataclass
class CallOutcome:
    """What became of one call of a task, over its parse attempts."""

    key: str
    settings: Mapping[str, Any]
    completion: Completion | None = None
    parse_status: str | None = None
    value: Any = None
    error: str | None = None
    cause: str | None = None
    attempts: int = 0
    parse_attempts: int = 0
    cached: bool = True
    fresh: list[tuple[str, Mapping[str, Any], Completion]] = field(default_factory=list)

    def cost(self, spec: ModelSpec) -> float:
        return sum(spec.prices.cost(c.input_tokens, c.output_tokens) for _, _, c in self.fresh)


@dataclass
class TaskResult:
    task: Task
    outcomes: list[CallOutcome]
    rows: dict[str, list[dict]]

    @property
    def status(self) -> str:
        if any(o.error for o in self.outcomes):
            return "failed"
        return "cached" if all(o.cached for o in self.outcomes) else "done"


class Job(Protocol):
    """What a run does: its tasks, how outputs parse, which rows they make."""

    spec: ModelSpec
    kind: str
    judge_kind: str | None
    settings: dict[str, Any]
    tasks: list[Task]

    def parse(self, task: Task, index: int, completion: Completion) -> tuple[str | None, Any]: ...

    def rows(self, task: Task, outcomes: list[CallOutcome], run_id: str
             ) -> dict[str, list[dict]]: ...


def attempt_keys(spec: ModelSpec, task: Task, parse_retries: int) -> list[str]:
    """Every cache key a task may use, over all its calls and parse attempts."""
    return [call.key(spec.version, n) for call in task.calls for n in range(parse_retries + 1)]


async def run_call(job: Job, provider: Provider, task: Task, index: int,
                   cache: Mapping[str, Completion], parse_retries: int,
                   journal: Journal | None = None) -> CallOutcome:
    """One call of ``task`` through the cache, the provider and the parser;
    each attempt at it goes into ``journal`` (the call log) when given."""
    call = task.calls[index]
    outcome = CallOutcome(key="", settings=call.settings)
    for number in range(parse_retries + 1):
        settings = call.attempt(number)
        outcome.key = call.key(job.spec.version, number)
        outcome.settings, outcome.parse_attempts = settings, number + 1
        text = call.settings_text if number == 0 else None
        completion = cache.get(outcome.key)
        if completion is not None and journal is not None:
            journal.hit(task.key, index, number, outcome.key, call.messages, settings, text,
                        completion)
        if completion is None:
            attempt = (journal.begin(task.key, index, number, outcome.key, call.messages,
                                     settings, text) if journal is not None else None)
            try:
                completion = await provider.generate(call.messages, settings)
            except CallFailed as err:
                if attempt is not None:
                    journal.failed(attempt, err)
                outcome.error, outcome.attempts = str(err), outcome.attempts + err.attempts
                outcome.cause = err.cause
                outcome.parse_status = "error" if job.kind == "judge" else None
                outcome.cached = False
                return outcome
            except BaseException:
                if attempt is not None:
                    journal.interrupted(attempt)
                raise
            if attempt is not None:
                journal.answered(attempt, completion)
            outcome.cached = False
            outcome.attempts += completion.attempts
            outcome.fresh.append((outcome.key, settings, completion))
        outcome.completion = completion
        outcome.parse_status, outcome.value = job.parse(task, index, completion)
        if outcome.parse_status in (None, "ok"):
            break
    return outcome


async def run_task(job: Job, provider: Provider, task: Task, cache: Mapping[str, Completion],
                   parse_retries: int, run_id: str, journal: Journal | None = None
                   ) -> TaskResult:
    if len(task.calls) == 1:  # most tasks: no gather, whose task per call costs CPU
        outcomes = [await run_call(job, provider, task, 0, cache, parse_retries, journal)]
    else:
        outcomes = list(await asyncio.gather(*[
            run_call(job, provider, task, i, cache, parse_retries, journal)
            for i in range(len(task.calls))]))
    return TaskResult(task, outcomes, job.rows(task, outcomes, run_id))


@dataclass
class Stats:
    """Live counts of a run, read by the progress display."""

    planned: int = 0
    skipped: int = 0
    done: int = 0
    cached: int = 0
    failed: int = 0
    unparsed: int = 0
    parse_retries: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float = 0.0
    started: float = field(default_factory=time.monotonic)
    failures: list[tuple[str, str]] = field(default_factory=list)
    """(cause, message) of each call that failed or came back unreadable."""

    @property
    def finished(self) -> int:
        return self.done + self.cached + self.failed

    def add(self, result: TaskResult, spec: ModelSpec) -> None:
        status = result.status
        setattr(self, status, getattr(self, status) + 1)
        for outcome in result.outcomes:
            self.unparsed += outcome.parse_status == "unparsed"
            if outcome.error or outcome.parse_status == "unparsed":
                self.failures.append(failure_of(outcome))
            self.parse_retries += max(0, outcome.parse_attempts - 1)
            for _, _, completion in outcome.fresh:
                self.input_tokens += completion.input_tokens
                self.output_tokens += completion.output_tokens
            self.cost_usd += outcome.cost(spec)


def failure_of(outcome: CallOutcome) -> tuple[str, str]:
    """(cause, message) of a call that failed or whose output was unparsed."""
    if outcome.error:
        return outcome.cause or cause_of(outcome.error), outcome.error
    completion = outcome.completion
    cut = completion is not None and completion.finish_reason == LENGTH
    raw = completion.text[:80] if completion else ""
    return (LENGTH if cut else UNPARSED), f"{LENGTH if cut else UNPARSED} output: {raw!r}"
