"""README's "Run a benchmark": its five commands run as written, one after
another in one folder, on a MedQA-format file zipped as the release ships it
(data_clean.zip) and two model files on stub servers."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import zipfile
from pathlib import Path

from clinieval.providers.stub import Reply, StubServer, completion_body
from clinieval.tasks.catalog import bundled_folder
from tests.tasks.support import model_file
from tests.test_readme_study_steps import readme_section, shell_commands


def _letter(request: dict, _n: int) -> Reply:
    user = request["messages"][-1]["content"]
    return Reply(body=completion_body("pong" if user == "ping" else "The answer is C."))


def test_the_five_commands_from_download_to_report(tmp_path):
    commands = shell_commands(readme_section("Run a benchmark"))
    assert len(commands) == 5, commands
    with zipfile.ZipFile(tmp_path / "data_clean.zip", "w") as zf:
        zf.writestr("data_clean/questions/US/test.jsonl",
                    (bundled_folder() / "medqa_sample.jsonl").read_text())
        zf.writestr("data_clean/questions/US/train.jsonl", "{}\n")
    env = {k: v for k, v in os.environ.items()
           if k not in ("DATABASE_URL", "CLINIEVAL_DATABASE_URL", "VIRTUAL_ENV")}
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env['PATH']}"
    env["PYTHONPATH"] = os.pathsep.join(sys.path)
    with StubServer(_letter) as server:
        model_file(tmp_path, server, "a")
        model_file(tmp_path, server, "b")
        outputs = []
        for command in commands:
            done = subprocess.run(["bash", "-c", command], cwd=tmp_path, env=env, text=True,
                                  capture_output=True, timeout=300)
            assert done.returncode == 0, (command, done.stdout, done.stderr)
            outputs.append(done.stdout)
    assert "dry run: nothing was called" in outputs[2]
    report = json.loads((tmp_path / "report" / "results.json").read_text())
    section = next(s for s in report["sections"] if s["key"] == "benchmarks")
    assert "Over 1 benchmark" in section["summary"]
    scores = {r["model"]: (r["score"], r["n"]) for r in section["tables"]["scores"]}
    assert scores == {"a": (0.25, 4), "b": (0.25, 4)}  # "C" is right on the first question only
