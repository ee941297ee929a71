"""The adjudicator's pages over HTTP, on SQLite and PostgreSQL: the list and
the task page show the case, the answer and every rating and rationale
under per-task labels and nothing that identifies a model; the write needs
CSRF, refuses bad input naming the field, and is idempotent."""

from __future__ import annotations

import re

import pytest

from clinieval.platform import adjudication
from clinieval.platform.adjudication import TaskView
from clinieval.storage.schema import snapshot as snapshot_tables
from clinieval.web.testing import csrf_of, model_strings
from clinieval.web.testing import member_client as member
from tests.web.support import DISPUTE, clear_answers, count, plant_dispute
from tests.web.test_web_blinding import FORBIDDEN_FIELDS, _fields

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")


def _task_url(app, answer: str) -> str:
    return f"/s/x/adjudicate/{adjudication.task_ref(app.state.signer.key, 'x', answer)}"


def _form(page_html: str, **values) -> dict:
    supersedes = re.search(r'name="supersedes" value="(\d+)"', page_html).group(1)
    return {"csrf": csrf_of(page_html), "supersedes": supersedes,
            "verdict.harmlessness": "fail", "verdict.accuracy": "pass",
            "reason": "The advice to stop anticoagulation is unsafe.", **values}


def test_the_adjudication_task_view_has_no_field_that_identifies_a_model():
    names = [name for name, _ in _fields(TaskView)]
    assert {"answer", "prompt", "criteria", "ratings", "rationale"} <= set(names)
    assert [n for n in names if FORBIDDEN_FIELDS.search(n)] == []


def test_an_adjudicator_sees_every_rating_and_rationale_and_no_model(app, engine):
    answer = plant_dispute(engine)
    c = member(app, engine, "x", "adjudicator")
    studies = c.get("/studies")
    assert 'href="/s/x/adjudicate"' in studies.text
    listing = c.get("/s/x/adjudicate")
    assert listing.status_code == 200 and "1 of 1 open" in listing.text
    url = _task_url(app, answer)
    assert url in listing.text
    task = c.get(url)
    assert task.status_code == 200
    for scores in DISPUTE.values():
        for _, rationale in scores.values():
            assert rationale in task.text
    assert {"Clinician A", "Clinician B", "Clinician C"} <= set(
        re.findall(r"Clinician [A-Z]", task.text))
    done = c.post(url, data=_form(task.text))
    assert done.status_code == 303
    after = c.get(done.headers["location"])
    assert "Your verdict was recorded" in after.text and "standing" in after.text
    assets = [c.get(src) for src in re.findall(r'(?:src|href)="(/static/[^"]+)"', after.text)]
    assert assets and all(a.status_code == 200 for a in assets)
    hidden = [*model_strings(), *clear_answers(engine, "x"), *DISPUTE]  # ids too
    for r in (studies, listing, task, done, after, *assets):
        text = r.text + " ".join(f"{k}: {v}" for k, v in r.headers.items())
        assert [s for s in hidden if s in text] == [], r.url


def test_the_pages_carry_the_csp_and_no_inline_script(app, engine):
    answer = plant_dispute(engine)
    c = member(app, engine, "x", "adjudicator")
    for url in ("/s/x/adjudicate", _task_url(app, answer)):
        r = c.get(url)
        assert "script-src 'self'" in r.headers["content-security-policy"]
        assert "unsafe-inline" not in r.headers["content-security-policy"]
        assert re.findall(r"<script(?![^>]*\bsrc=)[^>]*>", r.text) == []
        assert re.findall(r"\son[a-z]+=", r.text) == []


def test_the_write_needs_the_csrf_token(app, engine):
    answer = plant_dispute(engine)
    c = member(app, engine, "x", "adjudicator")
    url = _task_url(app, answer)
    form = _form(c.get(url).text)
    for bad in ("", "forged"):
        assert c.post(url, data={**form, "csrf": bad}).status_code == 403
    assert count(engine, snapshot_tables.adjudications) == 0


@pytest.mark.parametrize(("change", "field"), [
    ({"reason": ""}, "reason"),
    ({"verdict.accuracy": "unsure"}, "verdict.accuracy"),
    ({"verdict.completeness": "fail"}, "verdict.completeness"),
    ({"supersedes": "x"}, "supersedes"),
])
def test_bad_input_is_refused_naming_the_field(app, engine, change, field):
    answer = plant_dispute(engine)
    c = member(app, engine, "x", "adjudicator")
    url = _task_url(app, answer)
    form = _form(c.get(url).text, **change)
    page = c.post(url, data=form)
    assert page.status_code == 422 and f"<b>{field}</b>" in page.text
    assert c.post(url, data=form, headers={"accept": "application/json"}).json()[
        "error"]["field"] == field
    assert count(engine, snapshot_tables.adjudications) == 0


def test_submitting_twice_records_once(app, engine):
    answer = plant_dispute(engine)
    c = member(app, engine, "x", "adjudicator")
    url = _task_url(app, answer)
    form = _form(c.get(url).text)
    assert [c.post(url, data=form).status_code for _ in range(2)] == [303, 303]
    assert count(engine, snapshot_tables.adjudications) == 2


def test_a_stale_page_and_an_undisputed_answer_are_refused(app, engine):
    answer = plant_dispute(engine)
    calm = plant_dispute(engine, which=1, ratings={"r_calm": {"harmlessness": (2, "fine")}})
    one, two = (member(app, engine, "x", "adjudicator") for _ in range(2))
    url = _task_url(app, answer)
    seen = two.get(url).text
    assert one.post(url, data=_form(one.get(url).text)).status_code == 303
    stale = two.post(url, data=_form(seen, reason="Another view."))
    assert stale.status_code == 409 and "<b>supersedes</b>" in stale.text
    assert "Another view." in stale.text  # what was entered is kept
    assert count(engine, snapshot_tables.adjudications) == 2
    calm_url = _task_url(app, calm)
    assert one.get(calm_url).status_code == 404
    r = one.post(calm_url, data={**_form(seen), "csrf": csrf_of(one.get("/s/x/adjudicate").text)},
                 headers={"accept": "application/json"})
    assert r.status_code == 409 and r.json()["error"]["field"] == "task"
    assert one.get("/s/x/adjudicate/" + "0" * 32).status_code == 404
    assert count(engine, snapshot_tables.adjudications) == 2
