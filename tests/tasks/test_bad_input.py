"""Bad benchmark input stops `clinieval run` before any call (not even the
pre-flight), with one line naming the file and the key or the case; the
benchmark-file parser, fuzzed, only ever answers with such an error."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from clinieval.errors import InputError
from clinieval.providers.stub import StubServer, fixed
from clinieval.tasks.catalog import bundled_folder
from clinieval.tasks.spec import BenchmarkFile, parse_benchmark
from tests.tasks.support import invoke, model_file

HEAD = 'id = "b"\ncategory = "decision_support"\nsubcategory = "knowledge_support"\n'
MEDQA = (bundled_folder() / "medqa_sample.jsonl").read_text()


@pytest.fixture
def stub():
    with StubServer(fixed("B")) as server:
        yield server


def _refused(tmp_path, stub, bench_text: str, *, cases: str | None = MEDQA,
             model_lines: dict | None = None) -> str:
    if cases is not None:
        (tmp_path / "cases.jsonl").write_text(cases)
    (tmp_path / "b.toml").write_text(bench_text)
    model = model_file(tmp_path, stub, "m", **(model_lines or {}))
    code, out = invoke("run", tmp_path / "b.toml", "--model", model, "--database-url",
                       f"sqlite:///{tmp_path / 'db.sqlite'}")
    assert code == 2, out
    assert stub.requests == []  # nothing called, the pre-flight neither
    assert out.startswith("error: ")
    return out


def test_an_unknown_scorer(tmp_path, stub):
    out = _refused(tmp_path, stub, HEAD + 'cases = "cases.jsonl"\nanswer = "choice"\n'
                   'scorer = "bleu"\n')
    assert "b.toml, field 'scorers[0].kind'" in out and "unknown scorer 'bleu'" in out


def test_a_template_field_the_cases_lack(tmp_path, stub):
    out = _refused(tmp_path, stub, HEAD + 'cases = "cases.jsonl"\nanswer = "choice"\n'
                   'scorer = "choice"\n[prompt]\ntemplate = "{{ question }} {{ vignette }}"\n')
    assert "b.toml, field 'prompt.template'" in out and "'vignette' is undefined" in out
    assert "case '1'" in out


def test_a_case_without_the_reference_its_scorer_needs(tmp_path, stub):
    rows = [json.loads(line) for line in MEDQA.splitlines()]
    rows[1]["answer_idx"] = None
    out = _refused(tmp_path, stub, HEAD + 'cases = "cases.jsonl"\nanswer = "choice"\n'
                   'scorer = "choice"\n', cases="".join(json.dumps(r) + "\n" for r in rows))
    assert "cases.jsonl, row 2, field 'answer_idx'" in out and "no reference answer" in out


def test_a_reference_letter_outside_the_choices(tmp_path, stub):
    rows = [json.loads(line) for line in MEDQA.splitlines()]
    rows[2]["answer_idx"] = "F"
    out = _refused(tmp_path, stub, HEAD + 'cases = "cases.jsonl"\nanswer = "choice"\n'
                   'scorer = "choice"\n', cases="".join(json.dumps(r) + "\n" for r in rows))
    assert "cases.jsonl, row 3, field 'answer_idx'" in out and "expected one of A, B, C, D" in out


def test_a_plain_jsonl_case_whose_letter_is_outside_its_choices(tmp_path, stub):
    cases = json.dumps({"id": "x1", "question": "Q?", "choices": ["yes", "no"],
                        "answer": "C"}) + "\n"
    out = _refused(tmp_path, stub, HEAD + 'answer = "choice"\nscorer = "choice"\n'
                   '[cases]\npath = "cases.jsonl"\nformat = "jsonl"\n', cases=cases)
    assert "cases.jsonl, row 1, field 'answer'" in out


def test_a_model_file_with_two_providers(tmp_path, stub):
    out = _refused(tmp_path, stub, HEAD + 'cases = "cases.jsonl"\nanswer = "choice"\n'
                   'scorer = "choice"\n', model_lines={"provider": '["openai", "anthropic"]'})
    assert "m.toml, field 'provider'" in out and "one provider per model file" in out


def test_an_endpoint_listed_twice(tmp_path, stub):
    (tmp_path / "cases.jsonl").write_text(MEDQA)
    (tmp_path / "b.toml").write_text(HEAD + 'cases = "cases.jsonl"\nanswer = "choice"\n'
                                     'scorer = "choice"\n')
    model = tmp_path / "m.toml"
    model.write_text(f'id = "m"\nversion = "1"\nname = "m"\nbase_urls = ["{stub.base_url}",'
                     f' "{stub.base_url}/"]\n')
    code, out = invoke("run", tmp_path / "b.toml", "--model", model)
    assert code == 2 and stub.requests == []
    assert "m.toml, field 'base_urls'" in out and "listed twice" in out


@pytest.mark.parametrize("text, key", [
    ('cases = "cases.jsonl"\nanswer = "text"\nscorer = "choice"\n', None),  # needs choice
    ('cases = "cases.jsonl"\nanswer = "choice"\nscorer = "regex"\n', "scorers[0]"),
    ('cases = "cases.jsonl"\nanswer = "choice"\nscorers = [{kind = "regex", pattern = "("}]\n',
     "scorers[0]"),
    ('cases = "cases.jsonl"\nanswer = "choice"\nscorers = [{kind = "python",'
     ' function = "nowhere"}]\n', "scorers[0].function"),
    ('cases = "missing.jsonl"\nanswer = "choice"\nscorer = "choice"\n', "cases.path"),
    ('cases = "cases.jsonl"\nanswer = "choice"\nscorer = "choice"\nlimt = 3\n', "limt"),
    ('cases = "cases.jsonl"\nanswer = "choice"\nscorer = "choice"\n[prompt]\n'
     'template = "{% for x in %}"\n', "prompt.template"),
])
def test_other_mistakes_name_the_key(tmp_path, stub, text, key):
    out = _refused(tmp_path, stub, HEAD + text)
    assert "b.toml" in out
    if key:
        assert f"field '{key}" in out


def test_a_subcategory_outside_its_category(tmp_path, stub):
    out = _refused(tmp_path, stub, 'id = "b"\ncategory = "administration"\nsubcategory ='
                   ' "diagnosis"\ncases = "cases.jsonl"\nanswer = "choice"\nscorer = "choice"\n')
    assert "field 'subcategory'" in out and "scheduling" in out


# --- fuzzing ---------------------------------------------------------------------------

KEYS = ["id", "label", "category", "subcategory", "cases", "answer", "scorer", "scorers",
        "template", "normalisation", "prompt", "path", "format", "kind", "pattern", "unit",
        "tolerance", "system", "examples", "low", "high", "function", "limit"]
VALUES = st.recursive(
    st.one_of(st.text(max_size=12), st.integers(-5, 5), st.booleans(),
              st.floats(allow_nan=False, allow_infinity=False),
              st.sampled_from(["choice", "medqa", "decision_support", "knowledge_support",
                               "range", "identity", "regex", "(x)", "{{ q }}", "a.jsonl"])),
    lambda inner: st.one_of(st.lists(inner, max_size=3),
                            st.dictionaries(st.sampled_from(KEYS), inner, max_size=4)),
    max_leaves=12)


def _toml(value) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return json.dumps(value)
    if isinstance(value, int | float):
        return repr(value)
    if isinstance(value, list):
        return "[" + ", ".join(_toml(v) for v in value) + "]"
    return "{" + ", ".join(f"{k} = {_toml(v)}" for k, v in value.items()) + "}"


@settings(max_examples=300, deadline=None)
@given(st.dictionaries(st.sampled_from(KEYS), VALUES, max_size=8))
def test_fuzzed_benchmark_files_parse_or_name_the_problem(data):
    text = "".join(f"{k} = {_toml(v)}\n" for k, v in data.items())
    try:
        assert isinstance(parse_benchmark(text, "fuzz.toml"), BenchmarkFile)
    except InputError as err:
        assert str(err).startswith("fuzz.toml")


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=300))
def test_arbitrary_text_parses_or_names_the_file(text):
    try:
        parse_benchmark(text, "fuzz.toml")
    except InputError as err:
        assert str(err).startswith("fuzz.toml")


def test_yaml_benchmark_files_name_the_key_too(tmp_path, stub):
    (tmp_path / "cases.jsonl").write_text(MEDQA)
    (tmp_path / "b.yaml").write_text("id: b\ncategory: decision_support\nsubcategory:"
                                     " knowledge_support\ncases: cases.jsonl\nanswer: choice\n"
                                     "scorers:\n  - choice\n  - kind: regex\n")
    code, out = invoke("run", tmp_path / "b.yaml", "--model", model_file(tmp_path, stub, "m"))
    assert code == 2 and stub.requests == []
    assert "b.yaml, field 'scorers[1]'" in out and "needs pattern" in out
    (tmp_path / "c.yaml").write_text("id: [unclosed\n")
    code, out = invoke("run", tmp_path / "c.yaml", "--model", model_file(tmp_path, stub, "m"))
    assert code == 2 and "c.yaml: not valid YAML" in out


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=300))
def test_arbitrary_yaml_parses_or_names_the_file(text):
    try:
        parse_benchmark(text, "fuzz.yaml")
    except InputError as err:
        assert str(err).startswith("fuzz.yaml")


@settings(max_examples=200, deadline=None)
@given(st.dictionaries(st.sampled_from(KEYS), VALUES, max_size=8))
def test_fuzzed_yaml_benchmark_files_parse_or_name_the_problem(data):
    import yaml

    try:
        assert isinstance(parse_benchmark(yaml.safe_dump(data), "fuzz.yml"), BenchmarkFile)
    except InputError as err:
        assert str(err).startswith("fuzz.yml")
