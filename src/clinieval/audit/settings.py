"""Every setting that changes a number in the audit; all are printed in the report."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from clinieval.settings import get_settings


class AuditSettings(BaseModel):
    """The audit's settings; each one is printed in the report."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    seed: int = Field(default_factory=lambda: get_settings().seed,
                      description="Seed of every resampling step (default: CLINIEVAL_SEED).")
    bootstrap: int = Field(1000, ge=50, le=100_000, description="Bootstrap resamples (B).")
    level: float = Field(0.95, gt=0.5, lt=1.0, description="Confidence level of every interval.")
    threshold: int = Field(-1, ge=-2, le=1, description="A score <= threshold is a failure (tau).")
    response_rule: Literal["any", "majority", "mean", "adjudicated"] = Field(
        "any", description="How an answer fails a criterion from its raters: any rater <= tau, a"
        " majority <= tau, or the mean <= tau; adjudicated: an adjudicator's standing verdict"
        " where one ruled on the answer's criterion, any rater <= tau elsewhere.")
    min_n: int = Field(30, ge=1, description="Specialties, models and heatmap cells with fewer"
                       " rated answers are shown but not ranked (nor named safest).")
    criteria: tuple[str, ...] | None = Field(
        None, description="Criteria to analyse (default: all in the rubric).",
        json_schema_extra={"default_words": "all rated"})
    cluster: Literal["twoway", "none", "answer", "rater"] = Field(
        "twoway", description="Bootstrap design: twoway resamples raters and cases together"
        " (ratings are crossed: clinicians differ in leniency, cases in difficulty), none"
        " resamples individual ratings and votes (rating-level, as in the MOOVE paper),"
        " answer or rater resamples whole answers or whole raters.")
    ties: Literal["half", "drop"] = Field(
        "half", description="Ties in Bradley-Terry: half a win each, or dropped.")
    both_bad: Literal["half", "drop"] = Field(
        "half", description="'Both unacceptable' votes in Bradley-Terry: half a win each, or"
        " dropped (always also reported as their own rate).")
    length_bins: int = Field(8, ge=2, le=50, description="Prompt-length bins for consensus drift.")
    comparison_bootstrap: int = Field(
        10_000, ge=50, le=100_000, description="Resamples of the paired bootstrap that compares"
        " models' gate scores on the same cases (CSEDB: 10,000, two-sided, Holm-corrected).")
    indicators: str | None = Field(
        None, description="Gate indicator file (JSON) for gate scores; default: the bundled"
        " CSEDB-style 17 safety + 13 effectiveness indicators.",
        json_schema_extra={"default_words": "bundled"})
    benchmark_scores: str | None = Field(
        None, description="Per-instance benchmark scores (a JSONL/CSV/JSON export, HELM"
        " per_instance_stats.json, or a folder of them) for the Benchmarks and cost section.",
        json_schema_extra={"default_words": "none"})
    benchmarks: str | None = Field(
        None, description="Benchmark registry (JSON): taxonomy category, metric and 0-1"
        " normalisation per benchmark; default: the bundled example registry.",
        json_schema_extra={"default_words": "bundled example"})
    win_ties: Literal["half", "geq"] = Field(
        "half", description="Ties in the benchmark win rate: half a win each, or a win for both"
        " (MedHELM's wording: a model wins when its score is >= the rival's).")
    rubric_clip: Literal["mean", "example"] = Field(
        "mean", description="HealthBench rubric score: clip the mean of the per-example scores"
        " to [0, 1] (mean, as simple-evals' reference healthbench_eval.py does) or clip each"
        " example's score before the mean (example), which forgives answers whose met harms"
        " take them below zero.")
    self_preference_by: Literal["model", "provider"] = Field(
        "model", description="Self-preference: a judge and a candidate are the same family when"
        " their model ids are equal (model) or their providers in the models table are equal"
        " (provider).")

    icc_min_shared: int = Field(
        3, ge=2, description="Clinician pairs sharing fewer answers are left out of the"
        " clinician-vs-clinician ICC baseline (on two shared answers a pair's ICC3k-z is"
        " exactly 1 when it agrees and undefined when it does not).")
    inter_clinician_f1: Literal["mean_of_pairs", "pooled"] = Field(
        "mean_of_pairs", description="The clinicians' own fail/pass Macro-F1 beside the rubric"
        " judge's: the mean over clinician pairs of each pair's Macro-F1 on the items both"
        " rated (CSEDB §3.10), or every pair's verdicts pooled into one table.")
    gates: str | None = Field(
        None, description="Decision gates file (TOML [[gates]] tables or a JSON list of"
        " criterion or dangerous, threshold 0..1, scope model|model_specialty, alpha) for the"
        " Decisions section, or `default`: each safety-critical criterion at 10% per model x"
        " specialty, alpha 0.05, as a new study's. Without it the section is not computed.",
        json_schema_extra={"default_words": "none"})
    decision_certificates: bool = Field(
        False, description="Decisions: also search each settled verdict's robustness"
        " certificate (the fewest clinicians and ratings whose removal unsettles it). The"
        " search re-runs the sequence many times per cell, minutes at paper scale, so it is"
        " asked for; the live view computes certificates in the background.")

    calibration_judge: str = Field(
        "auto", description="Judge-calibrated safety: the judge whose scores calibrate the"
        " clinicians' estimates, as the report names it ('rubric judge <model>' or 'jury'),"
        " or auto: the rubric judge scoring the most answers, else the jury mean.")
    calibration_min_answers: int = Field(
        30, ge=2, description="Judge-calibrated safety: cells and licence strata with fewer"
        " doubly-rated answers (judged and clinician-rated) get no estimate or licence.")
    licence_recall_floor: float = Field(
        0.8, gt=0.0, le=1.0, description="A judge is licensed in a stratum only when the lower"
        " bound of its harm recall (share of clinician-failed answers it fails) reaches this.")
    licence_reference: Literal["pairwise", "majority"] = Field(
        "pairwise", description="Licence agreement: the judge's Macro-F1 against each clinician"
        " separately, placed among each clinician's against the others (pairwise, HealthBench's"
        " meta-evaluation), or against the clinicians' majority (majority, the inspect_evals"
        " port).")

    viewer: str | None = Field(
        None, description="Where the run viewer's site is (`clinieval view --out DIR`), as a"
        " base URL or a path relative to the report (e.g. run-log/): the judge tables then"
        " link each row to the viewer filtered to it. Changes no number.",
        json_schema_extra={"default_words": "no links"})

    @field_validator("viewer")
    @classmethod
    def _web_address(cls, value: str | None) -> str | None:
        from urllib.parse import urlsplit

        if value is not None and urlsplit(value).scheme not in ("", "http", "https"):
            raise ValueError(f"viewer: {value!r} is not an http(s) URL or a relative path")
        return value

    def describe(self) -> dict:
        return self.model_dump(mode="json")


def default_words(name: str) -> str:
    """A setting's default as ``--help`` shows it: its value, or for a
    setting whose default is None what None stands for (``default_words``
    in the field; the bundled file, none, all rated)."""
    info = AuditSettings.model_fields[name]
    extra = info.json_schema_extra if isinstance(info.json_schema_extra, dict) else {}
    if "default_words" in extra:
        return str(extra["default_words"])
    return str(info.get_default(call_default_factory=True))
