"""A tiny multiple-choice benchmark end to end on a real model (SmolLM2-135M
on llama.cpp's server): `clinieval run` generates two samples of each of the
four bundled MedQA-style questions, scores them and stores them; the audit
reads them. The numbers are checked against a count made here from the
stored outputs: each output's letter read by a rule simpler than the
scorer's (where that rule decides), and the means, Worst@2 and parse
failures recounted in plain Python.

Skips without the model, fails instead with CLINIEVAL_REQUIRE_LLM=1 (CI).
"""

from __future__ import annotations

import re

import pytest
import sqlalchemy as sa

from clinieval.audit import audit
from clinieval.tasks.catalog import bundled_folder
from tests.runs.test_llm_local import _model_file, _ok, llama  # noqa: F401 (fixture)

LEADING = re.compile(r"^\W*([A-D])(?:[\s.):*]|$)")
LETTER = re.compile(r"(?<![A-Za-z])[A-D](?![A-Za-z])")


def _hand_letter(text: str, choices: dict[str, str]) -> str | None | bool:
    """A letter when the output starts with one, None when it names no letter
    and no option, False when this simple rule cannot decide."""
    lead = LEADING.match(text)
    if lead:
        return lead.group(1)
    if not LETTER.search(text) and not any(v.lower() in text.lower() for v in choices.values()):
        return None
    return False


def test_a_multiple_choice_benchmark_on_a_real_model(llama, tmp_path):  # noqa: F811
    import json

    url = f"sqlite:///{tmp_path / 'bench.db'}"
    model = _model_file(tmp_path / "smol.toml", llama, "smollm2-135m", 8)
    out = _ok("run", "medqa-sample", "--model", model, "--samples", "2", "--database-url", url)
    print("\n" + out[-900:])
    engine = sa.create_engine(url)
    with engine.connect() as conn:
        stored = conn.execute(sa.text(
            "SELECT b.instance_id, b.sample_index, b.status, b.score, b.extracted, b.reference,"
            " a.text FROM benchmark_results b JOIN answers a ON a.answer_id = b.answer_id"
            " ORDER BY b.instance_id, b.sample_index")).all()
    assert len(stored) == 8  # 4 questions x 2 samples, every call answered
    choices = {str(i): json.loads(line)["options"] for i, line in enumerate(
        (bundled_folder() / "medqa_sample.jsonl").read_text().splitlines(), start=1)}
    decided = 0
    for instance, sample, status, score, extracted, reference, text in stored:
        print(f"case {instance} sample {sample}: {text!r} -> {status} {extracted}")
        hand = _hand_letter(text, choices[instance])
        if hand is not False:
            decided += 1
            assert extracted == hand, (text, extracted, hand)
            assert status == ("unparsed" if hand is None else "ok")
        if status == "ok":
            assert score == float(extracted == reference)
        else:
            assert score is None and status == "unparsed"  # never a zero

    # The counts, recomputed from the stored rows.
    scored = [(i, s) for i, _, st, s, *_ in stored if st == "ok"]
    unparsed = sum(st == "unparsed" for _, _, st, *_ in stored)
    per_case: dict[str, list[float]] = {}
    for instance, score in scored:
        per_case.setdefault(instance, []).append(score)
    full = [min(v) for v in per_case.values() if len(v) == 2]
    print(f"hand count: {len(scored)} scored, {unparsed} unparsed, {decided} of 8 outputs"
          f" decided by the simple rule; right {sum(s for _, s in scored):g}")

    section = next(s for s in audit(url, bootstrap=200).sections if s.key == "benchmarks")
    if not scored:
        assert section.skipped
        return
    row = section.tables["scores"].iloc[0]
    assert row["n"] == len(per_case) and row["samples_unparsed"] == unparsed
    assert row["score"] == pytest.approx(sum(sum(v) / len(v) for v in per_case.values())
                                         / len(per_case))
    if full:
        assert row["worst_at_k"] == pytest.approx(sum(full) / len(full))
    mean = sum(s for _, s in scored) / len(scored)
    assert (f"smollm2-135m, choice: {len(scored)} scored, {unparsed} unparsed, 0 errors, 0 failed"
            f" calls; mean {mean:.3f}") in out
