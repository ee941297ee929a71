"""The task page on a laptop screen (1280 x 800), in a real browser against
``clinieval serve`` on SQLite and PostgreSQL (issue 29, section 6): the save
status and errors sit in a status line that stays on screen wherever the
clinician scrolls, and the rubric is compact: a rating task's criteria take
two columns, and the anchors' texts fold away once learnt (a choice the
browser keeps), so the page is much shorter than it was."""

from __future__ import annotations

from pathlib import Path

import pytest

from clinieval.platform import accounts
from clinieval.web.testing import CHROMIUM, register_in_browser, served_studies
from clinieval.web.testing import CHROMIUM_ARGS as ARGS

pytestmark = pytest.mark.skipif(not Path(CHROMIUM).exists(),
                                reason="needs Debian's chromium (.ci/setup-browser.sh)")
LAPTOP = {"width": 1280, "height": 800}
RATING_MAX_PX = 2_300
"""A rating task's page height with the anchors shown (it was over 3,000 px)."""
FOLDED_MAX_PX = 1_600
"""The same page with the anchors' texts folded away."""


def _height(page) -> int:
    return page.evaluate("document.documentElement.scrollHeight")


def _in_view(page, selector: str) -> bool:
    box = page.locator(selector).bounding_box()
    return box is not None and box["y"] >= 0 and box["y"] + box["height"] <= LAPTOP["height"]


def test_a_task_page_fits_a_laptop_with_its_status_in_view(db_url, tmp_path):
    sync_api = pytest.importorskip("playwright.sync_api")
    with served_studies(db_url, tmp_path, overlap=3, pairwise_share=0.0) as (engine, base), \
            sync_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        page = browser.new_context(viewport=LAPTOP).new_page()
        register_in_browser(page, base, accounts.create_invitation(engine, "x", "clinician"),
                            email="dr.lee@example.org",
                            organisation="Teaching hospital", then="**/s/x")
        page.get_by_role("button", name="Rate one answer").click()
        page.wait_for_url("**/t/**")
        shown = _height(page)
        page.evaluate("window.scrollTo(0, 0)")
        page.keyboard.press("1")  # a score: the draft is saved and the status says so
        page.locator("#draft-status", has_text="Draft saved").wait_for()
        assert _in_view(page, "#draft-status") and _in_view(page, "#submit")
        page.evaluate("window.scrollTo(0, document.body.scrollHeight)")
        assert _in_view(page, "#draft-status")
        page.get_by_role("button", name="Hide the anchors' texts").click()
        folded = _height(page)
        page.reload()  # the choice is kept for the next task pages
        page.locator("form.anchors-folded").wait_for()
        assert _height(page) == folded
        page.get_by_role("button", name="Show the anchors' texts").click()
        assert _height(page) == shown
        browser.close()
    print(f"\ntask page at 1280x800 ({engine.dialect.name}): {shown} px,"
          f" {folded} px with the anchors folded")
    assert shown <= RATING_MAX_PX and folded <= FOLDED_MAX_PX, (shown, folded)
