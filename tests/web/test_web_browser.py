"""The clinician flow in a real browser (Playwright driving Debian's
chromium) against a real ``clinieval serve`` process, on SQLite and
PostgreSQL: invitation, registration, profile, three rating tasks with the
keyboard only, each submission opening the next task (one of them
interrupted: its draft survives closing the page), a pairwise task, an
edited rating, an edited vote, sign-out; then ``clinieval study export`` and
``clinieval audit`` on the export (which keep every revision and count only
the latest). Every response the browser receives is scanned for the study's
model ids, names, versions and providers."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from contextlib import contextmanager
from pathlib import Path

import pytest
import sqlalchemy as sa

from clinieval.audit.data import from_bundle
from clinieval.contract import vocabulary
from clinieval.platform import (
    accounts,
)
from clinieval.storage.schema import platform as platform_tables
from clinieval.storage.schema import snapshot as snapshot_tables
from clinieval.web.testing import (
    CHROMIUM,
    model_strings,
    register_in_browser,
    served_studies,
)
from clinieval.web.testing import CHROMIUM_ARGS as ARGS

DOCS = Path(__file__).resolve().parents[2] / "docs"
CRITERIA = 9
STUDIES = {"overlap": 3, "pairwise_share": 0.0}

if not Path(CHROMIUM).exists() and os.environ.get("CLINIEVAL_REQUIRE_BROWSER") == "1":
    raise RuntimeError(f"CLINIEVAL_REQUIRE_BROWSER=1 but {CHROMIUM} is missing"
                       " (.ci/setup-browser.sh installs it)")
pytestmark = pytest.mark.skipif(not Path(CHROMIUM).exists(),
                                reason="needs Debian's chromium (.ci/setup-browser.sh)")


class Scanner:
    """Collects every response body and header the browser receives and
    looks for model-identifying strings in them."""

    def __init__(self, forbidden: list[str]) -> None:
        self.forbidden, self.bytes, self.responses, self.hits = forbidden, 0, 0, []

    def __call__(self, response) -> None:
        try:
            body, headers = response.body(), response.all_headers()
        except Exception:  # a redirect has no body; a closed page no details
            body, headers = b"", response.headers
        text = body.decode("utf-8", "replace") + response.url + json.dumps(headers)
        self.bytes += len(text.encode())
        self.responses += 1
        self.hits += [(response.url, s) for s in self.forbidden if s in text]


def _keys(page, keys: str) -> None:
    for key in keys:
        page.keyboard.press(key)


def _rate_with_keys(page, scores: str, rationale: str = "Misses a red flag.") -> None:
    """Digits 1..5 on each focused criterion; a rationale where one is asked for."""
    for digit in scores:
        page.keyboard.press(digit)
        if page.evaluate("document.activeElement.tagName") == "TEXTAREA":
            page.keyboard.type(rationale)
            page.keyboard.press("Tab")


def test_clinician_flow_in_a_browser(db_url, tmp_path):
    sync_api = pytest.importorskip("playwright.sync_api")
    scanner = Scanner(model_strings())
    with served_studies(db_url, tmp_path, **STUDIES) as (engine, base), \
            sync_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        context = browser.new_context(viewport={"width": 1280, "height": 900})
        context.on("response", scanner)
        page = context.new_page()
        _register(page, base, accounts.create_invitation(engine, "x", "clinician"))
        page = _three_rating_tasks(context, page, base, tmp_path)
        _pairwise_task(page, tmp_path)
        _edit_one_rating(page)
        _edit_the_vote(page)
        page.get_by_role("button", name="Sign out").click()
        page.wait_for_url("**/login")
        cookies = json.dumps(context.cookies())
        browser.close()
    print(f"\nblinding scan ({engine.dialect.name}): {scanner.responses} responses,"
          f" {scanner.bytes:,} bytes, {len(scanner.hits)} hits")
    assert scanner.hits == [] and not [s for s in model_strings() if s in cookies]
    assert scanner.responses > 20
    _export_and_audit(engine, db_url, tmp_path)
    engine.dispose()


@contextmanager
def _at_a_task(db_url: str, tmp_path: Path):
    """A registered clinician's browser on their first rating task: the engine,
    the server's address, the browser, its context and the task's page."""
    sync_api = pytest.importorskip("playwright.sync_api")
    with served_studies(db_url, tmp_path, **STUDIES) as (engine, base), \
            sync_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        context = browser.new_context()
        page = context.new_page()
        _register(page, base, accounts.create_invitation(engine, "x", "clinician"))
        _next_by_keyboard(page)
        yield engine, base, browser, context, page


def _register(page, base: str, token: str) -> None:
    register_in_browser(page, base, token, email="dr.ada@example.org",
                        organisation="Teaching hospital", then="**/s/x")


def _next_by_keyboard(page) -> None:
    """'Next task' has the focus on the task list: Enter takes it."""
    page.locator("button:focus", has_text="Next task").wait_for()
    page.keyboard.press("Enter")
    page.wait_for_url("**/t/**")
    page.locator("fieldset:focus").wait_for()


def _three_rating_tasks(context, page, base: str, tmp_path: Path):
    """Enter submits a task and opens the next one; the third ends with
    "Submit and stop", back on the task list."""
    _next_by_keyboard(page)
    page.screenshot(path=str(tmp_path / "web-rating.png"))
    _save_screenshot(tmp_path / "web-rating.png")
    _rate_with_keys(page, "2" + "4" * (CRITERIA - 1))  # harmlessness -1 asks for a rationale
    page.keyboard.press("Enter")
    _saved_and_next(page)

    _rate_with_keys(page, "534")
    page.locator("#draft-status", has_text="Draft saved.").wait_for()
    url = page.url.removesuffix("?saved=1")
    page.close()  # the draft must survive the closed tab
    page = context.new_page()
    page.goto(f"{base}/s/x")
    _next_by_keyboard(page)
    assert page.url == url
    checked = page.eval_on_selector_all("input[type=radio]:checked", "els => els.map(e => e.value)")
    assert checked == ["2", "0", "1"]
    # the focus is on the first criterion without a value: carry on from there
    _rate_with_keys(page, "3" * (CRITERIA - 3))
    page.keyboard.press("Enter")
    _saved_and_next(page)

    _rate_with_keys(page, "5" * CRITERIA)
    page.get_by_role("button", name="Submit and stop").click()
    page.wait_for_url("**/s/x?saved=1")
    return page


def _saved_and_next(page) -> None:
    page.wait_for_url("**/t/**?saved=1")
    page.locator("p.ok", has_text="Saved.").wait_for()
    page.locator("fieldset:focus").wait_for()


def _pairwise_task(page, tmp_path: Path) -> None:
    page.get_by_role("button", name="Compare two answers").click()
    page.wait_for_url("**/t/**")
    page.locator("fieldset:focus").wait_for()
    page.screenshot(path=str(tmp_path / "web-pairwise.png"))
    _save_screenshot(tmp_path / "web-pairwise.png")
    # The vote left for last: Tab past it (its fieldset, then its radio group); after the
    # last criterion the focus comes back to it, not to the submit button.
    _keys(page, ["Tab", "Tab"])
    _rate_with_keys(page, "4" * CRITERIA + "3" * CRITERIA)
    page.locator("fieldset.choice:focus").wait_for()
    page.keyboard.press("a")
    page.keyboard.press("Enter")
    _saved_and_next(page)


def _edit_one_rating(page) -> None:
    page.get_by_role("link", name="History").click()
    page.get_by_role("link", name="View or edit").last.click()
    page.locator("fieldset:focus").wait_for()
    _keys(page, ["Tab", "Tab", "Tab"])  # criterion, its checked value, its comment box
    page.keyboard.press("1")  # accuracy -> -2: a safety-critical rationale is asked for
    page.keyboard.type("Wrong dose on reflection.")
    page.keyboard.press("Tab")
    page.keyboard.press("Enter")
    page.wait_for_url("**/history?saved=1")


def _edit_the_vote(page) -> None:
    """Reopen the comparison from the history and change A to a tie by keyboard."""
    page.get_by_role("link", name="History").click()
    page.locator("tr", has_text="Comparison").get_by_role("link", name="View or edit").click()
    page.locator("fieldset.choice:focus").wait_for()
    assert page.eval_on_selector("input[name=choice]:checked", "e => e.value") == "A"
    page.keyboard.press("t")
    page.keyboard.press("Enter")
    page.wait_for_url("**/history?saved=1")
    assert page.locator("tr", has_text="Comparison").locator("td").nth(2).inner_text() == "1"


def _save_screenshot(path: Path) -> None:
    if os.environ.get("CLINIEVAL_UPDATE_SCREENSHOTS") == "1":
        shutil.copy(path, DOCS / path.name)


def _export_and_audit(engine, db_url: str, tmp_path: Path) -> None:
    cli = str(Path(sys.executable).with_name("clinieval"))
    export, report = tmp_path / "export", tmp_path / "report"
    subprocess.run([cli, "study", "export", "x", "--out", str(export), "--database-url", db_url],
                   check=True)
    subprocess.run([cli, "audit", str(export), "--out", str(report), "--bootstrap", "50"],
                   check=True)
    counts = json.loads((report / "results.json").read_text())["snapshot"]["counts"]
    with engine.connect() as conn:
        revisions = conn.execute(sa.select(sa.func.count()).where(
            snapshot_tables.ratings.c.revision > 0)).scalar_one()
        votes = conn.execute(sa.select(snapshot_tables.preferences.c.revision,
                                       snapshot_tables.preferences.c.choice)
                             .order_by(snapshot_tables.preferences.c.revision)).all()
    # 3 rating tasks + both answers of one pair, 9 criteria each, plus the edit
    assert revisions == 1
    assert counts["ratings"] == 5 * CRITERIA + 1
    # The vote and its edit are both kept; the audit counts the edit only.
    assert [v.revision for v in votes] == [0, 1] and votes[1].choice == "tie"
    assert counts["preferences"] == 2 and counts["raters"] == 1
    used = from_bundle(export)
    assert used.pref_outcome.tolist() == [vocabulary.CHOICES.index("tie")]
    assert len(used.rating_score) == 5 * CRITERIA  # the latest revision of each score


def _late_save(context, page, task_url: str, copy: dict) -> None:
    """The save on leaving of the page that kept ``copy`` (the browser's copy of
    its answers, a draft never saved) arriving now: sent here, as page.route
    does not see the browser's own."""
    late = context.request.post(task_url + "/draft", headers={
        "X-CSRF-Token": page.input_value("input[name=csrf]"), "Accept": "application/json"},
        data={"fields": copy["state"]["fields"], "choice": None, "base": 0,
              "page": copy["page"], "seq": copy["seq"]})
    assert late.ok, late.text()


