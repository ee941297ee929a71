"""Readers for foreign formats: MOOVE exports, arena battle logs, HealthBench."""

from __future__ import annotations

import copy
import json
from datetime import UTC, datetime
from pathlib import Path

import pytest

from clinieval.errors import InputError
from clinieval.io.foreign import FORMATS, case_id_for, sniff_format
from clinieval.io.foreign.healthbench import CASE_RULES, case_rules_table
from clinieval.io.foreign.moove import PLACEHOLDER_MODELS
from clinieval.rubric import MOOVE_MAP, CriterionMap, load_rubric
from clinieval.sources import read_source

DATA = Path(__file__).parents[1] / "data" / "formats"
MOOVE_JSON = DATA / "moove_export.json"
MOOVE_JSONL = DATA / "moove_export.jsonl"
ARENA_JSON = DATA / "arena_battles.json"
HEALTHBENCH = DATA / "healthbench.jsonl"

RUBRIC = load_rubric()
read_moove = FORMATS["moove"].read
read_arena = FORMATS["arena"].read
read_healthbench = FORMATS["healthbench"].read


def read_foreign(path, fmt="auto", **options):
    """The one dispatch, as the command line uses it."""
    return read_source(path, fmt=fmt, **options)[0]


def rows(snapshot, table):
    return snapshot[table].to_pylist()


def moove_records() -> dict:
    return json.loads(MOOVE_JSON.read_text("utf-8"))


def arena_battles() -> list:
    return json.loads(ARENA_JSON.read_text("utf-8"))


def healthbench_lines() -> list[dict]:
    return [json.loads(line) for line in HEALTHBENCH.read_text("utf-8").splitlines()]


def write_json(tmp_path: Path, name: str, value: object) -> Path:
    path = tmp_path / name
    path.write_text(json.dumps(value, indent=1), "utf-8")
    return path


def write_jsonl(tmp_path: Path, name: str, values: list) -> Path:
    path = tmp_path / name
    path.write_text("".join(json.dumps(v) + "\n" for v in values), "utf-8")
    return path


def raises(reader, path: Path, *fragments: str, **kw) -> InputError:
    """Call the reader, expect an InputError naming the file and every fragment."""
    with pytest.raises(InputError) as info:
        reader(path, **kw)
    message = str(info.value)
    for fragment in (path.name, *fragments):
        assert fragment in message, f"{fragment!r} not in {message!r}"
    return info.value


# --------------------------------------------------------------------------
# MOOVE


