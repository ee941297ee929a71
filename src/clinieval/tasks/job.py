"""From a benchmark and its items to the calls of one candidate model: the
prompt rendered with Jinja2 (sandboxed, every name it uses must be a field
of the case), the system prompt and few-shot turns before it, ``samples``
answers per case (each with its own seed, as ``clinieval generate`` asks).

Templates are looked up beside the benchmark file, then in the prompts
folder in effect, then among the bundled ones (``runs/prompts/*.j2``).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

import jinja2
from jinja2.sandbox import SandboxedEnvironment

from clinieval.errors import InputError
from clinieval.io.foreign.choice import Item
from clinieval.providers import ModelSpec
from clinieval.runs.engine import Call, Task
from clinieval.runs.generate import GenerateJob, sample_seed
from clinieval.runs.keys import digest
from clinieval.runs.prompt_files import PromptTemplate, prompt_template
from clinieval.tasks.spec import Benchmark

DEFAULT_TEMPLATES = {"choice": "multiple_choice.j2", "text": "free_text.j2",
                     "number": "number.j2", "json": "json.j2"}


def case_id(bench: Benchmark, item: Item) -> str:
    """The case id a benchmark's item is stored under."""
    return f"{bench.id}/{item.instance_id}"


class Renderer:
    """A benchmark's prompt: the template, and the messages of each item."""

    def __init__(self, bench: Benchmark) -> None:
        self.bench = bench
        d = bench.definition
        self.env = SandboxedEnvironment(undefined=jinja2.StrictUndefined, autoescape=False,
                                        keep_trailing_newline=False)
        if d.prompt.template is not None:
            text = d.prompt.template
            self.template = PromptTemplate("inline", str(bench.path), text, _sha(text))
            self.key = "prompt.template"
        else:
            name = d.template or d.prompt.template_file or DEFAULT_TEMPLATES[d.answer.format]
            self.key = "template" if d.template else "prompt.template_file"
            beside = bench.resolve(name)
            if beside.is_file():
                text = beside.read_text("utf-8")
                self.template = PromptTemplate(beside.name, str(beside), text, _sha(text))
            else:
                self.template = prompt_template(name if name.endswith(".j2") else name + ".j2")
        self.user = self._compile(self.template.text, self.key)
        self.system = self._compile(d.prompt.system, "prompt.system")
        self.extra = {"unit": d.answer.unit or "",
                      "schema": json.dumps(d.answer.schema_, indent=2) if d.answer.schema_
                      else ""}

    def _compile(self, text: str, key: str) -> jinja2.Template:
        try:
            return self.env.from_string(text)
        except jinja2.TemplateSyntaxError as err:
            raise InputError(str(self.bench.path), f"template syntax error on line {err.lineno}:"
                             f" {err.message}", field=key) from None

    def messages(self, item: Item) -> tuple[dict[str, str], ...]:
        """The item's messages; a name the template uses that the case lacks
        is an error naming the benchmark file, the case and the key."""
        values = self.extra | item.fields
        system, user = self._render(self.system, values, item, "prompt.system"), self._render(
            self.user, values, item, self.key)
        turns = [{"role": "system", "content": system}] if system.strip() else []
        for example in self.bench.definition.prompt.examples:
            turns += [{"role": "user", "content": example.user},
                      {"role": "assistant", "content": example.assistant}]
        return (*turns, {"role": "user", "content": user})

    def _render(self, template: jinja2.Template, values: dict, item: Item, key: str) -> str:
        try:
            return template.render(values)
        except jinja2.UndefinedError as err:
            raise InputError(str(self.bench.path), f"the template uses a field case"
                             f" {item.instance_id!r} does not have: {err.message}", field=key,
                             expected="one of " + ", ".join(sorted(values))) from None
        except jinja2.TemplateError as err:  # the sandbox refusing, a filter failing
            raise InputError(str(self.bench.path), f"template failed on case"
                             f" {item.instance_id!r}: {err}", field=key) from None


def _sha(text: str) -> str:
    import hashlib

    return hashlib.sha256(text.encode()).hexdigest()


@dataclass
class BenchmarkJob(GenerateJob):
    """Answers of one model to a benchmark's items: ``samples`` per item.
    A task per (item, sample), so two items with the same prompt are two
    tasks (their calls share the cache)."""

    bench: Benchmark | None = None
    items: list[Item] = field(default_factory=list)
    messages: dict[str, tuple] = field(default_factory=dict)
    template: PromptTemplate | None = None

    def __post_init__(self) -> None:
        tasks = []
        for item in self.items:
            for sample in range(self.samples):
                tasks.append(self._item_task(item, sample))
        self.tasks = tasks
        self.settings = {"benchmark": self.bench.id, "benchmark_sha256": self.bench.sha256,
                         "template": self.template.name, "template_sha256": self.template.sha256,
                         "samples": self.samples, "model_version": self.spec.version,
                         "generation": self.spec.generation.request_fields(),
                         "cases": len(self.items)}

    def _item_task(self, item: Item, sample: int) -> Task:
        settings = self.spec.generation.request_fields()
        if "seed" in settings:
            settings["seed"] = sample_seed(settings["seed"], sample)
        call = Call(self.messages[item.instance_id], settings, sample).keyed(self.spec.version)
        cid = case_id(self.bench, item)
        return Task(digest([self.spec.id, cid, str(sample), call.first_key], 40), (call,), None,
                    {"case_id": cid, "instance_id": item.instance_id, "variant": None,
                     "temperature": settings.get("temperature"), "sample": sample})


def benchmark_job(spec: ModelSpec, bench: Benchmark, items: list[Item], renderer: Renderer,
                  messages: dict[str, tuple], samples: int) -> BenchmarkJob:
    """``messages``: each item's (``Renderer.messages``), rendered once for all models."""
    return BenchmarkJob(spec, [], samples=samples, bench=bench, items=items, messages=messages,
                        template=renderer.template)
