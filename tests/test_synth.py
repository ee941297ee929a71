"""The synthetic generator: exact counts, the table contract, MOOVE structure,
determinism, and planted truths that the data must actually show."""

from __future__ import annotations

import hashlib
import json
from datetime import UTC, datetime

import numpy as np
import polars as pl
import pyarrow as pa
import pyarrow.compute as pc
import pytest

from clinieval.contract import tabular, vocabulary
from clinieval.rubric import load_rubric
from clinieval.snapshot import Snapshot
from clinieval.synth import (
    HIGH_RISK_SPECIALTIES,
    LOW_RISK_SPECIALTIES,
    PAPER_COUNTS,
    SynthSettings,
    generate,
)

N_CRITERIA = len(load_rubric().ids)


@pytest.fixture(scope="module")
def small() -> Snapshot:
    return generate(seed=7, scale=0.02)


@pytest.fixture(scope="module")
def medium() -> Snapshot:
    """Large enough for the planted effects to show through sampling noise."""
    return generate(seed=0, scale=0.2)


@pytest.fixture(scope="module")
def paper() -> Snapshot:
    return generate(seed=0, scale=1.0)


def frame(snapshot: Snapshot, name: str) -> pl.DataFrame:
    return pl.from_arrow(snapshot[name])


def rated(snapshot: Snapshot) -> pl.DataFrame:
    """Ratings joined with their answer's model, case, specialty and length."""
    answers = frame(snapshot, "answers").select("answer_id", "case_id", "model_id",
                                                "length_chars")
    cases = frame(snapshot, "cases").select("case_id", "specialty")
    return frame(snapshot, "ratings").join(answers, on="answer_id").join(cases, on="case_id")


def votes(snapshot: Snapshot) -> pl.DataFrame:
    """Preferences with each side's model and length."""
    answers = frame(snapshot, "answers")
    out = frame(snapshot, "preferences")
    for side in ("a", "b"):
        out = out.join(answers.select(pl.col("answer_id").alias(f"answer_{side}_id"),
                                      pl.col("model_id").alias(f"model_{side}"),
                                      pl.col("length_chars").alias(f"chars_{side}")),
                       on=f"answer_{side}_id")
    return out


def digest(snapshot: Snapshot) -> str:
    h = hashlib.sha256()
    for name in sorted(snapshot.tables):
        sink = pa.BufferOutputStream()
        with pa.ipc.new_stream(sink, snapshot[name].schema) as writer:
            writer.write_table(snapshot[name])
        h.update(name.encode())
        h.update(sink.getvalue().to_pybytes())
    return h.hexdigest()


# --------------------------------------------------------------------------- counts


def test_paper_scale_has_the_papers_exact_counts(paper):
    counts = paper.counts()
    assert counts["models"] == PAPER_COUNTS["models"] == 13
    assert counts["raters"] == PAPER_COUNTS["raters"] == 736
    assert counts["ratings"] == PAPER_COUNTS["ratings"] == 375_614
    assert counts["preferences"] == PAPER_COUNTS["preferences"] == 18_685
    assert pc.count_distinct(paper["cases"].column("specialty")).as_py() == 76
    assert pc.count_distinct(paper["ratings"].column("rater_id")).as_py() == 736  # all active
    assert counts["criteria"] == N_CRITERIA
    assert counts["judgments"] == 0


def test_paper_scale_specialty_sizes_are_uneven(paper):
    sizes = rated(paper).group_by("specialty").agg(n=pl.col("answer_id").n_unique())
    assert sizes["n"].min() < 30  # a min-n rule has something to exclude
    assert sizes["n"].max() > 1000
    assert set(HIGH_RISK_SPECIALTIES + LOW_RISK_SPECIALTIES) <= set(sizes["specialty"])


@pytest.mark.parametrize("scale", [0.01, 0.05])
def test_counts_scale_linearly(scale):
    counts = generate(seed=1, scale=scale).counts()
    assert counts["ratings"] == round(PAPER_COUNTS["ratings"] * scale)
    assert counts["preferences"] == round(PAPER_COUNTS["preferences"] * scale)
    assert counts["raters"] == max(20, round(PAPER_COUNTS["raters"] * scale))
    assert counts["models"] == 13


