"""inspect_ai evaluation logs (``.eval`` archives and ``.json`` files), read by
inspect_ai's own log reader (``pip install clinieval[inspect]``).

Mapping, one log at a time:

- **Case**: each sample's input (a lone user message's text, else the
  conversation as ``role: content`` paragraphs), id ``c_`` + a hash of that
  text as for arena prompts, so logs of the same task from several models
  land on the same cases. The sample's ``target`` is the reference answer;
  a string ``specialty`` in its metadata is the specialty (else
  "Unspecified").
- **Answer**: the sample's output by the model the log's eval spec names
  (``eval.model``), one answer per sample and epoch (``sample_index`` =
  epoch - 1; its id names the log's eval, so two runs are two answers), with
  its output tokens, time and the spec's temperature.
  A sample that ended in an error has no answer and is counted in a note.
- **Judgments**: one per scorer (the judge, ``judge_model``) and answer, or
  one per key when the scorer's value is a mapping. A key (or, for a
  scalar value, the scorer's name) that the criterion map resolves to a
  rubric criterion is a ``rubric`` judgment, its value held to the map's
  source scale and put on -2..+2; any other is kept on the scorer's own
  scale with no judge kind: numbers as they are, inspect's C / P / I / N as
  1 / 0.5 / 0 / 0, yes / true and no / false as 1 and 0. A null or NaN
  value is an ``unparsed`` judgment without a score. The value, the
  scorer's extracted answer and its explanation are kept as JSON in
  ``raw_output``, the explanation in ``reason`` too.

What the log holds that is none of these (a list value, text that is no
number, an infinite value, a sample seen twice) is refused with an
:class:`~clinieval.errors.InputError` naming the file, the sample and the
field; so is a file inspect_ai cannot read, naming the field it stopped at.
"""

from __future__ import annotations

import json
import math
import zipfile
from pathlib import Path
from typing import Any

from clinieval.errors import InputError
from clinieval.io.foreign.builder import UNSPECIFIED, Builder, case_id_for, source_meta
from clinieval.io.foreign.healthbench import _render_prompt
from clinieval.rubric import IDENTITY, CriterionMap, load_rubric
from clinieval.schema.domain import Rubric
from clinieval.snapshot import Snapshot

EXTRA = "pip install 'clinieval[inspect]'"
MAX_UNPACKED = 2 << 30
"""Bytes an ``.eval`` archive may declare it unpacks to: inspect_ai holds the
whole log in memory, so a forged archive is refused before it is read."""
WORDS = {"c": 1.0, "p": 0.5, "i": 0.0, "n": 0.0, "yes": 1.0, "true": 1.0, "no": 0.0,
         "false": 0.0}
"""inspect_ai's CORRECT / PARTIAL / INCORRECT / NOANSWER and the boolean words,
as its ``value_to_float`` reads them (case-insensitive)."""
WORDS_EXPECTED = "a number, true/false, or one of C, P, I, N, yes, no"


def looks_like(record: dict) -> bool:
    """A ``.json`` log: a version and an eval spec naming its task."""
    spec = record.get("eval")
    return "version" in record and isinstance(spec, dict) and "task" in spec


def is_eval_archive(path: Path) -> bool:
    """An ``.eval`` log: a zip archive holding inspect_ai's header or journal."""
    if path.suffix.lower() != ".eval" or not path.is_file():
        return False
    try:
        with zipfile.ZipFile(path) as zf:
            names = set(zf.namelist())
    except (zipfile.BadZipFile, OSError, ValueError, EOFError):
        return True  # a damaged archive named .eval: the reader says what is wrong
    return bool({"header.json", "_journal/start.json"} & names)


def _check_archive(path: Path, source: str) -> None:
    if path.suffix.lower() != ".eval":
        return
    try:
        with zipfile.ZipFile(path) as zf:
            size = sum(m.file_size for m in zf.infolist())
    except (zipfile.BadZipFile, OSError, ValueError, EOFError) as err:
        raise InputError(source, f"not a readable .eval archive: {err}") from None
    if size > MAX_UNPACKED:
        raise InputError(source, f"the archive unpacks to more than {MAX_UNPACKED >> 20} MiB",
                         got=size)


def _field(loc: tuple) -> str:
    path = ""
    for part in loc:
        path += f"[{part}]" if isinstance(part, int) else f".{part}" if path else str(part)
    return path


