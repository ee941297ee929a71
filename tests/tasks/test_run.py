"""`clinieval run` end to end against stub servers: two models at once,
repeats with their own seeds, scores stored per (scorer, case, sample), the
audit's Benchmarks section reading them from the database, checked against
counts made by hand from the planted outputs."""

from __future__ import annotations

import hashlib
import json

import pytest

from clinieval.audit import audit
from clinieval.providers.stub import Reply, StubServer, completion_body
from clinieval.runs.generate import SAMPLE_SEED_STEP
from tests.tasks.support import calls, invoke, model_file, rows

# The bundled medqa-sample: references C, B, D, A (questions 1-4 in file order).
QUESTIONS = ("ST elevation", "type 1 diabetes", "dabigatran", "lithium")
TEACHER = {  # model "m1": the same output for every sample
    "ST elevation": "The answer is (C), not B",              # right
    "type 1 diabetes": "**A**",                              # wrong (B)
    "dabigatran": "I think A or D",                          # unparsed: several letters
    "lithium": "A. Hydrochlorothiazide, because thiazides raise lithium",  # right
}
RIGHT = {"ST elevation": "C", "type 1 diabetes": "B", "dabigatran": "D", "lithium": "A"}


def _handler(request: dict, _n: int) -> Reply:
    user = request["messages"][-1]["content"]
    if user == "ping":
        return Reply(body=completion_body("pong"))
    key = next(q for q in QUESTIONS if q in user)
    if request["model"] == "m1":
        text = TEACHER[key]
    else:  # m2: sample 0 answers C, sample 1 (seed + one step) the right letter
        text = RIGHT[key] if request.get("seed", 0) >= SAMPLE_SEED_STEP else "C"
    return Reply(body=completion_body(text))


@pytest.fixture
def stub():
    with StubServer(_handler) as server:
        yield server


def test_two_models_repeats_scores_and_the_audit_read_from_the_database(tmp_path, stub,
                                                                         db_url):
    url = db_url
    m1, m2 = model_file(tmp_path, stub, "m1"), model_file(tmp_path, stub, "m2")
    code, out = invoke("run", "medqa-sample", "--model", m1, "--model", m2, "--samples", "2",
                       "--database-url", url)
    assert code == 0, out
    assert len(calls(stub)) == 16  # 4 cases x 2 samples x 2 models
    outcome = dict(((m, s), n) for m, s, n in rows(url, """
        SELECT r.model_id, b.status, COUNT(*) FROM benchmark_results b
        JOIN benchmark_runs r ON r.run_id = b.run_id GROUP BY r.model_id, b.status"""))
    assert outcome == {("m1", "ok"): 6, ("m1", "unparsed"): 2, ("m2", "ok"): 8}
    # Hand count. m1: cases 1 and 4 right, 2 wrong, 3 unparsed in both samples: 2/3 over the
    # 3 scored cases, Worst@2 the same. m2: sample 0 right only on case 1, sample 1 on all:
    # case means 1, .5, .5, .5 -> 0.625; Worst@2 = mean(1, 0, 0, 0) = 0.25.
    assert ("m1, choice: 6 scored, 2 unparsed, 0 errors, 0 failed calls; mean 0.667 (n = 6"
            " samples); Worst@2 0.667 (n = 3 cases)") in out
    assert ("m2, choice: 8 scored, 0 unparsed, 0 errors, 0 failed calls; mean 0.625 (n = 8"
            " samples); Worst@2 0.250 (n = 4 cases)") in out
    extracted = rows(url, "SELECT extracted FROM benchmark_results b JOIN benchmark_runs r ON"
                          " r.run_id = b.run_id WHERE r.model_id = 'm1' AND b.sample_index = 0"
                          " ORDER BY instance_id")
    assert extracted == [("C",), ("A",), (None,), ("A",)]

    section = next(s for s in audit(url, bootstrap=200).sections if s.key == "benchmarks")
    assert not section.skipped
    scores = section.tables["scores"].set_index("model")
    assert scores.loc["m1", "score"] == pytest.approx(2 / 3) and scores.loc["m1", "n"] == 3
    assert scores.loc["m1", "samples_unparsed"] == 2
    assert scores.loc["m2", "score"] == pytest.approx(0.625) and scores.loc["m2", "n"] == 4
    assert scores.loc["m2", "worst_at_k"] == pytest.approx(0.25)
    assert scores.loc["m2", "k"] == 2 and scores.loc["m2", "worst_at_k_n"] == 4
    assert scores.loc["m1", "category"] == "decision_support"
    assert "2 had no readable answer (unparsed)" in section.summary
    assert "not counted as wrong" in section.summary

    # The same command again resumes: nothing is called, the numbers stay.
    before = len(stub.requests)
    code, out = invoke("run", "medqa-sample", "--model", m1, "--model", m2, "--samples", "2",
                       "--database-url", url, "--skip-preflight")
    assert code == 0 and len(stub.requests) == before
    assert rows(url, "SELECT COUNT(*) FROM benchmark_results") == [(16,)]


