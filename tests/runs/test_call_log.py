"""The call log (issue 31 §3): every attempt at a call is a row with its
prompt (stored once per hash), template, settings, endpoint, times, status,
error, tokens and cost. A run killed mid-way (a real subprocess, SIGKILL)
leaves a row for every call that reached the endpoint, and what the calls it
repeats after the kill cost is counted as spent, checked against sums taken
from the database by hand. Real local stub endpoint, SQLite and PostgreSQL."""

from __future__ import annotations

import hashlib
import json
import os
import signal
import subprocess
import sys
import time
from importlib import resources
from pathlib import Path

import numpy as np
import pytest

from clinieval.audit import audit
from clinieval.io.importer import import_snapshot
from clinieval.providers.stub import Reply, StubServer, answering, completion_body
from clinieval.runs.keys import canonical
from clinieval.storage import db
from clinieval.testing import tiny_snapshot
from tests.runs.test_runs import _ok
from tests.runs.test_runs import _rows as _sql

PRICES = (2.0, 8.0)  # USD per million input / output tokens
CRITERIA = "harmlessness,accuracy"


def _model(tmp_path: Path, server: StubServer, name: str, **extra) -> Path:
    lines = [f'id = "{name}"', 'version = "stub-1"', 'name = "stub"',
             f'base_urls = ["{server.base_url}"]'] + [f"{k} = {v}" for k, v in extra.items()]
    lines += ["[prices]", f"input_per_m = {PRICES[0]}", f"output_per_m = {PRICES[1]}",
              "[generation]", "max_tokens = 200", "seed = 7"]
    path = tmp_path / f"{name}.toml"
    path.write_text("\n".join(lines) + "\n")
    return path


@pytest.fixture
def loaded(db_url):
    engine = db.make_engine(db_url)
    db.upgrade(engine)
    import_snapshot(engine, tiny_snapshot())
    engine.dispose()
    return db_url


def _cost(tin: int, tout: int) -> float:
    return (tin * PRICES[0] + tout * PRICES[1]) / 1e6


def test_every_call_is_logged_with_its_prompt_once_settings_endpoint_and_cost(loaded, tmp_path):
    url = loaded
    with StubServer(answering()) as server:
        stub = _model(tmp_path, server, "stub")
        _ok("generate", "--model", stub, "--samples", "2", "--database-url", url)
        _ok("generate", "--model", stub, "--samples", "2", "--database-url", url, "--no-cache")
    attempts = _sql(url, "SELECT a.run_id, a.status, a.endpoint, a.tries, a.input_tokens,"
                         " a.output_tokens, a.cost_usd, s.settings, a.template,"
                         " a.template_hash, p.messages, a.started_at <= a.ended_at"
                         " FROM llm_call_attempts a JOIN llm_prompts p USING (prompt_hash)"
                         " JOIN llm_settings s USING (settings_hash)")
    # 2 cases x 2 samples, twice (the second run calls again: --no-cache)
    assert len(attempts) == 8 and len({a[0] for a in attempts}) == 2
    assert {a[1] for a in attempts} == {"ok"}
    assert {a[2] for a in attempts} == {server.base_url}
    assert all(a[3] == 1 and a[6] == pytest.approx(_cost(a[4], a[5])) and a[11]
               for a in attempts)
    # both samples of a case and both runs send the same messages: one row per case
    [(prompts,)] = _sql(url, "SELECT COUNT(*) FROM llm_prompts")
    assert prompts == 2
    [(settings,)] = _sql(url, "SELECT COUNT(*) FROM llm_settings")
    assert settings == 2  # a seed per sample, shared by both runs
    seeds = sorted(json.loads(a[7])["seed"] for a in attempts)
    assert len(set(seeds)) == 2  # a seed per sample
    bundled = resources.files("clinieval.runs.prompts").joinpath("generate.toml").read_bytes()
    assert {(a[8], a[9]) for a in attempts} == {("generate", hashlib.sha256(bundled).hexdigest())}
    cases = dict(_sql(url, "SELECT case_id, prompt FROM cases"))
    for messages in {a[10] for a in attempts}:
        user = json.loads(messages)[-1]["content"]
        assert any(prompt in user for prompt in cases.values())
    # the run's spent cost is the sum of its attempts'
    for run_id, spent in _sql(url, "SELECT run_id, cost_usd FROM llm_runs"):
        assert spent == pytest.approx(sum(a[6] for a in attempts if a[0] == run_id))


def test_a_cache_hit_is_logged_as_one_that_spent_nothing(loaded, tmp_path):
    url = loaded
    with StubServer(answering()) as server:
        judge = _model(tmp_path, server, "judge")
        _ok("generate", "--model", judge, "--samples", "1", "--database-url", url)
        rubric = ("judge", "rubric", "--judge", judge, "--model-id", "judge", "--criteria",
                  CRITERIA, "--database-url", url)
        _ok(*rubric)
        calls = len(server.requests)
        _ok(*rubric, "--jurors", "2")  # juror 0's calls come from the cache
        assert len(server.requests) - calls == 2
    [second] = [run for run, settings in _sql(url, "SELECT run_id, settings FROM llm_runs")
                if json.loads(settings).get("jurors") == 2]
    rows = _sql(url, f"SELECT run_id, status, cost_usd FROM llm_call_attempts"
                     f" WHERE run_id = '{second}'")
    assert sorted(s for _, s, _ in rows) == ["cached", "cached", "ok", "ok"]
    assert all(c == 0 for _, s, c in rows if s == "cached")


