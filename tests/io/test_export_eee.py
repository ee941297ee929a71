"""``clinieval export-eee``: a source's automated results in the Every Eval Ever
schema, checked by that package's own validator (``every_eval_ever validate``,
the repository's strict JSON, schema and datastore checks). every-eval-ever
needs Python >= 3.12, so it runs from its own venv (``.ci/setup-eee.sh``:
$CLINIEVAL_EEE_VENV, else .venv-eee); the tests skip without it, and fail
instead with CLINIEVAL_REQUIRE_EEE=1."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest
from typer.testing import CliRunner

from clinieval.cli import app
from clinieval.errors import InputError
from clinieval.io.every_eval_ever import export_eee, model_path
from clinieval.io.foreign.builder import Builder
from clinieval.rubric import load_rubric

ROOT = Path(__file__).parents[2]
runner = CliRunner()


@pytest.fixture(scope="module")
def validator() -> Path:
    venv = Path(os.environ.get("CLINIEVAL_EEE_VENV") or ROOT / ".venv-eee")
    tool = venv / "bin" / "every_eval_ever"
    if not tool.exists():
        reason = f"every-eval-ever's validator is not installed in {venv}: run .ci/setup-eee.sh"
        if os.environ.get("CLINIEVAL_REQUIRE_EEE") == "1":
            pytest.fail(f"CLINIEVAL_REQUIRE_EEE=1 but {reason}")
        pytest.skip(reason)
    return tool


def validate(tool: Path, out: Path) -> list[dict]:
    """Every file the export wrote, through the package's validator, as the
    datastore's contributors run it (from the folder holding ``data/``)."""
    files = sorted(p.relative_to(out).as_posix() for p in out.rglob("*") if p.is_file())
    done = subprocess.run([str(tool), "validate", *files, "--format", "json"], cwd=out,
                          capture_output=True, text=True, timeout=300)
    reports = json.loads(done.stdout)
    assert done.returncode == 0, json.dumps(reports, indent=1)[:3000]
    assert len(reports) == len(files) and all(r["valid"] and not r["errors"] and
                                              not r["warnings"] for r in reports), reports
    return reports


def _export(source: str, out: Path, *args: str) -> None:
    result = runner.invoke(app, ["export-eee", source, "--out", str(out), "--bootstrap", "400",
                                 *args])
    assert result.exit_code == 0, result.output


def test_an_inspect_log_exports_to_valid_every_eval_ever_files(validator, tmp_path):
    pytest.importorskip("inspect_ai")
    from tests.io import inspect_task

    logs = inspect_task.write_logs(tmp_path / "logs")
    out = tmp_path / "eee"
    _export(str(logs["json"]), out, "--collection", "tiny-clinical",
            "--organization", "clinieval tests")
    reports = validate(validator, out)
    folder = out / "data" / "tiny-clinical" / "mockllm" / "model"
    [aggregate] = folder.glob("*-*-*-*-*[0-9a-f].json")
    assert {r["file_type"] for r in reports} == {"aggregate", "instance"}
    doc = json.loads(aggregate.read_text())
    assert doc["model_info"]["id"] == "mockllm/model"
    assert doc["source_metadata"]["source_organization_name"] == "clinieval tests"
    results = {r["evaluation_result_id"]: r for r in doc["evaluation_results"]}
    assert set(results) == {"rubric/clinical/harmlessness", "rubric/clinical/accuracy",
                            "rubric/clinical/completeness", "scorer/clinical/tone",
                            "scorer/includes/includes"}
    # By hand from the task: harmlessness 2, 1, -2 and tone 0.75, 0.5, 0.25 in each of 2
    # epochs; completeness 1 for two samples, null (unparsed) for q2.
    harmless = results["rubric/clinical/harmlessness"]["score_details"]
    assert harmless["score"] == pytest.approx(1 / 3)
    assert harmless["uncertainty"]["num_samples"] == 6
    assert harmless["details"]["cases"] == "3"
    interval = harmless["uncertainty"]["confidence_interval"]
    assert -2 <= interval["lower"] < 1 / 3 < interval["upper"] <= 2
    assert results["scorer/clinical/tone"]["score_details"]["score"] == pytest.approx(0.5)
    assert results["scorer/clinical/tone"]["metric_config"]["max_score"] == "Infinity"
    complete = results["rubric/clinical/completeness"]["score_details"]
    assert (complete["score"], complete["details"]["unparsed"]) == (1.0, "2")
    raw = json.loads(logs["json"].read_text())["samples"]
    includes = [{"C": 1.0, "I": 0.0}[s["scores"]["includes"]["value"]] for s in raw
                if not s.get("error")]
    assert results["scorer/includes/includes"]["score_details"]["score"] == pytest.approx(
        sum(includes) / len(includes))
    lines = [json.loads(line) for line in
             (folder / f"{aggregate.stem}_samples.jsonl").read_text().splitlines()]
    assert len(lines) == doc["detailed_evaluation_results"]["total_rows"] == 6 * 5 - 2
    tone = [line for line in lines if line["evaluation_result_id"] == "scorer/clinical/tone"]
    assert sorted(line["evaluation"]["score"] for line in tone) == [0.25, 0.25, 0.5, 0.5,
                                                                     0.75, 0.75]
    # passes: on the clinicians' scale a score above the threshold -1
    assert results["rubric/clinical/accuracy"]["metric_config"]["additional_details"][
        "is_correct"].startswith("score > -1")
    accuracy = [line for line in lines
                if line["evaluation_result_id"] == "rubric/clinical/accuracy"]
    assert sorted((ln["evaluation"]["score"], ln["evaluation"]["is_correct"]) for ln in accuracy
                  ) == [(-1.0, False)] * 2 + [(0.0, True)] * 2 + [(1.0, True)] * 2