def test_answers_survive_a_lost_connection_a_fast_reload_and_a_sign_out(db_url, tmp_path):
    """The submission went as a plain form post: with the connection gone the
    browser replaced the page by its own error page and every answer was lost
    (no draft is saved within 600 ms of the last change, and the submit
    cancelled the pending one). A reload within those 600 ms showed the older
    draft, and the next change saved over the newer one."""
    with _at_a_task(db_url, tmp_path) as (engine, base, browser, context, page):
        task_url = page.url
        checked = "els => els.map(e => e.name + '=' + e.value)"

        # A reload before any draft reached the server (the draft saves are refused:
        # a save that fails to arrive is sent again on leaving, by a request that
        # page.route does not see, and it may arrive before or after the reload).
        page.route("**/draft", lambda route: route.fulfill(status=503, json={}))
        _rate_with_keys(page, "5432")
        page.locator("#draft-status", has_text="Draft not saved").wait_for()
        first = json.loads(page.evaluate("localStorage.getItem(localStorage.key(0))"))
        page.reload()
        page.locator("#draft-status", has_text="in this browser").wait_for()
        assert len(page.eval_on_selector_all("input[type=radio]:checked", checked)) == 4
        # That save on leaving, arriving late: the answers entered after the reload
        # must still win over it on the next reload (CI once showed its four, not nine).
        _late_save(context, page, task_url, first)
        page.unroute("**/draft")
        page.locator("fieldset:focus").wait_for()

        # The connection goes just before the submission.
        _rate_with_keys(page, "4" * (CRITERIA - 4))
        entered = page.eval_on_selector_all("input[type=radio]:checked", checked)
        assert len(entered) == CRITERIA
        context.set_offline(True)
        page.keyboard.press("Enter")
        page.locator("#form-error", has_text="no connection").wait_for()
        assert page.url == task_url
        assert page.eval_on_selector_all("input[type=radio]:checked", checked) == entered
        with engine.connect() as conn:
            assert conn.execute(sa.select(sa.func.count())
                                .select_from(snapshot_tables.ratings)).scalar() == 0

        # Signed out meanwhile (another tab): said so, the answers stay. (Signed
        # out first: the draft save sent when the connection returns is refused.)
        context.clear_cookies()
        context.set_offline(False)
        assert page.evaluate("document.activeElement.id") == "form-error"
        page.keyboard.press("Enter")  # from the message, as the help says: Enter submits
        page.locator("#form-error", has_text="signed out").wait_for()
        assert page.eval_on_selector_all("input[type=radio]:checked", checked) == entered

        # Signed in again in another tab (a new session, so a new CSRF token): the
        # reloaded page has the answers back, and Enter sends them, stored once.
        other = context.new_page()
        other.goto(f"{base}/login")
        other.get_by_label("E-mail address").fill("dr.ada@example.org")
        other.get_by_label("Password").fill("a long passphrase")
        other.get_by_role("button", name="Sign in").click()
        other.wait_for_url("**/studies")
        other.close()
        # The other tab's pages (sign-in, studies) kept the copy (they prune old ones).
        assert page.evaluate("Object.keys(localStorage).length") == 1
        page.reload()
        page.locator("fieldset:focus").wait_for()
        assert page.eval_on_selector_all("input[type=radio]:checked", checked) == entered
        page.keyboard.press("Enter")
        _saved_and_next(page)
        assert page.url != task_url + "?saved=1"
        with engine.connect() as conn:
            assert conn.execute(sa.select(sa.func.count())
                                .select_from(snapshot_tables.ratings)).scalar() \
                == CRITERIA
        # The browser's copy went with the submission; a sign-out clears any other.
        assert page.evaluate("Object.keys(localStorage).length") == 0
        _rate_with_keys(page, "3")
        page.wait_for_function("Object.keys(localStorage).length == 1")
        page.get_by_role("button", name="Sign out").click()
        page.wait_for_url("**/login")
        assert page.evaluate("Object.keys(localStorage).length") == 0
        browser.close()


