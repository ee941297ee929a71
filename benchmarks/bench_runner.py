"""The judge runner at scale: 20,000 jury calls against a local
OpenAI-compatible stub server (its own process) that answers in 20 ms, with
64 calls in flight. Prints calls per second and the runner's own CPU time per
call, beside two straightforward baselines on the same server (a sequential
loop of blocking calls, as with the official client, and a pool of 64
threads; both with httpx, on which the official client is built, and without
caching or storing anything), then the time to resume the finished run and
to redo it from the cache. Times start before the job is built (prompts and
cache keys) and end with its run record; CPU is this process's (the runner's
event loop and its writer thread), and the stub server's own CPU is printed
apart to show it is not the limit. The machine's load average is printed
before and after: wall-clock rates drop when other work shares the cores,
CPU per call does not much. With --llm,
also the local SmolLM2 model's tokens per second through llama-server.

    python benchmarks/bench_runner.py [--calls 20000] [--concurrency 64] [--llm]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import sqlalchemy as sa

from clinieval.providers import model_spec
from clinieval.providers.llamacpp import LlamaServer, find_local_model, free_port
from clinieval.runs import JuryJudge, RunOptions, execute
from clinieval.runs.data import AnswerText
from clinieval.storage import db
from clinieval.storage.schema import snapshot as snapshot_tables

REPLY = json.dumps({"accuracy": 4, "completeness": 3, "clarity": 5, "reason": "stub verdict"})
CASES = 200


def _stub(port: int, delay_ms: float) -> subprocess.Popen:
    proc = subprocess.Popen([sys.executable, "-m", "clinieval.providers.stub", "--port",
                             str(port), "--delay-ms", str(delay_ms), "--reply", REPLY],
                            stdout=subprocess.PIPE, text=True)
    proc.stdout.readline()  # the server prints its URL once it listens
    return proc


def _database(path: Path, n_answers: int) -> tuple[sa.Engine, list[AnswerText], dict]:
    """Cases and answers to judge, written directly (set-up, not timed)."""
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


def _runner(engine, answers, cases, base_url: str, concurrency: int, run_id: str | None = None):
    """One run, timed from building the job (its prompts and cache keys) to
    its run record."""
    spec = model_spec({"id": "judge", "version": "stub-1", "name": "stub",
                       "base_urls": [base_url], "concurrency": concurrency,
                       "prices": {"input_per_m": 1.0, "output_per_m": 2.0},
                       "generation": {"max_tokens": 100}}, "bench")
    return _measure(lambda: asyncio.run(execute(engine, JuryJudge(spec, answers, cases),
                                                RunOptions(run_id=run_id))))


def _measure(func):
    wall, cpu = time.perf_counter(), time.process_time()
    value = func()
    return value, time.perf_counter() - wall, time.process_time() - cpu


def _body(i: int) -> bytes:
    return json.dumps({"model": "stub", "max_tokens": 100, "messages": [
        {"role": "user", "content": f"Judge answer {i}."}]}).encode()


def _blocking_call(client: httpx.Client, url: str, i: int) -> str:
    response = client.post(url, content=_body(i), headers={"content-type": "application/json"})
    return response.json()["choices"][0]["message"]["content"]


def _sequential(url: str, n: int):
    with httpx.Client() as client:
        return _measure(lambda: [_blocking_call(client, url, i) for i in range(n)])


def _threads(url: str, n: int, workers: int):
    limits = httpx.Limits(max_connections=workers, max_keepalive_connections=workers)
    with httpx.Client(limits=limits) as client, ThreadPoolExecutor(workers) as pool:
        return _measure(lambda: list(pool.map(lambda i: _blocking_call(client, url, i),
                                              range(n))))


def _row(label: str, calls: int, wall: float, cpu: float) -> None:
    print(f"{label:<46} {calls:>7,} calls {wall:8.2f} s {calls / wall:9,.0f} calls/s"
          f" {cpu / calls * 1e3:7.3f} ms CPU/call (at most {calls / cpu:,.0f} calls/s"
          " on one idle core)")


def _cpu_s(pid: int) -> float:
    """User + system CPU seconds a process has used so far (Linux /proc)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _load() -> str:
    return "load average " + " ".join(f"{x:.2f}" for x in os.getloadavg())


