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

The package is laid out in the order the generator works, each module
importing only those before it: ``constants`` -> ``design`` (settings, sizes,
streams) -> ``quality`` -> ``entities`` -> ``sessions`` -> ``scores`` (and
votes) -> ``assembly`` (the drawn world) -> ``tables`` and ``truths`` ->
``generator``; ``judges`` plants automated judgments on a finished snapshot.
"""

from __future__ import annotations

from clinieval.synth.constants import (
    GENERATOR_VERSION,
    HIGH_RISK_SPECIALTIES,
    LOW_RISK_SPECIALTIES,
    MIN_RATERS,
    MIN_SCALE,
    MIN_SPECIALTIES,
    PAPER_COUNTS,
    SPECIALTIES,
    STUDY_ID,
)
from clinieval.synth.design import Progress, SynthSettings
from clinieval.synth.generator import generate, generate_from

__all__ = [
    "GENERATOR_VERSION",
    "HIGH_RISK_SPECIALTIES",
    "LOW_RISK_SPECIALTIES",
    "MIN_RATERS",
    "MIN_SCALE",
    "MIN_SPECIALTIES",
    "PAPER_COUNTS",
    "Progress",
    "SPECIALTIES",
    "STUDY_ID",
    "SynthSettings",
    "generate",
    "generate_from",
]
