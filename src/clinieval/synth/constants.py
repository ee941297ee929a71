"""Fixed inputs of the synthetic generator: the paper's sizes, the invented
models, the specialties and their planted risks, noise levels and the pools
labels are drawn from.

Every value here feeds the draws: changing one changes the tables that every
seed produces, so the values are data of the generator, not tuning knobs
(those are in :class:`clinieval.synth.design.SynthSettings`).
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

GENERATOR_VERSION = "1.0.0"

PAPER_COUNTS = {"models": 13, "specialties": 76, "raters": 736, "ratings": 375_614,
                "preferences": 18_685}
"""Sizes of the MOOVE snapshot (paper, Methods); ``scale=1`` reproduces them."""

MIN_SCALE = 0.001
MIN_RATERS = 20
MIN_SPECIALTIES = 8
STUDY_ID = "moove-synthetic"


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
