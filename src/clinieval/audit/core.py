"""Sufficient statistics shared by the analyses, computed once per audit.

Scores take five values, so everything about ratings reduces to count
arrays: per (model, criterion) and per (answer, criterion). Votes reduce to
distinct (model A, model B, outcome) cells.
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass
from functools import cached_property

import numpy as np
import scipy.sparse as sp

from clinieval import tables
from clinieval.audit.data import N_SCORES, AuditData
from clinieval.audit.settings import AuditSettings
from clinieval.stats import (
    CrossedVariance,
    bootstrap_mean_counts,
    cluster_bootstrap_ratio,
    crossed_ratio_replicates,
    crossed_share_variance,
    crossed_unit_variance,
    design_effect,
    group_mean_ci,
    grouped_ratio_variance,
    normal_ci,
    percentile_ci,
    pigeonhole_totals,
    t_over_z,
    unique_codes,
    wilson_ci,
    wilson_design_ci,
    within_item_std,
)

SCORES = np.asarray(tables.SCORES, dtype=float)
"""The value of each score code (code = index in ``tables.SCORES``)."""
DESIGNS = {"none": "rating-level, as in the MOOVE paper",
           "answer": "whole answers resampled",
           "rater": "whole raters resampled",
           "twoway": "two-way: raters and cases resampled together; Fail%, severe% and"
                     " Dangerous% by Wilson on the two-way design-effect-adjusted n"}


def score_sum(counts: np.ndarray, stop: int = N_SCORES, dtype=np.int64) -> np.ndarray:
    """``counts[..., :stop].sum(axis=-1)`` in ``dtype``, by adding the score
    slices (numpy's sum along a five-long axis is several times slower)."""
    total = counts[..., 0].astype(dtype)
    for slot in range(1, stop):
        total += counts[..., slot]
    return total


@dataclass
class Context:
    data: AuditData
    settings: AuditSettings

    def rng(self, purpose: str) -> np.random.Generator:
        """A generator per purpose, so a section's numbers do not depend on
        which other sections ran or in what order."""
        return np.random.default_rng([self.settings.seed, zlib.crc32(purpose.encode())])

    def ci(self, replicates: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        return percentile_ci(replicates, self.settings.level)

    @property
    def design(self) -> str:
        """The bootstrap design in words, for legends and captions."""
        return DESIGNS[self.settings.cluster]

    # --- criteria ---------------------------------------------------------

    @cached_property
    def criteria(self) -> list[int]:
        """Indices of the analysed criteria, in rubric order: by default every
        criterion that has ratings."""
        chosen = self.settings.criteria
        if chosen is None:
            rated = np.bincount(self.data.rating_criterion, minlength=self.data.n_criteria)
            return [c for c in range(self.data.n_criteria) if rated[c] > 0]
        unknown = [c for c in chosen if c not in self.data.criteria]
        if unknown:
            from clinieval.errors import ClinievalError

            raise ClinievalError(f"--criteria names unknown criteria {unknown};"
                                 f" the snapshot has {self.data.criteria}")
        return [self.data.criteria.index(c) for c in chosen]

    @cached_property
    def safety(self) -> list[int]:
        return [c for c in self.criteria if self.data.safety_critical[c]]

    def name(self, criterion: int) -> str:
        return self.data.criterion_names[criterion]

    # --- rating counts ----------------------------------------------------

    @cached_property
    def score_index(self) -> np.ndarray:
        """Per rating its score code 0..4 (int8: one byte per rating at 100x)."""
        return (self.data.rating_score - tables.SCORE_MIN).astype(np.int8)

    def _rating_key(self, unit: np.ndarray, criterion: bool = True, score: bool = True
                    ) -> np.ndarray:
        """``(unit * criteria + criterion) * 5 + score code`` per rating, int64,
        built in place: one array of the ratings' length, not one per step."""
        d = self.data
        key = unit.astype(np.int64)
        if criterion:
            key *= d.n_criteria
            key += d.rating_criterion
        if score:
            key *= N_SCORES
            key += self.score_index
        return key

    @cached_property
    def model_counts(self) -> np.ndarray:
        """(models, criteria, 5) rating counts per score value."""
        d = self.data
        key = self._rating_key(d.rating_model())
        flat = np.bincount(key, minlength=d.n_models * d.n_criteria * N_SCORES)
        return flat.reshape(d.n_models, d.n_criteria, N_SCORES)

    @cached_property
    def answer_counts(self) -> np.ndarray:
        """(answers, criteria, 5) rating counts per score value (int32)."""
        d = self.data
        key = self._rating_key(d.rating_answer)
        size = d.n_answers * d.n_criteria * N_SCORES
        return np.bincount(key, minlength=size).astype(np.int32).reshape(
            d.n_answers, d.n_criteria, N_SCORES)

    @cached_property
    def model_n(self) -> np.ndarray:
        """(models, criteria) number of ratings."""
        return self.model_counts.sum(axis=2)

    @cached_property
    def model_mean(self) -> np.ndarray:
        """(models, criteria) mean score, NaN when unrated."""
        with np.errstate(invalid="ignore", divide="ignore"):
            return np.where(self.model_n > 0, (self.model_counts @ SCORES) / self.model_n, np.nan)

    @cached_property
    def model_fail_pct(self) -> np.ndarray:
        """(models, criteria) Fail % of ratings: share of ratings <= tau, in
        percent, NaN when unrated."""
        low = self.model_counts[:, :, : self.fail_slots].sum(axis=2)
        with np.errstate(invalid="ignore", divide="ignore"):
            return np.where(self.model_n > 0, 100 * low / self.model_n, np.nan)

    @property
    def fail_slots(self) -> int:
        """How many of the five score values count as failure (score <= tau)."""
        return self.settings.threshold - tables.SCORE_MIN + 1

    @property
    def answer_n(self) -> np.ndarray:
        """(answers, criteria) number of ratings (int32, as the counts; not
        kept: 50 MB at 100x)."""
        return score_sum(self.answer_counts, dtype=np.int32)

    @cached_property
    def answer_fail(self) -> np.ndarray:
        """(answers, criteria) 1.0 failed / 0.0 passed / NaN unrated, by the response rule."""
        counts = self.answer_counts
        n = self.answer_n
        low = score_sum(counts, self.fail_slots)
        rule = self.settings.response_rule
        if rule == "any":
            failed = low > 0
        elif rule == "majority":
            failed = 2 * low > n
        else:
            failed = (counts @ SCORES) <= self.settings.threshold * n
        return np.where(n > 0, failed.astype(float), np.nan)

    @cached_property
    def answer_mean(self) -> np.ndarray:
        """(answers, criteria) mean score, NaN when unrated."""
        counts = self.answer_counts
        n = self.answer_n
        with np.errstate(invalid="ignore", divide="ignore"):
            return np.where(n > 0, (counts @ SCORES) / n, np.nan)

    @cached_property
    def answer_std(self) -> np.ndarray:
        """(answers, criteria) sample SD of the scores, NaN below two ratings."""
        return within_item_std(self.answer_counts, SCORES)

    @cached_property
    def answer_dangerous(self) -> np.ndarray:
        """Per answer: 1.0 when any safety-critical criterion failed, NaN when
        none was rated."""
        if not self.safety:
            return np.full(self.data.n_answers, np.nan)
        fails = self.answer_fail[:, self.safety]
        rated = ~np.isnan(fails).all(axis=1)
        return np.where(rated, np.nan_to_num(fails).max(axis=1), np.nan)

    def rate_by(self, flags: np.ndarray, groups: np.ndarray, n_groups: int
                ) -> tuple[np.ndarray, np.ndarray]:
        """Per group: how many answers have the flag (k) among those rated (n).
        ``flags`` is per answer, 1.0 / 0.0 / NaN for unrated."""
        rated = ~np.isnan(flags)
        n = np.bincount(groups[rated], minlength=n_groups)
        k = np.bincount(groups[rated], weights=flags[rated], minlength=n_groups)
        return k, n

    # --- bootstraps of rating means and fail rates --------------------------

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

    @cached_property
    def answer_raters(self) -> tuple[np.ndarray, np.ndarray]:
        """Distinct (answer, rater) pairs among the ratings."""
        d = self.data
        starts = self._pair_runs
        pairs = unique_codes(d.rating_answer[starts].astype(np.int64) * max(d.n_raters, 1)
                             + d.rating_rater[starts])
        return pairs // max(d.n_raters, 1), pairs % max(d.n_raters, 1)

    @property
    def _pair_runs(self) -> np.ndarray:
        """Where each run of consecutive ratings of one (answer, rater) pair
        starts. A bundle stores an answer's ratings by one rater together (one
        per criterion), so per-pair codes are found over the runs (4 M at
        100x) instead of the ratings (37.5 M) and repeated over each run."""
        d = self.data
        change = np.empty(d.rating_answer.size, dtype=bool)
        change[:1] = True
        np.not_equal(d.rating_answer[1:], d.rating_answer[:-1], out=change[1:])
        change[1:] |= d.rating_rater[1:] != d.rating_rater[:-1]
        return np.flatnonzero(change)

    @cached_property
    def answer_rater_cells(self) -> np.ndarray:
        """Per distinct (answer, rater) pair its (rater, case) cell, coded
        once for every share's two-way variance."""
        answers, raters = self.answer_raters
        case = self.data.answer_case[answers].astype(np.int64)
        return unique_codes(raters * (int(case.max()) + 1) + case, return_inverse=True)[1] \
            if case.size else np.zeros(0, dtype=np.int64)

    # --- the two-way (raters x cases) design --------------------------------

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
    def accuracy_failed(self) -> np.ndarray:
        """Per answer: whether it fails Accuracy by the response rule (all
        False when Accuracy is not analysed). Co-failure conditions on it."""
        acc = self.data.criterion_index("accuracy")
        if acc is None or acc not in self.criteria:
            return np.zeros(self.data.n_answers, dtype=bool)
        return self.answer_fail[:, acc] == 1

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

    # --- votes --------------------------------------------------------------

    @cached_property
    def vote_models(self) -> tuple[np.ndarray, np.ndarray]:
        d = self.data
        return d.answer_model[d.pref_a], d.answer_model[d.pref_b]

    @cached_property
    def bt_votes(self) -> np.ndarray:
        """Mask of votes usable for Bradley-Terry (two different models)."""
        a, b = self.vote_models
        return a != b
