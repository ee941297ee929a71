"""A planted rubric judge for judge calibration (issue 32): it scores every
rated answer on the safety-critical criteria, with a known quality and bias
per specialty, and is blind to harms in two specialties.

Its score of an answer and criterion is the harshest of the clinicians'
scores there (a cautious reader: it fails what any of them failed), shifted
by the specialty's bias, plus normal noise of the specialty's SD, rounded
and clipped to the scale. Against each clinician such a judge catches the
harms that clinician flags and errs less often than the other clinicians do
(on an answer one of three clinicians failed it disagrees with two, as the
clinicians disagree among themselves; on one two of three failed, with one
against their two), so where its noise is small it is a judge a licence
should grant, given enough doubly-rated answers. A judge built on the
clinicians' mean instead misses the lone clinician's fail, so its harm
recall against each clinician stays at the clinicians' own (about 0.5 to
0.9), under the licence's 0.8 floor. In the two blind specialties (the two
with the most answers, so that a licence can be decided there) it never
scores at or below the failure threshold: it passes every harm. Its draws
come from their own random stream, so the other planted judges' draws do
not move when it is added.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from clinieval.contract.vocabulary import SCORE_MAX, SCORE_MIN
from clinieval.snapshot import Snapshot

JUDGE = "rubric-calibration-judge"
STREAM = 32
"""Its random stream: ``default_rng([plan seed, STREAM])``."""
BLIND = 2
BASIS = "min"
"""What the judge's score follows per answer: the clinicians' harshest score."""
NOISE_SD = (0.15, 0.6)
"""Good and fair specialties: the noise SD of the judge's score, in score points."""
BIAS = (-0.1, 0.1)
"""Range of the per-specialty bias of its score, in score points."""


def calibration_judge(seed: int, threshold: int, unparsed: float, snap: Snapshot,
                      base) -> tuple[pd.DataFrame, dict]:
    """The judge's rows (``base(answer_ids, judge, kind, criterion)`` gives
    the common columns) and its planted truths."""
    rng = np.random.default_rng([seed, STREAM])
    basis, specialty = _clinician_basis(snap)
    names = sorted(specialty.unique())
    sizes = specialty.value_counts()
    blind = sorted(sizes.sort_values(ascending=False, kind="stable").index[:BLIND])
    noise = dict(zip(names, rng.choice(NOISE_SD, len(names)).tolist(), strict=True))
    bias = dict(zip(names, rng.uniform(*BIAS, len(names)).tolist(), strict=True))
    spec = specialty.reindex(basis["answer_id"]).to_numpy()
    raw = (basis["score"].to_numpy() + pd.Series(spec).map(bias).to_numpy()
           + pd.Series(spec).map(noise).to_numpy() * rng.standard_normal(len(basis)))
    score = np.clip(np.round(raw), SCORE_MIN, SCORE_MAX)
    score = np.where(np.isin(spec, blind), np.maximum(score, threshold + 1), score)
    frame = base(basis["answer_id"].to_numpy(), JUDGE, "rubric", basis["criterion_id"].to_numpy())
    frame["score"] = score.astype(float)
    bad = rng.random(len(frame)) < unparsed
    frame.loc[bad, "score"] = None
    frame.loc[bad, "parse_status"] = "unparsed"
    truth = {"judge": JUDGE, "criteria": sorted(basis["criterion_id"].unique().tolist()),
             "blind_specialties": blind, "noise_sd": noise, "bias": bias,
             "threshold": threshold}
    return frame, truth


def _clinician_basis(snap: Snapshot) -> tuple[pd.DataFrame, pd.Series]:
    """The clinicians' harshest score per rated answer and safety-critical
    criterion (:data:`BASIS`), and each answer's specialty."""
    criteria = snap["criteria"].select(["criterion_id", "safety_critical"]).to_pandas()
    safety = criteria.loc[criteria["safety_critical"].astype(bool), "criterion_id"]
    ratings = snap["ratings"].select(["answer_id", "criterion_id", "score"]).to_pandas()
    ratings = ratings[ratings["criterion_id"].isin(safety)]
    basis = ratings.groupby(["answer_id", "criterion_id"], sort=True)["score"].agg(BASIS)
    answers = snap["answers"].select(["answer_id", "case_id"]).to_pandas()
    cases = snap["cases"].select(["case_id", "specialty"]).to_pandas()
    specialty = answers.merge(cases, on="case_id").set_index("answer_id")["specialty"]
    return basis.reset_index(), specialty
