"""Chatbot-Arena-style battle logs: model_a, model_b, winner (incl. ties)."""

from __future__ import annotations

from pathlib import Path

from clinieval.io.foreign.builder import UNSPECIFIED, Builder, case_id_for, source_meta
from clinieval.io.foreign.records import Record, conversation, parse, pick_turn, split_records
from clinieval.rubric import IDENTITY, CriterionMap, load_rubric
from clinieval.schema.domain import Rubric
from clinieval.snapshot import Snapshot

ARENA_WINNERS = {"model_a": "A", "model_b": "B", "tie": "tie", "tie (bothbad)": "both_bad"}
"""Arena winner -> preference choice."""


def looks_like(record: dict) -> bool:
    return "model_a" in record and "model_b" in record


def _arena_winner(rec: Record) -> str:
    expected = " / ".join(repr(w) for w in ARENA_WINNERS)
    winner = rec.raw("winner", expected)
    if not isinstance(winner, str) or winner.strip() not in ARENA_WINNERS:
        rec.fail("unknown winner", "winner", expected=expected, got=winner)
    return ARENA_WINNERS[winner.strip()]


def read(path: str | Path, *, rubric: Rubric | None = None,
               criterion_map: CriterionMap = IDENTITY) -> Snapshot:
    """Read a Chatbot-Arena-style battle log (a JSON array or JSON Lines).

    Each battle becomes one preference: model_a's answer is answer A, shown
    left; winner model_a / model_b / tie / "tie (bothbad)" becomes A / B / tie
    / both_bad; ``judge`` is the rater and ``tstamp`` (unix seconds) the time.
    With conversations, the case is the first user turn (one case per distinct
    prompt text) and each answer the last assistant turn. Without them, the
    case is ``question_id`` (else ``battle-N``) and the answers carry no text.
    No ratings are produced; ``rubric`` only fills the criteria table.
    """
    rubric = rubric or load_rubric()
    records = split_records(parse(path), what="battles", is_record=lambda d: "model_a" in d)
    out = Builder(records[0].source)
    multi_turn = sum(_arena_battle(rec, index, out)
                     for index, rec in enumerate(records, start=1))
    notes = []
    if multi_turn:
        notes.append(f"{multi_turn} battle(s) had several turns; only the first user turn"
                     " (the case prompt) and the last assistant turn (the answer) were kept.")
    return out.snapshot(rubric, source_meta("arena", out.source, criterion_map, notes=notes))


def _arena_battle(rec: Record, index: int, out: Builder) -> bool:
    """Add one battle; True when its conversations had more than one exchange."""
    model_a = rec.ident("model_a", "the model behind answer A")
    model_b = rec.ident("model_b", "the model behind answer B")
    choice = _arena_winner(rec)
    question_id = rec.ident("question_id", "the question id", required=False)
    judge = rec.ident("judge", "the rater", required=False)
    created = rec.timestamp("tstamp")
    language = rec.text("language", "the conversation's language", required=False,
                        empty=True) or None
    conversations = [conversation(rec, "conversation_a"), conversation(rec, "conversation_b")]
    if (conversations[0] is None) != (conversations[1] is None):
        missing = "conversation_a" if conversations[0] is None else "conversation_b"
        rec.fail("only one side has a conversation", missing,
                 expected="both conversation_a and conversation_b, or neither")
    if conversations[0] is None:
        case_id = out.case(question_id or f"battle-{index}", specialty=UNSPECIFIED,
                           language=language)
        answers = out.pair(case_id, (model_a, None), (model_b, None), f"battle-{index}")
        multi = False
    else:
        case_id, answers, multi = _arena_texts(rec, out, conversations, (model_a, model_b),
                                               language)
    out.rater(judge)
    out.preference(case_id=case_id, answer_a_id=answers[0], answer_b_id=answers[1],
                   shown_left="A", choice=choice, rater_id=judge, created_at=created)
    return multi


def _arena_texts(rec: Record, out: Builder, conversations: list, models: tuple[str, str],
                 language: str | None) -> tuple[str, tuple[str, str], bool]:
    keys = ("conversation_a", "conversation_b")
    prompts = [pick_turn(rec, k, c, "user", last=False) for k, c in zip(keys, conversations,
                                                                     strict=True)]
    if prompts[0] != prompts[1]:
        rec.fail("the two conversations start with different user turns", keys[1],
                 expected=f"the same first user turn as conversation_a ({prompts[0]!r:.40})",
                 got=prompts[1])
    texts = [pick_turn(rec, k, c, "assistant", last=True) for k, c in zip(keys, conversations,
                                                                      strict=True)]
    prompt = prompts[0].strip()
    case_id = out.case(case_id_for(prompt), prompt=prompt, specialty=UNSPECIFIED,
                       language=language)
    answers = out.pair(case_id, (models[0], texts[0]), (models[1], texts[1]))
    multi = any(sum(who == "user" for who, _ in c) > 1 for c in conversations)
    return case_id, answers, multi
