"""LLM judges: rubric, jury, pairwise and rule. Each asks for JSON matching a
schema (sent as ``response_format``), validates it with pydantic, and stores
what it could not read as ``unparsed`` with the raw text: never a default.

Every judge can run as k jurors (the same model with different seeds, or
several model files) and with repeats (the same juror again, to measure
run-to-run variance); both are numbered in the judgment rows.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, create_model

from clinieval.contract import vocabulary
from clinieval.providers import Completion, ModelSpec
from clinieval.runs.data import AnswerText
from clinieval.runs.engine import Call, CallOutcome, Task
from clinieval.runs.generate import sample_seed
from clinieval.runs.keys import canonical, digest
from clinieval.runs.prompt_files import load_prompt

JURY_SCALE = (1, 2, 3, 4, 5)
"""MedHELM's jury scale (Likert 1..5), distinct from the clinicians' -2..+2."""

JUROR_SEED_STEP = 1000
"""Juror j samples with seed base + j * step; parse retries add 1, 2, ... to
a juror's seed, so jurors and retries never share a seed below this step."""

PAIR_VERDICTS = ("1", "2", *vocabulary.CHOICES[2:])
"""What the pairwise judge may answer: the first or second answer shown, or
a verdict on both (tie, both unacceptable)."""

A_SHARE = {"A": 1.0, "B": 0.0, "tie": 0.5, "both_bad": 0.5}
"""A pairwise row's score: answer A's share of the win."""

_STRICT = ConfigDict(extra="forbid")


def response_format(name: str, schema: dict) -> dict:
    return {"type": "json_schema", "json_schema": {"name": name, "strict": True, "schema": schema}}


def _object(properties: dict, reason_chars: int) -> dict:
    props = properties | {"reason": {"type": "string", "maxLength": reason_chars}}
    return {"type": "object", "properties": props, "required": list(props),
            "additionalProperties": False}


def parse_json(model: type[BaseModel], completion: Completion) -> tuple[str, Any]:
    """``("ok", value)`` or ``("unparsed", None)``; output cut off by the token
    limit is unparsed even when it happens to be valid JSON."""
    if completion.finish_reason == "length":
        return "unparsed", None
    try:
        return "ok", model.model_validate(json.loads(completion.text))
    except (ValueError, ValidationError):
        return "unparsed", None


def split(total: float, n: int, integer: bool) -> list:
    """Share one call's tokens or cost among the ``n`` rows it produced, so
    that sums over judgments equal what the calls used."""
    if not integer:
        return [total / n] * n
    base, extra = divmod(int(total), n)
    return [base + (i < extra) for i in range(n)]


