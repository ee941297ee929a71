"""The bootstrap design of ratings: the configured resampling unit
(``settings.cluster``: ratings, answers, raters or the two-way raters x
cases design), its replicates of mean scores and Fail %, and the two-way
design's cells, variances and pigeonhole totals.

Replicates are NaN when the design has too few clusters to resample (a
zero-width interval would claim a certainty the data cannot give). The
two-way replicates of every ratio mean over the ratings' cells come from one
set of pigeonhole totals, drawn once from the ``ratings`` stream.
"""

from __future__ import annotations

from functools import cached_property

import numpy as np
import scipy.sparse as sp

from clinieval.audit.counts import SCORES
from clinieval.audit.data import N_SCORES, AuditData
from clinieval.audit.settings import AuditSettings
from clinieval.stats import (
    CrossedVariance,
    bootstrap_mean_counts,
    cluster_bootstrap_ratio,
    crossed_ratio_replicates,
    crossed_unit_variance,
    group_mean_ci,
    grouped_ratio_variance,
    normal_ci,
    pigeonhole_totals,
    t_over_z,
    unique_codes,
)

DESIGNS = {"none": "rating-level, as in the MOOVE paper",
           "answer": "whole answers resampled",
           "rater": "whole raters resampled",
           "twoway": "two-way: raters and cases resampled together; Fail%, severe% and"
                     " Dangerous% by Wilson on the two-way design-effect-adjusted n"}



