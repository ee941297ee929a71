"""Judge-calibrated means: prediction-powered inference under a crossed design.

A judge's prediction ``f`` on every answer corrects the clinicians' mean on
the few answers they rated. With ``L`` the clinician-rated (labelled)
answers and ``U`` the others, prediction-powered inference with power
tuning (PPI++: Angelopoulos, Duchi & Zrnic, 2023, arXiv:2311.01453; PPI:
Angelopoulos, Bates, Fannjiang, Jordan & Zrnic, Science 382:669, 2023)
estimates the clinicians' mean by::

    theta(lam) = lam * mean_U(f) + mean_L(y - lam * f)

which is unbiased for every ``lam``; ``lam = 0`` is the clinicians alone.
``lam`` is tuned to minimise the variance,
``lam = Cov(mean_L y, mean_L f) / (Var(f) (1/n + 1/N))`` (for ``n`` labelled
and ``N`` unlabelled answers), clipped to ``[0, 1]``: a useless judge gets
``lam`` near 0, so the estimate is never much worse than clinicians alone.
With one labelled unit per answer and uniform sampling this is exactly
``ppi_py``'s ``ppi_mean_pointestimate`` / ``ppi_mean_ci`` (``lam=None``).

**Non-uniform sampling.** When answers were chosen for clinicians with known
probabilities ``pi`` (active inference: Zrnic & Candes, 2024, ICML,
arXiv:2403.03208), the labelled means are weighted by ``1 / pi`` and the
unlabelled mean by ``1 / (1 - pi)`` (the probability of being left to the
judge), both Hajek-normalised: each mean then estimates the mean over all
answers, so the estimator stays unbiased. Constant ``pi`` gives constant
weights and exactly PPI++. (Zrnic & Candes average ``f`` over all answers;
for uniform ``pi`` that is the same estimator with ``lam`` rescaled by
``1 - pi``.) Where the unrated answers' probabilities are unknown (NaN: a
targeted study records a probability on each lease, so only for the
answers it handed out), ``mean_U(f)`` becomes the unweighted mean of ``f``
over every answer, Zrnic & Candes's form, which needs none; the bootstrap
still resamples it on its own, which leaves out its covariance with the
labelled means (zero at the variance-optimal ``lam``).

**Ratings are crossed.** Each labelled answer is rated by a few clinicians
and each clinician rates many answers, so rater leniency is shared across
answers: the judge removes answer-level variance but not that one, and a
plug-in (iid) interval then under-covers. The honest interval is the
two-way (rater x answer) cluster bootstrap of the whole estimator, ``lam``
re-tuned in every replicate: the pigeonhole bootstrap (McCullagh, 2000;
Owen, 2007) draws raters and labelled answers with replacement
(:func:`clinieval.stats.pigeonhole_weights`), a rating entering with weight
``U[rater] * V[answer]``, and the unlabelled answers are resampled on their
own (the two samples are independent, as in PPI). As in
:mod:`clinieval.stats.crossed`, the pigeonhole is conservative, so each
replicate's deviation is scaled by ``sqrt(two-way / pigeonhole variance)``
of the estimator's linearisation (two-way cluster-robust variance: Cameron,
Gelbach & Miller, 2011) and by the t over normal quantile with
Satterthwaite degrees of freedom (few raters, or a few flagged answers,
carrying the variance give few). The interval is normal with the scaled
replicates' spread, centred on the estimate less the replicates' mean
offset (the O(1/n) bias of tuning ``lam`` on the same answers; a
percentile interval would double it rather than remove it). For a share
(Fail %, dangerous answers %: ``bounds=(0, 1)``) that interval is formed
on the logit scale and mapped back (:func:`_logit_interval`), so that it
leans away from 0 as a small share's sampling distribution does.

**Many cells, one draw.** An audit estimates hundreds of cells (model x
criterion x measure, model x specialty) from the same ratings.
:func:`calibrated_cells` gives them all one pigeonhole draw of the raters
and answers of those ratings (:func:`crossed_draw`): restricted to a cell
it is that cell's pigeonhole bootstrap with a random number of answers,
and the scaling to the two-way variance uses the draw's sizes. Every
labelled sum is additive over answers, so each (model, specialty) leaf's
replicates are summed once and a model's are its specialties' added up.
:func:`calibrated_measures` does that for several measures at once: where
they label the same answers with the same raters (a criterion's mean, Fail %
and failing answers), one pass over the answers serves them all.

The estimand is what the clinicians would report over all the answers: the
mean of ratings (:func:`calibrated_rating_mean`, e.g. mean score, or Fail %
with ``rating_value = score <= tau``) or the mean over answers of a
per-answer value (:func:`calibrated_answer_mean`: an answer's mean score
over its clinicians, or a fail flag under a response rule). For a rule's
flag, which depends on all of an answer's raters at once, each rater
carries the answer's whole influence in the two-way variance (as in
:func:`clinieval.stats.crossed_share_variance`), and the variance is
corrected for centring the influences at the estimate (:func:`_centring`),
which a rater's sum over many answers feels strongly.
"""

from __future__ import annotations

from typing import Literal, NamedTuple

import numpy as np
import scipy.sparse as sp

from clinieval.stats._dist import norm_ppf
from clinieval.stats.bootstrap import resample_counts, unit_counts
from clinieval.stats.crossed.design import t_over_z

Reason = Literal["all_unparsed", "no_overlap", "too_few_labelled", "constant_judge",
                 "constant_clinicians", "single_clinician", "no_unlabelled"]

REASONS: dict[str, str] = {
    "all_unparsed": "every judgment is unparsed",
    "no_overlap": "no answer has both a parsed judgment and a clinician rating",
    "too_few_labelled": "fewer doubly-rated answers than the minimum",
    "constant_judge": "the judge gives the same prediction on every answer",
    "constant_clinicians": "the clinicians' values are all equal on the doubly-rated answers "
                           "(e.g. no fail): a resampling interval would have no width",
    "single_clinician": "one clinician only: rater variance cannot be estimated",
    "no_unlabelled": "every judged answer is clinician-rated: the judge adds nothing",
}


class PPIMean(NamedTuple):
    """PPI++ mean with its plug-in (iid) normal interval."""

    estimate: float
    lam: float
    se: float
    lower: float
    upper: float


class CalibratedMean(NamedTuple):
    """A judge-calibrated mean beside the clinicians-alone one."""

    estimate: float
    lower: float  # two-way bootstrap of the whole estimator, lam re-tuned per replicate
    upper: float
    iid_lower: float  # plug-in normal interval assuming independent units (reference only)
    iid_upper: float
    lam: float
    clinicians: float  # clinicians alone (lam = 0, inverse-probability weighted)
    clinicians_lower: float  # same bootstrap and calibration
    clinicians_upper: float
    gain: float  # (width alone / width calibrated) ** 2
    effective_n: float  # n_labelled * gain: clinician-rated answers the estimate is worth
    effective_ratings: float  # n_ratings * gain
    rho: float  # answer-level correlation of prediction and clinicians' value
    bound: float  # 1 / (1 - rho**2 N / (N + n)): the iid gain theory allows
    design_bound: float  # the same with the rater variance the judge cannot remove
    answer_gain: float  # the same by answer-clustered variances, where the bound applies
    n_labelled: int  # doubly-rated answers used
    n_ratings: int
    n_raters: int
    n_unlabelled: int  # judged answers without a clinician rating
    n_unparsed: int  # answers whose judgment is unparsed (excluded, never imputed)
    B: int


class NoEstimate(NamedTuple):
    """Why a cell has no calibrated estimate, with the counts that say so."""

    reason: Reason
    message: str
    n_labelled: int
    n_raters: int
    n_unlabelled: int
    n_unparsed: int


