"""Adjudicators' verdicts as the audit reads them: the standing verdict per
(answer, criterion), the newest row of each (a revised verdict supersedes,
the older rows stay in the table), coded to the audit's answer and
criterion indexes. Under the response rule ``adjudicated`` a standing
verdict is the answer's verdict on its criterion (:mod:`clinieval.audit.failure`)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

FAIL = "fail"
ALARM, REASSURANCE = -1, 1
"""A criterion is disputed when one current score is <= ALARM and another
>= REASSURANCE (the platform's rule, :mod:`clinieval.platform.adjudication`)."""


@dataclass(frozen=True)
class Standing:
    """Standing verdicts: answer and criterion codes, whether each rules fail,
    and the rater id of its adjudicator; ``rows`` counts every row,
    superseded ones too."""

    answer: np.ndarray
    criterion: np.ndarray
    fail: np.ndarray
    adjudicator: np.ndarray
    rows: int


def standing(table: pa.Table | None, answer_ids: list[str], criteria: list[str]) -> Standing:
    """The newest verdict per (answer, criterion) of ``table`` whose answer
    and criterion the audit knows (an adjudication of an answer outside the
    snapshot cannot be one)."""
    empty = np.zeros(0, dtype=np.int64)
    if table is None or table.num_rows == 0:
        return Standing(empty, empty, np.zeros(0, dtype=bool), np.zeros(0, dtype=object), 0)
    order = (pc.sort_indices(table, [("adjudication_id", "ascending")])
             if table.column("adjudication_id").null_count == 0 else None)
    rows = table if order is None else table.take(order)
    answer = _codes(rows.column("answer_id"), answer_ids)
    criterion = _codes(rows.column("criterion_id"), criteria)
    known = (answer >= 0) & (criterion >= 0)
    key = answer * max(len(criteria), 1) + criterion
    # The last occurrence of each key in id order: unique over the reversed rows.
    _, last_reversed = np.unique(key[known][::-1], return_index=True)
    pick = np.flatnonzero(known)[::-1][last_reversed]
    verdict = np.asarray(rows.column("verdict").to_pylist(), dtype=object)
    raters = np.asarray(rows.column("rater_id").to_pylist(), dtype=object)
    return Standing(answer[pick], criterion[pick], verdict[pick] == FAIL, raters[pick],
                    table.num_rows)


def _codes(values: pa.ChunkedArray, vocabulary: list[str]) -> np.ndarray:
    index = pc.index_in(values.combine_chunks().cast(pa.string()),
                        value_set=pa.array(vocabulary, pa.string()))
    return pc.fill_null(index, -1).to_numpy(zero_copy_only=False).astype(np.int64)


def overrule(answer_fail: np.ndarray, verdicts: Standing) -> np.ndarray:
    """``answer_fail`` (answers x criteria) with each standing verdict in
    place of the raters' verdict on its answer and criterion."""
    out = answer_fail.copy()
    out[verdicts.answer, verdicts.criterion] = verdicts.fail.astype(float)
    return out


def disputed(rating_answer: np.ndarray, rating_criterion: np.ndarray, rating_score: np.ndarray,
             criteria: np.ndarray, n_criteria: int) -> np.ndarray:
    """Keys (answer * n_criteria + criterion) of the (answer, criterion)
    pairs among ``criteria`` whose current scores cross the fail line."""
    mine = np.isin(rating_criterion, criteria)
    key = rating_answer[mine].astype(np.int64) * n_criteria + rating_criterion[mine]
    score = rating_score[mine].astype(np.int64)
    alarms = np.unique(key[score <= ALARM])
    calm = np.unique(key[score >= REASSURANCE])
    return np.intersect1d(alarms, calm)
