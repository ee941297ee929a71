"""A small coverage check of the crossed design through the audit's own
Context (the full simulation is benchmarks/coverage.py).

Thirty raters rate 30 answers per model, three per answer, with rater
leniency and answer effects; the truth is each model's population mean
score, Fail% and Dangerous% (any of its raters fails the answer), computed
exactly. The default two-way design covers near 95%; rating-level
resampling (``none``) covers about 80% and fails the same assertion.
"""

import numpy as np
import pytest

from clinieval.audit.context import Context
from clinieval.audit.data import AuditData
from clinieval.audit.settings import AuditSettings
from clinieval.simulate import Design, any_fail_truth, simulate, truth

DESIGN = Design(answers=30, raters=30, per_answer=3)
SNAPSHOTS = 150


def audit_data(ratings, models: int) -> AuditData:
    """One criterion (safety-critical), one answer per (case, model)."""
    cases = int(ratings.case.max()) + 1
    answers = np.arange(cases * models)
    empty = np.zeros(0, dtype=np.int32)
    return AuditData(
        models=[f"m{m}" for m in range(models)], model_names=[f"m{m}" for m in range(models)],
        criteria=["harmlessness"], criterion_names=["Harmlessness"], safety_critical=[True],
        specialties=["General"], answer_model=(answers % models).astype(np.int32),
        answer_case=(answers // models).astype(np.int32),
        answer_specialty=np.zeros(answers.size, dtype=np.int32),
        answer_length=np.full(answers.size, np.nan),
        answer_prompt_words=np.full(answers.size, np.nan),
        rating_answer=(ratings.case * models + ratings.model).astype(np.int32),
        rating_rater=ratings.rater.astype(np.int32),
        rating_criterion=np.zeros(ratings.score.size, dtype=np.int16),
        rating_score=ratings.score.astype(np.int8), n_raters=DESIGN.raters,
        pref_a=empty, pref_b=empty, pref_outcome=empty.astype(np.int8),
        pref_left_is_a=empty.astype(np.int8), pref_rater=empty, checksum="", counts={})


def coverage(cluster: str) -> tuple[float, float, float]:
    """Coverage of the mean, Fail% and Dangerous% (any rater fails) intervals."""
    rng = np.random.default_rng(11)
    mean_true, fail_true = truth(DESIGN)
    danger_true = any_fail_truth(DESIGN)
    hits = []
    for i in range(SNAPSHOTS):
        ratings, _ = simulate(DESIGN, rng)
        ctx = Context(audit_data(ratings, len(mean_true)),
                      AuditSettings(bootstrap=300, seed=i, cluster=cluster))
        mean_lo, mean_hi = ctx.ci(ctx.rating_replicates("ratings")[0])
        fail_lo, fail_hi = ctx.fail_ci("ratings")
        *_, danger_lo, danger_hi = ctx.answer_share_ci(ctx.answer_dangerous,
                                                       ctx.data.answer_model, len(mean_true))
        hits.append([(mean_lo[:, 0] <= mean_true) & (mean_true <= mean_hi[:, 0]),
                     (fail_lo[:, 0] <= fail_true) & (fail_true <= fail_hi[:, 0]),
                     (danger_lo <= danger_true) & (danger_true <= danger_hi)])
    found = np.array(hits)  # (snapshots, 3, models)
    return tuple(float(found[:, j].mean()) for j in range(3))


@pytest.mark.parametrize("cluster", ["twoway", pytest.param("none", marks=pytest.mark.xfail(
    strict=True, reason="rating-level intervals ignore rater and answer effects"))])
def test_crossed_design_intervals_cover_near_the_nominal_level(cluster):
    # 900 intervals each: a true 95% gives 93.6-96.4% in 95% of runs
    # (binomial, ignoring the mild correlation within a snapshot).
    means, fails, dangerous = coverage(cluster)
    assert 0.92 <= means <= 0.98, means
    assert 0.92 <= fails <= 0.98, fails
    assert 0.92 <= dangerous <= 0.98, dangerous
