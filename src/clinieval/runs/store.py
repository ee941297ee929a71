"""Run records, the call cache and the rows a run produces, in the database.

All writes of a batch of finished tasks are one transaction: the cache rows,
which tasks the run finished, the answers or judgments they made, and the
run's counters. A batch is either wholly there after a crash or not at all.
"""

from __future__ import annotations

import asyncio
import functools
import getpass
import json
import operator
from collections.abc import Callable, Iterable, Iterator
from datetime import UTC, datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects.postgresql import insert as postgresql_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert

from clinieval.providers import Completion, ModelSpec
from clinieval.runs.attempts import FINAL, Journal, JournalRows
from clinieval.runs.engine import Stats, TaskResult
from clinieval.runs.keys import canonical
from clinieval.storage.rows import RowStore
from clinieval.storage.schema import snapshot as snapshot_tables
from clinieval.storage.schema.runs import RUN_TABLES

RUNS = RUN_TABLES["llm_runs"]
CACHE = RUN_TABLES["llm_cache"]
CALLS = RUN_TABLES["llm_run_calls"]
PROMPTS = RUN_TABLES["llm_prompts"]
SETTINGS = RUN_TABLES["llm_settings"]
ATTEMPTS = RUN_TABLES["llm_call_attempts"]
CHUNK = 500
BATCH = 128
"""Most finished tasks committed in one transaction."""
UNFLUSHED = 2 * BATCH
"""Most finished tasks waiting for (or in) a commit before workers wait."""
GATHER_S = 0.05
"""How long finished tasks may wait for others to share their commit."""
COUNTERS = ("done", "cached", "failed", "unparsed", "parse_retries", "input_tokens",
            "output_tokens")


def _now() -> datetime:
    return datetime.now(UTC)


def _chunks(items: list, size: int = CHUNK) -> Iterator[list]:
    for start in range(0, len(items), size):
        yield items[start:start + size]


def open_run(engine: sa.Engine, run_id: str, kind: str, judge_kind: str | None,
             spec: ModelSpec, settings: dict[str, Any], planned: int
             ) -> tuple[set[str], set[str], int]:
    """Create the run record, or mark a stopped run as running again.
    Returns the run's finished task keys, its failed ones (to try again) and
    the number of this start; attempts a stop left ``open`` become
    ``interrupted`` (sent, their cost not known).
    The model's row is stored first; a stored one that differs (another
    version under the same id) is an error naming the field."""
    RowStore(engine).add_entities("models", [spec.model_row()])
    with engine.begin() as conn:
        exists = conn.execute(sa.select(RUNS.c.run_id).where(RUNS.c.run_id == run_id)).first()
        if exists:
            conn.execute(RUNS.update().where(RUNS.c.run_id == run_id)
                         .values(status="running", finished_at=None))
        else:
            conn.execute(RUNS.insert().values(
                run_id=run_id, kind=kind, judge_kind=judge_kind, model_id=spec.id,
                created_by=getpass.getuser(), started_at=_now(), status="running",
                settings=canonical(settings), planned=planned))
        rows = conn.execute(sa.select(CALLS.c.task_key, CALLS.c.status)
                            .where(CALLS.c.run_id == run_id)).all()
        conn.execute(ATTEMPTS.update().where(ATTEMPTS.c.run_id == run_id,
                                             ATTEMPTS.c.status == "open")
                     .values(status="interrupted"))
        start = conn.execute(sa.select(sa.func.max(ATTEMPTS.c.start))
                             .where(ATTEMPTS.c.run_id == run_id)).scalar()
    finished = {key for key, status in rows if status != "failed"}
    return finished, {key for key, status in rows if status == "failed"}, (start or 0) + 1


def finish_run(engine: sa.Engine, run_id: str, status: str) -> None:
    with engine.begin() as conn:
        conn.execute(RUNS.update().where(RUNS.c.run_id == run_id)
                     .values(status=status, finished_at=_now()))


def run_record(engine: sa.Engine, run_id: str) -> dict[str, Any]:
    """The run's row; its ``cost_usd`` is what was spent (fresh calls only),
    ``list_price_usd`` what its answers or judgments would cost at list
    price, cache hits included."""
    with engine.connect() as conn:
        row = conn.execute(RUNS.select().where(RUNS.c.run_id == run_id)).mappings().one()
        record = dict(row)
        record["list_price_usd"] = list_price_usd(conn, run_id, record["kind"])
    record["settings"] = json.loads(record["settings"])
    return record