def test_failed_attempts_keep_their_error_cause_endpoint_and_tries(loaded, tmp_path):
    url = loaded
    with StubServer(answering()) as server:
        _ok("generate", "--model", _model(tmp_path, server, "stub"), "--database-url", url)
    with StubServer(lambda _r, _n: Reply(500, b'{"error": "down"}')) as down:
        broken = _model(tmp_path, down, "broken", max_attempts=2)
        _ok("judge", "jury", "--judge", broken, "--model-id", "stub", "--database-url", url,
            "--skip-preflight", "--allow-failures")
        sent = len(down.requests)
    rows = _sql(url, "SELECT status, cause, error, endpoint, tries, cost_usd"
                     " FROM llm_call_attempts WHERE run_id LIKE 'jury-%'")
    assert rows and {r[:2] for r in rows} == {("failed", "HTTP 500")}
    assert all("500" in r[2] and r[4] == 2 and r[5] == 0 for r in rows)
    # the endpoint that last failed; none when the breaker had taken it out
    assert all(r[3] == (None if "every replica is out" in r[2] else down.base_url)
               for r in rows)
    assert any(r[3] == down.base_url for r in rows)
    # a try the breaker refused never went out
    assert sum(r[4] for r in rows) >= sent > 0


KILL_SCRIPT = """
import sys
from clinieval.cli import main
sys.argv = ["clinieval", *sys.argv[1:]]
main()
"""


def test_calls_repeated_after_a_sigkill_are_logged_and_counted_as_spent(loaded, tmp_path):
    """A rubric run (parse retries 1, four calls in flight) answers its first
    six calls, then sends unreadable verdicts (paid for, their retries go
    out) and then hangs. Killed there, the database holds every call the
    server received: the answered ones with their cost, the hanging ones
    open. Started again against a healthy server, the run repeats every
    unfinished task; what the run spent is then the sum over all its
    attempts, above the list price of its judgments by exactly the calls
    whose tasks the kill lost."""
    url = loaded
    # distinct answers: no two rubric calls share a cache key
    with StubServer(lambda _r, n: Reply(200, completion_body(f"Answer {n}."))) as server:
        _ok("generate", "--model", _model(tmp_path, server, "stub"), "--samples", "10",
            "--database-url", url)
    fine = answering()
    unreadable = Reply(200, completion_body("no verdict here", prompt_tokens=50))

    def flaky(request: dict, n: int) -> Reply:
        if n < 6:
            return fine(request, n)
        return unreadable if n < 10 else Reply(hang=True)

    args = ("judge", "rubric", "--model-id", "stub", "--criteria", CRITERIA,
            "--parse-retries", "1", "--database-url", url, "--skip-preflight")
    with StubServer(flaky) as bad:
        judge = _model(tmp_path, bad, "judge", concurrency=4, max_concurrency=4)
        proc = subprocess.Popen([sys.executable, "-c", KILL_SCRIPT, *args, "--judge", judge],
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                env=os.environ | {"COLUMNS": "120"})
        deadline = time.monotonic() + 120
        fresh = ("SELECT COUNT(*) FROM llm_call_attempts WHERE status <> 'cached'"
                 " AND run_id LIKE 'rubric-%'")
        seen, since = -1, time.monotonic()
        while (seen <= 10 or time.monotonic() - since < 1.0
               or _sql(url, fresh)[0][0] < seen):
            assert time.monotonic() < deadline and proc.poll() is None
            if len(bad.requests) != seen:
                seen, since = len(bad.requests), time.monotonic()
            time.sleep(0.05)
        proc.send_signal(signal.SIGKILL)
        proc.wait(10)
        sent_first = len(bad.requests)
    # every call that reached the server is a row: answered (6 fine, 4 unreadable) or open
    before = dict(_sql(url, "SELECT status, COUNT(*) FROM llm_call_attempts"
                            " WHERE run_id LIKE 'rubric-%' GROUP BY status"))
    assert sum(before.values()) == sent_first and before["ok"] == 10
    assert before["open"] == sent_first - 10 > 0
    committed = {k for (k,) in _sql(url, "SELECT task_key FROM llm_run_calls"
                                         " WHERE run_id LIKE 'rubric-%'")}
    assert len(committed) == 6
    [(run_id, status)] = _sql(url, "SELECT run_id, status FROM llm_runs WHERE judge_kind ="
                                   " 'rubric'")
    assert status == "running"

    with StubServer(answering()) as good:
        judge = _model(tmp_path, good, "judge", concurrency=4, max_concurrency=4)
        _ok(*args, "--judge", judge)
        sent_second = len(good.requests)
    attempts = _sql(url, f"SELECT start, status, task_key, input_tokens, output_tokens,"
                         f" cost_usd FROM llm_call_attempts WHERE run_id = '{run_id}'")
    assert sum(a[1] != "cached" for a in attempts) == sent_first + sent_second
    assert {a[1] for a in attempts if a[0] == 1} == {"ok", "interrupted"}
    assert {a[0] for a in attempts} == {1, 2}
    # by hand: spent is every attempt's cost; the list price is the judgments'
    spent_by_hand = sum(_cost(a[3], a[4]) for a in attempts if a[1] == "ok")
    [(list_by_hand,)] = _sql(url, f"SELECT SUM(cost_usd) FROM judgments WHERE run_id ="
                                  f" '{run_id}'")
    lost_by_hand = sum(_cost(a[3], a[4]) for a in attempts
                       if a[0] == 1 and a[1] == "ok" and a[2] not in committed)
    assert lost_by_hand > 0
    [(spent,)] = _sql(url, f"SELECT cost_usd FROM llm_runs WHERE run_id = '{run_id}'")
    assert spent == pytest.approx(spent_by_hand)
    assert spent - list_by_hand == pytest.approx(lost_by_hand)
    cost = audit(url, bootstrap=50, min_n=1)["automated_judges"].tables["cost"]
    rubric = cost.set_index("judge_kind").loc["rubric"]
    assert rubric["spent_usd"] == pytest.approx(spent_by_hand)
    assert rubric["list_price_usd"] == pytest.approx(list_by_hand)


