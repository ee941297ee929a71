"""Column-wise validation of a whole snapshot before anything is written.

Each check is vectorised (pyarrow compute); on failure it finds the first
offending row and raises :class:`InputError` naming the source file, the row
(1-based, data rows only, header not counted), the field and the expectation.

References are checked as the contract declares them
(:attr:`clinieval.contract.tabular.Table.references`), the list the
database's foreign keys are built from: a row the database would refuse for
a missing referred row is refused here first, naming file, row and field.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from dataclasses import dataclass

import annotated_types
import pyarrow as pa
import pyarrow.compute as pc
from pydantic import BaseModel
from pydantic.fields import FieldInfo

from clinieval.contract import tabular, vocabulary
from clinieval.errors import InputError
from clinieval.schema import domain
from clinieval.snapshot import Snapshot

SINGULAR = {"studies": "study", "cases": "case", "models": "model", "answers": "answer",
             "raters": "rater", "criteria": "criterion"}

ALLOWED: dict[tuple[str, str], tuple[str, ...]] = {
    ("preferences", "choice"): vocabulary.CHOICES,
    ("preferences", "shown_left"): vocabulary.SIDES,
    ("judgments", "parse_status"): vocabulary.PARSE_STATUSES,
    ("adjudications", "verdict"): vocabulary.ADJUDICATION_VERDICTS,
}

ENTITIES: dict[str, type[BaseModel]] = {
    "studies": domain.Study, "cases": domain.Case, "models": domain.Model,
    "answers": domain.Answer, "raters": domain.Rater, "criteria": domain.Criterion,
    "ratings": domain.Rating, "preferences": domain.Preference, "judgments": domain.Judgment,
    "adjudications": domain.Adjudication,
}
"""The entity class stating each table's value rules (bounds, lengths, patterns):
the rules are read from these, so the bulk path and the one-object path agree."""


@dataclass(frozen=True)
class Rule:
    """One value rule of a column: ``bad`` marks offending values."""

    column: str
    message: str
    expected: str
    bad: Callable[[pa.ChunkedArray], pa.ChunkedArray]


def _limit(info: FieldInfo, inclusive: type, strict: type, attr: str) -> tuple[float, bool] | None:
    for item in info.metadata:
        if isinstance(item, inclusive):
            return getattr(item, attr + "e"), True
        if isinstance(item, strict):
            return getattr(item, attr + "t"), False
    return None


def _bounds(info: FieldInfo) -> tuple[str, Callable] | None:
    """The entity's numeric bounds as (expected text, mask of values outside)."""
    lo = _limit(info, annotated_types.Ge, annotated_types.Gt, "g")
    hi = _limit(info, annotated_types.Le, annotated_types.Lt, "l")
    if lo is None and hi is None:
        return None

    def bad(values: pa.ChunkedArray) -> pa.ChunkedArray:
        masks = []
        if lo is not None:
            masks.append((pc.less if lo[1] else pc.less_equal)(values, lo[0]))
        if hi is not None:
            masks.append((pc.greater if hi[1] else pc.greater_equal)(values, hi[0]))
        return masks[0] if len(masks) == 1 else pc.or_(*masks)

    if lo is not None and hi is not None and lo[1] and hi[1]:
        return f"from {lo[0]} to {hi[0]}", bad
    parts = []
    if lo is not None:
        parts.append(f"{'>=' if lo[1] else '>'} {lo[0]}")
    if hi is not None:
        parts.append(f"{'<=' if hi[1] else '<'} {hi[0]}")
    return " and ".join(parts), bad


def _lengths(info: FieldInfo) -> list[tuple[str, Callable]]:
    rules = []
    for item in info.metadata:
        if isinstance(item, annotated_types.MaxLen):
            limit = item.max_length
            rules.append((f"at most {limit} characters",
                          lambda v, n=limit: pc.greater(pc.utf8_length(v), n)))
        pattern = getattr(item, "pattern", None)
        if pattern:
            rules.append((f"text matching {pattern}",
                          lambda v, p=pattern: pc.invert(pc.match_substring_regex(v, p))))
    return rules


