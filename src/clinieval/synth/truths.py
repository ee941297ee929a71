"""The planted truths and the generator's own record, for ``meta``.

Nothing here draws: expected means and Fail shares are computed
analytically from the drawn world, conditional on which answers were rated
how often (answer effects, leniency and noise integrated out).
"""

from __future__ import annotations

from dataclasses import asdict

import numpy as np
import pyarrow as pa
from scipy.special import ndtr

from clinieval.synth.assembly import _World
from clinieval.synth.constants import (
    _CUTS,
    _INTERACTION_SD,
    _LENIENCY_MIN_RATINGS,
    _MODELS,
    _SHARED_ANSWER,
    _TARGET_FAIL,
    GENERATOR_VERSION,
    HIGH_RISK_SPECIALTIES,
    LOW_RISK_SPECIALTIES,
    PAPER_COUNTS,
)


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
