"""Planted automated judgments for a synthetic snapshot.

:func:`plant_judgments` adds to a :func:`clinieval.synth.generate` snapshot
judgments whose truths are known and written to ``meta["planted"]["judges"]``:

1. **A jury correlated with clinicians.** Three jurors score three axes on
   1..5 from ``rho * z + sqrt(1 - rho^2) * noise`` plus a small per-score
   jitter, where ``z`` is the standardised mean of the clinicians' ratings
   of the answer and the noise is shared within the answer. The jury's
   composite then correlates with the clinicians' at about ``rho``, so
   ICC3k-z (k = 2) is about ``2 rho / (1 + rho)`` (Spearman-Brown), a little
   lower after rounding to the Likert scale.
2. **A pairwise judge with a position bias.** Each voted pair is judged in
   both orders; with probability ``follow_first`` the judge names whichever
   answer it saw first, otherwise the one the clinicians rated higher. The
   first-shown answer then wins ``(1 + follow_first) / 2`` of decided calls.
3. **A rubric judge** that scores each rated answer and criterion at the
   clinicians' rounded mean, moved one step with probability ``rubric_noise``.
4. **Gate rules and a model whose Worst@k collapses.** ``gate_cases`` cases
   get a CSEDB indicator (the case's subcategory) and rules; three models
   answer each ``samples`` times. The steady model meets the same rules in
   every sample (Worst@k equals its mean for every k); the collapsing model
   meets every rule with probability ``1 - q`` and none otherwise, so its
   mean is ``1 - q`` and its Worst@k is ``(1 - q)^k``; the third model meets
   each rule independently.
5. **HealthBench-style rules** on ``rubric_rule_answers`` answers of cases
   outside the gates: rules worth +5 and +3 met with probability
   ``rule_met``, one worth -4 met with probability ``harm_met``; the
   expected clipped score is recorded.
6. **A self-preferring juror.** The first juror is the first candidate
   model itself and adds ``self_boost`` Likert points (before rounding and
   clipping) to its scores of that model's answers; the second juror is the
   second candidate model, unbiased (a control). The realised boost, the
   mean change of the first juror's composite on its own answers after
   rounding and clipping, is recorded as ``self_preference``.
7. **Parse failures.** A share ``unparsed`` of judge calls keeps its raw
   output with status ``unparsed`` and no score.
8. **A judge to calibrate** (:mod:`clinieval.synth.calibration_judge`): a
   rubric judge on every rated answer's safety-critical criteria with a
   known per-specialty quality and bias, blind to harms in two specialties;
   its truths are ``meta["planted"]["judges"]["calibration"]``.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np
import pandas as pd
import pyarrow as pa

from clinieval.catalogs import load_indicators
from clinieval.contract.vocabulary import SCORE_MAX, SCORE_MIN, SIDES
from clinieval.runs.prompt_files import load_prompt
from clinieval.snapshot import Snapshot
from clinieval.synth.calibration_judge import calibration_judge

JURY_AXES = tuple(load_prompt("jury")["axes"])
"""The axes of the jury prompt the planted jurors answer (one source)."""
UNPARSED_TEXT = "I think the answer is fine."


@dataclass(frozen=True)
class JudgePlan:
    """The planted settings (all recorded in the snapshot's meta)."""

    seed: int = 0
    rho: float = 0.6
    jury_answers: int = 600
    jurors: int = 3
    follow_first: float = 0.5
    pairs: int = 600
    rubric_noise: float = 0.2
    rubric_answers: int = 600
    gate_cases: int = 120
    samples: int = 5
    collapse_q: float = 0.25
    steady_p: float = 0.75
    unparsed: float = 0.03
    rubric_rule_answers: int = 300
    rule_met: float = 0.7
    harm_met: float = 0.2
    self_boost: float = 1.0
    threshold: int = -1
    """A score at or below it fails (the blind calibration judge never goes there)."""
    calibration_judge: bool = False
    """Plant the judge to calibrate (item 8; ``clinieval synth --judgments`` does)."""


def plant_judgments(snap: Snapshot, plan: JudgePlan | None = None) -> Snapshot:
    """``snap`` with planted judgments, gate answers and gate cases added."""
    plan = plan or JudgePlan()
    rng = np.random.default_rng([plan.seed, 11])
    clin = _clinician_means(snap)
    tables = dict(snap.tables)
    jury, self_truth = _jury(rng, plan, clin, snap)
    rows = [jury, _pairwise(rng, plan, snap, clin), _rubric(rng, plan, snap)]
    cases, answers, gate_rows, gate_truth = _gates(rng, plan, snap)
    tables["cases"], tables["answers"] = cases, answers
    health, health_truth = _healthbench(rng, plan, snap["answers"], cases)
    frame = pd.concat(rows + [gate_rows, health], ignore_index=True)
    frame = _unparse(rng, plan, frame)
    frame, calibration_truth = _with_calibration_judge(plan, snap, frame)
    frame["judgment_id"] = np.arange(1, len(frame) + 1)
    frame["run_id"] = "synthetic-judges"
    frame["created_at"] = pd.Timestamp("2025-09-01", tz="UTC")
    tables["judgments"] = pa.Table.from_pandas(frame, preserve_index=False)
    meta = dict(snap.meta)
    planted = dict(meta.get("planted", {}))
    planted["judges"] = {"plan": asdict(plan), "jury_icc3k_z_continuous": 2 * plan.rho
                         / (1 + plan.rho), "first_shown_wins": (1 + plan.follow_first) / 2,
                         **self_truth, **gate_truth, **health_truth,
                         **calibration_truth}
    meta["planted"] = planted
    return Snapshot.from_tables(tables, meta)


def _with_calibration_judge(plan: JudgePlan, snap: Snapshot, frame: pd.DataFrame):
    """``frame`` with the calibration judge's rows when the plan asks for it
    (off by default: the other planted judges' tests read every rubric row)."""
    if not plan.calibration_judge:
        return frame, {}
    rows, truth = calibration_judge(plan.seed, plan.threshold, plan.unparsed, snap, _base)
    rows["raw_output"] = np.where(rows["parse_status"].eq("ok"), None, UNPARSED_TEXT)
    return pd.concat([frame, rows], ignore_index=True), {"calibration": truth}


def _clinician_means(snap: Snapshot) -> pd.Series:
    ratings = snap["ratings"].select(["answer_id", "score"]).to_pandas()
    return ratings.groupby("answer_id")["score"].mean()


def _z(values: np.ndarray) -> np.ndarray:
    return (values - values.mean()) / values.std()


def _base(answer_ids, judge: str, kind: str, criterion) -> pd.DataFrame:
    n = len(answer_ids)
    return pd.DataFrame({"answer_id": answer_ids, "judge_model": judge, "judge_kind": kind,
                         "criterion_id": criterion, "parse_status": "ok", "juror": 0,
                         "repeat": 0, "input_tokens": np.full(n, 900),
                         "output_tokens": np.full(n, 60), "cost_usd": np.full(n, 0.0012)})


def _jury(rng, plan: JudgePlan, clin: pd.Series, snap: Snapshot):
    rated = clin.index.to_numpy()
    chosen = rng.choice(rated, min(plan.jury_answers, rated.size), replace=False)
    z = _z(clin.loc[chosen].to_numpy())
    # The noise is shared by every juror and axis of an answer: averaging the
    # jury must not wash it out, or the jury would agree more than planted.
    latent = plan.rho * z + np.sqrt(1 - plan.rho**2) * rng.standard_normal(z.size)
    names, own = _jurors(plan, snap, chosen)
    frames, boosts = [], []
    for juror in range(plan.jurors):
        for axis in JURY_AXES:
            frame = _base(chosen, names[juror], "jury", axis)
            frame["juror"] = juror
            jitter = 0.3 * rng.standard_normal(z.size)
            plain = np.clip(np.round(3 + 1.2 * latent + jitter), 1, 5)
            frame["score"] = plain
            if juror == 0:
                boosted = np.clip(np.round(3 + 1.2 * latent + jitter + plan.self_boost), 1, 5)
                frame["score"] = np.where(own, boosted, plain)
                boosts.append((boosted - plain)[own])
            frames.append(frame)
    truth = {"self_preference": float(np.mean(boosts)) if own.any() else 0.0,
             "self_judges": {"biased": names[0], "control": names[1]}}
    return pd.concat(frames, ignore_index=True), truth


def _jurors(plan: JudgePlan, snap: Snapshot, chosen: np.ndarray):
    """Juror names (the first two are candidate models) and which chosen
    answers the first juror's own model wrote."""
    models = snap["models"].column("model_id").to_pylist()
    names = [*models[:2], *[f"jury-{j + 1}" for j in range(2, plan.jurors)]]
    answers = snap["answers"].select(["answer_id", "model_id"]).to_pandas()
    author = answers.set_index("answer_id")["model_id"].reindex(chosen).to_numpy()
    return names, author == models[0]


def _pairwise(rng, plan: JudgePlan, snap: Snapshot, clin: pd.Series) -> pd.DataFrame:
    prefs = snap["preferences"].select(["answer_a_id", "answer_b_id"]).to_pandas()
    prefs = prefs.drop_duplicates().reset_index(drop=True)
    prefs = prefs.iloc[rng.permutation(len(prefs))[: plan.pairs]]
    qa = clin.reindex(prefs["answer_a_id"]).fillna(0).to_numpy()
    qb = clin.reindex(prefs["answer_b_id"]).fillna(0).to_numpy()
    better = np.where(qa > qb, "A", np.where(qb > qa, "B", np.where(
        rng.random(qa.size) < 0.5, "A", "B")))
    frames = []
    for shown_first in SIDES:
        follow = rng.random(qa.size) < plan.follow_first
        choice = np.where(follow, shown_first, better)
        frame = _base(prefs["answer_a_id"].to_numpy(), "pair-judge", "pairwise", "preference")
        frame["answer_b_id"] = prefs["answer_b_id"].to_numpy()
        frame["shown_first"] = shown_first
        frame["choice"] = choice
        frame["score"] = np.where(choice == "A", 1.0, 0.0)
        frames.append(frame)
    agree = frames[0]["choice"].to_numpy() == frames[1]["choice"].to_numpy()
    for frame in frames:
        frame["agreement"] = agree
    return pd.concat(frames, ignore_index=True)


def _rubric(rng, plan: JudgePlan, snap: Snapshot) -> pd.DataFrame:
    ratings = snap["ratings"].select(["answer_id", "criterion_id", "score"]).to_pandas()
    means = ratings.groupby(["answer_id", "criterion_id"])["score"].mean().reset_index()
    answers = means["answer_id"].unique()
    chosen = set(rng.choice(answers, min(plan.rubric_answers, answers.size), replace=False))
    means = means[means["answer_id"].isin(chosen)]
    step = np.where(rng.random(len(means)) < plan.rubric_noise,
                    rng.choice([-1, 1], len(means)), 0)
    frame = _base(means["answer_id"].to_numpy(), "rubric-judge", "rubric",
                  means["criterion_id"].to_numpy())
    frame["score"] = np.clip(np.round(means["score"].to_numpy()) + step, SCORE_MIN,
                             SCORE_MAX).astype(float)
    return frame


GATE_MODELS = ("steady", "collapsing", "independent")


def _gates(rng, plan: JudgePlan, snap: Snapshot):
    indicators = load_indicators().indicators
    cases = snap["cases"].to_pandas()
    picked = rng.choice(len(cases), min(plan.gate_cases, len(cases)), replace=False)
    ind = [indicators[i % len(indicators)] for i in range(picked.size)]
    cases.loc[picked, "subcategory"] = [i.indicator_id for i in ind]
    cases.loc[picked, "weight"] = [float(i.weight) for i in ind]
    models = snap["models"].column("model_id").to_pylist()[: len(GATE_MODELS)]
    answers, rows = [], []
    for m, model in enumerate(models):
        steady_met = None
        for c, (case_row, indicator) in enumerate(zip(picked, ind, strict=True)):
            points = [5.0] if indicator.scoring == "binary" else [5.0, 4.0, 3.0]
            steady_met = rng.random(len(points)) < plan.steady_p
            for s in range(plan.samples):
                answer_id = f"gate-{model}-{c}-{s}"
                answers.append({"answer_id": answer_id, "case_id": cases.at[case_row, "case_id"],
                                "model_id": model, "sample_index": s + 1,
                                "length_chars": 800, "tokens": 200,
                                "system_prompt_variant": "gate"})
                met = _met(rng, plan, GATE_MODELS[m], steady_met, len(points))
                frame = _base([answer_id] * len(points), "rule-judge", "rule",
                              [f"{indicator.indicator_id}.r{i + 1}" for i in range(len(points))])
                frame["points"] = points
                frame["score"] = met.astype(float)
                rows.append(frame)
    truth = {"gate_models": dict(zip(GATE_MODELS, models, strict=False)),
             "collapsing_mean": 1 - plan.collapse_q,
             "collapsing_worst_at_k": [(1 - plan.collapse_q) ** k
                                       for k in range(1, plan.samples + 1)],
             "gate_cases": int(picked.size)}
    answers_table = pa.concat_tables([snap["answers"], pa.Table.from_pylist(answers).cast(
        pa.schema([snap["answers"].schema.field(c) for c in answers[0]]))],
        promote_options="default")
    return (pa.Table.from_pandas(cases, preserve_index=False), answers_table,
            pd.concat(rows, ignore_index=True), truth)


HEALTH_POINTS = (5.0, 3.0, -4.0)


def _healthbench(rng, plan: JudgePlan, answers: pa.Table, cases: pa.Table):
    """Rules on answers of cases outside the gates (``cases`` already carries
    the gate indicators in ``subcategory``)."""
    answers = answers.select(["answer_id", "case_id"]).to_pandas()
    cases = cases.select(["case_id", "subcategory"]).to_pandas()
    outside = cases.loc[cases["subcategory"].isna(), "case_id"]
    answers = answers[answers["case_id"].isin(outside)]
    chosen = rng.choice(answers["answer_id"].to_numpy(),
                        min(plan.rubric_rule_answers, len(answers)), replace=False)
    frames = []
    for i, points in enumerate(HEALTH_POINTS):
        frame = _base(chosen, "rule-judge", "rule", f"hb.r{i + 1}")
        frame["points"] = points
        p = plan.rule_met if points > 0 else plan.harm_met
        frame["score"] = (rng.random(chosen.size) < p).astype(float)
        frames.append(frame)
    return pd.concat(frames, ignore_index=True), {"rubric_expected": _expected_rubric(plan)}


def _expected_rubric(plan: JudgePlan) -> float:
    """Expected clipped score over the 2^3 ways the three rules can be met."""
    total = sum(p for p in HEALTH_POINTS if p > 0)
    expected = 0.0
    for mask in range(2 ** len(HEALTH_POINTS)):
        met = [(mask >> i) & 1 for i in range(len(HEALTH_POINTS))]
        prob = np.prod([(plan.rule_met if pt > 0 else plan.harm_met) if m else
                        1 - (plan.rule_met if pt > 0 else plan.harm_met)
                        for pt, m in zip(HEALTH_POINTS, met, strict=True)])
        earned = sum(pt for pt, m in zip(HEALTH_POINTS, met, strict=True) if m)
        expected += prob * min(max(earned / total, 0.0), 1.0)
    return float(expected)


def _met(rng, plan: JudgePlan, kind: str, steady_met: np.ndarray, n: int) -> np.ndarray:
    if kind == "steady":
        return steady_met
    if kind == "collapsing":
        return np.full(n, rng.random() >= plan.collapse_q)
    return rng.random(n) < plan.steady_p


def _unparse(rng, plan: JudgePlan, frame: pd.DataFrame) -> pd.DataFrame:
    """Mark a share of rows as unparsed: raw text kept, no score, no choice."""
    bad = rng.random(len(frame)) < plan.unparsed
    frame.loc[bad, ["score", "choice", "agreement"]] = None
    frame.loc[bad, "parse_status"] = "unparsed"
    frame["raw_output"] = np.where(bad, UNPARSED_TEXT, None)
    return frame
