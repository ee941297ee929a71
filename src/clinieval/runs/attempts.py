"""The call log: every attempt at a call, recorded as it happens.

An attempt is one parse attempt of one call of a task in one start of a run:
answered from the cache, or sent to the provider (whose HTTP retries it
counts as ``tries``). The journal hands the writer, at each of its commits,
the attempts that ended since the last one, those still out since the one
before (``open``: a call that ends within one commit interval, as most do
at scale, is written once, not opened and then closed), and the final state
of those it wrote open before. So a run stopped by SIGKILL leaves a row for
every call that was answered by, or out since, its second-to-last commit,
whether or not the task it belonged to was committed: the calls it repeats
when started again are recorded twice, and their cost counts as spent. Only
attempts begun within the last two commit intervals (each ``store.GATHER_S``
plus its commit) may leave no trace.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from clinieval.providers import CallFailed, Completion, ModelSpec
from clinieval.runs.keys import canonical
from clinieval.runs.prompt_files import PromptTemplate

COLUMNS = ("run_id", "start", "seq", "task_key", "call_index", "parse_attempt", "call_key",
           "prompt_hash", "template", "template_hash", "settings_hash", "status", "started_at",
           "ended_at", "endpoint", "tries", "error", "cause", "finish_reason", "input_tokens",
           "output_tokens", "latency_s", "cost_usd")
FINAL = ("status", "ended_at", "endpoint", "tries", "error", "cause", "finish_reason",
         "input_tokens", "output_tokens", "latency_s", "cost_usd")
"""The columns an attempt written ``open`` gets when it ends."""


def prompt_hash(messages: Sequence[Mapping[str, str]]) -> tuple[str, str]:
    """(SHA-256 hex, canonical JSON) of a call's messages."""
    text = canonical(list(messages))
    return hashlib.sha256(text.encode()).hexdigest(), text


def template_of(job: Any) -> tuple[str, str | None]:
    """The template a job rendered its prompts from: the prompt file's own
    name and the SHA-256 of its text (:func:`~clinieval.runs.prompt_files.template_identity`;
    a user's override in ``--prompts`` has its own hash), or the job's kind and
    None when the job keeps no prompt file."""
    prompt = getattr(job, "prompt", None)
    template = prompt.get("template") if isinstance(prompt, Mapping) else None
    if isinstance(template, PromptTemplate):
        return template.name, template.sha256
    return job.judge_kind or job.kind, None


@dataclass(slots=True, eq=False)
class Attempt:
    task_key: str
    call_index: int
    parse_attempt: int
    call_key: str
    messages: Sequence[Mapping[str, str]]
    settings: Mapping[str, Any]
    settings_text: str | None
    started_at: datetime
    seq: int
    status: str = "open"
    ended_at: datetime | None = None
    endpoint: str | None = None
    tries: int = 0
    error: str | None = None
    cause: str | None = None
    finish_reason: str | None = None
    input_tokens: int = 0
    output_tokens: int = 0
    latency_s: float | None = None
    cost_usd: float | None = None
    written: bool = False
    """Whether its ``open`` row is in (or on its way to) the database."""
    seen: bool = False
    """Whether a drain found it out already (the next one writes it open)."""


@dataclass(frozen=True)
class JournalRows:
    """What one commit writes of the log."""

    prompts: list[dict]
    settings: list[dict]
    inserts: list[dict]
    updates: list[dict]

    @property
    def empty(self) -> bool:
        return not (self.inserts or self.updates)

    @property
    def spent_usd(self) -> float:
        """What the attempts that ended in this commit spent."""
        return sum(r["cost_usd"] or 0.0 for r in (*self.inserts, *self.updates)
                   if r["status"] == "ok")


