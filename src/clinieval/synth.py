"""Synthetic MOOVE-like snapshots with planted, documented truths.

At ``scale=1`` the generator reproduces the size of the MOOVE snapshot (13
models, 76 specialties, 736 clinicians, 375,614 rubric ratings, 18,685
pairwise preferences). Every audit can be checked against it because the
truths behind the data were planted, and are written to ``meta["planted"]``:

1. **Latent quality.** A score is an ordered-probit draw: latent = model
   quality + specialty effect + model x specialty interaction + answer effect
   + rater leniency + rater noise, cut at fixed points into -2..+2. The
   expected mean and Fail% (P(score <= -1)) per model and criterion are
   computed analytically, conditional on which answers were rated how often
   (answer effects, leniency and noise are integrated out).
2. **Preference follows length.** The vote logit is driven by the difference
   in log answer length and only weakly by the rater's own Harmlessness
   scores, so the preference leader is not the safest model.
3. **Specialty no-go zones.** Accuracy fails in most Cardiology ECG ratings
   and in about a third of Pathology and Diagnostics ratings; General
   Surgery, Endocrinology and Reproductive Health almost never fail.
4. **Position bias.** The answer shown on the left gets a logit bonus.
5. **Rater leniency.** A normal per-rater offset on the latent scale.

Also planted: ties and "both unacceptable" votes (the latter likelier when
both answers score poorly), criterion-specific rater noise (Harmlessness is
rated more consistently than Accuracy), noise that grows with prompt length
(consensus drift), and an answer effect shared across criteria (co-failure).

Structure follows MOOVE: a pairwise review shows one rater a case and two
answers from different models; the rater scores both answers on every
criterion (the ratings carry ``review_id`` = the preference id) and votes
A / B / tie / both_bad. Each case has answers from a few models and is reviewed
several times with random pairs, so most answers get two or more raters. The
ratings left to reach the exact total come from single-answer sessions
(``review_id`` null); the last session stops part-way through the rubric so
that the total is exact. No rater scores the same answer twice.

Simplifications, stated so nobody mistakes them for data: answers carry no
text (``text`` is null); a prompt is a one-sentence template and
``prompt_words`` is the notional length of the full prompt; every rating is
revision 0 (no edit history); models, display names and organisations are
invented; Diagnostics gets about 0.8% of cases (about twice its share in the
paper) so that its planted risk stands clear of sampling noise.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from typing import NamedTuple

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from scipy.special import expit, ndtr, ndtri

from clinieval import tables as T
from clinieval.rubric import load_rubric, rubric_to_rows
from clinieval.snapshot import Snapshot

GENERATOR_VERSION = "1.0.0"

PAPER_COUNTS = {"models": 13, "specialties": 76, "raters": 736, "ratings": 375_614,
                "preferences": 18_685}
"""Sizes of the MOOVE snapshot (paper, Methods); ``scale=1`` reproduces them."""

MIN_SCALE = 0.001
MIN_RATERS = 20
MIN_SPECIALTIES = 8
STUDY_ID = "moove-synthetic"

Progress = Callable[[str, float], None]
"""``progress(stage, fraction_done)``, called as the generator moves on."""


@dataclass(frozen=True)
class SynthSettings:
    """Everything that determines a synthetic snapshot; recorded verbatim in
    ``meta["generator"]``. Same settings, same tables."""

    seed: int = 0
    scale: float = 1.0
    answers_per_case: float = 5.0
    """Mean number of models answering a case (2..13)."""
    raters_per_answer: float = 3.0
    """Target mean number of raters per answer (and criterion)."""
    length_coef: float = 1.2
    """Vote logit per unit of log-length difference (A minus B)."""
    harmlessness_coef: float = 0.15
    """Vote logit per point of the rater's Harmlessness score difference."""
    left_bias_logit: float = 0.25
    leniency_sd: float = 0.3
    tie_rate: float = 0.10
    both_bad_rate: float = 0.04
    both_bad_poor_coef: float = 1.5
    """Logit of "both unacceptable" per point the pair's mean safety score drops."""
    home_specialty_share: float = 0.7
    """Share of sessions a rater takes in their own specialty."""
    consensus_drift: float = 0.2
    """Log rater-noise multiplier per SD of log prompt words."""
    start: str = "2025-01-06"
    end: str = "2025-10-31"

    def __post_init__(self) -> None:
        if not self.scale >= MIN_SCALE:
            raise ValueError(f"scale must be at least {MIN_SCALE}, got {self.scale}")
        if not 0 < self.tie_rate + self.both_bad_rate < 1 or min(self.tie_rate,
                                                                   self.both_bad_rate) <= 0:
            raise ValueError("tie_rate and both_bad_rate must be positive and sum below 1")
        if not 2 <= self.answers_per_case <= len(_MODELS):
            raise ValueError(f"answers_per_case must be within 2..{len(_MODELS)}")
        if self.raters_per_answer < 1:
            raise ValueError("raters_per_answer must be at least 1")
        if _date(self.end) <= _date(self.start):
            raise ValueError("end must come after start")


def generate(seed: int = 0, scale: float = 1.0, *, progress: Progress | None = None) -> Snapshot:
    """A synthetic MOOVE-like snapshot; ``scale=1`` has the paper's exact counts."""
    return generate_from(SynthSettings(seed=seed, scale=scale), progress=progress)


# --------------------------------------------------------------------------- constants


class _ModelSpec(NamedTuple):
    model_id: str
    display_name: str
    version: str
    harm_fail: float
    """Harmlessness Fail share in a neutral specialty (sets latent quality)."""
    acc_fail: float
    log_chars: float
    """Mean log answer length in characters."""
    presence: float
    """Relative chance of answering a case."""
    price_in: float
    price_out: float


_MODELS = (
    _ModelSpec("model-a", "Aster 120B", "2025-08-05", 0.170, 0.12, 7.60, 1.00, 0.15, 0.60),
    _ModelSpec("model-b", "Breeze Flash 2.5", "2025-06-17", 0.065, 0.04, 7.40, 1.00, 0.30, 2.50),
    _ModelSpec("model-c", "Cobalt Chat", "2025-03-24", 0.050, 0.025, 7.25, 0.60, 0.27, 1.10),
    _ModelSpec("model-d", "Dynamo 5", "2025-08-07", 0.135, 0.085, 7.25, 1.00, 1.25, 10.0),
    _ModelSpec("model-e", "Ember Flash 2.0", "2025-02-05", 0.140, 0.19, 7.10, 1.00, 0.10, 0.40),
    _ModelSpec("model-f", "Fathom Large", "2024-11-18", 0.150, 0.23, 7.05, 0.80, 2.00, 6.00),
    _ModelSpec("model-g", "Garnet 3.7", "2025-02-19", 0.150, 0.28, 7.00, 0.80, 3.00, 15.0),
    _ModelSpec("model-h", "Heron Med 27B", "2025-05-20", 0.085, 0.045, 6.95, 0.60, 0.10, 0.30),
    _ModelSpec("model-i", "Iris Max", "2025-01-25", 0.165, 0.32, 6.90, 0.60, 1.60, 6.40),
    _ModelSpec("model-j", "Juno Clinic (DPO)", "2025-04-02", 0.140, 0.02, 6.80, 0.15, 0.0, 0.0),
    _ModelSpec("model-k", "Kite 70B", "2024-12-06", 0.065, 0.02, 6.70, 0.20, 0.23, 0.40),
    _ModelSpec("model-l", "Lyra 4", "2024-08-06", 0.145, 0.27, 6.60, 1.00, 2.50, 10.0),
    _ModelSpec("model-m", "Meridian Med 70B", "2025-04-28", 0.030, 0.12, 6.35, 1.00, 0.0, 0.0),
)
"""Invented models. model-a writes the longest answers (the planted preference
leader); model-m is the most conservative (the planted safest model)."""

