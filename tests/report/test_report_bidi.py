"""A name holding bidirectional controls cannot reorder the report's text
around it: names reach the report's sentences, headers and tables isolated
(kept as written, inside first-strong isolates closed after them); names
without controls are unchanged."""

from __future__ import annotations

import unicodedata
from pathlib import Path

from clinieval.audit import audit
from clinieval.contract.validate import FSI, PDI, isolated
from clinieval.report.render import render_report
from clinieval.testing import snapshot_from_rows, tiny_tables

RLO = "\u202e"


def _levels_close(text: str) -> bool:
    """Whether every embedding, override and isolate opened in ``text`` is
    closed by its end, counted as UAX #9 does (a PDI closes the embeddings
    opened since its isolate; unmatched closings do nothing)."""
    stack: list[str] = []
    for char in text:
        kind = unicodedata.bidirectional(char)
        if kind in ("LRE", "RLE", "LRO", "RLO"):
            stack.append("embedding")
        elif kind in ("LRI", "RLI", "FSI"):
            stack.append("isolate")
        elif kind == "PDF" and stack and stack[-1] == "embedding":
            stack.pop()
        elif kind == "PDI" and "isolate" in stack:
            while stack.pop() != "isolate":
                pass
    return not stack


def test_isolated_closes_what_a_name_opens_and_leaves_plain_names_alone():
    assert isolated("Model X") == "Model X"
    assert isolated(f"X{RLO}evil") == f"{FSI}X{RLO}evil{PDI}"
    for name in (f"{RLO}a", f"a{PDI}{RLO}b", f"{PDI}{PDI}\u2066{RLO}", "\u202ax\u202c"):
        assert not _levels_close(name) or name == "\u202ax\u202c"
        assert _levels_close(isolated(name) + " (n = 3)"), name


def test_a_model_name_with_an_override_is_isolated_in_the_report(tmp_path):
    rows = tiny_tables()
    rows["models"][0]["display_name"] = f"Model {RLO}X"
    written = render_report(audit(snapshot_from_rows(rows), bootstrap=50), tmp_path)
    for path in (written["markdown"], written["html"]):
        text = Path(path).read_text(encoding="utf-8")
        assert f"{FSI}Model {RLO}X{PDI}" in text, path
        assert _levels_close(text), path