def list_price_usd(conn: sa.Connection, run_id: str, kind: str) -> float:
    """The stored cost of what the run made: a judge run's judgments carry it
    (its own ``run_id``), a generate run's answers are those of its tasks.
    Both price every completion, whether it came fresh or from the cache."""
    if kind == "judge":
        judgments = snapshot_tables.judgments
        query = sa.select(sa.func.sum(judgments.c.cost_usd)).where(judgments.c.run_id == run_id)
    else:
        answers = snapshot_tables.answers
        made = sa.select(CALLS.c.answer_id).where(CALLS.c.run_id == run_id)
        query = sa.select(sa.func.sum(answers.c.cost_usd)).where(answers.c.answer_id.in_(made))
    return float(conn.execute(query).scalar() or 0.0)


def lookup_cache(engine: sa.Engine, keys: Iterable[str]) -> dict[str, Completion]:
    """Cached completions for those of ``keys`` the cache holds."""
    found: dict[str, Completion] = {}
    columns = (CACHE.c.call_key, CACHE.c.text, CACHE.c.input_tokens, CACHE.c.output_tokens,
               CACHE.c.latency_s, CACHE.c.finish_reason)
    with engine.connect() as conn:
        for chunk in _chunks(sorted(set(keys))):
            for key, text, tin, tout, latency, finish in conn.execute(
                    sa.select(*columns).where(CACHE.c.call_key.in_(chunk))):
                found[key] = Completion(text, tin, tout, latency, finish or "", attempts=0)
    return found


class Writer:
    """Commits finished tasks in small batches from one writer task, so the
    database keeps up with thousands of tasks a second without blocking the
    calls: whatever finished while the last commit ran goes into the next one
    (at most ``batch`` tasks), committed in a worker thread.

    ``open_slots`` bounds the tasks that are started but not yet committed:
    a worker takes a slot before it starts a task, and the slot comes back
    once that task's batch has committed. With ``slots = concurrency +
    unflushed``, a run killed at any moment loses (and calls again when
    started again) at most that many tasks, and never a committed one.
    """

    def __init__(self, engine: sa.Engine, run_id: str, spec: ModelSpec,
                 retried: dict[str, list[str]], concurrency: int, journal: Journal,
                 unflushed: int = UNFLUSHED, batch: int = BATCH) -> None:
        self.engine, self.run_id, self.spec = engine, run_id, spec
        self.retried, self.journal = retried, journal
        self.batch = batch
        self.open_slots = asyncio.Semaphore(concurrency + unflushed)
        self.error: BaseException | None = None
        self._pending: list[TaskResult] = []
        self._wake = asyncio.Event()
        self._closing = False
        self._owner = asyncio.current_task()
        self._timer: asyncio.TimerHandle | None = None
        self._task = asyncio.create_task(self._loop(), name="clinieval-writer")
        journal.wake = self._wake.set

    def put(self, result: TaskResult) -> None:
        """Queue a finished task (its slot stays taken until it commits)."""
        self._pending.append(result)
        self._wake.set()

    async def close(self) -> None:
        """Commit everything queued, then stop; re-raise a failed commit."""
        self._closing = True
        self._wake.set()
        await asyncio.shield(self._task)
        if self.error is not None:
            raise self.error

    async def _loop(self) -> None:
        try:
            while not (self._closing and not self._pending and not self.journal.dirty):
                await self._wake.wait()
                if not (self._closing or self.open_slots.locked()
                        or len(self._pending) >= self.batch):
                    # A commit has a fixed CPU cost however small: let a
                    # batch gather while workers can still start tasks.
                    await asyncio.sleep(GATHER_S)
                self._wake.clear()
                if self.journal.dirty and not self._pending:
                    await self._commit()  # calls out, none finished: log them
                while self._pending:
                    await self._commit()
                if self.journal.dirty and self._timer is None:
                    # Calls still out: log them open next time, one gathering
                    # interval on (waking at once would spin while slots are full).
                    self._timer = asyncio.get_running_loop().call_later(GATHER_S,
                                                                        self._rewake)
        except Exception as err:
            # Workers may be waiting for slots only a commit frees: stop the run.
            self.error = err
            if self._owner is not None and not self._closing:
                self._owner.cancel()

    def _rewake(self) -> None:
        self._timer = None
        self._wake.set()

    async def _commit(self) -> None:
        results = self._pending[:self.batch]
        del self._pending[:self.batch]
        log = self.journal.drain()
        if results or not log.empty:
            await asyncio.to_thread(write_results, self.engine, self.run_id, self.spec, results,
                                    self.retried, log)
        for _ in results:
            self.open_slots.release()