def test_a_hook_that_fails_on_one_case_is_that_cases_error(tmp_path, stub):
    (tmp_path / "hooks.py").write_text(
        "def score(output, case):\n"
        "    if case['id'] == '3':\n"
        "        raise ValueError('cannot score this one')\n"
        "    return float(case['reference'] in output)\n")
    cases = tmp_path / "cases.jsonl"
    from clinieval.tasks.catalog import bundled_folder

    cases.write_text((bundled_folder() / "medqa_sample.jsonl").read_text())
    bench = tmp_path / "b.toml"
    bench.write_text('id = "hooked"\ncategory = "decision_support"\n'
                     'subcategory = "knowledge_support"\ncases = "cases.jsonl"\n'
                     'answer = "choice"\nscorers = ["choice", {kind = "python",'
                     ' function = "hooks.py:score"}]\n')
    url = f"sqlite:///{tmp_path / 'b.db'}"
    code, out = invoke("run", bench, "--model", model_file(tmp_path, stub, "m1"),
                       "--database-url", url)
    assert code == 0, out
    got = rows(url, "SELECT instance_id, status, score, detail FROM benchmark_results WHERE"
                    " scorer = 'python' ORDER BY instance_id")
    assert got[2] == ("3", "error", None, "ValueError: cannot score this one")
    assert [g[1] for g in got] == ["ok", "ok", "error", "ok"]
    assert [g[2] for g in got if g[1] == "ok"] == [1.0, 0.0, 1.0]  # C in case 1, A in 2 and 4


def test_user_templates_override_the_bundled_ones_and_are_recorded(tmp_path, stub):
    prompts = tmp_path / "prompts"
    prompts.mkdir()
    text = "Q: {{ question }}\n{{ options }}\nLetter only."
    (prompts / "multiple_choice.j2").write_text(text)
    url = f"sqlite:///{tmp_path / 'b.db'}"
    code, out = invoke("run", "medqa-sample", "--model", model_file(tmp_path, stub, "m1"),
                       "--database-url", url, "--limit", "1")
    assert code == 0, out
    sent = calls(stub)[0]["messages"]
    assert sent[0]["role"] == "system" and sent[-1]["content"].startswith("Q: A 58-year-old")
    assert sent[-1]["content"].endswith("Letter only.")
    assert rows(url, "SELECT template_name, template_sha256 FROM benchmark_runs") == [
        ("multiple_choice.j2", hashlib.sha256(text.encode()).hexdigest())]


def test_the_prompt_identity_api(tmp_path):
    from clinieval.runs.prompt_files import load_prompt, template_identity, use_prompt_folder

    bundled = template_identity("jury")
    (tmp_path / "jury.toml").write_text(
        load_prompt("jury")["template"].text.replace("one member", "a member"))
    with use_prompt_folder(tmp_path):
        name, sha = template_identity("jury")
        assert "a member of a panel" in load_prompt("jury")["system"]
    assert name == "jury" and sha != bundled[1] and len(sha) == 64
    assert "one member" in load_prompt("jury")["system"]  # outside the block: bundled again


