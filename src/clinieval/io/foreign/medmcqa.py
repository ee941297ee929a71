"""MedMCQA, the JSON Lines release: ``question``, the four options ``opa``
.. ``opd`` and ``cop``, the correct option numbered from 1 (1 = ``opa``);
``cop`` of -1 or missing (the test split) means no reference. ``id``,
``subject_name``, ``topic_name`` and ``exp`` are kept as template fields."""

from __future__ import annotations

from pathlib import Path

from clinieval.io.foreign.choice import Item, choice_item, item_snapshot
from clinieval.io.foreign.records import Record, parse, split_records
from clinieval.rubric import IDENTITY, CriterionMap
from clinieval.schema.domain import Rubric
from clinieval.snapshot import Snapshot

OPTION_KEYS = ("opa", "opb", "opc", "opd")


def looks_like(record: dict) -> bool:
    return "question" in record and "opa" in record and "cop" in record


def items(path: str | Path) -> list[Item]:
    records = split_records(parse(path), what="MedMCQA questions", is_record=looks_like)
    return [_item(rec) for rec in records]


def _item(rec: Record) -> Item:
    question = rec.text("question", "the question")
    choices = {"ABCD"[i]: rec.text(key, "the option's text", empty=True)
               for i, key in enumerate(OPTION_KEYS)}
    cop = rec.data.get("cop")
    reference = None
    if cop is not None and cop != -1:
        if isinstance(cop, bool) or not isinstance(cop, int) or not 1 <= cop <= 4:
            rec.fail("the correct option is not 1..4", "cop",
                     expected="1, 2, 3 or 4 (1 = opa), or -1 for none", got=cop)
        reference = "ABCD"[cop - 1]
    ident = rec.ident("id", "the question's id", required=False) or str(rec.row)
    return choice_item(rec, ident, question, choices, reference, "cop",
                       subject=rec.data.get("subject_name"), topic=rec.data.get("topic_name"),
                       explanation=rec.data.get("exp"))


def read(path: str | Path, *, rubric: Rubric | None = None,
         criterion_map: CriterionMap = IDENTITY) -> Snapshot:
    """MedMCQA questions as cases."""
    found = items(path)
    return item_snapshot(found, "medmcqa", found[0].source, rubric, criterion_map)
