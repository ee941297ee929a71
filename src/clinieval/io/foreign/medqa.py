"""MedQA (USMLE), the JSON Lines release: one question per line with
``question``, ``options`` (letter -> text) and ``answer_idx`` (the letter);
``answer`` (the option's text) and ``meta_info`` are kept as template
fields. The id is ``id`` when present, else the line number."""

from __future__ import annotations

from pathlib import Path

from clinieval.io.foreign.choice import Item, choice_item, item_snapshot
from clinieval.io.foreign.records import Record, parse, split_records
from clinieval.rubric import IDENTITY, CriterionMap
from clinieval.schema.domain import Rubric
from clinieval.snapshot import Snapshot


def looks_like(record: dict) -> bool:
    return "question" in record and "options" in record and "answer_idx" in record


def items(path: str | Path) -> list[Item]:
    records = split_records(parse(path), what="MedQA questions", is_record=looks_like)
    return [_item(rec) for rec in records]


def _item(rec: Record) -> Item:
    question = rec.text("question", "the question")
    options = rec.obj("options", "the options, letter -> text")
    if not options:
        rec.fail("no options", "options", expected="an object of letter -> option text")
    opts = rec.child("options", options)
    choices = {str(k).strip().upper(): opts.text(k, "the option's text") for k in options}
    reference = rec.text("answer_idx", "the correct option's letter", required=False,
                         nullable=True)
    ident = rec.ident("id", "the question's id", required=False) or str(rec.row)
    return choice_item(rec, ident, question, choices,
                       reference.strip().upper() if reference else None, "answer_idx",
                       answer_text=rec.data.get("answer"), meta_info=rec.data.get("meta_info"))


def read(path: str | Path, *, rubric: Rubric | None = None,
         criterion_map: CriterionMap = IDENTITY) -> Snapshot:
    """MedQA questions as cases (see :func:`clinieval.io.foreign.choice.item_snapshot`)."""
    found = items(path)
    return item_snapshot(found, "medqa", found[0].source, rubric, criterion_map)
