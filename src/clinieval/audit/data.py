"""The audit's view of a snapshot: integer-coded numpy arrays.

Strings are mapped to dense codes once (through Arrow's hash lookups, so no
rating's ids ever become Python strings); every analysis then works on
counts built with ``np.bincount``. The snapshot reaching here has been held
to the import's contract (:func:`clinieval.sources.read_for_audit`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from clinieval.audit import judged
from clinieval.contract import vocabulary
from clinieval.contract.validate import isolated
from clinieval.errors import InputError
from clinieval.io import bundle
from clinieval.snapshot import Snapshot

N_SCORES = len(vocabulary.SCORES)
SEVERE = vocabulary.SCORES.index(vocabulary.SCORE_MIN)
"""Score code of the lowest score (-2): a severe failure."""


@dataclass
class AuditData:
    models: list[str]
    model_names: list[str]
    criteria: list[str]
    criterion_names: list[str]
    safety_critical: list[bool]
    specialties: list[str]
    # answers (index = answer code)
    answer_model: np.ndarray
    answer_case: np.ndarray
    answer_specialty: np.ndarray
    answer_length: np.ndarray  # float, NaN when unknown
    answer_prompt_words: np.ndarray  # float, NaN when unknown
    # ratings (current revision only)
    rating_answer: np.ndarray
    rating_rater: np.ndarray
    rating_criterion: np.ndarray
    rating_score: np.ndarray  # int8, a value of vocabulary.SCORES
    n_raters: int
    # preferences
    pref_a: np.ndarray  # answer codes
    pref_b: np.ndarray
    pref_outcome: np.ndarray  # choice code: index in vocabulary.CHOICES
    pref_left_is_a: np.ndarray  # 1, 0, or -1 when unknown
    pref_rater: np.ndarray
    checksum: str
    counts: dict[str, int]
    judge_tables: dict[str, pa.Table] = field(default_factory=dict)
    """Judgments and what they need (:mod:`clinieval.audit.judged`); empty without any."""
    benchmark_results: tuple | None = None
    """``clinieval run``'s stored benchmark results (sample rows, registry
    entries: :func:`clinieval.tasks.results.sample_results`) when the source
    is a database holding them."""
    assignment: str | None = None
    """``targeted`` when the study chose answers with recorded probabilities
    (the snapshot's ``assignment`` metadata), else None."""
    answer_probability: np.ndarray | None = None
    """Per answer the probability recorded on the lease that first brought it
    to a clinician (NaN where none was recorded); with ``assignment``."""
    adjudications: pa.Table | None = None
    """Adjudicators' verdicts, every row (:mod:`clinieval.audit.adjudicated`); None without any."""
    answer_ids: list[str] = field(default_factory=list)
    """Answer id per answer code (for coding the adjudications)."""

    @property
    def n_models(self) -> int:
        return len(self.models)

    @property
    def n_criteria(self) -> int:
        return len(self.criteria)

    @property
    def n_answers(self) -> int:
        return len(self.answer_model)

    def rating_model(self) -> np.ndarray:
        return self.answer_model[self.rating_answer]

    def criterion_index(self, criterion_id: str) -> int | None:
        return self.criteria.index(criterion_id) if criterion_id in self.criteria else None


def codes(values: pa.ChunkedArray | pa.Array, vocabulary: pa.Array, where: str,
          field: str) -> np.ndarray:
    """Positions of ``values`` in ``vocabulary`` (int32); unknown values are an input error."""
    if isinstance(values, pa.ChunkedArray) and pa.types.is_dictionary(values.type):
        coder = Coder(len(values))
        for chunk in values.chunks:
            coder.add(chunk)
        return coder.codes(vocabulary, where, field)
    if isinstance(values, pa.ChunkedArray):
        values = values.combine_chunks()
    if pa.types.is_dictionary(values.type):
        lookup = codes(values.dictionary, vocabulary, where, field)
        return lookup[values.indices.to_numpy(zero_copy_only=False)]
    index = pc.index_in(values, value_set=vocabulary)
    if index.null_count:
        bad = pc.index(pc.is_null(index), True).as_py()
        raise InputError(where, "refers to an unknown id", row=bad + 1, field=field,
                         got=values[bad].as_py())
    return index.to_numpy(zero_copy_only=False).astype(np.int32)


class Coder:
    """Codes of a dictionary-encoded string column gathered chunk by chunk.

    Each chunk keeps its indices, shifted to positions in the chunks'
    dictionaries laid end to end; :meth:`codes` then looks all dictionaries up
    in the vocabulary at once (one hash table of it) and rewrites the
    positions in place. Concatenating dictionary chunks instead (unifying
    their dictionaries) costs seconds at 37.5M ratings, and looking each
    chunk's dictionary up alone rebuilds the vocabulary's hash table per chunk.
    """

    def __init__(self, n_rows: int) -> None:
        self.raw = np.empty(n_rows, dtype=np.int32)  # -1: null
        self.dictionaries: list[pa.Array] = []
        self.size = 0  # entries of the dictionaries so far
        self.filled = 0  # rows so far
        self.last: tuple[pa.Array, int] | None = None  # the last dictionary and its position

    def add(self, chunk: pa.Array) -> None:
        if not pa.types.is_dictionary(chunk.type):
            chunk = chunk.dictionary_encode()
        rows = slice(self.filled, self.filled + len(chunk))
        base = self._place(chunk.dictionary)
        indices = chunk.indices
        if indices.null_count:  # nulls end as -1 after the shift
            indices = pc.fill_null(indices, pa.scalar(-1 - base, indices.type))
        np.add(indices.to_numpy(zero_copy_only=False), base, out=self.raw[rows],
               casting="unsafe")
        self.filled = rows.stop

    def _place(self, dictionary: pa.Array) -> int:
        """Where ``dictionary`` starts among the entries. The chunks of one
        column chunk of a Parquet file share one growing dictionary, so a
        dictionary that extends the previous one only adds its new tail
        (otherwise a 1.9M-vote table would look up ten million entries)."""
        if self.last is not None:
            previous, base = self.last
            if len(dictionary) >= len(previous) and dictionary.slice(0, len(previous)).equals(
                    previous):
                tail = dictionary.slice(len(previous))
                if len(tail):
                    self.dictionaries.append(tail)
                    self.size += len(tail)
                self.last = dictionary, base
                return base
        base = self.size
        self.dictionaries.append(dictionary)
        self.size += len(dictionary)
        self.last = dictionary, base
        return base

    def codes(self, vocabulary: pa.Array, where: str, field: str, required: bool = True
              ) -> np.ndarray:
        """Positions in ``vocabulary`` (int32), -1 for null when not ``required``;
        a value not in it (or a null when ``required``) is an input error."""
        raw = self.raw[: self.filled]
        entries = (pa.concat_arrays([d.cast(pa.string()) for d in self.dictionaries])
                   if self.dictionaries else pa.array([], pa.string()))
        found = pc.fill_null(pc.index_in(entries, value_set=vocabulary), -1)
        # The extra last entry is what a null (-1) reads.
        lookup = np.append(found.to_numpy(zero_copy_only=False).astype(np.int32), -1)
        unknown = lookup[:-1] < 0
        nulls = required and bool((raw < 0).any())
        if unknown.any() or nulls:
            bad = np.flatnonzero(np.isin(raw, np.flatnonzero(unknown)) | (required & (raw < 0)))
            if bad.size:
                row = int(bad[0])
                got = entries[int(raw[row])].as_py() if raw[row] >= 0 else None
                raise InputError(where, "refers to an unknown id", row=row + 1, field=field,
                                 got=got)
        step = 1 << 22  # in place, a slice at a time: no second array of the full length
        for start in range(0, raw.size, step):
            part = raw[start : start + step]
            part[:] = lookup[part]
        self.dictionaries, self.last = [], None
        return raw


def audit_data(source: str | Path | Snapshot | AuditData) -> AuditData:
    """Audit data from a bundle folder, a database URL or SQLite file, any
    other source ``clinieval import`` reads, ``"demo"`` or a snapshot. What a
    source string means, and the contract it is held to first, is
    :func:`clinieval.sources.read_for_audit`'s to say."""
    if isinstance(source, AuditData):
        return source
    if isinstance(source, Snapshot):
        return from_snapshot(source)
    from clinieval.sources import read_for_audit

    data = from_snapshot(*read_for_audit(source))
    if data.judge_tables:  # what the runs spent is in the database, not the snapshot
        data.judge_tables |= judged.run_tables_at(str(source))
    from clinieval.tasks.results import results_at

    data.benchmark_results = results_at(str(source))
    return data


def from_bundle(folder: Path) -> AuditData:
    """Audit data from the bundle at ``folder``, verified and validated as an
    import would (see :func:`audit_data`)."""
    if not bundle.is_bundle(Path(folder)):
        raise InputError(str(folder), "not a bundle folder",
                         expected="a folder with a manifest.json")
    return audit_data(Path(folder))


def from_snapshot(snap: Snapshot, checksum: str | None = None) -> AuditData:
    """``checksum``: the snapshot's, already verified against its content
    (a bundle's); without it the content is hashed here."""
    if checksum is None:
        from clinieval.io.bundle import snapshot_content_checksum

        checksum = snapshot_content_checksum(snap)
    data = _build(dict(snap.tables), checksum, snap.counts(), "snapshot")
    data.judge_tables = judged.from_snapshot(snap)
    _assignment(data, snap)
    if snap["adjudications"].num_rows:
        data.adjudications = snap["adjudications"]
        data.answer_ids = snap["answers"].column("answer_id").to_pylist()
    # Arrow's allocator keeps freed pages for reuse; the audit allocates with
    # numpy from here on.
    pa.default_memory_pool().release_unused()
    return data


def _assignment(data: AuditData, snap: Snapshot) -> None:
    """A targeted study's recorded probabilities, per answer code."""
    meta = snap.meta.get("assignment")
    if not isinstance(meta, dict) or meta.get("mode") != "targeted":
        return
    ids = snap["answers"].column("answer_id").to_pylist()
    given = meta.get("probability") or {}
    data.assignment = "targeted"
    data.answer_probability = np.array([float(given.get(a, np.nan)) for a in ids])


def _build(raw: dict[str, pa.Table], checksum: str, counts: dict[str, int],
           where: str) -> AuditData:
    models = raw["models"]
    criteria = _ordered_criteria(raw["criteria"])
    cases, answers = raw["cases"], raw["answers"]
    model_ids = models.column("model_id").combine_chunks()
    case_ids = cases.column("case_id").combine_chunks()
    answer_ids = answers.column("answer_id").combine_chunks()
    specialty = cases.column("specialty").combine_chunks().dictionary_encode()
    case_code = codes(answers.column("case_id"), case_ids, f"{where}:answers", "case_id")
    # Sorted, so rater numbers in the report do not depend on storage order.
    rater_ids = raw["raters"].column("rater_id").combine_chunks()
    rater_ids = rater_ids.take(pc.array_sort_indices(rater_ids))
    criterion_ids = criteria.column("criterion_id").combine_chunks()
    rated = _rating_arrays(_current(raw["ratings"]), answer_ids, rater_ids, criterion_ids,
                           f"{where}:ratings")
    prefs = _current_votes(raw["preferences"])
    return AuditData(
        models=model_ids.to_pylist(),
        # Names go into the report's sentences: isolated, a bidi control in one
        # cannot reorder the text around it (names without one are unchanged).
        model_names=[isolated(n or m) for n, m in zip(models.column("display_name").to_pylist(),
                                                      model_ids.to_pylist(), strict=True)],
        criteria=criterion_ids.to_pylist(),
        criterion_names=[isolated(n) for n in criteria.column("name").to_pylist()],
        safety_critical=[bool(x) for x in criteria.column("safety_critical").to_pylist()],
        specialties=[isolated(n) for n in specialty.dictionary.to_pylist()],
        answer_model=codes(answers.column("model_id"), model_ids, f"{where}:answers", "model_id"),
        answer_case=case_code,
        answer_specialty=specialty.indices.to_numpy(zero_copy_only=False)[case_code],
        answer_length=_answer_lengths(answers),
        answer_prompt_words=_prompt_words(cases)[case_code],
        rating_answer=rated["answer"],
        rating_rater=rated["rater"],
        rating_criterion=rated["criterion"],
        rating_score=rated["score"],
        n_raters=len(rater_ids),
        pref_a=codes(prefs.column("answer_a_id"), answer_ids, f"{where}:preferences",
                     "answer_a_id"),
        pref_b=codes(prefs.column("answer_b_id"), answer_ids, f"{where}:preferences",
                     "answer_b_id"),
        pref_outcome=codes(prefs.column("choice"), pa.array(vocabulary.CHOICES),
                           f"{where}:preferences", "choice").astype(np.int8),
        pref_left_is_a=_left_is_a(prefs.column("shown_left")),
        pref_rater=_optional_codes(prefs.column("rater_id"), rater_ids),
        checksum=checksum,
        counts=counts,
    )


def _rating_arrays(ratings: pa.Table, answer_ids: pa.Array, rater_ids: pa.Array,
                   criterion_ids: pa.Array, where: str) -> dict[str, np.ndarray]:
    return {"answer": codes(ratings.column("answer_id"), answer_ids, where, "answer_id"),
            "rater": codes(ratings.column("rater_id"), rater_ids, where, "rater_id"),
            "criterion": codes(ratings.column("criterion_id"), criterion_ids, where,
                               "criterion_id").astype(np.int16),
            "score": ratings.column("score").to_numpy().astype(np.int8)}


def _ordered_criteria(criteria: pa.Table) -> pa.Table:
    position = criteria.column("position")
    if position.null_count == len(position):
        return criteria
    return criteria.take(pc.sort_indices(criteria, [("position", "ascending")]))


def _current(ratings: pa.Table) -> pa.Table:
    """Latest revision per (answer, rater, criterion); a no-op without edits."""
    revision = ratings.column("revision")
    if ratings.num_rows == 0 or (pc.max(pc.fill_null(revision, 0)).as_py() or 0) == 0:
        return ratings
    from clinieval.snapshot import current_ratings

    plain = ratings.cast(pa.schema([pa.field(f.name, f.type.value_type)
                                    if pa.types.is_dictionary(f.type) else f
                                    for f in ratings.schema]))
    if "rating_id" not in plain.column_names:  # the bundle's row order is the id order
        plain = plain.append_column("rating_id", pa.array(
            np.arange(plain.num_rows, dtype=np.int64)))
    return current_ratings(plain)


def _current_votes(prefs: pa.Table) -> pa.Table:
    """Latest revision of each vote; a no-op without edits."""
    if "revision" not in prefs.column_names or prefs.num_rows == 0:
        return prefs
    if (pc.max(pc.fill_null(prefs.column("revision"), 0)).as_py() or 0) == 0:
        return prefs
    from clinieval.snapshot import current_preferences

    plain = prefs.cast(pa.schema([pa.field(f.name, f.type.value_type)
                                  if pa.types.is_dictionary(f.type) else f
                                  for f in prefs.schema]))
    if "preference_id" not in plain.column_names:  # the bundle's row order is the id order
        plain = plain.append_column("preference_id", pa.array(
            np.arange(plain.num_rows, dtype=np.int64)))
    return current_preferences(plain)


def _answer_lengths(answers: pa.Table) -> np.ndarray:
    length = _numbers(answers, "length_chars")
    if length.null_count and "text" in answers.column_names:
        length = pc.coalesce(length, pc.cast(pc.utf8_length(answers.column("text")),
                                             pa.float64()))
    return length.to_numpy(zero_copy_only=False).astype(float)


def _prompt_words(cases: pa.Table) -> np.ndarray:
    words = _numbers(cases, "prompt_words")
    if words.null_count and "prompt" in cases.column_names:
        words = pc.coalesce(words, word_count(cases.column("prompt")))
    return words.to_numpy(zero_copy_only=False).astype(float)


def _numbers(table: pa.Table, name: str) -> pa.ChunkedArray:
    """A numeric column as float64 (all null when the table lacks it)."""
    if name not in table.column_names:
        return pa.chunked_array([pa.nulls(table.num_rows, pa.float64())])
    return pc.cast(table.column(name), pa.float64())


def word_count(text: pa.ChunkedArray | pa.Array) -> pa.ChunkedArray | pa.Array:
    """Words per text (runs of characters that are not whitespace or Unicode
    separators) as float64: empty text has zero words, missing text is null."""
    return pc.cast(pc.count_substring_regex(text, r"[^\s\p{Z}]+"), pa.float64())


def _left_is_a(shown_left: pa.ChunkedArray) -> np.ndarray:
    plain = shown_left.combine_chunks()
    if pa.types.is_dictionary(plain.type):
        plain = plain.cast(plain.type.value_type)
    left = pc.fill_null(pc.cast(pc.equal(plain, "A"), pa.int8()), -1)
    return left.to_numpy(zero_copy_only=False).astype(np.int8)


def _optional_codes(values: pa.ChunkedArray, vocabulary: pa.Array) -> np.ndarray:
    plain = values.combine_chunks()
    if pa.types.is_dictionary(plain.type):
        plain = plain.cast(plain.type.value_type)
    index = pc.fill_null(pc.index_in(plain, value_set=vocabulary), -1)
    return index.to_numpy(zero_copy_only=False).astype(np.int32)
