"""Per-case rules for the rule judge, from a JSON file: a list of objects
``{"case_id", "rule_id", "text", "points"}`` (signed points, HealthBench
style), optionally with ``tags`` (a list of strings, kept out of the
judge's prompt) as the HealthBench importer stores them; or an object
holding that list under ``case_rules`` (a bundle's ``manifest.json`` from a
HealthBench import). Errors name the file, the item and the field."""

from __future__ import annotations

import json
from pathlib import Path

from pydantic import ValidationError

from clinieval.errors import InputError
from clinieval.runs.judges import Rule


def load_rules(path: str | Path) -> list[Rule]:
    """Per-case rules from a JSON list of ``{case_id, rule_id, text, points}``;
    a malformed file is an :class:`InputError` naming the file and field."""
    source = str(path)
    try:
        items = json.loads(Path(path).read_text("utf-8"))
    except FileNotFoundError:
        raise InputError(source, "rules file not found") from None
    except ValueError as err:
        raise InputError(source, f"not valid JSON: {err}") from None
    if isinstance(items, dict) and isinstance(items.get("case_rules"), list):
        items = items["case_rules"]  # the stored HealthBench rubric items
    if not isinstance(items, list):
        raise InputError(source, "expected a JSON array of rules (or an object with"
                         " case_rules)", got=type(items).__name__)
    rules = [_rule(source, i, item) for i, item in enumerate(items)]
    seen: set[tuple[str, str]] = set()
    for i, rule in enumerate(rules):
        if (rule.case_id, rule.rule_id) in seen:
            raise InputError(source, "duplicate rule for this case", row=i, field="rule_id",
                             got=rule.rule_id)
        seen.add((rule.case_id, rule.rule_id))
    return rules


def _rule(source: str, index: int, item: object) -> Rule:
    if isinstance(item, dict) and "tags" in item:
        tags = item["tags"]
        if tags is not None and not (isinstance(tags, list)
                                     and all(isinstance(t, str) for t in tags)):
            raise InputError(source, "tags must be a list of strings", row=index, field="tags")
        item = {k: v for k, v in item.items() if k != "tags"}
    try:
        return Rule.model_validate(item)
    except ValidationError as err:
        first = err.errors()[0]
        field = ".".join(str(p) for p in first["loc"]) or None
        raise InputError(source, first["msg"], row=index, field=field) from None
