"""Judge self-preference: the estimator against a hand computation and a
confounded case, and the report recovering the bias `plant_judgments`
plants (with an unbiased control juror)."""

from __future__ import annotations

import numpy as np
import pytest

from clinieval.audit import audit
from clinieval.stats import self_preference
from clinieval.synth import generate
from clinieval.synth.judges import JudgePlan, plant_judgments


def test_self_preference_is_the_own_residual_of_a_line_fitted_on_the_rest():
    # Fit on the rest (x = 0, 1, 2; y = 1, 2, 3): y = 1 + x. Own answers at
    # x = 1, 2 scored 3 and 4 -> residuals 1, 1; the rest's residuals are 0.
    judge = np.array([1.0, 2.0, 3.0, 3.0, 4.0])
    reference = np.array([0.0, 1.0, 2.0, 1.0, 2.0])
    own = np.array([False, False, False, True, True])
    c = self_preference(judge, reference, own, 200, np.random.default_rng(0))
    assert c.difference == pytest.approx(1.0, abs=1e-12)
    assert c.lower == pytest.approx(1.0, abs=1e-12) and c.upper == pytest.approx(1.0, abs=1e-12)


def test_regression_to_the_mean_is_not_read_as_bias():
    # A judge that follows the reference at half strength, no bias; its own
    # family writes better answers. Judge minus reference would be negative
    # for them (about -0.5 x 1.5 = -0.75); the fitted residual is about 0.
    rng = np.random.default_rng(1)
    own = np.arange(2000) < 400
    reference = rng.normal(size=2000) + 1.5 * own
    judge = 0.5 * reference + rng.normal(0, 0.3, 2000)
    naive = (judge - reference)[own].mean() - (judge - reference)[~own].mean()
    assert naive < -0.6
    c = self_preference(judge, reference, own, 500, np.random.default_rng(2))
    assert c.lower < 0 < c.upper and abs(c.difference) < 0.06
    biased = judge + 0.4 * own
    c = self_preference(biased, reference, own, 500, np.random.default_rng(2))
    assert c.lower < 0.4 < c.upper and c.lower > 0.3


@pytest.fixture(scope="module")
def planted():
    return plant_judgments(generate(0, 0.05), JudgePlan(seed=2))


@pytest.fixture(scope="module")
def result(planted):
    return audit(planted, bootstrap=400, comparison_bootstrap=200)


def test_planted_self_preference_is_recovered_with_a_clean_control(planted, result):
    truth = planted.meta["planted"]["judges"]
    biased, control = truth["self_judges"]["biased"], truth["self_judges"]["control"]
    table = result["self_preference"].tables["self_preference"].set_index(["judge",
                                                                          "reference"])
    for reference in ("other judges", "clinicians"):
        row = table.loc[(biased, reference)]
        # the realised planted boost (about 0.9 points after rounding and clipping)
        assert row["self_preference_lo"] <= truth["self_preference"] <= row["self_preference_hi"]
        assert row["self_preference_lo"] > 0.4
        clean = table.loc[(control, reference)]
        assert clean["self_preference_lo"] < 0 < clean["self_preference_hi"]
    assert result["self_preference"].values["self_preferring"] == [biased]
    assert f"{biased} vs other judges" in result["self_preference"].summary
    assert any(line.startswith("Self-preference:") for line in result.headlines)


def test_no_self_preference_rows_by_provider_when_every_model_shares_one(planted):
    # every synthetic model has provider "synthetic", but the jurors named
    # jury-N are not in the models table: by provider, the two candidate
    # jurors judge only their own family, so nothing is left to compare
    result = audit(planted, bootstrap=60, comparison_bootstrap=60,
                   self_preference_by="provider")
    assert result["self_preference"].skipped
    assert result["self_preference"].values["shown"] is False


@pytest.mark.slow
def test_self_preference_intervals_cover_the_planted_bias_over_50_seeds():
    # The realised planted boost of the self-preferring juror, against both
    # references. Measured: 48 of 50 seeds against the clinicians (seeds 7 and
    # 13 missed), 48 of 50 against the other judges; nominal 95%.
    from clinieval.audit.context import Context
    from clinieval.audit.data import audit_data
    from clinieval.audit.run import build
    from clinieval.audit.settings import AuditSettings

    covered = {"clinicians": 0, "other judges": 0}
    for seed in range(50):
        # few gate cases and rules: the planted jury is drawn first and is
        # the same; the rest only costs time here
        snap = plant_judgments(generate(seed, 0.05), JudgePlan(
            seed=seed, gate_cases=2, pairs=10, rubric_rule_answers=10, rubric_answers=10))
        truth = snap.meta["planted"]["judges"]
        ctx = Context(audit_data(snap), AuditSettings(bootstrap=400, seed=seed))
        table = build(ctx, ["self_preference"])["self_preference"].tables["self_preference"]
        table = table.set_index(["judge", "reference"])
        for reference in covered:
            row = table.loc[(truth["self_judges"]["biased"], reference)]
            covered[reference] += bool(row["self_preference_lo"] <= truth["self_preference"]
                                       <= row["self_preference_hi"])
    assert min(covered.values()) >= 45, covered
