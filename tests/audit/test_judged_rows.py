"""The judgments' rows (audit/judged.py): one view per audit context shared
by every judge section, answers joined by position, and calls numbered as
the unit-and-key rule says (checked on hand-worked rows)."""

from __future__ import annotations

import functools

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
from hypothesis import given, settings
from hypothesis import strategies as st

from clinieval.audit.context import Context
from clinieval.audit.data import audit_data
from clinieval.audit.judged import (
    CALL_UNIT,
    UNREAD,
    Judged,
    _call_ids,
    answer_id_codes,
    judged,
    lean,
    text_codes,
)
from clinieval.audit.sections.automated_judges import _causes
from clinieval.audit.settings import AuditSettings
from clinieval.providers.failure import UNPARSED, cause_of
from clinieval.snapshot import Snapshot
from clinieval.synth import generate
from clinieval.synth.judges import JudgePlan, plant_judgments


@functools.cache
def _snap() -> Snapshot:
    return plant_judgments(generate(2, 0.1), JudgePlan(seed=2))


def test_call_ids_follow_the_unit_and_key_rule_on_hand_worked_rows():
    rubric = dict(run_id="r", judge_kind="rubric", judge_model="m", answer_id="a1",
                  answer_b_id=None, juror=0, repeat=0, shown_first=None, call_key=None)
    pair = {**rubric, "judge_kind": "pairwise", "answer_b_id": "a2", "shown_first": "a"}
    keyed = {**rubric, "answer_id": "a2", "call_key": "k"}
    rows = pd.DataFrame([
        {**rubric, "criterion_id": "c1"},  # 0: a rubric call scores every criterion
        {**rubric, "criterion_id": "c2"},  # 0
        {**pair, "criterion_id": "c1"},  # 1: a pairwise row without a key is its own call
        {**pair, "criterion_id": "c2"},  # 2
        {**keyed, "criterion_id": "c1"},  # 3
        {**keyed, "criterion_id": "c2", "shown_first": ""},  # 3: missing reads as empty
        {**keyed, "criterion_id": "c1", "repeat": 1},  # 4: another repeat, another call
        {**rubric, "criterion_id": "c3", "juror": 2},  # 5: another juror
        {**rubric, "criterion_id": "c3"},  # 0
    ])
    assert _call_ids(rows).tolist() == [0, 0, 1, 2, 3, 3, 4, 5, 0]
    assert _call_ids(rows.iloc[:0]).tolist() == []


def _plain_call_ids(rows: pd.DataFrame) -> list[int]:
    """The unit-and-key rule row by row, on texts: a call is its unit's texts
    and its key (the call key, or for a row without one its criterion unless
    its kind scores every criterion in one call)."""
    def missing(value) -> bool:
        return value is None or value is pd.NA or (isinstance(value, float) and np.isnan(value))

    def text(value) -> str:
        return "" if missing(value) else str(value)

    seen: dict[tuple, int] = {}
    out = []
    for row in rows.to_dict("records"):
        shared = row["judge_kind"] in ("rubric", "jury")
        key = (("no key", "" if shared else text(row["criterion_id"]))
               if missing(row["call_key"]) else ("key", text(row["call_key"])))
        unit = (*(text(row[c]) for c in CALL_UNIT), key)
        out.append(seen.setdefault(unit, len(seen)))
    return out


_texts = st.sampled_from([None, "", "a"])


@settings(max_examples=200, deadline=None)
@given(st.lists(st.fixed_dictionaries({  # few values, so that rows share units
    "run_id": st.just("r"), "judge_kind": st.sampled_from(["rubric", "pairwise"]),
    "judge_model": st.just("m"), "answer_id": st.sampled_from(["a1", "a2"]),
    "answer_b_id": _texts, "juror": st.just(0), "repeat": st.integers(0, 1),
    "shown_first": st.sampled_from([None, ""]),
    "criterion_id": st.sampled_from([None, "", "a", "b"]),
    "call_key": _texts}), min_size=6, max_size=40))
