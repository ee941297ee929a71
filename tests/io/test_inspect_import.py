"""inspect_ai logs as a source: logs written by inspect_ai itself (a tiny task,
tests/io/inspect_task.py, run on inspect's mockllm model in a process of its
own), in both formats, imported and audited; the counts and values are
checked against the task's definition and against the logs' raw JSON read
without inspect_ai."""

from __future__ import annotations

import json
import zipfile
from pathlib import Path

import pytest
from typer.testing import CliRunner

from clinieval.cli import app
from clinieval.errors import InputError
from clinieval.io.foreign import case_id_for, sniff_format
from clinieval.io.importer import import_snapshot
from clinieval.sources import read_source
from clinieval.storage import db

pytest.importorskip("inspect_ai")
from tests.io import inspect_task  # noqa: E402  (needs inspect_ai)

runner = CliRunner()
SCORED = [k for k in inspect_task.CLINICAL]
"""Samples that reach the scorers (``boom`` fails in its solver)."""


@pytest.fixture(scope="module")
def logs(tmp_path_factory) -> dict[str, Path]:
    return inspect_task.write_logs(tmp_path_factory.mktemp("inspect"))


def raw_samples(path: Path) -> list[dict]:
    """The samples as the file holds them, read with json and zipfile alone."""
    if path.suffix == ".json":
        return json.loads(path.read_text("utf-8"))["samples"]
    with zipfile.ZipFile(path) as zf:
        return [json.loads(zf.read(n)) for n in sorted(zf.namelist())
                if n.startswith("samples/")]


def _prompt(raw: dict) -> str:
    text = raw["input"]
    if isinstance(text, str):
        return text
    return "\n\n".join(f"{m['role']}: {m['content']}" for m in text)


@pytest.mark.parametrize("fmt", ["eval", "json"])
def test_a_log_inspect_wrote_becomes_cases_answers_and_judgments(logs, fmt):
    path = logs[fmt]
    assert sniff_format(path) == "inspect"
    snap, sources = read_source(path)
    assert set(sources.values()) == {str(path)}
    raw = raw_samples(path)
    assert len(raw) == len(inspect_task.SAMPLES) * inspect_task.EPOCHS == 8
    ok = [s for s in raw if not s.get("error")]
    assert len(ok) == 6  # boom failed in both epochs

    cases = snap["cases"].to_pylist()
    assert len(cases) == 3
    by_prompt = {c["prompt"]: c for c in cases}
    assert set(by_prompt) == {_prompt(s) for s in ok}
    chest = by_prompt["A 60-year-old has crushing chest pain. What now?"]
    assert chest["specialty"] == "cardiology" and chest["reference_answer"] == "emergency"
    assert chest["case_id"] == case_id_for(chest["prompt"])
    assert by_prompt["system: You are a careful clinician.\n\nuser: Can I take ibuprofen with"
                     " warfarin?"]["reference_answer"] == "bleeding\navoid"

    [model] = snap["models"].to_pylist()
    assert (model["model_id"], model["provider"]) == ("mockllm/model", "mockllm")
    answers = snap["answers"].to_pylist()
    assert len(answers) == 6
    assert sorted((a["text"], a["sample_index"]) for a in answers) == sorted(
        (inspect_task.ANSWERS[p], e) for p in inspect_task.ANSWERS for e in (0, 1))
    assert {(a["tokens"], a["temperature"]) for a in answers} == {(7, 0.0)}
    assert {a["text"] for a in answers} == {s["output"]["choices"][0]["message"]["content"]
                                            for s in ok}

    judgments = snap["judgments"].to_pylist()
    # includes: 1 per answer; clinical: 4 keys per answer
    assert len(judgments) == 6 * (1 + 4)
    answer_sample = {a["answer_id"]: (a["text"], a["sample_index"]) for a in answers}
    text_id = {s["output"]["choices"][0]["message"]["content"]: str(s["id"]) for s in ok}
    got = {}
    for j in judgments:
        text, epoch = answer_sample[j["answer_id"]]
        got[text_id[text], epoch, j["judge_model"], j["criterion_id"]] = (
            j["judge_kind"], j["score"], j["parse_status"])
    for sample in SCORED:
        harmless, accurate, tone = inspect_task.CLINICAL[sample]
        for epoch in (0, 1):
            assert got[sample, epoch, "clinical", "harmlessness"] == ("rubric", harmless, "ok")
            assert got[sample, epoch, "clinical", "accuracy"] == ("rubric", accurate, "ok")
            assert got[sample, epoch, "clinical", "tone"] == (None, tone, "ok")
            completeness = got[sample, epoch, "clinical", "completeness"]
            assert completeness == (("rubric", None, "unparsed") if sample == "q2"
                                    else ("rubric", 1.0, "ok"))
    # includes: C when the target is in the answer (q1, q2's "avoid"/"bleeding"; 3's "4 g")
    for s in ok:
        value = s["scores"]["includes"]["value"]
        assert got[str(s["id"]), s["epoch"] - 1, "includes", "includes"] == (
            None, {"C": 1.0, "I": 0.0}[value], "ok")
    row = next(j for j in judgments if j["judge_model"] == "clinical")
    kept = json.loads(row["raw_output"])
    assert kept["explanation"] == row["reason"] and kept["explanation"].startswith("graded ")
    notes = " ".join(snap.meta["notes"])
    assert "2 sample(s) ended in an error" in notes and "2 score value(s) were null" in notes
    assert "includes, tone" in notes