@functools.cache
def value_rules(name: str) -> tuple[Rule, ...]:
    """Every value rule of table ``name``: bounds and lengths from its entity
    class, finite floats, and no NUL characters in text (PostgreSQL refuses them)."""
    table, fields = tabular.BY_NAME[name], ENTITIES[name].model_fields
    rules = []
    for fld in table.schema:
        kind, info = fld.type, fields.get(fld.name)
        if pa.types.is_floating(kind):
            rules.append(Rule(fld.name, "value is not a finite number", "a finite number",
                              lambda v: pc.invert(pc.is_finite(v))))
        if pa.types.is_string(kind):
            rules.append(Rule(fld.name, "text holds a NUL character", "text without NUL (\\x00)",
                              lambda v: pc.match_substring(v, "\x00")))
        if info is None:
            continue
        number = "an integer" if pa.types.is_integer(kind) else "a number"
        bounds = _bounds(info) if pa.types.is_integer(kind) or pa.types.is_floating(kind) else None
        if bounds:
            rules.append(Rule(fld.name, "value out of range", f"{number} {bounds[0]}", bounds[1]))
        if pa.types.is_string(kind):
            rules += [Rule(fld.name, "value breaks a rule", text, bad)
                      for text, bad in _lengths(info)]
    return tuple(rules)


def validate(snapshot: Snapshot, *, sources: Mapping[str, str] | None = None,
             existing: Mapping[str, pa.Array] | None = None) -> None:
    """Raise :class:`InputError` at the first problem in ``snapshot``.

    ``existing`` maps table names to the keys already stored (for imports
    into a non-empty database): they satisfy references and may not be
    re-used as new keys.
    """
    sources = dict(sources or {})
    existing = dict(existing or {})
    for table in tabular.ALL:
        data = snapshot[table.name]
        where = sources.get(table.name, f"{table.name} table")
        _check_required(data, table, where)
        _check_unique(data, table, where, existing.get(table.name))
        _check_values(data, table.name, where)
        for reference in table.references:
            keys = _keys(snapshot, reference.target, existing)
            _check_reference(data, reference.column, keys, reference.target, where)
    _check_preferences(snapshot, sources.get("preferences", "preferences table"), existing)
    _check_rating_uniqueness(snapshot["ratings"], sources.get("ratings", "ratings table"))


def unencodable(text: str) -> bool:
    """Whether ``text`` holds a lone surrogate (JSON's ``"\\ud800"`` parses to
    one): no database, and no UTF-8 answer, can carry it."""
    if text.isascii():
        return False
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


def first_unencodable(value: object, field: str | None = None) -> str | None:
    """The field (the key it was found under) of the first text in ``value``, a
    parsed JSON document, that :func:`unencodable` refuses; ``field`` for
    one outside any object; None when all of it is text a database can store.
    Walked without recursion: the parser's own depth limit is the only one."""
    stack: list[tuple[object, str | None]] = [(value, field)]
    while stack:
        item, where = stack.pop()
        if isinstance(item, str):
            if unencodable(item):
                return where or "body"
        elif isinstance(item, dict):
            for key, inner in item.items():
                if unencodable(key):
                    return where or "body"
                stack.append((inner, key))
        elif isinstance(item, list):
            stack.extend((inner, where) for inner in item)
    return None


NUL_MESSAGE = "contains a NUL character"
UNENCODABLE_MESSAGE = "holds a character no database can store (a lone surrogate)"
BIDI_CONTROLS = frozenset("\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069")
"""The bidirectional embedding, override and isolate controls: text holding
one can reorder what is displayed around it unless it is isolated."""


def text_refusal(text: str) -> str | None:
    """Why text written on the platform cannot be stored, by the rule the
    importer applies to every table's text (:func:`check_no_nul`): an export
    of what the platform accepted must import again. None when it can."""
    if "\x00" in text:
        return NUL_MESSAGE
    if unencodable(text):
        return UNENCODABLE_MESSAGE
    return None


