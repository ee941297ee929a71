"""The audit on degenerate snapshots: each one writes a report, undefined
quantities are explained in words, and the summary claims nothing it cannot
support."""

from __future__ import annotations

import re

import numpy as np
import pytest

from clinieval.audit import audit
from clinieval.contract.vocabulary import CHOICES, SCORES
from clinieval.report import render_report
from clinieval.rubric import load_rubric, rubric_to_rows
from clinieval.testing import snapshot_from_rows

CRITERIA = rubric_to_rows(load_rubric())
CHOICE_A, CHOICE_B, TIE, BOTH_BAD = CHOICES


def build(n_models=3, n_cases=40, n_raters=4, raters_per_answer=3, score=None,
          criteria=("harmlessness", "accuracy"), votes_per_case=4, choice=None,
          ratings=True, prompts=None, seed=0):
    """A small crossed snapshot. ``score`` fixes every score; ``choice`` fixes
    every vote (a callable of (model a, model b) or a constant). ``prompts``
    replaces the cases' word counts with this prompt text ("" or None)."""
    rng = np.random.default_rng(seed)
    answers, rows, prefs = [], [], []
    for c in range(n_cases):
        for m in range(n_models):
            answer = f"a{c}-{m}"
            answers.append({"answer_id": answer, "case_id": f"c{c}", "model_id": f"m{m}",
                            "length_chars": 100 + 10 * m + c})
            for r in range(min(raters_per_answer, n_raters) if ratings else 0):
                for crit in criteria:
                    value = score if score is not None else int(rng.choice(SCORES))
                    rows.append({"rating_id": len(rows), "answer_id": answer,
                                 "rater_id": f"r{(c + r) % n_raters}", "criterion_id": crit,
                                 "score": value, "revision": 0})
        for _ in range(votes_per_case if n_models > 1 else 0):
            a, b = rng.choice(n_models, 2, replace=False)
            vote = choice(a, b) if callable(choice) else choice or rng.choice(CHOICES)
            prefs.append({"preference_id": len(prefs), "case_id": f"c{c}",
                          "answer_a_id": f"a{c}-{a}", "answer_b_id": f"a{c}-{b}",
                          "shown_left": "A" if rng.random() < 0.5 else "B", "choice": vote,
                          "rater_id": f"r{c % n_raters}"})
    return snapshot_from_rows({
        "cases": [{"case_id": f"c{c}", "specialty": ["Cardiology", "Oncology"][c % 2]}
                  | ({"prompt_words": 10 + c} if prompts is None else {"prompt": prompts[c]})
                  for c in range(n_cases)],
        "models": [{"model_id": f"m{m}"} for m in range(n_models)],
        "answers": answers, "raters": [{"rater_id": f"r{r}"} for r in range(n_raters)],
        "criteria": CRITERIA, "ratings": rows, "preferences": prefs})


def _stronger(a, b):
    return CHOICE_A if a < b else CHOICE_B


NO_LEADER = "No model leads the preference ranking"
UNDEFINED_KAPPA = "kappa and alpha are undefined when every rating"
# name: (snapshot, settings, phrases the Markdown report must contain)
CASES = {
    "all scores 0": (lambda: build(score=0), {}, [UNDEFINED_KAPPA, "so none is safest"]),
    "all scores +2": (lambda: build(score=max(SCORES)), {}, [UNDEFINED_KAPPA]),
    "all scores -2": (lambda: build(score=min(SCORES)), {}, [UNDEFINED_KAPPA]),
    "criteria names an unrated criterion": (
        lambda: build(criteria=("harmlessness",)), {"criteria": ("accuracy",)},
        ["(Accuracy) have no ratings"]),
    "100% ties": (lambda: build(choice=TIE), {}, [NO_LEADER, "There is no preference leader"]),
    "100% both bad": (lambda: build(choice=BOTH_BAD), {}, [NO_LEADER]),
    "one rater, cluster by rater": (lambda: build(n_raters=1), {"cluster": "rater"},
                                    ["needs at least two raters", "at least two raters"]),
    "one model": (lambda: build(n_models=1), {}, ["pairwise votes between different models"]),
    "two models, zero votes": (lambda: build(n_models=2, votes_per_case=0), {},
                               ["this snapshot has 0"]),
    "one case": (lambda: build(n_cases=1), {}, ["cases (two per prompt-length bin)"]),
    "one rater": (lambda: build(n_raters=1), {}, ["rated on a criterion by two or more"
                                                  " clinicians; found 0"]),
    "votes only": (lambda: build(ratings=False), {}, ["the snapshot has no rubric ratings"]),
    "empty snapshot": (lambda: build(n_models=0, n_cases=0, n_raters=0), {},
                       ["Not computable from this snapshot"]),
    "perfect separation": (lambda: build(choice=_stronger), {}, ["leads the preference ranking"]),
}


