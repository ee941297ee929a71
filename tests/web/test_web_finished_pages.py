"""Pages that worked but read as unfinished (issue 29, section 6), over HTTP on
SQLite and PostgreSQL: the live safety view answers at once after a change,
the next task follows the kind chosen, History tells tasks apart, the audit
log reads, an answer without text cannot be released, the new study's banner
counts what was held back, and /favicon.ico is served."""

from __future__ import annotations

import re
import time

import pytest
import sqlalchemy as sa

from clinieval.platform import live, screening
from clinieval.storage.schema import platform as platform_tables
from clinieval.storage.schema import snapshot as snapshot_tables
from clinieval.web.testing import csrf_of, member_client

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")


def _csrf(c) -> str:
    return csrf_of(c.get("/studies").text)


def _take(c, kind: str) -> str:
    r = c.post("/s/x/next", data={"csrf": _csrf(c), "kind": kind})
    assert r.status_code == 303, r.text
    return r.headers["location"]


def _submit(c, url: str, then: str | None = None) -> str:
    """Fill every score of the task at ``url`` and submit it the way its
    form does (the hidden ``next`` it carries, or "Submit and stop" with
    ``then=""``); returns where it leads."""
    html = c.get(url).text
    form = {"csrf": csrf_of(html), "time_spent_s": "30",
            "idempotency_key": re.search(r'name="idempotency_key" value="([^"]+)"', html)[1],
            "next": re.search(r'name="next" value="([^"]*)"', html)[1] if then is None else then}
    for field in sorted(set(re.findall(r'name="(s\d\.[a-z_]+)"', html))):
        form[field] = "1"
    if 'name="choice"' in html:
        form["choice"] = "A"
    r = c.post(url.split("?")[0], data=form)
    assert r.status_code == 303, r.text
    return r.headers["location"]


def _kind(engine, url: str) -> str:
    token = re.search(r"/t/([^?]+)", url)[1]
    with engine.connect() as conn:
        return conn.execute(sa.select(platform_tables.task_leases.c.kind).where(
            platform_tables.task_leases.c.token == token)).scalar_one()


def test_the_live_view_answers_at_once_after_a_change(app, engine, monkeypatch):
    """The view is computed off the request path: right after a new rating
    the page answers within 300 ms with the last result (its as-of time) or
    the new one, and once the background computation is done it shows the
    new count. The computation is slowed in this process: a page that
    computed the view itself would take over a second."""
    compute = live.compute_view

    def slow(*args):
        time.sleep(1.0)
        return compute(*args)

    monkeypatch.setattr(live, "compute_view", slow)
    admin, rater = member_client(app, engine, "x", "admin"), member_client(
        app, engine, "x", "clinician")
    _submit(rater, _take(rater, "rating"), then="")
    admin.get("/s/x/safety")
    live.settle()
    first = admin.get("/s/x/safety").text
    assert "As of" in first and "1 rating (" in first
    _submit(rater, _take(rater, "rating"), then="")
    started = time.perf_counter()
    page = admin.get("/s/x/safety")
    elapsed = time.perf_counter() - started
    assert page.status_code == 200 and elapsed < 0.3, elapsed
    assert "an update is being computed" in page.text or "2 ratings (" in page.text
    live.settle()
    assert "2 ratings (" in admin.get("/s/x/safety").text


def test_after_rate_one_answer_the_next_task_is_a_rating(app, engine):
    """The study's pairwise share would make the automatic next task a
    comparison; the clinician chose to rate, so rating tasks follow."""
    c = member_client(app, engine, "x", "clinician")
    url = _take(c, "rating")
    assert _kind(engine, url) == "rating"
    for _ in range(2):
        url = _submit(c, url)
        assert "/t/" in url and _kind(engine, url) == "rating", url
    assert _kind(engine, _submit(c, _take(c, "auto"))) == "pair"  # "Next task" still mixes


