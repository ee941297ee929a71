"""Runs and judges end to end through the CLI and the library, against a real
local OpenAI-compatible server (loopback) on SQLite and PostgreSQL: counts,
parse statuses, costs, the cache, resuming after Ctrl-C and SIGKILL."""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest
import sqlalchemy as sa
from hypothesis import given
from hypothesis import strategies as st
from typer.testing import CliRunner

from clinieval.cli import app
from clinieval.contract import vocabulary
from clinieval.errors import InputError
from clinieval.io.importer import import_snapshot
from clinieval.providers import load_model_file
from clinieval.providers.stub import Reply, StubServer, answering, completion_body
from clinieval.runs import GenerateJob, JuryJudge, execute, load_rules, resolve_pair, store
from clinieval.runs.data import AnswerText, load_cases
from clinieval.runs.keys import call_key, canonical
from clinieval.storage import db
from clinieval.storage.schema.runs import RUN_TABLES
from clinieval.testing import tiny_snapshot

runner = CliRunner()
PRICES = (2.0, 8.0)  # USD per million input / output tokens


def _model(tmp_path: Path, server: StubServer, name: str = "stub", **extra) -> Path:
    lines = [f'id = "{name}"', 'version = "stub-1"', 'name = "stub"',
             f'base_urls = ["{server.base_url}"]'] + [f"{k} = {v}" for k, v in extra.items()]
    lines += ["[prices]", f"input_per_m = {PRICES[0]}", f"output_per_m = {PRICES[1]}",
              "[generation]", "max_tokens = 50"]
    path = tmp_path / f"{name}.toml"
    path.write_text("\n".join(lines) + "\n")
    return path


def _calls(server: StubServer) -> int:
    """Calls the run made, not counting the pre-flight probe before it."""
    return sum(r.get("max_tokens") != 1 or r.get("messages") != PROBE for r in server.requests)


PROBE = [{"role": "user", "content": "ping"}]


def _ok(*args: str) -> str:
    result = runner.invoke(app, [str(a) for a in args])
    assert result.exit_code == 0, result.output
    return " ".join(result.output.split())


def _rows(url: str, sql: str) -> list[tuple]:
    engine = db.make_engine(url)
    try:
        with engine.connect() as conn:
            return [tuple(r) for r in conn.execute(sa.text(sql))]
    finally:
        engine.dispose()


def _runs(url: str) -> dict[str, dict]:
    engine = db.make_engine(url)
    with engine.connect() as conn:
        rows = conn.execute(RUN_TABLES["llm_runs"].select()).mappings().all()
    engine.dispose()
    return {r["judge_kind"] or r["kind"]: dict(r) for r in rows}


@pytest.fixture
def loaded(db_url):
    engine = db.make_engine(db_url)
    db.upgrade(engine)
    import_snapshot(engine, tiny_snapshot())
    engine.dispose()
    return db_url