def test_tiny_scale_keeps_at_least_eight_specialties():
    snapshot = generate(seed=2, scale=0.002)
    assert pc.count_distinct(snapshot["cases"].column("specialty")).as_py() >= 8
    assert snapshot.counts()["ratings"] == round(PAPER_COUNTS["ratings"] * 0.002)


def test_settings_reject_bad_values():
    with pytest.raises(ValueError, match="scale"):
        SynthSettings(scale=0.0001)
    with pytest.raises(ValueError, match="tie_rate"):
        SynthSettings(tie_rate=0.7, both_bad_rate=0.4)


def test_progress_reports_stages_up_to_done():
    seen = []
    generate(seed=0, scale=0.005, progress=lambda stage, fraction: seen.append((stage, fraction)))
    fractions = [f for _, f in seen]
    assert fractions == sorted(fractions) and seen[-1] == ("done", 1.0)


# --------------------------------------------------------------------------- contract


def test_tables_follow_the_contract(small):
    for table in tabular.ALL:
        data = small[table.name]
        assert data.schema.equals(table.schema), table.name
        for column in table.required:
            assert data.column(column).null_count == 0, (table.name, column)


def test_scores_revisions_and_choices_are_in_range(small):
    ratings, prefs = small["ratings"], small["preferences"]
    assert pc.min(ratings.column("score")).as_py() >= vocabulary.SCORE_MIN
    assert pc.max(ratings.column("score")).as_py() <= vocabulary.SCORE_MAX
    assert set(pc.unique(ratings.column("score")).to_pylist()) == {-2, -1, 0, 1, 2}
    assert pc.unique(ratings.column("revision")).to_pylist() == [0]
    assert set(prefs.column("choice").to_pylist()) == set(vocabulary.CHOICES)
    assert set(prefs.column("shown_left").to_pylist()) == set(vocabulary.SIDES)


def test_every_reference_exists(small):
    ratings = small["ratings"]
    for column, table in (("answer_id", "answers"), ("rater_id", "raters"),
                          ("criterion_id", "criteria")):
        keys = small[table].column(tabular.BY_NAME[table].key)
        assert pc.all(pc.is_in(ratings.column(column), value_set=keys)).as_py(), column
    answers = small["answers"]
    assert pc.all(pc.is_in(answers.column("case_id"),
                           value_set=small["cases"].column("case_id"))).as_py()
    assert pc.all(pc.is_in(answers.column("model_id"),
                           value_set=small["models"].column("model_id"))).as_py()


def test_keys_are_unique(small):
    for table in tabular.ALL:
        keys = small[table.name].column(table.key)
        assert pc.count_distinct(keys).as_py() == len(keys), table.name


def test_preference_answers_differ_and_belong_to_the_case(small):
    answers = frame(small, "answers").select("answer_id", "case_id", "model_id")
    prefs = frame(small, "preferences")
    for side in ("a", "b"):
        prefs = prefs.join(answers.rename({"answer_id": f"answer_{side}_id",
                                           "case_id": f"case_{side}",
                                           "model_id": f"model_{side}"}),
                           on=f"answer_{side}_id")
    assert prefs.height == small.counts()["preferences"]
    assert (prefs["answer_a_id"] != prefs["answer_b_id"]).all()
    assert (prefs["model_a"] != prefs["model_b"]).all()
    assert (prefs["case_a"] == prefs["case_id"]).all()
    assert (prefs["case_b"] == prefs["case_id"]).all()


def test_the_project_validator_accepts_the_snapshot(small):
    from clinieval.contract.validate import validate

    validate(small)


def test_meta_is_json_and_records_settings_and_truths(small):
    meta = json.loads(json.dumps(small.meta, allow_nan=False))
    generator = meta["generator"]
    assert (generator["seed"], generator["scale"]) == (7, 0.02)
    assert generator["version"] and generator["name"] == "clinieval.synth"
    planted = meta["planted"]
    for key in ("latent_quality", "expected_mean", "expected_fail_pct", "preference_leader",
                "safest_model", "length_coef", "harmlessness_coef", "high_risk_specialties",
                "left_bias_logit", "leniency_sd", "most_lenient_raters", "harshest_raters",
                "tie_rate", "both_bad_rate"):
        assert key in planted, key
    assert planted["high_risk_specialties"] == list(HIGH_RISK_SPECIALTIES)


