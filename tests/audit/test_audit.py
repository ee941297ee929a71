"""The audit against independent references, hand-worked cases and planted truths."""

from __future__ import annotations

import choix
import krippendorff
import numpy as np
import pytest
import scipy.stats as sps
from statsmodels.stats.inter_rater import fleiss_kappa as sm_fleiss
from statsmodels.stats.proportion import proportion_confint

from clinieval.audit import audit
from clinieval.rubric import load_rubric, rubric_to_rows
from clinieval.synth import generate
from clinieval.testing import snapshot_from_rows, tiny_snapshot

CRITERIA = rubric_to_rows(load_rubric())


def _snapshot(n_models=4, n_cases=60, raters=3, seed=0, votes=True, ties=False,
              criteria=("harmlessness", "accuracy")):
    """Every answer rated by exactly ``raters`` raters on each criterion."""
    rng = np.random.default_rng(seed)
    skill = np.linspace(-0.6, 0.6, n_models)
    answers, ratings, prefs = [], [], []
    for c in range(n_cases):
        for m in range(n_models):
            answers.append({"answer_id": f"a{c}-{m}", "case_id": f"c{c}", "model_id": f"m{m}",
                            "length_chars": int(rng.integers(200, 3000))})
            for r in range(raters):
                for crit in criteria:
                    score = int(np.clip(np.round(skill[m] + rng.normal(0, 1)), -2, 2))
                    ratings.append({"rating_id": len(ratings), "answer_id": f"a{c}-{m}",
                                    "rater_id": f"r{(c + r) % 7}", "criterion_id": crit,
                                    "score": score, "revision": 0})
        if votes:
            for _ in range(6):
                a, b = rng.choice(n_models, 2, replace=False)
                p = 1 / (1 + np.exp(-(skill[a] - skill[b]) * 2))
                choice = "A" if rng.random() < p else "B"
                if ties and rng.random() < 0.1:
                    choice = "tie"
                prefs.append({"preference_id": len(prefs), "case_id": f"c{c}",
                              "answer_a_id": f"a{c}-{a}", "answer_b_id": f"a{c}-{b}",
                              "shown_left": "A" if rng.random() < 0.5 else "B",
                              "choice": choice, "rater_id": f"r{c % 7}"})
    return snapshot_from_rows({
        "cases": [{"case_id": f"c{c}", "specialty": ["Cardiology", "Pathology", "Oncology"][c % 3],
                   "prompt_words": 20 + 7 * c} for c in range(n_cases)],
        "models": [{"model_id": f"m{m}"} for m in range(n_models)],
        "answers": answers, "raters": [{"rater_id": f"r{r}"} for r in range(7)],
        "criteria": CRITERIA, "ratings": ratings, "preferences": prefs})


@pytest.fixture(scope="module")
def snap():
    return _snapshot()


@pytest.fixture(scope="module")
def result(snap):
    return audit(snap, bootstrap=200)


def test_bradley_terry_equals_choix_on_tie_free_votes(snap, result):
    prefs = snap["preferences"].to_pylist()
    model = {a["answer_id"]: int(a["model_id"][1:]) for a in snap["answers"].to_pylist()}
    data = [(model[p["answer_a_id"]], model[p["answer_b_id"]]) if p["choice"] == "A" else
            (model[p["answer_b_id"]], model[p["answer_a_id"]]) for p in prefs]
    reference = choix.opt_pairwise(4, data, alpha=1e-6)
    reference -= reference.mean()
    table = result["bradley_terry"].tables["strengths"].set_index("model")
    ours = table.loc[[f"m{m}" for m in range(4)], "bt"].to_numpy()
    np.testing.assert_allclose(ours, reference, atol=1e-4)


def test_fleiss_and_krippendorff_equal_reference_libraries(snap, result):
    rows = result["reliability"].tables["agreement"].set_index("criterion")
    ratings = snap["ratings"].to_pylist()
    for crit, name in (("harmlessness", "Harmlessness"), ("accuracy", "Accuracy")):
        answers = sorted({r["answer_id"] for r in ratings})
        index = {a: i for i, a in enumerate(answers)}
        table = np.zeros((len(answers), 5))
        by_rater = {}
        for r in ratings:
            if r["criterion_id"] == crit:
                table[index[r["answer_id"]], r["score"] + 2] += 1
                by_rater.setdefault(r["rater_id"], {})[index[r["answer_id"]]] = r["score"]
        assert rows.loc[name, "fleiss_kappa"] == pytest.approx(sm_fleiss(table), abs=1e-10)
        matrix = np.full((len(by_rater), len(answers)), np.nan)
        for i, scores in enumerate(by_rater.values()):
            for j, value in scores.items():
                matrix[i, j] = value
        expected = krippendorff.alpha(reliability_data=matrix, level_of_measurement="ordinal")
        assert rows.loc[name, "krippendorff_alpha_ordinal"] == pytest.approx(expected, abs=1e-9)


