"""PubMedQA, the JSON release (``ori_pqal.json``): an object keyed by PMID,
each with ``QUESTION``, ``CONTEXTS`` (the abstract's passages),
``LONG_ANSWER`` and ``final_decision`` (yes, no or maybe). Items are
multiple choice with A = yes, B = no, C = maybe; the template fields are
``question``, ``context`` (the passages, a blank line apart) and
``long_answer``."""

from __future__ import annotations

from pathlib import Path

from clinieval.io.foreign.choice import Item, choice_item, item_snapshot
from clinieval.io.foreign.records import Record, parse, split_records
from clinieval.rubric import IDENTITY, CriterionMap
from clinieval.schema.domain import Rubric
from clinieval.snapshot import Snapshot

DECISIONS = {"A": "yes", "B": "no", "C": "maybe"}


def looks_like(record: dict) -> bool:
    return "QUESTION" in record and ("final_decision" in record or "CONTEXTS" in record)


def items(path: str | Path) -> list[Item]:
    records = split_records(parse(path), what="PubMedQA questions keyed by PMID",
                            is_record=looks_like, keyed=True)
    return [_item(rec) for rec in records]


def _item(rec: Record) -> Item:
    question = rec.text("QUESTION", "the question")
    contexts = rec.strings("CONTEXTS", "the abstract's passages")
    decision = rec.text("final_decision", "yes, no or maybe", required=False, nullable=True)
    reference = None
    if decision is not None:
        by_word = {v: k for k, v in DECISIONS.items()}
        reference = by_word.get(decision.strip().lower(), decision)
    return choice_item(rec, str(rec.row), question, dict(DECISIONS), reference,
                       "final_decision", context="\n\n".join(contexts),
                       long_answer=rec.data.get("LONG_ANSWER"), decision=decision)


def read(path: str | Path, *, rubric: Rubric | None = None,
         criterion_map: CriterionMap = IDENTITY) -> Snapshot:
    """PubMedQA questions as cases."""
    found = items(path)
    return item_snapshot(found, "pubmedqa", found[0].source, rubric, criterion_map)
