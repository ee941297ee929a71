"""The project's vocabulary: the score scale, vote choices, sides, parse
statuses, roles, adjudication verdicts and judge kinds.

Invariant: each is defined once, here; SQL CHECKs, pydantic Literals, CLI
choices and the audit's integer codes are all derived from these tuples, and
the audit's codes are indexes into them (so their order is part of the contract).
"""

from __future__ import annotations

SCORE_MIN, SCORE_MAX = -2, 2
SCORES = tuple(range(SCORE_MIN, SCORE_MAX + 1))
"""The anchored rubric scale, -2..+2 (index in this tuple = the audit's score code)."""

CHOICES = ("A", "B", "tie", "both_bad")
"""Preference outcomes: answer A better, answer B better, tie, both unacceptable
(index in this tuple = the audit's choice code)."""

SIDES = ("A", "B")

PARSE_STATUSES = ("ok", "unparsed", "error")
"""Outcome of an automated judgment: parsed; output kept raw but unparseable;
the call itself failed."""

ROLES = ("admin", "clinician", "viewer", "adjudicator")
"""Platform roles, per study. An adjudicator (a senior clinician) rules on
answers whose clinicians disagree across the fail line; they rate nothing."""

ADJUDICATION_VERDICTS = ("fail", "pass")
"""An adjudicator's verdict on a disputed criterion of one answer."""

JUDGE_KINDS = ("rubric", "jury", "pairwise", "rule")
"""Automated judges: the study's rubric on -2..+2; a jury of k judges x axes
on 1..5; a pairwise verdict judged in both orders; per-case rules met or not."""
