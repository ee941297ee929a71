"""Blinding: what a clinician sees never names a model (the task view's type,
the pages and responses), and the leak guard holds back answers that
identify themselves while passing ordinary clinical text."""

from __future__ import annotations

import re
import typing

import pytest

from clinieval.platform.leakguard import LeakGuard
from clinieval.platform.read_models import TaskView
from clinieval.platform.screening import flagged_answers
from clinieval.web.testing import LOOK_ALIKES, MODELS, SELF_IDENTIFYING, model_strings
from clinieval.web.testing import member_client as member
from tests.web.support import answer_form, clear_answers, take

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")


FORBIDDEN_FIELDS = re.compile(r"model|provider|version|answer_id|vendor", re.IGNORECASE)


def _fields(model: type) -> typing.Iterator[tuple[str, object]]:
    for name, info in model.model_fields.items():
        yield name, info.annotation
        for arg in typing.get_args(info.annotation) or (info.annotation,):
            inner = typing.get_args(arg) or (arg,)
            for t in inner:
                if isinstance(t, type) and hasattr(t, "model_fields"):
                    yield from _fields(t)


def test_the_clinician_task_view_has_no_field_that_identifies_a_model():
    names = [name for name, _ in _fields(TaskView)]
    assert "panels" in names and "text" in names and "criteria" in names
    assert [n for n in names if FORBIDDEN_FIELDS.search(n)] == []


def test_task_pages_contain_no_model_strings(app, engine):
    c = member(app, engine, "x", "clinician")
    bodies = []
    for kind in ("rating", "pair"):
        url = take(c, kind)
        bodies.append(c.get(url))
        bodies.append(c.post(url, data=answer_form(c, url),
                             headers={"accept": "application/json"}))
    bodies.append(c.get("/s/x/history"))
    answers = clear_answers(engine, "x") | {f["answer_id"] for f in flagged_answers(engine, "x")}
    for r in bodies:
        text = r.text + " ".join(f"{k}: {v}" for k, v in r.headers.items())
        assert [s for s in [*model_strings(), *answers] if s in text] == []


CLINICAL = [
    *LOOK_ALIKES,
    "Mr Claude Bernard, 70, has new atrial fibrillation.",
    "Gemini patients are no different: assess the rash by its morphology.",
    "Llamas and alpacas can carry zoonoses; ask about animal contact.",
    "Palmar creases and palmoplantar keratoderma are worth documenting.",
    "Take a history as an aide-memoire for the ward round.",
    "Metformin is first line; Meta-analyses support it.",
    "The mistral wind season did not change her asthma control.",
    "A falcon handler with psittacosis-like symptoms needs serology.",
    "The findings cohere with early sepsis; a bard of old would call it fever.",
    "Repeat the test on 2024-08-06 and quote reference 002.",
    "She writes a sonnet a day; the pro forma asks about mood.",
]

SELF = [
    *SELF_IDENTIFYING.values(),
    "As an AI language model, I cannot give a diagnosis.",
    "I am an artificial intelligence and not a doctor.",
    "This answer comes from GPT-4o; consult a physician.",
    "I was trained by Anthropic to be helpful.",
    "I'm Gemini, a large language model built by Google.",
    "As Llama, a language model, I advise caution.",
    "Med-PaLM suggests checking the troponin.",
    "My knowledge cutoff means newer guidance may exist.",
    "Cohere and Bard both advise rest.",
    "I'm Sonnet, happy to help: get an ECG.",  # a word of "Claude 3.5 Sonnet"
    "Sonnet, an AI assistant, would repeat the troponin.",
]


@pytest.mark.parametrize("text", CLINICAL)
def test_the_leak_guard_passes_ordinary_clinical_text(text):
    guard = LeakGuard([v for m in MODELS for v in m.values()])
    assert guard.screen(text).flagged is False, guard.screen(text).reason


@pytest.mark.parametrize("text", SELF)
def test_the_leak_guard_flags_answers_that_identify_themselves(text):
    assert LeakGuard([v for m in MODELS for v in m.values()]).screen(text).flagged


def test_the_leak_guard_takes_the_words_of_a_models_names_not_their_filler():
    """A model introducing itself by a word of its id or name is caught, also
    when the id joins its words with hyphens; words many names share ("open",
    "health", "pro") are not names, so ordinary sentences with them pass."""
    guard = LeakGuard(["aster-120b", "Open Med 7B", "Acme Health", "kite_pro.v2"])
    for text in ("I'm Aster, happy to help: get an ECG.", "I am Kite, here to help.",
                 "Acme, an AI assistant, suggests rest."):
        assert guard.screen(text).flagged, text
    for text in ("I'm open to other views on the dosing.", "Digital health tools help.",
                 "I am pro early mobilisation.", "The aster family includes ragweed."):
        assert not guard.screen(text).flagged, (text, guard.screen(text).reason)


def test_flagged_answers_are_held_back_and_listed(app, engine):
    flagged = flagged_answers(engine, "x")
    assert len(flagged) == len(SELF_IDENTIFYING)
    assert all(f["reason"] for f in flagged)
