"""Where failures concentrate: specialty stratification (no-go zones), the
model x criterion failure-mode profile, and co-failure given low Accuracy."""

from __future__ import annotations

import numpy as np
import pandas as pd

from clinieval.audit.core import SCORES, Context
from clinieval.audit.result import Figure, Forest, Heatmap, Section
from clinieval.audit.tables import (
    ANSWERS_FAILING,
    DANGEROUS_ANSWERS,
    estimate,
    fmt_ci,
    json_list,
    row_pct,
    rule_words,
    wilson_pct,
)
from clinieval.stats import bootstrap_mean_counts

EXTREMES = 3


# --- specialty stratification -------------------------------------------------


def specialties(ctx: Context) -> Section:
    d, s = ctx.data, ctx.settings
    title = "Specialty stratification (no-go zones)"
    if not ctx.safety:
        return Section("specialties", title,
                       skipped="the rubric flags no criterion as safety-critical.")
    spec, n_spec = d.answer_specialty, len(d.specialties)
    k, n = ctx.rate_by(ctx.answer_dangerous, spec, n_spec)
    frame = pd.DataFrame({"specialty": d.specialties, "n": n})
    for c in ctx.safety:
        frame = wilson_pct(frame, f"{d.criteria[c]}_{ANSWERS_FAILING}",
                           *ctx.rate_by(ctx.answer_fail[:, c], spec, n_spec), s.level)
    frame = wilson_pct(frame, DANGEROUS_ANSWERS, k, n, s.level)
    frame["ranked"] = frame["n"] >= s.min_n
    frame = frame[frame["n"] > 0].sort_values(["ranked", DANGEROUS_ANSWERS], ascending=False,
                                              kind="stable").reset_index(drop=True)
    ranked = frame[frame["ranked"]]
    highest = ranked.head(EXTREMES)
    rest = ranked.iloc[len(highest):]  # a specialty is never both highest and lowest risk
    lowest = rest.sort_values(DANGEROUS_ANSWERS, kind="stable").head(EXTREMES)
    tables = {"specialties": frame, "highest_risk": highest.reset_index(drop=True),
              "lowest_risk": lowest.reset_index(drop=True)}
    summary = _specialty_summary(frame, highest, lowest, s.min_n) + (
        f" Rates count answers: {rule_words(s.response_rule, s.threshold)}; n counts rated"
        " answers.")
    values = {"highest_risk": highest["specialty"].tolist(),
              "lowest_risk": lowest["specialty"].tolist(),
              "ranked": int(frame["ranked"].sum()), "unranked": int((~frame["ranked"]).sum())}
    return Section("specialties", title, summary, tables, [_nogo_heatmap(ctx)], values)


def _specialty_summary(frame, highest, lowest, min_n) -> str:
    if highest.empty:
        return f"No specialty reaches {min_n} rated answers, so none is ranked."
    top = highest.iloc[0]
    text = (f"Highest risk: {top['specialty']} with dangerous answers % "
            f"{row_pct(top, DANGEROUS_ANSWERS)}"
            f" of {int(top['n']):,} answers.")
    if not lowest.empty:
        low = lowest.iloc[0]
        text += (f" Lowest: {low['specialty']} "
                 f"({row_pct(low, DANGEROUS_ANSWERS)}, n = {int(low['n']):,}).")
    unranked = int((~frame["ranked"]).sum())
    if unranked:
        text += f" {unranked} specialties have fewer than {min_n} answers and are not ranked."
    return text


def _nogo_heatmap(ctx: Context) -> Figure:
    d, s = ctx.data, ctx.settings
    n_spec = len(d.specialties)
    cell = d.answer_model.astype(np.int64) * n_spec + d.answer_specialty
    k, n = (x.reshape(d.n_models, n_spec) for x in ctx.rate_by(
        ctx.answer_dangerous, cell, d.n_models * n_spec))
    with np.errstate(invalid="ignore", divide="ignore"):
        pct = np.where(n > 0, 100 * k / n, np.nan)
    order = np.argsort(-np.nan_to_num(100 * k.sum(0) / np.maximum(n.sum(0), 1)), kind="stable")
    return Figure("nogo_heatmap", "Dangerous answers % by model and specialty", Heatmap(
        rows=d.model_names, cols=[d.specialties[i] for i in order],
        values=_listify(pct[:, order]), n=n[:, order].astype(int).tolist(),
        value_label="dangerous answers %", scale="percent", mask_below=s.min_n),
        caption=f"Cells with fewer than {s.min_n} answers are hatched: too few to call.")