def test_judge_scorers_rule_from_healthbench_items_and_jury(tmp_path):
    def judge(request: dict, _n: int) -> Reply:
        user = request["messages"][-1]["content"]
        if user == "ping":
            return Reply(body=completion_body("pong"))
        if "response_format" not in request:
            return Reply(body=completion_body("Go to the emergency department now."))
        props = request["response_format"]["json_schema"]["schema"]["properties"]
        if "met" in props:  # met exactly when the rule mentions 'urgent'
            rule = user.split("Rule:")[1]
            return Reply(body=completion_body(json.dumps({"met": "urgent" in rule,
                                                          "reason": "r"})))
        return Reply(body=completion_body(json.dumps(
            {k: 4 for k in props if k != "reason"} | {"reason": "r"})))

    example = {"prompt_id": "hb-1", "prompt": [{"role": "user", "content": "Chest pain?"}],
               "rubrics": [{"criterion": "Says to seek urgent care", "points": 5,
                            "tags": ["axis:accuracy"]},
                           {"criterion": "Gives the dose", "points": 3, "tags": []},
                           {"criterion": "Recommends an urgent unproven remedy", "points": -4,
                            "tags": ["axis:safety"]}],
               "example_tags": ["theme:emergency_referrals"]}
    (tmp_path / "hb.jsonl").write_text(json.dumps(example) + "\n")
    (tmp_path / "b.toml").write_text(
        'id = "hb"\ncategory = "patient_communication"\nsubcategory = "patient_messages"\n'
        'cases = "hb.jsonl"\nscorers = ["rule", {kind = "jury", jurors = 2}]\n')
    url = f"sqlite:///{tmp_path / 'b.db'}"
    from clinieval.runs.prompt_files import load_prompt

    (tmp_path / "prompts").mkdir()  # beside the model files: the jury's prompt overridden
    (tmp_path / "prompts" / "jury.toml").write_text(
        load_prompt("jury")["template"].text.replace("You are one member", "OVERRIDDEN: one"))
    with StubServer(judge) as server:
        cand = model_file(tmp_path, server, "cand")
        jury = model_file(tmp_path, server, "judge", seed=11)
        code, out = invoke("run", tmp_path / "b.toml", "--model", cand, "--judge", jury,
                           "--database-url", url)
        systems = {r["messages"][0]["content"].split(" ")[0] for r in server.requests
                   if "response_format" in r}
    assert code == 0, out
    assert systems == {"OVERRIDDEN:", "You"}  # the jury's (overridden) and the rule judge's
    # Hand count: items met are +5 and -4 -> (5 - 4) / 8 positive points = 0.125.
    # Jury: 2 jurors x 3 axes, every axis 4 -> 4.0 on 1..5.
    assert rows(url, "SELECT scorer, status, score FROM benchmark_results ORDER BY scorer") == [
        ("jury", "ok", 4.0), ("rule", "ok", 0.125)]
    assert rows(url, "SELECT metric, normalisation FROM benchmark_runs") == [
        ("rubric", '{"high":null,"higher_is_better":true,"kind":"identity","low":null}')]
    assert rows(url, "SELECT judge_kind, COUNT(*) FROM judgments GROUP BY judge_kind") == [
        ("jury", 6), ("rule", 3)]


def test_judge_rule_reads_the_stored_healthbench_items_with_their_tags(tmp_path):
    from clinieval.io.foreign import healthbench
    from clinieval.runs.rules import load_rules

    example = {"prompt_id": "hb-1", "prompt": [{"role": "user", "content": "Chest pain?"}],
               "rubrics": [{"criterion": "Says to seek urgent care", "points": 5,
                            "tags": ["axis:accuracy", "level:example"]}]}
    (tmp_path / "hb.jsonl").write_text(json.dumps(example) + "\n")
    dump = healthbench.read(tmp_path / "hb.jsonl").meta["case_rules"]
    assert dump[0]["tags"] == ["axis:accuracy", "level:example"]
    (tmp_path / "rules.json").write_text(json.dumps(dump))
    (tmp_path / "manifest.json").write_text(json.dumps({"case_rules": dump}))
    for path in (tmp_path / "rules.json", tmp_path / "manifest.json"):
        [rule] = load_rules(path)
        assert (rule.case_id, rule.rule_id, rule.points) == ("hb-1", "hb-1:1", 5)