def check_text(source: str, field: str, text: str) -> None:
    """Raise :class:`InputError` naming ``field`` when :func:`text_refusal` refuses ``text``."""
    if (reason := text_refusal(text)) is not None:
        raise InputError(source, reason, field=field)


def has_bidi(text: str | None) -> bool:
    """Whether ``text`` holds a bidirectional control (:data:`BIDI_CONTROLS`)."""
    return bool(text) and not BIDI_CONTROLS.isdisjoint(text)


FSI, PDI = "\u2068", "\u2069"


def isolated(text: str) -> str:
    """``text`` kept as written but unable to reorder what surrounds it, for
    names written into prose (the report's sentences, headers and tables in
    any format): text holding a bidirectional control is put inside
    first-strong isolates, one more than the isolate closings it holds
    unmatched (each of those closes one), and closed after it; a closing
    isolate ends every embedding and override opened since its initiator
    (Unicode's bidirectional algorithm, UAX #9, BD9), and the surplus
    closings match nothing and do nothing. Text without controls is
    returned unchanged."""
    if not has_bidi(text):
        return text
    depth, unmatched = 0, 0
    for char in text:
        if char in "\u2066\u2067\u2068":
            depth += 1
        elif char == PDI:
            depth, unmatched = (depth - 1, unmatched) if depth else (0, unmatched + 1)
    return FSI * (unmatched + 1) + text + PDI * (unmatched + 1)


def has_nul(value: object) -> bool:
    """Whether a NUL character is anywhere in ``value`` (text, or a structure of
    it): PostgreSQL cannot store one in text, so neither database is given one."""
    if isinstance(value, str):
        return "\x00" in value
    if isinstance(value, dict):
        return any(has_nul(k) or has_nul(v) for k, v in value.items())
    if isinstance(value, list | tuple):
        return any(has_nul(v) for v in value)
    return False


def check_no_nul(snapshot: Snapshot, sources: Mapping[str, str] | None = None) -> None:
    """Raise :class:`InputError` at the first text value holding a NUL
    character: PostgreSQL can store none (nor compare one with what it
    stores), so neither database is given one. Run before any stored row is
    looked up by the snapshot's ids."""
    sources = dict(sources or {})
    for table in tabular.ALL:
        data = snapshot[table.name]
        for field in data.schema:
            if not (pa.types.is_string(field.type) or pa.types.is_large_string(field.type)):
                continue
            index = _first(pc.match_substring(data.column(field.name), "\x00"))
            if index >= 0:
                raise InputError(sources.get(table.name, f"{table.name} table"),
                                 NUL_MESSAGE, row=index + 1, field=field.name)


def _first(mask: pa.ChunkedArray | pa.Array) -> int:
    """Index of the first True in a boolean mask (nulls count as False), or -1."""
    return pc.index(pc.fill_null(mask, False), True).as_py()


def _fail(data: pa.Table, where: str, index: int, column: str, message: str, expected: str):
    raise InputError(where, message, row=index + 1, field=column, expected=expected,
                     got=data.column(column)[index].as_py())


def _check_required(data: pa.Table, table: tabular.Table, where: str) -> None:
    for column in table.required:
        index = _first(pc.is_null(data.column(column)))
        if index >= 0:
            raise InputError(where, "required value is missing", row=index + 1, field=column,
                             expected="a value")
        if pa.types.is_string(data.schema.field(column).type):
            index = _first(pc.equal(pc.utf8_trim_whitespace(data.column(column)), ""))
            if index >= 0:
                _fail(data, where, index, column, "required value is empty", "a non-empty string")


