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
from pathlib import Path

import pytest
import sqlalchemy as sa

from clinieval import tables as T
from clinieval.audit.data import from_bundle
from clinieval.storage import db
from clinieval.storage import sqltables as S
from clinieval.web import auth
from clinieval.web.testing import (
    free_port,
    make_studies,
    model_strings,
    register_in_browser,
    start_server,
)

CHROMIUM = "/usr/bin/chromium"
ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking",
        "--disable-component-update", "--disable-sync", "--no-first-run"]
DOCS = Path(__file__).resolve().parents[1] / "docs"
CRITERIA = 9

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
    engine = db.make_engine(db_url)
    db.upgrade(engine)
    make_studies(engine, overlap=3, pairwise_share=0.0)
    port = free_port()
    server = start_server(db_url, port, tmp_path / "server.log")
    base = f"http://127.0.0.1:{port}"
    scanner = Scanner(model_strings())
    try:
        with sync_api.sync_playwright() as p:
            browser = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
            context = browser.new_context(viewport={"width": 1280, "height": 900})
            context.on("response", scanner)
            page = context.new_page()
            _register(page, base, auth.create_invitation(engine, "x", "clinician"))
            page = _three_rating_tasks(context, page, base, tmp_path)
            _pairwise_task(page, tmp_path)
            _edit_one_rating(page)
            _edit_the_vote(page)
            page.get_by_role("button", name="Sign out").click()
            page.wait_for_url("**/login")
            cookies = json.dumps(context.cookies())
            browser.close()
    finally:
        server.kill()
        server.wait()
    print(f"\nblinding scan ({engine.dialect.name}): {scanner.responses} responses,"
          f" {scanner.bytes:,} bytes, {len(scanner.hits)} hits")
    assert scanner.hits == [] and not [s for s in model_strings() if s in cookies]
    assert scanner.responses > 20
    _export_and_audit(engine, db_url, tmp_path)
    engine.dispose()


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
            S.ratings.c.revision > 0)).scalar_one()
        votes = conn.execute(sa.select(S.preferences.c.revision, S.preferences.c.choice)
                             .order_by(S.preferences.c.revision)).all()
    # 3 rating tasks + both answers of one pair, 9 criteria each, plus the edit
    assert revisions == 1
    assert counts["ratings"] == 5 * CRITERIA + 1
    # The vote and its edit are both kept; the audit counts the edit only.
    assert [v.revision for v in votes] == [0, 1] and votes[1].choice == "tie"
    assert counts["preferences"] == 2 and counts["raters"] == 1
    used = from_bundle(export)
    assert used.pref_outcome.tolist() == [T.CHOICES.index("tie")]
    assert len(used.rating_score) == 5 * CRITERIA  # the latest revision of each score
