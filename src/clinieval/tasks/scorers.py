"""Scorers that compare an output with the case's reference: exact match
after normalisation, a multiple-choice letter, a number within a tolerance,
a regular expression, token F1, and Python hooks (registered functions).

Each gives a :class:`Scored`: ``ok`` with a score in 0..1, ``unparsed``
when no answer could be read from the output (its own outcome: counted and
shown, never a zero), or ``error`` when the scorer itself failed on that
instance (a hook that raised). The judge scorers (rubric, jury, rule) run
as judge jobs: see :mod:`clinieval.tasks.judged`.
"""

from __future__ import annotations

import importlib.util
import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from clinieval.errors import InputError
from clinieval.io.foreign.choice import Item
from clinieval.tasks import extract
from clinieval.tasks.spec import Benchmark, Scorer

HOOKS: dict[str, Callable[..., Any]] = {}
"""Python scorers by name (:func:`scorer` registers them)."""


@dataclass(frozen=True)
class Scored:
    """One sample's outcome under one scorer: ``status`` (ok, unparsed,
    error or failed), the score when ok, what was read from the output
    (``extracted``) and a note (``detail``: why unparsed, the error)."""

    status: str
    score: float | None = None
    extracted: str | None = None
    detail: str | None = None


def scorer(name: str) -> Callable[[Callable], Callable]:
    """Register a Python scorer under ``name`` (``kind = "python"``,
    ``function = "name"``). It is called as ``fn(output, case)`` with
    ``case`` a dict of ``id``, ``reference``, ``choices`` and ``fields``, and
    returns a score (a number, or a bool), None when the output cannot be
    read, or a :class:`Scored`."""

    def register(fn: Callable) -> Callable:
        HOOKS[name] = fn
        return fn

    return register


ScoreFn = Callable[[str, Item], Scored]


def reference_scorer(bench: Benchmark, index: int) -> ScoreFn:
    """The scoring function of ``bench``'s scorer ``index`` (not a judge)."""
    spec = bench.definition.scorers[index]
    answer = bench.definition.answer
    steps = answer.normalise
    read = _reader(bench)
    if spec.kind == "python":
        hook = load_hook(bench, index)

        def by_hook(output: str, item: Item) -> Scored:
            case = {"id": item.instance_id, "reference": item.reference,
                    "choices": item.choices, "fields": item.fields}
            try:
                return _from_hook(hook(output, case))
            except Exception as err:  # the instance's error, not the run's
                return Scored("error", detail=f"{type(err).__name__}: {err}"[:500])

        return by_hook

    def score(output: str, item: Item) -> Scored:
        text, problem = read(output)
        if text is None:
            return Scored("unparsed", detail=problem)
        return _compare(spec, text, item, steps, answer)

    return score


def _compare(spec: Scorer, text: str, item: Item, steps, answer) -> Scored:
    ref = item.reference or ""
    if spec.kind == "choice":
        letter = extract.choice_letter(text, item.choices or {})
        if letter is None:
            return Scored("unparsed", detail="no single choice letter or option text")
        return Scored("ok", float(letter == ref), letter)
    if spec.kind == "numeric":
        value, problem = extract.number(text, answer.unit)
        if value is None:
            return Scored("unparsed", detail=problem)
        try:
            target = float(ref.replace(",", ""))
        except ValueError:
            return Scored("error", detail=f"the reference {ref!r} is not a number")
        ok = extract.within(value, target, answer.tolerance, answer.abs_tolerance)
        return Scored("ok", float(ok), f"{value:g}")
    if spec.kind == "regex":
        found = re.search(spec.pattern, text)
        if found is None or found.group(1) is None:
            return Scored("unparsed", detail="the pattern did not match")
        got = found.group(1)
        return Scored("ok", float(extract.normalise(got, steps) == extract.normalise(ref, steps)),
                      got[:500])
    if spec.kind == "f1":
        return Scored("ok", extract.token_f1(text, ref, steps), None)
    return Scored("ok", float(extract.normalise(text, steps) == extract.normalise(ref, steps)),
                  extract.normalise(text, steps)[:500])


def _reader(bench: Benchmark) -> Callable[[str], tuple[str | None, str | None]]:
    """The answer text of an output: the output itself, or for the json
    format the value of its ``field`` in the JSON object (checked against
    the schema first)."""
    answer = bench.definition.answer
    if answer.format != "json":
        return lambda output: (output, None)

    def from_json(output: str) -> tuple[str | None, str | None]:
        try:
            value = extract.json_value(output)
        except ValueError as err:
            return None, f"not JSON: {err}"[:200]
        problem = extract.schema_problem(value, answer.schema_ or {})
        if problem:
            return None, f"does not match the schema: {problem}"
        if answer.field is not None:
            if not isinstance(value, dict) or answer.field not in value:
                return None, f"no {answer.field!r} in the JSON"
            value = value[answer.field]
        return (value if isinstance(value, str) else json.dumps(value)), None

    return from_json


def _from_hook(value: Any) -> Scored:
    if isinstance(value, Scored):
        return value
    if value is None:
        return Scored("unparsed", detail="the hook could not read the output")
    if isinstance(value, bool | int | float):
        return Scored("ok", float(value))
    return Scored("error", detail=f"the hook returned {type(value).__name__}, not a score")


def load_hook(bench: Benchmark, index: int) -> Callable[..., Any]:
    """The function of a python scorer: a registered name, or ``FILE.py:NAME``
    beside the benchmark file; an error names the file and the key."""
    name = bench.definition.scorers[index].function or ""
    key = f"scorers[{index}].function"
    if name in HOOKS:
        return HOOKS[name]
    if ":" not in name:
        raise InputError(str(bench.path), "no Python scorer of that name is registered",
                         field=key, expected="a registered name (clinieval.tasks.scorer) or"
                         " FILE.py:NAME", got=name)
    file_name, func = name.rsplit(":", 1)
    path = bench.resolve(file_name)
    if not path.is_file():
        raise InputError(str(bench.path), "the scorer's file does not exist", field=key,
                         got=str(path))
    module_spec = importlib.util.spec_from_file_location(f"clinieval_hook_{path.stem}", path)
    module = importlib.util.module_from_spec(module_spec)
    try:
        module_spec.loader.exec_module(module)
    except Exception as err:
        raise InputError(str(path), f"the scorer's file failed to load: {err}") from None
    fn = getattr(module, func, None)
    if not callable(fn):
        raise InputError(str(bench.path), f"{path.name} has no function {func!r}", field=key)
    return fn
