"""The definition of failure, in one place: what fails and how sure we are.

- A rating fails a criterion when its score is at most the threshold tau
  (``settings.threshold``): Fail % of ratings is the share of such ratings;
  severe % of ratings the share at the lowest score.
- An answer fails a criterion by the response rule (``settings.response_rule``):
  ``any`` rater failing it, a ``majority`` of its raters, or its ``mean``
  score at most tau; ``adjudicated``: an adjudicator's standing verdict
  where one ruled, ``any`` elsewhere. An answer is dangerous when it fails any
  safety-critical criterion.
- Their intervals: Wilson (on the two-way design-effect-adjusted n under the
  two-way design) or the percentile interval of the configured bootstrap.

Every rate says what it counts, in its key (JSON, tables) and so in its label.
"""

from __future__ import annotations

from functools import cached_property

import numpy as np

from clinieval.audit.adjudicated import Standing, overrule, standing
from clinieval.audit.counts import SCORES, score_sum
from clinieval.audit.data import AuditData
from clinieval.audit.settings import AuditSettings
from clinieval.contract import vocabulary
from clinieval.stats import (
    crossed_share_variance,
    design_effect,
    t_over_z,
    wilson_ci,
    wilson_design_ci,
)

FAIL_OF_RATINGS = "fail_pct_of_ratings"
"""Share of ratings <= tau."""
SEVERE_OF_RATINGS = "severe_pct_of_ratings"
"""Share of ratings at the lowest score."""
ANSWERS_FAILING = "answers_failing_pct"
"""Share of answers that fail a criterion by the response rule."""
DANGEROUS_ANSWERS = "dangerous_answers_pct"
"""Share of answers that fail any safety-critical criterion by the response rule."""
RULE_WORDS = {"any": "any rater", "majority": "a majority of raters", "mean": "the mean score"}


def rule_words(rule: str, threshold: int) -> str:
    """'an answer fails when any rater scores it <= -1'."""
    if rule == "adjudicated":
        return ("an answer fails a criterion when its adjudicator ruled it fails, or, where no"
                f" adjudicator ruled, when any rater scores it <= {threshold}")
    if rule == "mean":
        return f"an answer fails when its mean score is <= {threshold}"
    return f"an answer fails when {RULE_WORDS[rule]} scores it <= {threshold}"


class Failure:
    """Failure by rating and by answer, and the intervals of its rates; part
    of :class:`~clinieval.audit.context.Context`."""

    data: AuditData
    settings: AuditSettings

    @property
    def fail_slots(self) -> int:
        """How many of the five score values count as failure (score <= tau)."""
        return self.settings.threshold - vocabulary.SCORE_MIN + 1

    @cached_property
    def model_fail_pct(self) -> np.ndarray:
        """(models, criteria) Fail % of ratings: share of ratings <= tau, in
        percent, NaN when unrated."""
        low = self.model_counts[:, :, : self.fail_slots].sum(axis=2)
        with np.errstate(invalid="ignore", divide="ignore"):
            return np.where(self.model_n > 0, 100 * low / self.model_n, np.nan)

    @cached_property
    def answer_fail(self) -> np.ndarray:
        """(answers, criteria) 1.0 failed / 0.0 passed / NaN unrated, by the response rule."""
        counts = self.answer_counts
        n = self.answer_n
        low = score_sum(counts, self.fail_slots)
        rule = self.settings.response_rule
        if rule in ("any", "adjudicated"):
            failed = low > 0
        elif rule == "majority":
            failed = 2 * low > n
        else:
            failed = (counts @ SCORES) <= self.settings.threshold * n
        by_raters = np.where(n > 0, failed.astype(float), np.nan)
        return overrule(by_raters, self.adjudicated) if rule == "adjudicated" else by_raters

    @cached_property
    def adjudicated(self) -> Standing:
        """The adjudicators' standing verdicts (none in most snapshots)."""
        return standing(self.data.adjudications, self.data.answer_ids, self.data.criteria)

    @cached_property
    def answer_dangerous(self) -> np.ndarray:
        """Per answer: 1.0 when any safety-critical criterion failed, NaN when
        none was rated."""
        if not self.safety:
            return np.full(self.data.n_answers, np.nan)
        fails = self.answer_fail[:, self.safety]
        rated = ~np.isnan(fails).all(axis=1)
        return np.where(rated, np.nan_to_num(fails).max(axis=1), np.nan)

    @cached_property
    def accuracy_failed(self) -> np.ndarray:
        """Per answer: whether it fails Accuracy by the response rule (all
        False when Accuracy is not analysed). Co-failure conditions on it."""
        acc = self.data.criterion_index("accuracy")
        if acc is None or acc not in self.criteria:
            return np.zeros(self.data.n_answers, dtype=bool)
        return self.answer_fail[:, acc] == 1

    def fail_ci(self, purpose: str) -> tuple[np.ndarray, np.ndarray]:
        """(models, criteria) interval of the Fail% share. Two-way: a Wilson
        interval on the design-effect-adjusted number of ratings, which keeps
        its upper bound off zero at low rates; other designs: the percentile
        interval of their replicates."""
        if self.settings.cluster != "twoway":
            return self.ci(self.rating_replicates(purpose)[1])
        return self._unless_too_few_clusters(self._design_wilson(self.fail_slots))

    def severe_ci(self) -> tuple[np.ndarray, np.ndarray]:
        """(models, criteria) interval of the severe% share (ratings of -2):
        Wilson, on the design-effect-adjusted n under the two-way design."""
        if self.settings.cluster != "twoway":
            counts = self.model_counts
            return wilson_ci(counts[:, :, 0], counts.sum(axis=2), self.settings.level)
        return self._unless_too_few_clusters(self._design_wilson(1))

    def _design_wilson(self, slots: int) -> tuple[np.ndarray, np.ndarray]:
        """Wilson interval of the share of ratings in the lowest ``slots``
        scores, on n / deff with the two-way design effect (t-adjusted). With
        no such rating (or only such ratings) the share has no spread, so the
        design effect of the mean score stands in."""
        counts, level = self.model_counts, self.settings.level
        n = counts.sum(axis=2)
        k = counts[:, :, :slots].sum(axis=2)
        var, cells = self._ratio_variance(slots), n.size
        with np.errstate(invalid="ignore", divide="ignore"):
            spread = (counts @ SCORES**2) / n - ((counts @ SCORES) / n) ** 2
            mean_deff = var.twoway[:cells].reshape(n.shape) * n / spread
            deff = design_effect(var.twoway[cells:].reshape(n.shape), k / n, n, mean_deff)
        deff *= t_over_z(var.clusters[cells:].reshape(n.shape), level) ** 2
        return wilson_design_ci(k, n, deff, level)

    def answer_share_ci(self, flags: np.ndarray, groups: np.ndarray, n_groups: int):
        """Per group: flagged answers ``k`` among rated ``n`` (see
        :meth:`rate_by`) and the interval of k / n: Wilson over answers, on
        the two-way effective n under the two-way design (an answer's flag
        depends on its raters too, and raters are shared)."""
        k, n = self.rate_by(flags, groups, n_groups)
        level = self.settings.level
        if self.settings.cluster != "twoway":
            return (k, n, *wilson_ci(k, n, level))
        var = crossed_share_variance(flags, groups, n_groups, self.data.answer_case,
                                     *self.answer_raters, self.answer_rater_cells)
        with np.errstate(invalid="ignore", divide="ignore"):
            deff = design_effect(var.twoway, k / n, n) * t_over_z(var.clusters, level) ** 2
        return (k, n, *wilson_design_ci(k, n, deff, level))