def test_generate_and_every_judge_kind_store_counted_costed_rows(loaded, tmp_path):
    url = loaded
    with StubServer(answering()) as server:
        model = _model(tmp_path, server)
        gen = ("generate", "--model", model, "--samples", "2", "--temperature", "0.2",
               "--temperature", "1.0", "--database-url", url)
        _ok(*gen)
        answers = _rows(url, "SELECT sample_index, temperature, cost_usd, tokens FROM answers"
                             " WHERE model_id = 'stub'")
        assert len(answers) == 2 * 2 * 2  # cases x temperatures x samples
        assert {(a[0], a[1]) for a in answers} == {(s, t) for s in (0, 1) for t in (0.2, 1.0)}
        calls = _calls(server)
        assert "(8 were finished before this start)" in _ok(*gen)  # resumed: nothing to do
        assert _calls(server) == calls

        judge = ("--judge", model, "--model-id", "stub", "--database-url", url)
        _ok("judge", "jury", *judge, "--jurors", "3")
        _ok("judge", "rubric", *judge, "--criteria", "harmlessness,accuracy")
        out = _ok("judge", "pairwise", *judge)
        rules = tmp_path / "rules.json"
        rules.write_text(json.dumps([
            {"case_id": "case-1", "rule_id": "r1", "text": "Mentions ECG.", "points": 5},
            {"case_id": "case-1", "rule_id": "r2", "text": "Advises waiting.", "points": -3}]))
        _ok("judge", "rule", *judge, "--rules", rules)

    kinds = dict(_rows(url, "SELECT judge_kind, COUNT(*) FROM judgments WHERE run_id IS NOT NULL"
                            " GROUP BY judge_kind"))
    assert kinds == {"jury": 8 * 3 * 3, "rubric": 8 * 2, "pairwise": 4 * 2, "rule": 4 * 2}
    statuses = _rows(url, "SELECT DISTINCT parse_status FROM judgments WHERE run_id IS NOT NULL")
    assert statuses == [("ok",)]
    # The stub answers the first enum value: jury 1, rubric -2, always "answer 1".
    assert _rows(url, "SELECT DISTINCT score FROM judgments WHERE judge_kind = 'jury'") == [(1,)]
    assert _rows(url, "SELECT DISTINCT score FROM judgments WHERE judge_kind = 'rubric'") == [(-2,)]
    assert "orders disagree: 4" in out and "verdict tie: 4" in out
    assert sorted(_rows(url, "SELECT shown_first, choice, agreement FROM judgments WHERE"
                             " judge_kind = 'pairwise'")) == [("A", "A", False)] * 4 + [
        ("B", "B", False)] * 4
    assert sorted(_rows(url, "SELECT criterion_id, points, score FROM judgments WHERE"
                             " judge_kind = 'rule'")) == [("r1", 5, 1)] * 4 + [("r2", -3, 1)] * 4

    runs = _runs(url)
    for kind, run in runs.items():
        assert run["status"] == "finished" and run["failed"] == run["unparsed"] == 0, kind
        expected = (run["input_tokens"] * PRICES[0] + run["output_tokens"] * PRICES[1]) / 1e6
        assert run["cost_usd"] == pytest.approx(expected), kind
    for kind in vocabulary.JUDGE_KINDS:
        [(cost, tin)] = _rows(url, "SELECT SUM(cost_usd), SUM(input_tokens) FROM judgments"
                                   f" WHERE judge_kind = '{kind}'")
        assert cost == pytest.approx(runs[kind]["cost_usd"]) and tin == runs[kind]["input_tokens"]
    out = _ok("audit", url, "--out", tmp_path / "report", "--bootstrap", "50", "--min-n", "1")
    assert (tmp_path / "report" / "report.html").exists()


def test_unparsed_output_is_kept_raw_counted_and_retried_as_asked(loaded, tmp_path):
    url = loaded
    with StubServer(answering()) as good:
        _ok("generate", "--model", _model(tmp_path, good), "--database-url", url)
    with StubServer(lambda _r, _n: Reply(body=completion_body("I think it is fine."))) as bad:
        judge = _model(tmp_path, bad, name="judge")
        _ok("judge", "jury", "--judge", judge, "--model-id", "stub", "--parse-retries", "2",
            "--database-url", url)
    assert _calls(bad) == 2 * 3  # two answers, three tries each
    assert {r["seed"] for r in bad.requests if r.get("messages") != PROBE} == {0, 1, 2}
    rows = _rows(url, "SELECT parse_status, score, raw_output FROM judgments")
    assert rows == [("unparsed", None, "I think it is fine.")] * 2 * 3  # 3 axes each
    run = _runs(url)["jury"]
    assert (run["unparsed"], run["parse_retries"], run["done"]) == (2, 4, 2)