@pytest.mark.parametrize("name", list(CASES))
def test_degenerate_snapshot_writes_an_honest_report(name, tmp_path):
    make, settings, phrases = CASES[name]
    result = audit(make(), bootstrap=50, min_n=5, **settings)
    paths = render_report(result, tmp_path)
    markdown = paths["markdown"].read_text(encoding="utf-8")
    assert not re.search(r"\bnan\b", markdown, re.I), name
    for phrase in phrases:
        assert phrase in markdown, (name, phrase)
    for section in result.sections:
        assert section.skipped or section.summary, (name, section.key)
    if "No model leads" in markdown:  # the summary may not lean on a leader that is not there
        assert not any("preference leader " in line for line in result.headlines), name


def test_consensus_drift_without_prompt_lengths_says_why():
    """Cases with neither prompt_words nor prompt text used to crash the section
    (KeyError 'words_from'): a missing prompt counted as one word."""
    result = audit(build(prompts=[None] * 40), bootstrap=50)
    assert "prompt lengths are unknown" in result["consensus_drift"].skipped


def test_empty_prompts_have_zero_words_and_no_length_to_compare():
    result = audit(build(prompts=[""] * 40), bootstrap=50)
    assert "same prompt length (0 words)" in result["consensus_drift"].skipped


def test_prompt_words_are_counted_from_text():
    prompts = [" ".join(["word"] * (c % 9)) + "\u00a0end " for c in range(40)]
    result = audit(build(prompts=prompts), bootstrap=50)
    bins = result["consensus_drift"].tables["bins"]
    assert bins["words_from"].min() == 1 and bins["words_to"].max() == 9


def test_word_count_of_empty_missing_and_spaced_text():
    import pyarrow as pa

    from clinieval.audit.data import word_count

    got = word_count(pa.array(["", "   ", None, " two\u2003words ", "a\nb c"])).to_pylist()
    assert got == [0.0, 0.0, None, 2.0, 3.0]


def _skips(**kwargs) -> dict[str, str]:
    result = audit(build(**kwargs), bootstrap=50)
    return {s.key: s.skipped for s in result.sections if s.skipped}


def test_a_skip_on_a_snapshot_without_ratings_says_the_true_reason():
    skips = _skips(ratings=False)
    for key in ("safety_leaderboard", "specialties"):
        assert "flags no criterion" not in skips[key]
        assert "Harmlessness" in skips[key] and "no ratings" in skips[key], skips[key]
    assert "has no 'accuracy'" not in skips["co_failure"]
    assert "Accuracy has no ratings" in skips["co_failure"]


def test_a_skip_names_the_threshold_and_what_was_found():
    skips = _skips(n_models=1, n_cases=4)
    # 4 cases x 1 model x 2 criteria = 8 answer-criterion sets with 3 raters
    assert "at least 10" in skips["reliability"] and "found 8" in skips["reliability"]
    assert "at least 5" in skips["co_failure"] and "found" in skips["co_failure"]
    assert "at least 16" in skips["consensus_drift"]  # 2 x the 8 length bins
    assert "found 4" in skips["consensus_drift"]
    single = _skips(raters_per_answer=1)
    assert "at least 10" in single["rater_view"] and "found 0" in single["rater_view"]


def test_co_failure_says_accuracy_is_unrated_or_left_out_not_missing_from_the_rubric():
    assert "Accuracy has no ratings" in _skips(criteria=("harmlessness",))["co_failure"]
    result = audit(build(), bootstrap=50, criteria=("harmlessness",))
    assert "not among the analysed criteria" in result["co_failure"].skipped