def test_history_tells_tasks_apart(app, engine):
    """Each row shows its kind, when, its revision and the opening of the
    answer(s) rated, which differ where the question is the same."""
    c = member_client(app, engine, "x", "clinician")
    _submit(c, _take(c, "rating"), then="")
    _submit(c, _take(c, "pair"), then="")
    page = c.get("/s/x/history").text
    rows = re.findall(r"<tr><td>.*?</tr>", page, re.S)
    assert len(rows) == 2
    excerpts = [re.search(r'<div class="excerpt">(.*?)</div></td>', row, re.S)[1]
                 for row in rows]
    with engine.connect() as conn:
        texts = conn.execute(sa.select(snapshot_tables.answers.c.text)).scalars().all()
    openings = {" ".join(t.split())[:40] for t in texts if t}
    assert all(any(o in e for o in openings) for e in excerpts), excerpts
    kinds = [re.search(r"<tr><td>(\w+)</td>", row)[1] for row in rows]
    assert sorted(kinds) == ["Comparison", "Rating"]
    pair = excerpts[kinds.index("Comparison")]
    assert "<b>A:</b>" in pair and "<b>B:</b>" in pair and "<b>A:</b>" not in excerpts[
        kinds.index("Rating")]


def test_the_audit_log_shows_a_subject_and_readable_detail(app, engine):
    c = member_client(app, engine, "x", "admin")
    c.post("/s/x/admin/invite", data={"csrf": _csrf(c), "role": "clinician", "count": "2"})
    page = c.get("/s/x/admin/log").text
    rows = re.findall(r"<tr><td[^>]*>.*?</tr>", page, re.S)
    cells = [re.findall(r"<td[^>]*>(.*?)</td>", row, re.S) for row in rows]
    assert cells and all(row[3] for row in cells), cells  # every event has a subject
    assert not any("{" in row[4] or "&#39;" in row[4] for row in cells), cells
    assert any("role: clinician" in row[4] for row in cells), cells


def _without_text(engine) -> str:
    answer = screening.flagged_queue(engine, "x")[0]["answer_id"]
    with engine.begin() as conn:
        conn.execute(snapshot_tables.answers.update().where(
            snapshot_tables.answers.c.answer_id == answer).values(text=None))
    return answer


def test_an_answer_without_text_is_not_releasable(app, engine):
    c = member_client(app, engine, "x", "admin")
    answer = _without_text(engine)
    page = c.get("/s/x/admin/flagged").text
    section = re.search(rf"<h2>(<bdi>)?{answer}(</bdi>)? .*?</section>", page, re.S)[0]
    assert "None" not in section and 'value="release"' not in section
    assert "has no text" in section and 'value="withdraw"' in section
    r = c.post("/s/x/admin/flagged", data={"csrf": _csrf(c), "answer_id": answer,
                                           "decision": "release", "confirm": "yes"})
    assert r.status_code == 422 and "empty panel" in r.text, r.text
    with engine.connect() as conn:
        status = conn.execute(sa.select(platform_tables.answer_screens.c.status).where(
            platform_tables.answer_screens.c.answer_id == answer)).scalar_one()
    assert status == "flagged"


def test_the_created_banner_counts_the_answers_held_back(app, engine):
    c = member_client(app, engine, "x", "admin")
    held = len(screening.flagged_answers(engine, "x"))
    page = c.get("/s/x/progress?created=1").text
    banner = re.search(r'<p class="ok" id="created">(.*?)</p>', page, re.S)[1]
    assert held and f"held back {held}," in banner, banner
    assert re.search(r"Study created\. (\d+) of (\d+) answers", banner)


def test_the_favicon_is_served(app):
    from clinieval.web.testing import http_client

    r = http_client(app).get("/favicon.ico")
    assert r.status_code == 200 and r.headers["content-type"] == "image/x-icon"
    assert r.content[:4] == b"\x00\x00\x01\x00"  # an ICO header
