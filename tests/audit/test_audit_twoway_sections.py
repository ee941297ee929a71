"""Co-failure and dispersion under the two-way default, against plain loops
over the ratings: the pigeonhole replicates rebuilt rating by rating, and the
two-way cluster-robust variances summed cluster by cluster."""

from __future__ import annotations

import statistics
import zlib
from collections import defaultdict

import numpy as np
import pytest
from scipy.stats import norm
from scipy.stats import t as student_t

from clinieval.audit import audit
from clinieval.rubric import load_rubric, rubric_to_rows
from clinieval.stats import pigeonhole_weights
from clinieval.testing import snapshot_from_rows

CRITERIA = ("accuracy", "harmlessness", "completeness")
RATERS, CASES, MODELS, PER_ANSWER, B, SEED = 9, 24, 2, 3, 200, 5


def _rows():
    """Crossed ratings with rater leniency and case difficulty; ids sort in
    the order the audit numbers them (raters sorted, cases as listed)."""
    rng = np.random.default_rng(11)
    lenient, hard = rng.normal(0, 0.6, RATERS), rng.normal(0, 0.6, CASES)
    answers, ratings = [], []
    for c in range(CASES):
        for m in range(MODELS):
            answer = f"a{c:02d}-{m}"
            answers.append({"answer_id": answer, "case_id": f"c{c:02d}", "model_id": f"m{m}"})
            for r in rng.choice(RATERS, PER_ANSWER, replace=False):
                for crit in CRITERIA:
                    y = 0.3 * m - hard[c] + lenient[r] + rng.normal(0, 0.8)
                    ratings.append({"rating_id": len(ratings), "answer_id": answer,
                                    "rater_id": f"r{r}", "criterion_id": crit,
                                    "score": int(np.clip(np.round(y), -2, 2)), "revision": 0})
    return {"cases": [{"case_id": f"c{c:02d}", "specialty": "Cardiology"} for c in range(CASES)],
            "models": [{"model_id": f"m{m}"} for m in range(MODELS)], "answers": answers,
            "raters": [{"rater_id": f"r{r}"} for r in range(RATERS)],
            "criteria": rubric_to_rows(load_rubric()), "ratings": ratings, "preferences": []}


@pytest.fixture(scope="module")
def rows():
    return _rows()


@pytest.fixture(scope="module")
def result(rows):
    return audit(snapshot_from_rows(rows), bootstrap=B, seed=SEED,
                 criteria=CRITERIA)


def _ratings(rows):
    """(rater, case, answer, criterion, score) with integer rater and case codes."""
    case_of = {a["answer_id"]: int(a["case_id"][1:]) for a in rows["answers"]}
    return [(int(r["rater_id"][1:]), case_of[r["answer_id"]], r["answer_id"],
             r["criterion_id"], r["score"]) for r in rows["ratings"]]


def _squares(z_by_rating, keys):
    """Sum over clusters of squared cluster totals, and the number of clusters."""
    totals = defaultdict(float)
    for z, key in zip(z_by_rating, keys, strict=True):
        totals[key] += z
    return sum(v * v for v in totals.values()), len(totals)


def small(g):
    """The cluster-robust small-sample factor G / (G - 1)."""
    return g / (g - 1)


def _twoway(z, raters, cases):
    """Cameron-Gelbach-Miller two-way variance, its pigeonhole expectation and
    the t over z factor, by plain sums over the clusters of the given items."""
    s_r, g_r = _squares(z, raters)
    s_c, g_c = _squares(z, cases)
    s_k, g_k = _squares(z, list(zip(raters, cases, strict=True)))
    v_r, v_c = small(g_r) * s_r, small(g_c) * s_c
    twoway = max(v_r + v_c - small(g_k) * s_k, v_r, v_c)
    pigeon = (1 - 1 / CASES) * s_r + (1 - 1 / RATERS) * s_c + s_k
    g = min(g_r, g_c)
    return twoway, pigeon, student_t.ppf(0.975, g - 1) / norm.ppf(0.975)


