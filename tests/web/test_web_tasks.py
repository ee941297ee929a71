"""The clinician's way through tasks over HTTP, on SQLite and PostgreSQL: the
task list, taking the next task with a submission, stopping, and the task
page rendered from its cached blank rubric."""

from __future__ import annotations

import re

import pytest

from clinieval.storage.schema import snapshot as snapshot_tables
from clinieval.web.testing import member_client as member
from clinieval.web.testing import model_strings
from tests.web.support import answer_form, count, take

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")


def test_the_task_list_says_which_task_is_open(app, engine):
    """Every button of the task list takes up an open task first ("Rate one
    answer" gave a comparison left open): the page says so, with a link."""
    c = member(app, engine, "x", "clinician")
    assert "open:" not in c.get("/s/x").text
    url = take(c, "pair")
    page = c.get("/s/x").text
    assert "You have a comparison open" in page and f'href="{url}"' in page
    assert take(c, "rating") == url  # what the message warns of
    assert c.post(url, data=answer_form(c, url)).status_code == 303
    assert "open:" not in c.get("/s/x").text


def test_a_submission_can_take_the_next_task_in_the_same_request(app, engine):
    c = member(app, engine, "x", "clinician")
    url = take(c)
    assert 'name="next" value="auto"' in c.get(url).text  # the form's default
    r = c.post(url, data=answer_form(c, url, next="auto"))
    assert r.status_code == 303 and "/t/" in r.headers["location"]
    following = r.headers["location"]
    assert following.endswith("?saved=1") and not following.startswith(url)
    assert "Saved. Thank you." in c.get(following).text
    # A script gets the next task's address with its result; only the token is in it.
    form = answer_form(c, following, next="rating")
    result = c.post(following, data=form, headers={"accept": "application/json"}).json()
    assert result["saved"] and result["next"].startswith("/s/x/t/")
    assert [s for s in model_strings() if s in result["next"]] == []
    # The same key again stores nothing and gives the task already leased.
    again = c.post(following, data=form, headers={"accept": "application/json"}).json()
    assert again["repeated"] and again["next"] == result["next"]
    assert count(engine, snapshot_tables.ratings) == 9 + len(result["rating_ids"])
    bad = c.post(result["next"], data=answer_form(c, result["next"], next="any"),
                 headers={"accept": "application/json"})
    assert bad.status_code == 422 and bad.json()["error"]["field"] == "next"


def test_submit_and_stop_and_an_empty_pool_go_back_to_the_task_list(app, engine):
    c = member(app, engine, "x", "clinician")
    url = take(c)
    assert c.post(url, data=answer_form(c, url, next="")).headers["location"] == "/s/x?saved=1"
    while (r := c.post(url, data=answer_form(c, url, next="rating"))).headers[
            "location"] != "/s/x?saved=1&empty=1":
        url = r.headers["location"].removesuffix("?saved=1")
    assert "No task is waiting" in c.get(r.headers["location"]).text


def test_a_blank_rubric_rendered_once_gives_the_page_rendered_in_full(
        app, engine, monkeypatch):
    from clinieval.web import clinician

    c = member(app, engine, "x", "clinician")
    key = re.compile(r'name="idempotency_key" value="[^"]+"')
    for kind in ("rating", "pair"):
        url = take(c, kind)
        once = c.get(url).text
        with monkeypatch.context() as m:
            m.setattr(clinician, "blank_rubric", lambda view: None)
            full = c.get(url).text
        assert 'name="s1.accuracy"' in once and key.sub("", once) == key.sub("", full)
        assert c.post(url, data=answer_form(c, url)).status_code == 303