def _check_unique(data: pa.Table, table: tabular.Table, where: str,
                  stored: pa.Array | None) -> None:
    keys = data.column(table.key)
    if stored is not None and len(stored):
        index = _first(pc.is_in(keys, value_set=stored))
        if index >= 0:
            _fail(data, where, index, table.key, "id already exists in the database",
                  "an id not yet stored")
    # A missing generated key is not a duplicate: the database will assign it.
    if _increasing(keys) or pc.count_distinct(keys).as_py() == data.num_rows - keys.null_count:
        return
    import numpy as np

    present = np.flatnonzero(pc.is_valid(keys).to_numpy(zero_copy_only=False))
    values = keys.take(present).to_numpy(zero_copy_only=False)
    _, first_seen, counts = np.unique(values, return_index=True, return_counts=True)
    seen_once = np.zeros(len(values), dtype=bool)
    seen_once[first_seen] = True
    dup = int(present[np.flatnonzero(~seen_once)[0]]) if counts.max() > 1 else -1
    _fail(data, where, dup, table.key, "duplicate id", "each id once")


def _increasing(keys: pa.ChunkedArray) -> bool:
    """Integer keys without nulls in increasing order (how every writer of ours
    orders event ids): unique without hashing them."""
    if not pa.types.is_integer(keys.type) or keys.null_count or len(keys) < 2:
        return False
    import numpy as np

    values = keys.to_numpy()
    return bool(np.all(values[1:] > values[:-1]))


def _check_values(data: pa.Table, name: str, where: str) -> None:
    for (table, column), allowed in ALLOWED.items():
        if table == name:
            bad = pc.invert(pc.is_in(data.column(column), value_set=pa.array(allowed)))
            index = _first(pc.and_(bad, pc.is_valid(data.column(column))))
            if index >= 0:
                _fail(data, where, index, column, "unknown value", " / ".join(allowed))
    for rule in value_rules(name):
        index = _first(rule.bad(data.column(rule.column)))
        if index >= 0:
            _fail(data, where, index, rule.column, rule.message, rule.expected)


def _keys(snapshot: Snapshot, target: str, existing: Mapping[str, pa.Array]) -> pa.Array:
    own = snapshot[target].column(tabular.BY_NAME[target].key).combine_chunks()
    stored = existing.get(target)
    return pa.concat_arrays([own, stored.cast(own.type)]) if stored is not None else own


def _check_reference(data: pa.Table, column: str, keys: pa.Array, target: str, where: str) -> None:
    values = data.column(column)
    missing = pc.and_(pc.is_valid(values), pc.invert(pc.is_in(values, value_set=keys)))
    index = _first(missing)
    if index >= 0:
        _fail(data, where, index, column, f"refers to a {SINGULAR[target]} that does not exist",
              f"an id present in {target}")


def _check_preferences(snapshot: Snapshot, where: str, existing: Mapping[str, pa.Array]) -> None:
    prefs = snapshot["preferences"]
    if prefs.num_rows == 0:
        return
    index = _first(pc.equal(prefs.column("answer_a_id"), prefs.column("answer_b_id")))
    if index >= 0:
        _fail(prefs, where, index, "answer_b_id", "compares an answer with itself",
              "two different answers (A != B)")
    answer_case = _answer_cases(snapshot, existing)
    for column in ("answer_a_id", "answer_b_id"):
        pair = pc.binary_join_element_wise(prefs.column(column), prefs.column("case_id"), "\x1f")
        index = _first(pc.invert(pc.is_in(pair, value_set=answer_case)))
        if index >= 0:
            _fail(prefs, where, index, column, "answer belongs to another case",
                  f"an answer of case {prefs.column('case_id')[index].as_py()!r}")


def _answer_cases(snapshot: Snapshot, existing: Mapping[str, pa.Array]) -> pa.Array:
    answers = snapshot["answers"]
    pairs = pc.binary_join_element_wise(answers.column("answer_id"), answers.column("case_id"),
                                        "\x1f").combine_chunks()
    stored = existing.get("answer_cases")
    return pa.concat_arrays([pairs, stored]) if stored is not None else pairs