@dataclass
class JudgeJob:
    """What every judge kind shares: answers, jurors, repeats, rows."""

    spec: ModelSpec
    answers: list[AnswerText]
    cases: dict[str, str]
    jurors: int = 1
    repeats: int = 1
    juror_offset: int = 0
    kind: str = "judge"
    judge_kind: str = field(init=False)
    tasks: list[Task] = field(init=False)
    settings: dict[str, Any] = field(init=False)

    def __post_init__(self) -> None:
        self.prompt = load_prompt(self.judge_kind)
        self.schema = self.build_schema()
        self._juror_settings: dict[tuple[int, int], tuple[dict[str, Any], str]] = {}
        tasks = [task for juror in range(self.jurors) for repeat in range(self.repeats)
                 for task in self.units(juror, repeat)]
        self.tasks = list({t.key: t for t in tasks}.values())
        self.settings = {"judge_kind": self.judge_kind, "prompt_version": self.prompt["version"],
                         "jurors": self.jurors, "repeats": self.repeats,
                         "juror_offset": self.juror_offset, "model_version": self.spec.version,
                         "generation": self.spec.generation.request_fields(),
                         "answers": len(self.answers)} | self.extra_settings()

    def extra_settings(self) -> dict[str, Any]:
        return {}

    def build_schema(self) -> dict:
        raise NotImplementedError

    def units(self, juror: int, repeat: int) -> list[Task]:
        raise NotImplementedError

    def call(self, user: str, juror: int, repeat: int) -> Call:
        settings, text = self.juror_settings(juror, repeat)
        messages = ({"role": "system", "content": self.prompt["system"]},
                    {"role": "user", "content": user})
        return Call(messages, settings, repeat, settings_text=text)

    def juror_settings(self, juror: int, repeat: int = 0) -> tuple[dict[str, Any], str]:
        """A juror's request settings for one repeat and their canonical text,
        made once and shared (read-only) by all its calls. Each repeat has its
        own seed (as each sample of a generation has), so repeats measure
        run-to-run variance on servers that honour seeds; repeat 0 keeps the
        juror's seed, and with it the cache keys of single runs."""
        if (juror, repeat) not in self._juror_settings:
            settings = self.spec.generation.request_fields()
            base = int(settings.get("seed") or 0) + juror * JUROR_SEED_STEP
            settings["seed"] = sample_seed(base, repeat)
            settings["response_format"] = response_format(f"clinieval_{self.judge_kind}",
                                                          self.schema)
            self._juror_settings[juror, repeat] = settings, canonical(settings)
        return self._juror_settings[juror, repeat]

    def task(self, calls: Sequence[Call], answer_id: str, **info: Any) -> Task:
        """A task per judged unit: two answers with the same text are still two
        tasks (their calls may share cache entries)."""
        calls = [c.keyed(self.spec.version) for c in calls]
        unit = canonical({"kind": self.judge_kind, "answer": answer_id, **info})
        return Task(digest([unit, *[c.first_key for c in calls]], 40), tuple(calls), answer_id,
                    info)

    def base_row(self, task: Task, outcome: CallOutcome, run_id: str) -> dict[str, Any]:
        return {"answer_id": task.answer_id, "judge_model": self.spec.id,
                "judge_kind": self.judge_kind, "run_id": run_id, "call_key": outcome.key,
                "parse_status": outcome.parse_status,
                "raw_output": outcome.completion.text if outcome.completion else None,
                "juror": self.juror_offset + task.info["juror"],
                "repeat": task.info["repeat"], "created_at": datetime.now(UTC),
                "reason": (outcome.value.reason if outcome.parse_status == "ok"
                           else outcome.error and f"call failed: {outcome.error}")}

    def rows_of_call(self, task: Task, outcome: CallOutcome, run_id: str,
                     items: list[tuple[str, dict]]) -> list[dict]:
        """One row per (criterion id, fields) of one call, sharing its cost."""
        base = self.base_row(task, outcome, run_id)
        c = outcome.completion
        n = len(items)
        tin = split(c.input_tokens if c else 0, n, True)
        tout = split(c.output_tokens if c else 0, n, True)
        cost = split(self.spec.prices.cost(c.input_tokens, c.output_tokens) if c else 0.0, n,
                     False)
        return [base | {"criterion_id": cid, "score": None, "input_tokens": tin[i],
                        "output_tokens": tout[i], "cost_usd": cost[i]} | fields
                for i, (cid, fields) in enumerate(items)]


