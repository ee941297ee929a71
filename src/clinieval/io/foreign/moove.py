"""MOOVE-style contribution exports: one pairwise review per record, with
per-answer criterion scores.

Each reader in :mod:`clinieval.io.foreign` parses the whole file and checks
everything specific to its format before it builds anything; checks across
tables (foreign keys, duplicate ids, score ranges) are the validator's.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from clinieval.io.foreign.builder import UNSPECIFIED, Builder, case_id_for, source_meta
from clinieval.io.foreign.records import MISSING, Record, lookup, parse, split_records, where
from clinieval.rubric import MOOVE_MAP, CriterionMap, load_rubric
from clinieval.schema.domain import Rubric
from clinieval.snapshot import Snapshot

MOOVE_VOTES = {"1": "A", "2": "B", "12": "tie"}
"""MOOVE vote -> preference choice (the first answer is answer A)."""

PLACEHOLDER_MODELS = ("unknown-first", "unknown-second")
"""Models that MOOVE answers are attributed to when the export does not say."""


def looks_like(record: dict) -> bool:
    """A MOOVE contribution has a question and answers or a vote."""
    return "question" in record and bool({"firstAnswer", "secondAnswer", "vote"} & record.keys())


class _CriterionScorer:
    """Maps source criterion names and scores onto the rubric via a criterion map."""

    def __init__(self, rubric: Rubric, cmap: CriterionMap) -> None:
        self.rubric, self.cmap = rubric, cmap
        lo, hi = cmap.source_scale
        levels = np.arange(lo, hi + 1)
        self._fast = {int(v): int(m) for v, m in zip(levels, cmap.rescale(levels), strict=True)
                      if not np.isnan(m)}
        self._ids: dict[str, str | None] = {}

    def criterion(self, rec: Record, name: str, key: str) -> str | None:
        if name not in self._ids:
            self._ids[name] = self._resolve(rec, name, key)
        return self._ids[name]

    def _resolve(self, rec: Record, name: str, key: str) -> str | None:
        try:
            criterion_id = self.cmap.resolve(self.rubric, name)
        except KeyError:
            known = ", ".join(self.rubric.ids)
            mapped = ", ".join(sorted(self.cmap.rename)) or "none"
            rec.fail(f"unknown criterion {name!r}", key, got=name, expected=(
                f"a criterion of rubric {self.rubric.rubric_id!r} ({known}) or a source name"
                f" in criterion map {self.cmap.name!r} ({mapped}); add it to the map's"
                " rename or drop"))
        if criterion_id is not None and criterion_id not in self.rubric.ids:
            rec.fail(f"criterion map {self.cmap.name!r} maps {name!r} to {criterion_id!r},"
                     f" which rubric {self.rubric.rubric_id!r} does not have", key,
                     expected=f"one of {', '.join(self.rubric.ids)}", got=criterion_id)
        return criterion_id

    def score(self, rec: Record, value: object, key: str) -> int:
        if type(value) is int and value in self._fast:
            return self._fast[value]
        return self.cmap.rescale_one(value, source=rec.source, row=rec.row,
                                     field=rec.prefix + key)


_VOTE_EXPECTED = ('"1" (first answer better), "2" (second better) or "12" (tie);'
                  " the integers 1, 2 and 12 are accepted too")


def _moove_vote(rec: Record) -> str:
    vote = rec.raw("vote", _VOTE_EXPECTED)
    key = str(vote) if type(vote) is int else vote.strip() if isinstance(vote, str) else None
    if key not in MOOVE_VOTES:
        rec.fail("unknown vote value", "vote", expected=_VOTE_EXPECTED, got=vote)
    return MOOVE_VOTES[key]


def _moove_scores(rec: Record, scorer: _CriterionScorer, side: str) -> tuple[dict[str, int], int]:
    """{rubric criterion: score} for one answer, and the number of null scores."""
    evaluations = rec.child("evaluations", rec.obj("evaluations", "per-answer scores"))
    raw = evaluations.obj(side, f"{{criterion: score}} for the {side} answer")
    found: dict[str, str] = {}
    scores: dict[str, int] = {}
    nulls = 0
    for name, value in raw.items():
        key = f"{side}.{name}"
        criterion_id = scorer.criterion(evaluations, name, key)
        if criterion_id is None:
            continue
        if criterion_id in found:
            evaluations.fail(
                f"source criteria {found[criterion_id]!r} and {name!r} both map to rubric"
                f" criterion {criterion_id!r}", side, got=[found[criterion_id], name],
                expected="at most one score per rubric criterion for each answer")
        found[criterion_id] = name
        if value is None:
            nulls += 1
            continue
        scores[criterion_id] = scorer.score(evaluations, value, key)
    return scores, nulls


def _record_id(rec: Record) -> str:
    """A MOOVE record's id: the key of a keyed export, else ``id``/``_id``
    (a MongoDB ``{"$oid": ...}`` is unwrapped), else the row number."""
    if isinstance(rec.row, str):
        return rec.row
    for key in ("id", "_id"):
        value = rec.data.get(key)
        if isinstance(value, dict) and isinstance(value.get("$oid"), str):
            return value["$oid"]
        if value is not None:
            return rec.ident(key, "the contribution id")
    return str(rec.row)


@dataclass
class _MooveModels:
    """Attributes answers to models, counting records without model identity."""

    fields: tuple[str, str]
    missing: int = 0

    def get(self, rec: Record) -> tuple[str, str]:
        names = []
        absent = False
        for path, placeholder in zip(self.fields, PLACEHOLDER_MODELS, strict=True):
            value = lookup(rec.data, path)
            if value is MISSING or value is None or value == "":
                absent = True
                names.append(placeholder)
            else:
                names.append(rec.ident(path, "the model that wrote this answer"))
        self.missing += absent
        return names[0], names[1]

    def note(self, total: int) -> str | None:
        if not self.missing:
            return None
        which = "none" if self.missing == total else f"{total - self.missing} of {total}"
        return (f"Model identity was absent: {which} of the records name the models in the"
                f" fields {self.fields[0]!r}/{self.fields[1]!r}, so {self.missing} record(s)"
                f" were attributed to the placeholder models {PLACEHOLDER_MODELS[0]!r} and"
                f" {PLACEHOLDER_MODELS[1]!r}. Model-level analyses (Bradley–Terry ranking,"
                " per-model failure rates, leaderboards) are not meaningful for these"
                " records; pass model_fields to name the fields that identify the models.")


def read(path: str | Path, *, rubric: Rubric | None = None,
               criterion_map: CriterionMap = MOOVE_MAP,
               model_fields: tuple[str, str] = ("firstModel", "secondModel")) -> Snapshot:
    """Read a MOOVE-style contribution export (a JSON object keyed by
    contribution id, a JSON array, or JSON Lines), one pairwise review per
    record.

    Each distinct question text is a case; answers are deduplicated by (case,
    model, text); the first answer is answer A and is shown left; vote "1" /
    "2" / "12" becomes choice A / B / tie. Criterion scores (``evaluations.first``
    / ``.second``) go through ``criterion_map`` onto ``rubric`` (default: the
    bundled rubric) and are linked to the preference by ``review_id``. The
    models come from ``model_fields`` (dotted paths allowed); without them the
    answers go to :data:`PLACEHOLDER_MODELS` and ``meta["notes"]`` says so.
    """
    if len(model_fields) != 2 or not all(isinstance(f, str) and f for f in model_fields):
        raise ValueError(f"model_fields needs two field names, got {model_fields!r}")
    rubric = rubric or load_rubric()
    records = split_records(parse(path), what="contributions", keyed=True,
                       is_record=lambda d: "question" in d)
    out = Builder(records[0].source)
    scorer = _CriterionScorer(rubric, criterion_map)
    models = _MooveModels(tuple(model_fields))
    seen: dict[str, int | str] = {}
    nulls = 0
    for rec in records:
        record_id = _record_id(rec)
        if record_id in seen:
            rec.fail(f"duplicate contribution id (also at {where(seen[record_id])})",
                     "id", expected="a unique id per contribution", got=record_id)
        seen[record_id] = rec.row
        nulls += _moove_record(rec, out, scorer, models)
    notes = [n for n in (models.note(len(records)), _null_note(nulls),
                         _repeat_note(out.number_revisions())) if n]
    meta = source_meta("moove", out.source, criterion_map, notes=notes,
                 model_fields=list(model_fields), record_ids=list(seen))
    return out.snapshot(rubric, meta)


def _repeat_note(repeats: int) -> str | None:
    if not repeats:
        return None
    return (f"{repeats} rating(s) re-scored an answer that the same rater had scored in an"
            " earlier review; they are stored as later revisions of that rating (the audit"
            " uses the latest).")


def _null_note(nulls: int) -> str | None:
    if not nulls:
        return None
    return f"{nulls} criterion score(s) were null (not rated) and were skipped."


def _moove_record(rec: Record, out: Builder, scorer: _CriterionScorer,
                  models: _MooveModels) -> int:
    question = rec.text("question", "the question text").strip()
    first = rec.text("firstAnswer", "the first answer's text", empty=True)
    second = rec.text("secondAnswer", "the second answer's text", empty=True)
    choice = _moove_vote(rec)
    user = rec.ident("user", "the rater")
    country = rec.text("country", "the rater's country", nullable=True, empty=True)
    organisation = rec.text("organization_name", "the rater's organisation", nullable=True,
                            empty=True)
    specialty = rec.text("specialty", "the question's specialty", required=False, empty=True)
    created = rec.timestamp("createdAt", "timestamp")
    scored = [_moove_scores(rec, scorer, side) for side in ("first", "second")]
    model_a, model_b = models.get(rec)

    case_id = out.case(case_id_for(question), prompt=question,
                       specialty=(specialty or "").strip() or UNSPECIFIED)
    answers = out.pair(case_id, (model_a, first), (model_b, second))
    out.rater(user, country=country or None, organisation=organisation or None)
    review = out.preference(case_id=case_id, answer_a_id=answers[0], answer_b_id=answers[1],
                            shown_left="A", choice=choice, rater_id=user, created_at=created)
    for answer_id, (scores, _) in zip(answers, scored, strict=True):
        for criterion_id, score in scores.items():
            out.rating(answer_id=answer_id, rater_id=user, criterion_id=criterion_id,
                       score=score, review_id=review, created_at=created)
    return sum(n for _, n in scored)