def test_co_failure_twoway_equals_a_plain_loop_pigeonhole(rows, result):
    ratings = _ratings(rows)
    low = {a for _, _, a, crit, y in ratings if crit == "accuracy" and y <= -1}
    rng = np.random.default_rng([SEED, zlib.crc32(b"ratings")])
    U, V = pigeonhole_weights(RATERS, CASES, B, rng)  # the section's own draws
    table = result["co_failure"].tables["co_failure"].set_index("criterion")
    names = {"harmlessness": "Harmlessness", "completeness": "Completeness & relevance"}
    for crit, name in names.items():
        mine = [(r, c, y, a in low) for r, c, a, k, y in ratings if k == crit]
        raters, cases = [m[0] for m in mine], [m[1] for m in mine]
        y = np.array([m[2] for m in mine], float)
        is_low = np.array([m[3] for m in mine])
        m_low, m_all = y[is_low].mean(), y.mean()
        z_low = np.where(is_low, (y - m_low) / is_low.sum(), 0.0)
        z_all = (y - m_all) / y.size
        reps = {"mean_low_accuracy": [], "mean_all": []}
        for b in range(B):
            w = np.array([U[b, r] * V[b, c] for r, c in zip(raters, cases, strict=True)], float)
            reps["mean_low_accuracy"].append((w * y * is_low).sum() / (w * is_low).sum())
            reps["mean_all"].append((w * y).sum() / w.sum())
        reps["difference"] = np.subtract(reps["mean_low_accuracy"], reps["mean_all"])
        for key, est, z in (("mean_low_accuracy", m_low, z_low), ("mean_all", m_all, z_all),
                            ("difference", m_low - m_all, z_low - z_all)):
            present = [i for i in range(y.size) if key != "mean_low_accuracy" or is_low[i]]
            twoway, pigeon, t_z = _twoway([z[i] for i in present],
                                          [raters[i] for i in present],
                                          [cases[i] for i in present])
            scaled = est + np.sqrt(twoway / pigeon) * t_z * (np.asarray(reps[key]) - est)
            lo, hi = np.quantile(scaled, [0.025, 0.975])
            row = table.loc[name]
            assert row[key] == pytest.approx(est, abs=1e-12)
            assert (row[f"{key}_lo"], row[f"{key}_hi"]) == pytest.approx((lo, hi), abs=1e-9)


def test_dispersion_twoway_equals_plain_cluster_sums(rows, result):
    ratings = _ratings(rows)
    table = result["reliability"].tables["dispersion"]
    assert "two-way" in result["reliability"].figures[1].caption
    for crit, name in (("accuracy", "Accuracy"), ("harmlessness", "Harmlessness")):
        for m in range(MODELS):
            scores, raters_of = defaultdict(list), defaultdict(list)
            for r, c, a, k, y in ratings:
                if k == crit and a.endswith(f"-{m}"):
                    scores[(a, c)].append(y)
                    raters_of[(a, c)].append(r)
            sds = {key: statistics.stdev(v) for key, v in scores.items() if len(v) >= 2}
            mean = statistics.fmean(sds.values())
            # Each answer's influence goes to its case and to every one of its raters.
            z, raters, cases = [], [], []
            for (a, c), sd in sds.items():
                for r in raters_of[(a, c)]:
                    z.append((sd - mean) / len(sds))
                    raters.append(r)
                    cases.append(c)
            s_c, g_c = _squares([(sds[k] - mean) / len(sds) for k in sds], [c for _, c in sds])
            s_r, g_r = _squares(z, raters)
            s_k, g_k = _squares(z, list(zip(raters, cases, strict=True)))
            v_c = small(g_c) * s_c
            # the raw sum over the share the centring at the mean keeps: 1 less
            # the squared totals of the answers' weights 1 / n by rater, case, cell
            w = [1 / len(sds)] * len(z)
            lost = (_squares(w, raters)[0] + _squares([1 / len(sds)] * len(sds),
                                                       [c for _, c in sds])[0]
                    - _squares(w, list(zip(raters, cases, strict=True)))[0])
            var = max((s_r + s_c - s_k) / max(1 - lost, 0.5), v_c)
            half = student_t.ppf(0.975, min(g_r, g_c) - 1) * np.sqrt(var)
            row = table[(table["model"] == f"m{m}") & (table["criterion"] == name)].iloc[0]
            assert row["n_answers"] == len(sds)
            assert row["mean_sd"] == pytest.approx(mean, abs=1e-12)
            assert (row["mean_sd_lo"], row["mean_sd_hi"]) == pytest.approx(
                (mean - half, mean + half), abs=1e-9)


def test_other_designs_keep_rating_level_co_failure_and_answer_level_dispersion(rows):
    result = audit(snapshot_from_rows(rows), bootstrap=B, seed=SEED, criteria=CRITERIA,
                   cluster="none")
    assert "rating-level" in result["co_failure"].figures[0].caption
    table = result["reliability"].tables["dispersion"]
    row = table.iloc[0]
    ratings = [r for r in _ratings(rows) if r[3] == "accuracy" and r[2].endswith("-0")]
    by_answer = defaultdict(list)
    for _, _, a, _, y in ratings:
        by_answer[a].append(y)
    sds = [statistics.stdev(v) for v in by_answer.values() if len(v) >= 2]
    half = norm.ppf(0.975) * statistics.stdev(sds) / np.sqrt(len(sds))
    assert (row["mean_sd_lo"], row["mean_sd_hi"]) == pytest.approx(
        (statistics.fmean(sds) - half, statistics.fmean(sds) + half), abs=1e-9)
