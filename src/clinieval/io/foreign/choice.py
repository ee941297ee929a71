"""Benchmark items read from published question-answering releases (MedQA,
PubMedQA, MedMCQA): one :class:`Item` per question, with its choices keyed by
letter and the reference answer's letter.

Each format module (``medqa``, ``pubmedqa``, ``medmcqa``) exposes
``items(path)``, ``looks_like(record)`` and ``read(path, ...)``; ``read``
turns the items into a snapshot (``clinieval import``), whose case prompt is
the question with its lettered options and whose reference answer is the
letter. A reference letter outside the item's choices is an error naming the
file, the record and the field.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from clinieval.io.foreign.builder import UNSPECIFIED, Builder, case_id_for, source_meta
from clinieval.io.foreign.records import Record
from clinieval.rubric import IDENTITY, CriterionMap, load_rubric
from clinieval.schema.domain import Rubric
from clinieval.snapshot import Snapshot

LETTERS = "ABCDEFGHIJ"


@dataclass(frozen=True)
class Item:
    """One benchmark instance: its id, the fields a prompt template may use,
    the choices (letter -> text) of a multiple-choice item, the reference
    answer (a letter for a multiple-choice item), and where it was read."""

    instance_id: str
    fields: dict[str, Any]
    reference: str | None
    choices: dict[str, str] | None = None
    source: str = ""
    row: int | str = 0
    specialty: str | None = None
    rules: list[dict] = field(default_factory=list)
    """HealthBench-style rubric items of the case: ``{rule_id, text, points}``."""


def options_text(choices: dict[str, str]) -> str:
    """Choices as lines ``A. text``."""
    return "\n".join(f"{letter}. {text}" for letter, text in choices.items())


def choice_item(rec: Record, instance_id: str, question: str, choices: dict[str, str],
                reference: str | None, key: str, **extra: Any) -> Item:
    """An item whose reference letter must be one of ``choices`` (``key``
    names the field the reference came from, for the error)."""
    if reference is not None and reference not in choices:
        rec.fail("the reference answer is not one of the choices", key,
                 expected="one of " + ", ".join(choices), got=reference)
    fields = {"question": question, "choices": choices, "options": options_text(choices),
              "id": instance_id, **extra}
    return Item(instance_id, fields, reference, choices, rec.source, rec.row,
                specialty=extra.get("subject"))


def item_snapshot(items: list[Item], fmt: str, source: str, rubric: Rubric | None = None,
                  criterion_map: CriterionMap = IDENTITY) -> Snapshot:
    """Items as cases: the prompt is the question and its lettered options,
    the reference answer the letter; the case id is stable in the prompt."""
    out = Builder(source)
    for item in items:
        prompt = item.fields["question"]
        if item.choices:
            prompt += "\n\n" + options_text(item.choices)
        out.case(case_id_for(prompt), prompt=prompt, specialty=item.specialty or UNSPECIFIED,
                 reference_answer=item.reference)
    return out.snapshot(rubric or load_rubric(), source_meta(fmt, source, criterion_map))