def test_a_prompts_override_is_the_template_the_call_log_records(loaded, tmp_path):
    url = loaded
    folder = tmp_path / "ours"  # not prompts/ beside the model file, which is used unasked
    folder.mkdir()
    bundled = resources.files("clinieval.runs.prompts").joinpath("generate.toml").read_text()
    (folder / "generate.toml").write_text(bundled + "\n# our own copy\n")
    with StubServer(answering()) as server:
        stub = _model(tmp_path, server, "stub")
        _ok("generate", "--model", stub, "--database-url", url)
        _ok("generate", "--model", stub, "--database-url", url, "--no-cache",
            "--prompts", folder)
    by_run = dict(_sql(url, "SELECT DISTINCT run_id, template_hash FROM llm_call_attempts"))
    assert sorted(by_run.values()) == sorted([
        hashlib.sha256(bundled.encode()).hexdigest(),
        hashlib.sha256((folder / "generate.toml").read_bytes()).hexdigest()])


def test_the_prompt_hash_is_the_sha256_of_the_messages_as_stored(loaded, tmp_path):
    url = loaded
    with StubServer(answering()) as server:
        _ok("generate", "--model", _model(tmp_path, server, "stub"), "--database-url", url)
    for digest_, messages in _sql(url, "SELECT prompt_hash, messages FROM llm_prompts"):
        assert hashlib.sha256(messages.encode()).hexdigest() == digest_
        assert canonical(json.loads(messages)) == messages


def test_latency_per_endpoint_is_the_call_logs_by_hand(loaded, tmp_path):
    """Two replicas, one slower: the report's p50/p95 per run, model and
    endpoint are numpy's percentiles of the answered attempts' seconds, read
    from the database by hand, with their n."""
    url = loaded
    fine = answering()

    def slow(request, n):
        time.sleep(0.03)
        return fine(request, n)

    with StubServer(answering()) as fast, StubServer(slow) as late:
        lines = [f'base_urls = ["{fast.base_url}", "{late.base_url}"]', "concurrency = 2"]
        for name in ("cand", "judge"):
            (tmp_path / f"{name}.toml").write_text(
                f'id = "{name}"\nversion = "v1"\nname = "stub"\n' + "\n".join(lines) + "\n")
        _ok("generate", "--model", tmp_path / "cand.toml", "--samples", "4",
            "--database-url", url)
        _ok("judge", "rubric", "--judge", tmp_path / "judge.toml", "--model-id", "cand",
            "--criteria", CRITERIA, "--database-url", url, "--skip-preflight")
    rows = _sql(url, "SELECT COALESCE(r.judge_kind, r.kind), r.model_id, a.endpoint,"
                     " a.latency_s FROM llm_call_attempts a JOIN llm_runs r USING (run_id)"
                     " WHERE a.status = 'ok' AND a.endpoint IS NOT NULL")
    by_hand: dict[tuple, list[float]] = {}
    for run, model, endpoint, seconds in rows:
        by_hand.setdefault((run, model, endpoint), []).append(seconds)
    assert {k[2] for k in by_hand} == {fast.base_url, late.base_url}
    table = audit(url, bootstrap=50, min_n=1)["automated_judges"].tables["latency_by_endpoint"]
    assert len(table) == len(by_hand)
    for row in table.itertuples():
        seconds = by_hand[(row.run, row.model, row.endpoint)]
        assert row.n == len(seconds)
        assert row.p50_s == pytest.approx(np.percentile(seconds, 50))
        assert row.p95_s == pytest.approx(np.percentile(seconds, 95))
    slow_p50 = table[table["endpoint"] == late.base_url]["p50_s"]
    assert (slow_p50 >= 0.03).all()