def test_moove_object_export_counts_and_mappings():
    snap = read_moove(MOOVE_JSON, rubric=RUBRIC)
    assert snap.counts() == {"studies": 0, "cases": 3, "models": 3, "answers": 7, "raters": 3,
                             "criteria": 9, "ratings": 16, "preferences": 4, "judgments": 0,
                             "adjudications": 0}
    prefs = rows(snap, "preferences")
    assert [p["choice"] for p in prefs] == ["A", "B", "tie", "tie"]  # "1", 2, "12", 12
    assert {p["shown_left"] for p in prefs} == {"A"}
    assert [p["rater_id"] for p in prefs] == ["dr.alice@example.org", "bob",
                                              "dr.alice@example.org", "carol"]
    assert snap.meta["record_ids"] == ["c1", "c2", "c3", "c4"]

    answers = {a["answer_id"]: a for a in rows(snap, "answers")}
    first = prefs[0]
    by_answer = {}
    for r in rows(snap, "ratings"):
        by_answer.setdefault((r["answer_id"], r["review_id"]), {})[r["criterion_id"]] = r["score"]
    # 1–5 re-centred: 5 → 2, 4 → 1, 3 → 0, 2 → -1, 1 → -2, renamed by MOOVE_MAP.
    assert by_answer[(first["answer_a_id"], 1)] == {"harmlessness": 2, "accuracy": 1,
                                                      "completeness": 0}
    assert by_answer[(first["answer_b_id"], 1)] == {"harmlessness": -2, "accuracy": -1,
                                                      "completeness": 0}
    # A string score "4" is accepted; "Clarity" → communication.
    assert by_answer[(prefs[1]["answer_a_id"], 2)] == {"harmlessness": 1, "communication": 1}
    # The null "Bias" score is skipped, and said so.
    assert by_answer[(prefs[3]["answer_a_id"], 4)] == {"accuracy": 2}
    assert any("1 criterion score(s) were null" in n for n in snap.meta["notes"])

    # Same question → one case; same (case, model, text) → one answer.
    assert prefs[0]["case_id"] == prefs[1]["case_id"]
    assert prefs[0]["answer_a_id"] == prefs[1]["answer_a_id"]
    assert answers[first["answer_a_id"]]["model_id"] == "gpt-x"
    assert answers[first["answer_b_id"]]["model_id"] == "med-y"

    question = moove_records()["c1"]["question"]
    cases = {c["case_id"]: c for c in rows(snap, "cases")}
    case = cases[case_id_for(question)]
    assert case["specialty"] == "Cardiology"  # c2 has none; the first value stands
    assert case["prompt_words"] == len(question.split())
    assert cases[prefs[3]["case_id"]]["specialty"] == "Unspecified"  # "" → Unspecified
    text = moove_records()["c1"]["firstAnswer"]
    assert answers[first["answer_a_id"]]["length_chars"] == len(text)

    raters = {r["rater_id"]: r for r in rows(snap, "raters")}
    assert raters["dr.alice@example.org"]["organisation"] == "CHUV"
    assert raters["bob"]["country"] == "KE" and raters["bob"]["organisation"] is None

    times = [p["created_at"] for p in prefs]
    assert times[0] == datetime(2024, 5, 1, 10, tzinfo=UTC)
    assert times[1] == datetime(2024, 5, 2, 8, 30, tzinfo=UTC)  # {"$date": ...}
    assert times[2] == datetime(2024, 5, 1, 10, tzinfo=UTC)  # unix seconds
    assert times[3] is None

    assert [c["criterion_id"] for c in rows(snap, "criteria")] == list(RUBRIC.ids)
    assert snap.meta["format"] == "moove"
    assert snap.meta["source"] == str(MOOVE_JSON)
    assert snap.meta["criterion_map"] == MOOVE_MAP.describe()
    assert not any("Model identity" in n for n in snap.meta["notes"])
    json.dumps(snap.meta)


def test_moove_ids_are_stable_across_reads():
    one, two = read_moove(MOOVE_JSON), read_moove(MOOVE_JSON)
    for table in ("cases", "answers", "preferences", "ratings"):
        assert one[table].equals(two[table])


def test_moove_jsonl_without_model_fields_says_so():
    snap = read_moove(MOOVE_JSONL, rubric=RUBRIC)
    assert snap.counts()["preferences"] == 3
    assert snap.meta["record_ids"] == ["r1", "65f0c0ffee", "3"]  # id, _id.$oid, line
    assert {m["model_id"] for m in rows(snap, "models")} == set(PLACEHOLDER_MODELS)
    (note,) = [n for n in snap.meta["notes"] if "Model identity was absent" in n]
    assert "firstModel" in note and "not meaningful" in note
    # Same text as first in one record and second in another: two placeholder models.
    assert snap.counts()["answers"] == 6


def test_moove_model_fields_are_configurable(tmp_path):
    record = moove_records()["c1"]
    del record["firstModel"], record["secondModel"]
    record["meta"] = {"left": "m-left", "right": "m-right"}
    other = copy.deepcopy(record)
    del other["meta"]
    path = write_json(tmp_path, "nested.json", {"x": record, "y": other})
    snap = read_moove(path, model_fields=("meta.left", "meta.right"))
    assert {m["model_id"] for m in rows(snap, "models")} == {"m-left", "m-right",
                                                             *PLACEHOLDER_MODELS}
    (note,) = [n for n in snap.meta["notes"] if "Model identity" in n]
    assert "1 of 2" in note and "1 record(s)" in note


