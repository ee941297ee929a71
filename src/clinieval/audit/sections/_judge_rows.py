"""Judgments in the audit's codes, shared by the judge-score sections: each
parsed rubric or jury score with its answer, model and case codes, its
juror, and its value on the scale the report shows it on.

Scales: the rubric judge scores the study's rubric on the clinicians'
-2..+2. A jury axis that names a rubric criterion is put on that scale by
re-centring its 1..5 Likert score (score - 3), the harmonisation the
criterion map applies to imported 1..5 data; any other axis stays on the
jury's own 1..5 scale, where failure is the same anchor position (tau + 3).
Every row says which scale it is on.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from clinieval.audit.context import Context
from clinieval.audit.judged import Judged
from clinieval.contract.vocabulary import SCORE_MAX, SCORE_MIN

JURY_SCALE = (1, 5)
"""The jury prompt asks for 1 (very poor) .. 5 (excellent) (runs/prompts/jury.toml)."""
JURY_SHIFT = (JURY_SCALE[0] + JURY_SCALE[1]) // 2 - (SCORE_MIN + SCORE_MAX) // 2
"""Likert minus this is on the clinicians' scale: 3 maps to 0."""
CLINICIANS = f"clinicians' {SCORE_MIN:+d}..{SCORE_MAX:+d}"
RECENTRED = f"jury {JURY_SCALE[0]}..{JURY_SCALE[1]} re-centred to {SCORE_MIN:+d}..{SCORE_MAX:+d}"
OWN = f"jury's own {JURY_SCALE[0]}..{JURY_SCALE[1]}"
SCORED_KINDS = ("rubric", "jury")


ROW_COLUMNS = ("answer_id", "run_id", "judge_kind", "judge_model", "criterion_id", "score",
               "juror", "repeat", "ok")
"""The judgments' columns :func:`judge_rows` keeps (beside those it adds)."""


@dataclass(frozen=True)
class JudgeRows:
    """Parsed rubric and jury scores in the audit's codes (``rows``), and all
    their rows, parsed or not, counted per judge, model and criterion
    (``calls``: a judgment row of one criterion is one call's verdict on it)."""

    rows: pd.DataFrame
    calls: pd.DataFrame


def answer_codes(ctx: Context, data: Judged, answer_ids) -> np.ndarray:
    """The audit's answer codes (positions in the answers table, which the
    judge tables read in the same order); -1 for an unknown id."""
    codes = data.answers.index.get_indexer(pd.Index(answer_ids))
    return np.where(codes < ctx.data.n_answers, codes, -1)


def judge_label(kind: str, judge_model: str) -> str:
    return "jury" if kind == "jury" else f"{kind} judge {judge_model}"


def judge_labels(kinds: pd.Series, models: pd.Series) -> np.ndarray:
    """:func:`judge_label` of every row (millions of rows, a handful of
    judges)."""
    kind_code, kind_values = pd.factorize(kinds, use_na_sentinel=False)
    model_code, model_values = pd.factorize(models, use_na_sentinel=False)
    pair, labels = label_pairs(kind_code, kind_values, model_code, model_values)
    return labels[pair]