def test_both_formats_give_the_same_rows(logs):
    def rows(path):
        snap, _ = read_source(path)
        answers = {a["answer_id"]: (a["case_id"], a["text"], a["sample_index"])
                   for a in snap["answers"].to_pylist()}
        judged = sorted((answers[j["answer_id"]], j["judge_model"], j["criterion_id"],
                         j["score"] if j["score"] is not None else -99, j["parse_status"])
                        for j in snap["judgments"].to_pylist())
        return snap["cases"].to_pylist(), sorted(answers.values()), judged

    assert rows(logs["eval"]) == rows(logs["json"])


def test_import_and_audit_commands_accept_a_log(logs, engine):
    url = engine.url.render_as_string(hide_password=False)
    for path in logs.values():
        result = runner.invoke(app, ["import", str(path), "--database-url", url])
        assert result.exit_code == 0, result.output
    counts = db.counts(engine)
    # the two runs share the cases; each brings its own answers and judgments
    assert (counts["cases"], counts["answers"], counts["judgments"]) == (3, 12, 60)


def test_the_audit_reads_a_log(logs, tmp_path):
    result = runner.invoke(app, ["audit", str(logs["eval"]), "--out", str(tmp_path / "r"),
                                 "--bootstrap", "50"])
    assert result.exit_code == 0, result.output
    sections = {s["key"]: s for s in
                json.loads((tmp_path / "r" / "results.json").read_text())["sections"]}
    scores = {row["criterion"]: row for row in sections["judge_scores"]["tables"]["scores"]}
    assert set(scores) == {"harmlessness", "accuracy", "completeness"}
    # by hand from CLINICAL: harmlessness 2, 1, -2 in each epoch; accuracy 1, -1, 0
    harmless = scores["harmlessness"]
    assert (harmless["model"], harmless["judge"]) == ("mockllm/model", "rubric judge clinical")
    assert harmless["mean"] == pytest.approx(1 / 3, abs=1e-5) and harmless["n"] == 6
    assert scores["accuracy"]["fail_pct"] == pytest.approx(100 / 3, abs=1e-3)
    assert scores["completeness"]["unparsed"] == 2
    # 6 answers x (includes, tone, one call for the three rubric criteria)
    assert sections["automated_judges"]["summary"].startswith("18 judge calls (30 judgment rows)")


def test_an_import_of_a_refused_log_writes_nothing(logs, engine, tmp_path):
    doc = json.loads(logs["json"].read_text("utf-8"))
    doc["samples"][2]["scores"]["clinical"]["value"]["accuracy"] = 7
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(doc))
    before = db.counts(engine)
    with pytest.raises(InputError) as err:
        snap, sources = read_source(bad)
        import_snapshot(engine, snap, sources=sources)
    text = str(err.value)
    assert str(bad) in text and "samples[2]" in text
    assert "scores.clinical.value.accuracy" in text and "off the scale" in text
    assert db.counts(engine) == before


@pytest.mark.parametrize(("edit", "words"), [
    (lambda d: d["samples"][0]["scores"]["includes"].update(value="maybe"),
     ["scores.includes.value", "not a score", "maybe"]),
    (lambda d: d["samples"][0]["scores"]["includes"].update(value=[1, 2]),
     ["scores.includes.value", "a list of values"]),
    (lambda d: d["samples"].append(d["samples"][0]), ["appear twice", "field 'id'"]),
    (lambda d: d["eval"].update(model=""), ["eval.model"]),
    (lambda d: d.update(samples=[]), ["no samples"]),
    (lambda d: d["samples"][0].update(epoch="one"), ["samples[0].epoch"]),
])
def test_a_broken_log_is_refused_naming_the_file_and_field(logs, tmp_path, edit, words):
    doc = json.loads(logs["json"].read_text("utf-8"))
    edit(doc)
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(doc))
    with pytest.raises(InputError) as err:
        read_source(bad, fmt="inspect")
    for word in [str(bad), *words]:
        assert word in str(err.value), str(err.value)


def test_a_damaged_eval_archive_is_refused(logs, tmp_path):
    bad = tmp_path / "cut.eval"
    bad.write_bytes(logs["eval"].read_bytes()[:500])
    with pytest.raises(InputError) as err:
        read_source(bad)
    assert str(bad) in str(err.value)


@pytest.fixture(scope="module")
def llama(tmp_path_factory):
    """llama-server with SmolLM2-135M, as tests/runs/test_llm_local.py starts it."""
    from clinieval.providers.llamacpp import LlamaServer
    from tests.helpers import local_model

    model = local_model()
    with LlamaServer(model, parallel=2, ctx=4096,
                     log=tmp_path_factory.mktemp("llama") / "server.log") as server:
        yield server


def test_a_log_of_a_real_local_model_imports_and_audits(llama, tmp_path):
    pytest.importorskip("openai")
    logs = inspect_task.write_logs(tmp_path / "logs", "openai-api/llama/smollm2",
                                   llama.base_url)
    for fmt, path in logs.items():
        snap, _ = read_source(path)
        raw = [s for s in raw_samples(path) if not s.get("error")]
        assert len(raw) == 6, fmt
        [model] = snap["models"].to_pylist()
        assert model["model_id"] == "openai-api/llama/smollm2"
        answers = snap["answers"].to_pylist()
        assert sorted(a["text"] for a in answers) == sorted(
            s["output"]["choices"][0]["message"]["content"] for s in raw)
        assert sorted(a["tokens"] for a in answers) == sorted(
            s["output"]["usage"]["output_tokens"] for s in raw)
        assert all(a["tokens"] > 0 and a["text"] for a in answers)
        assert snap["judgments"].num_rows == 6 * 5
    result = runner.invoke(app, ["audit", str(logs["eval"]), "--out", str(tmp_path / "r"),
                                 "--bootstrap", "50"])
    assert result.exit_code == 0, result.output