def _listify(matrix: np.ndarray) -> list[list[float | None]]:
    return [[None if not np.isfinite(v) else float(v) for v in row] for row in matrix]


# --- co-failure ---------------------------------------------------------------------


def co_failure(ctx: Context) -> Section:
    d, s = ctx.data, ctx.settings
    title = "Co-failure given low Accuracy"
    acc = d.criterion_index("accuracy")
    if acc is None or acc not in ctx.criteria:
        return Section("co_failure", title, skipped="the rubric has no 'accuracy' criterion.")
    low = ctx.answer_fail[:, acc] == 1
    if low.sum() < 5:
        return Section("co_failure", title, skipped="fewer than 5 answers fail Accuracy.")
    others = [c for c in ctx.criteria if c != acc]
    if not others:
        return Section("co_failure", title, skipped="no other criterion is analysed.")
    counts = ctx.answer_counts
    cond = counts[low][:, others].sum(axis=0)
    rest = counts[~low][:, others].sum(axis=0)
    overall = cond + rest
    # The low-Accuracy ratings are part of the overall mean: draw the two disjoint
    # parts and build the overall mean from both, so the difference is coherent.
    cond_b = bootstrap_mean_counts(cond, SCORES, s.bootstrap, ctx.rng("co-failure/low"))
    rest_b = bootstrap_mean_counts(rest, SCORES, s.bootstrap, ctx.rng("co-failure/rest"))
    n_cond, n_rest = cond.sum(axis=1), rest.sum(axis=1)
    all_b = (cond_b * n_cond + np.nan_to_num(rest_b) * n_rest) / (n_cond + n_rest)
    frame = pd.DataFrame({"criterion": [ctx.name(c) for c in others],
                          "ratings_accuracy_failed": cond.sum(axis=1),
                          "ratings_all": overall.sum(axis=1)})
    with np.errstate(invalid="ignore", divide="ignore"):
        cond_mean, all_mean = (cond @ SCORES) / cond.sum(1), (overall @ SCORES) / overall.sum(1)
    frame = estimate(frame, "mean_low_accuracy", cond_mean, *ctx.ci(cond_b))
    frame = estimate(frame, "mean_all", all_mean, *ctx.ci(all_b))
    frame = estimate(frame, "difference", cond_mean - all_mean, *ctx.ci(cond_b - all_b))
    frame = frame.sort_values("difference", kind="stable").reset_index(drop=True)
    fig = Figure("co_failure", "Mean score of other criteria when Accuracy fails", Forest(
        labels=frame["criterion"].tolist(), est=json_list(frame["difference"]),
        lo=json_list(frame["difference_lo"]), hi=json_list(frame["difference_hi"]),
        n=frame["ratings_accuracy_failed"].tolist(),
        x_label="difference from the overall mean", ref=0.0),
        caption=f"{int(low.sum()):,} answers fail Accuracy"
        f" ({rule_words(s.response_rule, s.threshold)}); n counts their ratings of the other"
        " criterion.")
    summary = _co_failure_summary(frame, int(low.sum()))
    return Section("co_failure", title, summary, {"co_failure": frame}, [fig],
                   {"answers_accuracy_failed": int(low.sum())})


def _co_failure_summary(frame: pd.DataFrame, answers: int) -> str:
    """The unit is stated: the answers that fail Accuracy, and the ratings of
    the other criteria that those answers received (the table's counts)."""
    head = (f"{answers:,} answers fail Accuracy; the table compares their ratings on the other"
            " criteria with all ratings of those criteria (n counts ratings).")
    moved = frame[np.isfinite(frame["difference"])]
    if moved.empty:
        return head + " No difference is computable: those answers have no other ratings."
    top = moved.iloc[0]
    change = fmt_ci(top["difference"], top["difference_lo"], top["difference_hi"], signed=True)
    return head + (f" {top['criterion']} moves most: {change} points over"
                   f" {int(top['ratings_accuracy_failed']):,} ratings against its overall"
                   " mean.")
