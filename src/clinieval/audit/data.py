"""The audit's view of a snapshot: integer-coded numpy arrays.

Strings are mapped to dense codes once (through Arrow dictionaries, so 37.5M
ratings never become Python strings); every analysis then works on counts
built with ``np.bincount``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from clinieval import tables as T
from clinieval.audit import judged
from clinieval.errors import InputError
from clinieval.io import bundle
from clinieval.snapshot import Snapshot

N_SCORES = len(T.SCORES)
SEVERE = T.SCORES.index(T.SCORE_MIN)
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
    rating_score: np.ndarray  # int8, a value of tables.SCORES
    n_raters: int
    # preferences
    pref_a: np.ndarray  # answer codes
    pref_b: np.ndarray
    pref_outcome: np.ndarray  # choice code: index in tables.CHOICES
    pref_left_is_a: np.ndarray  # 1, 0, or -1 when unknown
    pref_rater: np.ndarray
    checksum: str
    counts: dict[str, int]
    judge_tables: dict[str, pa.Table] = field(default_factory=dict)
    """Judgments and what they need (:mod:`clinieval.audit.judged`); empty without any."""

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


def from_bundle(folder: Path) -> AuditData:
    """Read only the columns the audit needs, string keys as dictionaries, from
    files confined to the bundle and matching the manifest's checksums."""
    manifest = bundle.read_manifest(folder)
    bundle.verify_snapshot(Path(folder), manifest)
    needed = {
        "models": ["model_id", "display_name"],
        "criteria": ["criterion_id", "position", "name", "safety_critical"],
        "cases": ["case_id", "specialty", "prompt_words", "prompt"],
        "answers": ["answer_id", "case_id", "model_id", "length_chars", "text"],
        "ratings": ["answer_id", "rater_id", "criterion_id", "score", "revision"],
        "preferences": ["answer_a_id", "answer_b_id", "choice", "shown_left", "rater_id",
                        "case_id", "revision"],
        "raters": ["rater_id"],
    }
    dictionary = {"ratings": ["answer_id", "rater_id", "criterion_id"],
                  "preferences": ["answer_a_id", "answer_b_id", "choice", "shown_left", "rater_id"]}
    raw = {}
    for name, columns in needed.items():
        entry = manifest["tables"][name]
        data = bundle.verified_bytes(bundle.table_path(Path(folder), entry), entry)
        # Bundles written before votes had revisions lack that column.
        present = pq.read_schema(pa.BufferReader(data)).names
        raw[name] = pq.read_table(pa.BufferReader(data),
                                  columns=[c for c in columns if c in present],
                                  read_dictionary=dictionary.get(name))
    counts = {k: v["rows"] for k, v in manifest["tables"].items()}
    data = _build(raw, manifest["snapshot_sha256"], counts, str(folder))
    data.judge_tables = judged.from_bundle(Path(folder), manifest)
    return data


def from_snapshot(snap: Snapshot) -> AuditData:
    from clinieval.io.bundle import content_sha256, snapshot_checksum

    checksum = snapshot_checksum({t.name: content_sha256(snap[t.name], t.key) for t in T.ALL})
    data = _build(dict(snap.tables), checksum, snap.counts(), "snapshot")
    data.judge_tables = judged.from_snapshot(snap)
    return data


def _build(raw: dict[str, pa.Table], checksum: str, counts: dict[str, int], where: str
           ) -> AuditData:
    models = raw["models"]
    criteria = _ordered_criteria(raw["criteria"])
    cases, answers = raw["cases"], raw["answers"]
    model_ids = models.column("model_id").combine_chunks()
    case_ids = cases.column("case_id").combine_chunks()
    answer_ids = answers.column("answer_id").combine_chunks()
    specialty = cases.column("specialty").combine_chunks().dictionary_encode()
    case_code = codes(answers.column("case_id"), case_ids, f"{where}:answers", "case_id")
    ratings = _current(raw["ratings"])
    # Sorted, so rater numbers in the report do not depend on storage order.
    rater_ids = raw["raters"].column("rater_id").combine_chunks()
    rater_ids = rater_ids.take(pc.array_sort_indices(rater_ids))
    prefs = _current_votes(raw["preferences"])
    return AuditData(
        models=model_ids.to_pylist(),
        model_names=[n or m for n, m in zip(models.column("display_name").to_pylist(),
                                            model_ids.to_pylist(), strict=True)],
        criteria=criteria.column("criterion_id").to_pylist(),
        criterion_names=criteria.column("name").to_pylist(),
        safety_critical=[bool(x) for x in criteria.column("safety_critical").to_pylist()],
        specialties=specialty.dictionary.to_pylist(),
        answer_model=codes(answers.column("model_id"), model_ids, f"{where}:answers", "model_id"),
        answer_case=case_code,
        answer_specialty=specialty.indices.to_numpy(zero_copy_only=False)[case_code],
        answer_length=_answer_lengths(answers),
        answer_prompt_words=_prompt_words(cases)[case_code],
        rating_answer=codes(ratings.column("answer_id"), answer_ids, f"{where}:ratings",
                            "answer_id"),
        rating_rater=codes(ratings.column("rater_id"), rater_ids, f"{where}:ratings", "rater_id"),
        rating_criterion=codes(ratings.column("criterion_id"),
                               criteria.column("criterion_id").combine_chunks(),
                               f"{where}:ratings", "criterion_id").astype(np.int16),
        rating_score=ratings.column("score").to_numpy().astype(np.int8),
        n_raters=len(rater_ids),
        pref_a=codes(prefs.column("answer_a_id"), answer_ids, f"{where}:preferences",
                     "answer_a_id"),
        pref_b=codes(prefs.column("answer_b_id"), answer_ids, f"{where}:preferences",
                     "answer_b_id"),
        pref_outcome=codes(prefs.column("choice"), pa.array(T.CHOICES),
                           f"{where}:preferences", "choice").astype(np.int8),
        pref_left_is_a=_left_is_a(prefs.column("shown_left")),
        pref_rater=_optional_codes(prefs.column("rater_id"), rater_ids),
        checksum=checksum,
        counts=counts,
    )


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
    return current_ratings(plain.append_column("rating_id", pa.array(
        np.arange(plain.num_rows, dtype=np.int64))))


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
    length = pc.cast(answers.column("length_chars"), pa.float64())
    text_length = pc.cast(pc.utf8_length(answers.column("text")), pa.float64())
    return pc.coalesce(length, text_length).to_numpy(zero_copy_only=False).astype(float)


def _prompt_words(cases: pa.Table) -> np.ndarray:
    words = pc.cast(cases.column("prompt_words"), pa.float64())
    return pc.coalesce(words, word_count(cases.column("prompt"))).to_numpy(
        zero_copy_only=False).astype(float)


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