class _Pieces(NamedTuple):
    """Labelled data as pieces (one per rating) of labelled answers."""

    answer: np.ndarray  # piece -> labelled answer 0..n-1
    rater: np.ndarray  # piece -> rater 0..R-1
    value: np.ndarray  # the piece's clinician value
    weight: np.ndarray  # piece weight times the answer's inverse-probability weight
    whole: bool  # the two-way variance gives each rater the answer's whole influence
    f: np.ndarray  # (n,) prediction per labelled answer
    v: np.ndarray  # (n,) answer weights (mean 1) for the pooled variance of f
    u: np.ndarray  # (N,) unlabelled answers' weights (mean 1)
    fu: np.ndarray  # (N,) unlabelled predictions
    per_rating: bool  # iid units are ratings (else answers)


def ppi_mean(y, yhat, yhat_unlabelled, *, lam: float | None = None, weights=None,
             weights_unlabelled=None, level: float = 0.95) -> PPIMean:
    """PPI++ estimate of a mean from independent labelled units ``(y, yhat)``
    and unlabelled predictions, with the plug-in normal interval
    (Angelopoulos, Duchi & Zrnic, 2023, eqs. for the mean). ``lam=None``
    tunes ``lam`` (clipped to ``[0, 1]``); ``weights`` are inverse inclusion
    probabilities (Hajek-normalised). The reference the crossed estimators
    reduce to; equal to ``ppi_py``'s with power tuning."""
    y, f = np.asarray(y, dtype=float), np.asarray(yhat, dtype=float)
    fu = np.asarray(yhat_unlabelled, dtype=float)
    w = _unit_weights(weights, y.size)
    n = y.size
    pieces = _Pieces(np.arange(n), np.zeros(n, dtype=np.int64), y, w, False, f, w,
                     _unit_weights(weights_unlabelled, fu.size), fu, True)
    sums = _observed_sums(pieces)
    theta, lam_hat = _fit(sums, lam)
    se = float(np.sqrt(_iid_variance(pieces, float(lam_hat[0]), theta[0])))
    z = norm_ppf((1 + level) / 2)
    return PPIMean(float(theta[0]), float(lam_hat[0]), se, float(theta[0] - z * se),
                   float(theta[0] + z * se))


def calibrated_rating_mean(prediction, rating_answer, rating_rater, rating_value, *,
                           rng: np.random.Generator, inclusion=None, B: int = 1000,
                           level: float = 0.95, min_labelled: int = 30, bounds=None
                           ) -> CalibratedMean | NoEstimate:
    """Calibrated mean of clinicians' ratings (mean score; Fail % with
    ``rating_value = score <= tau``) over all judged answers.

    ``prediction`` ``(A,)`` is the judge's prediction per answer on the
    ratings' scale (NaN: unparsed, excluded and counted); rating ``k`` is
    of answer ``rating_answer[k]`` (0..A-1) by rater ``rating_rater[k]``.
    ``inclusion`` ``(A,)`` is each answer's probability of having been
    given to clinicians (None: uniform; NaN for an unrated answer:
    unknown, see the module docstring). ``bounds`` ``(low, high)``, if
    given, is the range the clinicians' values can take (``(0, 1)`` for a
    share, the score scale for a mean): PPI++ is linear in the prediction
    and can step outside it, so estimates and bounds are clipped to it.
    See the module docstring.
    """
    return _calibrated(prediction, rating_answer, rating_rater, rating_value, None,
                       inclusion, "rating", B, rng, level, min_labelled, bounds)


def calibrated_answer_mean(prediction, rating_answer, rating_rater, rating_value=None, *,
                           answer_value=None, rng: np.random.Generator, inclusion=None,
                           B: int = 1000, level: float = 0.95, min_labelled: int = 30,
                           bounds=None) -> CalibratedMean | NoEstimate:
    """Calibrated mean over answers of a per-answer clinicians' value: with
    ``rating_value``, the mean of the answer's ratings (e.g. its mean
    score); with ``answer_value`` ``(A,)``, a value per answer (e.g. the fail
    flag of a response rule, NaN where not rated) whose raters are those of
    the ratings. Otherwise as :func:`calibrated_rating_mean`."""
    if (rating_value is None) == (answer_value is None):
        raise ValueError("give exactly one of rating_value and answer_value")
    return _calibrated(prediction, rating_answer, rating_rater, rating_value, answer_value,
                       inclusion, "answer", B, rng, level, min_labelled, bounds)


def _calibrated(prediction, rating_answer, rating_rater, rating_value, answer_value,
                inclusion, per, B, rng, level, min_labelled, bounds
                ) -> CalibratedMean | NoEstimate:
    prepared = _prepare(prediction, rating_answer, rating_rater, rating_value, answer_value,
                        inclusion, per, min_labelled)
    if isinstance(prepared, NoEstimate):
        return prepared
    pieces, n_unparsed = prepared
    sums = _observed_sums(pieces)
    theta, lam = _fit(sums, None)
    theta0, _ = _fit(sums, 0.0)
    reps, reps0 = _bootstrap(pieces, B, rng)
    drawn = (pieces.f.size, int(pieces.rater.max()) + 1)
    ci, ci0, parts = _intervals(pieces, float(lam[0]), theta[0], theta0[0], reps, reps0, level,
                                drawn)
    result = _result(pieces, theta[0], float(lam[0]), theta0[0], ci, ci0, parts, n_unparsed, B,
                     level)
    return result if bounds is None else _clipped(result, *bounds)


class CrossedDraw(NamedTuple):
    """Pigeonhole multiplicities of the raters and answers of one set of
    ratings, one column per replicate, shared by every cell drawn from it
    (:func:`calibrated_cells`)."""

    raters: np.ndarray  # sorted rater ids
    answers: np.ndarray  # sorted answer ids
    U: np.ndarray  # (raters, B) float
    V: np.ndarray  # (answers, B) integer counts


def crossed_draw(rating_answer, rating_rater, B: int, rng: np.random.Generator) -> CrossedDraw:
    """One pigeonhole draw (raters, then answers, each with replacement)
    over the distinct raters and answers of the ratings."""
    raters, answers = np.unique(rating_rater), np.unique(rating_answer)
    U = _multiplicities(raters.size, B, rng).astype(float)
    return CrossedDraw(raters, answers, U, _multiplicities(answers.size, B, rng))


def _multiplicities(n: int, B: int, rng: np.random.Generator) -> np.ndarray:
    """``(n, B)`` counts: each replicate draws ``n`` of ``n`` units with
    replacement (:func:`clinieval.stats.bootstrap.unit_counts`), laid out by
    unit and in 8-bit integers, widened only if a count ever passes 255 (at
    100x, 1.4 M answers by 1,000 replicates: 1.4 GB, where 64-bit counts
    took 11 GB and ended the audit)."""
    return unit_counts(n, B, rng, np.uint8, by_unit=True)


class CellMeasure(NamedTuple):
    """One measure of many cells for :func:`calibrated_measures`: the judge's
    ``prediction`` ``(A,)``, its ratings (answer, rater and ``rating_value``,
    or a per-answer ``answer_value``), each answer's ``leaf`` (``-1``: none),
    the ``cells`` (lists of leaves), the generator of its unlabelled
    resamples, the inclusion probabilities and the clipping ``bounds``, as
    :func:`calibrated_cells` takes them."""

    prediction: np.ndarray
    rating_answer: np.ndarray
    rating_rater: np.ndarray
    rating_value: np.ndarray | None
    answer_value: np.ndarray | None
    leaf: np.ndarray
    cells: list
    rng: np.random.Generator
    inclusion: np.ndarray | None = None
    bounds: tuple[float, float] | None = None