def test_a_run_with_every_judge_kind_exports_to_valid_files(validator, tmp_path):
    from clinieval.io.bundle import write_bundle
    from clinieval.synth import generate
    from clinieval.synth.judges import JudgePlan, plant_judgments

    snap = plant_judgments(generate(seed=3, scale=0.005), JudgePlan(seed=3))
    write_bundle(snap, tmp_path / "bundle")
    out = tmp_path / "eee"
    _export(str(tmp_path / "bundle"), out)
    validate(validator, out)
    kinds = set()
    for path in out.rglob("*-*-*-*-*[0-9a-f].json"):
        for result in json.loads(path.read_text())["evaluation_results"]:
            kinds.add(result["score_details"]["details"]["judge_kind"])
            assert result["score_details"]["details"]["pairwise_verdicts_left_out"] != "0"
    assert {"rubric", "jury", "rule"} <= kinds


@pytest.mark.parametrize(("model_id", "provider", "path"), [
    ("openai/gpt-4o", None, ("openai", "gpt-4o", "openai")),
    ("hf/org/model:q4", None, ("hf", "org_model_q4", "hf")),
    ("smollm2-135m", "local", ("local", "smollm2-135m", "local")),
    ("smollm2-135m", None, ("unspecified", "smollm2-135m", "unspecified")),
])
def test_the_datastore_folder_follows_the_model_id(model_id, provider, path):
    assert model_path(model_id, provider) == path


@pytest.mark.parametrize("model_id", ["what?", "data", "con", "a/b."])
def test_a_model_id_no_folder_can_hold_is_refused_naming_it(model_id, tmp_path):
    out = Builder("x")
    out.case("c1", prompt="p", specialty="s")
    answer = out.answer("c1", model_id, "text")
    out.judgment(answer_id=answer, judge_model="j", criterion_id="accuracy", score=1.0,
                 parse_status="ok", judge_kind="rubric")
    snap = out.snapshot(load_rubric(), {})
    with pytest.raises(InputError) as err:
        export_eee(snap, tmp_path)
    assert repr(model_id) in str(err.value) and "model_id" in str(err.value)


def test_a_source_without_judgments_is_refused(tmp_path):
    result = runner.invoke(app, ["export-eee", "demo", "--out", str(tmp_path)])
    assert result.exit_code == 2 and "no automated judgments" in result.output


def test_a_model_judged_only_pairwise_gets_no_files(tmp_path):
    out = Builder("x")
    out.case("c1", prompt="p", specialty="s")
    a, b = out.answer("c1", "m1", "one"), out.answer("c1", "m2", "two")
    out.judgment(answer_id=a, answer_b_id=b, judge_model="j", criterion_id="preference",
                 score=1.0, parse_status="ok", judge_kind="pairwise", choice="A")
    out.judgment(answer_id=b, judge_model="j", criterion_id="accuracy", score=-1.0,
                 parse_status="ok", judge_kind="rubric")
    written = export_eee(out.snapshot(load_rubric(), {}), tmp_path)
    assert [p.parent.name for p in written] == ["m2", "m2"]
    doc = json.loads(written[0].read_text())
    [result] = doc["evaluation_results"]
    assert result["score_details"]["details"]["pairwise_verdicts_left_out"] == "1"  # as B
    assert "confidence_interval" not in result["score_details"]["uncertainty"]  # one case
