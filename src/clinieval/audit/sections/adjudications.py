"""Adjudications: what the adjudicators ruled on answers whose clinicians
disagreed across the fail line (issue 33 §3). Per safety-critical criterion
and overall: standing verdicts, how many upheld the alarm (fail) and how
many overruled it (pass), the share siding with the alarm with its Wilson
interval (n: standing verdicts), the rows they superseded, and the
disputes still without a verdict. Whether the report's answer verdicts use them is the response
rule's to say (``adjudicated``), and the summary says which."""

from __future__ import annotations

import numpy as np
import pandas as pd

from clinieval.audit.adjudicated import disputed
from clinieval.audit.context import Context
from clinieval.audit.result import Section
from clinieval.audit.sections._common import SectionSpec, Skipped, run_section
from clinieval.stats import wilson_ci

KEY, TITLE = "adjudications", "Adjudications"
COLUMNS = ("criterion", "n", "upheld_alarm", "overruled", "sided_with_alarm_pct",
           "sided_with_alarm_pct_lo", "sided_with_alarm_pct_hi", "answers_disputed",
           "disputed_without_verdict")


def compute(ctx: Context) -> dict | Skipped:
    verdicts = ctx.adjudicated
    if verdicts.rows == 0:
        return Skipped("no adjudications in this snapshot.")
    if verdicts.answer.size == 0:
        return Skipped(f"none of the {verdicts.rows} adjudications is of an answer and"
                       " criterion in this snapshot.")
    data, level = ctx.data, ctx.settings.level
    safety = np.flatnonzero(data.safety_critical)
    open_keys = disputed(data.rating_answer, data.rating_criterion, data.rating_score,
                         safety, data.n_criteria)
    ruled = verdicts.answer * data.n_criteria + verdicts.criterion
    rows = []
    for label, mine, keys in _groups(data, verdicts, open_keys):
        k, n = int(verdicts.fail[mine].sum()), int(mine.sum())
        lo, hi = wilson_ci(k, n, level)
        rows.append({"criterion": label, "n": n, "upheld_alarm": k, "overruled": n - k,
                     "sided_with_alarm_pct": 100 * k / n if n else np.nan,
                     "sided_with_alarm_pct_lo": 100 * float(lo),
                     "sided_with_alarm_pct_hi": 100 * float(hi),
                     "answers_disputed": int(keys.size),
                     "disputed_without_verdict": int(np.setdiff1d(keys, ruled).size)})
    return {"rows": rows, "superseded": verdicts.rows - verdicts.answer.size,
            "adjudicators": len(set(verdicts.adjudicator.tolist())),
            "answers": int(np.unique(verdicts.answer).size), "level": level,
            "used": ctx.settings.response_rule == "adjudicated",
            "flips": _flips(ctx)}


def _groups(data, verdicts, open_keys):
    """Per criterion with a verdict or a dispute, then all of them."""
    crit_of_key = open_keys % data.n_criteria
    present = sorted(set(verdicts.criterion.tolist()) | set(crit_of_key.tolist()))
    for c in present:
        yield data.criterion_names[c], verdicts.criterion == c, open_keys[crit_of_key == c]
    yield "all", np.ones(verdicts.criterion.size, dtype=bool), open_keys


def _flips(ctx: Context) -> int:
    """Standing verdicts that differ from what the raters' rule (any rater
    <= tau) gives the same answer and criterion."""
    verdicts = ctx.adjudicated
    low = ctx.data.rating_score <= ctx.settings.threshold
    key = ctx.data.rating_answer.astype(np.int64) * ctx.data.n_criteria + ctx.data.rating_criterion
    failed_by_raters = np.isin(verdicts.answer * ctx.data.n_criteria + verdicts.criterion,
                               key[low])
    return int((failed_by_raters != verdicts.fail).sum())


def present(found: dict) -> Section:
    frame = pd.DataFrame(found["rows"], columns=list(COLUMNS))
    overall = found["rows"][-1]
    share = overall["sided_with_alarm_pct"]
    summary = (
        f"{overall['n']} standing adjudications on {found['answers']} answers by"
        f" {found['adjudicators']} adjudicator(s) ({found['superseded']} earlier verdicts"
        f" superseded): {overall['upheld_alarm']} upheld the clinician's alarm (fail),"
        f" {overall['overruled']} overruled it (pass); sided with the alarm"
        f" {share:.1f}% [{overall['sided_with_alarm_pct_lo']:.1f},"
        f" {overall['sided_with_alarm_pct_hi']:.1f}] (Wilson {found['level']:.0%} CI over"
        f" standing verdicts, n={overall['n']}; verdicts by one adjudicator are not"
        f" independent). {overall['disputed_without_verdict']} of"
        f" {overall['answers_disputed']} disputed answer criteria have no verdict yet."
        f" {found['flips']} verdicts differ from the raters' any-rater rule.")
    summary += (" The report's answer verdicts use them (response rule adjudicated)."
                if found["used"] else " The report's answer verdicts do not use them;"
                " --response-rule adjudicated makes a standing verdict the answer's.")
    values = {k: found[k] for k in ("superseded", "adjudicators", "answers", "used", "flips")}
    return Section(KEY, TITLE, summary, {"adjudications": frame}, [], values)


def section(ctx: Context) -> Section:
    return run_section(KEY, TITLE, compute(ctx), present)


SPEC = SectionSpec(
    KEY, TITLE,
    "What adjudicators ruled on answers whose clinicians disagreed across the fail line:"
    " how many upheld the alarm, how many overruled it, and the disputes still open.",
    section, optional=True)