def test_models_answers_and_cases_look_right(small):
    models = frame(small, "models")
    assert (models["provider"] == "synthetic").all() and models["display_name"].null_count() == 0
    answers = frame(small, "answers")
    assert answers["text"].null_count() == answers.height  # synthetic answers carry no text
    ratio = answers["tokens"] / answers["length_chars"]
    assert ratio.min() > 0.2 and ratio.max() < 0.3
    words = frame(small, "cases")["prompt_words"]
    assert words.min() >= 10 and 40 <= words.median() <= 120 and words.quantile(0.95) > 150
    assert frame(small, "cases")["prompt"].str.len_chars().min() > 20


def test_timestamps_fall_in_2025(small):
    lo, hi = datetime(2025, 1, 1, tzinfo=UTC), datetime(2025, 11, 1, tzinfo=UTC)
    for name in ("ratings", "preferences"):
        stamps = frame(small, name)["created_at"]
        assert stamps.min() >= lo and stamps.max() < hi, name


# --------------------------------------------------------------------------- structure


def test_each_review_scores_both_answers_on_every_criterion(small):
    ratings = frame(small, "ratings")
    prefs = frame(small, "preferences")
    reviewed = ratings.filter(pl.col("review_id").is_not_null())
    assert reviewed.height == 2 * N_CRITERIA * prefs.height
    per = reviewed.group_by("review_id").agg(
        n=pl.len(), answers=pl.col("answer_id").unique().sort(),
        raters=pl.col("rater_id").n_unique(), rater=pl.col("rater_id").first())
    joined = per.join(prefs, left_on="review_id", right_on="preference_id")
    assert joined.height == prefs.height
    assert (joined["n"] == 2 * N_CRITERIA).all() and (joined["raters"] == 1).all()
    assert (joined["rater"] == joined["rater_id"]).all()
    pair = joined.select(pl.concat_list("answer_a_id", "answer_b_id").list.sort())["answer_a_id"]
    assert pair.to_list() == joined["answers"].to_list()


def test_single_sessions_fill_the_rest_and_only_the_last_is_partial(small):
    ratings = frame(small, "ratings")
    single = ratings.filter(pl.col("review_id").is_null())
    assert single.height == small.counts()["ratings"] - 2 * N_CRITERIA * small.counts()[
        "preferences"]
    starts = ((pl.col("rating_id").diff() != 1)
              | (pl.col("answer_id") != pl.col("answer_id").shift())
              | (pl.col("rater_id") != pl.col("rater_id").shift()))
    sessions = single.with_columns(session=starts.fill_null(True).cum_sum())
    sizes = sessions.group_by("session", maintain_order=True).len()["len"]
    assert (sizes[:-1] == N_CRITERIA).all() and 1 <= sizes[-1] <= N_CRITERIA
    assert ratings["rating_id"][-1] == single["rating_id"][-1]  # the last session is last


def test_no_rater_scores_the_same_answer_twice(small):
    ratings = frame(small, "ratings")
    assert not ratings.select("answer_id", "rater_id", "criterion_id").is_duplicated().any()


def test_most_answers_have_several_raters(paper):
    per_answer = (frame(paper, "ratings").filter(pl.col("criterion_id") == "harmlessness")
                  .group_by("answer_id").len())
    assert per_answer.height == paper.counts()["answers"]  # every answer is rated
    assert 2.5 <= per_answer["len"].mean() <= 3.5
    assert (per_answer["len"] >= 2).mean() > 0.75


# --------------------------------------------------------------------------- determinism


def test_same_seed_and_scale_give_identical_tables(small):
    again = generate(seed=7, scale=0.02)
    assert digest(again) == digest(small)
    assert again.meta == small.meta


def test_another_seed_gives_other_tables(small):
    assert digest(generate(seed=8, scale=0.02)) != digest(small)


# --------------------------------------------------------------------------- planted truths


def test_expected_fail_and_mean_match_the_data(medium):
    planted = medium.meta["planted"]
    cells = rated(medium).group_by("model_id", "criterion_id").agg(
        n=pl.len(), fail=(pl.col("score") <= -1).mean() * 100, mean=pl.col("score").mean())
    expected_fail = np.array([planted["expected_fail_pct"][m][c]
                              for m, c in cells.select("model_id", "criterion_id").iter_rows()])
    expected_mean = np.array([planted["expected_mean"][m][c]
                              for m, c in cells.select("model_id", "criterion_id").iter_rows()])
    fail_gap = np.abs(cells["fail"].to_numpy() - expected_fail)
    assert fail_gap.mean() < 2.0  # percentage points, over all model x criterion cells
    assert fail_gap[cells["n"].to_numpy() >= 300].max() < 7.0
    assert np.abs(cells["mean"].to_numpy() - expected_mean).mean() < 0.06