def test_a_call_that_fails_is_that_cases_outcome_and_the_exit_status_says_so(tmp_path):
    def flaky(request: dict, _n: int) -> Reply:
        user = request["messages"][-1]["content"]
        if "dabigatran" in user:
            return Reply(status=500, body=b'{"error": "boom"}')
        return Reply(body=completion_body("pong" if user == "ping" else "C"))

    url = f"sqlite:///{tmp_path / 'b.db'}"
    with StubServer(flaky) as server:
        model = model_file(tmp_path, server, "m1", max_attempts=1)
        code, out = invoke("run", "medqa-sample", "--model", model, "--database-url", url)
        assert code == 1 and "calls failed after their retries" in out
        code, _ = invoke("run", "medqa-sample", "--model", model, "--database-url", url,
                         "--allow-failures")
        assert code == 0
    got = rows(url, "SELECT instance_id, status, score FROM benchmark_results ORDER BY"
                    " instance_id")
    assert got == [("1", "ok", 1.0), ("2", "ok", 0.0), ("3", "failed", None), ("4", "ok", 0.0)]


@pytest.mark.parametrize("name, scored", [("pubmedqa-sample", 3), ("medmcqa-sample", 2),
                                          ("medcalc-sample", 2)])
def test_every_bundled_example_runs(tmp_path, name, scored):
    def reply(request: dict, _n: int) -> Reply:
        user = request["messages"][-1]["content"]
        return Reply(body=completion_body("pong" if user == "ping" else
                                          "Answer: 66.7 mL/min" if "Cockcroft" in user else "B"))

    url = f"sqlite:///{tmp_path / 'b.db'}"
    with StubServer(reply) as server:
        code, out = invoke("run", name, "--model", model_file(tmp_path, server, "m"),
                           "--database-url", url)
    assert code == 0, out
    assert rows(url, "SELECT COUNT(*) FROM benchmark_results WHERE status = 'ok'") == [(scored,)]


def test_a_changed_template_runs_again_on_the_same_database(tmp_path, stub):
    url = f"sqlite:///{tmp_path / 'b.db'}"
    model = model_file(tmp_path, stub, "m1")
    assert invoke("run", "medqa-sample", "--model", model, "--database-url", url)[0] == 0
    (tmp_path / "prompts").mkdir()
    (tmp_path / "prompts" / "multiple_choice.j2").write_text("{{ question }}\n{{ options }}")
    code, out = invoke("run", "medqa-sample", "--model", model, "--database-url", url)
    assert code == 0, out
    assert len(rows(url, "SELECT DISTINCT template_sha256 FROM benchmark_runs")) == 2


def test_a_yaml_benchmark_file_runs_like_its_toml_twin(tmp_path, stub):
    from clinieval.tasks.catalog import bundled_folder

    (tmp_path / "medqa_sample.jsonl").write_text(
        (bundled_folder() / "medqa_sample.jsonl").read_text())
    (tmp_path / "b.yml").write_text(
        "id: medqa-yaml\ncategory: decision_support\nsubcategory: knowledge_support\n"
        "cases: medqa_sample.jsonl\nanswer: choice\nscorer: choice\n"
        "prompt:\n  system: You are a medical expert answering licensing-exam questions.\n")
    url = f"sqlite:///{tmp_path / 'b.db'}"
    model = model_file(tmp_path, stub, "m1")
    assert invoke("run", tmp_path / "b.yml", "--model", model, "--database-url", url)[0] == 0
    before = len(calls(stub))
    assert invoke("run", "medqa-sample", "--model", model, "--database-url", url)[0] == 0
    assert len(calls(stub)) == before  # the same prompts: answered from the cache
    assert rows(url, "SELECT r.benchmark_id, SUM(b.score) FROM benchmark_results b JOIN"
                     " benchmark_runs r ON r.run_id = b.run_id GROUP BY r.benchmark_id"
                     " ORDER BY 1") == [("medqa-sample", 2.0), ("medqa-yaml", 2.0)]