def test_call_ids_equal_the_rule_applied_row_by_row_on_texts(records):
    rows = pd.DataFrame(records, columns=[*CALL_UNIT, "criterion_id", "call_key"])
    assert _call_ids(rows).tolist() == _plain_call_ids(rows)


def test_rows_carry_their_answers_columns_as_a_merge_would():
    snap = _snap()
    tables = {name: snap[name] for name in ("judgments", "cases", "answers", "models")}
    j = tables["judgments"]
    stray = j.slice(0, 2).set_column(j.schema.get_field_index("answer_id"), "answer_id",
                                     pa.array(["no-such-answer", None], pa.string()))
    tables["judgments"] = pa.concat_tables([j, stray])
    rows = Judged(tables).rows
    answers = tables["answers"].to_pandas()[["answer_id", "model_id", "case_id",
                                             "length_chars"]]
    merged = tables["judgments"].to_pandas()[["answer_id", "answer_b_id"]].merge(
        answers, on="answer_id", how="left").merge(
        answers[["answer_id", "length_chars"]].rename(
            columns={"answer_id": "answer_b_id", "length_chars": "length_b"}),
        on="answer_b_id", how="left")
    assert len(rows) == len(merged) == j.num_rows + 2
    for ours, theirs in (("model_id", "model_id"), ("case_id", "case_id")):
        assert rows[ours].astype(object).where(rows[ours].notna(), None).tolist() \
            == merged[theirs].astype(object).where(merged[theirs].notna(), None).tolist()
    np.testing.assert_array_equal(rows["length"], merged["length_chars"].to_numpy(float))
    np.testing.assert_array_equal(rows["length_b"], merged["length_b"].to_numpy(float))
    assert rows["model_id"].iloc[-2:].isna().all()
    assert not rows["model_id"].iloc[:-2].isna().any()


def test_an_audit_context_shares_one_view_of_its_judge_tables():
    ctx = Context(audit_data(_snap()), AuditSettings(bootstrap=50))
    tables = ctx.data.judge_tables
    view = judged(tables)
    assert view is ctx.judged and judged(tables) is view
    other = judged(dict(tables))  # other tables (even equal ones): a view of their own
    assert other is not view
    pd.testing.assert_frame_equal(other.rows, view.rows)
    np.testing.assert_array_equal(other.call_ids, view.call_ids)
    # a table replaced in place makes the shared view stale: a new one is built
    j = tables["judgments"]
    tables["judgments"] = j.filter(pc.equal(j["judge_kind"], "jury"))
    fresh = judged(tables)
    assert fresh is not view and len(fresh.rows) == tables["judgments"].num_rows < len(view.rows)


def test_a_view_goes_with_its_context():
    import gc
    import weakref

    ctx = Context(audit_data(_snap()), AuditSettings(bootstrap=50))
    tables, ref = ctx.data.judge_tables, weakref.ref(ctx.judged)
    del ctx
    gc.collect()
    assert ref() is None and judged(tables) is not None


def test_per_clinician_kappas_at_once_equal_cohen_kappa_one_clinician_at_a_time():
    """The vectorised leave-one-out kappas equal
    :func:`clinieval.stats.cohen_kappa` run clinician by clinician, including
    clinicians with one label only (NaN, dropped) and below the minimum."""
    import numpy as np
    import pandas as pd

    from clinieval.audit.sections import judges_vs_clinicians as jvc
    from clinieval.stats import cohen_kappa

    rng = np.random.default_rng(7)
    n = 3000
    rater = rng.integers(0, 150, n)
    frame = pd.DataFrame({
        "answer": np.arange(n), "criterion": 0, "rater": rater,
        "fail": (rng.random(n) < np.where(rater % 10 == 0, 0.0, 0.2)).astype(float),
        "judge_fail": (rng.random(n) < 0.25).astype(float),
        "fail_other": rng.choice([0.0, 1 / 3, 0.5, 2 / 3, 1.0], n)}).set_index(
        ["answer", "criterion", "rater"])
    fast = jvc._loo_kappa_binary(frame.reset_index())  # the rater is a column
    expected = []
    for r, g in frame.groupby(level="rater"):
        if len(g) < jvc.MIN_ITEMS:
            continue
        expected.append({"rater": r, "judge_kappa": cohen_kappa(g["judge_fail"], g["fail"]),
                         "clinicians_kappa": cohen_kappa((g["fail_other"] >= 0.5).astype(int),
                                                         g["fail"]), "n": len(g)})
    slow = pd.DataFrame(expected).dropna().reset_index(drop=True)
    assert len(slow) > 50 and (rater % 10 == 0).any()
    pd.testing.assert_frame_equal(fast, slow, check_exact=False, atol=1e-12, rtol=0)


