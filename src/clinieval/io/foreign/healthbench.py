"""HealthBench-style rubric examples: a prompt conversation and rubric items
with signed points and tags, optionally a model's completion."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

import pyarrow as pa

from clinieval.io.foreign.builder import UNSPECIFIED, Builder, source_meta
from clinieval.io.foreign.records import (
    Record,
    conversation,
    parse,
    pick_turn,
    split_records,
    where,
)
from clinieval.rubric import IDENTITY, CriterionMap, load_rubric
from clinieval.schema.domain import Rubric
from clinieval.snapshot import Snapshot

PLACEHOLDER_MODEL = "unknown-completion"
"""The model a completion is attributed to when the example does not say."""

CASE_RULES = pa.schema([
    pa.field("case_id", pa.string(), nullable=False),
    pa.field("rule_id", pa.string(), nullable=False),
    pa.field("text", pa.string(), nullable=False),
    pa.field("points", pa.int32(), nullable=False),
    pa.field("tags", pa.list_(pa.string())),
])
"""Case-level rubric rules (HealthBench items; CSEDB-style graded rules).

The snapshot table contract has no rules table, so :func:`read`
puts the rules into ``snapshot.meta["case_rules"]`` as a list of plain dicts
with these columns. Being JSON, they survive a bundle's ``manifest.json``;
:func:`case_rules_table` turns them back into an Arrow table.
"""

def case_rules_table(rules: Iterable[dict]) -> pa.Table:
    """The :data:`CASE_RULES` Arrow table for ``meta["case_rules"]``."""
    return pa.Table.from_pylist(list(rules), schema=CASE_RULES)

def looks_like(record: dict) -> bool:
    return "rubrics" in record and "prompt" in record


def _render_prompt(turns: list[tuple[str, str]]) -> str:
    """The case prompt: the text of a lone user turn, else the conversation as
    ``role: content`` paragraphs."""
    if len(turns) == 1 and turns[0][0] == "user":
        return turns[0][1].strip()
    return "\n\n".join(f"{role}: {content.strip()}" for role, content in turns)


def _tag_value(tags: list[str], prefix: str) -> str | None:
    return next((t[len(prefix):].strip() for t in tags if t.startswith(prefix)), None)


def _rule_points(item: Record) -> int:
    expected = "a non-zero integer (negative for undesirable behaviour)"
    points = item.typed("points", (int, float), expected)
    if not float(points).is_integer() or points == 0 or abs(points) >= 2**31:
        item.fail("points must be a non-zero integer", "points", expected=expected, got=points)
    return int(points)


def _rules(rec: Record, case_id: str) -> list[dict]:
    items = rec.array("rubrics", "of rubric items {criterion, points, tags}")
    if not items:
        rec.fail("rubric is empty", "rubrics", expected="at least one rubric item", got=items)
    rules = []
    for i, item in enumerate(rec.objects("rubrics", items, "{criterion, points, tags}")):
        rules.append({"case_id": case_id, "rule_id": f"{case_id}:{i + 1}",
                      "text": item.text("criterion", "what the rule checks"),
                      "points": _rule_points(item),
                      "tags": item.strings("tags", "the rule's tags")})
    return rules


def _completion(rec: Record) -> str | None:
    if isinstance(rec.data.get("completion"), list):
        turns = conversation(rec, "completion")
        return pick_turn(rec, "completion", turns, "assistant", last=True)
    return rec.text("completion", "the model's answer", required=False, empty=True)


def _reference(rec: Record) -> str | None:
    data = rec.obj("ideal_completions_data", "with an ideal_completion", required=False)
    if data is None:
        return None
    ideal = rec.child("ideal_completions_data", data)
    return ideal.text("ideal_completion", "the reference answer", required=False, empty=True)


def read(path: str | Path, *, rubric: Rubric | None = None,
                     criterion_map: CriterionMap = IDENTITY,
                     model_field: str = "model") -> Snapshot:
    """Read HealthBench-style rubric examples (JSON Lines, or a JSON array).

    Each example is a case: id ``prompt_id``; prompt the text of a lone user
    turn, else the conversation as ``role: content`` paragraphs; specialty and
    category from the ``theme:`` tag (specialty "Unspecified" without one);
    subcategory from ``physician_agreed_category:``; reference answer from
    ``ideal_completions_data.ideal_completion``. Its rubric items become
    case rules with signed integer points in ``meta["case_rules"]`` (see
    :data:`CASE_RULES`). A ``completion`` becomes an answer by the model in
    ``model_field`` (else a placeholder, with a note).
    """
    rubric = rubric or load_rubric()
    records = split_records(parse(path), what="rubric examples",
                       is_record=lambda d: "rubrics" in d)
    out = Builder(records[0].source)
    rules: list[dict] = []
    seen: dict[str, int | str] = {}
    placeholders = multi_turn = 0
    for rec in records:
        case_id = rec.ident("prompt_id", "the example id")
        if case_id in seen:
            rec.fail(f"duplicate prompt_id (also at {where(seen[case_id])})", "prompt_id",
                     expected="a unique prompt_id per example", got=case_id)
        seen[case_id] = rec.row
        turns = conversation(rec, "prompt")
        if turns is None:
            rec.fail("required field is missing", "prompt",
                     expected="a JSON array of {role, content} turns")
        multi_turn += len(turns) > 1
        rules += _rules(rec, case_id)
        placeholders += _healthbench_case(rec, out, case_id, turns, model_field)
    notes = []
    if multi_turn:
        notes.append(f"{multi_turn} prompt(s) are conversations of several turns; the case"
                     " prompt holds them as 'role: content' paragraphs.")
    if placeholders:
        notes.append(f"{placeholders} completion(s) had no model in field {model_field!r} and"
                     f" were attributed to the placeholder model {PLACEHOLDER_MODEL!r};"
                     " model-level analyses are not meaningful for them.")
    meta = source_meta("healthbench", out.source, criterion_map, notes=notes, case_rules=rules)
    return out.snapshot(rubric, meta)


def _healthbench_case(rec: Record, out: Builder, case_id: str, turns: list, model_field: str,
                      ) -> bool:
    """Add the case (and its completion); True when the completion's model is unknown."""
    tags = rec.strings("example_tags", "the example's tags")
    theme = _tag_value(tags, "theme:")
    prompt = _render_prompt(turns)
    reference = _reference(rec)
    completion = _completion(rec)
    model = rec.ident(model_field, "the model that wrote the completion", required=False)
    out.case(case_id, prompt=prompt, specialty=theme or UNSPECIFIED, category=theme,
             subcategory=_tag_value(tags, "physician_agreed_category:"),
             reference_answer=reference)
    if completion is None:
        return False
    out.answer(case_id, model or PLACEHOLDER_MODEL, completion)
    return model is None
