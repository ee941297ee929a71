"""Gates as decisions: per gate x cell, pass, fail or open by an anytime-valid
confidence sequence over answers, widened for the panel of clinicians, with
the ratings it took, the ratings still expected and a robustness
certificate (issue 33). The computation is the platform's own
(:mod:`clinieval.platform.cell_decisions`), so the report and the live view
agree; where the study's judge is licensed for a cell's strata, its sequence
is prediction-powered (the ``method`` column says which each cell used)."""

from __future__ import annotations

import pandas as pd

from clinieval.audit.context import Context
from clinieval.audit.result import Section
from clinieval.audit.sections._common import SectionSpec, Skipped, run_section
from clinieval.audit.sections._decision_judges import decision_judge
from clinieval.platform.cell_decisions import CLINICIANS_ONLY, decision_rows, study_line
from clinieval.platform.config import default_gates, parse_gates, read_gates_file

KEY, TITLE = "decisions", "Decisions"
COLUMNS = ("criterion", "threshold", "scope", "alpha", "model", "specialty", "estimate",
           "lower", "upper", "rater_margin", "verdict", "answers", "ratings", "raters",
           "expected_more_ratings", "raters_to_unsettle", "ratings_to_unsettle", "certificate",
           "method", "judge_lambda")


def _gates(ctx: Context):
    if ctx.settings.gates == "default":
        return default_gates(c for c, s in zip(ctx.data.criteria, ctx.data.safety_critical,
                                               strict=True) if s)
    return parse_gates(read_gates_file(ctx.settings.gates), ctx.data.criteria, "--gates")


def compute(ctx: Context) -> list[dict] | Skipped:
    if ctx.settings.gates is None:
        return Skipped("no gates given: --gates FILE names them, --gates default takes each"
                       " safety-critical criterion at 10% per model x specialty, alpha 0.05"
                       " (a new study's).")
    gates = _gates(ctx)
    if not gates:
        return Skipped("no gates: the rubric flags no safety-critical criterion and no --gates"
                       " file was given.")
    rows = decision_rows(ctx, gates, certify=ctx.settings.decision_certificates,
                         judge=decision_judge(ctx))
    if not rows:
        return Skipped(f"no rated answer in any cell of the {len(gates)} gates.")
    return rows


def present(rows: list[dict], certified: bool) -> Section:
    frame = pd.DataFrame(rows, columns=list(COLUMNS))
    summary = (f"{study_line(rows)}. A verdict is read off a betting confidence sequence at"
               " alpha/2 over the cell's answers (in the order of their first rating),"
               " widened by the rater margin at alpha/2, so it stays valid however often the"
               " study was looked at and covers clinicians beyond the panel.")
    powered = int(frame["judge_lambda"].notna().sum())
    if powered:
        summary += (f" In {powered} of {len(frame)} cells the study's judge is licensed for"
                    " every stratum and judged every answer, so the sequence is"
                    " prediction-powered: the judge's predictions of all the cell's answers,"
                    " corrected by the clinicians' values (method column).")
    summary += (" The certificate is the fewest clinicians (ratings) whose removal unsettles"
                " a settled verdict of the clinicians' sequence." if certified else
                " Robustness certificates were not searched (--decision-certificates asks"
                " for them).")
    counts = frame["verdict"].value_counts().to_dict()
    methods = frame["method"].fillna(CLINICIANS_ONLY).value_counts().to_dict()
    return Section(KEY, TITLE, summary, {"decisions": frame}, [],
                   {"verdicts": {k: int(v) for k, v in counts.items()},
                    "methods": {k: int(v) for k, v in sorted(methods.items())}})


def section(ctx: Context) -> Section:
    return run_section(KEY, TITLE, compute(ctx),
                       lambda rows: present(rows, ctx.settings.decision_certificates))


SPEC = SectionSpec(
    KEY, TITLE,
    "Each gate's verdict per cell (pass, fail or open) from an anytime-valid confidence"
    " sequence, with the ratings still expected and a robustness certificate.",
    section, optional=True)
