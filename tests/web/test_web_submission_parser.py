"""The submission parser under fuzzing: any body that is no submission is
refused with the field named (never a server error), and only complete,
in-range scores are accepted."""

from __future__ import annotations

import json

import pytest
from fastapi.testclient import TestClient
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from clinieval.contract import vocabulary
from clinieval.storage.schema import platform as platform_tables
from clinieval.storage.schema import snapshot as snapshot_tables
from clinieval.web.testing import member_client as member
from tests.web.support import answer_form, count, csrf, take

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")


_JSON = st.recursive(st.none() | st.booleans() | st.integers() | st.text(max_size=8),
                     lambda inner: st.lists(inner, max_size=3)
                     | st.dictionaries(st.text(max_size=8), inner, max_size=3), max_leaves=8)

_BODIES = st.one_of(
    st.binary(max_size=200),  # broken syntax and encodings
    _JSON.map(lambda v: json.dumps(v).encode()),  # JSON, mostly not a submission
    st.integers(1, 200_000).map(lambda n: b"[" * n + b"]" * n),  # nesting past the parser
    # One field nested about as deep as the parser goes: printing it in an error
    # message once ran out of stack in the worker thread (500).
    st.tuples(st.sampled_from(["s1.accuracy", "time_spent_s", "next", "choice", "fields"]),
              st.one_of(st.sampled_from([900, 950, 960, 1000, 3000]), st.integers(1, 5000)))
    .map(lambda f: b'{"%s": %s1%s}' % (f[0].encode(), b"[" * f[1], b"]" * f[1])),
)


@settings(max_examples=60, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(body=_BODIES)
def test_a_json_body_that_is_no_submission_is_refused_by_field(app, engine, body):
    """Whatever the bytes, the submission and draft routes answer 422 naming
    the field, never a server error, and store nothing."""
    c = _fuzz_client(app, engine)
    url = c.task
    headers = {"content-type": "application/json", "accept": "application/json",
               "X-CSRF-Token": c.csrf}
    for target in (url, url + "/draft"):
        r = c.post(target, content=body, headers=headers)
        assert r.status_code == 422, (target, r.status_code, r.text[:200])
        error = r.json()["error"]  # the field may be a key of the body, even ""
        assert isinstance(error["field"], str) and error["message"]
    assert count(engine, snapshot_tables.ratings) == 0
    assert count(engine, platform_tables.drafts) == 0


def test_a_field_holding_a_list_or_object_is_refused_by_name(app, engine):
    c = member(app, engine, "x", "clinician")
    url = take(c)
    form = answer_form(c, url)
    for value in ([2], {"score": 2}, [[["x"]]]):
        r = c.post(url, json={**form, "c1.accuracy": value},
                   headers={"X-CSRF-Token": csrf(c)})
        assert r.status_code == 422 and r.json()["error"]["field"] == "c1.accuracy"
    assert count(engine, snapshot_tables.ratings) == 0


def test_an_error_names_a_value_nested_too_deep_to_print():
    from clinieval.errors import InputError

    value: list = []
    for _ in range(100_000):  # deeper than repr() can go
        value = [value]
    err = InputError("submission", "expected a single value", field="s1.accuracy", got=value)
    assert "s1.accuracy" in str(err) and "nested too deep" in str(err)


_FUZZ_CLIENT: dict = {}


def _fuzz_client(app, engine) -> TestClient:
    """One clinician with one task per app (hypothesis runs the test body many
    times with the same fixtures); the app itself is kept to tell them apart."""
    if _FUZZ_CLIENT.get("app") is not app:
        c = member(app, engine, "x", "clinician")
        c.task, c.csrf = take(c), csrf(c)
        _FUZZ_CLIENT.update(app=app, client=c)
    return _FUZZ_CLIENT["client"]


def _criteria_views():
    from clinieval.platform.read_models import Anchor, CriterionView
    from clinieval.rubric import load_rubric

    return tuple(CriterionView(criterion_id=c.criterion_id, name=c.name, definition="",
                               safety_critical=c.safety_critical,
                               anchors=tuple(Anchor(score=s, text="") for s in vocabulary.SCORES))
                 for c in load_rubric().criteria)


_IDS = [c.criterion_id for c in _criteria_views()]

_VALID = st.fixed_dictionaries({k: st.sampled_from(["-2", "-1", "0", "1", "2", -2, 2])
                                for k in _IDS})

_MESSY = st.dictionaries(st.sampled_from(_IDS),
                         st.one_of(st.integers(-4, 4).map(str), st.text(max_size=3),
                                   st.integers(-2, 2), st.booleans(), st.none()), min_size=7)


@settings(max_examples=300, deadline=None)
@given(scores=st.one_of(_VALID, _MESSY),
       extra=st.dictionaries(st.text(max_size=12), st.text(max_size=5), max_size=2),
       comment=st.sampled_from(["", "why"]))
def test_parse_accepts_only_complete_in_range_submissions(scores, extra, comment):
    from types import SimpleNamespace

    from clinieval.errors import InputError
    from clinieval.platform.submissions import parse

    criteria = _criteria_views()
    form = {f"s1.{k}": v for k, v in scores.items()}
    form.update({f"c1.{c.criterion_id}": comment for c in criteria})
    form.update(extra)
    form["idempotency_key"] = "k" * 16
    lease = SimpleNamespace(kind="rating")
    try:
        sub = parse(form, lease, criteria)
    except InputError as err:
        assert err.field in form or err.field.startswith(("s1.", "c1."))
        return
    assert set(sub.scores.values()) <= set(vocabulary.SCORES)
    assert len(sub.scores) == len(criteria) and not set(extra) - {"csrf", "time_spent_s"}
    for c in criteria:
        if c.safety_critical and sub.scores[(1, c.criterion_id)] <= -1:
            assert sub.comments[(1, c.criterion_id)]
