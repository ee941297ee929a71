"""Replicas of one model on real loopback servers: least-outstanding
balancing, a frozen or refusing replica taken out without a failed call,
the breaker and the adaptive limit by hand, pre-flight, failures by cause,
per-sample seeds and several runs at once through one writer."""

from __future__ import annotations

import asyncio
import os
import time

import pytest
import sqlalchemy as sa

from clinieval.io.importer import import_snapshot
from clinieval.providers import make_provider, model_spec, preflight
from clinieval.providers.adaptive import AIMDLimit, Breaker
from clinieval.providers.llamacpp import free_port
from clinieval.providers.stub import (
    Reply,
    SharedCapacity,
    StubServer,
    answering,
    frozen_after,
)
from clinieval.runs import GenerateJob, RunOptions, execute, failed_runs
from clinieval.runs.data import CaseText, load_cases
from clinieval.runs.generate import SAMPLE_SEED_STEP
from clinieval.runs.keys import call_key
from clinieval.runs.multi import execute_many
from clinieval.storage import db
from clinieval.testing import tiny_snapshot

HELLO = [{"role": "user", "content": "hello"}]
SERVICE_S = 0.05
CALLS = 480


def _spec(*urls: str, **fields):
    return model_spec({"id": "m", "version": "v1", "name": "m", "base_urls": list(urls),
                       "concurrency": 8, "timeout_s": 30} | fields, "test.toml")


async def _drive(spec, calls: int, opened: list | None = None):
    """``calls`` calls, as many in flight as the provider takes (as the runner
    does); (failed calls, seconds, per-replica reports). ``opened`` gets the
    seconds from the start to when the first replica's breaker first opened."""
    provider = make_provider(spec)
    pending = iter(range(calls))
    failed = []

    async def watch(start: float):
        breaker = provider.fleet.replicas[0].breaker
        while not breaker.times_opened:
            await asyncio.sleep(0.01)
        opened.append(time.perf_counter() - start)

    async def worker():
        for _ in pending:
            try:
                await provider.generate(HELLO, {})
            except Exception as err:  # noqa: BLE001 - counted, that is the test
                failed.append(err)

    start = time.perf_counter()
    try:
        watching = [] if opened is None else [asyncio.create_task(watch(start))]
        await asyncio.gather(*[worker() for _ in range(provider.concurrency)])
        for task in watching:
            task.cancel()
        return failed, time.perf_counter() - start, provider.report()
    finally:
        await provider.aclose()


def _fleet_run(first, second_url: str | None = None):
    """Two replicas sharing 8 service slots (two servers on one machine):
    ``first`` answers as ``first`` says; the second is healthy."""
    capacity = SharedCapacity(slots=8)
    with StubServer(first, capacity=capacity) as one, StubServer(
            answering(SERVICE_S), capacity=capacity) as two:
        urls = [second_url or one.base_url, two.base_url]
        return asyncio.run(_drive(_spec(*urls), CALLS))


def _show(label: str, wall: float, reports) -> None:
    print(f"\n{label}: {wall:.2f} s")
    for r in reports:
        print(f"  {r.url}: {r.calls} calls, {r.ok} answered, failures {r.failures},"
              f" concurrency settled at {r.concurrency} (lowest {r.lowest_concurrency}),"
              f" breaker {r.breaker} (opened {r.times_opened}x)")


def test_a_frozen_or_refusing_replica_costs_no_call_and_little_time():
    """Each degraded run against the mean of healthy runs just before and
    after it (the machine is shared: its speed drifts)."""
    healthy = [_fleet_run(answering(SERVICE_S))]
    degraded = {}
    for label, first, url in (
            ("one frozen after 40 calls", frozen_after(40, answering(SERVICE_S)), None),
            ("one refusing connections", answering(SERVICE_S),
             f"http://127.0.0.1:{free_port()}")):
        degraded[label] = _fleet_run(first, url)
        healthy.append(_fleet_run(answering(SERVICE_S)))
    for failed, wall, reports in healthy:
        _show("healthy pair", wall, reports)
        assert failed == [] and all(r.ok > CALLS / 3 for r in reports)
    for n, (label, (failed, wall, reports)) in enumerate(degraded.items()):
        _show(label, wall, reports)
        ratio = wall / ((healthy[n][1] + healthy[n + 1][1]) / 2)
        print(f"  {ratio:.2f}x the healthy runs either side")
        assert failed == [] and ratio <= 1.3
    frozen, refused = (reports for _, _, reports in degraded.values())
    assert frozen[0].failures.get("timeout", 0) > 0
    assert refused[0].failures.get("connection refused", 0) > 0
    assert refused[0].ok == 0 and refused[0].breaker == "open"


