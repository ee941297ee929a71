"""HealthBench-style rubric scores from rule judgments of cases that name no
gate indicator: per judge run, the points of the met rules over the case's
positive points; runs averaged per answer; per model the mean over answers
with a bootstrap CI. By default the model's mean is clipped to [0, 1], as
HealthBench's reference does; the ``rubric_clip`` setting clips each run's
score instead. A run with an unparsed rule has no score."""

from __future__ import annotations

import numpy as np
import pandas as pd

from clinieval.audit.context import Context
from clinieval.audit.formatting import estimate, fmt_ci, json_list
from clinieval.audit.judged import judged
from clinieval.audit.result import Figure, Forest, Section
from clinieval.audit.sections._common import SectionSpec, Skipped, run_section
from clinieval.catalogs import load_indicators
from clinieval.stats import clipped_rubric_mean, rubric_example_scores

KEY, TITLE = "rubric_scores", "Rubric scores"
CLIP_WORDS = {"mean": "the model's mean clipped to [0, 1] as HealthBench's reference does"
                      " (rubric_clip = mean)",
              "example": "each answer's score clipped to [0, 1] before the mean"
                         " (rubric_clip = example)"}


def compute(ctx: Context) -> pd.DataFrame | Skipped:
    data = judged(ctx.data.judge_tables)
    if data is None:
        return Skipped("needs automated judgments; the snapshot has none.")
    rules = data.kind("rule")
    gate_ids = set(load_indicators(ctx.settings.indicators).by_id())
    rules = rules[~data.cases["subcategory"].reindex(rules["case_id"]).isin(gate_ids).to_numpy()]
    if rules.empty or rules["points"].isna().all():
        return Skipped("needs rule judgments with points on cases outside the gates; found none.")
    per_answer = _answer_scores(rules, ctx.settings.rubric_clip == "example")
    if per_answer["score"].isna().all():
        return Skipped(_why_unscored(rules, per_answer))
    out = []
    for model, g in per_answer.dropna().groupby("model_id"):
        s = g["score"].to_numpy()
        value, reps = clipped_rubric_mean(s, ctx.settings.bootstrap, ctx.rng(f"{KEY}:{model}"),
                                          ctx.settings.rubric_clip)
        lo, hi = ctx.ci(reps) if len(s) > 1 else (np.nan, np.nan)
        out.append({"model": data.name(model), "score": value, "score_lo": float(lo),
                    "score_hi": float(hi), "n": len(s),
                    "unscored": int(per_answer.loc[per_answer["model_id"] == model,
                                                   "score"].isna().sum())})
    return pd.DataFrame(out).sort_values("score", ascending=False).reset_index(drop=True)


def _answer_scores(rules: pd.DataFrame, clip_each: bool) -> pd.DataFrame:
    """Per (model, answer) the mean score of its judge runs; NaN when no run
    could be scored (an unparsed rule, or no positive points)."""
    code, runs = pd.factorize(pd.MultiIndex.from_frame(rules[["answer_id", "juror", "repeat"]]))
    score = rubric_example_scores(rules["points"].fillna(0).to_numpy(),
                                  rules["score"].to_numpy() == 1.0, code, clip=clip_each)
    broken = np.bincount(code, weights=~rules["ok"].to_numpy(), minlength=len(runs)) > 0
    first = rules.groupby(code).first()
    per_answer = pd.DataFrame({"answer_id": first["answer_id"], "model_id": first["model_id"],
                               "score": np.where(broken, np.nan, score),
                               "broken": broken})
    return per_answer.groupby(["model_id", "answer_id"], as_index=False).agg(
        score=("score", "mean"), broken=("broken", "all"))


def _why_unscored(rules: pd.DataFrame, per_answer: pd.DataFrame) -> str:
    """Why no answer has a score: its runs' unparsed rules, or cases whose
    rules carry no positive points to earn."""
    broken = int(per_answer["broken"].sum())
    pointless = len(per_answer) - broken
    parts = []
    if broken:
        parts.append(f"{broken} judged answers have an unparsed rule in every run")
    if pointless:
        parts.append(f"{pointless} are on cases whose rules have no positive points")
    return (f"no answer of the {len(per_answer)} judged on cases outside the gates can be"
            f" scored: {' and '.join(parts)}.")


def present(frame: pd.DataFrame, ctx: Context) -> Section:
    fig = Figure(KEY, "Rubric score per model", Forest(
        labels=frame["model"].tolist(), est=json_list(frame["score"]),
        lo=json_list(frame["score_lo"]), hi=json_list(frame["score_hi"]),
        n=frame["n"].astype(int).tolist(), x_label="rubric score (0-1)"),
        caption=f"Met points over positive points per answer;"
        f" {CLIP_WORDS[ctx.settings.rubric_clip]}; n counts answers; bootstrap CI over answers.")
    best, summary = _headline(frame, ctx.settings.min_n, CLIP_WORDS[ctx.settings.rubric_clip])
    return Section(KEY, TITLE, summary, {"rubric_scores": estimate(
        frame, "score", frame["score"], frame["score_lo"], frame["score_hi"])}, [fig],
        {"best": best})


def _headline(frame: pd.DataFrame, min_n: int, clip_words: str) -> tuple[str | None, str]:
    """The best-scoring model among those with at least ``min_n`` scored
    answers (a model on fewer is too few to call), and the sentence."""
    eligible = frame[frame["n"] >= min_n]
    if eligible.empty:
        return None, (f"No model has a rubric score on at least {min_n} answers (most:"
                      f" {int(frame['n'].max())}), so none is named highest ({clip_words}).")
    top = eligible.iloc[0]
    return str(top["model"]), (f"Highest rubric score: {top['model']}"
                               f" {fmt_ci(top['score'], top['score_lo'], top['score_hi'])}"
                               f" (n = {int(top['n'])} answers; {clip_words}).")


def section(ctx: Context) -> Section:
    return run_section(KEY, TITLE, compute(ctx), lambda r: present(r, ctx))


SPEC = SectionSpec(
    KEY, TITLE,
    "HealthBench-style rubric scores per model from rule judgments of cases"
    " outside the gates.",
    section, needs_judgments=True)
