"""`clinieval synth --judgments` plants the judge to calibrate (issue 32)."""

from __future__ import annotations

import json

from typer.testing import CliRunner

from clinieval.cli import app
from clinieval.io.bundle import read_bundle
from clinieval.synth.calibration_judge import JUDGE


def test_synth_judgments_plants_the_calibration_judge(tmp_path):
    out = tmp_path / "s"
    result = CliRunner().invoke(app, ["synth", "--out", str(out), "--scale", "0.02", "--seed", "4",
                                      "--judgments"])
    assert result.exit_code == 0, result.output
    planted = json.loads((out / "manifest.json").read_text())["planted"]["judges"]["calibration"]
    assert planted["judge"] == JUDGE and len(planted["blind_specialties"]) == 2
    assert set(planted["noise_sd"]) == set(planted["bias"])
    rows = read_bundle(out)["judgments"].to_pandas()
    mine = rows[rows["judge_model"] == JUDGE]
    assert set(mine["criterion_id"]) == set(planted["criteria"]) == {"harmlessness", "accuracy"}
    # blind: it never fails an answer in the two blind specialties
    answers = read_bundle(out)["answers"].to_pandas().set_index("answer_id")["case_id"]
    cases = read_bundle(out)["cases"].to_pandas().set_index("case_id")["specialty"]
    specialty = cases.reindex(answers.reindex(mine["answer_id"])).to_numpy()
    blind = mine[(specialty == planted["blind_specialties"][0])
                 | (specialty == planted["blind_specialties"][1])]
    assert len(blind) and (blind["score"].dropna() > planted["threshold"]).all()
