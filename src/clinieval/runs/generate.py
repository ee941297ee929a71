"""Answers from a candidate model: n samples per case, per system-prompt
variant and per temperature, stored as answers with their provenance."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from clinieval.errors import InputError
from clinieval.providers import Completion, ModelSpec
from clinieval.runs.data import CaseText
from clinieval.runs.engine import Call, CallOutcome, Task
from clinieval.runs.keys import digest
from clinieval.runs.prompt_files import load_prompt

SAMPLE_SEED_STEP = 1_000_000
"""Sample k of a case is asked with seed ``seed + k * SAMPLE_SEED_STEP``
(``seed`` from the model file); sample 0 keeps the file's seed, so its
request and cache key are those of a one-sample run. The step is far above
the offsets jurors (1,000 apart) and parse retries (1, 2, ...) add, so no two
of them share a seed. A model file without a seed sends none for any
sample: the server then samples afresh on every call."""


def sample_seed(seed: int | None, sample: int) -> int | None:
    """The seed that sample ``sample`` of a case is asked with."""
    if seed is None or sample == 0:
        return seed
    return seed + sample * SAMPLE_SEED_STEP


def answer_id(run_id: str, task_key: str) -> str:
    """Answer ids are derived from the run and the call, so that a resumed
    run writes the same ids and a fresh (``--no-cache``) run new ones."""
    return "ans-" + digest([run_id, task_key], 20)


@dataclass
class GenerateJob:
    """Answers from one candidate model: ``samples`` per case, for every
    system-prompt variant and temperature; its tasks are built on creation."""

    spec: ModelSpec
    cases: list[CaseText]
    samples: int = 1
    variants: tuple[str, ...] = ("default",)
    temperatures: tuple[float | None, ...] = (None,)
    kind: str = "generate"
    judge_kind: None = None
    tasks: list[Task] = field(init=False)
    settings: dict[str, Any] = field(init=False)
    prompt: dict[str, Any] = field(init=False, repr=False)
    """The prompt file the tasks were rendered from (the call log hashes it)."""

    def __post_init__(self) -> None:
        prompt = self.prompt = load_prompt("generate")
        unknown = [v for v in self.variants if v not in prompt["variants"]]
        if unknown:
            raise InputError("prompts/generate.toml", "unknown system-prompt variant",
                             field="variants", expected=", ".join(prompt["variants"]),
                             got=unknown[0])
        tasks = [self._task(prompt, case, variant, temp, sample)
                 for case in self.cases for variant in self.variants
                 for temp in self.temperatures for sample in range(self.samples)]
        self.tasks = list({t.key: t for t in tasks}.values())
        self.settings = {"prompt_version": prompt["version"], "samples": self.samples,
                         "variants": list(self.variants), "temperatures": list(self.temperatures),
                         "generation": self.spec.generation.request_fields(),
                         "model_version": self.spec.version, "cases": len(self.cases)}

    def _task(self, prompt: dict, case: CaseText, variant: str, temperature: float | None,
              sample: int) -> Task:
        system = prompt["variants"][variant]["system"]
        messages = ([{"role": "system", "content": system}] if system else []) + [
            {"role": "user", "content": prompt["user"].format(prompt=case.prompt)}]
        settings = self.spec.generation.request_fields()
        if temperature is not None:
            settings["temperature"] = temperature
        if "seed" in settings:
            settings["seed"] = sample_seed(settings["seed"], sample)
        call = Call(tuple(messages), settings, sample).keyed(self.spec.version)
        return Task(call.first_key, (call,), None, {"case_id": case.case_id, "variant": variant,
                                        "temperature": settings.get("temperature"),
                                        "sample": sample})

    def parse(self, task: Task, index: int, completion: Completion) -> tuple[None, str]:
        return None, completion.text

    def rows(self, task: Task, outcomes: list[CallOutcome], run_id: str) -> dict[str, list]:
        outcome = outcomes[0]
        completion = outcome.completion
        if outcome.error or completion is None:
            return {}
        info = task.info
        return {"answers": [{
            "answer_id": answer_id(run_id, task.key), "case_id": info["case_id"],
            "model_id": self.spec.id, "text": completion.text,
            "length_chars": len(completion.text), "tokens": completion.output_tokens,
            "latency_s": completion.latency_s,
            "cost_usd": self.spec.prices.cost(completion.input_tokens, completion.output_tokens),
            "sample_index": info["sample"], "temperature": info["temperature"],
            "system_prompt_variant": info["variant"]}]}
