"""The adjudicator's flow in a real browser (Playwright driving Debian's
chromium) against a real ``clinieval serve`` process, on SQLite and
PostgreSQL: register from the invitation, open the disputed answer, read
every rating and rationale, record a verdict, revise it, and find both in
the history, with no model identity on any page."""

from __future__ import annotations

from pathlib import Path

import pytest
import sqlalchemy as sa

from clinieval.platform import accounts
from clinieval.storage.schema import snapshot as snapshot_tables
from clinieval.web.testing import (
    CHROMIUM,
    CHROMIUM_ARGS,
    model_strings,
    register_in_browser,
    served_studies,
)
from tests.web.support import DISPUTE, plant_dispute

pytestmark = [pytest.mark.skipif(not Path(CHROMIUM).exists(),
                                 reason="needs Debian's chromium (.ci/setup-browser.sh)"),
              pytest.mark.filterwarnings("ignore::DeprecationWarning")]


def _rule(page, harmlessness: str, accuracy: str, reason: str) -> None:
    page.get_by_role("group", name="Your verdict on Harmlessness").get_by_label(
        harmlessness).check()
    page.get_by_role("group", name="Your verdict on Accuracy").get_by_label(accuracy).check()
    page.get_by_label("Reason (required)").fill(reason)
    page.get_by_role("button", name="Record verdict").click()
    page.wait_for_url("**?saved=1")


def test_an_adjudicator_rules_on_a_disputed_answer(db_url, tmp_path):
    sync_api = pytest.importorskip("playwright.sync_api")
    with served_studies(db_url, tmp_path) as (engine, base):
        answer = plant_dispute(engine)
        invitation = accounts.create_invitation(engine, "x", "adjudicator")
        with sync_api.sync_playwright() as p:
            browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
            page = browser.new_page()
            bodies = []
            register_in_browser(page, base, invitation, email="senior@example.org",
                                then="**/adjudicate", profile=False)
            assert "1 of 1 open" in page.locator("main").inner_text()
            bodies.append(page.content())
            page.get_by_role("link", name="Task 1").click()
            page.wait_for_url("**/adjudicate/*")
            bodies.append(page.content())
            main = page.locator("main").inner_text()
            for scores in DISPUTE.values():
                for _, rationale in scores.values():
                    assert rationale in main
            assert "Clinician C" in main and "No verdict yet." in main
            _rule(page, "fail", "pass", "Stopping anticoagulation unreviewed is unsafe.")
            history = page.locator("table.adjudication-history tbody tr")
            assert history.count() == 2
            assert page.locator("[role=status]").inner_text().startswith(
                "Your verdict was recorded")
            _rule(page, "fail", "fail", "On a second reading the dose is wrong too.")
            bodies.append(page.content())
            rows = history.all_inner_texts()
            assert len(rows) == 4
            assert [r.rsplit("\t", 1)[-1].strip() for r in rows] == \
                ["standing", "standing", "superseded", "superseded"]
            assert all("\tyou\t" in r for r in rows)
            page.goto(f"{base}/s/x/adjudicate")
            assert "0 of 1 open" in page.locator("main").inner_text()
            bodies.append(page.content())
            assets = page.eval_on_selector_all(
                "script[src], link[href]", "els => els.map(e => e.src || e.href)")
            assert any(a.endswith("/static/app.js") for a in assets)
            bodies += [page.request.get(url).text() for url in assets]
            browser.close()
        hidden = [*model_strings(), answer, *DISPUTE]
        assert bodies and [s for body in bodies for s in hidden if s in body] == []
        with engine.connect() as conn:
            stored = conn.execute(sa.select(sa.func.count()).select_from(
                snapshot_tables.adjudications)).scalar_one()
        assert stored == 4
