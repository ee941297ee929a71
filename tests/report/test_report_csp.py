"""The audit report as the app serves it (/s/{study}/admin/report), in a real
browser against a real ``clinieval serve`` process: its policy allows no
inline script (nor eval), the page carries none, its sortable tables work
from the app's own script file, and it stays sandboxed (an opaque origin,
away from the app's cookies and same-origin requests)."""

from __future__ import annotations

import re
from html.parser import HTMLParser
from pathlib import Path

import pytest

from clinieval.platform import accounts
from clinieval.report.example import small_result
from clinieval.report.render import SCRIPT, render_report, with_script_file
from clinieval.web.testing import register_in_browser, served_studies
from tests.web.test_web_browser import ARGS, CHROMIUM

pytestmark = pytest.mark.skipif(not Path(CHROMIUM).exists(),
                                reason="needs Debian's chromium (.ci/setup-browser.sh)")


class Scripts(HTMLParser):
    """Inline script bodies, external script sources and event-handler attributes."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.inline, self.external, self.handlers = [], [], []
        self._in_script = False

    def handle_starttag(self, tag, attrs):
        self.handlers += [(tag, name) for name, _ in attrs if name.lower().startswith("on")]
        if tag == "script":
            src = dict(attrs).get("src")
            if src:
                self.external.append(src)
            else:
                self.inline.append("")
            self._in_script = not src

    def handle_endtag(self, tag):
        if tag == "script":
            self._in_script = False

    def handle_data(self, data):
        if self._in_script:
            self.inline[-1] += data


def scan(html: str) -> Scripts:
    parser = Scripts()
    parser.feed(html)
    parser.close()
    return parser


def directives(csp: str) -> dict[str, list[str]]:
    out = {}
    for part in csp.split(";"):
        words = part.split()
        if words:
            out.setdefault(words[0].lower(), words[1:])
    return out


def test_served_report_runs_only_the_apps_script(tmp_path):
    sync_api = pytest.importorskip("playwright.sync_api")
    db_url = f"sqlite:///{tmp_path / 'test.db'}"  # the page is the same on PostgreSQL
    with served_studies(db_url, tmp_path) as (engine, base):
        invitation = accounts.create_invitation(engine, "x", "admin")
        with sync_api.sync_playwright() as p:
            browser = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
            page = browser.new_context().new_page()
            console, errors, scripts = [], [], []
            page.on("console", lambda m: console.append(f"{m.type}: {m.text}"))
            page.on("pageerror", lambda e: errors.append(str(e)))
            page.on("response", lambda r: scripts.append((r.url, r.status))
                    if r.request.resource_type == "script" else None)
            register_in_browser(page, base, invitation, email="owner@example.org",
                                then="**/s/x/progress", profile=False)
            console.clear()
            scripts.clear()
            page.goto(f"{base}/s/x/progress")
            scripts.clear()  # the report's page only from here
            with page.expect_navigation() as navigation:
                page.get_by_role("button", name="Report").click()
            response = navigation.value
            assert response.status == 200
            page.wait_for_load_state("load")
            _check_policy(response.headers["content-security-policy"])
            _check_markup(response.text())
            _check_sorting(page)
            # Sandboxed: an opaque origin, without the app's cookies.
            assert page.evaluate("window.origin") == "null"
            assert page.evaluate("() => { try { return document.cookie; }"
                                 " catch (e) { return e.name; } }") in ("", "SecurityError")
            violations = [m for m in console if "Content Security Policy" in m
                          or "violates" in m or "Refused to" in m]
            assert not violations, violations
            assert not errors, errors
            assert scripts == [(f"{base}/static/report.js", 200)], scripts
            browser.close()


def _check_policy(csp: str) -> None:
    d = directives(csp)
    scripts = d.get("script-src", d.get("default-src"))
    assert scripts is not None, csp
    assert "'unsafe-inline'" not in scripts and "'unsafe-eval'" not in scripts, csp
    assert not any(s.startswith(("'sha", "'nonce-")) or s in ("*", "data:", "blob:", "http:",
                                                               "https:") for s in scripts), csp
    assert d.get("default-src") == ["'none'"], csp
    assert "sandbox" in d and "allow-same-origin" not in d["sandbox"], csp
    for directive in ("connect-src", "form-action"):
        assert d.get(directive, ["'none'"]) == ["'none'"], csp


def _check_markup(html: str) -> None:
    found = scan(html)
    assert not found.inline, f"inline script in the served report: {found.inline[0][:200]!r}"
    assert not found.handlers, found.handlers
    assert found.external == ["/static/report.js"], found.external
    assert not re.search(r"""(?:href|src|action)\s*=\s*["']?\s*javascript:""", html, re.I)


def _check_sorting(page) -> None:
    """The settings table: sorted by its first column (setting names, in
    the order the audit lists them) one way, then the other."""
    table = page.locator("table.sortable").first
    header = table.locator("th[data-sort-type]").first
    assert header.get_attribute("tabindex") == "0", "the report's script did not run"

    def keys() -> list[str]:
        return [t.strip() for t in table.locator("tbody tr td:first-child").all_inner_texts()]

    before = keys()
    assert len(set(before)) == len(before) >= 3
    header.click()
    assert header.get_attribute("aria-sort") == "ascending"
    ascending = keys()
    assert ascending != before and sorted(ascending) == sorted(before)
    header.click()
    assert header.get_attribute("aria-sort") == "descending"
    assert keys() == ascending[::-1]


def test_standalone_report_still_inlines_its_script(tmp_path):
    """``clinieval audit``'s report.html is one file opened offline: it
    carries the script inline, the very script the app serves."""
    html = render_report(small_result(), tmp_path)["html"].read_text(encoding="utf-8")
    found = scan(html)
    assert not found.external and len(found.inline) == 1
    assert found.inline[0] == "\n" + SCRIPT.read_text(encoding="utf-8")
    assert with_script_file(html, "/static/report.js").count("<script") == 1