@dataclass
class RubricJudge(JudgeJob):
    """Every criterion of the rubric on -2..+2 with its anchors, one call per answer."""

    criteria: list[dict] = field(default_factory=list)
    judge_kind: str = field(default="rubric", init=False)

    def build_schema(self) -> dict:
        score = {"type": "integer", "enum": list(vocabulary.SCORES)}
        scores = {"type": "object", "properties": {c["criterion_id"]: score for c in self.criteria},
                  "required": [c["criterion_id"] for c in self.criteria],
                  "additionalProperties": False}
        self.model = create_model(
            "RubricVerdict", __config__=_STRICT, reason=(str, ...),
            scores=(create_model("RubricScores", __config__=_STRICT, **{
                f"c{i}": (Literal[vocabulary.SCORES], Field(alias=c["criterion_id"]))
                for i, c in enumerate(self.criteria)}), ...))
        return _object({"scores": scores}, self.prompt["reason_max_chars"])

    def extra_settings(self) -> dict[str, Any]:
        return {"criteria": [c["criterion_id"] for c in self.criteria]}

    def units(self, juror: int, repeat: int) -> list[Task]:
        lines = "\n".join(self.prompt["criterion"].format(
            criterion_id=c["criterion_id"], name=c["name"], definition=c["definition"] or "",
            m2=c["anchor_m2"], m1=c["anchor_m1"], zero=c["anchor_0"], p1=c["anchor_p1"],
            p2=c["anchor_p2"]) for c in self.criteria)
        return [self.task([self.call(self.prompt["user"].format(
            case=self.cases[a.case_id], answer=a.text, criteria=lines), juror, repeat)],
            a.answer_id, juror=juror, repeat=repeat) for a in self.answers]

    def parse(self, task: Task, index: int, completion: Completion) -> tuple[str, Any]:
        return parse_json(self.model, completion)

    def rows(self, task: Task, outcomes: list[CallOutcome], run_id: str) -> dict[str, list]:
        outcome = outcomes[0]
        scores = (outcome.value.scores.model_dump(by_alias=True)
                  if outcome.parse_status == "ok" else {})
        items = [(c["criterion_id"], {"score": scores.get(c["criterion_id"])})
                 for c in self.criteria]
        return {"judgments": self.rows_of_call(task, outcome, run_id, items)}


@dataclass
class JuryJudge(JudgeJob):
    """MedHELM's jury: each juror scores every axis on 1..5."""

    judge_kind: str = field(default="jury", init=False)

    def build_schema(self) -> dict:
        axes = list(self.prompt["axes"])
        self.model = create_model("JuryVerdict", __config__=_STRICT, reason=(str, ...),
                                  **{axis: (Literal[JURY_SCALE], ...) for axis in axes})
        score = {"type": "integer", "enum": list(JURY_SCALE)}
        return _object({axis: score for axis in axes}, self.prompt["reason_max_chars"])

    def units(self, juror: int, repeat: int) -> list[Task]:
        axes = "\n".join(f"{axis}: {text}" for axis, text in self.prompt["axes"].items())
        return [self.task([self.call(self.prompt["user"].format(
            case=self.cases[a.case_id], answer=a.text, axes=axes), juror, repeat)],
            a.answer_id, juror=juror, repeat=repeat) for a in self.answers]

    def parse(self, task: Task, index: int, completion: Completion) -> tuple[str, Any]:
        return parse_json(self.model, completion)

    def rows(self, task: Task, outcomes: list[CallOutcome], run_id: str) -> dict[str, list]:
        outcome = outcomes[0]
        ok = outcome.parse_status == "ok"
        items = [(axis, {"score": float(getattr(outcome.value, axis)) if ok else None})
                 for axis in self.prompt["axes"]]
        return {"judgments": self.rows_of_call(task, outcome, run_id, items)}


class _PairVerdict(BaseModel):
    model_config = _STRICT
    better: Literal[PAIR_VERDICTS]
    reason: str


def resolve_pair(first: str | None, second: str | None, inconsistent: str = "tie"
                 ) -> str | None:
    """The verdict of a pair judged in both orders (choices in A/B terms):
    the shared choice when the orders agree; when they disagree the judge
    followed position, not content, and the pair counts as ``inconsistent``
    says ("tie", the default, or "drop" for no verdict). None if either
    order has no verdict."""
    if first is None or second is None:
        return None
    if first == second:
        return first
    return None if inconsistent == "drop" else inconsistent