RUN_SERVICE_S = 0.1
RUN_TASKS = 1440
"""About 9.5 s a healthy run: a frozen replica costs a roughly fixed time
(found after 0.5 s of silence, its share moved 0.5 s later, its stuck calls
retried once the liveness question times out): 0.6 s alone, 2 s measured
beside a busy second test worker (1.41x at 720 tasks), so the run is long
enough for the issue's bound to measure the balancing, not that fixed cost."""
RUN_SLOTS = 16
N_PLUS_ONE = {"concurrency": RUN_SLOTS, "max_in_flight": RUN_SLOTS}
"""Each replica may take all 16 calls, the run keeps 16 in flight: 8 each
while both answer, 16 on the one left."""
SUMMED = {"concurrency": RUN_SLOTS // 2}
"""The sizing without ``max_in_flight``: 8 per replica, 16 in flight summed."""


def _runner_run(engine, first, second_url: str | None = None, sizing=N_PLUS_ONE):
    """One generate run through ``execute`` (the runner as the CLI runs it,
    answers stored in SQLite) on two stub replicas sharing 16 service slots,
    as two servers share one machine's cores; ``first`` answers as it says
    (or ``second_url`` replaces it), the second is healthy. (record, seconds)."""
    capacity = SharedCapacity(slots=RUN_SLOTS)
    with StubServer(first, capacity=capacity) as one, StubServer(
            answering(RUN_SERVICE_S), capacity=capacity) as two:
        spec = _spec(second_url or one.base_url, two.base_url, **sizing)
        cases = load_cases(engine, None, None)
        job = GenerateJob(spec, cases, samples=RUN_TASKS // len(cases))
        start = time.perf_counter()
        record = asyncio.run(execute(engine, job, RunOptions(use_cache=False)))
        return record, time.perf_counter() - start


def _show_run(label: str, record, wall: float) -> None:
    print(f"\n{label}: {record['done']} done, {record['failed']} failed in {wall:.2f} s"
          f" ({record['done'] / wall:.0f} calls/s), load {os.getloadavg()[0]:.1f}")
    for r in record["endpoints"]:
        print(f"  {r.url}: {r.calls} calls, {r.ok} answered, failures {r.failures},"
              f" breaker {r.breaker} (opened {r.times_opened}x)")


def test_through_the_runner_a_lost_replica_costs_no_call_and_little_time(loaded):
    """The runner keeps ``max_in_flight`` calls out, not every replica's
    ceiling added up, so the replica left takes up the lost one's share:
    with one frozen mid-run or refusing connections, no call fails and the
    run takes at most 1.3x the healthy pair's (the mean of healthy runs just
    before and after it). Sized the old way (8 per replica, no run bound)
    the survivor stays at its 8 and the same loss costs about 2x."""
    healthy = [_runner_run(loaded, answering(RUN_SERVICE_S))]
    degraded = {}
    refusing = f"http://127.0.0.1:{free_port()}/v1"
    for label, first, url, sizing in (
            ("one frozen after 40 calls", frozen_after(40, answering(RUN_SERVICE_S)), None,
             N_PLUS_ONE),
            ("one refusing connections", None, refusing, N_PLUS_ONE),
            ("one refusing, sized 8 per replica with no run bound", None, refusing, SUMMED)):
        degraded[label] = _runner_run(loaded, first or answering(), url, sizing)
        if sizing is N_PLUS_ONE:
            healthy.append(_runner_run(loaded, answering(RUN_SERVICE_S)))
    for record, wall in healthy:
        _show_run("healthy pair", record, wall)
        assert record["failed"] == 0 and record["done"] == RUN_TASKS
        assert all(r.ok > RUN_TASKS / 3 for r in record["endpoints"])
    ratios = {}
    for n, (label, (record, wall)) in enumerate(degraded.items()):
        _show_run(label, record, wall)
        pair = (healthy[min(n, 1)][1] + healthy[min(n, 1) + 1][1]) / 2
        ratios[label] = wall / pair
        print(f"  {ratios[label]:.2f}x the healthy pair (mean of the runs around"
              f" {'it' if n < 2 else 'the one before'})")
        assert record["failed"] == 0 and record["done"] == RUN_TASKS
        assert not record["failed_after_retries"]
    frozen, refused, summed = (record["endpoints"] for record, _ in degraded.values())
    assert frozen[0].failures.get("timeout", 0) > 0 and frozen[0].breaker != "closed"
    # It held about its half of the calls when it froze, and was sent none once suspected.
    assert frozen[0].calls - frozen[0].ok <= RUN_SLOTS // 2 + 1
    assert refused[0].failures.get("connection refused", 0) > 0 and refused[0].ok == 0
    sized, unbounded = list(ratios.values())[:2], list(ratios.values())[2]
    assert max(sized) <= 1.3, ratios
    assert unbounded >= 1.6, ratios  # the run's bound is what made the difference


def test_a_replica_frozen_before_any_answer_is_asked_and_cut_and_no_call_probes_it():
    """Calls take 5 s and one replica is frozen from the start: nothing has
    come back anywhere when its silence is noticed, so no latency can tell
    it from a slow replica; asking its server can. It is cut (its call
    retried on the other) before the first answer could come back, the slow
    but healthy replica is asked too and never cut, and while the frozen one
    stays out, its breaker's look-agains are questions, not calls."""
    with StubServer(frozen_after(0, answering())) as one, StubServer(
            answering(5.0)) as two:
        spec = _spec(one.base_url, two.base_url, concurrency=2, adaptive=False,
                     breaker_cooldown_s=0.5)
        opened = []
        failed, _, (frozen, slow) = asyncio.run(_drive(spec, 2, opened))
        posts_to_frozen = len(one.requests)
    assert failed == [] and (frozen.ok, slow.ok) == (0, 2)
    [cut_after] = opened
    print(f"\nfrozen replica cut after {cut_after:.2f} s; its breaker opened"
          f" {frozen.times_opened}x, {frozen.checks_failed} questions unanswered")
    assert cut_after < 4.5  # asked at once, 2 s to answer (nothing known yet); calls take 5 s
    assert frozen.failures == {"timeout": 1} and posts_to_frozen == frozen.calls == 1
    assert frozen.checks_failed >= 2 and frozen.times_opened >= 2
    assert slow.failures == {} and slow.times_opened == 0 and slow.checks_failed == 0


def test_a_checked_breaker_lets_the_probe_through_only_once_cleared():
    breaker = Breaker(failures=1, cooldown_s=5, checked=True)
    breaker.failure(now=0)
    assert not breaker.due(4.9) and breaker.due(5) and not breaker.admits(5)
    breaker.trip(now=6)  # the question went unanswered: out for twice as long
    assert not breaker.due(15.9) and breaker.due(16) and not breaker.admits(16)
    breaker.clear()
    assert breaker.admits(16)
    breaker.take()
    assert breaker.state == "half-open" and not breaker.due(16) and not breaker.admits(16)
    breaker.failure(now=17)  # the probe call failed: a new question is needed again
    assert breaker.due(37) and not breaker.admits(37)


def test_calls_go_to_the_replica_with_fewest_outstanding():
    """One replica ten times slower: it holds its calls longer, so it is sent fewer."""
    with StubServer(answering(0.2)) as slow, StubServer(answering(0.02)) as fast:
        failed, _, (r_slow, r_fast) = asyncio.run(_drive(
            _spec(slow.base_url, fast.base_url, concurrency=4, adaptive=False), 120))
    assert failed == [] and r_fast.calls > 3 * r_slow.calls


def test_a_replica_answering_429_is_throttled_not_taken_out():
    throttled = lambda _r, n: Reply(429, b"{}", {"retry-after": "0.2"}) if n % 2 else Reply(  # noqa: E731
        body=answering()({}, n).body, delay_s=0.02)
    with StubServer(throttled) as busy, StubServer(answering(0.02)) as calm:
        failed, _, (r_busy, _r_calm) = asyncio.run(_drive(_spec(busy.base_url, calm.base_url),
                                                          200))
    assert failed == [] and r_busy.failures.get("HTTP 429", 0) > 0
    assert r_busy.lowest_concurrency < 8 and r_busy.times_opened == 0


def test_the_breaker_opens_after_consecutive_failures_and_probes_after_its_cool_down():
    breaker = Breaker(failures=3, cooldown_s=5)
    for _ in range(2):
        breaker.failure(now=0)
    assert breaker.admits(0)
    breaker.failure(now=1)
    assert breaker.state == "open" and not breaker.admits(5.9) and breaker.admits(6.0)
    breaker.take()  # the probe
    assert breaker.state == "half-open" and not breaker.admits(7)
    breaker.failure(now=7)  # the probe failed: open for twice as long
    assert not breaker.admits(16.9) and breaker.admits(17)
    breaker.take()
    breaker.success()
    assert breaker.state == "closed" and breaker.admits(17)


def test_the_adaptive_limit_halves_on_overload_and_grows_back_one_per_window():
    limit = AIMDLimit(start=16, maximum=16)
    limit.overloaded()
    limit.overloaded()  # the same burst: counted once
    assert limit.current == 8
    for _ in range(8):
        limit.success(0.1)
    assert limit.current == 8  # the quiet window after the decrease
    for _ in range(9):
        limit.success(0.1)
    assert limit.current == 9  # +1/limit per answer: about one per window
    before = limit.decreases
    for _ in range(30):
        limit.success(1.0)  # latency rising tenfold
    assert limit.decreases > before
    for _ in range(10):
        limit.overloaded()
        for _ in range(16):
            limit.success(1.0)
    assert limit.current >= 1
    grown = AIMDLimit(start=1, maximum=3)
    for _ in range(100):
        grown.success(0.1)
    assert grown.current == 3


def test_preflight_names_each_endpoint_that_does_not_answer():
    closed = f"http://127.0.0.1:{free_port()}/v1"
    with StubServer(answering()) as server:
        problems = preflight([_spec(server.base_url, closed),
                              _spec(server.base_url, id="same-endpoint")])
        assert len(server.requests) == 1 and server.requests[0]["max_tokens"] == 1
    [problem] = problems
    assert problem.url == closed and "connection refused" in problem.error
    assert str(problem).startswith(f"m: {closed}: connection refused")


@pytest.fixture
def loaded(tmp_path):
    url = f"sqlite:///{tmp_path / 'fleet.db'}"
    engine = db.make_engine(url)
    db.upgrade(engine)
    import_snapshot(engine, tiny_snapshot())
    yield engine
    engine.dispose()


def test_failed_calls_are_grouped_by_cause_and_fail_the_run_unless_allowed(loaded):
    # One call at a time, so that which tries are sent does not depend on
    # timing: with 8 at once, two retries whose backoffs ended in the same turn
    # of a busy event loop were both sent before the third failure opened the
    # breaker (4 sent of the 4 tries, in a clean-clone CI run).
    spec = _spec(f"http://127.0.0.1:{free_port()}/v1", max_attempts=2, concurrency=1)
    job = GenerateJob(spec, load_cases(loaded, None, None))
    record = asyncio.run(execute(loaded, job))
    [cause] = record["failures"]
    assert (cause.cause, cause.count, cause.fatal) == ("connection refused", len(job.tasks), True)
    assert "connection refused at http://127.0.0.1" in cause.example
    assert record["failed_after_retries"] and failed_runs([record], RunOptions()) == [
        record["run_id"]]
    assert failed_runs([record], RunOptions(allow_failures=True)) == []
    [endpoint] = record["endpoints"]
    # Three tries fail and open its breaker; the fourth fails fast, not sent.
    assert len(job.tasks) == 2 and endpoint.failures["connection refused"] == 3
    assert endpoint.calls == 3 and endpoint.breaker != "closed"


def test_each_sample_has_its_own_seed_and_sample_zero_keeps_its_key():
    spec = _spec("http://h/v1", generation={"seed": 7, "temperature": 0.7})
    job = GenerateJob(spec, [CaseText("c1", "Why?")], samples=3)
    seeds = [t.calls[0].settings["seed"] for t in job.tasks]
    assert seeds == [7, 7 + SAMPLE_SEED_STEP, 7 + 2 * SAMPLE_SEED_STEP]
    first = job.tasks[0].calls[0]
    assert job.tasks[0].key == call_key("v1", first.messages, {"seed": 7, "temperature": 0.7}, 0)
    unseeded = GenerateJob(_spec("http://h/v1"), [CaseText("c1", "Why?")], samples=2)
    assert all("seed" not in t.calls[0].settings for t in unseeded.tasks)


def test_several_models_run_at_once_through_one_writer(loaded):
    with StubServer(answering(0.3)) as one, StubServer(answering(0.3)) as two:
        cases = load_cases(loaded, None, None)
        jobs = [GenerateJob(_spec(server.base_url, id=f"cand-{n}", version=n, concurrency=2),
                            cases, samples=4) for n, server in (("a", one), ("b", two))]
        start = time.perf_counter()
        records = asyncio.run(execute_many(loaded, jobs))
        wall = time.perf_counter() - start
    tasks = len(jobs[0].tasks)
    assert [(r["model_id"], r["done"], r["failed"]) for r in records] == [
        ("cand-a", tasks, 0), ("cand-b", tasks, 0)]
    one_after_other = 2 * (tasks / 2 * 0.3)  # each model's calls, two at a time
    assert wall < one_after_other  # both endpoints were busy at once
    with loaded.connect() as conn:
        stored = conn.execute(sa.text("SELECT model_id, COUNT(*) FROM answers WHERE model_id"
                                      " LIKE 'cand-%' GROUP BY model_id")).all()
    assert sorted(stored) == [("cand-a", tasks), ("cand-b", tasks)]