def test_reliability_draws_shared_or_alone_give_the_same_intervals(snap, monkeypatch):
    # The criteria share one resample of the answers when that is cheaper
    # (here), or each criterion draws its own: the same estimates, and
    # intervals of the same answer bootstrap (Monte Carlo error apart).
    from clinieval.audit.sections import reliability

    shared = audit(snap, bootstrap=2000)["reliability"].tables["agreement"]
    monkeypatch.setattr(reliability, "SHARED_ENTRIES", 0)
    alone = audit(snap, bootstrap=2000)["reliability"].tables["agreement"]
    assert shared["n_items"].tolist() == alone["n_items"].tolist()
    for name in ("fleiss_kappa", "krippendorff_alpha_ordinal", "fail_kappa"):
        np.testing.assert_array_equal(shared[name], alone[name])
        for bound in ("lo", "hi"):
            np.testing.assert_allclose(shared[f"{name}_{bound}"], alone[f"{name}_{bound}"],
                                       atol=0.03)
        assert not np.allclose(shared[f"{name}_lo"], alone[f"{name}_lo"], atol=1e-12)


def test_alignment_correlations_equal_scipy(snap, result):
    bt = result["bradley_terry"].tables["strengths"].set_index("model")["bt"]
    summary = result["model_summary"].tables["by_criterion"]
    harm = summary[summary["criterion"] == "Harmlessness"].set_index("model")["mean"]
    row = result["alignment"].tables["alignment"].set_index("criterion").loc["Harmlessness"]
    x, y = bt.loc[harm.index].to_numpy(), harm.to_numpy()
    assert row["pearson_r"] == pytest.approx(sps.pearsonr(x, y).statistic, abs=1e-12)
    assert row["spearman_rho"] == pytest.approx(sps.spearmanr(x, y).statistic, abs=1e-12)
    assert row["spearman_p"] == pytest.approx(sps.spearmanr(x, y).pvalue, abs=1e-12)
    assert row["n"] == 4


def test_specialty_counts_and_wilson_intervals_equal_statsmodels(snap, result):
    """Dangerous answers counted here by hand (any rater <= -1 on Harmlessness
    or Accuracy), then the interval from statsmodels: Wilson over answers
    with ``--cluster none``; the two-way default (Wilson on an effective n
    no larger than n) contains it."""
    plain = audit(snap, bootstrap=200, cluster="none")["specialties"].tables["specialties"]
    specialty = {c["case_id"]: c["specialty"] for c in snap["cases"].to_pylist()}
    case_of = {a["answer_id"]: a["case_id"] for a in snap["answers"].to_pylist()}
    failed: dict[str, bool] = {}
    for r in snap["ratings"].to_pylist():
        failed[r["answer_id"]] = failed.get(r["answer_id"], False) or r["score"] <= -1
    expected: dict[str, list[int]] = {}
    for answer, bad in failed.items():
        k_n = expected.setdefault(specialty[case_of[answer]], [0, 0])
        k_n[0] += bad
        k_n[1] += 1
    table = result["specialties"].tables["specialties"].set_index("specialty")
    assert len(table) == len(plain) == len(expected)
    for _, row in plain.iterrows():
        k, n = expected[row["specialty"]]
        assert row["n"] == n
        assert row["dangerous_answers_pct"] == pytest.approx(100 * k / n, abs=1e-9)
        lo, hi = proportion_confint(k, n, alpha=0.05, method="wilson")
        assert row["dangerous_answers_pct_lo"] == pytest.approx(100 * lo, abs=1e-9)
        assert row["dangerous_answers_pct_hi"] == pytest.approx(100 * hi, abs=1e-9)
        twoway = table.loc[row["specialty"]]
        assert twoway["dangerous_answers_pct"] == row["dangerous_answers_pct"]
        assert twoway["dangerous_answers_pct_lo"] <= 100 * lo + 1e-9
        assert twoway["dangerous_answers_pct_hi"] >= 100 * hi - 1e-9


def test_hand_worked_tiny_snapshot():
    """The tiny fixture: rating i (1..16) scores (i % 5) - 2. Ratings are laid
    out per answer (1x, 1y, 2x, 2y) x rater (1, 2) x criterion (harm, acc).
    model-x gets ratings 1-4 and 9-12: scores -1,0,1,2 and 2,-2,-1,0, so
    harmlessness (odd positions) = -1,1,2,-1 -> mean 0.25, Fail% 2/4 = 50%;
    accuracy = 0,2,-2,0 -> mean 0, Fail% 1/4 = 25%, severe% 25%."""
    result = audit(tiny_snapshot(), bootstrap=100, min_n=1)
    table = result["model_summary"].tables["by_criterion"].set_index(["model", "criterion"])
    harm, acc = table.loc[("Model X", "Harmlessness")], table.loc[("Model X", "Accuracy")]
    assert (harm["mean"], harm["fail_pct_of_ratings"], harm["n"]) == (0.25, 50.0, 4)
    assert (acc["mean"], acc["fail_pct_of_ratings"], acc["severe_pct_of_ratings"]) == (
        0.0, 25.0, 25.0)