@dataclass
class PairwiseJudge(JudgeJob):
    """Two answers to the same case, judged with A first and with B first."""

    pairs: list[tuple[AnswerText, AnswerText]] = field(default_factory=list)
    judge_kind: str = field(default="pairwise", init=False)

    def build_schema(self) -> dict:
        return _object({"better": {"type": "string", "enum": list(PAIR_VERDICTS)}},
                       self.prompt["reason_max_chars"])

    def units(self, juror: int, repeat: int) -> list[Task]:
        def user(first: AnswerText, second: AnswerText) -> str:
            return self.prompt["user"].format(case=self.cases[first.case_id], first=first.text,
                                              second=second.text)

        return [self.task([self.call(user(a, b), juror, repeat),
                           self.call(user(b, a), juror, repeat)], a.answer_id,
                          answer_b_id=b.answer_id, juror=juror, repeat=repeat)
                for a, b in self.pairs]

    def parse(self, task: Task, index: int, completion: Completion) -> tuple[str, Any]:
        status, verdict = parse_json(_PairVerdict, completion)
        if status != "ok":
            return status, None
        first, second = ("A", "B") if index == 0 else ("B", "A")
        verdict.better = {"1": first, "2": second}.get(verdict.better, verdict.better)
        return status, verdict

    def rows(self, task: Task, outcomes: list[CallOutcome], run_id: str) -> dict[str, list]:
        choices = [o.value.better if o.parse_status == "ok" else None for o in outcomes]
        agreement = None if None in choices else choices[0] == choices[1]
        rows = []
        for outcome, shown_first, choice in zip(outcomes, vocabulary.SIDES, choices, strict=True):
            rows += self.rows_of_call(task, outcome, run_id, [("preference", {
                "answer_b_id": task.info["answer_b_id"], "shown_first": shown_first,
                "choice": choice, "score": A_SHARE.get(choice), "agreement": agreement})])
        return {"judgments": rows}


def pairs_within_cases(answers: list[AnswerText]) -> list[tuple[AnswerText, AnswerText]]:
    """Pairs to compare: two answers to the same case with the same sample
    index and system-prompt variant, from different models or temperatures."""
    groups: dict[tuple, list[AnswerText]] = {}
    for a in answers:
        groups.setdefault((a.case_id, a.sample_index, a.variant), []).append(a)
    return [(a, b) for group in groups.values() for i, a in enumerate(group)
            for b in group[i + 1:] if (a.model_id, a.temperature) != (b.model_id, b.temperature)]


class Rule(BaseModel):
    """One per-case rule: HealthBench rubric item or CSEDB rule, signed points."""

    model_config = _STRICT
    case_id: str = Field(min_length=1)
    rule_id: str = Field(min_length=1)
    text: str = Field(min_length=1)
    points: float

    def model_post_init(self, _context: Any) -> None:
        if self.points == 0:
            raise ValueError("points must not be 0 (a rule gains or costs points)")


class _RuleVerdict(BaseModel):
    model_config = _STRICT
    met: bool
    reason: str


@dataclass
class RuleJudge(JudgeJob):
    """Whether an answer meets each rule of its case, with the judge's reason."""

    rules: list[Rule] = field(default_factory=list)
    judge_kind: str = field(default="rule", init=False)

    def build_schema(self) -> dict:
        return _object({"met": {"type": "boolean"}}, self.prompt["reason_max_chars"])

    def extra_settings(self) -> dict[str, Any]:
        return {"rules": len(self.rules)}

    def units(self, juror: int, repeat: int) -> list[Task]:
        by_case: dict[str, list[Rule]] = {}
        for rule in self.rules:
            by_case.setdefault(rule.case_id, []).append(rule)
        return [self.task([self.call(self.prompt["user"].format(
            case=self.cases[a.case_id], answer=a.text, rule=rule.text), juror, repeat)],
            a.answer_id, rule_id=rule.rule_id, points=rule.points, juror=juror, repeat=repeat)
            for a in self.answers for rule in by_case.get(a.case_id, [])]

    def parse(self, task: Task, index: int, completion: Completion) -> tuple[str, Any]:
        return parse_json(_RuleVerdict, completion)

    def rows(self, task: Task, outcomes: list[CallOutcome], run_id: str) -> dict[str, list]:
        outcome = outcomes[0]
        met = outcome.value.met if outcome.parse_status == "ok" else None
        return {"judgments": self.rows_of_call(task, outcome, run_id, [(
            task.info["rule_id"], {"points": task.info["points"],
                                   "score": None if met is None else float(met)})])}


JUDGES: dict[str, type[JudgeJob]] = {"rubric": RubricJudge, "jury": JuryJudge,
                                     "pairwise": PairwiseJudge, "rule": RuleJudge}
assert tuple(JUDGES) == vocabulary.JUDGE_KINDS, "every judge kind of the vocabulary has a judge"
