"""The viewer's pages: an index of every case x model x sample x judgment,
filterable, and a page per answer with its case, the prompts sent, the
answer and each judgment (raw output, rationale, score, parse status).

A ``<pre>`` starts with a newline, which HTML drops, so text that starts
with one keeps it. Everything from the database is escaped (answers and judge outputs are
hostile text) and shown isolated: inline names in ``<bdi>``, blocks of text
with ``dir="auto"``, so that no bidirectional control in them can reorder
what is around them.
"""

from __future__ import annotations

import html
from collections.abc import Iterable

from clinieval.viewer.assets import CSP
from clinieval.viewer.data import Answer, Judgment, facets

FILTERS = (("model", "Model"), ("judge", "Judge"), ("criterion", "Criterion"),
           ("parse", "Parse status"), ("score", "Score or verdict"))


def _e(value: object) -> str:
    return html.escape("" if value is None else str(value), quote=True)


def _bdi(value: object) -> str:
    return f"<bdi>{_e(value)}</bdi>"


def _page(title: str, body: str, root: str = "") -> str:
    return ("<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            f"<meta http-equiv=\"Content-Security-Policy\" content=\"{_e(CSP)}\">"
            "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">"
            "<meta name=\"referrer\" content=\"no-referrer\">"
            f"<title>{_e(title)}</title><link rel=\"stylesheet\" href=\"{root}viewer.css\">"
            f"<link rel=\"icon\" href=\"{root}favicon.ico\">"
            f"</head><body>{body}<script src=\"{root}viewer.js\"></script></body></html>\n")


def index(answers: list[Answer]) -> str:
    values = facets(answers)
    selects = []
    for name, label in FILTERS:
        options = ['<option value="">any</option>']
        if name == "parse":
            options.append('<option value="not-ok">not parsed (unparsed or error)</option>')
        options += [f'<option value="{_e(v)}">{_e(v)}</option>' for v in values[name]]
        selects.append(f'<label>{label}<select name="{name}" id="f-{name}">'
                       f'{"".join(options)}</select></label>')
    rows = "".join(_rows(answers))
    n_judgments = sum(len(a.judgments) for a in answers)
    body = (
        "<h1>Run log</h1><p class=\"note\">Every answer (case &times; model &times; sample)"
        " and every judgment of it. For the evaluation team: this log names the models and"
        " is never shown to clinicians. A filtered view is a link: the filters are kept in"
        f" the address.</p><p>{len(answers):,} answers, {n_judgments:,} judgments.</p>"
        f"<form id=\"filters\">{''.join(selects)}<output id=\"shown\"></output></form>"
        "<table id=\"log\"><thead><tr><th>Case</th><th>Model</th><th>Sample</th>"
        "<th>Judge</th><th>Criterion</th><th>Score / verdict</th><th>Parse status</th>"
        f"<th>Open</th></tr></thead><tbody>{rows}</tbody></table>")
    return _page("Run log", body)


def _rows(answers: Iterable[Answer]) -> Iterable[str]:
    for a in answers:
        cells = (f"<td>{_bdi(a.case_id)}</td><td>{_bdi(a.model_id)}</td>"
                 f"<td>{_e(a.sample_index)}</td>")
        link = f"answers/{a.page}"
        if not a.judgments:
            yield (f'<tr id="a-{a.page[:-5]}" data-model="{_e(a.model_id)}">{cells}'
                   f'<td></td><td></td><td></td><td></td><td><a href="{link}">answer</a></td></tr>')
        for j in a.judgments:
            status = j.parse_status or ""
            yield (f'<tr id="j-{j.judgment_id}" class="{_e(status)}" data-model="{_e(a.model_id)}"'
                   f' data-judge="{_e(j.judge)}" data-criterion="{_e(j.criterion_id)}"'
                   f' data-parse="{_e(status)}" data-score="{_e(j.value)}">{cells}'
                   f"<td>{_bdi(j.judge)}</td><td>{_bdi(j.criterion_id or '')}</td>"
                   f"<td>{_e(j.value)}</td><td class=\"status-{_e(status)}\">{_e(status)}</td>"
                   f'<td><a href="{link}#j-{j.judgment_id}">judgment {j.judgment_id}</a></td></tr>')


def answer_page(a: Answer) -> str:
    meta = (f"<dl><dt>Case</dt><dd>{_bdi(a.case_id)}</dd><dt>Specialty</dt>"
            f"<dd>{_bdi(a.specialty or '-')}</dd><dt>Model</dt><dd>{_bdi(a.model_id)}</dd>"
            f"<dt>Sample</dt><dd>{_e(a.sample_index)}</dd><dt>Temperature</dt>"
            f"<dd>{_e(a.temperature if a.temperature is not None else 'model default')}</dd>"
            f"<dt>System-prompt variant</dt><dd>{_bdi(a.variant or '-')}</dd>"
            f"<dt>Answer id</dt><dd>{_bdi(a.answer_id)}</dd></dl>")
    body = (f"<p><a href=\"../index.html\">&larr; run log</a></p><h1>Answer of {_bdi(a.model_id)}"
            f" to case {_bdi(a.case_id)}</h1>{meta}<h2>Case prompt</h2>"
            f"<pre dir=\"auto\">\n{_e(a.case_prompt)}</pre>"
            f"{_messages('Prompt sent to the model', a.prompt)}"
            f"<h2>Answer</h2><pre dir=\"auto\" class=\"answer\">\n{_e(a.text)}</pre>"
            f"<h2>Judgments ({len(a.judgments):,})</h2>"
            f"{''.join(_judgment(j) for j in a.judgments) or '<p>none</p>'}")
    return _page(f"Answer {a.answer_id}", body, root="../")


def _messages(title: str, messages: list[dict] | None) -> str:
    if not messages:
        return (f"<h2>{_e(title)}</h2><p class=\"note\">not in the call log (a run made before"
                " it, or an imported answer)</p>")
    parts = "".join(f"<h3>{_e(m.get('role'))}</h3><pre dir=\"auto\">\n"
                    f"{_e(m.get('content'))}</pre>" for m in messages)
    return f"<h2>{_e(title)}</h2>{parts}"


def _judgment(j: Judgment) -> str:
    status = j.parse_status or ""
    facts = [("Judge", _bdi(j.judge)), ("Criterion", _bdi(j.criterion_id or "-")),
             ("Score / verdict", _e(j.value or "-")),
             ("Parse status", f"<span class=\"status-{_e(status)}\">{_e(status or '-')}</span>"),
             ("Juror / repeat", f"{_e(j.juror)} / {_e(j.repeat)}"), ("Run", _bdi(j.run_id or "-"))]
    if j.answer_b_id:
        facts += [("Compared with", _bdi(j.answer_b_id)), ("Shown first", _e(j.shown_first))]
    dl = "".join(f"<dt>{k}</dt><dd>{v}</dd>" for k, v in facts)
    prompt = ""
    if j.prompt:
        prompt = ("<details><summary>Prompt sent to the judge</summary>"
                  + "".join(f"<h4>{_e(m.get('role'))}</h4><pre dir=\"auto\">\n"
                            f"{_e(m.get('content'))}</pre>" for m in j.prompt) + "</details>")
    return (f"<section class=\"judgment\" id=\"j-{j.judgment_id}\"><h3>Judgment {j.judgment_id}"
            f"</h3><dl>{dl}</dl><h4>Rationale</h4><p dir=\"auto\">{_e(j.reason or '-')}</p>"
            f"<h4>Raw output</h4><pre dir=\"auto\" class=\"raw\">\n{_e(j.raw_output)}</pre>"
            f"{prompt}</section>")