_LOG_CHARS_SD = 0.45
_CUTS = np.array([-1.3, -0.4, 0.5, 1.5])
"""Latent cut-points between -2|-1|0|+1|+2; Fail (score <= -1) is latent <= _CUTS[1]."""

_NOISE_SD = {"harmlessness": 0.3, "accuracy": 0.8, "completeness": 0.9, "reasoning": 0.85,
             "context_awareness": 0.8, "context_seeking": 0.85, "uncertainty": 0.85,
             "communication": 0.7, "fairness": 0.6}
_ANSWER_SD = {"harmlessness": 1.3, "accuracy": 1.0}
_DEFAULT_NOISE_SD, _DEFAULT_ANSWER_SD = 0.8, 0.7
_SHARED_ANSWER = 0.6
"""Share of answer-effect variance common to all criteria (drives co-failure)."""
_INTERACTION_SD = 0.1
_OTHER_QUALITY_SD = 0.2
_SPECIALTY_SD, _SPECIALTY_CRITERION_SD = 0.1, 0.08
_SPILLOVER = 0.4
"""Share of a named specialty's safety offset applied to its other criteria."""

HIGH_RISK_SPECIALTIES = ("Cardiology ECG", "Pathology", "Diagnostics")
LOW_RISK_SPECIALTIES = ("General Surgery", "Endocrinology", "Reproductive Health")

_TARGET_FAIL = {
    "Cardiology ECG": {"accuracy": 0.85, "harmlessness": 0.22},
    "Pathology": {"accuracy": 0.35, "harmlessness": 0.30},
    "Diagnostics": {"accuracy": 0.30, "harmlessness": 0.22},
    "General Surgery": {"accuracy": 0.004, "harmlessness": 0.003},
    "Endocrinology": {"accuracy": 0.006, "harmlessness": 0.004},
    "Reproductive Health": {"accuracy": 0.03, "harmlessness": 0.015},
}
"""Rating-level Fail share per named specialty, averaged over models."""

_FIXED_SHARE = {"Cardiology ECG": 0.06, "Pathology": 0.07, "Diagnostics": 0.008,
                "General Surgery": 0.003, "Endocrinology": 0.015, "Reproductive Health": 0.10,
                "Medical Ethics": 0.0015, "Nuclear Medicine": 0.0015, "Sleep Medicine": 0.0015,
                "Toxicology": 0.0015}
"""Share of cases for specialties with a fixed size; the rest share what is left."""

SPECIALTIES = (
    "Cardiology ECG", "Pathology", "Diagnostics", "General Surgery", "Endocrinology",
    "Reproductive Health", "Cardiology", "Internal Medicine", "Family Medicine",
    "Emergency Medicine", "Pediatrics", "Obstetrics", "Gynecology", "Neurology", "Psychiatry",
    "Dermatology", "Oncology", "Hematology", "Nephrology", "Gastroenterology", "Hepatology",
    "Pulmonology", "Infectious Diseases", "Rheumatology", "Ophthalmology",
    "Otorhinolaryngology", "Urology", "Orthopedics", "Radiology", "Anesthesiology",
    "Intensive Care", "Geriatrics", "Palliative Care", "Neonatology", "Allergy and Immunology",
    "Clinical Pharmacology", "Pharmacy", "Nutrition", "Public Health", "Epidemiology",
    "Tropical Medicine", "Travel Medicine", "Sports Medicine",
    "Physical Medicine and Rehabilitation", "Occupational Medicine", "Toxicology",
    "Medical Genetics", "Neurosurgery", "Cardiothoracic Surgery", "Vascular Surgery",
    "Plastic Surgery", "Pediatric Surgery", "Trauma Surgery", "Dentistry",
    "Oral and Maxillofacial Surgery", "Nursing", "Midwifery", "Mental Health",
    "Addiction Medicine", "Sexual Health", "HIV Medicine", "Tuberculosis", "Malaria",
    "Maternal Health", "Child Health", "Adolescent Health", "Nuclear Medicine",
    "Interventional Radiology", "Sleep Medicine", "Pain Medicine", "Clinical Microbiology",
    "Laboratory Medicine", "Global Health", "Primary Care", "Community Health",
    "Medical Ethics",
)

_COUNTRIES = (
    "Switzerland", "Kenya", "India", "Brazil", "Nigeria", "United Kingdom", "France", "Germany",
    "South Africa", "Rwanda", "Uganda", "Tanzania", "Ghana", "Ethiopia", "Pakistan",
    "Bangladesh", "Indonesia", "Philippines", "Peru", "Colombia", "Mexico", "Canada",
    "United States", "Italy", "Spain", "Cameroon", "Senegal", "Egypt", "Nepal", "Viet Nam",
)
_ROLES = ("physician", "specialist", "resident", "nurse", "pharmacist", "midwife")
_ROLE_P = (0.40, 0.25, 0.15, 0.10, 0.05, 0.05)
_N_ORGANISATIONS = 29
_CATEGORIES = ("Clinical decision support", "Patient communication and education",
               "Clinical note generation", "Medical research assistance",
               "Administration and workflow")
_CATEGORY_P = (0.55, 0.2, 0.1, 0.1, 0.05)
_POPULATIONS = ("adult", "paediatric", "older adult", "pregnant")
_SETTINGS = ("primary care", "hospital", "emergency", "low-resource setting")
_COMPLAINTS = ("chest pain", "fatigue", "an abnormal laboratory result", "a persistent cough",
               "a rash", "headache", "abdominal pain", "a question about medication", "fever",
               "shortness of breath", "palpitations", "joint pain")
_QUESTIONS = ("What is the most likely diagnosis?", "How should this be managed?",
              "Which investigations are needed?", "Is referral required?",
              "What should the patient be told?")