def test_a_late_save_two_reloads_back_loses_no_answer(db_url, tmp_path):
    """The browser's copy named only the page just before it: the save on
    leaving of the page two reloads back, arriving after them, showed its 4
    answers on the next reload and the copy with all 9 was thrown away."""
    with _at_a_task(db_url, tmp_path) as (engine, base, browser, context, page):
        task_url = page.url
        checked = "els => els.map(e => e.name + '=' + e.value)"
        refused = []  # the answers of each refused save

        def refuse(route):
            refused.append(len(json.loads(route.request.post_data)["fields"]))
            route.fulfill(status=503, json={})

        page.route("**/draft", refuse)
        first = None
        for keys in ("5432", "444", "44"):  # three pages, each adding answers
            _rate_with_keys(page, keys)
            # This page's save of them refused (not sent again on leaving, unseen by the route).
            wanted = len(page.eval_on_selector_all("input[type=radio]:checked", checked))
            while wanted not in refused:
                page.wait_for_timeout(50)
            first = first or json.loads(page.evaluate("localStorage.getItem(localStorage.key(0))"))
            page.reload()
            page.locator("#draft-status", has_text="in this browser").wait_for()
        entered = page.eval_on_selector_all("input[type=radio]:checked", checked)
        assert len(entered) == CRITERIA
        _late_save(context, page, task_url, first)
        page.unroute("**/draft")
        page.reload()
        page.locator("#draft-status", has_text="Draft saved.").wait_for()  # the copy, saved
        assert page.eval_on_selector_all("input[type=radio]:checked", checked) == entered
        with engine.connect() as conn:
            draft = json.loads(conn.execute(sa.select(platform_tables.drafts.c.data)).scalar_one())
        assert len(draft["fields"]) == CRITERIA
        browser.close()


