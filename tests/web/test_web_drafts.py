"""Drafts of a task over HTTP, on SQLite and PostgreSQL: restored on reopening,
and never overwritten by a page or a save that missed a newer one."""

from __future__ import annotations

import json
import re

import pytest
import sqlalchemy as sa

from clinieval.storage.schema import platform as platform_tables
from clinieval.web.testing import csrf_of
from clinieval.web.testing import member_client as member
from tests.web.support import answer_form, csrf, take

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")


def test_a_page_that_missed_a_later_draft_save_cannot_overwrite_it(app, engine):
    """Each save says which version of the draft the page started from. A page
    left open in another tab, or reloaded before its last save arrived,
    overwrote the newer draft with its own fewer answers."""
    c = member(app, engine, "x", "clinician")
    url = take(c)
    token = csrf_of(c.get(url).text)
    assert 'data-draft-saves="0"' in c.get(url).text

    def save(fields, base, page="page-of-tab-b", seq=1, continues=None, continues_seq=None):
        return c.post(url + "/draft", json={
            "fields": fields, "choice": None, "base": base, "page": page, "seq": seq,
            "continues": continues, "continues_seq": continues_seq},
            headers={"X-CSRF-Token": token, "accept": "application/json"})

    def stored():
        with engine.connect() as conn:
            return json.loads(conn.execute(sa.select(platform_tables.drafts.c.data))
                              .scalar_one())["fields"]

    answers = {f"s1.{k}": "1" for k in ("accuracy", "harmlessness", "completeness")}
    r = save(answers, 0, seq=3)  # tab B
    assert r.status_code == 200 and r.json()["version"] == 1
    r = save({"s1.fairness": "-2"}, 0, page="page-of-tab-a")  # opened before B's save
    assert r.status_code == 422 and r.json()["error"]["field"] == "base"
    assert "another page saved a newer draft" in r.json()["error"]["reason"]
    # An older save of B's, overtaken on the way, changes nothing.
    assert save({"s1.accuracy": "1"}, 0, seq=2).json()["version"] == 1
    assert stored() == answers
    # B reloaded before its last save arrived: the new page took B's answers (up to
    # B's third change) over from the browser and carries on from them.
    r = save({**answers, "s1.fairness": "0"}, 0, page="page-after-b", seq=1,
             continues="page-of-tab-b", continues_seq=3)
    assert r.status_code == 200 and r.json()["version"] == 2
    r = save(answers, 1, page="page-after-b", seq=2)  # and a save of its own after that
    assert r.json()["version"] == 3
    r = save(answers | {"s1.fairness": "1"}, 2, page="page-of-tab-b", seq=4)  # B, left behind
    assert r.status_code == 422 and r.json()["error"]["field"] == "base"
    # A page carrying on from a tab still open is refused once that tab changed more
    # than the copy it took over held.
    assert save(answers | {"s1.completeness": "-2"}, 3, page="tab-c-open", seq=5
                ).json()["version"] == 4
    r = save(answers | {"s1.reasoning": "2"}, 3, page="tab-d-after-c", seq=1,
             continues="tab-c-open", continues_seq=4)
    assert r.status_code == 422 and r.json()["error"]["field"] == "base"
    assert stored()["s1.completeness"] == "-2"
    for bad in ("short", "x" * 65, "a b c d e f", 12345678):
        r = save({}, 3, page=bad)
        assert r.status_code == 422 and r.json()["error"]["field"] == "page", bad
    page = c.get(url).text
    assert 'data-draft-saves="4"' in page
    assert re.search(r'name="s1.harmlessness" value="1"[^>]*checked', page)
    # The same again from a page that started earlier (a reloaded page restoring what
    # its predecessor sent): accepted, the version unchanged.
    again = answers | {"s1.completeness": "-2"}
    assert save(again, 0, page="page-of-tab-a").json()["version"] == 4
    assert save({**again, "s1.fairness": "2"}, 4, seq=9).json()["version"] == 5
    for bad in (-1, 2**31, 1.5, "1", True):
        for name in ("base", "seq", "continues_seq"):
            r = save({}, **{"base": 5, name: bad})
            assert r.status_code == 422 and r.json()["error"]["field"] == name, (name, bad)
            assert "expected a whole number" in r.json()["error"]["reason"], bad
    # Submitted from another tab: the draft of the page left open says so.
    assert c.post(url, data=answer_form(c, url)).status_code == 303
    r = save({"s1.accuracy": "1"}, 5)
    assert r.status_code == 422 and "submitted meanwhile" in r.json()["error"]["message"]


