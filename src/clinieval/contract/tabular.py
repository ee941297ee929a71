"""The tabular contract of a snapshot: one Arrow schema per table.

Every layer that moves rows in bulk (bundle files, CSV/JSONL/Parquet import,
database loading, the synthetic generator, the audit) speaks these schemas.
The pydantic classes in :mod:`clinieval.schema` describe the same entities one
object at a time, for the web platform and the API.

Entity ids (cases, models, answers, raters, criteria) are strings; the
high-volume event tables (ratings, preferences, judgments) use int64 ids that
the database assigns when a row arrives without one.

References between the tables are declared here, once, as data on each
table (:attr:`Table.references`): the bulk validator checks them and the
database's foreign keys are built from them, so the two cannot drift.
The vocabulary the columns take lives in :mod:`clinieval.contract.vocabulary`.
"""

from __future__ import annotations

from dataclasses import dataclass

import pyarrow as pa

SCHEMA_VERSION = 1

_TS = pa.timestamp("us", tz="UTC")


@dataclass(frozen=True)
class Reference:
    """A column holding the key of a row of table ``target`` (null: no reference).

    ``same``: columns whose values the referred row must share with this one
    (a preference's answers belong to its case); the database enforces them
    together with the reference as one composite foreign key."""

    column: str
    target: str
    same: tuple[str, ...] = ()


@dataclass(frozen=True)
class Table:
    """A snapshot table: its Arrow schema, primary key, required columns and
    references to other tables.

    ``generated_key``: the database assigns the key of a row that has none
    (so the key is not in ``required``). ``references`` are in the order the
    validator checks them (it reports the first broken one). ``optional``: a
    table added after bundles existed; a bundle holds it only when it has
    rows, so the bundles written before it (and their checksums) are
    unchanged."""

    name: str
    schema: pa.Schema
    key: str
    required: tuple[str, ...]
    generated_key: bool = False
    references: tuple[Reference, ...] = ()
    optional: bool = False

    @property
    def columns(self) -> list[str]:
        return self.schema.names


def _table(name: str, key: str, required: tuple[str, ...], *fields: pa.Field,
           references: tuple[Reference, ...] = ()) -> Table:
    return Table(name, pa.schema(list(fields)), key, required, references=references)


def _event_table(name: str, key: str, required: tuple[str, ...], *fields: pa.Field,
                 references: tuple[Reference, ...] = (), optional: bool = False) -> Table:
    return Table(name, pa.schema(list(fields)), key, required, generated_key=True,
                 references=references, optional=optional)


STUDIES = _table(
    "studies",
    "study_id",
    ("study_id", "name"),
    pa.field("study_id", pa.string()),
    pa.field("name", pa.string()),
    pa.field("description", pa.string()),
    pa.field("blinded", pa.bool_()),
    pa.field("created_at", _TS),
)

CASES = _table(
    "cases",
    "case_id",
    ("case_id", "specialty"),
    pa.field("case_id", pa.string()),
    pa.field("study_id", pa.string()),
    pa.field("prompt", pa.string()),
    pa.field("prompt_words", pa.int32()),
    pa.field("specialty", pa.string()),
    pa.field("category", pa.string()),
    pa.field("subcategory", pa.string()),
    pa.field("department", pa.string()),
    pa.field("population", pa.string()),
    pa.field("risk_level", pa.int8()),
    pa.field("language", pa.string()),
    pa.field("care_setting", pa.string()),
    pa.field("country", pa.string()),
    pa.field("reference_answer", pa.string()),
    pa.field("weight", pa.float64()),
    references=(Reference("study_id", "studies"),),
)

MODELS = _table(
    "models",
    "model_id",
    ("model_id",),
    pa.field("model_id", pa.string()),
    pa.field("display_name", pa.string()),
    pa.field("version", pa.string()),
    pa.field("provider", pa.string()),
    pa.field("price_input_per_m", pa.float64()),
    pa.field("price_output_per_m", pa.float64()),
)

ANSWERS = _table(
    "answers",
    "answer_id",
    ("answer_id", "case_id", "model_id"),
    pa.field("answer_id", pa.string()),
    pa.field("case_id", pa.string()),
    pa.field("model_id", pa.string()),
    pa.field("text", pa.string()),
    pa.field("length_chars", pa.int32()),
    pa.field("tokens", pa.int32()),
    pa.field("latency_s", pa.float64()),
    pa.field("cost_usd", pa.float64()),
    pa.field("sample_index", pa.int16()),
    pa.field("temperature", pa.float64()),
    pa.field("system_prompt_variant", pa.string()),
    references=(Reference("case_id", "cases"), Reference("model_id", "models")),
)

RATERS = _table(
    "raters",
    "rater_id",
    ("rater_id",),
    pa.field("rater_id", pa.string()),
    pa.field("specialty", pa.string()),
    pa.field("country", pa.string()),
    pa.field("organisation", pa.string()),
    pa.field("experience_years", pa.int16()),
    pa.field("role", pa.string()),
)

CRITERIA = _table(
    "criteria",
    "criterion_id",
    ("criterion_id", "name"),
    pa.field("criterion_id", pa.string()),
    pa.field("position", pa.int16()),
    pa.field("name", pa.string()),
    pa.field("definition", pa.string()),
    pa.field("safety_critical", pa.bool_()),
    pa.field("group", pa.string()),
    pa.field("weight", pa.float64()),
    pa.field("anchor_m2", pa.string()),
    pa.field("anchor_m1", pa.string()),
    pa.field("anchor_0", pa.string()),
    pa.field("anchor_p1", pa.string()),
    pa.field("anchor_p2", pa.string()),
)