def test_a_failing_endpoint_is_recorded_and_retried_on_the_next_start(loaded, tmp_path):
    url = loaded
    with StubServer(lambda _r, _n: Reply(503, b"{}")) as down:
        model = _model(tmp_path, down, max_attempts=2)
        out = _ok("generate", "--model", model, "--database-url", url, "--skip-preflight",
                  "--allow-failures")
    assert "2 failed" in out and _calls(down) == 4
    assert "failures by cause" in out and "HTTP 503" in out
    assert _rows(url, "SELECT COUNT(*) FROM answers WHERE model_id = 'stub'") == [(0,)]
    [(error,)] = set(_rows(url, "SELECT error FROM llm_run_calls"))
    assert "HTTP 503" in error and "after 2 tries" in error
    with StubServer(answering()) as up:
        model.write_text(model.read_text().replace(down.base_url, up.base_url))
        _ok("generate", "--model", model, "--database-url", url)
        judge = _model(tmp_path, up, name="judge")
    assert _calls(up) == 2
    run = _runs(url)["generate"]
    assert (run["done"], run["failed"], run["status"]) == (2, 0, "finished")
    with StubServer(lambda _r, _n: Reply(500, b"{}")) as down:
        judge.write_text(judge.read_text().replace(up.base_url, down.base_url)
                         .replace("[prices]", "max_attempts = 1\n[prices]"))
        _ok("judge", "jury", "--judge", judge, "--model-id", "stub", "--database-url", url,
            "--skip-preflight", "--allow-failures")
    rows = _rows(url, "SELECT parse_status, score, reason FROM judgments")
    assert len(rows) == 6 and {r[:2] for r in rows} == {("error", None)}
    assert "call failed: HTTP 500" in rows[0][2]


def test_dry_run_calls_nothing_and_no_cache_calls_again(loaded, tmp_path):
    url = loaded
    with StubServer(answering()) as server:
        model = _model(tmp_path, server)
        out = _ok("generate", "--model", model, "--database-url", url, "--dry-run",
                  "--samples", "3")
        assert _calls(server) == 0
        assert "│ stub │ 6 │ 0 │" in out.replace("  ", " ") or " 6 " in out
        _ok("generate", "--model", model, "--database-url", url)
        _ok("generate", "--model", model, "--database-url", url, "--no-cache")
        assert _calls(server) == 4
        out = _ok("generate", "--model", model, "--database-url", url, "--dry-run")
        assert _calls(server) == 4
    assert _rows(url, "SELECT COUNT(*), COUNT(DISTINCT text) FROM answers WHERE model_id ="
                      " 'stub'") == [(4, 1)]
    assert len(_rows(url, "SELECT run_id FROM llm_runs")) == 2


def test_an_interrupted_run_resumes_without_repeating_finished_calls(tmp_path):
    url = f"sqlite:///{tmp_path / 'r.db'}"
    engine = db.make_engine(url)
    db.upgrade(engine)
    import_snapshot(engine, tiny_snapshot())
    with StubServer(answering(0.05)) as server:
        spec = load_model_file(_model(tmp_path, server, concurrency=2))
        job = GenerateJob(spec, load_cases(engine), samples=10)

        async def interrupted():
            seen = []
            run = asyncio.create_task(execute(engine, job, watch=seen.append))
            while not seen or seen[0].done < 4:
                await asyncio.sleep(0.01)
            run.cancel()  # what Ctrl-C does to asyncio.run's main task
            with pytest.raises(asyncio.CancelledError):
                await run

        asyncio.run(interrupted())
        [(status, finished)] = _rows(url, "SELECT status, done FROM llm_runs")
        assert status == "interrupted" and 0 < finished < 20
        before = _calls(server)
        record = asyncio.run(execute(engine, job))
    assert _calls(server) - before == 20 - finished
    assert (record["status"], record["done"], record["skipped"]) == ("finished", 20, finished)
    assert _rows(url, "SELECT COUNT(*) FROM answers WHERE model_id = 'stub'") == [(20,)]