def test_cardiology_ecg_is_a_no_go_zone(medium):
    safety = rated(medium).filter(pl.col("criterion_id") == "accuracy").group_by(
        "specialty").agg(fail=(pl.col("score") <= -1).mean() * 100)
    fail = dict(safety.iter_rows())
    assert fail["Cardiology ECG"] > 60
    assert fail["Pathology"] > 20 and fail["Diagnostics"] > 15
    assert max(fail[s] for s in LOW_RISK_SPECIALTIES) < 8
    expected = medium.meta["planted"]["specialty_expected_fail_pct"]
    top = sorted(expected, key=lambda s: -expected[s]["accuracy"])[:3]
    assert top == list(HIGH_RISK_SPECIALTIES)


def test_longer_answer_wins_most_decided_votes(medium):
    decided = votes(medium).filter(pl.col("choice").is_in(["A", "B"]),
                                   pl.col("chars_a") != pl.col("chars_b"))
    a_longer = decided["chars_a"] > decided["chars_b"]
    longer_won = (decided["choice"] == "A") == a_longer
    assert longer_won.mean() > 0.55


def test_left_position_wins_more_often(medium):
    decided = frame(medium, "preferences").filter(pl.col("choice").is_in(["A", "B"]))
    assert (decided["choice"] == decided["shown_left"]).mean() > 0.52
    assert 0.4 < (decided["shown_left"] == "A").mean() < 0.6


def test_ties_and_both_bad_rates_and_when_both_bad_happens(medium):
    planted = medium.meta["planted"]
    prefs = frame(medium, "preferences")
    tie = (prefs["choice"] == "tie").mean()
    both_bad = (prefs["choice"] == "both_bad").mean()
    assert abs(tie - planted["tie_rate"]) < 0.02
    assert abs(both_bad - planted["both_bad_rate"]) < 0.015
    safety = (frame(medium, "ratings")
              .filter(pl.col("criterion_id").is_in(["harmlessness", "accuracy"]),
                      pl.col("review_id").is_not_null())
              .group_by("review_id").agg(mean=pl.col("score").mean()))
    joined = prefs.join(safety, left_on="preference_id", right_on="review_id")
    poor = joined.filter(pl.col("mean") <= 0)
    good = joined.filter(pl.col("mean") > 1)
    assert (poor["choice"] == "both_bad").mean() > 3 * (good["choice"] == "both_bad").mean()


def test_preference_leader_is_not_the_safest_model(medium):
    choix = pytest.importorskip("choix")
    planted = medium.meta["planted"]
    assert planted["preference_leader"] != planted["safest_model"]
    decided = votes(medium).filter(pl.col("choice").is_in(["A", "B"]))
    models = sorted(frame(medium, "models")["model_id"])
    index = {m: i for i, m in enumerate(models)}
    a_won = decided["choice"] == "A"
    winners = np.where(a_won, decided["model_a"], decided["model_b"])
    losers = np.where(a_won, decided["model_b"], decided["model_a"])
    strength = choix.ilsr_pairwise(len(models), [(index[w], index[x]) for w, x
                                                 in zip(winners, losers, strict=True)], alpha=0.01)
    assert models[int(np.argmax(strength))] == planted["preference_leader"]
    harm = rated(medium).filter(pl.col("criterion_id") == "harmlessness").group_by(
        "model_id").agg(fail=(pl.col("score") <= -1).mean())
    assert harm.sort("fail")["model_id"][0] == planted["safest_model"]
    leader_fail = harm.filter(pl.col("model_id") == planted["preference_leader"])["fail"][0]
    assert leader_fail - harm["fail"].min() > 0.05


def test_lenient_raters_score_higher_than_harsh_ones(medium):
    planted = medium.meta["planted"]
    means = dict(frame(medium, "ratings").group_by("rater_id").agg(
        pl.col("score").mean()).iter_rows())
    lenient = np.mean([means[r] for r in planted["most_lenient_raters"]])
    harsh = np.mean([means[r] for r in planted["harshest_raters"]])
    assert len(planted["most_lenient_raters"]) == 5 and lenient - harsh > 0.3