def test_sections_without_data_say_why():
    result = audit(_snapshot(votes=False, raters=1), bootstrap=100)
    for key in ("bradley_terry", "alignment", "length_bias", "position_bias", "reliability",
                "consensus_drift", "rater_view"):
        reason = result[key].skipped
        assert reason and "\n" not in reason, key
    assert "0" in result["bradley_terry"].skipped
    assert result["model_summary"].skipped is None
    assert result["specialties"].skipped is None
    assert any("Not computable" in line for line in result.headlines)


def test_same_seed_same_numbers_and_other_seed_other_cis(snap):
    one, two = audit(snap, bootstrap=100, seed=5), audit(snap, bootstrap=100, seed=5)
    three = audit(snap, bootstrap=100, seed=6)
    t1 = one["bradley_terry"].tables["strengths"]
    assert t1.equals(two["bradley_terry"].tables["strengths"])
    assert not t1["bt_lo"].equals(three["bradley_terry"].tables["strengths"]["bt_lo"])
    assert t1["bt"].equals(three["bradley_terry"].tables["strengths"]["bt"])


def test_threshold_and_rule_change_the_numbers(snap):
    base = audit(snap, bootstrap=100)
    strict = audit(snap, bootstrap=100, threshold=-2, response_rule="majority")
    a = base["specialties"].tables["specialties"]["dangerous_answers_pct"].sum()
    b = strict["specialties"].tables["specialties"]["dangerous_answers_pct"].sum()
    assert b < a


@pytest.mark.parametrize("cluster", ["answer", "rater", "twoway"])
def test_cluster_bootstraps_keep_estimates_inside_intervals(snap, cluster):
    plain = audit(snap, bootstrap=300, cluster="none")["model_summary"].tables["by_criterion"]
    clustered = audit(snap, bootstrap=300, cluster=cluster)["model_summary"].tables[
        "by_criterion"]
    assert np.allclose(plain["mean"], clustered["mean"])
    assert ((clustered["mean_lo"] <= clustered["mean"]) & (clustered["mean"] <= clustered[
        "mean_hi"])).all()
    if cluster != "rater":  # three raters per answer share it: intervals cannot shrink much
        width = (clustered["mean_hi"] - clustered["mean_lo"]).mean()
        assert width > 0.9 * (plain["mean_hi"] - plain["mean_lo"]).mean()


@pytest.fixture(scope="module")
def paper():
    snap = generate(seed=0, scale=1.0)
    return snap.meta["planted"], audit(snap, bootstrap=200)


def test_paper_scale_recovers_the_planted_truths(paper):
    planted, result = paper
    summary = result["model_summary"].tables["summary"]
    leader = summary.iloc[0]["model"]
    harm = summary.sort_values("harmlessness_fail_pct_of_ratings").iloc[0]["model"]
    assert leader != harm, "the preference leader must not be the safest model"
    length = result["length_bias"].values
    assert length["length_coef"] > 0 and length["length_coef_lo"] > 0
    top = result["specialties"].values["highest_risk"]
    assert top[:3] == planted["high_risk_specialties"][:3]
    assert result["position_bias"].values["detected"]
    assert result["position_bias"].values["left_wins_pct"] > 50
    verdict = result["alignment"].values["verdicts"]["Harmlessness"]
    assert "does not track" in verdict


def test_bradley_terry_equals_an_independent_logistic_regression(snap, result):
    """statsmodels' logistic GLM on +1/-1 model indicators (model 0 dropped),
    re-centred, gives the same strengths on tie-free votes."""
    import statsmodels.api as sm

    model = {a["answer_id"]: int(a["model_id"][1:]) for a in snap["answers"].to_pylist()}
    prefs = snap["preferences"].to_pylist()
    X = np.zeros((len(prefs), 4))
    for i, p in enumerate(prefs):
        X[i, model[p["answer_a_id"]]] += 1
        X[i, model[p["answer_b_id"]]] -= 1
    y = np.array([p["choice"] == "A" for p in prefs], dtype=float)
    fit = sm.GLM(y, X[:, 1:], family=sm.families.Binomial()).fit()
    reference = np.concatenate([[0.0], fit.params])
    reference -= reference.mean()
    table = result["bradley_terry"].tables["strengths"].set_index("model")
    ours = table.loc[[f"m{m}" for m in range(4)], "bt"].to_numpy()
    np.testing.assert_allclose(ours, reference, atol=1e-4)


def test_highest_and_lowest_risk_lists_do_not_overlap():
    result = audit("demo", bootstrap=50)
    values = result["specialties"].values
    assert values["highest_risk"] and not set(values["highest_risk"]) & set(values["lowest_risk"])


def test_choice_codes_follow_the_vocabulary():
    """The audit's choice codes are positions in tables.CHOICES, the same
    numbers the Bradley-Terry code calls A_WINS .. BOTH_BAD."""
    from clinieval.contract.vocabulary import CHOICES
    from clinieval.stats import A_WINS, B_WINS, BOTH_BAD, TIE

    assert [CHOICES.index(c) for c in ("A", "B", "tie", "both_bad")] == [
        A_WINS, B_WINS, TIE, BOTH_BAD]
