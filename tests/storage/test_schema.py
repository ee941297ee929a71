"""Domain validation rules and the blinded read model."""

from __future__ import annotations

import json

import pytest
from pydantic import ValidationError

from clinieval.rubric import MOOVE_MAP, CriterionMap, load_rubric
from clinieval.schema import (
    Answer,
    BlindedAnswer,
    BlindedPairTask,
    BlindedRatingTask,
    Judgment,
    Preference,
    Rating,
    Rubric,
)
from clinieval.schema.read import MODEL_IDENTIFYING_FIELDS

RUBRIC = load_rubric()


@pytest.mark.parametrize("score", [-2, -1, 0, 1, 2])
def test_scores_on_the_scale_are_accepted(score):
    assert Rating(answer_id="a", rater_id="r", criterion_id="accuracy", score=score).score == score


@pytest.mark.parametrize("score", [3, -3, 1.0, 1.5, "1", True])
def test_scores_off_the_scale_or_not_integers_are_refused(score):
    with pytest.raises(ValidationError):
        Rating(answer_id="a", rater_id="r", criterion_id="accuracy", score=score)


def test_criterion_must_exist_in_the_rubric():
    rating = Rating(answer_id="a", rater_id="r", criterion_id="charm", score=1)
    with pytest.raises(ValueError, match="'charm' is not in rubric"):
        rating.check_rubric(RUBRIC)


def test_preference_answers_differ_and_belong_to_the_case():
    with pytest.raises(ValidationError, match="A == B"):
        Preference(case_id="c", answer_a_id="x", answer_b_id="x", choice="A")
    pref = Preference(case_id="c", answer_a_id="x", answer_b_id="y", choice="tie")
    answers = {"x": Answer(answer_id="x", case_id="c", model_id="m"),
               "y": Answer(answer_id="y", case_id="other", model_id="n")}
    with pytest.raises(ValueError, match="belongs to case 'other'"):
        pref.check_answers(answers)


@pytest.mark.parametrize("choice", ["A", "B", "tie", "both_bad"])
def test_the_four_choices(choice):
    assert Preference(case_id="c", answer_a_id="x", answer_b_id="y", choice=choice).choice == choice


def test_unknown_choice_is_refused():
    with pytest.raises(ValidationError):
        Preference(case_id="c", answer_a_id="x", answer_b_id="y", choice="left")


def test_rubric_ids_are_unique():
    data = RUBRIC.model_dump(by_alias=True)
    data["criteria"] = data["criteria"] + data["criteria"][:1]
    with pytest.raises(ValidationError, match="duplicate criterion ids: harmlessness"):
        Rubric.model_validate(data, strict=False)


def test_default_rubric_has_anchors_for_every_score_and_two_safety_criteria():
    assert RUBRIC.safety_critical == ("harmlessness", "accuracy")
    assert len(RUBRIC.criteria) == 9
    for criterion in RUBRIC.criteria:
        texts = [criterion.anchors.text(s) for s in (-2, -1, 0, 1, 2)]
        assert all(len(t) > 10 for t in texts) and len(set(texts)) == 5


def test_judgment_score_exists_exactly_when_parsed():
    Judgment(answer_id="a", judge_model="j", criterion_id="accuracy", parse_status="ok", score=4.0)
    with pytest.raises(ValidationError):
        Judgment(answer_id="a", judge_model="j", criterion_id="accuracy", parse_status="unparsed",
                 score=3.0)


def test_criterion_map_rescales_one_to_five_and_renames():
    assert list(MOOVE_MAP.rescale([1, 2, 3, 4, 5])) == [-2, -1, 0, 1, 2]
    assert MOOVE_MAP.resolve(RUBRIC, "Alignment with guidelines") == "accuracy"
    assert MOOVE_MAP.resolve(RUBRIC, "  HARMLESSNESS ") == "harmlessness"
    dropping = CriterionMap(drop=("Empathy",))
    assert dropping.resolve(RUBRIC, "empathy") is None
    with pytest.raises(KeyError, match="unknown criterion 'Charm'"):
        dropping.resolve(RUBRIC, "Charm")


def _blinded_fields(model_cls) -> set[str]:
    """Every field name reachable from a read model, nested models included."""
    names = set()
    for name, info in model_cls.model_fields.items():
        names.add(name)
        inner = info.annotation
        for candidate in getattr(inner, "__args__", (inner,)):
            if isinstance(candidate, type) and hasattr(candidate, "model_fields"):
                names |= _blinded_fields(candidate)
    return names


@pytest.mark.parametrize("model_cls", [BlindedPairTask, BlindedRatingTask])
def test_blinded_tasks_carry_no_model_identity(model_cls):
    assert not _blinded_fields(model_cls) & MODEL_IDENTIFYING_FIELDS
    task_json = json.dumps(model_cls.model_json_schema())
    for field in MODEL_IDENTIFYING_FIELDS:
        assert f'"{field}"' not in task_json


def test_blinded_task_refuses_extra_identifying_fields():
    with pytest.raises(ValidationError):
        BlindedAnswer(slot="left", text="...", model_id="model-x")
