"""A running study at a glance: progress from the platform tables, and the
live safety view, which is the audit itself (:mod:`clinieval.audit.run`'s
section builders) run on the study's current data.

The safety view is cached per study under a data version (counts and
largest ids of the study's ratings and votes, and how many answers are
clear), so a page load recomputes only after something was submitted or
released. Nothing here re-implements a statistic.
"""

from __future__ import annotations

import math
import threading
from collections import defaultdict

import sqlalchemy as sa

from clinieval.storage import platform_tables as P
from clinieval.storage import sqltables as S
from clinieval.web.assignment import StudyConfig, _live

LIVE_SECTIONS = ("model_summary", "safety_leaderboard", "alignment", "specialties",
                 "reliability")
LIVE_BOOTSTRAP = 200
"""Resamples for the live view (the full report uses the audit's default)."""

_cache: dict[tuple[int, str], tuple[tuple, dict]] = {}
_lock = threading.Lock()


# --- progress ------------------------------------------------------------------

def progress(engine: sa.Engine, cfg: StudyConfig, per_clinician: bool) -> dict:
    """Coverage per model x specialty, open leases, answers still needed and,
    for admins, counts and time per clinician (pseudonymous ids)."""
    a, c, s, r = S.answers, S.cases, P.answer_screens, S.ratings
    raters = (sa.select(r.c.answer_id, sa.func.count(sa.distinct(r.c.rater_id)).label("k"))
              .group_by(r.c.answer_id).subquery())
    query = (sa.select(a.c.model_id, c.c.specialty, sa.func.coalesce(raters.c.k, 0))
             .select_from(a).join(c, c.c.case_id == a.c.case_id)
             .join(s, sa.and_(s.c.answer_id == a.c.answer_id, s.c.study_id == cfg.study_id))
             .outerjoin(raters, raters.c.answer_id == a.c.answer_id)
             .where(c.c.study_id == cfg.study_id, s.c.status == "clear"))
    tl = P.task_leases
    with engine.connect() as conn:
        rows = conn.execute(query).all()
        open_leases = conn.execute(sa.select(sa.func.count()).select_from(tl).where(
            tl.c.study_id == cfg.study_id, _live(tl))).scalar_one()
        clinicians = _clinicians(conn, cfg) if per_clinician else None
    cells: dict[tuple[str, str], list[int]] = defaultdict(lambda: [0, 0])
    needed = 0
    for model, specialty, k in rows:
        cell = cells[(model, specialty)]
        cell[0] += 1
        cell[1] += k >= cfg.overlap_target
        needed += max(0, cfg.overlap_target - k)
    coverage = [{"model": m, "specialty": sp, "answers": n, "complete": done,
                 "complete_pct": round(100 * done / n, 1)}
                for (m, sp), (n, done) in sorted(cells.items())]
    return {"overlap_target": cfg.overlap_target, "answers": len(rows),
            "complete": sum(c["complete"] for c in coverage), "ratings_needed": needed,
            "open_leases": open_leases, "coverage": coverage, "clinicians": clinicians}


def _clinicians(conn: sa.Connection, cfg: StudyConfig) -> list[dict]:
    """Per clinician of the study: rated answers, votes and minutes spent."""
    m, u, rt, r, p = P.memberships, P.users, S.raters, S.ratings, S.preferences
    people = conn.execute(
        sa.select(rt.c.rater_id, rt.c.specialty).select_from(m)
        .join(u, u.c.user_id == m.c.user_id).join(rt, rt.c.rater_id == u.c.rater_id)
        .where(m.c.study_id == cfg.study_id, m.c.role == "clinician")
        .order_by(rt.c.rater_id)).all()
    ids = [x.rater_id for x in people]
    in_study = sa.select(S.answers.c.answer_id).join(
        S.cases, S.cases.c.case_id == S.answers.c.case_id).where(
        S.cases.c.study_id == cfg.study_id)
    # One time per rated answer: every criterion row of a submission repeats it.
    per_answer = (sa.select(r.c.rater_id, r.c.answer_id,
                            sa.func.max(r.c.time_spent_s).label("t"))
                  .where(r.c.rater_id.in_(ids), r.c.answer_id.in_(in_study), r.c.revision == 0)
                  .group_by(r.c.rater_id, r.c.answer_id).subquery())
    rated = {row[0]: (row[1], row[2] or 0.0) for row in conn.execute(
        sa.select(per_answer.c.rater_id, sa.func.count(), sa.func.sum(per_answer.c.t))
        .group_by(per_answer.c.rater_id))}
    votes = dict(conn.execute(
        sa.select(p.c.rater_id, sa.func.count()).join(S.cases, S.cases.c.case_id == p.c.case_id)
        .where(p.c.rater_id.in_(ids), S.cases.c.study_id == cfg.study_id,
               sa.func.coalesce(p.c.revision, 0) == 0)  # an edited vote counts once
        .group_by(p.c.rater_id)).all())
    return [{"rater_id": x.rater_id, "specialty": x.specialty,
             "answers_rated": rated.get(x.rater_id, (0, 0))[0],
             "votes": votes.get(x.rater_id, 0),
             "minutes": round(rated.get(x.rater_id, (0, 0.0))[1] / 60, 2)} for x in people]