def _check_rating_uniqueness(ratings: pa.Table, where: str) -> None:
    if ratings.num_rows == 0:
        return
    import numpy as np

    key = _combined_key(ratings)
    _, first_seen = np.unique(key, return_index=True)
    if len(first_seen) == ratings.num_rows:
        return
    repeat = np.ones(ratings.num_rows, dtype=bool)
    repeat[first_seen] = False
    index = int(np.flatnonzero(repeat)[0])
    raise InputError(where, "the same rater scored this answer on this criterion twice"
                     " in one revision", row=index + 1, field="criterion_id",
                     expected="one score per (answer, rater, criterion, revision);"
                     " record edits as a higher revision",
                     got=ratings.column("criterion_id")[index].as_py())


def _combined_key(ratings: pa.Table):
    """One int64 per rating naming its (answer, rater, criterion, revision):
    each column's dictionary code, combined positionally (required columns
    are checked before, so no code is null)."""
    import numpy as np

    key = np.zeros(ratings.num_rows, dtype=np.int64)
    for name in ("answer_id", "rater_id", "criterion_id", "revision"):
        values = ratings.column(name).combine_chunks()
        coded = pc.dictionary_encode(pc.fill_null(values, 0) if name == "revision" else values)
        size = max(len(coded.dictionary), 1)
        if key.max(initial=0) >= (1 << 62) // size:  # renumber densely before it overflows
            key = np.unique(key, return_inverse=True)[1].astype(np.int64)
        key = key * size + coded.indices.to_numpy(zero_copy_only=False)
    return key


def check_types(data: pa.Table, table: tabular.Table, where: str) -> None:
    """Refuse a column of a typed file (Parquet) whose Arrow type is neither the
    contract's nor one that converts to it without changing what a value
    means: an integer is no timestamp (it would read as 1970), a boolean no
    count (it would read as 1). Text converts to any type, parsed strictly
    later; binary converts to text when it is UTF-8, and the first row that
    is not is named."""
    for name in data.column_names:
        if name not in table.columns:
            continue
        found, target = data.schema.field(name).type, table.schema.field(name).type
        if pa.types.is_dictionary(found):
            found = found.value_type
        if not _converts(found, target):
            raise InputError(where, "column has the wrong type", field=name,
                             expected=f"{target} (or a type that widens to it)", got=str(found))
        if pa.types.is_binary(found) or pa.types.is_large_binary(found):
            _check_utf8(data.column(name), where, name)


_TEXT = (pa.types.is_string, pa.types.is_large_string)


def _converts(found: pa.DataType, target: pa.DataType) -> bool:
    """Whether values of type ``found`` keep their meaning as ``target``."""
    if found == target or pa.types.is_null(found) or any(test(found) for test in _TEXT):
        return True
    kinds = ((pa.types.is_string, (pa.types.is_binary, pa.types.is_large_binary)),
             (pa.types.is_integer, (pa.types.is_integer,)),
             (pa.types.is_floating, (pa.types.is_integer, pa.types.is_floating)),
             (pa.types.is_timestamp, (pa.types.is_timestamp, pa.types.is_date)),
             (pa.types.is_boolean, (pa.types.is_boolean,)))
    return any(is_target(target) and any(test(found) for test in sources)
               for is_target, sources in kinds)


def _check_utf8(column: pa.ChunkedArray, where: str, name: str) -> None:
    """Binary that is not UTF-8 text: the first offending row, found by halving
    (each probe one vectorised cast), named."""
    values = column.combine_chunks()
    if _is_utf8(values):
        return
    lo, hi = 0, len(values)  # the first bad row is in [lo, hi)
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (mid, hi) if _is_utf8(values.slice(lo, mid - lo)) else (lo, mid)
    raise InputError(where, "text is not valid UTF-8", row=lo + 1, field=name,
                     expected="UTF-8 text", got=repr(values[lo].as_py()))


def _is_utf8(values: pa.Array) -> bool:
    try:
        values.cast(pa.string()).validate(full=True)
    except pa.ArrowInvalid:
        return False
    return True