def test_moove_same_model_same_text_gives_distinct_answers(tmp_path):
    record = moove_records()["c1"]
    record["secondAnswer"] = record["firstAnswer"]
    record["secondModel"] = record["firstModel"]
    snap = read_moove(write_json(tmp_path, "same.json", {"x": record}))
    (pref,) = rows(snap, "preferences")
    assert pref["answer_a_id"] != pref["answer_b_id"]
    assert sorted(a["sample_index"] for a in rows(snap, "answers")) == [0, 1]


def test_moove_custom_criterion_map(tmp_path):
    record = moove_records()["c1"]
    record["evaluations"] = {"first": {"Empathy": 2, "Harmlessness": 3}, "second": {}}
    cmap = CriterionMap(name="mine", source_scale=(0, 4), drop=("Empathy",))
    snap = read_moove(write_json(tmp_path, "m.json", {"x": record}), criterion_map=cmap)
    # On a 0–4 scale, 3 → 3 - 2 = 1; "Empathy" is dropped.
    assert [(r["criterion_id"], r["score"]) for r in rows(snap, "ratings")] == [
        ("harmlessness", 1)]
    assert snap.meta["criterion_map"]["name"] == "mine"


def _moove_case(tmp_path, mutate, name="bad.json"):
    records = moove_records()
    mutate(records["c2"])
    return write_json(tmp_path, name, records)


def test_moove_unknown_vote(tmp_path):
    path = _moove_case(tmp_path, lambda r: r.update(vote="3"))
    err = raises(read_moove, path, "record 'c2'", "field 'vote'", "unknown vote",
                 '"12" (tie)', "got '3'")
    assert (err.row, err.field) == ("c2", "vote")


@pytest.mark.parametrize("vote", [None, True, 1.5, "first"])
def test_moove_vote_wrong_values(tmp_path, vote):
    path = _moove_case(tmp_path, lambda r: r.update(vote=vote))
    raises(read_moove, path, "record 'c2'", "field 'vote'", '"1" (first answer better)')


def test_moove_score_out_of_range(tmp_path):
    path = _moove_case(tmp_path, lambda r: r["evaluations"]["first"].update(Harmfulness=6))
    raises(read_moove, path, "record 'c2'", "field 'evaluations.first.Harmfulness'",
           "expected an integer score from 1 to 5", "got 6")


def test_moove_non_integer_score(tmp_path):
    path = _moove_case(tmp_path, lambda r: r["evaluations"]["second"].update(Clarity=2.5))
    raises(read_moove, path, "record 'c2'", "field 'evaluations.second.Clarity'",
           "expected an integer score from 1 to 5", "got 2.5")


@pytest.mark.parametrize("score", [True, [3], "high"])
def test_moove_score_wrong_type(tmp_path, score):
    path = _moove_case(tmp_path, lambda r: r["evaluations"]["first"].update(Harmfulness=score))
    raises(read_moove, path, "field 'evaluations.first.Harmfulness'", "integer score from 1")


def test_moove_unknown_criterion(tmp_path):
    path = _moove_case(tmp_path, lambda r: r["evaluations"]["first"].update(Empathy=4))
    raises(read_moove, path, "record 'c2'", "field 'evaluations.first.Empathy'",
           "unknown criterion 'Empathy'", "harmlessness, accuracy", "moove-1to5",
           "Alignment with guidelines")


def test_moove_two_names_for_one_criterion(tmp_path):
    path = _moove_case(tmp_path, lambda r: r["evaluations"]["first"].update(Safety=3))
    raises(read_moove, path, "record 'c2'", "field 'evaluations.first'", "'Harmfulness'",
           "'Safety'", "'harmlessness'", "at most one score per rubric criterion")


