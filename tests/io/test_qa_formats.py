"""Readers of the published MedQA, PubMedQA and MedMCQA files, on small
fixtures written here in each release's format; `clinieval import` reads
them too, and a reference outside the choices is refused with its place."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from clinieval.cli import app
from clinieval.errors import InputError
from clinieval.io.foreign import FORMATS, medmcqa, medqa, pubmedqa, sniff_format

runner = CliRunner()

MEDQA = [{"question": "Q1?", "answer": "Two", "options": {"A": "One", "B": "Two", "C": "Three",
                                                           "D": "Four", "E": "Five"},
          "meta_info": "step1", "answer_idx": "B", "metamap_phrases": ["q1"]},
         {"question": "Q2?", "answer": "Four", "options": {"A": "One", "B": "Two", "C": "Three",
                                                            "D": "Four"},
          "meta_info": "step2&3", "answer_idx": "D"}]
PUBMEDQA = {"12345": {"QUESTION": "Does X help?", "CONTEXTS": ["First.", "Second."],
                      "LABELS": ["A", "B"], "MESHES": [], "YEAR": "2001",
                      "reasoning_required_pred": "yes", "reasoning_free_pred": "yes",
                      "final_decision": "maybe", "LONG_ANSWER": "Unclear."},
            "67890": {"QUESTION": "Is Y safe?", "CONTEXTS": ["Only."], "LABELS": ["A"],
                      "MESHES": [], "YEAR": "2002", "reasoning_required_pred": "no",
                      "reasoning_free_pred": "no", "final_decision": "no",
                      "LONG_ANSWER": "No."}}
MEDMCQA = [{"id": "u-1", "question": "Q?", "opa": "w", "opb": "x", "opc": "y", "opd": "z",
            "cop": 1, "choice_type": "single", "exp": "because", "subject_name": "Anatomy",
            "topic_name": "Limbs"},
           {"id": "u-2", "question": "R?", "opa": "w", "opb": "x", "opc": "y", "opd": "z",
            "cop": 4, "choice_type": "single", "exp": None, "subject_name": "Medicine",
            "topic_name": None},
           {"id": "u-3", "question": "S?", "opa": "w", "opb": "x", "opc": "y", "opd": "z",
            "cop": -1, "choice_type": "single", "subject_name": "Medicine"}]


def _jsonl(path, rows):
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def test_medqa_jsonl(tmp_path):
    path = _jsonl(tmp_path / "test.jsonl", MEDQA)
    assert sniff_format(path) == "medqa"
    items = medqa.items(path)
    assert [i.instance_id for i in items] == ["1", "2"]
    assert [i.reference for i in items] == ["B", "D"]
    assert list(items[0].choices) == list("ABCDE") and items[0].fields["answer_text"] == "Two"
    assert items[1].fields["options"].splitlines()[3] == "D. Four"


def test_pubmedqa_json_keyed_by_pmid(tmp_path):
    path = tmp_path / "ori_pqal.json"
    path.write_text(json.dumps(PUBMEDQA))
    assert sniff_format(path) == "pubmedqa"
    items = pubmedqa.items(path)
    assert [(i.instance_id, i.reference) for i in items] == [("12345", "C"), ("67890", "B")]
    assert items[0].choices == {"A": "yes", "B": "no", "C": "maybe"}
    assert items[0].fields["context"] == "First.\n\nSecond."


def test_medmcqa_cop_is_one_based(tmp_path):
    path = _jsonl(tmp_path / "dev.json", MEDMCQA)
    assert sniff_format(path) == "medmcqa"
    items = medmcqa.items(path)
    assert [(i.instance_id, i.reference) for i in items] == [("u-1", "A"), ("u-2", "D"),
                                                             ("u-3", None)]
    assert items[0].specialty == "Anatomy"


@pytest.mark.parametrize("fmt, rows, name, field", [
    ("medqa", [MEDQA[1] | {"answer_idx": "E"}], "test.jsonl", "answer_idx"),
    ("medmcqa", [MEDMCQA[0] | {"cop": 5}], "dev.json", "cop"),
    ("medmcqa", [MEDMCQA[0] | {"cop": 0}], "dev.json", "cop"),
    ("pubmedqa", {"1": PUBMEDQA["12345"] | {"final_decision": "perhaps"}}, "p.json",
     "final_decision"),
])
def test_a_reference_outside_the_choices_names_file_row_and_field(tmp_path, fmt, rows, name,
                                                                  field):
    path = tmp_path / name
    if isinstance(rows, dict):
        path.write_text(json.dumps(rows))
    else:
        _jsonl(path, rows)
    with pytest.raises(InputError) as err:
        FORMATS[fmt].items(path)
    assert err.value.source == str(path) and err.value.field == field
    assert err.value.row in (1, "1")


def test_clinieval_import_reads_them(tmp_path):
    url = f"sqlite:///{tmp_path / 'db.sqlite'}"
    path = _jsonl(tmp_path / "test.jsonl", MEDQA)
    result = runner.invoke(app, ["import", str(path), "--database-url", url])
    assert result.exit_code == 0, result.output
    import sqlalchemy as sa

    engine = sa.create_engine(url)
    with engine.connect() as conn:
        rows = conn.execute(sa.text("SELECT prompt, reference_answer FROM cases ORDER BY"
                                    " reference_answer")).all()
    assert [r[1] for r in rows] == ["B", "D"] and rows[0][0].endswith("E. Five")
