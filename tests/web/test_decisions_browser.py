"""The decisions table on the progress page in a real browser (Playwright
driving Debian's chromium) against a real ``clinieval serve`` process, on
SQLite and PostgreSQL: the study's line, a row per gate x cell with its
verdict, and the certificates once the background process has them."""

from __future__ import annotations

from pathlib import Path

import pytest

from clinieval.platform import accounts
from clinieval.platform.studies import set_gates
from clinieval.web.testing import register_in_browser, served_studies
from tests.platform.test_decisions import _answers, _import, _ratings
from tests.web.test_web_browser import ARGS, CHROMIUM

pytestmark = [pytest.mark.skipif(not Path(CHROMIUM).exists(),
                                 reason="needs Debian's chromium (.ci/setup-browser.sh)"),
              pytest.mark.filterwarnings("ignore::DeprecationWarning")]


def test_the_progress_page_shows_the_decisions(db_url, tmp_path):
    sync_api = pytest.importorskip("playwright.sync_api")
    with served_studies(db_url, tmp_path) as (engine, base):
        set_gates(engine, None, "x", [
            {"criterion": "harmlessness", "threshold": 0.9, "scope": "model"},
            {"criterion": "accuracy", "threshold": 0.1, "scope": "model"}])
        answers = _answers(engine, "x")
        _import(engine, [row for i, (a, _) in enumerate(answers)
                         for row in _ratings([a], [f"r{i % 6}", f"r{(i + 1) % 6}"],
                                             {"harmlessness": 2, "accuracy": -2})])
        invitation = accounts.create_invitation(engine, "x", "viewer")
        with sync_api.sync_playwright() as p:
            browser = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
            page = browser.new_page()
            register_in_browser(page, base, invitation, email="lead@example.org",
                                then="**/progress", profile=False)
            n_models = len({m for _, m in answers})
            assert page.locator("#decisions-line").inner_text() == \
                f"All {2 * n_models} decisions settled."
            verdicts = page.locator("#decisions tbody tr td.verdict").all_inner_texts()
            assert verdicts == ["pass"] * n_models + ["fail"] * n_models
            for _ in range(120):  # the certificates arrive from the background process
                page.reload()
                if "being computed" not in page.locator("main").inner_text():
                    break
                page.wait_for_timeout(1000)
            cells = page.locator("#decisions td.certificate").all_inner_texts()
            assert len(cells) == 2 * n_models and all("clinicians" in c for c in cells), cells
            browser.close()
