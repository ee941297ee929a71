"""The whole automated path on a real model: SmolLM2-135M-Instruct served by
llama.cpp's server on loopback. Generate answers for 3 demo cases with two
sampling settings, judge them with the rubric judge, a jury of three (same
model, three seeds) and the pairwise judge, store everything and audit it.

A 135M model judges poorly; this checks the plumbing: counts, parse
statuses, costs and the cache. Skips when the model is not installed
(`.ci/setup-llm.sh`), fails instead with CLINIEVAL_REQUIRE_LLM=1 (CI).
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
import sqlalchemy as sa
from typer.testing import CliRunner

from clinieval.cli import app
from clinieval.contract import vocabulary
from clinieval.demo import demo_snapshot
from clinieval.io.importer import import_snapshot
from clinieval.providers import load_model_file, make_provider, model_spec
from clinieval.providers.llamacpp import LlamaServer
from clinieval.runs import GenerateJob, JuryJudge, RunOptions, execute
from clinieval.runs.data import CaseText, case_prompts, load_answers
from clinieval.storage import db
from tests.helpers import local_model

ROOT = Path(__file__).parents[2]
PRICES = (0.5, 1.5)
runner = CliRunner()


@pytest.fixture(scope="module")
def llama(tmp_path_factory):
    model = local_model()
    log = tmp_path_factory.mktemp("llama") / "server.log"
    with LlamaServer(model, parallel=4, ctx=16384, log=log) as server:
        yield server


def _model_file(path: Path, server: LlamaServer, model_id: str, max_tokens: int) -> Path:
    path.write_text(f"""id = "{model_id}"
