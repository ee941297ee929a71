"""Reading an answer out of a model's output: a choice letter, a number with
its unit, a JSON value, normalised text. Each reader returns the answer or
``None`` (not readable: the caller records a parse failure, never a zero).

Choice letters, in this order (the first rule that gives a letter wins):

1. Markdown emphasis (``**B**``, ``__B__``, ``*B*``) and code marks are removed.
2. An explicit statement: "answer", "option" or "choice", optionally "is",
   ":" or "=", then the letter, bare or in brackets ("The answer is (B), not
   C" gives B: the statement wins over letters mentioned later).
3. The output starts with the letter, alone or followed by ``.``, ``)`` or
   ``:`` ("B. Metformin, because ..." gives B).
4. Exactly one distinct letter of the choices stands alone in the output
   (bracketed, or followed by ``.`` or ``)``, or bare; a bare letter
   followed by a lower-case word is taken for the article "A" unless that
   word is or, and, is, was, would, because, seems or looks); several
   distinct letters ("A or C") are not readable.
5. Exactly one option's text appears in the output (case and spacing
   ignored), and no other option's.

Otherwise the output is not readable.
"""

from __future__ import annotations

import json
import math
import re
import string
from typing import Any

_EMPHASIS = re.compile(r"(\*\*|__|\*|`)")
_STATED = re.compile(r"\b(?:final\s+)?(?:answer|option|choice)\b\s*(?:is\s*)?[:=]?\s*"
                     r"(?:option\s+|letter\s+)?[(\[]?([A-Za-z])[)\]]?(?![A-Za-z0-9])",
                     re.IGNORECASE)
_LEADING = re.compile(r"^\s*[(\[]?([A-Z])(?:[)\].:]|\s*$|\s*\n)")
_ALONE = re.compile(r"[(\[]([A-Z])[)\]]|(?<![\w'])([A-Z])(?:[.)](?=\s|$)|(?![\w']))")
_ARTICLE = re.compile(r"\s+(?!(?:or|and|is|was|would|because|seems|looks)\b)[a-z]")
_NUMBER = re.compile(r"[-+]?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?(?:[eE][-+]?\d+)?"
                     r"|[-+]?\.\d+")
_UNIT = re.compile(r"\s*([A-Za-zµμ%/][A-Za-z0-9µμ%/.^²³]*)")
_STATED_NUMBER = re.compile(r"\b(?:answer|result|score|value)\b[^0-9+\-.]{0,20}", re.IGNORECASE)


def choice_letter(output: str, choices: dict[str, str]) -> str | None:
    """The chosen letter by the rules of the module's doc, or None."""
    text = _EMPHASIS.sub("", output)
    letters = set(choices)
    for found in _STATED.finditer(text):
        letter = found.group(1).upper()
        if letter in letters:
            return letter
    lead = _LEADING.match(text)
    if lead and lead.group(1) in letters:
        return lead.group(1)
    alone = {m.group(1) or m.group(2) for m in _ALONE.finditer(text)
             if not (m.group(2) == "A" and _ARTICLE.match(text, m.end()))} & letters
    if len(alone) == 1:
        return alone.pop()
    if alone:
        return None
    squashed = _squash(text)
    named = [k for k, v in choices.items() if _squash(v) and _squash(v) in squashed]
    # An option whose text holds another's ("aspirin" in "aspirin and heparin"): the longer.
    named = [k for k in named if not any(
        k != o and _squash(choices[k]) in _squash(choices[o]) for o in named)]
    return named[0] if len(named) == 1 else None


def _squash(text: str) -> str:
    return " ".join(text.lower().split())


def number(output: str, unit: str | None = None) -> tuple[float | None, str | None]:
    """``(value, problem)``: the number stated after "answer", "result",
    "score" or "value", else the last number in the output; with ``unit``,
    a different unit written right after the number is a problem (no
    conversion is guessed). Thousands separators are read."""
    text = _EMPHASIS.sub("", output)
    stated = _STATED_NUMBER.search(text)
    matches = list(_NUMBER.finditer(text, stated.end() if stated else 0))
    if stated and not matches:
        matches = list(_NUMBER.finditer(text))
    if not matches:
        return None, "no number"
    found = matches[0] if stated else matches[-1]
    value = float(found.group(0).replace(",", ""))
    if not math.isfinite(value):
        return None, "not a finite number"
    if unit:
        written = _UNIT.match(text, found.end())
        if written and written.group(1).rstrip(".") and _unit_key(written.group(1)) \
                not in (_unit_key(unit), "") and _looks_like_unit(written.group(1)):
            return None, f"unit {written.group(1).rstrip('.')!r}, expected {unit!r}"
    return value, None