@settings(max_examples=100, deadline=None)
@given(st.lists(st.tuples(
    st.sampled_from([None, "", "HTTP 429 too many requests", "timed out after 30 s",
                     "connection refused", "bad json"]),
    st.sampled_from([None, "ok", "unparsed", "error"])), max_size=40))
def test_failure_causes_are_read_per_task_as_the_rule_says(tasks):
    errors = pd.Series([e for e, _ in tasks], dtype="str")
    statuses = pd.Series([p for _, p in tasks], dtype="str")
    plain = [cause_of(e) if isinstance(e, str) else UNPARSED if p == "unparsed" else None
             for e, p in zip(errors.tolist(), statuses.tolist(), strict=True)]
    assert _causes(errors, statuses).tolist() == plain


def test_answer_codes_from_positions_part_the_rows_as_their_id_texts_do():
    ids = pd.Series(["a2", "zz", None, "a1", "zz", "", "a2", "yy"], dtype="str")
    at = np.array([1, -1, -1, 0, -1, -1, 1, -1])  # positions in an answers table a1, a2
    codes, n = answer_id_codes(ids, at)
    texts, _, _ = text_codes(ids)
    assert codes.max() < n
    # the same partition: two rows share a code exactly when their texts match
    np.testing.assert_array_equal(codes[:, None] == codes[None, :],
                                  texts[:, None] == texts[None, :])
    assert codes[[0, 3, 6]].tolist() == [1, 0, 1]


def test_the_audit_judge_tables_leave_out_the_columns_no_section_reads():
    snap = _snap()
    assert pc.sum(pc.is_valid(snap["judgments"]["raw_output"])).as_py() > 0  # unparsed outputs
    tables = audit_data(snap).judge_tables
    assert not set(UNREAD) & set(tables["judgments"].column_names)
    assert tables["judgments"].num_rows == snap["judgments"].num_rows
    assert not set(UNREAD) & set(judged(tables).rows.columns)


def test_lean_judgments_keep_every_value_and_sort_as_the_texts():
    # dictionary-coded texts and empty columns read back as the plain table
    # does, and the rows' categories are in text order (sorting by a
    # dictionary would otherwise follow first appearance)
    snap = _snap()
    plain = snap["judgments"].drop_columns([c for c in UNREAD
                                            if c in snap["judgments"].column_names])
    plain = plain.append_column("empty_text", pa.nulls(plain.num_rows, pa.string()))
    plain = plain.append_column("empty_number", pa.nulls(plain.num_rows, pa.int32()))
    coded = lean(plain)
    assert coded.column_names == plain.column_names
    assert pa.types.is_dictionary(coded["judge_model"].type)
    assert coded["empty_text"].type.index_type == pa.int8()
    assert coded["empty_number"].type == pa.float32()
    assert lean(coded).schema == coded.schema  # a lean table is left as it is
    for name in plain.column_names:
        ours = coded[name].to_pandas().astype(object)
        theirs = plain[name].to_pandas().astype(object)
        assert ours.where(ours.notna(), None).tolist() \
            == theirs.where(theirs.notna(), None).tolist(), name
    tables = {name: snap[name] for name in ("judgments", "cases", "answers", "models")}
    rows = Judged(tables).rows
    for name in ("judge_model", "criterion_id", "parse_status", "model_id", "case_id"):
        assert isinstance(rows[name].dtype, pd.CategoricalDtype), name
        assert rows[name].cat.categories.is_monotonic_increasing, name
        assert rows.sort_values(name, kind="stable")[name].astype(object).dropna().tolist() \
            == sorted(rows[name].astype(object).dropna().tolist()), name
