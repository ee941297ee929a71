"""What else goes wrong when Accuracy fails. The section counts the answers
that fail Accuracy; its table compares their ratings on the other criteria
with all ratings of those criteria (counts in ratings)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd
import scipy.sparse as sp

from clinieval.audit.context import Context
from clinieval.audit.counts import SCORES
from clinieval.audit.data import N_SCORES
from clinieval.audit.failure import rule_words
from clinieval.audit.formatting import estimate, fmt_ci, json_list
from clinieval.audit.result import Figure, Forest, Section
from clinieval.audit.sections._common import SectionSpec, Skipped, run_section
from clinieval.stats import bootstrap_mean_counts

KEY, TITLE = "co_failure", "Co-failure given low Accuracy"
MIN_FAILED = 5


@dataclass(frozen=True)
class CoFailure:
    """Answers failing Accuracy; per other criterion, the score counts of
    their ratings (``failed``) and of all ratings (``overall``), each (C, 5),
    and bootstrap replicates (B, C) of both means and of their difference."""

    answers_failed: int
    criteria: list[str]
    failed: np.ndarray
    overall: np.ndarray
    failed_reps: np.ndarray
    overall_reps: np.ndarray
    difference_reps: np.ndarray


def compute(ctx: Context) -> CoFailure | Skipped:
    d = ctx.data
    acc = d.criterion_index("accuracy")
    if acc is None:
        return Skipped("the rubric has no 'accuracy' criterion.")
    if acc not in ctx.criteria:
        return Skipped(ctx.why_unanalysed([acc]) + ".")
    low = ctx.accuracy_failed
    if low.sum() < MIN_FAILED:
        return Skipped(f"needs at least {MIN_FAILED} answers that fail Accuracy; found"
                       f" {int(low.sum())}.")
    others = [c for c in ctx.criteria if c != acc]
    if not others:
        return Skipped("no other criterion is analysed.")
    counts = ctx.answer_counts
    cond = counts[low][:, others].sum(axis=0)
    rest = counts[~low][:, others].sum(axis=0)
    reps = (_twoway(ctx, others) if ctx.settings.cluster == "twoway"
            else _by_rating(ctx, cond, rest))
    return CoFailure(int(low.sum()), [ctx.name(c) for c in others], cond, cond + rest, *reps)


def _by_rating(ctx: Context, cond: np.ndarray, rest: np.ndarray):
    """Rating-level replicates. The low-Accuracy ratings are part of the
    overall mean: draw the two disjoint parts and build the overall mean from
    both, so the difference is coherent."""
    s = ctx.settings
    cond_b = bootstrap_mean_counts(cond, SCORES, s.bootstrap, ctx.rng("co-failure/low"))
    rest_b = bootstrap_mean_counts(rest, SCORES, s.bootstrap, ctx.rng("co-failure/rest"))
    n_cond, n_rest = cond.sum(axis=1), rest.sum(axis=1)
    all_b = (cond_b * n_cond + np.nan_to_num(rest_b) * n_rest) / (n_cond + n_rest)
    return cond_b, all_b, cond_b - all_b


def _twoway(ctx: Context, others: list[int]):
    """Two-way (raters x cases) replicates from the pigeonhole draws the
    model means use (their cells are already split by the Accuracy
    failure, held at the observed one): both means and their difference,
    each scaled to its own two-way variance."""
    num, den = _maps(ctx, others)
    count = len(others)
    reps = ctx.twoway_ratio_replicates(num, den, np.vstack([np.eye(count), -np.eye(count)]))
    return reps[:, :count], reps[:, count:2 * count], reps[:, 2 * count:]


def _maps(ctx: Context, others: list[int]) -> tuple[sp.csr_matrix, sp.csr_matrix]:
    """The two-way cells' columns (model, criterion, fails Accuracy?, score)
    to the score sums and counts of (the low-Accuracy ratings | all
    ratings) of each other criterion, summed over models."""
    d = ctx.data
    pick = np.zeros((d.n_criteria, len(others)))
    pick[others, np.arange(len(others))] = 1.0
    models = np.ones((d.n_models, 1))
    low_only, both = np.array([[0.0], [1.0]]), np.ones((2, 1))
    values, ones = SCORES[:, None], np.ones((N_SCORES, 1))

    def kron(*parts):
        out = parts[0]
        for part in parts[1:]:
            out = sp.kron(out, part)
        return sp.csr_matrix(out)

    num = sp.hstack([kron(models, pick, low_only, values), kron(models, pick, both, values)])
    den = sp.hstack([kron(models, pick, low_only, ones), kron(models, pick, both, ones)])
    return num.tocsr(), den.tocsr()


def present(result: CoFailure, ctx: Context) -> Section:
    s = ctx.settings
    cond, overall = result.failed, result.overall
    frame = pd.DataFrame({"criterion": result.criteria,
                          "ratings_accuracy_failed": cond.sum(axis=1),
                          "ratings_all": overall.sum(axis=1)})
    with np.errstate(invalid="ignore", divide="ignore"):
        cond_mean, all_mean = (cond @ SCORES) / cond.sum(1), (overall @ SCORES) / overall.sum(1)
    frame = estimate(frame, "mean_low_accuracy", cond_mean, *ctx.ci(result.failed_reps))
    frame = estimate(frame, "mean_all", all_mean, *ctx.ci(result.overall_reps))
    frame = estimate(frame, "difference", cond_mean - all_mean,
                     *ctx.ci(result.difference_reps))
    frame = frame.sort_values("difference", kind="stable").reset_index(drop=True)
    fig = Figure(KEY, "Mean score of other criteria when Accuracy fails", Forest(
        labels=frame["criterion"].tolist(), est=json_list(frame["difference"]),
        lo=json_list(frame["difference_lo"]), hi=json_list(frame["difference_hi"]),
        n=frame["ratings_accuracy_failed"].tolist(),
        x_label="difference from the overall mean", ref=0.0),
        caption=f"{result.answers_failed:,} answers fail Accuracy"
        f" ({rule_words(s.response_rule, s.threshold)}); n counts their ratings of the other"
        f" criterion. Bootstrap CIs: {_design(ctx)}.")
    return Section(KEY, TITLE, _summary(frame, result.answers_failed), {"co_failure": frame},
                   [fig], {"answers_accuracy_failed": result.answers_failed})


def _design(ctx: Context) -> str:
    """Co-failure resamples ratings or raters and cases (never whole answers
    or raters alone), so it says which."""
    if ctx.settings.cluster == "twoway":
        return ("two-way: raters and cases resampled together, the set of answers failing"
                " Accuracy held fixed")
    return "rating-level, the set of answers failing Accuracy held fixed"


def _summary(frame: pd.DataFrame, answers: int) -> str:
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


def section(ctx: Context) -> Section:
    return run_section(KEY, TITLE, compute(ctx), lambda r: present(r, ctx))


SPEC = SectionSpec(
    KEY, TITLE,
    "What else goes wrong when Accuracy fails.",
    section, releases=("crossed_cells",))
