"""The audit command reads the snapshot in a forked child while it imports:
the data that crosses the pipe, and the whole command run in a fresh process
(the only place the child is forked) against the same command in-process."""

from __future__ import annotations

import dataclasses
import os
import subprocess
import sys
import threading
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from clinieval.audit import ahead
from clinieval.audit.data import AuditData, audit_data
from clinieval.cli import app
from clinieval.io.bundle import write_bundle
from clinieval.io.importer import import_snapshot
from clinieval.storage import db
from clinieval.synth import generate
from clinieval.synth.judges import JudgePlan, plant_judgments

runner = CliRunner()
needs_fork = pytest.mark.skipif(not hasattr(os, "fork"), reason="reading ahead needs fork")


def _same(a: AuditData, b: AuditData) -> None:
    for field in dataclasses.fields(AuditData):
        x, y = getattr(a, field.name), getattr(b, field.name)
        if isinstance(x, np.ndarray):
            assert x.dtype == y.dtype and np.array_equal(x, y, equal_nan=x.dtype.kind == "f"), \
                field.name
        elif field.name == "judge_tables":
            assert x.keys() == y.keys() and all(x[k].equals(y[k]) for k in x)
        else:
            assert x == y, field.name


@pytest.fixture(scope="module")
def bundle(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("ahead") / "snap"
    write_bundle(plant_judgments(generate(seed=2, scale=0.02), JudgePlan(seed=2)), folder)
    return folder


def test_data_crosses_the_pipe_unchanged(bundle):
    data = audit_data(bundle)
    assert data.judge_tables  # Arrow tables travel as well as the arrays
    read_end, write_end = os.pipe()
    with os.fdopen(read_end, "rb") as inbound, os.fdopen(write_end, "wb") as outbound:
        sender = threading.Thread(target=ahead._send, args=(outbound, data))
        sender.start()
        received = ahead._receive(inbound)
        sender.join()
    _same(received, data)


def test_a_cut_pipe_is_an_error_not_data():
    read_end, write_end = os.pipe()
    os.write(write_end, b"\x10" + b"\0" * 7)
    os.close(write_end)
    with os.fdopen(read_end, "rb") as inbound, pytest.raises(EOFError):
        ahead._receive(inbound)


def test_no_child_once_the_audit_is_imported(bundle):
    import clinieval.audit.run  # noqa: F401  (as in any library caller)

    assert ahead.read_ahead(str(bundle)) is None


def _command(args: list[str]) -> subprocess.CompletedProcess:
    """The CLI in a fresh interpreter, where the audit is not imported yet."""
    code = "import sys; from clinieval.cli import main; sys.argv[1:] = " + repr(args) + "; main()"
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)


@needs_fork
def test_the_command_reading_ahead_writes_the_same_report(bundle, tmp_path):
    url = f"sqlite:///{tmp_path / 'snap.db'}"
    engine = db.make_engine(url)
    db.upgrade(engine)
    import_snapshot(engine, generate(seed=2, scale=0.02))
    engine.dispose()
    for source in (str(bundle), url):
        fresh = _command(["audit", source, "--out", str(tmp_path / "fresh"), "--bootstrap", "50"])
        assert fresh.returncode == 0, fresh.stderr
        here = runner.invoke(app, ["audit", source, "--out", str(tmp_path / "here"),
                                   "--bootstrap", "50"])
        assert here.exit_code == 0, here.output
        for name in ("report.html", "report.md", "results.json"):
            assert (tmp_path / "fresh" / name).read_bytes() == (
                tmp_path / "here" / name).read_bytes(), (source, name)


@needs_fork
def test_an_unreadable_source_fails_as_without_reading_ahead(tmp_path):
    (tmp_path / "empty.db").touch()
    url = f"sqlite:///{tmp_path / 'empty.db'}"
    fresh = _command(["audit", url, "--out", str(tmp_path / "out")])
    here = runner.invoke(app, ["audit", url, "--out", str(tmp_path / "out")])
    assert fresh.returncode == here.exit_code == 2
    assert " ".join(fresh.stderr.split()) == " ".join(here.output.split())
    assert "clinieval db upgrade" in fresh.stderr