def calibrated_cells(prediction, rating_answer, rating_rater, rating_value=None, *,
                     answer_value=None, leaf, cells, draw: CrossedDraw,
                     rng: np.random.Generator, inclusion=None, level: float = 0.95,
                     min_labelled: int = 30, bounds=None) -> list[CalibratedMean | NoEstimate]:
    """Calibrated means of many cells of one set of ratings with one shared
    two-way draw: :func:`calibrated_rating_mean` (with ``rating_value``) or
    :func:`calibrated_answer_mean` (with ``answer_value``) of every cell.

    ``leaf`` ``(A,)`` puts each answer in one leaf (``-1``: none); a cell is
    a list of leaves, so cells may nest (a model and its specialties). Every
    labelled answer's weighted sums are additive over answers, so each leaf's
    replicates are summed once and a cell's are the sum over its leaves.
    ``draw`` (:func:`crossed_draw` of these ratings) gives every cell the
    same rater and answer multiplicities; restricted to a cell they are the
    pigeonhole bootstrap of that cell with a random number of answers, and
    each interval's scaling to the two-way variance uses the draw's sizes.
    The unlabelled answers are resampled per cell with ``rng``. Point
    estimates are exactly those of the one-cell functions."""
    measure = CellMeasure(prediction, rating_answer, rating_rater, rating_value, answer_value,
                          leaf, cells, rng, inclusion, bounds)
    return calibrated_measures([measure], draw=draw, level=level, min_labelled=min_labelled)[0]


def calibrated_measures(measures, *, draw: CrossedDraw, level: float = 0.95,
                        min_labelled: int = 30) -> list[list[CalibratedMean | NoEstimate]]:
    """:func:`calibrated_cells` of several measures (:class:`CellMeasure`)
    sharing one draw, each measure's cells in its order. The measures'
    replicate sums are found together: where two measures label the same
    answers with the same raters (a criterion's mean score, Fail % and
    answers failing %, and any-safety's failing answers, when every
    clinician scores every criterion), the answers' weight totals under the
    rater multiplicities and their products with the answer multiplicities
    are formed once for all of them, and a per-answer measure's sums are
    those totals scaled by each answer's share of its ratings. The results
    are those of :func:`calibrated_cells` of each measure alone, to the
    float32 rounding of the block sums."""
    B, drawn = draw.V.shape[1], (draw.answers.size, draw.raters.size)
    staged = [_stage(m, min_labelled, B, drawn) for m in measures]
    needed = np.unique(np.concatenate([np.zeros(0, dtype=np.int64)] + [
        c.chosen for s in staged for c in s.cells if isinstance(c, _Ready)]))
    sinks = [_Sink(s, needed, level, B) for s in staged]
    _measures_leaves(needed, staged, draw, sinks)
    if any(r is None for sink in sinks for r in sink.results):
        raise ValueError("the draw does not cover every labelled answer of the cell")
    return [sink.results for sink in sinks]


class _Staged(NamedTuple):
    """A measure's ratings sorted by answer, and its cells prepared."""

    per: str  # "rating" or "answer"
    f_all: np.ndarray
    leaf: np.ndarray
    answer: np.ndarray  # sorted
    rater: np.ndarray
    value: np.ndarray  # per sorted rating (a per-answer value at its ratings)
    starts: np.ndarray  # where each answer's ratings start (A + 1)
    pi_all: np.ndarray | None
    cells: list  # per cell a NoEstimate or a _Ready
    bounds: tuple[float, float] | None


def _stage(m: CellMeasure, min_labelled: int, B: int, drawn) -> _Staged:
    if (m.rating_value is None) == (m.answer_value is None):
        raise ValueError("give exactly one of rating_value and answer_value")
    per = "rating" if m.rating_value is not None else "answer"
    f_all = np.asarray(m.prediction, dtype=float)
    leaf = np.asarray(m.leaf, dtype=np.int64)
    answer, rater = np.asarray(m.rating_answer, dtype=np.int64), np.asarray(m.rating_rater)
    value = None if per == "answer" else np.asarray(m.rating_value, dtype=float)
    if np.any(answer[1:] < answer[:-1]):  # (the audit's ratings come sorted: no copies)
        order = np.argsort(answer, kind="stable")
        answer, rater = answer[order], rater[order]
        value = None if value is None else value[order]
    answer_value = None if per == "rating" else np.asarray(m.answer_value, dtype=float)
    value = answer_value[answer] if value is None else value
    pi_all = None if m.inclusion is None else np.asarray(m.inclusion, dtype=float)
    # answers by leaf once: a cell's answers are its leaves' runs, not a scan per cell
    by_leaf = np.argsort(leaf, kind="stable")
    leaf_codes, first, size = np.unique(leaf[by_leaf], return_index=True, return_counts=True)
    starts = np.searchsorted(answer, np.arange(f_all.size + 1))  # each answer's first rating
    # (a leaf's answers are sorted: the argsort is stable)
    few = _few_labelled(leaf_codes, leaf, lambda k: by_leaf[first[k]:first[k] + size[k]],
                        f_all, answer, rater, value, min_labelled, starts)
    prepared_cells = []
    for chosen in m.cells:
        chosen = np.unique(np.asarray(chosen, dtype=np.int64))
        chosen = chosen[chosen >= 0]  # (-1: in no cell)
        at = np.searchsorted(leaf_codes, chosen)
        at = at[(at < leaf_codes.size) & (leaf_codes[np.minimum(at, leaf_codes.size - 1)]
                                          == chosen)]
        short = few(at)
        if short is not None:
            prepared_cells.append(short)
            continue
        members = np.sort(np.concatenate([np.zeros(0, dtype=np.int64)] + [
            by_leaf[first[k]:first[k] + size[k]] for k in at.tolist()]))
        code, index = _gather(answer, members, starts)
        prepared = _prepare(
            f_all[members], code, rater[index], value[index] if per == "rating" else None,
            None if per == "rating" else answer_value[members],
            None if pi_all is None else pi_all[members], per, min_labelled)
        prepared_cells.append(prepared if isinstance(prepared, NoEstimate) else _ready(
            len(prepared_cells), chosen, *prepared, B, m.rng, drawn))
    return _Staged(per, f_all, leaf, answer, rater, value, starts, pi_all, prepared_cells,
                   m.bounds)


def _few_labelled(leaf_codes, leaf, members_of, f_all, answer, rater, value, min_labelled,
                  starts):
    """A function of a cell (its leaves' positions in ``leaf_codes``)
    giving the :class:`NoEstimate` that :func:`_prepare` would for a cell
    with no parsed prediction, no doubly-rated answer or fewer than
    ``min_labelled``, from counts per leaf made once (most of an audit's
    specialty cells are such, and preparing each took as long as a cell
    with an estimate), or None to prepare the cell; ``members_of(k)`` is
    leaf ``k``'s answers. A cell of several leaves with too few answers is
    prepared too: its clinicians are not the sum of its leaves'. A too-few
    cell's clinicians are counted from its own ratings (counting every
    leaf's took 4 s per measure at 100x, where few cells have too few)."""
    where = np.searchsorted(leaf_codes, leaf)  # each answer's leaf
    parsed = np.isfinite(f_all)
    kept = parsed[answer] & np.isfinite(value)
    rated = np.zeros(f_all.size, dtype=bool)
    rated[answer[kept]] = True
    L = leaf_codes.size
    n_parsed, n_labelled, n_unlabelled = (np.bincount(where, x, L) for x in (
        parsed, rated, parsed & ~rated))
    n_unparsed = np.bincount(where, ~parsed, L)

    def few(at) -> NoEstimate | None:
        labelled = int(n_labelled[at].sum())
        n_raters = 0  # (no parsed prediction or no labelled answer: no kept rating)
        if n_parsed[at].sum() == 0:
            reason = "all_unparsed"
        elif labelled == 0:
            reason = "no_overlap"
        elif labelled < min_labelled and at.size == 1:
            reason = "too_few_labelled"
            _, index = _gather(answer, members_of(int(at[0])), starts)
            n_raters = np.unique(rater[index[kept[index]]]).size
        else:
            return None
        return NoEstimate(reason, REASONS[reason], labelled, n_raters,
                          int(n_unlabelled[at].sum()), int(n_unparsed[at].sum()))
    return few