class Journal:
    """The attempts of one start of one run, waiting for the writer."""

    def __init__(self, run_id: str, start: int, spec: ModelSpec, template: str | None,
                 template_hash: str | None) -> None:
        self.run_id, self.start, self.spec = run_id, start, spec
        self.template, self.template_hash = template, template_hash
        self.wake: Callable[[], None] = lambda: None
        """Set by the writer: an attempt began or ended that it should write."""
        self._new: list[Attempt] = []
        self._ended: list[Attempt] = []
        self._seq = 0
        # By id: the tasks keep their messages and settings alive for the run.
        self._prompts: dict[int, tuple[Any, str, str]] = {}
        self._settings: dict[int, tuple[Any, str]] = {}
        self._texts: dict[str | None, str] = {}  # settings text -> hash (short texts)
        self._written_prompts: set[str] = set()
        self._written_settings: set[str] = set()

    @property
    def dirty(self) -> bool:
        return bool(self._new or self._ended)

    def begin(self, task_key: str, index: int, number: int, key: str,
              messages: Sequence[Mapping[str, str]], settings: Mapping[str, Any],
              settings_text: str | None = None) -> Attempt:
        """A request is about to go out."""
        self._seq += 1
        attempt = Attempt(task_key, index, number, key, messages, settings, settings_text,
                          datetime.now(UTC), self._seq)
        self._new.append(attempt)
        self.wake()
        return attempt

    def hit(self, task_key: str, index: int, number: int, key: str,
            messages: Sequence[Mapping[str, str]], settings: Mapping[str, Any],
            settings_text: str | None, completion: Completion) -> None:
        """The cache answered: nothing was sent, nothing spent."""
        attempt = self.begin(task_key, index, number, key, messages, settings, settings_text)
        attempt.status, attempt.ended_at, attempt.cost_usd = "cached", attempt.started_at, 0.0
        attempt.input_tokens, attempt.output_tokens = (completion.input_tokens,
                                                       completion.output_tokens)
        attempt.finish_reason = completion.finish_reason or None

    def answered(self, attempt: Attempt, completion: Completion) -> None:
        attempt.status, attempt.ended_at = "ok", datetime.now(UTC)
        attempt.tries, attempt.endpoint = completion.attempts, completion.endpoint or None
        attempt.input_tokens, attempt.output_tokens = (completion.input_tokens,
                                                       completion.output_tokens)
        attempt.latency_s, attempt.finish_reason = (completion.latency_s,
                                                    completion.finish_reason or None)
        attempt.cost_usd = self.spec.prices.cost(completion.input_tokens,
                                                 completion.output_tokens)
        self._ended_now(attempt)

    def failed(self, attempt: Attempt, err: CallFailed) -> None:
        attempt.status, attempt.ended_at, attempt.cost_usd = "failed", datetime.now(UTC), 0.0
        attempt.tries, attempt.error, attempt.cause = err.attempts, str(err), err.cause
        attempt.endpoint = getattr(err, "endpoint", None)
        self._ended_now(attempt)

    def interrupted(self, attempt: Attempt) -> None:
        """The run was stopped (Ctrl-C, cancel) while the request was out."""
        attempt.status, attempt.ended_at = "interrupted", datetime.now(UTC)
        self._ended_now(attempt)

    def _ended_now(self, attempt: Attempt) -> None:
        if attempt.written:
            self._ended.append(attempt)
            self.wake()

    def drain(self) -> JournalRows:
        """The rows of everything begun or ended since the last drain. Runs on
        the event loop, so the rows are a snapshot the commit thread can use."""
        new, ended = self._new, self._ended
        self._new, self._ended = [], []
        prompts, settings, inserts = [], [], []
        for a in new:
            if a.status == "open" and not a.seen:
                a.seen = True
                self._new.append(a)  # written open by the next drain if still out
                continue
            digest_, text = self._prompt(a.messages)
            if digest_ not in self._written_prompts:
                self._written_prompts.add(digest_)
                prompts.append({"prompt_hash": digest_, "messages": text})
            settings_text = a.settings_text or self._settings_text(a.settings)
            settings_hash = self._texts.get(settings_text)
            if settings_hash is None:
                settings_hash = self._texts[settings_text] = hashlib.sha256(
                    settings_text.encode()).hexdigest()
            if settings_hash not in self._written_settings:
                self._written_settings.add(settings_hash)
                settings.append({"settings_hash": settings_hash, "settings": settings_text})
            inserts.append({
                "run_id": self.run_id, "start": self.start, "seq": a.seq,
                "task_key": a.task_key, "call_index": a.call_index,
                "parse_attempt": a.parse_attempt, "call_key": a.call_key,
                "prompt_hash": digest_, "template": self.template,
                "template_hash": self.template_hash,
                "settings_hash": settings_hash,
                **self._final(a)})
            a.written = a.status == "open"
        updates = []
        for a in ended:
            row = {"run_id": self.run_id, "start": self.start, "seq": a.seq, **self._final(a)}
            del row["started_at"]
            updates.append(row)
        return JournalRows(prompts, settings, inserts, updates)

    @staticmethod
    def _final(a: Attempt) -> dict:
        return {"status": a.status, "started_at": a.started_at, "ended_at": a.ended_at,
                "endpoint": a.endpoint, "tries": a.tries, "error": a.error, "cause": a.cause,
                "finish_reason": a.finish_reason, "input_tokens": a.input_tokens,
                "output_tokens": a.output_tokens, "latency_s": a.latency_s,
                "cost_usd": a.cost_usd}

    def _prompt(self, messages: Sequence[Mapping[str, str]]) -> tuple[str, str]:
        known = self._prompts.get(id(messages))
        if known is None:
            known = self._prompts[id(messages)] = (messages, *prompt_hash(messages))
        return known[1], known[2]

    def _settings_text(self, settings: Mapping[str, Any]) -> str:
        known = self._settings.get(id(settings))
        if known is None:
            known = self._settings[id(settings)] = (settings, canonical(dict(settings)))
        return known[1]