def test_a_killed_run_resumes_without_repeating_committed_calls(tmp_path):
    url = f"sqlite:///{tmp_path / 'k.db'}"
    engine = db.make_engine(url)
    db.upgrade(engine)
    import_snapshot(engine, tiny_snapshot())
    engine.dispose()
    with StubServer(answering(0.1)) as server:
        model = _model(tmp_path, server, concurrency=2)
        args = [sys.executable, "-c", "from clinieval.cli import main; main()", "generate",
                "--model", str(model), "--samples", "15", "--database-url", url]
        proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                env=os.environ | {"COLUMNS": "120"})
        deadline = time.monotonic() + 120
        while _rows(url, "SELECT COUNT(*) FROM llm_run_calls") < [(3,)]:
            assert time.monotonic() < deadline and proc.poll() is None
            time.sleep(0.05)
        proc.send_signal(signal.SIGKILL)
        proc.wait(10)
        [(committed,)] = _rows(url, "SELECT COUNT(*) FROM llm_run_calls")
        assert _rows(url, "SELECT status FROM llm_runs") == [("running",)]
        before = _calls(server)
        _ok("generate", "--model", model, "--samples", "15", "--database-url", url)
    assert _calls(server) - before == 30 - committed
    assert _rows(url, "SELECT status, done FROM llm_runs") == [("finished", 30)]


def test_a_killed_run_loses_at_most_its_open_tasks_and_repeats_no_committed_one(tmp_path):
    """The writer commits in small batches; while a commit cannot go through,
    workers stop starting tasks once ``concurrency + UNFLUSHED`` are started
    and uncommitted. A SIGKILL then loses exactly those, and the restart
    calls them again and nothing else."""
    path = tmp_path / "b.db"
    url = f"sqlite:///{path}"
    engine = db.make_engine(url)
    db.upgrade(engine)
    import_snapshot(engine, tiny_snapshot())
    engine.dispose()
    concurrency, tasks = 16, 2 * 600
    bound = concurrency + store.UNFLUSHED
    # 20 ms an answer: the run needs over a second for its 1,200 calls, so it cannot
    # finish between the check below and the lock (with 2 ms it once did, on a
    # loaded machine: all 1,200 committed before the lock was taken).
    with StubServer(answering(0.02)) as server:
        model = _model(tmp_path, server, concurrency=concurrency)
        args = [sys.executable, "-c", "from clinieval.cli import main; main()", "generate",
                "--model", str(model), "--samples", "600", "--database-url", url]
        proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 120
        while _rows(url, "SELECT COUNT(*) FROM llm_run_calls") < [(100,)]:
            assert time.monotonic() < deadline and proc.poll() is None
            time.sleep(0.02)
        lock = sqlite3.connect(path, isolation_level=None)
        lock.execute("BEGIN IMMEDIATE")  # the run's next commit waits (busy timeout 5 s)
        seen, stable_since = -1, time.monotonic()
        while time.monotonic() - stable_since < 0.7:
            if _calls(server) != seen:
                seen, stable_since = _calls(server), time.monotonic()
            time.sleep(0.05)
        proc.send_signal(signal.SIGKILL)
        proc.wait(10)
        lock.rollback()
        lock.close()
        [(committed,)] = _rows(url, "SELECT COUNT(*) FROM llm_run_calls")
        sent = _calls(server)
        assert committed < tasks and sent - committed == bound
        _ok("generate", "--model", model, "--samples", "600", "--database-url", url)
    assert _calls(server) - sent == tasks - committed
    assert _rows(url, "SELECT COUNT(*), COUNT(DISTINCT case_id || '/' || sample_index) FROM"
                      " answers WHERE model_id = 'stub'") == [(tasks, tasks)]
    assert _rows(url, "SELECT status, done FROM llm_runs") == [("finished", tasks)]


