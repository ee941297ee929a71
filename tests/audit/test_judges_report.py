"""The judge sections recover what `plant_judgments` planted, from a
snapshot and from a bundle, and stay out of reports without judgments."""

from __future__ import annotations

import numpy as np
import pytest

from clinieval.audit import audit
from clinieval.audit.result import Section
from clinieval.audit.run import JUDGE_SECTIONS, judge_headlines
from clinieval.io.bundle import write_bundle
from clinieval.synth import generate
from clinieval.synth.judges import JudgePlan, plant_judgments


@pytest.fixture(scope="module")
def planted():
    return plant_judgments(generate(0, 0.05), JudgePlan(seed=1))


@pytest.fixture(scope="module")
def result(planted):
    return audit(planted, bootstrap=300, comparison_bootstrap=2000)


def test_jury_agreement_with_clinicians_is_recovered(planted, result):
    truth = planted.meta["planted"]["judges"]["jury_icc3k_z_continuous"]  # 2 rho / (1 + rho)
    row = result["judges_vs_clinicians"].tables["agreement"].iloc[0]
    assert row["measure"].startswith("jury vs clinicians")
    assert abs(row["value"] - truth) < 0.08
    assert row["value_lo"] < row["value"] < row["value_hi"]
    assert row["n"] == JudgePlan().jury_answers


def test_planted_position_bias_is_recovered(planted, result):
    truth = 100 * planted.meta["planted"]["judges"]["first_shown_wins"]
    row = result["automated_judges"].tables["position"].iloc[0]
    assert row["share_pct_lo"] <= truth <= row["share_pct_hi"]
    assert result["automated_judges"].values["position_bias"]


def test_unparsed_judgments_are_counted_not_scored(planted, result):
    judgments = planted["judgments"].to_pandas()
    unparsed = judgments["parse_status"] != "ok"
    assert unparsed.sum() > 0 and judgments.loc[unparsed, "score"].isna().all()
    # a rubric or jury call scores every criterion of its answer: one call, many rows
    unit = ["judge_kind", "judge_model", "answer_id", "answer_b_id", "juror", "repeat",
            "shown_first"]
    bad = judgments[unparsed].fillna({"answer_b_id": "", "shown_first": ""})
    bad["criterion_id"] = bad["criterion_id"].where(~bad["judge_kind"].isin(["rubric", "jury"]))
    calls = len(bad.drop_duplicates([*unit, "criterion_id"]))
    assert result["automated_judges"].values["not_parsed"] == calls < int(unparsed.sum())
    # every answer with an unparsed rule is left out of the gate scores
    rules = judgments[judgments["answer_id"].str.startswith("gate-")]
    broken = rules.loc[rules["parse_status"] != "ok", "answer_id"].nunique()
    assert result["gates"].values["unscored_answers"] == broken


def test_worst_at_k_collapse_is_recovered_while_the_mean_looks_fine(planted, result):
    truth = planted.meta["planted"]["judges"]
    names = dict(zip(planted["models"].column("model_id").to_pylist(),
                     planted["models"].column("display_name").to_pylist(), strict=True))
    worst = result["gates"].tables["worst_at_k"]
    steady = worst[worst["model"] == names[truth["gate_models"]["steady"]]]
    collapsing = worst[worst["model"] == names[truth["gate_models"]["collapsing"]]]
    # the steady model meets the same rules in every sample: a flat curve
    assert np.ptp(steady["worst_at_k"]) == pytest.approx(0, abs=1e-12)
    # the collapsing model: its mean (Worst@1) as planted, no worse than the
    # steady model's, yet Worst@5 far below it
    first = collapsing.iloc[0]
    assert first["worst_at_k_lo"] <= truth["collapsing_mean"] <= first["worst_at_k_hi"]
    assert first["worst_at_k"] > steady["worst_at_k"].iloc[0] - 0.05
    assert collapsing["worst_at_k"].iloc[-1] < steady["worst_at_k"].iloc[-1] - 0.2
    inside = [lo <= t <= hi for t, lo, hi in zip(
        truth["collapsing_worst_at_k"], collapsing["worst_at_k_lo"], collapsing["worst_at_k_hi"],
        strict=True)]
    assert sum(inside) >= 4  # 95% intervals: one miss in five is chance
    assert "Largest Worst@k collapse: " + names[truth["gate_models"]["collapsing"]] in (
        result["gates"].summary)


def test_gate_comparisons_are_holm_corrected_pairs(result):
    comparisons = result["gates"].tables["comparisons"]
    for _, family in comparisons.groupby("gate"):
        assert len(family) == 3  # three gate models, three pairs
        assert (family["p_holm"] >= family["p_value"] - 1e-12).all()
    assert result.settings.comparison_bootstrap == 2000


