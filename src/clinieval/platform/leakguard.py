"""The leak guard: does an answer's text give away which model wrote it?

Blinding fails if an answer names its maker ("As an AI developed by …",
"I am Claude"). The guard looks for three things:

1. distinctive model and vendor strings (``OpenAI``, ``GPT-4o``, a study
   model's multi-word name or versioned id) anywhere in the text;
2. self-identification phrases ("as an AI language model", "I was trained
   by …");
3. names that are also ordinary words or names (Claude, Gemini, Llama,
   Mistral, a one-word provider) only inside a self-identifying phrase, so
   that "a patient named Claude", "a Gemini", "llama exposure" or "palmar
   erythema" pass.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

DISTINCTIVE = (
    "OpenAI",
    "Anthropic",
    "DeepMind",
    "ChatGPT",
    "GPT-3.5",
    "GPT-4",
    "GPT-4o",
    "GPT-5",
    "Med-PaLM",
    "MedPaLM",
    "Copilot",
    "DeepSeek",
    "Qwen",
    "Hugging Face",
    "HuggingFace",
    "Meta AI",
    "Mistral AI",
    "Google AI",
    "Microsoft AI",
    "xAI",
)
"""Strings that only ever name a model or a vendor (matched as whole words)."""

CASE_SENSITIVE = ("PaLM", "LLaMA", "Bard", "Cohere")
"""Names that are distinctive only in their own spelling ("palm" is anatomy,
findings may "cohere")."""

AMBIGUOUS = (
    "Claude",
    "Gemini",
    "Gemma",
    "Llama",
    "Mistral",
    "Mixtral",
    "Phi",
    "Falcon",
    "Grok",
    "Google",
    "Meta",
    "Microsoft",
    "Amazon",
    "Apple",
    "Alibaba",
)
"""Names that are also everyday words or people: flagged only when the text
uses them to introduce itself."""

_SELF = r"(?:i am|i'm|i’m|my name is|you are (?:talking|chatting) (?:to|with))"
_MADE = r"(?:developed|created|trained|built|made|designed|released)\s+by"
_AI = (
    r"(?:an?\s+)?(?:ai|artificial intelligence|(?:large )?language model|llm|chatbot"
    r"|virtual assistant|ai assistant)"
)

GENERIC = (
    r"\bas an? (?:ai|artificial intelligence)(?: language model| assistant| model)?\b",
    rf"\b{_SELF}\s+an?\s+(?:ai|artificial intelligence|large language model|language model)\b",
    rf"\b{_AI}\s+{_MADE}\b",
    r"\bmy (?:training data|knowledge cutoff|training cut-?off)\b",
)
"""Phrases in which an answer speaks about itself as a model."""


_NAME_FILLER = frozenset({
    "the", "and", "for", "model", "models", "chat", "instruct", "preview", "latest", "beta",
    "base", "open", "med", "medical", "health", "clinical", "care", "pro", "mini", "max",
    "plus", "large", "small", "medium", "turbo", "flash", "lite", "fast", "ultra", "next",
    "new", "one", "vision", "reasoning", "thinking", "expert", "assistant"})
"""Words of model names that name no one (a model "introducing itself as
Instruct" is not a thing answers do)."""


@dataclass(frozen=True)
class Verdict:
    flagged: bool
    reason: str | None = None


def _word(term: str) -> str:
    return rf"(?<![\w-]){re.escape(term)}(?![\w-])"


def _is_ambiguous(term: str) -> bool:
    """A single plain word (no digits, no hyphen) may be an ordinary word."""
    return bool(re.fullmatch(r"[A-Za-z]+", term)) and term not in DISTINCTIVE


def _in_context(term: str) -> str:
    t = re.escape(term)
    return (
        rf"\b{_SELF}\s+{t}\b|\b{_MADE}\s+{t}\b|\b{t}(?:'s|’s)?,?\s+(?:an?\s+)?"
        rf"(?:ai|artificial intelligence|large language model|language model|llm"
        rf"|ai assistant|chatbot)\b"
    )


class LeakGuard:
    """A compiled screen for one study: its model names, ids, versions and
    providers added to the default lists."""

    def __init__(self, study_terms: Iterable[str] = ()) -> None:
        # A bare version ("002", "2024-08-06") names nothing on its own: skip terms
        # without a letter, and very short ones.
        terms = {t.strip() for t in study_terms
                 if t and len(t.strip()) >= 3 and re.search(r"[A-Za-z]", t)}
        # A model introduces itself by part of its name too ("I'm Aster" for "Aster
        # 120B"): each word of a multi-word name, checked in context like any plain word.
        terms |= {w for t in terms if re.search(r"[\s_./-]", t)
                  for w in re.findall(r"[A-Za-z]{3,}", t) if w.lower() not in _NAME_FILLER}
        plain = sorted({*DISTINCTIVE, *(t for t in terms if not _is_ambiguous(t))}, key=str.lower)
        context = sorted({*AMBIGUOUS, *(t for t in terms if _is_ambiguous(t))}, key=str.lower)
        self._checks: list[tuple[re.Pattern, str]] = [
            *((re.compile(_word(t), re.IGNORECASE), f"names {t!r}") for t in plain),
            *((re.compile(_word(t)), f"names {t!r}") for t in CASE_SENSITIVE),
            *(
                (re.compile(_in_context(t), re.IGNORECASE), f"introduces itself as {t!r}")
                for t in context
            ),
            *((re.compile(p, re.IGNORECASE), "speaks of itself as an AI model") for p in GENERIC),
        ]

    def screen(self, text: str | None) -> Verdict:
        if not text or not text.strip():
            return Verdict(True, "has no text to show")
        for pattern, reason in self._checks:
            if match := pattern.search(text):
                return Verdict(True, f"{reason}: …{match.group(0)}…")
        return Verdict(False)