RATINGS = _event_table(
    "ratings",
    "rating_id",
    ("answer_id", "rater_id", "criterion_id", "score"),
    pa.field("rating_id", pa.int64()),
    pa.field("answer_id", pa.string()),
    pa.field("rater_id", pa.string()),
    pa.field("criterion_id", pa.string()),
    pa.field("score", pa.int8()),
    pa.field("revision", pa.int16()),
    pa.field("review_id", pa.int64()),
    pa.field("comment", pa.string()),
    pa.field("time_spent_s", pa.float64()),
    pa.field("created_at", _TS),
    pa.field("rubric_version", pa.string()),
    references=(Reference("answer_id", "answers"), Reference("rater_id", "raters"),
                Reference("criterion_id", "criteria")),
)
"""Rubric ratings. ``revision`` 0 is the first score; an edit is a new row with
the next revision, so history is never overwritten. The audit uses the latest
revision of each (answer, rater, criterion). ``review_id`` links ratings given
in the same pairwise review to its preference. ``rubric_version`` is the
version of the rubric the score was given under (null when not recorded)."""

PREFERENCES = _event_table(
    "preferences",
    "preference_id",
    ("case_id", "answer_a_id", "answer_b_id", "choice"),
    pa.field("preference_id", pa.int64()),
    pa.field("case_id", pa.string()),
    pa.field("answer_a_id", pa.string()),
    pa.field("answer_b_id", pa.string()),
    pa.field("shown_left", pa.string()),
    pa.field("choice", pa.string()),
    pa.field("rater_id", pa.string()),
    pa.field("created_at", _TS),
    pa.field("revision", pa.int16()),
    references=(Reference("case_id", "cases"),
                Reference("answer_a_id", "answers", same=("case_id",)),
                Reference("answer_b_id", "answers", same=("case_id",)),
                Reference("rater_id", "raters")),
)
"""Blinded pairwise preferences. ``shown_left`` is "A" or "B" (null when
unknown); ``choice`` is one of :data:`~clinieval.contract.vocabulary.CHOICES`.
``revision`` works as for ratings: 0 is the first vote, a changed vote is a
new row with the next revision, and the audit uses the latest revision of
each (rater, case, answer A, answer B)."""

JUDGMENTS = _event_table(
    "judgments",
    "judgment_id",
    ("answer_id", "judge_model", "criterion_id", "parse_status"),
    pa.field("judgment_id", pa.int64()),
    pa.field("answer_id", pa.string()),
    pa.field("judge_model", pa.string()),
    pa.field("criterion_id", pa.string()),
    pa.field("score", pa.float64()),
    pa.field("raw_output", pa.string()),
    pa.field("parse_status", pa.string()),
    pa.field("input_tokens", pa.int32()),
    pa.field("output_tokens", pa.int32()),
    pa.field("cost_usd", pa.float64()),
    pa.field("created_at", _TS),
    pa.field("run_id", pa.string()),
    pa.field("judge_kind", pa.string()),
    pa.field("call_key", pa.string()),
    pa.field("juror", pa.int16()),
    pa.field("repeat", pa.int16()),
    pa.field("answer_b_id", pa.string()),
    pa.field("shown_first", pa.string()),
    pa.field("choice", pa.string()),
    pa.field("agreement", pa.bool_()),
    pa.field("points", pa.float64()),
    pa.field("reason", pa.string()),
    references=(Reference("answer_id", "answers"), Reference("answer_b_id", "answers")),
)
"""Automated judgments, one row per answer and criterion (rubric criterion,
jury axis, rule id, or ``preference`` for pairwise). ``judge_kind`` is one of
:data:`~clinieval.contract.vocabulary.JUDGE_KINDS`; ``run_id`` and ``call_key``
lead to the run record and the cached call. ``juror`` numbers the judges of a
jury and ``repeat`` the repeats of one judge. Pairwise rows compare ``answer_id`` (A) with
``answer_b_id`` (B): ``shown_first`` says which was shown first, ``choice``
is the verdict in A/B terms, ``score`` A's share of the win (1, 0.5, 0) and
``agreement`` whether the two orders agreed. Rule rows carry the rule's
signed ``points``, ``score`` 1 when met and 0 when not, and the ``reason``.
An output that did not parse has no score and keeps ``raw_output``."""

ADJUDICATIONS = _event_table(
    "adjudications",
    "adjudication_id",
    ("answer_id", "criterion_id", "rater_id", "verdict", "reason"),
    pa.field("adjudication_id", pa.int64()),
    pa.field("answer_id", pa.string()),
    pa.field("criterion_id", pa.string()),
    pa.field("rater_id", pa.string()),
    pa.field("verdict", pa.string()),
    pa.field("reason", pa.string()),
    pa.field("supersedes", pa.int64()),
    pa.field("created_at", _TS),
    references=(Reference("answer_id", "answers"), Reference("criterion_id", "criteria"),
                Reference("rater_id", "raters")),
    optional=True,
)
"""An adjudicator's verdict on one criterion of an answer whose clinicians
disagreed across the fail line (some scored it <= -1, some >= +1).
``verdict`` is one of :data:`~clinieval.contract.vocabulary.ADJUDICATION_VERDICTS`;
``rater_id`` is the adjudicator's (pseudonymous in an export). A new verdict
on the same answer and criterion is a new row naming the one it
``supersedes``: history is never overwritten, and ratings are never touched.
Bundles written before this table existed have none, and a bundle holds it
only when it has rows (:attr:`Table.optional`)."""

ALL: tuple[Table, ...] = (
    STUDIES,
    CASES,
    MODELS,
    ANSWERS,
    RATERS,
    CRITERIA,
    RATINGS,
    PREFERENCES,
    JUDGMENTS,
    ADJUDICATIONS,
)
"""Tables in dependency order: a table only refers to tables before it."""

BY_NAME: dict[str, Table] = {t.name: t for t in ALL}