class _Ready(NamedTuple):
    """A cell with an estimate, all but its labelled replicate sums: what
    the estimate needs of its pieces, found when the cell is prepared, so
    that no cell's pieces (a model's every rating) outlive its preparation
    while the pass over the leaves runs (at 100x, seven measures' pieces
    held at once were gigabytes)."""

    slot: int  # its place among the measure's cells
    chosen: np.ndarray
    n_unparsed: int
    shape: _Shape
    theta: float
    lam: float
    theta0: float
    parts: _Parts
    unlabelled: list  # the unlabelled sums per replicate (:func:`_unlabelled_sums`)


def _ready(slot, chosen, p: _Pieces, n_unparsed, B, rng, drawn) -> _Ready:
    """The cell's observed fit, variances and shape, and its unlabelled
    resample drawn from ``rng`` (cells drawn in their order)."""
    sums = _observed_sums(p)
    theta, lam = _fit(sums, None)
    theta0, _ = _fit(sums, 0.0)
    pairs, freq = _distinct_pairs(p.u, p.fu)
    counts = resample_counts(freq, B, rng).astype(float)
    return _Ready(slot, chosen, n_unparsed, _shape(p),
                  float(theta[0]), float(lam[0]), float(theta0[0]),
                  _parts(p, float(lam[0]), theta[0], theta0[0], drawn),
                  _unlabelled_sums(counts, *pairs))


class _Sink:
    """A measure's cells, each finished as soon as the pass over the
    leaves (:func:`_group_sums`) has summed all of its leaves: a cell's
    labelled replicate sums are added up from the blocks it spans (in
    float64), so no leaf's sums outlive its block (at 10x, seven measures'
    sums of a thousand leaves were 0.28 GB of fresh pages, which this
    machine fills at 0.5 GB/s)."""

    def __init__(self, s: _Staged, needed, level: float, B: int) -> None:
        self.staged, self.level, self.B = s, level, B
        self.results: list[CalibratedMean | NoEstimate | None] = [
            c if isinstance(c, NoEstimate) else None for c in s.cells]
        self.open = [c for c in s.cells if isinstance(c, _Ready)]
        self.at = [np.searchsorted(needed, c.chosen) for c in self.open]  # leaves in ``needed``
        self.first = np.array([at.min() for at in self.at], dtype=np.int64)
        self.last = np.array([at.max() for at in self.at], dtype=np.int64)
        self.sums: dict[int, np.ndarray] = {}  # a cell's, from its first block to its last
        self.weight = self.count = None

    def leaves(self, weight, count) -> None:
        """Each leaf's total raw weight and number of labelled answers."""
        self.weight, self.count = weight, count

    def add(self, start: int, stop: int, block) -> None:
        """Leaves ``start:stop``'s sums ``(10, stop - start, B)`` (float32)."""
        for c in np.flatnonzero((self.first < stop) & (self.last >= start)).tolist():
            at = self.at[c]
            at = at[(at >= start) & (at < stop)] - start
            part = (block[:, at[0]].astype(np.float64) if at.size == 1
                    else block[:, at].sum(axis=1, dtype=np.float64))
            if c in self.sums:
                self.sums[c] += part
            else:
                self.sums[c] = part
            if self.last[c] < stop:
                self._finish(c)

    def _finish(self, c: int) -> None:
        r, at = self.open[c], self.at[c]
        labelled = self.sums.pop(c)
        if int(self.count[at].sum()) != r.shape.n:
            raise ValueError("the draw does not cover every labelled answer of the cell")
        labelled[7:10] *= r.shape.n / self.weight[at].sum()  # pooled-variance weights: mean 1
        boot = _Sums(*labelled, *r.unlabelled)
        reps, reps0 = _fit(boot, None)[0], _fit(boot, 0.0)[0]
        ci, ci0 = _parts_intervals(r.parts, r.theta, r.theta0, reps, reps0, self.level)
        result = _result(r.shape, np.float64(r.theta), r.lam, np.float64(r.theta0), ci, ci0,
                         r.parts, r.n_unparsed, self.B, self.level)
        bounds = self.staged.bounds
        self.results[r.slot] = result if bounds is None else _clipped(result, *bounds)


def _gather(sorted_answer, members, starts=None) -> tuple[np.ndarray, np.ndarray]:
    """Of ratings sorted by answer, those of the sorted ``members``: each
    one's position in ``members`` and its index among the ratings.
    ``starts[a]``, if given, is where answer ``a``'s ratings start (``A + 1``
    values): a cell's answers then find theirs without a binary search."""
    if starts is None:
        lo = np.searchsorted(sorted_answer, members, "left")
        count = np.searchsorted(sorted_answer, members, "right") - lo
    else:
        lo = starts[members]
        count = starts[members + 1] - lo
    start = np.cumsum(count) - count
    index = np.arange(count.sum()) - np.repeat(start - lo, count)
    return np.repeat(np.arange(members.size), count), index


def _clipped(result: CalibratedMean, low: float, high: float) -> CalibratedMean:
    """The estimates and interval bounds clipped to ``[low, high]``; for a
    share (``(0, 1)``) the two bootstrap intervals are first formed on the
    logit scale (:func:`_logit_interval`)."""
    if (low, high) == (0, 1):
        lower, upper = _logit_interval(result.lower, result.upper)
        c_lower, c_upper = _logit_interval(result.clinicians_lower, result.clinicians_upper)
        result = result._replace(lower=lower, upper=upper, clinicians_lower=c_lower,
                                 clinicians_upper=c_upper)
    fields = ("estimate", "lower", "upper", "iid_lower", "iid_upper", "clinicians",
              "clinicians_lower", "clinicians_upper")
    return result._replace(**{k: float(np.clip(getattr(result, k), low, high)) for k in fields})


def _logit_interval(lower: float, upper: float) -> tuple[float, float]:
    """A share's normal interval ``centre +- half`` re-formed on the logit
    scale: ``logit(centre) +- half / (centre (1 - centre))`` (the delta
    method) mapped back, as survey statistics do for proportions (R
    survey's ``svyciprop(method = "logit")``; Korn & Graubard, 1998,
    Survey Methodology 24:193). A small share's estimate is skewed to the
    right and its standard error shrinks with it, so the normal interval
    misses mostly from below (4-5% of snapshots against 1-2% from above at
    a 13% Fail % with clinicians on 5% of answers,
    ``benchmarks/coverage_calibrated.py``); the logit interval leans up
    and never leaves (0, 1). A centre outside (0, 1) keeps the normal
    interval (clipped by the caller). Where the normal interval reaches far
    past 0 the logit one is wide above (a centre of 0.001 with half-width
    0.01 reaches 0.96): conservative, and kept, because the normal interval
    there left the 1% rows' dangerous % at 92.4% coverage."""
    centre, half = (lower + upper) / 2, (upper - lower) / 2
    if not (np.isfinite(half) and 0 < centre < 1):
        return lower, upper
    mid, spread = np.log(centre / (1 - centre)), half / (centre * (1 - centre))
    return float(1 / (1 + np.exp(spread - mid))), float(1 / (1 + np.exp(-mid - spread)))


