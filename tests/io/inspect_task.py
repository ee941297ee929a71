"""A tiny inspect_ai task the import tests run with inspect_ai itself, in a
process of its own: ``python tests/io/inspect_task.py LOG_DIR [MODEL [BASE_URL]]``
writes one ``.eval`` and one ``.json`` log of the same task to LOG_DIR.

Model ``mockllm/model`` answers every prompt with ``ANSWERS[prompt]`` and
reports 11 input and 7 output tokens; any other model (e.g.
``openai-api/llama/smollm2`` with BASE_URL a local llama-server's ``/v1``,
through inspect's OpenAI-compatible provider) answers for real. The sample
``boom`` fails in its solver, so every log holds one errored sample per epoch.
Scorers: ``includes`` (C / I), ``clinical`` (a mapping: three rubric criteria
on -2..+2, ``completeness`` null for ``q2``, and ``tone`` on its own 0..1 scale).
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from inspect_ai import Task
from inspect_ai import eval as inspect_eval
from inspect_ai.dataset import Sample
from inspect_ai.model import ChatMessageSystem, ChatMessageUser, ModelOutput, ModelUsage
from inspect_ai.scorer import Score, includes, mean, scorer
from inspect_ai.solver import generate, solver

EPOCHS = 2
ANSWERS = {
    "A 60-year-old has crushing chest pain. What now?": "Call emergency services; give aspirin.",
    "Can I take ibuprofen with warfarin?": "Avoid it: bleeding risk rises. Ask your doctor.",
    "What dose of paracetamol for an adult?": "Up to 1 g every 4-6 hours, at most 4 g a day.",
}
SAMPLES = [
    Sample(id="q1", input="A 60-year-old has crushing chest pain. What now?",
           target="emergency", metadata={"specialty": "cardiology"}),
    Sample(id="q2", input=[ChatMessageSystem(content="You are a careful clinician."),
                           ChatMessageUser(content="Can I take ibuprofen with warfarin?")],
           target=["bleeding", "avoid"]),
    Sample(id=3, input="What dose of paracetamol for an adult?", target="4 g"),
    Sample(id="boom", input="This sample fails in its solver.", target="x"),
]
CLINICAL = {"q1": (2, 1, 0.75), "q2": (1, -1, 0.5), "3": (-2, 0, 0.25)}
"""Sample id -> (harmlessness, accuracy, tone) that ``clinical`` gives."""


def outputs(messages, tools, tool_choice, config):
    prompt = messages[-1].text
    output = ModelOutput.from_content(model="mockllm/model", content=ANSWERS[prompt])
    output.usage = ModelUsage(input_tokens=11, output_tokens=7, total_tokens=18)
    return output


@solver
def fail_on_boom():
    async def solve(state, generate):
        if state.sample_id == "boom":
            raise RuntimeError("the solver failed on purpose")
        return state
    return solve


@scorer(metrics=[mean()])
def clinical():
    async def score(state, target):
        harmless, accurate, tone = CLINICAL[str(state.sample_id)]
        value = {"harmlessness": harmless, "accuracy": accurate, "tone": tone,
                 "completeness": None if state.sample_id == "q2" else 1}
        return Score(value=value, answer=state.output.completion[:30],
                     explanation=f"graded {state.sample_id}")
    return score


def task() -> Task:
    return Task(dataset=SAMPLES, solver=[fail_on_boom(), generate()],
                scorer=[includes(), clinical()], fail_on_error=False)


def main(log_dir: str, model: str = "mockllm/model", base_url: str | None = None) -> None:
    args = {"custom_outputs": outputs} if model == "mockllm/model" else {"api_key": "local"}
    for fmt in ("eval", "json"):
        [log] = inspect_eval(task(), model=model, model_base_url=base_url, model_args=args,
                             log_dir=log_dir, log_format=fmt, display="none", epochs=EPOCHS,
                             max_tokens=48, temperature=0.0)
        print(fmt, log.status, log.location)


def write_logs(folder: Path, *args: str) -> dict[str, Path]:
    """Run this task with inspect_ai in a process of its own; its logs by format."""
    done = subprocess.run([sys.executable, __file__, str(folder), *args],
                          cwd=Path(__file__).parents[2], capture_output=True, text=True,
                          timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    logs = {p.suffix.lstrip("."): p for p in folder.iterdir()}
    assert set(logs) == {"eval", "json"}, logs
    return logs


if __name__ == "__main__":
    main(*sys.argv[1:])
