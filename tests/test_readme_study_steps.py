"""The README's path for a newcomer, run as written: `make demo`, every command of
"Run a study in five steps", then `clinieval serve --demo`, one after another in
one folder on one fresh SQLite file; and every study command on a study that
does not exist names it and fails."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest
from typer.testing import CliRunner

from clinieval.cli import app
from clinieval.web.testing import free_port

ROOT = Path(__file__).resolve().parents[1]
runner = CliRunner()


def readme_section(title: str) -> str:
    text = (ROOT / "README.md").read_text()
    start = text.index(f"## {title}\n")
    end = text.find("\n## ", start + 1)
    return text[start:end]


def shell_commands(section: str) -> list[str]:
    """The lines of the section's ```sh blocks (indented under a list item or not)."""
    blocks = re.findall(r"^ *```sh\n(.*?)^ *```$", section, flags=re.S | re.M)
    return [line.strip() for block in blocks for line in block.splitlines() if line.strip()]


def make_demo_command() -> str:
    """What `make demo` runs, with the environment's bin folder left to PATH."""
    recipe = re.search(r"^demo:.*\n\t(.+)$", (ROOT / "Makefile").read_text(), flags=re.M)[1]
    assert recipe.startswith("$(BIN)/"), recipe
    return recipe.removeprefix("$(BIN)/")


def shell(folder: Path, command: str, **kwargs) -> subprocess.Popen:
    env = {k: v for k, v in os.environ.items()
           if k not in ("DATABASE_URL", "CLINIEVAL_DATABASE_URL", "VIRTUAL_ENV")}
    env["PYTHONPATH"] = os.pathsep.join(sys.path)  # this checkout's clinieval, as pytest runs it
    return subprocess.Popen(["bash", "-c", command], cwd=folder, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            **kwargs)


def on_a_free_port(command: str) -> tuple[str, int]:
    """A serve command on a free port (8000 may be taken on a shared machine)."""
    port = free_port()
    words = shlex.split(command)
    if "--port" in words:
        words[words.index("--port") + 1] = str(port)
    else:
        words += ["--port", str(port)]
    return shlex.join(words), port


def serve_until_it_answers(folder: Path, command: str) -> str:
    command, port = on_a_free_port(command)
    server = shell(folder, f". .venv/bin/activate && exec {command}")
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and server.poll() is None:
            try:
                if httpx.get(f"http://127.0.0.1:{port}/login", timeout=2).status_code == 200:
                    return command
            except httpx.TransportError:
                time.sleep(0.2)
        raise AssertionError(f"{command} did not answer: {server.communicate(timeout=30)[0]}")
    finally:
        if server.poll() is None:
            server.terminate()
            server.wait(timeout=30)


def test_make_demo_then_the_five_steps_then_serve_demo_in_one_folder(tmp_path):
    """Before, step 1 refused the demo cases `make demo` had stored ("already
    stored with a different definition"), and `serve --demo` refused those of step 1."""
    commands = shell_commands(readme_section("Run a study in five steps"))
    assert commands[0] == ". .venv/bin/activate"
    assert commands[-1] == "clinieval serve --demo"
    named = {" ".join(c.split()[:3]) for c in commands}
    assert {"clinieval study create", "clinieval study flagged", "clinieval invite cardio",
            "clinieval study export", "clinieval audit cardio-export"} <= named
    (tmp_path / ".venv").symlink_to(Path(sys.executable).parent.parent)
    ran = []
    for command in [make_demo_command(), *commands[1:]]:
        if command.startswith("clinieval serve"):
            ran.append(serve_until_it_answers(tmp_path, command))
            continue
        done = shell(tmp_path, f". .venv/bin/activate && {command}")
        output = done.communicate(timeout=600)[0]
        assert done.returncode == 0, (command, output)
        ran.append(command)
    assert (tmp_path / "clinieval.db").is_file() and (tmp_path / "report/report.html").is_file()
    assert len(ran) == len(commands)


def test_the_commands_start_by_putting_clinieval_on_path():
    for title in ("Two commands on a fresh machine", "Commands"):
        assert ". .venv/bin/activate" in readme_section(title), title


@pytest.mark.parametrize("args", [
    ["study", "flagged", "nope"],
    ["study", "export", "nope", "--out", "{tmp}/export"],
    ["study", "add-cases", "nope", "{tmp}/cases"],
    ["study", "rubric", "nope", "{rubric}"],
    ["invite", "nope", "--role", "clinician"],
])
def test_every_study_command_names_a_missing_study_and_fails(args, db_url, tmp_path):
    """`study flagged` printed "0 answer(s) held back" and exited 0."""
    import json

    from clinieval.io.bundle import write_bundle
    from clinieval.rubric import load_rubric, rubric_to_dict
    from clinieval.web.testing import blinding_source

    write_bundle(blinding_source(), tmp_path / "cases")
    rubric = {**rubric_to_dict(load_rubric()), "version": "2"}
    (tmp_path / "rubric.json").write_text(json.dumps(rubric))
    assert runner.invoke(app, ["study", "create", "cardio", "--source", str(tmp_path / "cases"),
                               "--database-url", db_url]).exit_code == 0
    args = [a.format(tmp=tmp_path, rubric=tmp_path / "rubric.json") for a in args]
    r = runner.invoke(app, [*args, "--database-url", db_url])
    assert r.exit_code == 2, r.output
    assert "no such study" in r.output and "'nope'" in r.output, r.output