def test_a_stale_tab_a_lost_answer_and_enter_on_a_button(db_url, tmp_path):
    """A second tab on the same task saved its few answers over the other's
    nine; a correction sent after a submission whose answer was lost went out
    under the same key and was taken for the first (the page said "Saved",
    the database kept the old score); Enter on "Submit and stop" took the
    next task."""
    with _at_a_task(db_url, tmp_path) as (engine, base, browser, context, page):
        # The submission arrives, its answer does not (below). The route is in
        # place from the start: set up right after the other tab closed, it
        # sometimes missed the submission, which then went through.
        losing = []

        def lost(route):
            if not (losing and route.request.method == "POST"):
                return route.continue_()
            route.fetch()  # the server stores it
            route.abort()  # the browser never hears back

        page.route("**/t/*", lost)
        stale = context.new_page()
        stale.goto(page.url)
        stale.locator("fieldset:focus").wait_for()
        _rate_with_keys(page, "4" * CRITERIA)
        page.locator("#draft-status", has_text="Draft saved.").wait_for()
        # The stale tab's one change is refused, and the draft keeps all nine answers.
        _rate_with_keys(stale, "2")
        stale.locator("#draft-status", has_text="another page saved a newer draft").wait_for()
        stale.reload()
        stale.locator("fieldset:focus").wait_for()
        assert len(stale.eval_on_selector_all("input[type=radio]:checked", "e => e")) == CRITERIA
        stale.close()

        # The submission arrives, its answer does not; then a correction is sent.
        losing.append(True)
        page.keyboard.press("Enter")
        page.locator("#form-error", has_text="no connection").wait_for()
        page.unroute("**/t/*")
        page.locator("fieldset[data-keys=score]").first.focus()
        page.keyboard.press("5")  # harmlessness +2 instead of +1
        page.get_by_role("button", name="Submit and stop").focus()
        page.keyboard.press("Enter")  # the button's own action: submit and stop
        page.wait_for_url("**/s/x/history?saved=1")
        with engine.connect() as conn:
            rows = conn.execute(sa.select(snapshot_tables.ratings.c.revision,
                                          snapshot_tables.ratings.c.score).where(
                snapshot_tables.ratings.c.criterion_id == "harmlessness")).all()
        assert sorted(rows) == [(0, 1), (1, 2)]  # the first, then the correction
        browser.close()
