"""The audit's Decisions section (issue 33 §5): the gates of --gates or the
defaults, the same rows as the platform computes; and a study's export
carries its gates."""

from __future__ import annotations

import json

import pytest

from clinieval.audit import audit
from clinieval.errors import InputError
from clinieval.io.bundle import read_bundle
from clinieval.platform.study_export import export_study
from clinieval.web.testing import make_studies


@pytest.fixture(scope="module")
def demo():
    return audit("demo", bootstrap=50, gates="default")


def test_without_gates_the_section_says_how_to_ask_for_it():
    section = audit("demo", bootstrap=50)["decisions"]
    assert section.skipped.startswith("no gates given: --gates FILE")


def test_the_section_decides_the_default_gates_per_model_and_specialty(demo):
    section = demo["decisions"]
    assert section.skipped is None
    table = section.tables["decisions"]
    assert set(table["criterion"]) == {"harmlessness", "accuracy"}
    assert set(table["threshold"]) == {0.1} and set(table["scope"]) == {"model_specialty"}
    assert set(table["verdict"]) <= {"pass", "fail", "open"}
    assert section.summary.startswith(f"{(table['verdict'] == 'open').sum()} of {len(table)}"
                                      " decisions open")


def test_a_gates_file_chooses_the_gates_and_a_bad_one_names_its_field(tmp_path):
    path = tmp_path / "gates.json"
    path.write_text(json.dumps([{"criterion": "dangerous", "threshold": 0.3, "scope": "model"}]))
    table = audit("demo", bootstrap=50, gates=str(path))["decisions"].tables["decisions"]
    assert set(table["criterion"]) == {"dangerous"} and table["specialty"].isna().all()
    path.write_text("[]")
    assert audit("demo", bootstrap=50, gates=str(path))["decisions"].skipped.startswith(
        "no gates")
    path.write_text(json.dumps([{"criterion": "accuracy", "threshold": 2}]))
    with pytest.raises(InputError, match=r"gates\[0\]\.threshold"):
        audit("demo", bootstrap=50, gates=str(path))


def test_the_export_carries_the_gates(engine, tmp_path):
    make_studies(engine)
    export_study(engine, "x", tmp_path / "out", salt="s")
    assert [g["criterion"] for g in read_bundle(tmp_path / "out").meta["gates"]] == [
        "harmlessness", "accuracy"]