def test_a_bundle_gives_the_same_judge_numbers(planted, result, tmp_path):
    write_bundle(planted, tmp_path / "b")
    again = audit(tmp_path / "b", bootstrap=300, comparison_bootstrap=2000)
    for key in JUDGE_SECTIONS:
        for name, frame in result[key].tables.items():
            assert again[key].tables[name].equals(frame), (key, name)


def test_judge_sections_stay_out_of_a_report_without_judgments():
    result = audit("demo", bootstrap=50)
    for key in JUDGE_SECTIONS:
        assert result[key].skipped and result[key].values["shown"] is False
    assert not any("Automated judges" in line for line in result.headlines)


def _sections(clinicians: str | None, judges: str | None) -> dict[str, Section]:
    keys = ("safety_leaderboard", *JUDGE_SECTIONS)
    out = {k: Section(k, k) for k in keys}
    out["safety_leaderboard"].values["safest"] = clinicians
    out["judges_vs_clinicians"].values["judge_safest"] = judges
    return out


def test_the_summary_says_when_judges_and_clinicians_disagree_on_the_safest_model():
    assert any("disagree on the safest model" in line
               for line in judge_headlines(_sections("Aster", "Breeze")))
    assert not any("disagree" in line for line in judge_headlines(_sections("Aster", "Aster")))
    assert not any("disagree" in line for line in judge_headlines(_sections("Aster", None)))


def test_synth_command_plants_judgments(tmp_path):
    from typer.testing import CliRunner

    from clinieval.cli import app
    from clinieval.io.bundle import read_manifest

    out = tmp_path / "snap"
    run = CliRunner().invoke(app, ["synth", "--out", str(out), "--scale", "0.02",
                                   "--judgments"])
    assert run.exit_code == 0, run.output
    assert read_manifest(out)["tables"]["judgments"]["rows"] > 0


@pytest.mark.parametrize("fmt", ["csv", "jsonl", "parquet"])
def test_a_judgments_table_imports_from_a_tables_folder(planted, result, tmp_path, fmt):
    """The io layer's table folders carry judgments in the contract's columns."""
    from clinieval.io.tables_io import write_table_files

    write_table_files(planted, tmp_path, "parquet" if fmt == "parquet" else "csv")
    if fmt == "jsonl":  # the writer has no JSONL: write the judgments table by hand
        (tmp_path / "judgments.csv").unlink()
        frame = planted["judgments"].to_pandas()
        frame.to_json(tmp_path / "judgments.jsonl", orient="records", lines=True,
                      date_format="iso")
    again = audit(tmp_path, bootstrap=300, comparison_bootstrap=2000)
    for key in ("automated_judges", "gates"):
        assert again[key].values == result[key].values, key
    first = again["judges_vs_clinicians"].tables["agreement"]["value"]
    assert np.allclose(first, result["judges_vs_clinicians"].tables["agreement"]["value"])


def test_a_bad_parse_status_names_file_row_and_field(planted, tmp_path):
    from clinieval.contract.validate import validate
    from clinieval.errors import InputError
    from clinieval.io.tables_io import write_table_files
    from clinieval.sources import read_source

    write_table_files(planted, tmp_path, "csv")
    path = tmp_path / "judgments.csv"
    lines = path.read_text("utf-8").splitlines()
    lines[3] = lines[3].replace('"ok"', '"fine"', 1)
    path.write_text("\n".join(lines) + "\n", "utf-8")
    with pytest.raises(InputError) as err:
        validate(read_source(tmp_path)[0], sources={"judgments": str(path)})
    assert "judgments.csv" in str(err.value) and "parse_status" in str(err.value)


def test_planted_rubric_scores_are_recovered(planted, result):
    # Hand-worked expectation for rules (+5, +3, -4), met with p = .7, .7, .2:
    # E[clip((5a + 3b - 4c) / 8, 0, 1)] over the eight outcomes.
    p, q = 0.7, 0.2
    outcomes = {(1, 1, 0): 1.0, (1, 1, 1): 0.5, (1, 0, 0): 5 / 8, (1, 0, 1): 1 / 8,
                (0, 1, 0): 3 / 8, (0, 1, 1): 0.0, (0, 0, 0): 0.0, (0, 0, 1): 0.0}
    expected = sum(v * (p if a else 1 - p) * (p if b else 1 - p) * (q if c else 1 - q)
                   for (a, b, c), v in outcomes.items())
    assert planted.meta["planted"]["judges"]["rubric_expected"] == pytest.approx(expected)
    frame = result["rubric_scores"].tables["rubric_scores"]
    pooled = (frame["score"] * frame["n"]).sum() / frame["n"].sum()
    assert abs(pooled - expected) < 0.06
    assert frame["unscored"].sum() > 0  # unparsed rules leave answers unscored