class BootstrapDesign:
    """Replicates and variances under the configured bootstrap design; part
    of :class:`~clinieval.audit.context.Context`."""

    data: AuditData
    settings: AuditSettings

    @property
    def design(self) -> str:
        """The bootstrap design in words, for legends and captions."""
        return DESIGNS[self.settings.cluster]

    def rating_replicates(self, purpose: str) -> tuple[np.ndarray, np.ndarray]:
        """(B, models, criteria) replicates of the mean score and the Fail%
        (share of ratings <= tau), by the configured resampling unit."""
        cached = self.__dict__.setdefault("_rating_reps", {})
        if purpose not in cached:
            cached[purpose] = self._unless_too_few_clusters(self._rating_replicates(purpose))
        return cached[purpose]

    @cached_property
    def too_few_clusters(self) -> str | None:
        """Why the configured cluster bootstrap of ratings cannot give intervals
        (it needs at least two clusters to resample), or None."""
        unit = self.settings.cluster
        if unit == "none":
            return None
        if unit == "twoway":
            return self._too_few_crossed()
        ids = self.data.rating_rater if unit == "rater" else self.data.rating_answer
        found = unique_codes(ids).size
        if found >= 2:
            return None
        return (f"a cluster bootstrap needs at least two {unit}s to resample and the ratings"
                f" come from {found}, so their intervals are not computable")

    def _too_few_crossed(self) -> str | None:
        # Either dimension alone still varies between replicates; one rater
        # on one case does not.
        d = self.data
        raters = unique_codes(d.rating_rater).size
        cases = unique_codes(d.answer_case[d.rating_answer]).size
        if max(raters, cases) >= 2:
            return None
        return (f"the two-way bootstrap needs at least two raters or two cases to resample and"
                f" the ratings come from {raters} rater(s) on {cases} case(s), so their"
                f" intervals are not computable")

    def _unless_too_few_clusters(self, replicates: tuple[np.ndarray, ...]):
        # One cluster resampled is always itself: a zero-width interval would
        # claim a certainty the data cannot give.
        if self.too_few_clusters is None:
            return replicates
        return tuple(np.full_like(r, np.nan) for r in replicates)

    def _rating_replicates(self, purpose: str) -> tuple[np.ndarray, np.ndarray]:
        B, rng = self.settings.bootstrap, self.rng(purpose)
        if self.settings.cluster == "none":
            counts = self.model_counts
            means = bootstrap_mean_counts(counts, SCORES, B, rng)
            fail_values = (np.arange(N_SCORES) < self.fail_slots).astype(float)
            fails = bootstrap_mean_counts(counts, fail_values, B, rng)
            return means, fails
        if self.settings.cluster == "twoway":
            return self._twoway_replicates()
        return self._cluster_replicates(B, rng)

    def _twoway_replicates(self):
        """From :attr:`twoway_totals` (always the ``ratings`` stream)."""
        d = self.data
        shape = (self.settings.bootstrap, d.n_models, d.n_criteria)
        rows, cols, stats = self.crossed_cells
        if stats.shape[0] == 0:
            return np.full(shape, np.nan), np.full(shape, np.nan)
        reps, _ = crossed_ratio_replicates(self.twoway_totals, rows, cols, stats,
                                           *self._ratio_maps(), self.settings.level,
                                           variance=self._ratio_variance(self.fail_slots))
        half = d.n_models * d.n_criteria
        return reps[:, :half].reshape(shape), reps[:, half:].reshape(shape)

    def _cluster_replicates(self, B: int, rng: np.random.Generator):
        """Resample whole answers (within model) or whole raters."""
        d = self.data
        fail = (self.score_index < self.fail_slots).astype(float)
        cells = d.n_models * d.n_criteria
        cell = d.rating_model().astype(np.int64) * d.n_criteria + d.rating_criterion
        unit = d.rating_answer if self.settings.cluster == "answer" else d.rating_rater
        n_units = d.n_answers if self.settings.cluster == "answer" else d.n_raters
        key = unit.astype(np.int64) * cells + cell
        size = n_units * cells
        ns = np.bincount(key, minlength=size).reshape(n_units, cells)
        sums = np.bincount(key, weights=d.rating_score, minlength=size).reshape(n_units, cells)
        fsum = np.bincount(key, weights=fail, minlength=size).reshape(n_units, cells)
        if self.settings.cluster == "answer":
            return self._by_model(sums, fsum, ns, B, rng)
        reps = cluster_bootstrap_ratio(np.hstack([sums, fsum]), np.hstack([ns, ns]), B, rng)
        shape = (B, d.n_models, d.n_criteria)
        return reps[:, :cells].reshape(shape), reps[:, cells:].reshape(shape)

    def _by_model(self, sums, fsum, ns, B, rng):
        d = self.data
        means = np.full((B, d.n_models, d.n_criteria), np.nan)
        fails = np.full_like(means, np.nan)
        for m in range(d.n_models):
            rows = np.flatnonzero(d.answer_model == m)
            cols = slice(m * d.n_criteria, (m + 1) * d.n_criteria)
            if rows.size == 0:
                continue
            both = cluster_bootstrap_ratio(np.hstack([sums[rows, cols], fsum[rows, cols]]),
                                           np.hstack([ns[rows, cols], ns[rows, cols]]), B, rng)
            means[:, m], fails[:, m] = both[:, : d.n_criteria], both[:, d.n_criteria:]
        return means, fails

    @cached_property
    def rating_cells(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Per rating its (rater, case) cell, and per cell its rater and case
        codes. A rater who scores two answers to one case (a pairwise
        review) puts both in the same cell."""
        d = self.data
        n_cases = int(d.answer_case.max()) + 1 if d.n_answers else 1
        starts = self._pair_runs  # a run's ratings share their cell
        key = d.rating_rater[starts].astype(np.int64) * n_cases
        key += d.answer_case[d.rating_answer[starts]]
        cells, run_cell = unique_codes(key, return_inverse=True)
        del key
        # int32 when it fits: half the memory of the cached per-rating codes.
        run_cell = run_cell.astype(np.int32 if cells.size < 2**31 else np.int64, copy=False)
        cell = np.repeat(run_cell, np.diff(np.append(starts, d.rating_answer.size)))
        return cell, cells // n_cases, cells % n_cases

    def crossed_counts(self, group: np.ndarray, n_groups: int
                       ) -> tuple[np.ndarray, np.ndarray, sp.csr_matrix]:
        """The two-way bootstrap's sufficient statistics for ratings split
        into ``n_groups`` groups (``group`` per rating, negative: left out):
        rater and case codes per (rater, case) cell and ``(cells, n_groups
        * 5)`` score counts."""
        cell, rows, cols = self.rating_cells
        # int32 column codes and cells: the sparse constructor then takes them
        # as they are instead of copying 37.5M int64 pairs at 100x.
        column = group.astype(np.int32 if n_groups * N_SCORES < 2**31 else np.int64)
        column *= N_SCORES
        column += self.score_index
        keep = group >= 0
        if not keep.all():
            cell, column = cell[keep], column[keep]
        stats = sp.csr_matrix((np.ones(column.size), (cell, column)),
                              shape=(rows.size, n_groups * N_SCORES))
        return rows, cols, stats

    @cached_property
    def crossed_cells(self) -> tuple[np.ndarray, np.ndarray, sp.csr_matrix]:
        """The ratings' (rater, case) cells: rater and case codes per cell, and
        ``(cells, models * criteria * 2 * 5)`` score counts, the sufficient
        statistics of the two-way bootstrap, split by whether the rating's
        answer fails Accuracy. The split costs nothing (each rating is still
        one entry) and lets co-failure read its means from the same
        replicates as the model summary instead of a second pass."""
        d = self.data
        group = self._rating_key(d.rating_model(), score=False)
        group *= 2
        group += self.accuracy_failed[d.rating_answer]
        return self.crossed_counts(group, d.n_models * d.n_criteria * 2)

    def _ratio_maps(self, slots: int | None = None) -> tuple[sp.csr_matrix, sp.csr_matrix]:
        """Score counts to (score sums | counts in the lowest ``slots`` scores,
        by default the failing ones) and to (n | n), per (model, criterion)."""
        eye = sp.identity(self.data.n_models * self.data.n_criteria, format="csr")
        slots = self.fail_slots if slots is None else slots
        fail_values = (np.arange(N_SCORES) < slots).astype(float)
        ones = sp.kron(eye, np.ones((N_SCORES, 1)))
        num = sp.hstack([sp.kron(eye, SCORES[:, None]), sp.kron(eye, fail_values[:, None])])
        den = sp.hstack([ones, ones])
        # Both halves of the Accuracy split count for the model's means.
        merge = sp.kron(eye, sp.kron(np.ones((2, 1)), sp.identity(N_SCORES))).tocsr()
        return (merge @ num).tocsr(), (merge @ den).tocsr()

    def _ratio_variance(self, slots: int) -> CrossedVariance:
        """Two-way variances of (mean | share of the lowest ``slots`` scores),
        flattened over (model, criterion)."""
        half = self.data.n_models * self.data.n_criteria
        share = 1 if slots == self.fail_slots else 2
        pick = np.r_[0:half, share * half:(share + 1) * half]
        return CrossedVariance(*(field[pick] for field in self._rating_variances))

    @cached_property
    def _rating_variances(self) -> CrossedVariance:
        """Two-way variances of (mean | Fail% share | severe% share) per
        (model, criterion), in passes over the entries of the cells' counts
        (a cells x statistics influence matrix would not fit at 100x)."""
        d = self.data
        rows, cols, stats = self.crossed_cells
        score = np.tile(np.arange(N_SCORES), stats.shape[1] // N_SCORES)
        groups = np.arange(stats.shape[1]) // (2 * N_SCORES)  # both Accuracy splits
        values = np.vstack([SCORES[score], score < self.fail_slots, score < 1])
        return grouped_ratio_variance(rows, cols, stats, values, groups,
                                      d.n_models * d.n_criteria)

    @cached_property
    def twoway_totals(self) -> np.ndarray:
        """``(B, P)`` pigeonhole replicates of the totals of
        :attr:`crossed_cells`, drawn once (purpose ``ratings``) for every
        ratio mean read from them."""
        rows, cols, stats = self.crossed_cells
        return pigeonhole_totals(rows, cols, stats, self.settings.bootstrap,
                                 self.rng("ratings"))

    def twoway_ratio_replicates(self, num_map, den_map, contrasts=None) -> np.ndarray:
        """Two-way replicates ``(B, G [+ H])`` of ratio means of
        :attr:`crossed_cells` columns (see
        :func:`clinieval.stats.crossed_ratio_replicates`); NaN when there are
        too few clusters to resample."""
        rows, cols, stats = self.crossed_cells
        reps, _ = crossed_ratio_replicates(self.twoway_totals, rows, cols, stats, num_map,
                                           den_map, self.settings.level, contrasts)
        return self._unless_too_few_clusters((reps,))[0]

    def answer_mean_ci(self, values: np.ndarray, criteria: list[int]):
        """Per model and criterion: answers with a value ``n``, the mean of
        the per-answer ``values`` ``(answers, len(criteria))`` (NaN: no
        value) and its interval, each ``(models, len(criteria))``. Two-way:
        the two-way variance with each answer carried by its case and by each
        of its raters on that criterion, t-adjusted; otherwise answers are
        independent units (normal interval over answers)."""
        d, level = self.data, self.settings.level
        width = len(criteria)
        groups = (d.answer_model.astype(np.int64)[:, None] * width + np.arange(width)).ravel()
        values, shape = values.ravel(), (d.n_models, width)
        ok = np.isfinite(values)
        if self.settings.cluster != "twoway":
            found = group_mean_ci(groups[ok], values[ok], d.n_models * width, level)
            return tuple(x.reshape(shape) for x in found)
        n = np.bincount(groups[ok], minlength=d.n_models * width)
        with np.errstate(invalid="ignore", divide="ignore"):
            mean = np.bincount(groups[ok], weights=values[ok], minlength=n.size) / n
        var = crossed_unit_variance(values, groups, n.size, np.repeat(d.answer_case, width),
                                    *self._unit_pieces(criteria))
        se = np.where(n >= 2, np.sqrt(var.twoway), np.nan) * t_over_z(var.clusters, level)
        return tuple(x.reshape(shape) for x in (n, mean, *normal_ci(mean, se, level)))

    @property
    def answer_mean_design(self) -> str:
        """How :meth:`answer_mean_ci` builds its intervals, in words."""
        if self.settings.cluster == "twoway":
            return ("two-way (raters x cases) cluster-robust variance over answers, each answer"
                    " carried by its case and its raters, t-adjusted")
        return "normal over answers as independent units"

    def _unit_pieces(self, criteria: list[int]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Per rating of an analysed criterion: its unit (answer * len +
        position of the criterion in ``criteria``), rater and (rater, case)
        cell. A rater rates a criterion of an answer once, so each rating is
        one (unit, rater) piece."""
        d, width = self.data, len(criteria)
        position = np.full(d.n_criteria, -1, dtype=np.int16)
        position[criteria] = np.arange(width)
        where = position[d.rating_criterion]
        on = where >= 0
        if on.all():  # every rating counts: no masked copies of the per-rating codes
            unit = d.rating_answer.astype(np.int64)
            unit *= width
            unit += where
            return unit, d.rating_rater, self.rating_cells[0]
        unit = d.rating_answer[on].astype(np.int64) * width + where[on]
        return unit, d.rating_rater[on], self.rating_cells[0][on]