def read_log(path: str | Path) -> Any:
    """The ``EvalLog`` inspect_ai reads from ``path``; its failures as an
    InputError naming the file (and the field, when its validation names one)."""
    path = Path(path)
    source = str(path)
    try:
        from inspect_ai.log import read_eval_log
    except ImportError:
        raise InputError(source, f"reading inspect_ai logs needs the inspect extra ({EXTRA})"
                         ) from None
    from pydantic import ValidationError

    if not path.is_file():
        raise InputError(source, "no such file")
    _check_archive(path, source)
    fmt = "eval" if path.suffix.lower() == ".eval" else "json"
    try:
        return read_eval_log(str(path), resolve_attachments=True, format=fmt)
    except ValidationError as err:
        first = err.errors()[0]
        raise InputError(source, f"not a valid inspect_ai log: {first['msg']}",
                         field=_field(first["loc"]) or None) from None
    # Anything else inspect_ai's reader raises on a damaged or forged file
    # (JSON, zip, Unicode, recursion, key and value errors) is the file's fault.
    except Exception as err:  # noqa: BLE001
        raise InputError(source, f"inspect_ai cannot read the log: {type(err).__name__}:"
                         f" {str(err)[:300]}") from None


def read(path: str | Path, *, rubric: Rubric | None = None,
         criterion_map: CriterionMap = IDENTITY) -> Snapshot:
    """Read an inspect_ai log into a snapshot (see the module's mapping)."""
    rubric = rubric or load_rubric()
    log = read_log(path)
    source = str(path)
    if not log.samples:
        raise InputError(source, "the log holds no samples", field="samples",
                         expected="a log written with its samples (not header_only)")
    model = log.eval.model
    if not isinstance(model, str) or not model.strip():
        raise InputError(source, "the eval spec names no model", field="eval.model", got=model)
    out = Builder(source)
    out.model(model)
    if "/" in model:
        out.models[model]["provider"] = model.split("/", 1)[0]
    scorer = _Scores(source, rubric, criterion_map)
    seen: set[tuple[str, int]] = set()
    errored = 0
    temperature = getattr(log.eval.model_generate_config, "temperature", None)
    for index, sample in enumerate(log.samples):
        where = f"samples[{index}] (id {sample.id!r}, epoch {sample.epoch})"
        key = (str(sample.id), int(sample.epoch))
        if key in seen:
            raise InputError(source, "the same sample and epoch appear twice", row=where,
                             field="id", expected="each (id, epoch) once", got=key)
        seen.add(key)
        if sample.error is not None:
            errored += 1
            continue
        answer_id = _sample(out, sample, (model, str(log.eval.eval_id)), temperature, source,
                            where)
        for name, score in (sample.scores or {}).items():
            scorer.add(out, answer_id, name, score, where)
    notes = [f"inspect_ai log of task {log.eval.task!r} ({log.status}), model {model!r}:"
             f" {len(log.samples)} sample(s) over {log.eval.config.epochs or 1} epoch(s)."]
    if errored:
        notes.append(f"{errored} sample(s) ended in an error and carry no answer.")
    notes += scorer.notes()
    meta = source_meta("inspect", source, criterion_map, notes=notes,
                       inspect={"task": log.eval.task, "eval_id": log.eval.eval_id,
                                "run_id": log.eval.run_id, "model": model,
                                "status": log.status, "created": log.eval.created})
    snap = out.snapshot(rubric, meta)
    return snap


def _text(value: Any, source: str, where: str, field: str) -> str:
    if not isinstance(value, str):
        raise InputError(source, "text expected", row=where, field=field, got=value)
    return value


def _prompt(sample: Any, source: str, where: str) -> str:
    if isinstance(sample.input, str):
        return sample.input.strip()
    turns = [(message.role, _text(message.text, source, where, f"input[{i}]"))
             for i, message in enumerate(sample.input)]
    if not turns:
        raise InputError(source, "the sample's input is empty", row=where, field="input")
    return _render_prompt(turns)


def _reference(target: Any) -> str | None:
    if isinstance(target, list):
        target = "\n".join(t for t in target if isinstance(t, str))
    return target if isinstance(target, str) and target.strip() else None