def write_results(engine: sa.Engine, run_id: str, spec: ModelSpec, results: list[TaskResult],
                  retried: dict[str, list[str]], log: JournalRows | None = None) -> None:
    """One transaction for a group of finished tasks and the call log's rows
    (every attempt begun or ended since the last commit, theirs included)."""
    with engine.begin() as conn:
        if log is not None:
            _write_log(conn, log)
        _forget_failed(conn, run_id, [r.task.key for r in results if r.task.key in retried],
                       retried)
        _insert_new(conn, CACHE, _cache_rows(spec, results))
        _insert(conn, CALLS, [_call_row(run_id, spec, r) for r in results])
        _insert(conn, snapshot_tables.answers,
                [row for r in results for row in r.rows.get("answers", ())])
        _insert_judgments(conn, [row for r in results for row in r.rows.get("judgments", ())])
        _add_counters(conn, run_id, spec, results, log)


def _write_log(conn: sa.Connection, log: JournalRows) -> None:
    _insert(conn, PROMPTS, log.prompts, skip_existing=True)
    _insert(conn, SETTINGS, log.settings, skip_existing=True)
    _insert(conn, ATTEMPTS, log.inserts)
    if log.updates:
        sql, names, order, convert = _update_statement(conn.dialect)
        params = [_converted(p, convert) for p in map(operator.itemgetter(*order), log.updates)]
        if not conn.dialect.positional:
            params = [dict(zip(names, p, strict=True)) for p in params]
        conn.exec_driver_sql(sql, params)


@functools.lru_cache(maxsize=8)
def _update_statement(dialect: sa.Dialect) -> tuple[str, tuple[str, ...], tuple[str, ...],
                                                   list[tuple[int, Callable]]]:
    """The UPDATE that ends an attempt written open, as :func:`_insert_statement`
    makes INSERTs (the where-clause's parameters are named ``k_...``)."""
    keys = ("run_id", "start", "seq")
    statement = ATTEMPTS.update().where(
        *[ATTEMPTS.c[k] == sa.bindparam(f"k_{k}") for k in keys]).values(
        {c: sa.bindparam(c) for c in FINAL})
    compiled = statement.compile(dialect=dialect)
    names = tuple(compiled.positiontup or ()) if compiled.positional else (*FINAL,
                                                                          *[f"k_{k}" for k in keys])
    order = tuple(n[2:] if n.startswith("k_") else n for n in names)
    convert = [(i, process) for i, c in enumerate(order)
               if (process := ATTEMPTS.c[c].type._cached_bind_processor(dialect)) is not None]
    return compiled.string, names, order, convert


def _insert(conn: sa.Connection, table: sa.Table, rows: list[dict],
            skip_existing: bool = False) -> None:
    """``executemany`` of one compiled INSERT straight to the driver, rows
    grouped by the columns they fill: SQLAlchemy's per-row parameter handling
    cost as much CPU as SQLite's own insert (about 20 us a row). Column types
    that convert values on the way in (SQLite's datetimes) still do."""
    groups: dict[tuple[str, ...], list[dict]] = {}
    for row in rows:
        groups.setdefault(tuple(row), []).append(row)
    for columns, group in groups.items():
        sql, order, convert = _insert_statement(conn.dialect, table, columns, skip_existing)
        params = list(map(operator.itemgetter(*order), group)) if len(order) > 1 else [
            (row[order[0]],) for row in group]
        if convert:
            params = [_converted(p, convert) for p in params]
        if not conn.dialect.positional:
            params = [dict(zip(order, p, strict=True)) for p in params]
        conn.exec_driver_sql(sql, params)


def _converted(values: tuple, convert: list[tuple[int, Callable]]) -> tuple:
    out = list(values)
    for i, process in convert:
        out[i] = process(out[i])
    return tuple(out)


@functools.lru_cache(maxsize=256)
def _insert_statement(dialect: sa.Dialect, table: sa.Table, columns: tuple[str, ...],
                      skip_existing: bool) -> tuple[str, tuple[str, ...],
                                                    list[tuple[int, Callable]]]:
    """The INSERT's SQL for ``dialect`` (``ON CONFLICT DO NOTHING`` when
    ``skip_existing``), its parameters' column order, and the (position, bind
    processor) of the columns whose type has one."""
    if skip_existing:
        insert = {"sqlite": sqlite_insert, "postgresql": postgresql_insert}[dialect.name]
        statement = insert(table).on_conflict_do_nothing()
    else:
        statement = table.insert()
    compiled = statement.values({c: sa.bindparam(c) for c in columns}).compile(dialect=dialect)
    order = tuple(compiled.positiontup or ()) if compiled.positional else columns
    if set(order) != set(columns):
        raise AssertionError(f"{dialect.name}: parameters {order} for columns {columns}")
    convert = [(i, process) for i, c in enumerate(order)
               if (process := table.c[c].type._cached_bind_processor(dialect)) is not None]
    return compiled.string, order, convert