def test_a_late_save_from_reloads_back_and_a_change_undone_keep_the_newest(app, engine):
    """Two cases where a late save won over newer answers: the save on leaving
    of a page two reloads back (the page restoring the browser's copy named
    only the page just before it), and a page's save of a change it undid,
    overtaken by its save of the undone state (the same as the draft, which
    the server left as it was, change count included)."""
    c = member(app, engine, "x", "clinician")
    url = take(c)
    token = csrf_of(c.get(url).text)

    def save(fields, base, page, seq, continues=None, continues_seq=None, **more):
        return c.post(url + "/draft", json={
            "fields": fields, "choice": None, "base": base, "page": page, "seq": seq,
            "continues": continues, "continues_seq": continues_seq, **more},
            headers={"X-CSRF-Token": token, "accept": "application/json"})

    def stored():
        with engine.connect() as conn:
            return json.loads(conn.execute(sa.select(platform_tables.drafts.c.data)).scalar_one())

    four = {f"s1.{k}": "1" for k in ("accuracy", "harmlessness", "completeness", "reasoning")}
    nine = four | {f"s1.{k}": "0" for k in ("context_awareness", "context_seeking",
                                           "uncertainty", "communication", "fairness")}
    # Page P's saves failed; reloaded to X (took P's copy at P's 4th change), then to Y
    # (took X's at its 3rd); then P's save on leaving arrives.
    assert save(four, 0, "page-p-first", 4).json()["version"] == 1
    chain = {"continues": "page-x-second", "continues_seq": 3}
    r = save(nine, 0, "page-y-third", 2, **chain)
    assert r.status_code == 422 and r.json()["error"]["field"] == "base"  # P unknown to Y
    r = save(nine, 0, "page-y-third", 2, **chain, earlier=[["page-p-first", 3]])
    assert r.status_code == 422  # P's save holds a change the copy Y carries on from did not
    r = save(nine, 0, "page-y-third", 2, **chain, earlier=[["page-p-first", 4]])
    assert r.status_code == 200 and r.json()["version"] == 2
    assert stored()["fields"] == nine and 'data-draft-seq="2"' in c.get(url).text
    for bad in ("x", 0, {}, [["page-p-first"]], [["short", 1]], [["page-p-first", True]],
                [["page-p-first", -1]], [["page-p-first", 1]] * 5, [{"page": "page-p-first"}]):
        r = save(nine, 2, "page-y-third", 3, earlier=bad)
        assert r.status_code == 422 and r.json()["error"]["field"] == "earlier", bad
    # Y changes fairness (4th change: its save is on the way) and changes it back (5th,
    # the same as the draft); the 5th arrives first, then the 4th.
    assert save(nine, 2, "page-y-third", 5).json()["version"] == 2
    assert stored()["seq"] == 5  # noted: the 4th is older
    assert save(nine | {"s1.fairness": "2"}, 2, "page-y-third", 4).json()["version"] == 2
    assert stored()["fields"] == nine


def test_a_draft_is_restored_when_the_task_is_reopened(app, engine):
    c = member(app, engine, "x", "clinician")
    url = take(c)
    r = c.post(url + "/draft", json={"fields": {"s1.accuracy": "-2", "c1.accuracy": "dose"}},
               headers={"X-CSRF-Token": csrf(c)})
    assert r.status_code == 200
    html = c.get(url).text
    assert re.search(r'name="s1.accuracy" value="-2" checked', html)
    assert ">dose</textarea>" in html
    bad = c.post(url + "/draft", json={"fields": {"s1.unknown": "1"}},
                 headers={"X-CSRF-Token": csrf(c)})
    assert bad.status_code == 422 and bad.json()["error"]["field"] == "s1.unknown"
