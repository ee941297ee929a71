"""A refused command exits with status 2 after its ``error:`` line, every
time: no native thread is left working when the process exits (an Arrow
worker still parsing a malformed CSV's later blocks aborted the process,
"terminate called without an active exception", in some of the runs)."""

from __future__ import annotations

import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from clinieval.demo import demo_bundle
from clinieval.io.bundle import read_bundle
from clinieval.io.tables_io import write_table_files

SRC = Path(__file__).parents[2] / "src"


@pytest.fixture(scope="module")
def malformed_tables(tmp_path_factory) -> Path:
    """The demo as CSV tables whose ratings file has a malformed early line,
    so the error arrives while later blocks would still be parsing."""
    folder = tmp_path_factory.mktemp("refused") / "tables"
    write_table_files(read_bundle(demo_bundle()), folder, "csv")
    (folder / "criteria.csv").unlink()
    lines = (folder / "ratings.csv").read_text("utf-8").splitlines()
    lines[3] += ",extra,fields"
    (folder / "ratings.csv").write_text("\n".join(lines) + "\n", "utf-8")
    return folder


def _import(source: Path, database: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(SRC)}
    return subprocess.run([sys.executable, "-m", "clinieval.cli", "import", str(source),
                           "--database-url", f"sqlite:///{database}"],
                          capture_output=True, text=True, env=env, timeout=600)


@pytest.mark.parametrize("runs", [12, pytest.param(30, marks=pytest.mark.slow)],
                         ids=["12", "30"])
def test_a_refused_import_exits_2_every_time(malformed_tables, tmp_path, runs):
    with ThreadPoolExecutor(4) as pool:
        done = list(pool.map(lambda i: _import(malformed_tables, tmp_path / f"{i}.db"),
                             range(runs)))
    statuses = [d.returncode for d in done]
    assert statuses == [2] * runs, [(d.returncode, d.stderr[-300:]) for d in done
                                    if d.returncode != 2][:3]
    assert all(d.stderr.startswith("error:") and "ratings.csv" in d.stderr for d in done)