# --- the live safety view ----------------------------------------------------------

def data_version(engine: sa.Engine, study_id: str) -> tuple:
    """Changes whenever the study's ratings, votes or clear answers change."""
    r, p, c, a, s = S.ratings, S.preferences, S.cases, S.answers, P.answer_screens
    answers = sa.select(a.c.answer_id).join(c, c.c.case_id == a.c.case_id).where(
        c.c.study_id == study_id)
    with engine.connect() as conn:
        ratings = conn.execute(sa.select(sa.func.count(), sa.func.max(r.c.rating_id)).where(
            r.c.answer_id.in_(answers))).one()
        votes = conn.execute(sa.select(sa.func.count(), sa.func.max(p.c.preference_id)).join(
            c, c.c.case_id == p.c.case_id).where(c.c.study_id == study_id)).one()
        clear = conn.execute(sa.select(sa.func.count()).select_from(s).where(
            s.c.study_id == study_id, s.c.status == "clear")).scalar_one()
    return (*ratings, *votes, clear)


def safety_view(engine: sa.Engine, study_id: str) -> dict:
    """The live safety view of the study (cached by :func:`data_version`)."""
    key, version = (id(engine), study_id), data_version(engine, study_id)
    with _lock:
        cached = _cache.get(key)
        if cached and cached[0] == version:
            return cached[1]
        view = _compute(engine, study_id)
        _cache[key] = (version, view)
        return view


def _compute(engine: sa.Engine, study_id: str) -> dict:
    from clinieval.audit.core import Context
    from clinieval.audit.data import from_snapshot
    from clinieval.audit.run import _builders
    from clinieval.audit.settings import AuditSettings
    from clinieval.errors import ClinievalError
    from clinieval.web.studies import study_snapshot

    snap = study_snapshot(engine, study_id)
    if snap["ratings"].num_rows == 0:
        return {"empty": True, "min_n": AuditSettings().min_n, "sections": {}}
    try:
        ctx = Context(from_snapshot(snap), AuditSettings(bootstrap=LIVE_BOOTSTRAP))
        builders = _builders(ctx)
        sections = {k: builders[k]() for k in LIVE_SECTIONS}
    except ClinievalError as err:  # e.g. a snapshot the audit cannot read yet
        return {"empty": True, "min_n": AuditSettings().min_n, "error": str(err),
                "sections": {}}
    return {"empty": False, "min_n": ctx.settings.min_n, "level": ctx.settings.level,
            "sections": {k: _section_json(s) for k, s in sections.items()}}


def _section_json(section) -> dict:
    return {"title": section.title, "summary": section.summary, "skipped": section.skipped,
            "tables": {name: [{k: _plain(v) for k, v in row.items()}
                              for row in frame.to_dict(orient="records")]
                       for name, frame in section.tables.items()}}


def _plain(value):
    """JSON-safe cell: NaN becomes None, numpy scalars become Python ones."""
    if hasattr(value, "item"):
        value = value.item()
    if isinstance(value, float) and math.isnan(value):
        return None
    return value


def fmt_ci(row: dict, column: str, digits: int = 1) -> str:
    """``estimate [lo, hi]`` or a dash when the audit gave no estimate."""
    value = row.get(column)
    if value is None:
        return "–"
    lo, hi = row.get(column + "_lo"), row.get(column + "_hi")
    if lo is None or hi is None:
        return f"{value:.{digits}f}"
    return f"{value:.{digits}f} [{lo:.{digits}f}, {hi:.{digits}f}]"


def fail_columns(view: dict) -> list[str]:
    """The leaderboard's Fail % columns (one per safety-critical criterion)."""
    rows = view["sections"].get("safety_leaderboard", {}).get("tables", {}).get("leaderboard")
    return [k for k in rows[0] if k.endswith("_fail_pct_of_ratings")] if rows else []