def _sample(out: Builder, sample: Any, run: tuple[str, str], temperature: float | None,
            source: str, where: str) -> str:
    """Add the sample's case and answer; the answer's id names the log's eval
    (``run`` is the model and the eval id), so two runs are two answers."""
    prompt = _prompt(sample, source, where)
    if not prompt:
        raise InputError(source, "the sample's input is empty", row=where, field="input")
    metadata = sample.metadata if isinstance(sample.metadata, dict) else {}
    specialty = metadata.get("specialty")
    specialty = specialty.strip() if isinstance(specialty, str) and specialty.strip() else None
    case_id = out.case(case_id_for(prompt), prompt=prompt, specialty=specialty or UNSPECIFIED,
                       reference_answer=_reference(sample.target))
    output = sample.output
    text = output.completion if output is not None else None
    answer_id = out.answer(case_id, run[0], text, run[1], str(sample.id),
                           sample_index=int(sample.epoch) - 1)
    row = next(r for r in out.answers.values() if r["answer_id"] == answer_id)
    usage = getattr(output, "usage", None)
    row.update(tokens=getattr(usage, "output_tokens", None),
               latency_s=getattr(output, "time", None),
               cost_usd=getattr(usage, "total_cost", None), temperature=temperature)
    return answer_id


class _Scores:
    """Turns a sample's scores into judgments, remembering what it resolved."""

    def __init__(self, source: str, rubric: Rubric, cmap: CriterionMap) -> None:
        self.source, self.rubric, self.cmap = source, rubric, cmap
        self.criteria: dict[str, str | None] = {}
        self.own: set[str] = set()
        self.dropped: set[str] = set()
        self.unparsed = 0

    def criterion(self, name: str) -> tuple[bool, str | None]:
        """(is a rubric criterion, its id); (False, name) for the scorer's own."""
        if name not in self.criteria:
            try:
                self.criteria[name] = self.cmap.resolve(self.rubric, name)
            except KeyError:
                self.criteria[name] = name
                self.own.add(name)
        resolved = self.criteria[name]
        if resolved is None:
            self.dropped.add(name)
        return name not in self.own, resolved

    def add(self, out: Builder, answer_id: str, scorer: str, score: Any, where: str) -> None:
        field = f"scores.{scorer}.value"
        value = score.value
        if isinstance(value, dict):
            items = [(str(k), v, f"{field}.{k}") for k, v in value.items()]
        elif isinstance(value, list | tuple):
            raise InputError(self.source, "a list of values", row=where, field=field,
                             expected="one value, or a mapping of names to values",
                             got=value)
        else:
            items = [(scorer, value, field)]
        for name, item, at in items:
            rubric_criterion, criterion_id = self.criterion(name)
            if criterion_id is None:
                continue
            raw = {"value": item, "answer": score.answer, "explanation": score.explanation}
            row = {"answer_id": answer_id, "judge_model": scorer, "criterion_id": criterion_id,
                   "raw_output": json.dumps({k: v for k, v in raw.items() if v is not None},
                                            ensure_ascii=False, allow_nan=True),
                   "reason": score.explanation,
                   "judge_kind": "rubric" if rubric_criterion else None}
            if item is None or isinstance(item, float) and math.isnan(item):
                self.unparsed += 1
                out.judgment(**row, parse_status="unparsed", score=None)
                continue
            if rubric_criterion:
                number = self.cmap.rescale_one(item, source=self.source, row=where, field=at)
            else:
                number = self.number(item, where, at)
            out.judgment(**row, parse_status="ok", score=float(number))

    def number(self, value: Any, where: str, field: str) -> float:
        if isinstance(value, bool):
            return float(value)
        if isinstance(value, int | float):
            number = float(value)
        elif isinstance(value, str) and value.strip().lower() in WORDS:
            return WORDS[value.strip().lower()]
        else:
            try:
                number = float(value) if isinstance(value, str) else math.nan
            except ValueError:
                number = math.nan
            if math.isnan(number):
                raise InputError(self.source, "the value is not a score", row=where,
                                 field=field, expected=WORDS_EXPECTED, got=value)
        if not math.isfinite(number):
            raise InputError(self.source, "the value is not a finite number", row=where,
                             field=field, expected=WORDS_EXPECTED, got=value)
        return number

    def notes(self) -> list[str]:
        notes = []
        if self.own:
            notes.append(f"{len(self.own)} score name(s) are not rubric criteria and are kept on"
                         f" the scorer's own scale without a judge kind: "
                         f"{', '.join(sorted(self.own)[:8])}.")
        if self.dropped:
            notes.append(f"criterion map {self.cmap.name!r} drops {len(self.dropped)} score"
                         f" name(s): {', '.join(sorted(self.dropped)[:8])}.")
        if self.unparsed:
            notes.append(f"{self.unparsed} score value(s) were null or NaN and are stored as"
                         " unparsed judgments without a score.")
        return notes
