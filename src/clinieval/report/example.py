"""Made-up audit results for tests, demos and timing of the renderer.

The numbers are random (seeded) and mean nothing; they only have the shapes
that :mod:`clinieval.audit.result` documents.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from clinieval.audit.result import (
    AuditResult,
    Bars,
    Figure,
    Forest,
    Heatmap,
    Histogram,
    Line,
    Scatter,
    Section,
)
from clinieval.audit.settings import AuditSettings

CRITERIA = ["harmlessness", "accuracy", "completeness", "reasoning", "context",
            "context_seeking", "uncertainty", "communication", "fairness"]
SPECIALTY_WORDS = ["Cardiology", "Emergency medicine", "Obstetrics and gynaecology", "Oncology",
                   "Paediatrics", "Psychiatry", "General practice", "Infectious disease",
                   "Nephrology", "Neurology", "Endocrinology", "Dermatology", "Haematology",
                   "Geriatrics", "Gastroenterology", "Pulmonology", "Rheumatology",
                   "Ophthalmology", "Paediatric intensive care"]


def small_result() -> AuditResult:
    """Three sections: a summary table with intervals, a heatmap and a forest
    plot, and one skipped section."""
    summary = pd.DataFrame({
        "model": ["model-a", "model-b", "model-c"],
        "mean": [0.82, 0.41, float("nan")],
        "mean_lo": [0.77, 0.30, float("nan")],
        "mean_hi": [0.86, 0.52, float("nan")],
        "fail_pct": [4.25, 12.5, 30.0],
        "fail_pct_lo": [2.1, 9.0, 20.5],
        "fail_pct_hi": [7.9, 16.8, 41.2],
        "n": [120, 96, 0],
        "ranked": [True, True, False],
        "p": [0.0004, 0.2, None],
    })
    heatmap = Figure("fail_heatmap", "Fail% by model and specialty", Heatmap(
        rows=["model-a", "model-b", "model-c"],
        cols=["cardiology", "oncology", "paediatrics", "psychiatry"],
        values=[[4.0, 8.0, None, 2.5], [12.0, 25.0, 7.5, 10.0], [30.0, 55.0, 41.0, None]],
        n=[[40, 35, 0, 12], [44, 38, 31, 33], [40, 30, 29, 0]],
        value_label="Fail %", scale="percent", mask_below=30,
    ), caption="Hatched cells have fewer than 30 answers.")
    forest = Figure("bt_forest", "Bradley-Terry strength", Forest(
        labels=["model-a", "model-b", "model-c"], est=[0.6, 0.1, -0.7],
        lo=[0.4, -0.1, -0.95], hi=[0.8, 0.3, -0.45], n=[210, 190, 200],
        x_label="log-strength (centred)", ref=0.0,
    ), caption="Points: estimates; whiskers: 95% bootstrap intervals.")
    sections = [
        Section("model_summary", "Model summary", "Model A fails least often on Harmlessness.",
                tables={"harmlessness": summary}, figures=[heatmap],
                values={"leader": "model-a", "gap_pp": 8.25, "missing": float("nan")}),
        Section("bradley_terry", "Bradley-Terry", "Model A is preferred most often.",
                figures=[forest], values={"strength": {"model-a": 0.6, "model-b": 0.1}}),
        Section("position_bias", "Position bias",
                skipped="No preference records which answer was shown on the left."),
    ]
    return AuditResult(settings=AuditSettings(), sections=sections,
                       headlines=["Model A has the lowest Harmlessness Fail% (4.2%).",
                                  "The preference leaderboard tracks Harmlessness here."],
                       snapshot={"checksum": "3f9a0c1d2e4b5a6978", "counts": {
                           "models": 3, "cases": 40, "answers": 120, "ratings": 2160,
                           "preferences": 600}},
                       version="0.1.0")


def large_result(seed: int = 0) -> AuditResult:
    """Paper-sized: 13 models x 76 specialties, 9 criteria; 15 figures, 22 tables."""
    rng = np.random.default_rng(seed)
    models = [f"model-{i:02d}" for i in range(13)]
    specialties = [f"{SPECIALTY_WORDS[i % 19]} {i:02d}" for i in range(76)]
    sections = [
        Section(f"criterion_{c}", f"Criterion: {c}", f"Per-model results for {c}.",
                tables={"by_model": _model_table(rng, models),
                        "by_specialty": _specialty_table(rng, specialties),
                        "by_population": _model_table(rng, ["adult", "child", "pregnant"])},
                figures=[_forest(rng, f"{c}_forest", models)])
        for c in CRITERIA[:6]
    ]
    sections += [
        Section("specialty", "Specialty stratification", "No-go zones by specialty.",
                tables={"specialties": _specialty_table(rng, specialties)},
                figures=[_heatmap(rng, "nogo", models, specialties, "Fail %"),
                         _heatmap(rng, "dispersion", models, CRITERIA, "mean within-answer std"),
                         _heatmap(rng, "mean_scores", models, CRITERIA, "mean score")]),
        Section("alignment", "Preference-safety alignment", "Alignment per criterion.",
                tables={"alignment": _model_table(rng, CRITERIA)},
                figures=[_scatter(rng, models), _bars(rng, models)]),
        Section("length", "Length bias", "Longer answers win more often.",
                tables={"length": _model_table(rng, models)},
                figures=[_hist(rng), _line(rng), _scatter(rng, models, key="length_scatter")]),
        Section("raters", "Rater view", "Leniency per rater.",
                tables={"raters": _model_table(rng, [f"rater-{i:03d}" for i in range(300)])},
                figures=[_bars(rng, [f"rater-{i:03d}" for i in range(40)], key="rater_bars")]),
        Section("position_bias", "Position bias", skipped="No left/right information."),
    ]
    return AuditResult(AuditSettings(), sections, ["A made-up headline."],
                       {"checksum": "0" * 64, "counts": {"models": 13, "ratings": 37_500_000}},
                       "0.1.0")


def _ci(rng: np.random.Generator, k: int, centre: float, spread: float):
    est = rng.normal(centre, spread, k)
    half = rng.uniform(0.05, 0.3, k) * max(spread, 1.0)
    return est, est - half, est + half


def _model_table(rng: np.random.Generator, labels: list[str]) -> pd.DataFrame:
    mean, lo, hi = _ci(rng, len(labels), 0.8, 0.4)
    fail, fail_lo, fail_hi = _ci(rng, len(labels), 12.0, 4.0)
    return pd.DataFrame({"label": labels, "mean": mean, "mean_lo": lo, "mean_hi": hi,
                         "fail_pct": fail, "fail_pct_lo": fail_lo, "fail_pct_hi": fail_hi,
                         "n": rng.integers(20, 5000, len(labels))})


def _specialty_table(rng: np.random.Generator, specialties: list[str]) -> pd.DataFrame:
    n = rng.integers(5, 400, len(specialties))
    dangerous, lo, hi = _ci(rng, len(specialties), 15.0, 6.0)
    return pd.DataFrame({"specialty": specialties, "n": n, "dangerous_pct": dangerous,
                         "dangerous_pct_lo": lo, "dangerous_pct_hi": hi, "ranked": n >= 30})


def _heatmap(rng, key: str, rows: list[str], cols: list[str], label: str) -> Figure:
    values = rng.uniform(-1.5, 1.8, (len(rows), len(cols))) if "score" in label else \
        rng.uniform(0, 60, (len(rows), len(cols)))
    n = rng.integers(0, 120, (len(rows), len(cols)))
    grid = [[None if c == 0 else round(float(v), 3) for v, c in zip(r, m, strict=True)]
            for r, m in zip(values, n, strict=True)]
    return Figure(key, f"{label} by model", Heatmap(
        rows=rows, cols=cols, values=grid, n=n.tolist(), value_label=label,
        scale="diverging" if "score" in label else "percent", mask_below=30),
        caption="Made-up values.")


def _forest(rng, key: str, labels: list[str]) -> Figure:
    est, lo, hi = _ci(rng, len(labels), 0.0, 0.5)
    return Figure(key, "Strength", Forest(
        labels=labels, est=est.tolist(), lo=lo.tolist(), hi=hi.tolist(),
        n=rng.integers(50, 900, len(labels)).tolist(), x_label="log-strength", ref=0))


def _scatter(rng, labels: list[str], key: str = "alignment_scatter") -> Figure:
    x, x_lo, x_hi = _ci(rng, len(labels), 0.0, 0.5)
    y, y_lo, y_hi = _ci(rng, len(labels), 0.8, 0.3)
    return Figure(key, "Preference vs Harmlessness", Scatter(
        x=x.tolist(), y=y.tolist(), labels=labels, x_lo=x_lo.tolist(),
        x_hi=x_hi.tolist(), y_lo=y_lo.tolist(), y_hi=y_hi.tolist(),
        x_label="BT strength", y_label="Harmlessness mean", fit=True))


def _bars(rng, labels: list[str], key: str = "leaderboard") -> Figure:
    est, lo, hi = _ci(rng, len(labels), 10.0, 4.0)
    return Figure(key, "Safety-critical Fail%", Bars(
        labels=labels, est=est.tolist(), lo=lo.tolist(), hi=hi.tolist(),
        n=rng.integers(50, 900, len(labels)).tolist(), y_label="Fail %"))


def _hist(rng) -> Figure:
    return Figure("length_hist", "Answer length: winners vs losers", Histogram(
        series={"winner": rng.lognormal(7, 0.5, 5000).tolist(),
                "loser": rng.lognormal(6.8, 0.5, 5000).tolist()},
        x_label="characters", log_x=True))


def _line(rng) -> Figure:
    x = np.arange(8) * 50 + 25
    y = 0.5 + 0.001 * x + rng.normal(0, 0.02, 8)
    return Figure("drift", "Disagreement by prompt length", Line(
        x=x.tolist(), y=y.tolist(), lo=(y - 0.05).tolist(), hi=(y + 0.05).tolist(),
        x_label="prompt words", y_label="mean within-answer std"))