def _prepare(prediction, rating_answer, rating_rater, rating_value, answer_value, inclusion,
             per, min_labelled):
    """Pieces of the labelled data, or the reason there is no estimate."""
    f = np.asarray(prediction, dtype=float)
    answer = np.asarray(rating_answer, dtype=np.int64)
    rater = np.asarray(rating_rater)
    if answer.shape != rater.shape or (rating_value is not None
                                       and np.shape(rating_value) != answer.shape):
        raise ValueError("ratings' answer, rater and value must have the same length")
    if answer.size and (answer.min() < 0 or answer.max() >= f.size):
        raise ValueError("rating_answer must index prediction")
    parsed = np.isfinite(f)
    value = (np.asarray(rating_value, dtype=float) if rating_value is not None
             else np.asarray(answer_value, dtype=float)[answer])
    keep = parsed[answer] & np.isfinite(value)
    rated = np.zeros(f.size, dtype=bool)
    rated[answer[keep]] = True
    n_unparsed = int(np.count_nonzero(~parsed))
    unl = parsed & ~rated
    labelled = np.flatnonzero(rated)
    raters, rater_code = np.unique(rater[keep], return_inverse=True)
    counts = (labelled.size, raters.size, int(np.count_nonzero(unl)), n_unparsed)
    reason = _why_not(parsed, labelled.size, raters.size, f, unl, min_labelled,
                      value[keep])
    if reason is not None:
        return NoEstimate(reason, REASONS[reason], *counts)
    pi = _inclusion(inclusion, f.size, rated, unl)
    code = np.full(f.size, -1, dtype=np.int64)
    code[labelled] = np.arange(labelled.size)
    piece_answer = code[answer[keep]]
    w = 1.0 / pi[labelled]
    w /= w.mean()
    per_answer = np.bincount(piece_answer, minlength=labelled.size)
    piece_weight = w[piece_answer] / (per_answer[piece_answer] if per == "answer" else 1.0)
    if np.isnan(pi[unl]).any():
        # the unrated answers' probabilities are unknown: the judge's mean over
        # every answer, labelled ones included (Zrnic & Candes's form), needs none
        fu = f[parsed]
        u = np.ones(fu.size)
    else:
        fu, u = f[unl], 1.0 / (1.0 - pi[unl])
    pieces = _Pieces(piece_answer, rater_code.ravel(), value[keep], piece_weight,
                     answer_value is not None, f[labelled], w, u / u.mean(), fu,
                     per == "rating")
    return pieces, n_unparsed


def _why_not(parsed, n_labelled, n_raters, f, unl, min_labelled, values) -> Reason | None:
    if not parsed.any():
        return "all_unparsed"
    if n_labelled == 0:
        return "no_overlap"
    if n_labelled < min_labelled:
        return "too_few_labelled"
    if np.ptp(f[parsed]) == 0:
        return "constant_judge"
    if np.ptp(values) == 0:
        return "constant_clinicians"
    if n_raters < 2:
        return "single_clinician"
    if not unl.any():
        return "no_unlabelled"
    return None


def _inclusion(inclusion, size, rated, unl) -> np.ndarray:
    if inclusion is None:
        return np.full(size, 0.5)  # any constant: the weights are normalised
    pi = np.asarray(inclusion, dtype=float)
    if pi.shape != (size,):
        raise ValueError("inclusion must give one probability per answer")
    if not np.all((pi[rated] > 0) & (pi[rated] <= 1)) or not np.all(
            np.isnan(pi[unl]) | ((pi[unl] >= 0) & (pi[unl] < 1))):
        raise ValueError("inclusion probabilities must lie in (0, 1] for rated answers "
                         "and [0, 1) (or NaN: unknown) for the others")
    return pi


def _unit_weights(weights, size) -> np.ndarray:
    if weights is None:
        return np.ones(size)
    w = np.asarray(weights, dtype=float)
    return w / w.mean()


class _Sums(NamedTuple):
    """Weighted sums the estimator is a function of, per replicate ``(B,)``."""

    D: np.ndarray  # sum of labelled weights
    Y: np.ndarray  # sum of weight * value
    F: np.ndarray  # sum of weight * f
    ADF: np.ndarray  # sum over answers of a_i d_i f_i  (a, d: answer totals)
    AD: np.ndarray
    DDF: np.ndarray
    DD: np.ndarray
    V0: np.ndarray  # labelled answers' pooled-variance weights: sum v, v f, v f^2
    V1: np.ndarray
    V2: np.ndarray
    U0: np.ndarray  # unlabelled: sum u, u f, u f^2, u^2
    U1: np.ndarray
    U2: np.ndarray
    UU: np.ndarray


def _answer_sums(a, d, mult, f, v) -> list:
    """Labelled sums from answer totals ``a``, ``d`` ``(n, B)`` and answer
    multiplicities ``mult`` ``(n, B)``: a few products with ``[1, f]``."""
    one_f = np.stack([np.ones_like(f), f])
    md, ma = mult * d, mult * a
    (D, F), (Y, _), (DD, DDF), (AD, ADF) = (one_f @ x for x in (md, ma, md * d, ma * d))
    return [D, Y, F, ADF, AD, DDF, DD, *(np.stack([v, v * f, v * f * f]) @ mult)]


def _unlabelled_sums(counts, u, fu) -> list:
    """Unlabelled sums from multiplicities ``counts`` ``(B, N)`` (or of
    distinct values) with weights ``u`` and predictions ``fu``."""
    return [counts @ u, counts @ (u * fu), counts @ (u * fu * fu), counts @ (u * u)]


def _observed_sums(p: _Pieces) -> _Sums:
    n = p.f.size
    a = np.bincount(p.answer, weights=p.weight * p.value, minlength=n)[:, None]
    d = np.bincount(p.answer, weights=p.weight, minlength=n)[:, None]
    labelled = _answer_sums(a, d, np.ones((n, 1)), p.f, p.v)
    unlabelled = _unlabelled_sums(np.ones((1, p.fu.size)), p.u, p.fu)
    return _Sums(*labelled, *unlabelled)


def _fit(s: _Sums, lam: float | None) -> tuple[np.ndarray, np.ndarray]:
    """Estimates and ``lam`` per replicate; ``lam=None`` tunes it:
    ``Cov(mean_L y, mean_L f) / (Var(f) (q_L + q_U))`` with ``q`` each mean's
    sum of squared normalised weights (``1/n``, ``1/N`` when uniform) and
    ``Var(f)`` pooled over both samples (ddof 1), clipped to ``[0, 1]``."""
    with np.errstate(invalid="ignore", divide="ignore"):
        ybar, fbar, mu = s.Y / s.D, s.F / s.D, s.U1 / s.U0
        if lam is None:
            cov = (s.ADF - fbar * s.AD - ybar * s.DDF + ybar * fbar * s.DD) / s.D**2
            total, first, second = s.V0 + s.U0, s.V1 + s.U1, s.V2 + s.U2
            var_f = (second - first**2 / total) / (total - 1)
            scale = var_f * (s.DD / s.D**2 + s.UU / s.U0**2)
            lam_hat = np.clip(np.where(scale > 0, cov / scale, 0.0), 0.0, 1.0)
        else:
            lam_hat = np.full(s.D.shape, float(lam))
        return lam_hat * mu + ybar - lam_hat * fbar, lam_hat


_BLOCK = 2048  # labelled answers per pass: a pass's (answers x B) arrays stay small


class _Layout(NamedTuple):
    """A measure's labelled answers in leaf order and its kept ratings as
    (answer, rater) cells, each with its number of ratings (and, per
    rating, the sum of their values)."""

    ids: np.ndarray  # labelled answers in leaf order
    group: np.ndarray  # each one's leaf, as a position in ``needed``
    rows: np.ndarray  # each one's row of the draw's answer multiplicities
    w: np.ndarray  # each one's inverse-probability weight (raw)
    f: np.ndarray  # each one's prediction
    flag: np.ndarray | None  # each one's value (per-answer measures)
    cell_row: np.ndarray  # per (answer, rater) cell, sorted: its answer's position
    cell_col: np.ndarray  # and its rater's column of the draw
    n_cell: np.ndarray  # ratings per cell
    v_cell: np.ndarray | None  # the sum of their values (per-rating measures)


def _measures_leaves(needed, staged: list[_Staged], draw: CrossedDraw, sinks: list[_Sink]
                     ) -> None:
    """Each measure's labelled sums per replicate of every leaf in
    ``needed`` (sorted), with the raw inverse-probability weights (the
    estimator does not depend on their scale but through the pooled
    variance, rescaled per cell). Measures whose ratings make the same
    (answer, rater) cells in proportion share one pass (:func:`_scale_on`)."""
    layouts: list[_Layout] = []
    groups: list[list[tuple[int, np.ndarray]]] = []  # (measure, its factor on the first's)
    for j, s in enumerate(staged):
        lay = _layout(s, needed, draw)
        for g in groups:
            k = _scale_on(layouts[g[0][0]], lay)
            if k is not None:
                g.append((j, k))
                # its cells are the first's: only its values stay (at 100x, seven
                # measures' cells of millions of ratings each)
                lay = lay._replace(cell_row=None, cell_col=None, n_cell=None)
                break
        else:
            groups.append([(j, _scale_on(lay, lay))])
        layouts.append(lay)
    for g in groups:
        _group_sums(needed, layouts[g[0][0]], [(layouts[j], k) for j, k in g], draw,
                    [sinks[j] for j, _ in g])