def label_pairs(kind_code, kinds, model_code, models) -> tuple[np.ndarray, np.ndarray]:
    """Per row, a code of its (kind, model) pair, and each pair's
    :func:`judge_label`: labels are made once per distinct pair, not per
    row. ``kind_code`` / ``model_code`` index ``kinds`` / ``models``."""
    width = max(len(models), 1)
    pair, pairs = pd.factorize(np.asarray(kind_code, dtype=np.int64) * width + model_code)
    labels = np.array([judge_label(kinds[k // width], models[k % width]) for k in pairs],
                      dtype=object)
    return pair, labels


def judge_rows(ctx: Context, data: Judged, kinds: tuple[str, ...] = SCORED_KINDS) -> JudgeRows:
    """Rubric and jury judgments (or those of ``kinds``) of known answers, on
    their report scale."""
    # the kinds' rows of known answers, only the columns the judge sections
    # read, taken once (two filters of the whole frame, with its strings,
    # and a deep copy took 1.6 s at 10x); answers by their table positions
    at = data.answer_at
    keep = np.flatnonzero(data.rows["judge_kind"].isin(kinds).to_numpy(bool, na_value=False)
                          & (at >= 0) & (at < ctx.data.n_answers))
    rows = data.rows[list(ROW_COLUMNS)].take(keep).reset_index(drop=True)
    rows["answer"] = at[keep]
    rows["model"] = ctx.data.answer_model[rows["answer"]]
    rows["case"] = ctx.data.answer_case[rows["answer"]]
    # judge and rater labels as categoricals made per distinct pair: millions
    # of object strings converted to arrow ones took 0.6 s at 10x
    kind_code, kind_values = pd.factorize(rows["judge_kind"], use_na_sentinel=False)
    model_code, model_values = pd.factorize(rows["judge_model"], use_na_sentinel=False)
    pair, labels = label_pairs(kind_code, kind_values, model_code, model_values)
    judge_code, judges = pd.factorize(labels, sort=True)  # (sorted: no order of rows)
    judge_code = judge_code[pair]
    rows["judge"] = pd.Categorical.from_codes(judge_code, judges)
    juror_code, jurors = pd.factorize(rows["juror"].to_numpy(np.int64))
    width = max(len(jurors), 1)
    sat, seats = pd.factorize(model_code.astype(np.int64) * width + juror_code)
    rater_code, raters = pd.factorize(np.array(
        [f"{model_values[k // width]}#{jurors[k % width]}" for k in seats], dtype=object),
        sort=True)
    rows["rater"] = pd.Categorical.from_codes(rater_code[sat], raters)
    shared = rows["criterion_id"].isin(ctx.data.criteria)
    jury = rows["judge_kind"].eq("jury")
    # three labels as a categorical: millions of strings took 1.5 s at 10x
    rows["scale"] = pd.Categorical.from_codes(
        np.where(~jury, 0, np.where(shared, 1, 2)), [CLINICIANS, RECENTRED, OWN])
    rows["value"] = rows["score"] - np.where(jury & shared, JURY_SHIFT, 0)
    cut = ctx.settings.threshold + np.where(rows["scale"].eq(OWN), JURY_SHIFT, 0)
    rows["fail"] = (rows["value"] <= cut).astype(float)
    calls = _calls(judge_code, judges, rows["model"].to_numpy(), rows["criterion_id"],
                   rows["ok"].to_numpy(bool))
    return JudgeRows(rows[rows["ok"]].reset_index(drop=True), calls)


def _calls(judge_code, judges, model, criterion, ok) -> pd.DataFrame:
    """Rows (calls) and unparsed ones per judge, model and criterion, as a
    groupby over the three would count them (rows without a criterion left
    out), by one integer code per row instead of the label strings."""
    criterion_code, criteria = pd.factorize(criterion)
    n_models = int(model.max(initial=0)) + 1
    known = criterion_code >= 0
    key = ((judge_code[known].astype(np.int64) * n_models + model[known]) * max(len(criteria), 1)
           + criterion_code[known])
    keys, which = np.unique(key, return_inverse=True)
    j, rest = np.divmod(keys, n_models * max(len(criteria), 1))
    m, c = np.divmod(rest, max(len(criteria), 1))
    index = pd.MultiIndex.from_arrays(
        [np.asarray(judges, dtype=object)[j], m.astype(model.dtype),
         np.asarray(criteria, dtype=object)[c]], names=["judge", "model", "criterion_id"])
    frame = pd.DataFrame({"calls": np.bincount(which, minlength=keys.size),
                          "unparsed": np.bincount(which, ~ok[known], minlength=keys.size)
                          .astype(np.int64)}, index=index)
    return frame.sort_index()


def cell_arrays(rows: pd.DataFrame, group: str, n_groups: int, column: str
                ) -> tuple[np.ndarray, np.ndarray]:
    """``(G, C, J)`` sums of ``column`` and counts per group code ``group``,
    case and rater (codes local to ``rows``), for
    :func:`~clinieval.stats.twoway_ratio_bootstrap`."""
    # codes in order of first appearance (sorted by cell_design, they keep
    # it): the draw's columns fall on the cases and raters as they always did
    design = cell_design(rows[group].to_numpy(), n_groups, pd.factorize(rows["case"])[0],
                         pd.factorize(rows["rater"])[0], [rows[column].to_numpy(float)])
    return design.sums[0], design.counts


@dataclass(frozen=True)
class CellDesign:
    """``(G, C, J)`` sums of some values and the counts per group, case and
    rater, with the distinct cases and raters (sorted codes) their axes
    index: blocks with the same ``cases`` and ``raters`` can share one
    two-way draw."""

    sums: list[np.ndarray]
    counts: np.ndarray
    cases: np.ndarray
    raters: np.ndarray

    def key(self) -> tuple[bytes, bytes]:
        return self.cases.tobytes(), self.raters.tobytes()


def cell_design(group, n_groups: int, case, rater, values: list[np.ndarray]) -> CellDesign:
    """:class:`CellDesign` of rows given by their ``group`` code, ``case``
    and ``rater`` (integer codes), for each array of ``values``."""
    case_code, cases = pd.factorize(np.asarray(case, dtype=np.int64), sort=True)
    rater_code, raters = pd.factorize(np.asarray(rater, dtype=np.int64), sort=True)
    shape = (n_groups, cases.size, raters.size)
    flat = np.ravel_multi_index((np.asarray(group), case_code, rater_code), shape)
    size = int(np.prod(shape))
    sums = [np.bincount(flat, v, size).reshape(shape) for v in values]
    counts = np.bincount(flat, minlength=size).reshape(shape).astype(float)
    return CellDesign(sums, counts, np.asarray(cases), np.asarray(raters))