_PROMPT_WORDS_MEDIAN, _PROMPT_WORDS_SIGMA, _PROMPT_WORDS_RANGE = 70.0, 0.75, (15, 600)
_SECONDS_PER_CRITERION, _SECONDS_SIGMA = 20.0, 0.6
_LENIENCY_MIN_RATINGS = 100
_STREAMS = ("models", "specialties", "cases", "answers", "raters", "sessions", "scores",
            "votes", "times", "labels")


# --------------------------------------------------------------------------- design


@dataclass(frozen=True)
class _Design:
    n_ratings: int
    n_preferences: int
    n_singles: int
    short: int
    """Criteria the last single-answer session leaves unscored."""
    n_raters: int
    n_cases: int
    n_specialties: int
    n_criteria: int


def _design(s: SynthSettings, n_criteria: int) -> _Design:
    n_ratings = round(PAPER_COUNTS["ratings"] * s.scale)
    n_prefs = min(round(PAPER_COUNTS["preferences"] * s.scale), n_ratings // (2 * n_criteria))
    rest = n_ratings - 2 * n_criteria * n_prefs
    n_singles = -(-rest // n_criteria)
    sides = 2 * n_prefs + n_singles
    n_cases = min(n_prefs, max(MIN_SPECIALTIES,
                               round(sides / (s.raters_per_answer * s.answers_per_case))))
    n_spec = min(len(SPECIALTIES), max(MIN_SPECIALTIES, n_cases // 2))
    return _Design(n_ratings, n_prefs, n_singles, n_singles * n_criteria - rest,
                   max(MIN_RATERS, round(PAPER_COUNTS["raters"] * s.scale)), n_cases, n_spec,
                   n_criteria)


def _streams(seed: int) -> dict[str, np.random.Generator]:
    """One independent generator per component, so components do not shift
    each other's draws."""
    children = np.random.SeedSequence(seed).spawn(len(_STREAMS))
    return {name: np.random.default_rng(child) for name, child in zip(_STREAMS, children,
                                                                       strict=True)}


def _date(text: str) -> datetime:
    return datetime.fromisoformat(text).replace(tzinfo=UTC)


# --------------------------------------------------------------------------- quality


@dataclass(frozen=True)
class _Criteria:
    ids: tuple[str, ...]
    noise_sd: np.ndarray
    answer_sd: np.ndarray
    leniency_sd: float
    drift: float
    harm: int
    acc: int

    def total_sd(self, noise_factor: np.ndarray | float, c: int) -> np.ndarray:
        """SD of the latent around its mean once answer, rater and noise are drawn."""
        noise = self.noise_sd[c] * np.asarray(noise_factor)
        return np.sqrt(self.answer_sd[c] ** 2 + self.leniency_sd ** 2 + noise ** 2)

    def typical_sd(self, c: int) -> np.ndarray:
        """Total SD at 16 quantiles of the prompt-length noise factor."""
        z = ndtri((np.arange(16) + 0.5) / 16)
        return self.total_sd(np.exp(self.drift * z), c)


def _criteria(ids: tuple[str, ...], leniency_sd: float, drift: float) -> _Criteria:
    noise = np.array([_NOISE_SD.get(c, _DEFAULT_NOISE_SD) for c in ids])
    answer = np.array([_ANSWER_SD.get(c, _DEFAULT_ANSWER_SD) for c in ids])
    return _Criteria(ids, noise, answer, leniency_sd, drift, ids.index("harmlessness"),
                     ids.index("accuracy"))


def _quality(rng: np.random.Generator, crit: _Criteria) -> np.ndarray:
    """Latent quality per model x criterion. Harmlessness and Accuracy are set
    from each model's Fail share in a neutral specialty; the other criteria
    sit near their average."""
    q = np.empty((len(_MODELS), len(crit.ids)))
    for c, fails in ((crit.harm, [m.harm_fail for m in _MODELS]),
                     (crit.acc, [m.acc_fail for m in _MODELS])):
        q[:, c] = _CUTS[1] - crit.total_sd(1.0, c) * ndtri(np.array(fails))
    base = (q[:, crit.harm] + q[:, crit.acc]) / 2
    for c in range(len(crit.ids)):
        if c not in (crit.harm, crit.acc):
            q[:, c] = base + rng.normal(0, _OTHER_QUALITY_SD, len(_MODELS))
    return q


@dataclass(frozen=True)
class _Specialties:
    names: tuple[str, ...]
    share: np.ndarray
    risk: np.ndarray


def _specialties(rng: np.random.Generator, n_keep: int) -> _Specialties:
    share = _specialty_shares(rng)
    risk = rng.integers(1, 5, len(SPECIALTIES))
    risk[[SPECIALTIES.index(s) for s in HIGH_RISK_SPECIALTIES]] = 5
    risk[[SPECIALTIES.index(s) for s in LOW_RISK_SPECIALTIES]] = 2
    keep = np.sort(_kept_specialties(share, n_keep))
    return _Specialties(tuple(SPECIALTIES[i] for i in keep), share[keep] / share[keep].sum(),
                        risk[keep])


def _specialty_effects(rng: np.random.Generator, spec: _Specialties, q: np.ndarray,
                       interaction: np.ndarray, crit: _Criteria,
                       model_mix: np.ndarray) -> np.ndarray:
    """Specialty x criterion latent offsets: small random ones, and for the
    named specialties the offsets that give their target Fail shares with the
    models that actually answer there (``model_mix``: specialty x model counts)."""
    n, k = len(spec.names), len(crit.ids)
    effect = rng.normal(0, _SPECIALTY_SD, (n, 1)) + rng.normal(0, _SPECIALTY_CRITERION_SD, (n, k))
    for i, name in enumerate(spec.names):
        targets = _TARGET_FAIL.get(name)
        if targets is None:
            continue
        offsets = [_solve_offset(q[:, c] + interaction[:, i, c], model_mix[i],
                                 crit.typical_sd(c), targets[cid])
                   for cid, c in (("harmlessness", crit.harm), ("accuracy", crit.acc))]
        effect[i] += _SPILLOVER * np.mean(offsets)
        effect[i, crit.harm], effect[i, crit.acc] = offsets
    return effect


def _specialty_shares(rng: np.random.Generator) -> np.ndarray:
    free = [i for i, s in enumerate(SPECIALTIES) if s not in _FIXED_SHARE]
    share = np.array([_FIXED_SHARE.get(s, 0.0) for s in SPECIALTIES])
    raw = rng.lognormal(0, 0.9, len(free))
    share[free] = raw / raw.sum() * (1 - share.sum())
    return share


def _kept_specialties(share: np.ndarray, n_keep: int) -> np.ndarray:
    """The named specialties first, then the largest others."""
    named = [SPECIALTIES.index(s) for s in HIGH_RISK_SPECIALTIES + LOW_RISK_SPECIALTIES]
    rest = [i for i in np.argsort(-share, kind="stable") if i not in named]
    return np.array((named + rest)[:n_keep])


def _solve_offset(q: np.ndarray, weight: np.ndarray, sd: np.ndarray, target: float) -> float:
    """The latent offset at which the mean Fail share over models (weighted)
    and over the spread of noise levels ``sd`` is ``target``."""
    lo, hi = -8.0, 8.0
    for _ in range(60):
        mid = (lo + hi) / 2
        fail = np.average(ndtr((_CUTS[1] - q[:, None] - mid) / sd).mean(axis=1), weights=weight)
        lo, hi = (mid, hi) if fail > target else (lo, mid)
    return (lo + hi) / 2


def _solve_intercept(offset: np.ndarray, target: float, weight: np.ndarray | float = 1.0) -> float:
    """The intercept ``a`` with mean(weight * expit(a + offset)) == target."""
    lo, hi = -30.0, 30.0
    for _ in range(60):
        mid = (lo + hi) / 2
        lo, hi = (lo, mid) if np.mean(weight * expit(mid + offset)) > target else (mid, hi)
    return (lo + hi) / 2


# --------------------------------------------------------------------------- entities


@dataclass(frozen=True)
class _Cases:
    specialty: np.ndarray
    words: np.ndarray
    noise_factor: np.ndarray


def _cases(rng: np.random.Generator, n: int, spec: _Specialties, drift: float) -> _Cases:
    k = len(spec.names)
    specialty = np.concatenate([np.arange(k), rng.choice(k, n - k, p=spec.share)])
    rng.shuffle(specialty)
    log_words = rng.normal(np.log(_PROMPT_WORDS_MEDIAN), _PROMPT_WORDS_SIGMA, n)
    words = np.clip(np.round(np.exp(log_words)), *_PROMPT_WORDS_RANGE).astype(np.int32)
    z = (np.log(words) - np.log(_PROMPT_WORDS_MEDIAN)) / _PROMPT_WORDS_SIGMA
    return _Cases(specialty, words, np.exp(drift * z))


@dataclass(frozen=True)
class _Answers:
    case: np.ndarray
    model: np.ndarray
    start: np.ndarray
    """Index of each case's first answer (a case's answers are contiguous)."""
    count: np.ndarray
    log_chars: np.ndarray
    effect: np.ndarray
    """Answer x criterion offset on the latent scale."""


def _answers(rng: np.random.Generator, n_cases: int, per_case: float, crit: _Criteria) -> _Answers:
    m = len(_MODELS)
    count = np.clip(rng.poisson(per_case - 1, n_cases) + 1, 2, m)
    presence = np.log([spec.presence for spec in _MODELS])
    keys = presence + rng.gumbel(size=(n_cases, m))  # Gumbel top-k: weighted, no repeats
    order = np.argsort(-keys, axis=1)
    chosen = np.sort(np.where(np.arange(m) < count[:, None], order, m), axis=1)
    model = chosen[chosen < m]
    case = np.repeat(np.arange(n_cases), count)
    log_chars = np.array([s.log_chars for s in _MODELS])[model]
    log_chars = log_chars + rng.normal(0, _LOG_CHARS_SD, len(model))
    shared = rng.standard_normal((len(model), 1))
    own = rng.standard_normal((len(model), len(crit.ids)))
    effect = crit.answer_sd * (np.sqrt(_SHARED_ANSWER) * shared + np.sqrt(1 - _SHARED_ANSWER) * own)
    return _Answers(case, model, np.cumsum(count) - count, count, log_chars, effect)


@dataclass(frozen=True)
class _Raters:
    specialty: np.ndarray
    activity: np.ndarray
    leniency: np.ndarray
    order: np.ndarray
    """Raters sorted by specialty; ``cum`` is their cumulative activity."""
    cum: np.ndarray
    spec_lo: np.ndarray
    spec_hi: np.ndarray
    spec_last: np.ndarray
    spec_has: np.ndarray

    def draw(self, rng: np.random.Generator, spec: np.ndarray, home_share: float) -> np.ndarray:
        """Raters for sessions in specialties ``spec``, in proportion to
        activity; a ``home_share`` of them from the session's own specialty."""
        n = len(self.order)
        home = (rng.random(len(spec)) < home_share) & self.spec_has[spec]
        lo = np.where(home, self.spec_lo[spec], 0.0)
        hi = np.where(home, self.spec_hi[spec], self.cum[-1])
        pos = np.searchsorted(self.cum, lo + rng.random(len(spec)) * (hi - lo), side="right")
        return self.order[np.minimum(pos, np.where(home, self.spec_last[spec], n - 1))]


def _raters(rng: np.random.Generator, n: int, spec: _Specialties, leniency_sd: float) -> _Raters:
    specialty = rng.choice(len(spec.names), n, p=spec.share)
    activity = rng.lognormal(0, 1.0, n)
    leniency = rng.normal(0, leniency_sd, n)
    leniency -= np.average(leniency, weights=activity)  # no net shift of the expected scores
    order = np.argsort(specialty, kind="stable")
    cum = np.cumsum(activity[order])
    counts = np.bincount(specialty, minlength=len(spec.names))
    first = np.cumsum(counts) - counts
    before = np.concatenate([[0.0], cum])  # activity of all raters before position i
    return _Raters(specialty, activity, leniency, order, cum, before[first],
                   before[first + counts], np.maximum(first + counts - 1, 0), counts > 0)


# --------------------------------------------------------------------------- sessions


@dataclass(frozen=True)
class _Sessions:
    """Units are reviews (0..P-1) then single-answer sessions (P..P+S-1);
    sides are the (unit, answer) pairs in time order, left answer first."""

    n_reviews: int
    case: np.ndarray
    rater: np.ndarray
    start_s: np.ndarray
    left_is_a: np.ndarray
    answer_a: np.ndarray
    answer_b: np.ndarray
    preference_id: np.ndarray
    side_unit: np.ndarray
    side_pos: np.ndarray
    side_answer: np.ndarray


def _sessions(rng: np.random.Generator, d: _Design, s: SynthSettings, cases: _Cases,
              answers: _Answers, raters: _Raters) -> _Sessions:
    review_case, a, b = _review_pairs(rng, d, answers)
    single = _single_answers(rng, d.n_singles, answers, np.concatenate([a, b]))
    left_is_a = rng.random(len(a)) < 0.5
    first = np.concatenate([np.where(left_is_a, a, b), single])
    second = np.concatenate([np.where(left_is_a, b, a), np.full(len(single), -1)])
    case = np.concatenate([review_case, answers.case[single]])
    rater = _assign_raters(rng, cases.specialty[case], first, second, raters, s)
    start = _start_times(rng, len(case), d.n_preferences, s)
    order = np.argsort(start, kind="stable")
    preference_id = np.zeros(len(case), dtype=np.int64)
    reviews_in_time = order[order < d.n_preferences]
    preference_id[reviews_in_time] = np.arange(1, d.n_preferences + 1)
    side_unit = np.repeat(order, np.where(order < d.n_preferences, 2, 1))
    side_pos = np.zeros(len(side_unit), dtype=np.int8)
    side_pos[1:] = side_unit[1:] == side_unit[:-1]
    side_answer = np.where(side_pos == 0, first[side_unit], second[side_unit])
    return _Sessions(d.n_preferences, case, rater, start, left_is_a, a, b, preference_id,
                     side_unit, side_pos, side_answer)


def _review_pairs(rng: np.random.Generator, d: _Design,
                  answers: _Answers) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Every case gets a review; the rest go to cases in proportion to their
    answer count. Each review compares two distinct answers of its case."""
    n_cases = len(answers.count)
    extra = rng.multinomial(d.n_preferences - n_cases, answers.count / answers.count.sum())
    case = np.repeat(np.arange(n_cases), 1 + extra)
    k = answers.count[case]
    i = np.floor(rng.random(len(case)) * k).astype(np.int64)
    j = np.floor(rng.random(len(case)) * (k - 1)).astype(np.int64)
    j += j >= i
    base = answers.start[case]
    return case, base + i, base + j


def _single_answers(rng: np.random.Generator, n: int, answers: _Answers,
                    reviewed: np.ndarray) -> np.ndarray:
    """Answers for single-answer sessions: never-reviewed answers first, then
    answers with few review raters preferred."""
    n_rev = np.bincount(reviewed, minlength=len(answers.case))
    unrated = rng.permutation(np.flatnonzero(n_rev == 0))[:n]
    weight = 1.0 / (1.0 + n_rev) ** 2
    rest = rng.choice(len(n_rev), n - len(unrated), p=weight / weight.sum())
    return np.concatenate([unrated, rest])


def _assign_raters(rng: np.random.Generator, spec: np.ndarray, first: np.ndarray,
                   second: np.ndarray, raters: _Raters, s: SynthSettings) -> np.ndarray:
    """Draw a rater per unit; give idle raters a unit each (when there are
    enough units), and redraw (from all raters) units whose rater already
    scored one of its answers, until every rater is active and no rater
    scores an answer twice."""
    rater = raters.draw(rng, spec, s.home_specialty_share)
    n_raters = len(raters.order)
    paired = np.flatnonzero(second >= 0)
    unit = np.concatenate([np.arange(len(first)), paired])
    answer = np.concatenate([first, second[paired]]).astype(np.int64)
    for _ in range(200):
        idle = np.flatnonzero(np.bincount(rater, minlength=n_raters) == 0)
        if 0 < idle.size and len(rater) >= n_raters:
            rater[rng.choice(len(rater), idle.size, replace=False)] = idle
        clash = _repeats(answer * n_raters + rater[unit])
        if clash.size == 0 and (idle.size == 0 or len(rater) < n_raters):
            return rater
        redo = np.unique(unit[clash])
        rater[redo] = raters.draw(rng, spec[redo], 0.0)
    raise RuntimeError("could not give every answer distinct raters; raise the rater count")


def _repeats(keys: np.ndarray) -> np.ndarray:
    """Positions of values already seen earlier (in stable sort order)."""
    order = np.argsort(keys, kind="stable")
    ranked = keys[order]
    return order[1:][ranked[1:] == ranked[:-1]]


def _start_times(rng: np.random.Generator, n: int, n_reviews: int, s: SynthSettings) -> np.ndarray:
    """Session start in whole seconds after ``s.start`` (int64); activity grows
    over time. The last single-answer session (the partial one) is the last of all.
    Whole seconds keep timestamps independent of how a numpy build rounds ``**``."""
    span = (_date(s.end) - _date(s.start)).total_seconds() - 86_400
    start = np.floor(span * rng.random(n) ** 0.8).astype(np.int64)
    if n > n_reviews:
        start[-1] = start.max() + 60
    return start


# --------------------------------------------------------------------------- scores


def _scores(rng: np.random.Generator, sessions: _Sessions, cases: _Cases, answers: _Answers,
            raters: _Raters, quality: np.ndarray, effect: np.ndarray,
            interaction: np.ndarray, crit: _Criteria) -> np.ndarray:
    """Side x criterion scores: latent cut at :data:`_CUTS` into -2..+2."""
    ans = sessions.side_answer
    model, case = answers.model[ans], answers.case[ans]
    specialty = cases.specialty[case]
    shift = raters.leniency[sessions.rater[sessions.side_unit]]
    noise_factor = cases.noise_factor[case]
    scores = np.empty((len(ans), len(crit.ids)), dtype=np.int8)
    for c in range(len(crit.ids)):
        latent = (quality[model, c] + effect[specialty, c] + interaction[model, specialty, c]
                  + answers.effect[ans, c] + shift)
        latent += crit.noise_sd[c] * noise_factor * rng.standard_normal(len(ans))
        scores[:, c] = np.searchsorted(_CUTS, latent) - 2
    return scores


def _seconds(rng: np.random.Generator, sessions: _Sessions, n_criteria: int):
    """Seconds spent per rating (to 0.1 s), and each rating's time since the
    session start in integer microseconds: sums of integers, so no library's
    float rounding can move a timestamp."""
    n = len(sessions.side_unit)
    spent = rng.lognormal(np.log(_SECONDS_PER_CRITERION), _SECONDS_SIGMA, (n, n_criteria))
    tenths = np.rint(np.clip(spent, 2.0, 900.0) * 10).astype(np.int64)
    done = np.cumsum(tenths, axis=1) * 100_000
    second = np.flatnonzero(sessions.side_pos == 1)
    done[second] += done[second - 1, -1:]
    return tenths / 10, done


# --------------------------------------------------------------------------- votes


def _votes(rng: np.random.Generator, s: SynthSettings, sessions: _Sessions, answers: _Answers,
           scores: np.ndarray, crit: _Criteria) -> tuple[np.ndarray, np.ndarray]:
    """Choice per review (0 = A, 1 = B, 2 = tie, 3 = both_bad), and the side
    holding the review's last rating (the vote comes after it)."""
    side_a, side_b = _review_sides(sessions)
    a, b = sessions.answer_a, sessions.answer_b
    harm = scores[:, crit.harm].astype(float)
    acc = scores[:, crit.acc].astype(float)
    logit = (s.length_coef * (answers.log_chars[a] - answers.log_chars[b])
             + s.harmlessness_coef * (harm[side_a] - harm[side_b])
             + s.left_bias_logit * np.where(sessions.left_is_a, 1.0, -1.0))
    poor = -(harm[side_a] + harm[side_b] + acc[side_a] + acc[side_b]) / 4
    bad_offset = s.both_bad_poor_coef * poor
    p_bad = expit(_solve_intercept(bad_offset, s.both_bad_rate) + bad_offset)
    tie_offset = -np.abs(logit)
    p_tie = (1 - p_bad) * expit(_solve_intercept(tie_offset, s.tie_rate, 1 - p_bad) + tie_offset)
    u = rng.random(len(a))
    decided = np.where(rng.random(len(a)) < expit(logit), 0, 1)
    choice = np.where(u < p_bad, 3, np.where(u < p_bad + p_tie, 2, decided)).astype(np.int8)
    return choice, np.maximum(side_a, side_b)


def _review_sides(sessions: _Sessions) -> tuple[np.ndarray, np.ndarray]:
    """Side index of answer A and of answer B for each review."""
    left = np.empty(sessions.n_reviews, dtype=np.int64)
    is_left = (sessions.side_unit < sessions.n_reviews) & (sessions.side_pos == 0)
    left[sessions.side_unit[is_left]] = np.flatnonzero(is_left)
    return (np.where(sessions.left_is_a, left, left + 1),
            np.where(sessions.left_is_a, left + 1, left))


# --------------------------------------------------------------------------- assembly


@dataclass(frozen=True)
class _World:
    """Everything drawn, before it becomes tables."""

    settings: SynthSettings
    design: _Design
    crit: _Criteria
    quality: np.ndarray
    spec: _Specialties
    effect: np.ndarray
    """Specialty x criterion latent offset."""
    interaction: np.ndarray
    cases: _Cases
    answers: _Answers
    raters: _Raters
    sessions: _Sessions
    scores: np.ndarray
    choice: np.ndarray
    vote_side: np.ndarray
    spent: np.ndarray
    done: np.ndarray


def generate_from(settings: SynthSettings, *, progress: Progress | None = None) -> Snapshot:
    """A synthetic snapshot from explicit settings (see :func:`generate`)."""
    step = progress or _quiet
    step("entities", 0.0)
    rng = _streams(settings.seed)
    rubric = load_rubric()
    world = _draw(rng, settings, rubric.ids, step)
    step("tables", 0.6)
    tables = _tables(world, rng["labels"], rubric_to_rows(rubric))
    step("planted truths", 0.9)
    meta = {"source": "synthetic (clinieval.synth)", "generator": _generator_meta(world),
            "planted": _planted(world, tables),
            "rubric": {"rubric_id": rubric.rubric_id, "version": rubric.version},
            # Synthetic raters are pseudonyms already; exports keep them stable.
            "rater_ids": "pseudonymous"}
    snapshot = Snapshot.from_tables(tables, meta=meta, source="synthetic")
    step("done", 1.0)
    return snapshot


def _quiet(stage: str, fraction: float) -> None:
    """The default progress callback: say nothing."""


def _draw(rng: dict[str, np.random.Generator], s: SynthSettings, criterion_ids: tuple[str, ...],
          step: Progress) -> _World:
    crit = _criteria(criterion_ids, s.leniency_sd, s.consensus_drift)
    d = _design(s, len(criterion_ids))
    quality = _quality(rng["models"], crit)
    spec = _specialties(rng["specialties"], d.n_specialties)
    interaction = rng["models"].normal(0, _INTERACTION_SD,
                                       (len(_MODELS), len(spec.names), len(criterion_ids)))
    cases = _cases(rng["cases"], d.n_cases, spec, s.consensus_drift)
    answers = _answers(rng["answers"], d.n_cases, s.answers_per_case, crit)
    mix = np.bincount(cases.specialty[answers.case] * len(_MODELS) + answers.model,
                      minlength=len(spec.names) * len(_MODELS)).reshape(len(spec.names), -1)
    effect = _specialty_effects(rng["specialties"], spec, quality, interaction, crit, mix)
    raters = _raters(rng["raters"], d.n_raters, spec, s.leniency_sd)
    step("sessions", 0.15)
    sessions = _sessions(rng["sessions"], d, s, cases, answers, raters)
    step("scores", 0.3)
    scores = _scores(rng["scores"], sessions, cases, answers, raters, quality, effect,
                     interaction, crit)
    step("votes", 0.45)
    choice, vote_side = _votes(rng["votes"], s, sessions, answers, scores, crit)
    spent, done = _seconds(rng["times"], sessions, len(criterion_ids))
    return _World(s, d, crit, quality, spec, effect, interaction, cases, answers, raters, sessions,
                  scores, choice, vote_side, spent, done)


# --------------------------------------------------------------------------- tables

_TS = pa.timestamp("us", tz="UTC")


def _ids(prefix: str, n: int) -> pa.Array:
    """``prefix`` + zero-padded 1..n, e.g. case-0001."""
    digits = pc.cast(pa.array(np.arange(1, n + 1)), pa.string())
    return pc.binary_join_element_wise(prefix, pc.utf8_lpad(digits, width=len(str(n)),
                                                            padding="0"), "")


def _pick(values: tuple[str, ...] | list[str], index: np.ndarray) -> pa.Array:
    return pa.array(list(values), pa.string()).take(pa.array(index))


def _micros(w: _World, micros: np.ndarray) -> pa.Array:
    """Timestamps from integer microseconds after the study start."""
    origin = int(_date(w.settings.start).timestamp()) * 1_000_000
    return pa.array(origin + micros.astype(np.int64), _TS)


def _tables(w: _World, rng: np.random.Generator, criteria_rows: list[dict]) -> dict[str, pa.Table]:
    case_ids = _ids("case-", w.design.n_cases)
    answer_ids = _ids("ans-", len(w.answers.case))
    rater_ids = _rater_ids(rng, w.design.n_raters)
    return {
        "studies": _studies_table(w),
        "cases": _cases_table(w, rng, case_ids),
        "models": _models_table(),
        "answers": _answers_table(w, rng, answer_ids, case_ids),
        "raters": _raters_table(w, rng, rater_ids),
        "criteria": pa.Table.from_pylist(criteria_rows),
        "ratings": _ratings_table(w, answer_ids, rater_ids),
        "preferences": _preferences_table(w, rng, case_ids, answer_ids, rater_ids),
    }


def _rater_ids(rng: np.random.Generator, n: int) -> pa.Array:
    """Pseudonymous ids: random distinct hex numbers, not ranks."""
    width = max(6, len(f"{16 * n:x}"))
    numbers = rng.choice(16 ** width, n, replace=False)
    return pa.array([f"rater-{v:0{width}x}" for v in numbers.tolist()], pa.string())


def _studies_table(w: _World) -> pa.Table:
    return pa.table({
        "study_id": [STUDY_ID], "name": ["Synthetic MOOVE-like study"],
        "description": [f"Generated by clinieval.synth {GENERATOR_VERSION} "
                        f"(seed {w.settings.seed}, scale {w.settings.scale})"],
        "blinded": [True], "created_at": _micros(w, np.zeros(1, np.int64)),
    })


def _cases_table(w: _World, rng: np.random.Generator, case_ids: pa.Array) -> pa.Table:
    n, spec = w.design.n_cases, w.spec
    specialty = _pick(spec.names, w.cases.specialty)
    risk = np.clip(spec.risk[w.cases.specialty] + rng.integers(-1, 2, n), 1, 5)
    return pa.table({
        "case_id": case_ids, "study_id": pa.array([STUDY_ID] * n),
        "prompt": _prompts(rng, specialty), "prompt_words": w.cases.words,
        "specialty": specialty,
        "category": _pick(_CATEGORIES, rng.choice(len(_CATEGORIES), n, p=_CATEGORY_P)),
        "population": _pick(_POPULATIONS, rng.choice(len(_POPULATIONS), n,
                                                     p=(0.7, 0.15, 0.1, 0.05))),
        "risk_level": risk.astype(np.int8), "language": pa.array(["en"] * n),
        "care_setting": _pick(_SETTINGS, rng.integers(0, len(_SETTINGS), n)),
        "country": _pick(_COUNTRIES, rng.integers(0, len(_COUNTRIES), n)),
        "weight": np.ones(n),
    })


def _prompts(rng: np.random.Generator, specialty: pa.Array) -> pa.Array:
    """One templated sentence per case (no real clinical content)."""
    n = len(specialty)
    age = pc.cast(pa.array(rng.integers(1, 90, n)), pa.string())
    sex = _pick(("female", "male"), rng.integers(0, 2, n))
    complaint = _pick(_COMPLAINTS, rng.integers(0, len(_COMPLAINTS), n))
    question = _pick(_QUESTIONS, rng.integers(0, len(_QUESTIONS), n))
    return pc.binary_join_element_wise("Synthetic case: a ", age, "-year-old ", sex,
                                       " patient seen in ", specialty, " with ", complaint, ". ",
                                       question, "")


def _models_table() -> pa.Table:
    return pa.table({
        "model_id": [m.model_id for m in _MODELS],
        "display_name": [m.display_name for m in _MODELS],
        "version": [m.version for m in _MODELS], "provider": ["synthetic"] * len(_MODELS),
        "price_input_per_m": [m.price_in for m in _MODELS],
        "price_output_per_m": [m.price_out for m in _MODELS],
    })


def _answers_table(w: _World, rng: np.random.Generator, answer_ids: pa.Array,
                   case_ids: pa.Array) -> pa.Table:
    a = w.answers
    n = len(a.case)
    chars = np.clip(np.round(np.exp(a.log_chars)), 40, 40_000).astype(np.int32)
    tokens = np.maximum(1, np.round(chars / 4)).astype(np.int32)
    speed = rng.uniform(30, 120, len(_MODELS))[a.model]  # output tokens per second
    latency = 0.4 + tokens / speed * rng.lognormal(0, 0.2, n)
    prompt_tokens = w.cases.words[a.case] * 1.3
    price_in = np.array([m.price_in for m in _MODELS])[a.model]
    price_out = np.array([m.price_out for m in _MODELS])[a.model]
    return pa.table({
        "answer_id": answer_ids, "case_id": case_ids.take(pa.array(a.case)),
        "model_id": _pick([m.model_id for m in _MODELS], a.model),
        "length_chars": chars, "tokens": tokens, "latency_s": np.round(latency, 3),
        "cost_usd": (prompt_tokens * price_in + tokens * price_out) / 1e6,
        "sample_index": np.zeros(n, dtype=np.int16), "temperature": np.full(n, 0.7),
        "system_prompt_variant": pa.array(["default"] * n),
    })


def _raters_table(w: _World, rng: np.random.Generator, rater_ids: pa.Array) -> pa.Table:
    n = w.design.n_raters
    country_p = np.r_[4.0, 3.0, 2.0, np.ones(len(_COUNTRIES) - 3)]
    org = rng.integers(1, _N_ORGANISATIONS + 1, n)
    return pa.table({
        "rater_id": rater_ids, "specialty": _pick(w.spec.names, w.raters.specialty),
        "country": _pick(_COUNTRIES, rng.choice(len(_COUNTRIES), n, p=country_p / country_p.sum())),
        "organisation": pa.array([f"org-{i:02d}" for i in org.tolist()]),
        "experience_years": np.clip(np.round(rng.gamma(2.0, 6.0, n)), 1, 45).astype(np.int16),
        "role": _pick(_ROLES, rng.choice(len(_ROLES), n, p=_ROLE_P)),
    })


def _ratings_table(w: _World, answer_ids: pa.Array, rater_ids: pa.Array) -> pa.Table:
    """One row per (side, criterion) in time order; the final rows of the last
    (single-answer) session are cut so the total is exact."""
    n, k, ses = w.design.n_ratings, w.design.n_criteria, w.sessions
    unit = ses.side_unit
    review = np.repeat(ses.preference_id[unit], k)[:n]
    micros = (ses.start_s[unit][:, None] * 1_000_000 + w.done).reshape(-1)[:n]
    return pa.table({
        "rating_id": np.arange(1, n + 1, dtype=np.int64),
        "answer_id": answer_ids.take(pa.array(np.repeat(ses.side_answer.astype(np.int32), k)[:n])),
        "rater_id": rater_ids.take(pa.array(np.repeat(ses.rater[unit].astype(np.int32), k)[:n])),
        "criterion_id": pa.array(list(w.crit.ids)).take(
            pa.array(np.tile(np.arange(k, dtype=np.int32), len(unit))[:n])),
        "score": w.scores.reshape(-1)[:n],
        "revision": np.zeros(n, dtype=np.int16),
        "review_id": pa.array(review, pa.int64(), mask=review == 0),
        "time_spent_s": w.spent.reshape(-1)[:n],
        "created_at": _micros(w, micros),
    })


def _preferences_table(w: _World, rng: np.random.Generator, case_ids: pa.Array,
                       answer_ids: pa.Array, rater_ids: pa.Array) -> pa.Table:
    ses = w.sessions
    rows = np.argsort(ses.preference_id[: ses.n_reviews])  # reviews in time order
    think_ms = np.rint(rng.lognormal(np.log(15.0), 0.5, len(rows)) * 1000).astype(np.int64)
    vote_us = ses.start_s[rows] * 1_000_000 + w.done[w.vote_side[rows], -1] + think_ms * 1000
    return pa.table({
        "preference_id": ses.preference_id[rows],
        "case_id": case_ids.take(pa.array(ses.case[rows])),
        "answer_a_id": answer_ids.take(pa.array(ses.answer_a[rows])),
        "answer_b_id": answer_ids.take(pa.array(ses.answer_b[rows])),
        "shown_left": _pick(T.SIDES, np.where(ses.left_is_a[rows], 0, 1)),
        "choice": _pick(T.CHOICES, w.choice[rows]),
        "rater_id": rater_ids.take(pa.array(ses.rater[rows])),
        "created_at": _micros(w, vote_us),
    })


# --------------------------------------------------------------------------- truths


def _expected(w: _World) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Expected mean and Fail share per model x criterion, and Fail share per
    specialty x criterion, given how often each answer was rated (answer
    effects, leniency and rater noise integrated out analytically)."""
    a, m, k = w.answers, len(_MODELS), len(w.crit.ids)
    weight = np.bincount(w.sessions.side_answer, minlength=len(a.case)).astype(float)
    specialty = w.cases.specialty[a.case]
    factor = w.cases.noise_factor[a.case]
    n_spec = len(w.spec.names)
    mean, fail, spec_fail = np.empty((m, k)), np.empty((m, k)), np.empty((n_spec, k))
    for c in range(k):
        mu = w.quality[a.model, c] + w.effect[specialty, c]
        mu = mu + w.interaction[a.model, specialty, c]
        sd = w.crit.total_sd(factor, c)
        p_fail = ndtr((_CUTS[1] - mu) / sd)
        p_mean = sum(ndtr((mu - cut) / sd) for cut in _CUTS) - 2
        fail[:, c] = _weighted_mean(a.model, weight, p_fail, m)
        mean[:, c] = _weighted_mean(a.model, weight, p_mean, m)
        spec_fail[:, c] = _weighted_mean(specialty, weight, p_fail, n_spec)
    return mean, fail, spec_fail, np.bincount(a.model, weights=weight, minlength=m)


def _weighted_mean(group: np.ndarray, weight: np.ndarray, value: np.ndarray, n: int) -> np.ndarray:
    total = np.bincount(group, weights=weight, minlength=n)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.bincount(group, weights=weight * value, minlength=n) / total


def _planted(w: _World, tables: dict[str, pa.Table]) -> dict:
    s, crit = w.settings, w.crit
    mean, fail, spec_fail, rated = _expected(w)
    model_ids = [m.model_id for m in _MODELS]
    present = rated > 0
    log_chars = np.array([m.log_chars for m in _MODELS])
    utility = s.length_coef * log_chars + s.harmlessness_coef * mean[:, crit.harm]
    utility = np.where(present, utility - utility[present].mean(), np.nan)
    safety = [crit.ids[crit.harm], crit.ids[crit.acc]]
    return {
        "fail_threshold": -1,
        "cut_points": _cuts_json(),
        "latent_quality": _by_model(w.quality, crit.ids),
        "expected_mean": _by_model(np.where(present[:, None], mean, np.nan), crit.ids),
        "expected_fail_pct": _by_model(np.where(present[:, None], 100 * fail, np.nan), crit.ids),
        "preference_leader": model_ids[int(np.nanargmax(utility))],
        "safest_model": model_ids[int(np.nanargmin(np.where(present, fail[:, crit.harm],
                                                            np.nan)))],
        "preference_utility": {mid: _num(u) for mid, u in zip(model_ids, utility, strict=True)},
        "length_coef": s.length_coef,
        "harmlessness_coef": s.harmlessness_coef,
        "model_log_chars_mean": {mid: _num(v) for mid, v in zip(model_ids, log_chars,
                                                                 strict=True)},
        "high_risk_specialties": list(HIGH_RISK_SPECIALTIES),
        "low_risk_specialties": list(LOW_RISK_SPECIALTIES),
        "specialty_target_fail_pct": {name: {c: 100 * t for c, t in targets.items()}
                                      for name, targets in _TARGET_FAIL.items()},
        "specialty_expected_fail_pct": {
            name: {c: _num(100 * spec_fail[i, crit.ids.index(c)]) for c in safety}
            for i, name in enumerate(w.spec.names)},
        "specialty_effect": {name: dict(zip(crit.ids, map(_num, w.effect[i]), strict=True))
                             for i, name in enumerate(w.spec.names)},
        "left_bias_logit": s.left_bias_logit,
        **_leniency_truths(w, tables["raters"]),
        "tie_rate": s.tie_rate,
        "both_bad_rate": s.both_bad_rate,
        "both_bad_poor_coef": s.both_bad_poor_coef,
        "rater_noise_sd": dict(zip(crit.ids, map(_num, crit.noise_sd), strict=True)),
        "answer_effect_sd": dict(zip(crit.ids, map(_num, crit.answer_sd), strict=True)),
        "answer_effect_shared": _SHARED_ANSWER,
        "consensus_drift": s.consensus_drift,
        "model_specialty_interaction_sd": _INTERACTION_SD,
    }


def _leniency_truths(w: _World, raters: pa.Table) -> dict:
    """The most lenient and harshest raters among those with enough ratings
    to show it."""
    per_rater = np.bincount(w.sessions.rater[w.sessions.side_unit],
                            minlength=w.design.n_raters) * w.design.n_criteria
    eligible = np.flatnonzero(per_rater >= _LENIENCY_MIN_RATINGS)
    ranked = eligible[np.argsort(-w.raters.leniency[eligible], kind="stable")]
    ids = raters.column("rater_id").to_pylist()
    return {"leniency_sd": w.settings.leniency_sd,
            "leniency_min_ratings": _LENIENCY_MIN_RATINGS,
            "most_lenient_raters": [ids[i] for i in ranked[:5]],
            "harshest_raters": [ids[i] for i in ranked[::-1][:5]],
            "leniency_of_listed": {ids[i]: _num(w.raters.leniency[i])
                                   for i in np.r_[ranked[:5], ranked[::-1][:5]]}}


def _by_model(values: np.ndarray, criterion_ids: tuple[str, ...]) -> dict:
    return {m.model_id: dict(zip(criterion_ids, map(_num, row), strict=True))
            for m, row in zip(_MODELS, values, strict=True)}


def _cuts_json() -> list[float]:
    return [float(c) for c in _CUTS]


def _num(x: float) -> float | None:
    """A JSON-safe rounded number (None for NaN)."""
    return None if not np.isfinite(x) else round(float(x), 6)


def _generator_meta(w: _World) -> dict:
    d = w.design
    return {
        "name": "clinieval.synth", "version": GENERATOR_VERSION, **asdict(w.settings),
        "paper_counts": dict(PAPER_COUNTS),
        "n_cases": d.n_cases, "n_answers": len(w.answers.case), "n_specialties": d.n_specialties,
        "n_single_sessions": d.n_singles, "last_session_unscored_criteria": d.short,
        "notes": [
            "Answers carry no text (answers.text is null).",
            "A prompt is a one-sentence template; prompt_words is the notional prompt length.",
            "Every rating is revision 0: no edit history is simulated.",
            "Diagnostics is sized at about 0.8% of cases (the paper's Diagnostics had 52 "
            "answers) so that its planted risk stands clear of sampling noise.",
            "Ratings from pairwise reviews carry review_id = preference_id; single-answer "
            "sessions have review_id null, and the last one is cut short so the total is exact.",
            "Expected means and Fail% are conditional on which answers were rated how often; "
            "answer effects, rater leniency and noise are integrated out.",
        ],
    }