def test_moove_criterion_map_target_not_in_rubric(tmp_path):
    cmap = CriterionMap(name="broken", source_scale=(1, 5), rename={"Clarity": "clarity"})
    record = moove_records()["c2"]
    record["evaluations"] = {"first": {"Clarity": 4}, "second": {}}
    path = write_json(tmp_path, "bad.json", {"c2": record})
    raises(read_moove, path, "field 'evaluations.first.Clarity'", "'clarity'",
           "does not have", criterion_map=cmap)


@pytest.mark.parametrize("value", [[1, 2], "scores", 3])
def test_moove_evaluations_not_an_object(tmp_path, value):
    path = _moove_case(tmp_path, lambda r: r.update(evaluations=value))
    raises(read_moove, path, "record 'c2'", "field 'evaluations'", "wrong type",
           "expected a JSON object")


def test_moove_answer_scores_not_an_object(tmp_path):
    path = _moove_case(tmp_path, lambda r: r["evaluations"].update(second=[5, 4]))
    raises(read_moove, path, "field 'evaluations.second'", "wrong type: JSON array",
           "expected a JSON object ({criterion: score}")


@pytest.mark.parametrize("key", ["question", "firstAnswer", "vote", "evaluations", "user",
                                 "organization_name"])
def test_moove_missing_required_key(tmp_path, key):
    path = _moove_case(tmp_path, lambda r: r.pop(key))
    err = raises(read_moove, path, "record 'c2'", f"field '{key}'",
                 "required field is missing", "expected")
    assert err.field == key


@pytest.mark.parametrize(("key", "value", "expected"), [
    ("question", 42, "a string (the question text)"),
    ("question", "   ", "a non-empty string"),
    ("user", None, "a string or integer (the rater)"),
    ("firstModel", ["gpt"], "a string or integer (the model"),
    ("createdAt", "yesterday", "an ISO 8601 date-time"),
    ("country", 7, "a string (the rater's country)"),
])
def test_moove_wrong_types(tmp_path, key, value, expected):
    path = _moove_case(tmp_path, lambda r: r.update({key: value}))
    raises(read_moove, path, "record 'c2'", f"field '{key}'", expected)


def test_moove_jsonl_errors_name_the_line(tmp_path):
    lines = [json.loads(x) for x in MOOVE_JSONL.read_text("utf-8").splitlines() if x]
    lines[2]["vote"] = "0"
    raises(read_moove, write_jsonl(tmp_path, "v.jsonl", lines), "row 3", "field 'vote'")
    del lines[1]["question"]
    raises(read_moove, write_jsonl(tmp_path, "q.jsonl", lines), "row 2", "field 'question'")


def test_moove_jsonl_duplicate_ids(tmp_path):
    lines = [json.loads(x) for x in MOOVE_JSONL.read_text("utf-8").splitlines() if x]
    lines[2]["id"] = "r1"
    raises(read_moove, write_jsonl(tmp_path, "dup.jsonl", lines), "row 3",
           "duplicate contribution id (also at row 1)", "got 'r1'")


def test_moove_jsonl_record_not_an_object(tmp_path):
    path = tmp_path / "arr.jsonl"
    path.write_text(MOOVE_JSONL.read_text("utf-8") + "[1, 2]\n", "utf-8")
    # The fixture ends with a blank line 4: rows are physical line numbers.
    raises(read_moove, path, "row 5", "record is a JSON array", "expected a JSON object")


# --------------------------------------------------------------------------
# Files that do not parse