def _local_model_speed() -> None:
    model = find_local_model([Path(".venv-llm")])
    if model is None:
        print("local model: not installed (.ci/setup-llm.sh)")
        return
    with LlamaServer(model, parallel=8, ctx=8192) as server:
        url = f"{server.base_url}/chat/completions"

        async def one(client: httpx.AsyncClient, i: int) -> int:
            body = {"model": "smollm2", "max_tokens": 128, "temperature": 0.7, "seed": i,
                    "messages": [{"role": "user", "content": f"Explain fever in child {i}."}]}
            response = await client.post(url, json=body, timeout=300)
            return response.json()["usage"]["completion_tokens"]

        async def batch(n: int) -> tuple[int, float]:
            async with httpx.AsyncClient() as client:
                start = time.perf_counter()
                tokens = await asyncio.gather(*[one(client, i) for i in range(n)])
                return sum(tokens), time.perf_counter() - start

        for n in (1, 8):
            tokens, wall = asyncio.run(batch(n))
            print(f"local SmolLM2-135M via llama-server, {n} concurrent: {tokens} tokens in"
                  f" {wall:.1f} s = {tokens / wall:.0f} tokens/s")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=20_000)
    parser.add_argument("--concurrency", type=int, default=64)
    parser.add_argument("--delay-ms", type=float, default=20.0)
    parser.add_argument("--sequential-calls", type=int, default=300,
                        help="the sequential baseline is slow: time this many calls")
    parser.add_argument("--thread-calls", type=int, default=5_000)
    parser.add_argument("--llm", action="store_true", help="also measure the local model")
    args = parser.parse_args()

    port = free_port()
    stub = _stub(port, args.delay_ms)
    base_url = f"http://127.0.0.1:{port}/v1"
    try:
        with tempfile.TemporaryDirectory() as tmp:
            engine, answers, cases = _database(Path(tmp) / "bench.db", args.calls)
            # A short run first, so that imports and connecting are not timed.
            _runner(*_database(Path(tmp) / "warm.db", 200), base_url, args.concurrency)
            print(f"{args.calls:,} jury calls, stub answering in {args.delay_ms:g} ms,"
                  f" concurrency {args.concurrency}, {os.cpu_count()} cores, {_load()}")
            stub_cpu = _cpu_s(stub.pid)
            record, wall, cpu = _runner(engine, answers, cases, base_url, args.concurrency)
            stub_cpu = _cpu_s(stub.pid) - stub_cpu
            assert record["done"] == args.calls and record["failed"] == 0, record
            _row("clinieval runner (cache + SQLite writes)", args.calls, wall, cpu)
            label = "  the stub server meanwhile (its own process)"
            print(f"{label:<46} {stub_cpu / args.calls * 1e3:7.3f} ms CPU/call (at most"
                  f" {args.calls / stub_cpu:,.0f} calls/s on one idle core)")
            url = f"{base_url}/chat/completions"
            _row("baseline: sequential blocking loop", args.sequential_calls,
                 *_sequential(url, args.sequential_calls)[1:])
            _row(f"baseline: {args.concurrency} threads, blocking client", args.thread_calls,
                 *_threads(url, args.thread_calls, args.concurrency)[1:])
            record, wall, cpu = _runner(engine, answers, cases, base_url, args.concurrency)
            assert record["skipped"] == args.calls
            print(f"{'resume the finished run (nothing left to call)':<46} {wall:8.2f} s"
                  f" ({cpu:.2f} s CPU)")
            record, wall, cpu = _runner(engine, answers, cases, base_url, args.concurrency,
                                        run_id="again")
            assert record["cached"] == args.calls and record["done"] == 0
            print(f"{'a new run of the same calls, all from cache':<46} {wall:8.2f} s"
                  f" ({cpu:.2f} s CPU)")
            print(_load())
    finally:
        stub.terminate()
        stub.wait(10)
    if args.llm:
        _local_model_speed()


if __name__ == "__main__":
    main()
