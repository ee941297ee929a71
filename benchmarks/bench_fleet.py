"""The runner against a fleet of four replicas of one model (stub servers in
their own process, answering in 20 ms), of which one freezes mid-run (stops
answering, connections left open) and one is rate-limited (beyond a number
of requests per tenth of a second it answers 429 with Retry-After). Prints
calls per second, failed calls (the target is 0) and, per replica, the calls
it was sent and answered, its failures by cause, the concurrency its
adaptive limit settled at (and its lowest), its breaker's state and the
liveness questions it left unanswered. The same calls on four healthy
replicas (the same child process) run before and after, as the baseline
of the ratio (their mean, so that a machine shared with other work slowing
down or speeding up mid-benchmark shows as the two baselines' spread).

Then two replicas sharing one machine's service slots (as two model servers
share its cores: a stopped one's slots are the other's), of which one
freezes mid-run or refuses connections, through the runner sized two ways:
the straightforward way (each replica's ceiling at its share, no run bound:
the run keeps their sum in flight) and N+1 (``max_in_flight`` at the pair's
load, each replica's ceiling at all of it, so the one left can take it up).
Each against the healthy pair's runs just before and after it.

    python benchmarks/bench_fleet.py [--calls 10000] [--concurrency 16]
        [--pair-calls 2000] [--pair-in-flight 16] [--pair-delay-ms 50]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from clinieval.providers import model_spec
from clinieval.providers.llamacpp import free_port
from clinieval.providers.stub import (
    Reply,
    SharedCapacity,
    StubServer,
    completion_body,
    frozen_after,
)
from clinieval.runs import JuryJudge, execute
from clinieval.runs.data import AnswerText
from clinieval.storage import db
from clinieval.storage.schema import snapshot as snapshot_tables

REPLY = json.dumps({"accuracy": 4, "completeness": 3, "clarity": 5, "reason": "stub verdict"})
CASES = 200


def rate_limited(per_tenth: int, delay_s: float):
    """A handler admitting ``per_tenth`` requests per 0.1 s window, 429 beyond."""
    body = completion_body(REPLY)
    window = {"start": 0.0, "count": 0}
    lock = threading.Lock()

    def handle(_request: dict, _n: int) -> Reply:
        with lock:
            now = time.monotonic()
            if now - window["start"] >= 0.1:
                window["start"], window["count"] = now, 0
            window["count"] += 1
            over = window["count"] > per_tenth
        if over:
            return Reply(429, b'{"error": "rate limited"}', {"retry-after": "0.5"})
        return Reply(body=body, delay_s=delay_s)

    return handle


def serve(delay_s: float, freeze_after: int, per_tenth: int, pair: argparse.Namespace
          ) -> None:
    """The four replicas, then the pairs, in this (child) process; prints their URLs."""
    body = completion_body(REPLY)
    healthy = lambda _r, _n: Reply(body=body, delay_s=delay_s)  # noqa: E731
    handlers = [healthy, healthy, frozen_after(freeze_after, healthy),
                rate_limited(per_tenth, delay_s)]
    servers = [StubServer(h).__enter__() for h in handlers]
    baseline = [StubServer(healthy).__enter__() for _ in handlers]
    print(" ".join(s.base_url for s in servers), flush=True)
    print(" ".join(s.base_url for s in baseline), flush=True)
    print(json.dumps(_pairs(pair)), flush=True)
    threading.Event().wait()


def _pairs(args: argparse.Namespace) -> dict[str, list[str]]:
    """Two replicas per machine of ``pair_in_flight`` slots: a healthy pair,
    a pair whose first freezes (one per sizing: frozen stays frozen) and a
    lone server beside a port nothing listens on."""
    body = completion_body(REPLY)
    healthy = lambda _r, _n: Reply(body=body, delay_s=args.pair_delay_ms / 1000)  # noqa: E731
    frozen = frozen_after(args.pair_calls // 16, healthy)

    def machine(*handlers):
        capacity = SharedCapacity(slots=args.pair_in_flight)
        return [StubServer(h, capacity=capacity).__enter__().base_url for h in handlers]

    return {"healthy": machine(healthy, healthy), "frozen bounded": machine(frozen, healthy),
            "frozen summed": machine(frozen, healthy),
            "refusing": [f"http://127.0.0.1:{free_port()}/v1", *machine(healthy)]}


def _database(path: Path, n_answers: int):
    engine = db.make_engine(f"sqlite:///{path}")
    db.upgrade(engine)
    cases = {f"case-{i:04d}": f"Question {i}: what is the first step for symptom {i}?"
             for i in range(CASES)}
    answers = [AnswerText(f"ans-{i:06d}", f"case-{i % CASES:04d}", "cand",
                          f"Answer {i}: check vital signs, then examine.", 0, 0.7, "default")
               for i in range(n_answers)]
    with engine.begin() as conn:
        conn.execute(snapshot_tables.models.insert(), [{"model_id": "cand"}])
        conn.execute(snapshot_tables.cases.insert(), [{"case_id": c, "specialty": "General",
                                                 "prompt": p} for c, p in cases.items()])
        conn.execute(snapshot_tables.answers.insert(), [
            {"answer_id": a.answer_id, "case_id": a.case_id, "model_id": "cand",
             "text": a.text, "sample_index": 0} for a in answers])
    return engine, answers, cases


def _run(urls: list[str], concurrency: int, calls: int, path: Path, **sizing):
    engine, answers, cases = _database(path, calls)
    spec = model_spec({"id": "judge", "version": "stub-1", "name": "stub", "base_urls": urls,
                       "concurrency": concurrency, "timeout_s": 30,
                       "generation": {"max_tokens": 100}} | sizing, "bench")
    start, cpu = time.perf_counter(), time.process_time()
    record = asyncio.run(execute(engine, JuryJudge(spec, answers, cases)))
    return record, time.perf_counter() - start, time.process_time() - cpu


def _summary(label: str, record: dict, wall: float, cpu: float, calls: int) -> None:
    print(f"{label}: {record['done']:,} done, {record['failed']:,} failed calls in {wall:.2f} s"
          f" = {record['done'] / wall:,.0f} calls/s ({cpu / calls * 1e3:.3f} ms CPU/call)")
    for i, r in enumerate(record["endpoints"], 1):
        print(f"  replica {i}: {r.calls:,} sent, {r.ok:,} answered, failures {r.failures},"
              f" concurrency settled at {r.concurrency} (lowest {r.lowest_concurrency},"
              f" max {r.max_concurrency}), breaker {r.breaker} (opened {r.times_opened}x),"
              f" {r.checks_failed} liveness questions unanswered")


def _pair_runs(pairs: dict[str, list[str]], args: argparse.Namespace) -> None:
    n, calls = args.pair_in_flight, args.pair_calls
    sizings = {"summed": {"concurrency": n // 2},
               "bounded": {"concurrency": n, "max_in_flight": n}}
    print(f"\n{calls:,} jury calls over 2 replicas sharing {n} service slots, answering in"
          f" {args.pair_delay_ms:g} ms; sized 'summed': {sizings['summed']} (the run keeps"
          f" {n} out, {n // 2} a replica at most), 'bounded': {sizings['bounded']}; the frozen"
          f" replica freezes after {calls // 16:,} requests; load average"
          f" {os.getloadavg()[0]:.2f}")
    with tempfile.TemporaryDirectory() as tmp:
        def run(label: str, urls: list[str], sizing: str):
            return _run(urls, sizings[sizing]["concurrency"], calls, Path(tmp) / f"{label}.db",
                        **{k: v for k, v in sizings[sizing].items() if k != "concurrency"})

        healthy = [run("healthy-0", pairs["healthy"], "bounded")]
        degraded = {}
        for kind in ("frozen", "refusing"):
            for sizing in ("summed", "bounded"):
                urls = pairs[f"frozen {sizing}"] if kind == "frozen" else pairs["refusing"]
                degraded[kind, sizing] = run(f"{kind}-{sizing}", urls, sizing)
            healthy.append(run(f"healthy-{len(healthy)}", pairs["healthy"], "bounded"))
    when = ("before the frozen runs", "between the frozen and refusing runs",
            "after the refusing runs")
    for label, result in zip(when, healthy, strict=True):
        _summary(f"healthy pair, bounded, {label}", *result, calls)
    for i, ((kind, sizing), (record, wall, cpu)) in enumerate(degraded.items()):
        _summary(f"one {kind}, sized {sizing}", record, wall, cpu, calls)
        pair = (healthy[i // 2][1] + healthy[i // 2 + 1][1]) / 2
        print(f"  {wall / pair:.2f}x the healthy pair's mean wall time around it"
              f" ({healthy[i // 2][1]:.2f} s and {healthy[i // 2 + 1][1]:.2f} s)")
    print(f"load average {os.getloadavg()[0]:.2f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=10_000)
    parser.add_argument("--concurrency", type=int, default=16, help="per replica")
    parser.add_argument("--delay-ms", type=float, default=20.0)
    parser.add_argument("--per-tenth", type=int, default=40,
                        help="requests the rate-limited replica admits per 0.1 s")
    parser.add_argument("--pair-calls", type=int, default=2000)
    parser.add_argument("--pair-in-flight", type=int, default=16,
                        help="the pair's service slots and the calls the run keeps out")
    parser.add_argument("--pair-delay-ms", type=float, default=50.0)
    parser.add_argument("--serve", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    freeze_after = args.calls // 8
    if args.serve:
        serve(args.delay_ms / 1000, freeze_after, args.per_tenth, args)
        return
    child = subprocess.Popen([sys.executable, __file__, "--serve", *sys.argv[1:]],
                             stdout=subprocess.PIPE, text=True)
    try:
        urls, healthy = child.stdout.readline().split(), child.stdout.readline().split()
        pairs = json.loads(child.stdout.readline())
        print(f"{args.calls:,} jury calls over 4 replicas answering in {args.delay_ms:g} ms,"
              f" concurrency {args.concurrency} each; replica 3 freezes after"
              f" {freeze_after:,} requests, replica 4 admits {args.per_tenth} per 0.1 s;"
              f" {os.cpu_count()} cores, load average {os.getloadavg()[0]:.2f}")
        with tempfile.TemporaryDirectory() as tmp:
            # A short run on the first replica first, so imports and connecting are not timed.
            _run(urls[:1], args.concurrency, 200, Path(tmp) / "warm.db")
            before = _run(healthy, args.concurrency, args.calls, Path(tmp) / "before.db")
            record, wall, cpu = _run(urls, args.concurrency, args.calls, Path(tmp) / "fleet.db")
            after = _run(healthy, args.concurrency, args.calls, Path(tmp) / "after.db")
        _summary("baseline before, four healthy replicas", *before, args.calls)
        _summary("one frozen, one rate-limited", record, wall, cpu, args.calls)
        _summary("baseline after, four healthy replicas", *after, args.calls)
        base_wall = (before[1] + after[1]) / 2
        print(f"the degraded fleet took {wall / base_wall:.2f}x the healthy fleet's mean wall"
              f" time (baselines {before[1]:.2f} s and {after[1]:.2f} s); load average"
              f" {os.getloadavg()[0]:.2f}")
        _pair_runs(pairs, args)
    finally:
        child.terminate()
        child.wait(10)


if __name__ == "__main__":
    main()