def _layout(s: _Staged, needed, draw: CrossedDraw) -> _Layout:
    members = np.flatnonzero(np.isin(s.leaf, needed))
    code, index = _gather(s.answer, members, s.starts)
    keep = np.isfinite(s.f_all[members])[code] & np.isfinite(s.value[index])
    code, index = code[keep], index[keep]
    labelled, piece = np.unique(code, return_inverse=True)
    piece = piece.ravel()
    ids = members[labelled]
    order = np.argsort(s.leaf[ids], kind="stable")  # answers by leaf
    ids, position = ids[order], np.empty(order.size, dtype=np.int64)
    position[order] = np.arange(order.size)
    piece = position[piece]
    rows = np.searchsorted(draw.answers, ids)
    cols = np.searchsorted(draw.raters, s.rater[index])
    if ids.size and (np.any(rows >= draw.answers.size)
                     or np.any(draw.answers[np.minimum(rows, draw.answers.size - 1)] != ids)
                     or np.any(cols >= draw.raters.size)
                     or np.any(draw.raters[np.minimum(cols, draw.raters.size - 1)]
                               != s.rater[index])):
        raise ValueError("the draw does not cover every labelled answer and rater of the cells")
    R = draw.raters.size
    key, cell = np.unique(piece * R + cols, return_inverse=True)
    cell = cell.ravel()
    value = s.value[index]
    flag = None
    if s.per == "answer":
        flag = np.zeros(ids.size)
        flag[piece] = value
    return _Layout(ids, np.searchsorted(needed, s.leaf[ids]), rows,
                   np.ones(ids.size) if s.pi_all is None else 1.0 / s.pi_all[ids], s.f_all[ids],
                   flag, key // R, key % R, np.bincount(cell, minlength=key.size).astype(float),
                   np.bincount(cell, value, key.size) if s.per == "rating" else None)


def _scale_on(base: _Layout, other: _Layout) -> np.ndarray | None:
    """Per labelled answer, the factor turning ``base``'s weight totals
    under the rater multiplicities into ``other``'s: 1 for a per-rating
    measure with the same ratings per cell; for a per-answer measure (each
    rating weighs one over its answer's ratings) its cells' ratings over
    the answer's, over ``base``'s ratings in the cell, which must be one
    value per answer. None where the two do not label the same answers
    with the same raters in proportion (then each has its own pass)."""
    if not (np.array_equal(base.ids, other.ids) and np.array_equal(base.group, other.group)
            and np.array_equal(base.w, other.w) and np.array_equal(base.cell_row, other.cell_row)
            and np.array_equal(base.cell_col, other.cell_col)):
        return None
    n = base.ids.size
    if other.v_cell is not None:
        return np.ones(n) if np.array_equal(base.n_cell, other.n_cell) else None
    row = base.cell_row
    ratio = other.n_cell / (np.bincount(row, other.n_cell, n)[row] * base.n_cell)
    first = np.zeros(n, dtype=np.int64)
    first[1:] = np.cumsum(np.bincount(row, minlength=n))[:-1]  # every answer has a cell
    k = ratio[first]
    return k if np.array_equal(ratio, k[row]) else None


class _Coefficients:
    """Distinct per-answer coefficient vectors of one base array, each
    registered once under a key (a sum two measures share is taken once)."""

    def __init__(self) -> None:
        self.vectors: list[np.ndarray] = []
        self.at: dict[tuple, int] = {}

    def add(self, key: tuple, vector) -> int:
        if key not in self.at:
            self.at[key] = len(self.vectors)
            self.vectors.append(np.asarray(vector, dtype=float))
        return self.at[key]


def _group_sums(needed, base: _Layout, members: list[tuple[_Layout, np.ndarray]],
                draw: CrossedDraw, sinks: list[_Sink]) -> None:
    """One pass over the base layout's labelled answers, a block of whole
    leaves of about :data:`_BLOCK` answers at a time: the answers' weight
    totals ``d`` under the rater multiplicities by one sparse product over
    the (answer, rater) cells (and the value totals ``a`` of each per-rating
    measure), times the answer multiplicities, then every measure's ten sums
    as sparse segment products of a few arrays with rows of coefficients
    per leaf: ``m d``, ``m d^2`` (a per-answer measure's ``d`` is the base's
    scaled by ``k``, its ``a`` that times its flag ``g``), ``m`` (the
    pooled-variance weights) and a per-rating measure's ``m a``, ``m a d``.
    In float32 within a block (counts are exact), added over blocks in
    float64."""
    B, R = draw.V.shape[1], draw.raters.size
    n = base.ids.size
    shape = (n, R)
    pattern = (base.cell_row, base.cell_col)
    by_weight = sp.csr_matrix((base.w[base.cell_row] * base.n_cell, pattern), shape=shape,
                              dtype=np.float32)
    U = draw.U.astype(np.float32)
    md, mdd, m = _Coefficients(), _Coefficients(), _Coefficients()
    plans, by_value = [], []
    f_ids: list[np.ndarray] = []

    def f_id(f) -> int:  # identical predictions share their sums' coefficients
        for i, known in enumerate(f_ids):
            if np.array_equal(known, f, equal_nan=True):
                return i
        f_ids.append(f)
        return len(f_ids) - 1

    one = np.ones(n)
    for j, (lay, k) in enumerate(members):
        f, v, i = lay.f, lay.w, f_id(lay.f)
        V = [m.add(("v", i), v), m.add(("vf", i), v * f), m.add(("vff", i), v * f * f)]
        if lay.v_cell is not None:  # per rating: D, Y, F, ADF, AD, DDF, DD from its a
            values = sp.csr_matrix((base.w[base.cell_row] * lay.v_cell, pattern), shape=shape,
                                   dtype=np.float32)
            values.eliminate_zeros()  # (a Fail %'s passes are mostly zeros)
            by_value.append(values)
            plans.append(("rating", len(by_value) - 1,
                          [md.add(("1",), one), md.add(("f", i), f)],
                          [mdd.add(("1",), one), mdd.add(("f", i), f)], V))
        else:  # per answer: a = g d k
            g = lay.flag
            plans.append(("answer", None,
                          [md.add(("k", j), k), md.add(("gk", j), g * k),
                           md.add(("fk", j, i), f * k)],
                          [mdd.add(("kk", j), k * k), mdd.add(("gkk", j), g * k * k),
                           mdd.add(("gfkk", j, i), g * f * k * k),
                           mdd.add(("fkk", j, i), f * k * k)], V))
    group, count = base.group, np.bincount(base.group, minlength=needed.size)
    weight = np.bincount(group, weights=base.w, minlength=needed.size)
    for sink in sinks:
        sink.leaves(weight, count)
    bounds = np.concatenate([[0], np.cumsum(count)])
    blocks, start = [], 0
    while start < needed.size:  # blocks of whole leaves of about _BLOCK answers
        stop = max(start + 1, int(np.searchsorted(bounds, bounds[start] + _BLOCK, "right")) - 1)
        blocks.append((start, min(stop, needed.size)))
        start = blocks[-1][1]
    # one block's sums of one measure at a time, in one buffer (float32: each
    # leaf's sums come whole from its block)
    block = np.empty((10, max((b - a for a, b in blocks), default=0), B), dtype=np.float32)
    for start, stop in blocks:
        lo, hi, L = bounds[start], bounds[stop], stop - start
        if hi == lo:  # (no labelled answer: a cell ending here still finishes)
            block[:, :L] = 0
            for sink in sinks:
                sink.add(start, stop, block[:, :L])
            continue
        local = group[lo:hi] - start  # each answer's leaf in the block
        d = by_weight[lo:hi] @ U
        mult = draw.V[base.rows[lo:hi]].astype(np.float32)
        w_md = mult * d
        S_md = _segments(w_md, md.vectors, lo, hi, local, L)
        S_mdd = _segments(w_md * d, mdd.vectors, lo, hi, local, L)
        S_m = _segments(mult, m.vectors, lo, hi, local, L)
        del w_md
        for j, (kind, v_at, at_md, at_mdd, at_m) in enumerate(plans):
            V0, V1, V2 = (S_m[t] for t in at_m)
            if kind == "rating":
                ma = mult * (by_value[v_at][lo:hi] @ U)
                (Y,) = _segments(ma, [one], lo, hi, local, L)
                AD, ADF = _segments(ma * d, [one, members[j][0].f], lo, hi, local, L)
                (D, F), (DD, DDF) = (S_md[t] for t in at_md), (S_mdd[t] for t in at_mdd)
            else:
                D, Y, F = (S_md[t] for t in at_md)
                DD, AD, ADF, DDF = (S_mdd[t] for t in at_mdd)
            for t, x in enumerate((D, Y, F, ADF, AD, DDF, DD, V0, V1, V2)):
                block[t, :L] = x  # (an empty leaf's rows are zeros)
            sinks[j].add(start, stop, block[:, :L])


