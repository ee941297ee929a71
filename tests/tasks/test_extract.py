"""Reading answers out of model outputs: the stated rules on adversarial
outputs (each case below is one rule of clinieval.tasks.extract's doc, or
an output that must stay unreadable rather than become a guess)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from clinieval.tasks import extract

CHOICES = {"A": "Aspirin", "B": "Heparin", "C": "Warfarin", "D": "Aspirin and clopidogrel"}


@pytest.mark.parametrize("output, letter", [
    ("The answer is (B), not C", "B"),            # a statement wins over later letters
    ("Not A; the answer is C.", "C"),
    ("Answer: d", "D"),                           # stated, lower case
    ("The correct option is C.", "C"),
    ("Final answer: [A]", "A"),
    ("**C**", "C"),                                # bold
    ("__B__ because heparin acts at once", "B"),
    ("B. Heparin, because it acts at once; A and C are slower.", "B"),  # leading letter
    ("B) heparin\nExplanation: A is wrong", "B"),
    ("(D)", "D"),
    ("I think A is correct", "A"),                 # the one letter standing alone
    ("warfarin", "C"),                             # the one option named
    ("Aspirin and clopidogrel together", "D"),     # the longer option holding a shorter one
])
def test_choice_letters_by_the_stated_rules(output, letter):
    assert extract.choice_letter(output, CHOICES) == letter


@pytest.mark.parametrize("output", [
    "I think A or C",                              # several letters
    "Options B and D are both plausible",
    "A patient like this needs urgent review",     # the article, not a letter
    "None of these",
    "The answer is E",                             # a letter outside the choices
    "",
    "aspirin or heparin",                          # two options named
])
def test_outputs_without_one_answer_are_unreadable(output):
    assert extract.choice_letter(output, CHOICES) is None


@given(st.text(max_size=200))
def test_a_letter_read_is_always_one_of_the_choices(output):
    assert extract.choice_letter(output, CHOICES) in (None, *CHOICES)


@pytest.mark.parametrize("output, value, problem", [
    ("The answer is 12.5 mL/min, from Cockcroft-Gault", 12.5, None),
    ("Weight 72 kg, creatinine 1.2: result = 66.7 mL/min", 66.7, None),  # the stated number
    ("66.7", 66.7, None),
    ("Clearance is about 1,234 mL/min", 1234.0, None),
    ("5 then 6", 6.0, None),                                             # else the last number
    ("Answer: 66.7 mg", None, "unit 'mg', expected 'mL/min'"),          # a different unit
    ("I cannot tell", None, "no number"),
])
def test_numbers_and_units(output, value, problem):
    assert extract.number(output, "mL/min") == (value, problem)


def test_tolerance_is_relative_or_absolute():
    assert extract.within(66.7 * 1.049, 66.7, 0.05, 0)
    assert not extract.within(66.7 * 1.051, 66.7, 0.05, 0)
    assert extract.within(10.4, 10, 0, 0.5) and not extract.within(10.6, 10, 0, 0.5)


def test_token_f1_matches_a_hand_count():
    # prediction tokens: aspirin, 300, mg, now ; reference: give, aspirin, 300, mg
    # common 3: precision 3/4, recall 3/4, F1 0.75
    steps = ("lower", "punctuation", "articles", "whitespace")
    assert extract.token_f1("Aspirin 300 mg, now!", "Give the aspirin 300 mg", steps) == 0.75
    assert extract.token_f1("", "", steps) == 1.0
    assert extract.token_f1("heparin", "aspirin", steps) == 0.0


def test_normalisation_steps():
    assert extract.normalise("  The  Heparin! ", ("lower", "punctuation", "articles",
                                                  "whitespace")) == "heparin"
    assert extract.normalise("The Heparin!", ("lower",)) == "the heparin!"


def test_json_answers_against_their_schema():
    schema = {"type": "object", "required": ["answer"], "additionalProperties": False,
              "properties": {"answer": {"type": "number"}}}
    assert extract.json_value('Here:\n```json\n{"answer": 4}\n```') == {"answer": 4}
    assert extract.schema_problem({"answer": 4}, schema) is None
    assert extract.schema_problem({"answer": "4"}, schema) == "$.answer: expected number"
    assert extract.schema_problem({}, schema) == "$: missing 'answer'"
    assert extract.schema_problem({"answer": 1, "x": 2}, schema) == "$: unexpected 'x'"
    assert extract.schema_problem({"answer": True}, schema) == "$.answer: expected number"
    with pytest.raises(ValueError):
        extract.json_value("no json here")