def _unit_key(unit: str) -> str:
    return unit.strip().rstrip(".").lower().replace("μ", "µ").replace(" ", "")


def _looks_like_unit(word: str) -> bool:
    """A unit-like token after a number ("mg", "mL/min", "%"), not a word of
    the sentence ("and", "is")."""
    key = _unit_key(word)
    return bool(key) and ("/" in key or "%" in key or len(key) <= 4) and key not in (
        "and", "or", "is", "in", "the", "for", "to", "of", "as", "at", "so", "if", "per")


def within(value: float, reference: float, tolerance: float, abs_tolerance: float) -> bool:
    """MedCalc-Bench style: equal within a relative and/or absolute tolerance."""
    return abs(value - reference) <= max(abs_tolerance, tolerance * abs(reference))


def json_value(output: str) -> Any:
    """The JSON object in the output (a fenced block, or the text from its
    first ``{`` to its last ``}``); raises ValueError when there is none."""
    text = output.strip()
    fence = re.search(r"```(?:json)?\s*(.*?)```", text, re.DOTALL)
    if fence:
        text = fence.group(1).strip()
    start, end = text.find("{"), text.rfind("}")
    if start < 0 or end < start:
        raise ValueError("no JSON object")
    return json.loads(text[start:end + 1])


_ARTICLES = re.compile(r"\b(a|an|the)\b")
_PUNCT = str.maketrans("", "", string.punctuation)


def normalise(text: str, steps: tuple[str, ...]) -> str:
    """Text for comparison: lower-cased, punctuation dropped, articles
    dropped, spaces collapsed (SQuAD's normalisation), each step when asked."""
    if "lower" in steps:
        text = text.lower()
    if "punctuation" in steps:
        text = text.translate(_PUNCT)
    if "articles" in steps:
        text = _ARTICLES.sub(" ", text)
    if "whitespace" in steps:
        text = " ".join(text.split())
    return text


def token_f1(prediction: str, reference: str, steps: tuple[str, ...]) -> float:
    """F1 over the normalised tokens (a bag of words, SQuAD style); two
    empty texts score 1."""
    pred = normalise(prediction, steps).split()
    ref = normalise(reference, steps).split()
    if not pred or not ref:
        return float(pred == ref)
    counts: dict[str, int] = {}
    for token in ref:
        counts[token] = counts.get(token, 0) + 1
    common = 0
    for token in pred:
        if counts.get(token, 0) > 0:
            common += 1
            counts[token] -= 1
    if common == 0:
        return 0.0
    precision, recall = common / len(pred), common / len(ref)
    return 2 * precision * recall / (precision + recall)


def schema_problem(value: Any, schema: dict[str, Any], where: str = "$") -> str | None:
    """The first way ``value`` breaks ``schema`` (the JSON Schema keywords
    ``type``, ``enum``, ``properties``, ``required``, ``additionalProperties:
    false`` and ``items``), or None."""
    kinds = {"object": dict, "array": list, "string": str, "boolean": bool, "null": type(None),
             "integer": int, "number": (int, float)}
    kind = schema.get("type")
    if kind is not None:
        allowed = kind if isinstance(kind, list) else [kind]
        ok = any(isinstance(value, kinds.get(k, object)) and not (
            k in ("integer", "number") and isinstance(value, bool)) for k in allowed)
        if not ok:
            return f"{where}: expected {'/'.join(allowed)}"
    if "enum" in schema and value not in schema["enum"]:
        return f"{where}: not one of {schema['enum']}"
    if isinstance(value, dict):
        for key in schema.get("required", []):
            if key not in value:
                return f"{where}: missing {key!r}"
        props = schema.get("properties", {})
        if schema.get("additionalProperties") is False:
            extra = sorted(set(value) - set(props))
            if extra:
                return f"{where}: unexpected {extra[0]!r}"
        for key, sub in props.items():
            if key in value:
                problem = schema_problem(value[key], sub, f"{where}.{key}")
                if problem:
                    return problem
    if isinstance(value, list) and isinstance(schema.get("items"), dict):
        for i, element in enumerate(value):
            problem = schema_problem(element, schema["items"], f"{where}[{i}]")
            if problem:
                return problem
    return None