def _segments(base, vectors, lo, hi, local, L) -> np.ndarray:
    """``(len(vectors), L, B)``: per coefficient vector (over all answers;
    its ``lo:hi`` slice is the block's) and leaf of the block, the sum over
    the leaf's answers of the coefficient times ``base``'s row, by one
    sparse segment product (several times faster than ``np.add.reduceat``
    along the answers)."""
    K, n = len(vectors), hi - lo
    data = np.concatenate([v[lo:hi] for v in vectors]).astype(np.float32)
    rows = np.concatenate([K * local + t for t in range(K)])
    segment = sp.csr_matrix((data, (rows, np.tile(np.arange(n), K))), shape=(K * L, n))
    return (segment @ base).reshape(L, K, -1).transpose(1, 0, 2)


def _bootstrap(p: _Pieces, B: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """Replicates of the tuned estimator and of the clinicians alone: raters
    and labelled answers by the pigeonhole, unlabelled answers by their own
    multinomial (over their distinct (weight, prediction) pairs, so a judge
    on a five-point scale costs five counts per replicate)."""
    n, n_raters = p.f.size, int(p.rater.max()) + 1
    U = _multiplicities(n_raters, B, rng).astype(float)
    V = _multiplicities(n, B, rng).astype(float)
    labelled = _labelled_sums(p.answer, p.rater, p.weight, p.value, p.f, p.v, U, V)
    pairs, freq = _distinct_pairs(p.u, p.fu)
    counts = resample_counts(freq, B, rng).astype(float)
    sums = _Sums(*labelled, *_unlabelled_sums(counts, *pairs))
    return _fit(sums, None)[0], _fit(sums, 0.0)[0]


def _labelled_sums(answer, rater, weight, value, f, v, U, mult) -> np.ndarray:
    """The labelled sums per replicate ``(10, B)``: the answers' weighted
    totals under rater multiplicities ``U`` ``(R, B)`` by one sparse product
    over the ratings (value rows stacked on weight rows), then the answers'
    multiplicities ``mult`` ``(n, B)``."""
    n = f.size
    rows = np.concatenate([answer, answer + n])
    both = sp.csr_matrix((np.concatenate([weight * value, weight]),
                          (rows, np.concatenate([rater, rater]))),
                         shape=(2 * n, U.shape[0])) @ U
    return np.array(_answer_sums(both[:n], both[n:], mult, f, v))


def _distinct_pairs(u, fu) -> tuple[tuple[np.ndarray, np.ndarray], np.ndarray]:
    """The distinct ``(u, fu)`` pairs and how often each occurs (1-D sorts:
    ``np.unique(axis=0)`` sorts rows as records, several times slower; with
    equal weights, as without targeted assignment, one sort)."""
    if u.size and (u == u[0]).all():
        f_values, freq = np.unique(fu, return_counts=True)
        return (np.full(f_values.size, u[0]), f_values), freq
    u_values, u_code = np.unique(u, return_inverse=True)
    f_values, f_code = np.unique(fu, return_inverse=True)
    key, freq = np.unique(u_code * f_values.size + f_code, return_counts=True)
    return (u_values[key // f_values.size], f_values[key % f_values.size]), freq


class _Parts(NamedTuple):
    """Variances of the calibrated (index 0) and clinicians-alone (1) estimators."""

    twoway: tuple[float, float]
    pigeonhole: tuple[float, float]
    answers: tuple[float, float]  # answer-clustered (labelled) + unlabelled
    iid: tuple[float, float]
    df: tuple[float, float]  # degrees of freedom of the two-way variance


def _intervals(p: _Pieces, lam, theta, theta0, reps, reps0, level, drawn):
    parts = _parts(p, lam, theta, theta0, drawn)
    return (*_parts_intervals(parts, theta, theta0, reps, reps0, level), parts)


def _parts(p: _Pieces, lam, theta, theta0, drawn) -> _Parts:
    shared = _cells(p), np.average(p.fu, weights=p.u)  # (the same for both estimators)
    return _Parts(*zip(_variances(p, lam, theta, drawn, shared),
                       _variances(p, 0.0, theta0, drawn, shared), strict=True))


def _parts_intervals(parts: _Parts, theta, theta0, reps, reps0, level):
    t, t0 = (float(t_over_z(df + 1, level)) for df in parts.df)
    ci = _calibrated_ci(reps, theta, parts.twoway[0], parts.pigeonhole[0], t, level)
    ci0 = _calibrated_ci(reps0, theta0, parts.twoway[1], parts.pigeonhole[1], t0, level)
    return ci, ci0


def _calibrated_ci(reps, estimate, twoway, pigeonhole, t, level) -> tuple[float, float]:
    """Bias-corrected normal interval from the replicates: their spread
    scaled to the two-way variance (as :func:`clinieval.stats.crossed_ratio_bootstrap`
    does) and widened by ``t``; centred on the estimate less the replicates'
    mean offset. Tuning ``lam`` on the labelled answers biases the estimate
    by O(1/n) (a sample richer in judge fails tunes a larger ``lam``); the
    replicates re-tune ``lam``, so their offset estimates that bias, which a
    percentile interval would add a second time instead of removing. Its
    2.5% and 97.5% replicates are also the noisiest (B = 1000 leaves few
    beyond them): the spread of all of them is steadier."""
    reps = reps[np.isfinite(reps)]
    if reps.size < 2:
        return np.nan, np.nan
    factor = np.sqrt(twoway / pigeonhole) if pigeonhole > 0 else 1.0
    centre = 2 * estimate - reps.mean()
    half = norm_ppf((1 + level) / 2) * t * factor * reps.std(ddof=1)
    return float(centre - half), float(centre + half)


def _cells(p: _Pieces) -> tuple[np.ndarray, np.ndarray]:
    """The (rater, answer) cells of the pieces as compact codes (rater * n +
    answer spans R x n, which every bincount would allocate): how many
    there are, and each piece's."""
    cells, cell = np.unique(p.rater * p.f.size + p.answer, return_inverse=True)
    return cells, cell.ravel()


def _variances(p: _Pieces, lam: float, theta: float, drawn=None, shared=None
               ) -> tuple[float, float, float, float, float]:
    """Two-way, pigeonhole-expected, answer-clustered and iid variances of
    the estimator at ``lam`` from its linearisation (a piece's influence is
    ``w (y - lam f - rbar) / D``, an unlabelled answer's
    ``lam u (f - mean_U f) / sum u``), and the two-way variance's degrees
    of freedom: Satterthwaite's over its rater and answer terms, each with
    the effective number of clusters ``(sum t^2)^2 / sum t^4`` of its
    cluster totals ``t`` (Carter, Schnepel & Steigerwald, 2017, Rev. Econ.
    Stat. 99:698): a few raters with large totals give few degrees of
    freedom, as min(raters, answers) would not. ``drawn`` is the numbers of
    answers and raters the pigeonhole drew from (the cell's own by default;
    a draw shared by several cells draws from all of theirs). ``shared``:
    :func:`_cells` and the unlabelled predictions' mean, if known."""
    n, n_raters = p.f.size, int(p.rater.max()) + 1
    n_drawn, raters_drawn = drawn if drawn is not None else (n, n_raters)
    D = p.weight.sum()
    (cells, cell), mean_u = shared if shared is not None else (
        _cells(p), np.average(p.fu, weights=p.u))
    rbar = theta - lam * mean_u
    z = p.weight * (p.value - lam * p.f[p.answer] - rbar) / D
    zu = lam * p.u * (p.fu - mean_u) / p.u.sum()
    s_cols, s_u = _squares(p.answer, z), float(zu @ zu)
    boot = (_squares(p.rater, z), _squares(cell, z))
    pigeonhole = ((1 - 1 / n_drawn) * boot[0] + (1 - 1 / raters_drawn) * s_cols + boot[1]
                  + s_u)
    if p.whole:  # each rater carries the answer's whole influence
        # each distinct rater of an answer (a cell) carries its whole influence
        # once, however many of the answer's ratings are that rater's
        whole = (np.bincount(p.answer, minlength=n)[p.answer]
                 / np.bincount(cell, minlength=cells.size)[cell])
        z = z * whole
    g_cells = cells.size
    c_rows, c_cols, c_cells, c_u = (g / (g - 1) if g > 1 else 1.0
                                    for g in (n_raters, n, g_cells, p.fu.size))
    v_rows, v_cols = c_rows * _squares(p.rater, z) + c_u * s_u, c_cols * s_cols + c_u * s_u
    if p.whole:
        raw = (_squares(p.rater, z) + s_cols - _squares(cell, z)) / _centring(p, whole, cell)
        # never below the answers' one-way variance: conservative (the floor
        # adds back the noisy estimate's lower tail), but without it the 5%
        # rows' dangerous % covered 88.5-91.5% (coverage_calibrated.py)
        twoway = max(raw, c_cols * s_cols) + c_u * s_u
    else:  # never below a one-way variance
        twoway = max(v_rows + v_cols - c_u * s_u - c_cells * _squares(cell, z), v_rows, v_cols)
    # the raters' share (what they add to the answers' variance) and the answers'
    df = _satterthwaite(((twoway - v_cols, _clusters(p.rater, z)),
                         (v_cols - c_u * s_u, _clusters(p.answer, z))), min(n_raters, n) - 1)
    iid = (float(z @ z) if p.per_rating and not p.whole else s_cols) + s_u
    return twoway, pigeonhole, s_cols + s_u, iid, df


def _centring(p: _Pieces, whole, cell) -> float:
    """The share of the two-way variance of a per-answer value's mean that
    its influences keep once centred at the estimate (:func:`_variances`,
    whole influences). With ``e_i`` the answers' deviations from the
    estimate, ``E[e_i e_l] = C_il - Var(mean)`` to first order, so each
    product a variance term sums loses ``Var(mean)``: the rater sums lose
    ``sum_j W_j^2``, the answer sums ``sum_i w_i^2`` and the cells give
    back ``sum_c w_c^2`` (weights over ``D^2``), and the raw two-way sum
    estimates ``(1 - those) Var(mean)``. A rater's answers all carry its
    leniency at once, so with many answers per rater the loss is large:
    0.15 of the variance with 800 answers of 60 clinicians, three each, where
    the one-way ``G / (G - 1)`` factors give back a third of it (dangerous
    answers' 95% intervals covered 92.2-92.9%, ``benchmarks/coverage_calibrated.py``).
    For ratings the factors are the same correction (one rating per cell
    and far more of them than raters), so only whole influences take this.
    The rater part is corrected to first order only, and the one-way floor
    adds to it: in that design the variance averages 1.02-1.13 of the
    estimates' own over four seeds of 3,000 snapshots (uncorrected, with the
    factors, 0.91-0.96). The share returned is at least 0.5 (an arbitrary
    bound): where an answer's raters are a large share of all raters the
    rater part is barely estimable, and the variance then leans on the
    answers'."""
    whole = p.weight * whole
    D = float(p.weight.sum())
    lost = (_squares(p.rater, whole) + _squares(p.answer, p.weight) - _squares(cell, whole))
    return max(1.0 - lost / D**2, 0.5)


def _squares(code, z) -> float:
    totals = np.bincount(code, weights=z)
    return float(totals @ totals)


def _clusters(code, z) -> float:
    """Effective number of clusters of the totals of ``z`` by ``code``."""
    squares = np.bincount(code, weights=z) ** 2
    fourth = float(squares @ squares)
    return float(squares.sum() ** 2 / fourth) if fourth > 0 else 1.0


def _satterthwaite(terms, most: float) -> float:
    """Degrees of freedom of a sum of variance terms ``(variance, clusters)``
    (Satterthwaite, 1946), between 1 and ``most``."""
    terms = [(max(v, 0.0), g) for v, g in terms]
    total = sum(v for v, _ in terms)
    spread = sum(v * v / (g - 1) for v, g in terms if g > 1)
    return float(np.clip(total * total / spread, 1, max(most, 1))) if spread > 0 else 1.0


def _iid_variance(p: _Pieces, lam: float, theta: float) -> float:
    return _variances(p, lam, theta)[3]


class _Shape(NamedTuple):
    """What a cell's result reads of its pieces besides the sums."""

    n: int  # labelled answers
    N: int  # unlabelled
    n_ratings: int
    n_raters: int
    rho: float  # :func:`_answer_correlation`


def _shape(p: _Pieces) -> _Shape:
    return _Shape(p.f.size, p.fu.size, p.answer.size, int(p.rater.max()) + 1,
                  _answer_correlation(p))


def _result(p: _Pieces | _Shape, theta, lam, theta0, ci, ci0, parts: _Parts, n_unparsed, B,
            level) -> CalibratedMean:
    shape = p if isinstance(p, _Shape) else _shape(p)
    z = norm_ppf((1 + level) / 2)
    iid_se = np.sqrt(parts.iid[0])
    with np.errstate(invalid="ignore", divide="ignore"):
        gain = (np.float64(ci0[1] - ci0[0]) / np.float64(ci[1] - ci[0])) ** 2
        answer_gain = np.float64(parts.answers[1]) / np.float64(parts.answers[0])
    n, N, rho = shape.n, shape.N, shape.rho
    share = max(rho, 0.0) ** 2 * N / (N + n)  # lam >= 0 cannot use a negative rho
    answer_share = min(parts.answers[1] / parts.twoway[1], 1.0) if parts.twoway[1] > 0 else 1.0
    return CalibratedMean(
        float(theta), ci[0], ci[1], float(theta - z * iid_se), float(theta + z * iid_se), lam,
        float(theta0), ci0[0], ci0[1], float(gain), float(n * gain), float(shape.n_ratings * gain),
        rho, float(1 / (1 - share)), float(1 / (1 - share * answer_share)), float(answer_gain), n,
        shape.n_ratings, shape.n_raters, N, n_unparsed, B)


def _answer_correlation(p: _Pieces) -> float:
    """Weighted correlation over labelled answers of the prediction and the
    answer's clinicians' value (its pieces' weighted mean)."""
    n = p.f.size
    d = np.bincount(p.answer, weights=p.weight, minlength=n)
    y = np.bincount(p.answer, weights=p.weight * p.value, minlength=n) / d
    w = p.v
    yc, fc = y - np.average(y, weights=w), p.f - np.average(p.f, weights=w)
    denom = np.sqrt((w * yc * yc).sum() * (w * fc * fc).sum())
    return float((w * yc * fc).sum() / denom) if denom > 0 else 0.0
