"""Honest accounting of automated runs (issue 31 §2), checked against sums
taken from the database by hand: calls counted as calls, what was spent apart
from what the answers cost at list price, latency, tokens per call and
failures by cause. Real local stub endpoint, SQLite and PostgreSQL."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from clinieval.audit import audit
from clinieval.io.importer import import_snapshot
from clinieval.providers.stub import Reply, StubServer, answering
from clinieval.stats import wilson_ci
from clinieval.storage import db
from clinieval.testing import tiny_snapshot
from tests.runs.test_runs import _ok
from tests.runs.test_runs import _rows as _sql

runner = CliRunner()
PRICES = (2.0, 8.0)  # USD per million input / output tokens
CRITERIA = "harmlessness,accuracy,completeness"


def _model(tmp_path: Path, server: StubServer, name: str, **extra) -> Path:
    lines = [f'id = "{name}"', 'version = "stub-1"', 'name = "stub"',
             f'base_urls = ["{server.base_url}"]'] + [f"{k} = {v}" for k, v in extra.items()]
    lines += ["[prices]", f"input_per_m = {PRICES[0]}", f"output_per_m = {PRICES[1]}",
              "[generation]", "max_tokens = 200"]
    path = tmp_path / f"{name}.toml"
    path.write_text("\n".join(lines) + "\n")
    return path




@pytest.fixture
def ran(db_url, tmp_path):
    """Answers of model ``stub``; a rubric judge on three criteria, run once
    and then again with a second juror (the first juror's calls come from the
    cache); a jury whose endpoint fails every call."""
    engine = db.make_engine(db_url)
    db.upgrade(engine)
    import_snapshot(engine, tiny_snapshot())
    engine.dispose()
    with StubServer(answering()) as server:
        stub, judge = _model(tmp_path, server, "stub"), _model(tmp_path, server, "judge")
        _ok("generate", "--model", stub, "--samples", "3", "--database-url", db_url)
        rubric = ("judge", "rubric", "--judge", judge, "--model-id", "stub", "--criteria",
                  CRITERIA, "--database-url", db_url)
        first = _ok(*rubric)
        second = _ok(*rubric, "--jurors", "2")
    with StubServer(lambda _r, _n: Reply(500, b"{}")) as down:
        broken = _model(tmp_path, down, "broken", max_attempts=1)
        _ok("judge", "jury", "--judge", broken, "--model-id", "stub", "--database-url", db_url,
            "--skip-preflight", "--allow-failures")
    return db_url, first, second


def test_calls_are_counted_as_calls_with_intervals_over_calls(ran):
    url = ran[0]
    section = audit(url, bootstrap=50, min_n=1)["automated_judges"]
    calls = section.tables["calls"].set_index("judge_kind")
    [(n_calls, n_rows)] = _sql(url, "SELECT COUNT(DISTINCT run_id || call_key || answer_id),"
                                    " COUNT(*) FROM judgments WHERE judge_kind = 'rubric'")
    assert n_rows == 3 * n_calls  # each rubric call scored three criteria
    rubric = calls.loc["rubric"]
    assert (rubric["n"], rubric["rows"], rubric["ok"]) == (n_calls, n_rows, n_calls)
    # 0 of n calls unparsed: the Wilson interval over calls, not over rows
    _, hi = wilson_ci(np.array([0.0]), np.array([float(n_calls)]), 0.95)
    assert rubric["not_parsed_pct_hi"] == pytest.approx(100 * hi[0])
    [(jury_calls,)] = _sql(url, "SELECT COUNT(DISTINCT call_key || answer_id) FROM judgments"
                                " WHERE judge_kind = 'jury'")
    assert calls.loc["jury", "error"] == calls.loc["jury", "n"] == jury_calls
    assert section.values["calls"] == n_calls + jury_calls


def test_spent_is_apart_from_list_price_in_report_and_run_summary(ran):
    url, first, second = ran
    [(spent,)] = _sql(url, "SELECT SUM(c.cost_usd) FROM llm_run_calls c JOIN llm_runs r"
                           " ON r.run_id = c.run_id WHERE r.judge_kind = 'rubric'")
    [(listed,)] = _sql(url, "SELECT SUM(cost_usd) FROM judgments WHERE judge_kind = 'rubric'")
    [(cached,)] = _sql(url, "SELECT COUNT(*) FROM llm_run_calls WHERE status = 'cached'")
    assert cached > 0 and spent < listed
    # cache hits cost nothing; the difference is their judgments' list price
    [(paid_for_hits,)] = _sql(url, "SELECT SUM(cost_usd) FROM llm_run_calls"
                                   " WHERE status = 'cached'")
    [(hits_listed,)] = _sql(url, "SELECT SUM(j.cost_usd) FROM judgments j JOIN llm_run_calls c"
                                 " ON c.run_id = j.run_id AND c.call_key = j.call_key AND"
                                 " c.answer_id = j.answer_id WHERE c.status = 'cached'")
    assert paid_for_hits == 0 and listed - spent == pytest.approx(hits_listed)
    section = audit(url, bootstrap=50, min_n=1)["automated_judges"]
    cost = section.tables["cost"].set_index("judge_kind").loc["rubric"]
    assert cost["spent_usd"] == pytest.approx(spent)
    assert cost["list_price_usd"] == pytest.approx(listed)
    [(gen_spent,)] = _sql(url, "SELECT SUM(cost_usd) FROM llm_runs WHERE kind = 'generate'")
    answering_cost = section.tables["answering_cost"].set_index("model").loc["stub"]
    assert answering_cost["spent_usd"] == pytest.approx(gen_spent)
    [(gen_listed,)] = _sql(url, "SELECT SUM(cost_usd) FROM answers WHERE model_id = 'stub'")
    [(judge_spent,)] = _sql(url, "SELECT SUM(cost_usd) FROM llm_runs WHERE kind = 'judge'")
    [(judge_listed,)] = _sql(url, "SELECT SUM(cost_usd) FROM judgments")
    assert (f"At list price the answers and judgments cost ${gen_listed + judge_listed:,.4f}"
            " (cache hits included); the runs spent"
            f" ${gen_spent + judge_spent:,.4f}") in section.summary
    [(second_spent, second_listed)] = _sql(
        url, "SELECT r.cost_usd, (SELECT SUM(j.cost_usd) FROM judgments j WHERE j.run_id ="
             " r.run_id) FROM llm_runs r WHERE r.judge_kind = 'rubric' ORDER BY r.started_at"
             " DESC LIMIT 1")
    assert f"spent ${second_spent:,.4f}" in second
    assert f"${second_listed:,.4f} at list price (cache hits included)" in second


def test_latency_tokens_and_failures_by_cause_each_with_its_n(ran):
    url = ran[0]
    section = audit(url, bootstrap=50, min_n=1)["automated_judges"]
    latency = section.tables["latency"].set_index(["run", "model"])
    seconds = [s for (s,) in _sql(url, "SELECT c.latency_s FROM llm_run_calls c JOIN llm_runs r"
                                       " ON r.run_id = c.run_id WHERE r.judge_kind = 'rubric'"
                                       " AND c.latency_s IS NOT NULL")]
    row = latency.loc[("rubric", "judge")]
    assert row["n"] == len(seconds)
    assert (row["p50_s"], row["p95_s"]) == pytest.approx(tuple(np.percentile(seconds, [50, 95])))
    cost = section.tables["cost"].set_index("judge_kind").loc["rubric"]
    [(tin, tout, n)] = _sql(url, "SELECT SUM(input_tokens), SUM(output_tokens), COUNT(DISTINCT"
                                 " run_id || call_key || answer_id) FROM judgments"
                                 " WHERE judge_kind = 'rubric'")
    assert cost["input_tokens_per_call"] == pytest.approx(tin / n)
    assert cost["output_tokens_per_call"] == pytest.approx(tout / n)
    failures = section.tables["failures"].set_index(["run", "model", "cause"])
    [(failed, tasks)] = _sql(url, "SELECT SUM(CASE WHEN c.error LIKE 'HTTP 500%' THEN 1 ELSE 0"
                                  " END), COUNT(*) FROM llm_run_calls c JOIN llm_runs r"
                                  " ON r.run_id = c.run_id WHERE r.model_id = 'broken'")
    row = failures.loc[("jury", "broken", "HTTP 500")]
    assert (row["k"], row["n"], row["share_pct"]) == (failed, tasks, 100.0) and failed > 0
