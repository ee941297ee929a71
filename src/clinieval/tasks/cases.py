"""A benchmark's cases as :class:`~clinieval.io.foreign.choice.Item` s, from
a published release (MedQA, PubMedQA, MedMCQA, HealthBench), plain JSON
Lines or CSV, or any other source ``clinieval import`` reads.

Plain JSONL and CSV rows keep every column as a template field; the id,
reference and choices columns are named in ``[cases]``. Choices are an
object (letter -> text) or a list (lettered A, B, ...); in CSV, columns
named ``A``, ``B``, ... are the choices. A multiple-choice reference must be
one of the item's letters.
"""

from __future__ import annotations

import csv
import io
from pathlib import Path

from clinieval.errors import InputError
from clinieval.io.foreign import medmcqa, medqa, pubmedqa, sniff_format
from clinieval.io.foreign.choice import LETTERS, Item, options_text
from clinieval.io.foreign.records import Record, parse, split_records
from clinieval.io.jsontext import read_text
from clinieval.tasks.spec import Benchmark

READERS = {"medqa": medqa.items, "medmcqa": medmcqa.items, "pubmedqa": pubmedqa.items}


def case_format(bench: Benchmark) -> str:
    """The ``[cases]`` format, or the one the file looks like."""
    spec = bench.definition.cases
    if spec.format != "auto":
        return spec.format
    path = bench.resolve(spec.path)
    if path.suffix in (".json", ".jsonl"):
        found = sniff_format(path) if path.is_file() else "jsonl"
        if found in (*READERS, "healthbench"):
            return found
        return "jsonl"
    return "csv" if path.suffix == ".csv" else "import"


def load_items(bench: Benchmark) -> list[Item]:
    """The benchmark's items (at most ``cases.limit``), ids unique."""
    spec = bench.definition.cases
    path = bench.resolve(spec.path)
    fmt = case_format(bench)
    if fmt not in ("import",) and not path.is_file():
        raise InputError(str(bench.path), "the cases file does not exist", field="cases.path",
                         got=str(path))
    if fmt in READERS:
        items = READERS[fmt](path)
    elif fmt == "jsonl":
        items = _plain(split_records(parse(path), what="cases", is_record=lambda d: True), bench)
    elif fmt == "csv":
        items = _plain(_csv_records(path), bench)
    else:
        items = _from_snapshot(path if path.exists() else spec.path, fmt)
    if not items:
        raise InputError(str(path), "no cases")
    seen: dict[str, int | str] = {}
    for item in items:
        if item.instance_id in seen:
            raise InputError(item.source, "the same case id twice", row=item.row,
                             field=spec.id, got=item.instance_id)
        seen[item.instance_id] = item.row
    return items[:spec.limit] if spec.limit else items


def _csv_records(path: Path) -> list[Record]:
    source, text = read_text(path)
    reader = csv.DictReader(io.StringIO(text))
    try:
        header = reader.fieldnames  # reads the header row
    except csv.Error as err:
        raise InputError(source, f"not valid CSV: {err}", row=1) from None
    if not header:
        raise InputError(source, "CSV file has no header")
    records = []
    try:
        for line, raw in enumerate(reader, start=2):
            if None in raw:
                raise InputError(source, "row has more cells than the header", row=line)
            records.append(Record(source, line, {k: v for k, v in raw.items() if v != ""}))
    except csv.Error as err:
        raise InputError(source, f"not valid CSV: {err}", row=reader.line_num) from None
    return records


def _plain(records: list[Record], bench: Benchmark) -> list[Item]:
    spec = bench.definition.cases
    multiple = bench.definition.answer.format == "choice"
    items = []
    for rec in records:
        ident = rec.ident(spec.id, "the case id", required=False) or str(rec.row)
        reference = rec.data.get(spec.reference)
        if reference is not None and not isinstance(reference, str):
            reference = str(reference) if isinstance(reference, int | float) else None
            if reference is None:
                rec.fail("the reference is not text or a number", spec.reference)
        choices = _choices(rec, spec.choices) if multiple else None
        fields = dict(rec.data) | {"id": ident}
        if choices is not None:
            fields |= {"choices": choices, "options": options_text(choices)}
            if reference is not None:
                reference = reference.strip().upper() if reference.strip().upper() in choices \
                    else _letter_of(reference, choices)
                if reference not in choices:
                    rec.fail("the reference answer is not one of the choices", spec.reference,
                             expected="one of " + ", ".join(choices), got=rec.data[spec.reference])
        items.append(Item(ident, fields, reference, choices, rec.source, rec.row))
    return items


def _letter_of(reference: str, choices: dict[str, str]) -> str:
    """A reference given as the option's text: its letter (else as given)."""
    return next((k for k, v in choices.items() if v.strip() == reference.strip()), reference)


def _choices(rec: Record, key: str) -> dict[str, str]:
    value = rec.data.get(key)
    if value is None:
        letters = [c for c in LETTERS if c in rec.data]
        if not letters:
            rec.fail("a multiple-choice case needs its choices", key,
                     expected="an object letter -> text, a list, or columns A, B, ...")
        return {c: str(rec.data[c]) for c in letters}
    if isinstance(value, list) and 1 < len(value) <= len(LETTERS):
        return {LETTERS[i]: str(v) for i, v in enumerate(value)}
    if isinstance(value, dict) and value:
        return {str(k).strip().upper(): str(v) for k, v in value.items()}
    rec.fail("choices are not usable", key, expected=f"an object or a list of 2..{len(LETTERS)}",
             got=value)


def _from_snapshot(path: Path | str, fmt: str) -> list[Item]:
    """Cases of any source ``clinieval import`` reads: the prompt (also as
    ``question``) and the reference answer; a HealthBench file's rubric
    items become the items' rules."""
    from clinieval.sources import read_any, read_source

    snap = read_any(str(path)) if fmt == "import" else read_source(path, fmt=fmt)[0]
    rules: dict[str, list[dict]] = {}
    for rule in snap.meta.get("case_rules", []):
        rules.setdefault(rule["case_id"], []).append(rule)
    items = []
    for row, case in enumerate(snap["cases"].to_pylist(), start=1):
        if not case.get("prompt"):
            continue
        fields = {k: v for k, v in case.items() if v is not None}
        fields |= {"id": case["case_id"], "question": case["prompt"]}
        items.append(Item(case["case_id"], fields, case.get("reference_answer"), None,
                          str(path), row, case.get("specialty"), rules.get(case["case_id"], [])))
    return items