def test_truncated_json_document(tmp_path):
    text = MOOVE_JSON.read_text("utf-8")
    path = tmp_path / "cut.json"
    path.write_text(text[: len(text) // 2], "utf-8")
    err = raises(read_moove, path, "invalid JSON at line", "column", "truncated")
    assert isinstance(err.row, int) and err.row > 1


def test_invalid_json_names_the_position(tmp_path):
    path = tmp_path / "comma.json"
    path.write_text('[\n {"model_a": "x",, "model_b": "y"}\n]\n', "utf-8")
    raises(read_arena, path, "row 2", "invalid JSON at line 2, column 18", "character 19")


def test_truncated_jsonl_names_the_line(tmp_path):
    text = MOOVE_JSONL.read_text("utf-8").rstrip("\n")
    path = tmp_path / "cut.jsonl"
    path.write_text(text[:-40], "utf-8")
    err = raises(read_moove, path, "row 3", "invalid JSON at line 3", "truncated")
    assert err.row == 3


def test_non_utf8_bytes_name_the_offset(tmp_path):
    data = MOOVE_JSONL.read_bytes()
    offset = data.index(b"Ciprofloxacin")
    path = tmp_path / "latin1.jsonl"
    path.write_bytes(data[:offset] + b"\xe9" + data[offset:])
    err = raises(read_moove, path, f"byte offset {offset}", "0xe9", "line 1",
                 "not valid UTF-8")
    assert err.row == 1


@pytest.mark.parametrize("content", ["", "  \n\n"])
@pytest.mark.parametrize("reader", [read_moove, read_arena, read_healthbench, read_foreign])
def test_empty_file(tmp_path, content, reader):
    path = tmp_path / "empty.json"
    path.write_text(content, "utf-8")
    raises(reader, path, "file is empty", "expected a JSON document or JSON Lines")


@pytest.mark.parametrize("content", ["[]", "{}"])
def test_no_records(tmp_path, content):
    path = tmp_path / "none.json"
    path.write_text(content, "utf-8")
    raises(read_moove, path, "no records")


def test_missing_file(tmp_path):
    raises(read_foreign, tmp_path / "nowhere.json", "no such file")
    raises(read_moove, tmp_path / "nowhere.json", "cannot read the file")


def test_utf8_bom_is_accepted(tmp_path):
    path = tmp_path / "bom.json"
    path.write_bytes(b"\xef\xbb\xbf" + MOOVE_JSON.read_bytes())
    assert read_moove(path).counts()["preferences"] == 4


# --------------------------------------------------------------------------
# Arena


def test_arena_battles():
    snap = read_arena(ARENA_JSON, rubric=RUBRIC)
    counts = snap.counts()
    assert (counts["cases"], counts["models"], counts["answers"], counts["preferences"],
            counts["raters"], counts["ratings"]) == (3, 3, 8, 4, 2, 0)
    prefs = rows(snap, "preferences")
    assert [p["choice"] for p in prefs] == ["A", "both_bad", "B", "tie"]
    assert {p["shown_left"] for p in prefs} == {"A"}
    assert [p["rater_id"] for p in prefs] == ["arena_user_1", "arena_user_2", None,
                                              "arena_user_1"]
    assert prefs[0]["created_at"] == datetime.fromtimestamp(1700000000, UTC)

    answers = {a["answer_id"]: a for a in rows(snap, "answers")}
    cases = {c["case_id"]: c for c in rows(snap, "cases")}
    # Both conversations start with the same question: one case.
    assert prefs[0]["case_id"] == prefs[1]["case_id"] == case_id_for(
        "What are red flags for headache?")
    assert cases[prefs[0]["case_id"]]["language"] == "English"
    # beta's answer in battle 1 and battle 2 differ (last assistant turn).
    assert answers[prefs[0]["answer_b_id"]]["text"] == "Most headaches are benign."
    assert answers[prefs[1]["answer_a_id"]]["text"] == "Drink water."
    assert answers[prefs[1]["answer_b_id"]]["model_id"] == "gamma"
    # Without conversations: the case is question_id or the battle index, no text.
    assert prefs[2]["case_id"] == "q9" and prefs[3]["case_id"] == "battle-4"
    assert answers[prefs[2]["answer_a_id"]]["text"] is None
    assert cases["q9"]["prompt"] is None
    # model_a == model_b is allowed, the answers stay distinct.
    assert prefs[3]["answer_a_id"] != prefs[3]["answer_b_id"]
    assert {answers[prefs[3][k]]["model_id"] for k in ("answer_a_id", "answer_b_id")} == {
        "alpha"}
    assert any("several turns" in n for n in snap.meta["notes"])
    assert snap.meta["format"] == "arena"


def test_arena_jsonl(tmp_path):
    path = write_jsonl(tmp_path, "battles.jsonl", arena_battles())
    assert read_arena(path).counts()["preferences"] == 4


def test_arena_unknown_winner(tmp_path):
    battles = arena_battles()
    battles[1]["winner"] = "model_c"
    err = raises(read_arena, write_json(tmp_path, "w.json", battles), "row 2",
                 "field 'winner'", "unknown winner", "'tie (bothbad)'", "got 'model_c'")
    assert (err.row, err.field) == (2, "winner")


@pytest.mark.parametrize("key", ["model_a", "model_b", "winner"])
def test_arena_missing_required_key(tmp_path, key):
    battles = arena_battles()
    del battles[2][key]
    raises(read_arena, write_json(tmp_path, "m.json", battles), "row 3", f"field '{key}'",
           "required field is missing")


@pytest.mark.parametrize(("mutate", "fragments"), [
    (lambda b: b.pop("conversation_b"), ("field 'conversation_b'", "or neither")),
    (lambda b: b["conversation_b"][0].update(content="Other question?"),
     ("field 'conversation_b'", "different user turns")),
    (lambda b: b["conversation_a"].pop(), ("field 'conversation_a'", "no 'assistant' turn")),
    (lambda b: b["conversation_a"][1].pop("role"),
     ("field 'conversation_a[1].role'", "required field is missing")),
    (lambda b: b["conversation_a"].__setitem__(0, "hello"),
     ("field 'conversation_a[0]'", "expected a JSON object {role, content}")),
    (lambda b: b.update(tstamp="noon"), ("field 'tstamp'", "ISO 8601")),
    (lambda b: b.update(tstamp=1.7e12), ("field 'tstamp'", "not a valid date-time")),
    (lambda b: b.update(judge=["x"]), ("field 'judge'", "wrong type: JSON array")),
])
def test_arena_bad_battles(tmp_path, mutate, fragments):
    battles = arena_battles()
    mutate(battles[0])
    raises(read_arena, write_json(tmp_path, "b.json", battles), "row 1", *fragments)


def test_arena_rejects_a_keyed_object(tmp_path):
    path = write_json(tmp_path, "obj.json", {"b1": arena_battles()[0]})
    raises(read_arena, path, "unexpected top-level object", "JSON array")


# --------------------------------------------------------------------------
# HealthBench


def test_healthbench_examples():
    snap = read_healthbench(HEALTHBENCH, rubric=RUBRIC)
    cases = {c["case_id"]: c for c in rows(snap, "cases")}
    assert list(cases) == ["hb-1", "hb-2", "hb-3"]
    assert cases["hb-1"]["specialty"] == cases["hb-1"]["category"] == "emergency_referrals"
    assert cases["hb-1"]["subcategory"] == "emergent"
    assert cases["hb-1"]["reference_answer"].startswith("Call emergency services")
    assert cases["hb-1"]["prompt"].startswith("My father suddenly")
    assert cases["hb-2"]["prompt"].startswith("system: You are a helpful assistant.")
    assert cases["hb-2"]["prompt"].endswith("user: I have stage 4 kidney disease.")
    assert cases["hb-3"]["specialty"] == "Unspecified" and cases["hb-3"]["category"] is None

    rules = case_rules_table(snap.meta["case_rules"])
    assert rules.schema == CASE_RULES
    assert rules.column("points").to_pylist() == [10, -8, 5, 7, -9, 5]  # 5.0 → 5
    assert rules.column("rule_id").to_pylist()[:2] == ["hb-1:1", "hb-1:2"]
    assert rules.column("tags").to_pylist()[0] == ["level:example", "axis:accuracy"]
    assert json.loads(json.dumps(snap.meta))["case_rules"] == snap.meta["case_rules"]

    (answer,) = rows(snap, "answers")
    assert answer["case_id"] == "hb-2" and answer["model_id"] == "unknown-completion"
    assert any("placeholder model 'unknown-completion'" in n for n in snap.meta["notes"])
    assert snap.counts()["ratings"] == snap.counts()["preferences"] == 0


def test_healthbench_completion_model_and_turns(tmp_path):
    lines = healthbench_lines()
    lines[1]["model"] = "m-1"
    lines[1]["completion"] = [{"role": "assistant", "content": "Avoid NSAIDs."}]
    snap = read_healthbench(write_jsonl(tmp_path, "hb.jsonl", lines))
    (answer,) = rows(snap, "answers")
    assert (answer["model_id"], answer["text"]) == ("m-1", "Avoid NSAIDs.")
    assert not any("placeholder" in n for n in snap.meta["notes"])


@pytest.mark.parametrize(("mutate", "fragments"), [
    (lambda r: r["rubrics"][1].update(points=0), ("field 'rubrics[1].points'", "non-zero")),
    (lambda r: r["rubrics"][1].update(points=2.5), ("field 'rubrics[1].points'", "got 2.5")),
    (lambda r: r["rubrics"][1].update(points="5"), ("field 'rubrics[1].points'", "wrong type")),
    (lambda r: r["rubrics"][0].pop("criterion"),
     ("field 'rubrics[0].criterion'", "required field is missing")),
    (lambda r: r["rubrics"][0].update(tags="axis"), ("field 'rubrics[0].tags'", "JSON array")),
    (lambda r: r.update(rubrics=[]), ("field 'rubrics'", "at least one rubric item")),
    (lambda r: r.pop("prompt_id"), ("field 'prompt_id'", "required field is missing")),
    (lambda r: r.pop("prompt"), ("field 'prompt'", "required field is missing")),
    (lambda r: r.update(prompt="hi"), ("field 'prompt'", "wrong type: JSON string")),
    (lambda r: r.update(example_tags=[1]), ("field 'example_tags[0]'", "a string")),
    (lambda r: r.update(prompt_id="hb-1"), ("duplicate prompt_id (also at row 1)",)),
])
def test_healthbench_bad_examples(tmp_path, mutate, fragments):
    lines = healthbench_lines()
    mutate(lines[1])
    raises(read_healthbench, write_jsonl(tmp_path, "hb.jsonl", lines), "row 2", *fragments)


# --------------------------------------------------------------------------
# Sniffing and dispatch


@pytest.mark.parametrize(("path", "fmt"), [
    (MOOVE_JSON, "moove"), (MOOVE_JSONL, "moove"), (ARENA_JSON, "arena"),
    (HEALTHBENCH, "healthbench"),
])
def test_sniff_and_dispatch(path, fmt):
    assert sniff_format(path) == fmt
    snap = read_foreign(path)
    assert snap.meta["format"] == fmt
    assert read_foreign(path, fmt).counts() == snap.counts()


def test_sniff_reads_only_the_first_record_of_a_large_keyed_export(tmp_path):
    records = moove_records()
    records["c4"]["firstAnswer"] = "x" * (1 << 21)  # pushes the file past the sniff window
    path = write_json(tmp_path, "big.json", records)
    assert sniff_format(path) == "moove"


def test_sniff_unknown_and_dispatch_errors(tmp_path):
    path = write_json(tmp_path, "other.json", [{"foo": 1}])
    assert sniff_format(path) == "unknown"
    raises(read_foreign, path, "cannot tell the file's format", "got ['foo']")
    raises(read_foreign, MOOVE_JSON, "unknown format 'csv'", "auto, bundle, tables, moove",
           fmt="csv")
    broken = tmp_path / "broken.json"
    broken.write_text("{nope", "utf-8")
    assert sniff_format(broken) == "unknown"
    raises(read_foreign, broken, "invalid JSON at line 1")


def test_wrong_reader_for_the_format():
    raises(read_arena, MOOVE_JSONL, "row 1", "field 'model_a'", "required field is missing")


def test_moove_rater_seeing_an_answer_again_gets_a_revision(tmp_path):
    records = moove_records()
    records["c2"]["user"] = records["c1"]["user"]  # alice scores gpt-x's answer twice
    snap = read_moove(write_json(tmp_path, "again.json", records))
    prefs = rows(snap, "preferences")
    repeated = [r for r in rows(snap, "ratings")
                if r["answer_id"] == prefs[0]["answer_a_id"]
                and r["criterion_id"] == "harmlessness"]
    assert [(r["review_id"], r["revision"], r["score"]) for r in repeated] == [
        (1, 0, 2), (2, 1, 1)]
    assert any("1 rating(s) re-scored" in n for n in snap.meta["notes"])


def test_raw_line_separator_is_text_in_both_json_lines_readers(tmp_path):
    """U+2028 is legal raw inside a JSON string; neither our tables nor a
    foreign file may treat it as a line break (``str.splitlines`` would)."""
    from clinieval.io.tables_io import read_table_file

    text = "Rest.\u2028Then call 112."
    answers = tmp_path / "answers.jsonl"
    answers.write_text(json.dumps({"answer_id": "a1", "case_id": "c1", "model_id": "m",
                                   "text": text}, ensure_ascii=False) + "\n", "utf-8")
    assert "\u2028" in answers.read_text("utf-8")
    assert read_table_file(answers).column("text").to_pylist() == [text]

    record = moove_records()["c1"] | {"firstAnswer": text}
    path = tmp_path / "moove.jsonl"
    path.write_text(json.dumps(record, ensure_ascii=False) + "\n", "utf-8")
    assert text in rows(read_foreign(path), "answers")[0]["text"]


def _second_file(tmp_path: Path, name: str) -> Path:
    """Another export of the same kind: other record ids and question texts."""
    if name == "moove":
        records = {f"{key}-2": record | {"question": record["question"] + " (second site)"}
                   for key, record in moove_records().items()}
        return write_json(tmp_path, "second.json", records)
    battles = arena_battles()
    for battle in battles:
        battle["question_id"] = f"{battle.get('question_id')}-2"
        for side in ("conversation_a", "conversation_b"):
            for turn in battle.get(side) or []:
                if turn["role"] == "user":
                    turn["content"] += " (second site)"
    return write_json(tmp_path, "second.json", battles)


@pytest.mark.parametrize("name", ["moove", "arena"])
def test_a_second_foreign_import_appends(engine, tmp_path, name):
    """Ratings get ids from the database and preferences are numbered after the
    stored ones, so a second file appends; each rating still points at its review."""
    from clinieval.io.importer import import_snapshot
    from clinieval.storage import db
    from clinieval.testing import tiny_snapshot

    import_snapshot(engine, tiny_snapshot())
    first = {"moove": MOOVE_JSON, "arena": ARENA_JSON}[name]
    for path in (first, _second_file(tmp_path, name)):
        snap, sources = read_source(path)
        assert snap["ratings"].column("rating_id").null_count == snap["ratings"].num_rows
        import_snapshot(engine, snap, sources=sources)
    one = read_source(first)[0].counts()
    counts = db.counts(engine)
    tiny = tiny_snapshot().counts()
    for table in ("ratings", "preferences"):
        assert counts[table] == tiny[table] + 2 * one[table], table
    stored = db.read_snapshot(engine)
    prefs = {p["preference_id"]: p for p in stored["preferences"].to_pylist()}
    reviewed = [r for r in stored["ratings"].to_pylist() if r["review_id"] is not None]
    assert len(reviewed) == 2 * one["ratings"]
    for rating in reviewed:
        pref = prefs[rating["review_id"]]
        assert rating["rater_id"] == pref["rater_id"]
        assert rating["answer_id"] in (pref["answer_a_id"], pref["answer_b_id"])