def test_a_refused_write_stops_the_run_with_its_error_instead_of_hanging(tmp_path):
    """Workers wait for slots that only commits free: when a commit fails,
    the run must end with that error (here: judgments of answers that are
    not in the database break a foreign key) and be recorded as failed."""
    url = f"sqlite:///{tmp_path / 'w.db'}"
    engine = db.make_engine(url)
    db.upgrade(engine)
    import_snapshot(engine, tiny_snapshot())
    [case_id] = [c.case_id for c in load_cases(engine)][:1]
    ghosts = [AnswerText(f"ghost-{i}", case_id, "nobody", "text", 0, None, None)
              for i in range(2 * store.UNFLUSHED)]
    with StubServer(answering()) as server:
        spec = load_model_file(_model(tmp_path, server, concurrency=2))
        job = JuryJudge(spec, ghosts, {case_id: "question"})
        start = time.monotonic()
        with pytest.raises(sa.exc.IntegrityError):
            asyncio.run(asyncio.wait_for(execute(engine, job), 90))
    assert time.monotonic() - start < 45  # not stopped by the timeout
    assert _rows(url, "SELECT status, done FROM llm_runs") == [("failed", 0)]


_JSON = st.recursive(st.none() | st.booleans() | st.integers() | st.text(max_size=5),
                     lambda inner: st.lists(inner, max_size=3)
                     | st.dictionaries(st.text(max_size=4), inner, max_size=3), max_leaves=8)


@given(version=st.text(max_size=8), sample=st.integers(0, 99),
       messages=st.lists(st.fixed_dictionaries({"role": st.sampled_from(["system", "user"]),
                                                "content": st.text(max_size=20)}), max_size=3),
       settings=st.dictionaries(st.text(max_size=6), _JSON, max_size=4))
def test_a_cache_key_is_the_hash_of_the_canonical_call_however_it_is_put_together(
        version, sample, messages, settings):
    whole = canonical({"model": version, "messages": messages, "settings": settings,
                       "sample": sample})
    expected = hashlib.sha256(whole.encode()).hexdigest()
    assert call_key(version, messages, settings, sample) == expected
    assert call_key(version, messages, settings, sample, canonical(settings)) == expected


def test_pair_resolution_by_hand():
    assert resolve_pair("A", "A") == "A"
    assert resolve_pair("A", "B") == "tie"
    assert resolve_pair("A", "B", inconsistent="drop") is None
    assert resolve_pair("tie", None) is None


def test_rules_file_errors_name_file_item_and_field(tmp_path):
    path = tmp_path / "rules.json"
    path.write_text(json.dumps([{"case_id": "c", "rule_id": "r", "text": "t", "points": 1},
                                {"case_id": "c", "rule_id": "r2", "text": "t"}]))
    with pytest.raises(InputError, match=r"rules.json, row 1, field 'points'"):
        load_rules(path)
    path.write_text(json.dumps([{"case_id": "c", "rule_id": "r", "text": "t", "points": 0}]))
    with pytest.raises(InputError, match="row 0.*points must not be 0"):
        load_rules(path)
    path.write_text(json.dumps([{"case_id": "c", "rule_id": "r", "text": "t", "points": 1}] * 2))
    with pytest.raises(InputError, match="row 1, field 'rule_id': duplicate"):
        load_rules(path)


def test_failed_calls_fail_the_command_with_their_causes_unless_allowed(loaded, tmp_path):
    url = loaded
    with StubServer(lambda _r, _n: Reply(503, b"{}")) as down:
        model = _model(tmp_path, down, max_attempts=1)
        result = runner.invoke(app, ["generate", "--model", str(model), "--database-url", url,
                                     "--skip-preflight"])
    out = " ".join(result.output.split())
    assert result.exit_code == 1, out
    assert "failures by cause" in out and "HTTP 503" in out
    assert "calls failed after their retries" in out and "--allow-failures" in out


def test_an_endpoint_that_does_not_answer_stops_the_run_before_any_call(loaded, tmp_path):
    url = loaded
    with StubServer(answering()) as gone:
        model = _model(tmp_path, gone)
        address = gone.base_url
    result = runner.invoke(app, ["generate", "--model", str(model), "--database-url", url])
    out = " ".join(result.output.split())
    assert result.exit_code == 1, out
    assert "endpoint did not answer" in out and address.split("//")[1].split("/")[0] in out
    assert _rows(url, "SELECT COUNT(*) FROM llm_runs") == [(0,)]
