"""Each reference scorer on hand-made outputs, prompt rendering (system
prompt, few-shot turns, the sandbox), and `clinieval benchmarks`."""

from __future__ import annotations

from pathlib import Path

import pytest

from clinieval.errors import InputError
from clinieval.io.foreign.choice import Item
from clinieval.tasks import scorer
from clinieval.tasks.job import Renderer
from clinieval.tasks.scorers import Scored, reference_scorer
from clinieval.tasks.spec import Benchmark, parse_benchmark
from tests.tasks.support import invoke

HEAD = 'id = "b"\ncategory = "decision_support"\nsubcategory = "knowledge_support"\n' \
       'cases = "c.jsonl"\n'


def _bench(tmp_path: Path, text: str) -> Benchmark:
    path = tmp_path / "b.toml"
    path.write_text(HEAD + text)
    return Benchmark(parse_benchmark(HEAD + text, str(path)), path, HEAD + text)


def _item(reference: str, **fields) -> Item:
    return Item("1", {"question": "Q?", "id": "1", **fields}, reference)


def _score(bench: Benchmark, output: str, item: Item, index: int = 0) -> Scored:
    return reference_scorer(bench, index)(output, item)


def test_exact_match_after_normalisation(tmp_path):
    bench = _bench(tmp_path, 'scorer = "exact_match"\n')
    assert _score(bench, "  The Heparin. ", _item("heparin")).score == 1.0
    assert _score(bench, "heparin now", _item("heparin")).score == 0.0
    strict = _bench(tmp_path, 'scorer = "exact_match"\nanswer = {normalise = []}\n')
    assert _score(strict, "Heparin", _item("heparin")).score == 0.0


def test_regex_group_one_against_the_reference(tmp_path):
    bench = _bench(tmp_path, 'scorers = [{kind = "regex", pattern = "ICD-10: ([A-Z][0-9.]+)"}]\n')
    assert _score(bench, "Code ICD-10: I21.4 (NSTEMI)", _item("I21.4")) == Scored(
        "ok", 1.0, "I21.4")
    assert _score(bench, "no code", _item("I21.4")).status == "unparsed"


def test_f1_and_numeric_with_units(tmp_path):
    f1 = _bench(tmp_path, 'scorer = "f1"\n')
    assert _score(f1, "give aspirin 300 mg", _item("aspirin 300 mg")).score == pytest.approx(
        2 * 0.75 * 1 / 1.75)
    num = _bench(tmp_path, 'answer = {format = "number", unit = "mL/min", tolerance = 0.05}\n'
                 'scorer = "numeric"\n')
    assert _score(num, "Answer: 68 mL/min", _item("66.7")) == Scored("ok", 1.0, "68")
    assert _score(num, "Answer: 71 mL/min", _item("66.7")).score == 0.0
    assert _score(num, "Answer: 68 L/h", _item("66.7")).status == "unparsed"
    assert _score(num, "68", _item("about sixty")).status == "error"


def test_json_answers_are_checked_against_the_schema_first(tmp_path):
    bench = _bench(tmp_path, 'scorer = "numeric"\n[answer]\nformat = "json"\nfield = "dose"\n'
                   'schema = {type = "object", required = ["dose"], properties = {dose ='
                   ' {type = "number"}}}\n')
    assert _score(bench, 'Sure: {"dose": 5}', _item("5")).score == 1.0
    assert _score(bench, '{"dose": "5"}', _item("5")).detail.startswith(
        "does not match the schema")
    assert _score(bench, "five", _item("5")).status == "unparsed"


def test_python_hooks_registered_by_name(tmp_path):
    @scorer("mentions_reference")
    def mentions(output: str, case: dict):
        if not output:
            return None
        return case["reference"].lower() in output.lower()

    bench = _bench(tmp_path, 'scorers = [{kind = "python", function = "mentions_reference"}]\n')
    assert _score(bench, "Start Heparin", _item("heparin")) == Scored("ok", 1.0)
    assert _score(bench, "", _item("heparin")).status == "unparsed"


def test_system_prompt_few_shot_turns_and_template(tmp_path):
    bench = _bench(tmp_path, 'scorer = "exact_match"\n[prompt]\nsystem = "Be brief about'
                   ' {{ topic }}."\ntemplate = "{{ question }} ({{ id }})"\n'
                   '[[prompt.examples]]\nuser = "1+1?"\nassistant = "2"\n')
    messages = Renderer(bench).messages(_item("x", topic="drugs"))
    assert messages == ({"role": "system", "content": "Be brief about drugs."},
                        {"role": "user", "content": "1+1?"},
                        {"role": "assistant", "content": "2"},
                        {"role": "user", "content": "Q? (1)"})


def test_the_template_sandbox_refuses_reaching_into_python(tmp_path):
    bench = _bench(tmp_path, 'scorer = "exact_match"\n[prompt]\ntemplate ='
                   ' "{{ question.__class__.__mro__[1].__subclasses__() }}"\n')
    with pytest.raises(InputError) as err:
        Renderer(bench).messages(_item("x"))
    assert err.value.field == "prompt.template"


def test_benchmarks_lists_bundled_and_user_files(tmp_path):
    folder = tmp_path / "mine"
    folder.mkdir()
    (folder / "ok.toml").write_text(HEAD.replace('id = "b"', 'id = "my-bench"')
                                    + 'scorer = "f1"\n')
    (folder / "broken.toml").write_text('id = "x"\n')
    code, out = invoke("benchmarks", "--folder", folder)
    assert code == 0
    for name in ("medqa-sample", "pubmedqa-sample", "medmcqa-sample", "medcalc-sample",
                 "my-bench", "unreadable"):
        assert name in out