def _insert_new(conn: sa.Connection, table: sa.Table, rows: list[dict]) -> None:
    """Insert, skipping keys already stored: a ``--no-cache`` run calls again
    but the cache keeps the answer it first had for that key."""
    _insert(conn, table, rows, skip_existing=True)


def _forget_failed(conn: sa.Connection, run_id: str, task_keys: list[str],
                   retried: dict[str, list[str]]) -> None:
    """A failed task tried again replaces its earlier record and error rows."""
    if not task_keys:
        return
    call_keys = [key for task in task_keys for key in retried[task]]
    judgments = snapshot_tables.judgments
    for chunk in _chunks(call_keys):
        conn.execute(judgments.delete().where(judgments.c.run_id == run_id,
                                              judgments.c.call_key.in_(chunk)))
    for chunk in _chunks(task_keys):
        conn.execute(CALLS.delete().where(CALLS.c.run_id == run_id, CALLS.c.task_key.in_(chunk)))
    conn.execute(RUNS.update().where(RUNS.c.run_id == run_id)
                 .values(failed=RUNS.c.failed - len(task_keys)))


def _cache_rows(spec: ModelSpec, results: list[TaskResult]) -> list[dict]:
    """Cache rows of the calls made fresh in these tasks."""
    rows = {}
    texts: dict[int, str] = {}  # by id: calls share settings; the results keep them alive
    for result in results:
        for outcome in result.outcomes:
            for key, settings, c in outcome.fresh:
                text = texts.get(id(settings))
                if text is None:
                    text = texts[id(settings)] = canonical(dict(settings))
                rows[key] = {"call_key": key, "model_version": spec.version,
                             "settings": text, "text": c.text,
                             "finish_reason": c.finish_reason, "input_tokens": c.input_tokens,
                             "output_tokens": c.output_tokens, "latency_s": c.latency_s,
                             "cost_usd": spec.prices.cost(c.input_tokens, c.output_tokens),
                             "created_at": _now()}
    return list(rows.values())


def _call_row(run_id: str, spec: ModelSpec, result: TaskResult) -> dict:
    outcomes = result.outcomes
    fresh = [c for o in outcomes for _, _, c in o.fresh]
    statuses = [o.parse_status for o in outcomes if o.parse_status]
    return {
        "run_id": run_id, "task_key": result.task.key, "call_key": outcomes[-1].key,
        "status": result.status, "answer_id": result.task.answer_id or next(
            (row["answer_id"] for row in result.rows.get("answers", ())), None),
        "parse_status": next((s for s in ("error", "unparsed") if s in statuses),
                             "ok" if statuses else None),
        "attempts": sum(o.attempts for o in outcomes),
        "parse_attempts": sum(o.parse_attempts for o in outcomes),
        "error": "; ".join(o.error for o in outcomes if o.error) or None,
        "input_tokens": sum(c.input_tokens for c in fresh),
        "output_tokens": sum(c.output_tokens for c in fresh),
        "latency_s": sum(c.latency_s for c in fresh) if fresh else None,
        "cost_usd": sum(o.cost(spec) for o in outcomes),
    }


def _insert_judgments(conn: sa.Connection, rows: list[dict]) -> None:
    """Judgments get their ids from the database. Set-based, inside the batch's
    transaction: a task's judgments and its record commit together, which a
    one-transaction-per-call writer could not promise."""
    _insert(conn, snapshot_tables.judgments, rows)


def _add_counters(conn: sa.Connection, run_id: str, spec: ModelSpec,
                  results: list[TaskResult], log: JournalRows | None = None) -> None:
    """The run's counts of the committed tasks; its cost is what the attempts
    that ended since the last commit spent (with a call log), so calls that
    a stop made the run repeat are paid twice here, as they were."""
    stats = Stats()
    for result in results:
        stats.add(result, spec)
    values = {name: RUNS.c[name] + getattr(stats, name) for name in COUNTERS}
    values["cost_usd"] = RUNS.c.cost_usd + (stats.cost_usd if log is None else log.spent_usd)
    conn.execute(RUNS.update().where(RUNS.c.run_id == run_id).values(**values))