version = "{server.model.gguf.name}"
name = "smollm2"
base_urls = ["{server.base_url}"]
concurrency = 4
timeout_s = 300
[prices]
input_per_m = {PRICES[0]}
output_per_m = {PRICES[1]}
[generation]
max_tokens = {max_tokens}
seed = 7
""")
    return path


def _ok(*args) -> str:
    result = runner.invoke(app, [str(a) for a in args])
    assert result.exit_code == 0, result.output
    return " ".join(result.output.split())


def _query(engine: sa.Engine, sql: str) -> list[tuple]:
    with engine.connect() as conn:
        return [tuple(row) for row in conn.execute(sa.text(sql))]


CASES = 3
"""Cases of the demo the whole-path test generates for, at two temperatures
(each judged by a rubric judge, a jury of three and pairwise): every
judgment costs up to 300 tokens of a real model, so the count sets the time
(10 cases took 361 s beside the rest of the suite, 5 took 154 s; 3 give
every kind of judgment, both temperatures and the cache all the same)."""


def test_generate_judge_store_and_audit_on_a_real_local_model(llama, tmp_path):
    url = f"sqlite:///{tmp_path / 'llm.db'}"
    engine = db.make_engine(url)
    db.upgrade(engine)
    import_snapshot(engine, demo_snapshot())
    candidate = _model_file(tmp_path / "cand.toml", llama, "smollm2-135m", 96)
    judge = _model_file(tmp_path / "judge.toml", llama, "smollm2-judge", 300)

    gen = ("generate", "--model", candidate, "--limit", str(CASES), "--temperature", "0.2",
           "--temperature", "1.0", "--database-url", url)
    _ok(*gen)
    [(gen_run, planned, done, tokens_out)] = _query(
        engine, "SELECT run_id, planned, done, output_tokens FROM llm_runs")
    assert (planned, done) == (2 * CASES, 2 * CASES) and tokens_out > 0
    answers = _query(engine, "SELECT temperature, tokens, length(text) FROM answers WHERE"
                             " model_id = 'smollm2-135m'")
    assert len(answers) == 2 * CASES and {a[0] for a in answers} == {0.2, 1.0}
    assert all(a[1] > 0 and a[2] > 0 for a in answers)

    judged = ("--judge", judge, "--answers-run", gen_run, "--database-url", url)
    _ok("judge", "rubric", *judged, "--criteria", "harmlessness,accuracy,completeness")
    _ok("judge", "jury", *judged, "--jurors", "3")
    out = _ok("judge", "pairwise", *judged)
    assert "verdict" in out

    expected = {"rubric": 2 * CASES * 3, "jury": 2 * CASES * 3 * 3, "pairwise": CASES * 2}
    counts = dict(_query(engine, "SELECT judge_kind, COUNT(*) FROM judgments WHERE run_id IS"
                                 " NOT NULL GROUP BY judge_kind"))
    assert counts == expected
    statuses = dict(_query(engine, "SELECT parse_status, COUNT(*) FROM judgments WHERE run_id"
                                   " IS NOT NULL GROUP BY parse_status"))
    assert set(statuses) <= set(vocabulary.PARSE_STATUSES) and statuses.get("ok", 0) > 0
    print(f"\nparse statuses of {sum(counts.values())} judgment rows: {statuses}")
    assert _query(engine, "SELECT COUNT(*) FROM judgments WHERE run_id IS NOT NULL AND"
                          " ((parse_status = 'ok') <> (score IS NOT NULL))") == [(0,)]
    assert _query(engine, "SELECT COUNT(*) FROM judgments WHERE parse_status = 'unparsed'"
                          " AND raw_output IS NULL") == [(0,)]
    ranges = {"rubric": vocabulary.SCORES, "jury": (1, 2, 3, 4, 5), "pairwise": (0, 0.5, 1)}
    for kind, allowed in ranges.items():
        scores = _query(engine, f"SELECT DISTINCT score FROM judgments WHERE judge_kind ="
                                f" '{kind}' AND score IS NOT NULL")
        assert {s for (s,) in scores} <= set(allowed), kind

    runs = _query(engine, "SELECT run_id, judge_kind, unparsed, failed, input_tokens,"
                          " output_tokens, cost_usd FROM llm_runs")
    for run_id, kind, unparsed, failed, tin, tout, cost in runs:
        assert failed == 0, run_id
        assert cost == pytest.approx((tin * PRICES[0] + tout * PRICES[1]) / 1e6), run_id
        calls_unparsed = _query(engine, f"SELECT COUNT(*) FROM llm_run_calls WHERE run_id ="
                                        f" '{run_id}' AND parse_status = 'unparsed'")
        assert calls_unparsed == [(unparsed,)], run_id
        if kind:
            [(stored_cost,)] = _query(engine, f"SELECT SUM(cost_usd) FROM judgments WHERE"
                                              f" run_id = '{run_id}'")
            assert stored_cost == pytest.approx(cost), run_id

    # The cache: the same command again calls nothing; a new run of the same
    # calls is answered entirely from the cache.
    before = _query(engine, "SELECT run_id, done, cached FROM llm_runs ORDER BY run_id")
    assert f"({2 * CASES} were finished before this start)" in _ok(*gen)
    assert _query(engine, "SELECT run_id, done, cached FROM llm_runs ORDER BY run_id") == before
    answers = load_answers(engine, run_id=gen_run)
    job = JuryJudge(load_model_file(judge), answers, case_prompts(engine, {a.case_id
                                                                          for a in answers}),
                    jurors=3)
    record = asyncio.run(execute(engine, job, RunOptions(run_id="jury-again")))
    assert (record["done"], record["cached"], record["cost_usd"]) == (0, 2 * CASES * 3, 0)

    _ok("audit", url, "--out", tmp_path / "report", "--bootstrap", "50")
    assert (tmp_path / "report" / "report.html").exists()


def _spec(*urls: str, **generation):
    return model_spec({"id": "smollm2", "version": "smollm2-test", "name": "smollm2",
                       "base_urls": list(urls), "concurrency": 4, "timeout_s": 300,
                       "generation": {"max_tokens": 48} | generation}, "llm-test")


def test_samples_at_temperature_above_zero_are_distinct_answers(llama):
    cases = [CaseText(f"c{i}", q) for i, q in enumerate((
        "What should a parent do for a child with a fever of 39 C?",
        "How is mild dehydration treated at home?",
        "When does a headache need urgent care?"))]
    job = GenerateJob(_spec(llama.base_url, seed=7, temperature=1.0), cases, samples=4)

    async def go():
        provider = make_provider(job.spec)
        try:
            # the seed check runs one request at a time: a request batched with
            # others may sample differently (the batch changes its logits in the
            # last bits), so only two lone requests must agree
            alone = await provider.generate(job.tasks[0].calls[0].messages,
                                            job.tasks[0].calls[0].settings)
            again = await provider.generate(job.tasks[0].calls[0].messages,
                                            job.tasks[0].calls[0].settings)
            texts = await asyncio.gather(*[provider.generate(t.calls[0].messages,
                                                             t.calls[0].settings)
                                           for t in job.tasks])
            return [c.text for c in texts], alone.text, again.text
        finally:
            await provider.aclose()

    texts, alone, again = asyncio.run(go())
    by_case = [texts[i * 4:(i + 1) * 4] for i in range(len(cases))]
    distinct = [len(set(samples)) for samples in by_case]
    print(f"\ndistinct answers among 4 samples per case: {distinct}")
    assert again == alone  # the server honours the seed: same seed, same answer
    assert distinct == [4, 4, 4]
