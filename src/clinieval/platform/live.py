"""A running study at a glance: progress from the platform tables, and the
live safety view, which is the audit itself (:mod:`clinieval.audit.run`'s
section builders) run on the study's current data.

The safety view is cached per study under a data version (largest rating
and vote ids, raters per answer and clear answers). It is never computed on
the request path: a page load that finds the data changed starts a
background process on it and, unless that finishes within
:data:`LIVE_WAIT_SECONDS`, serves the last result with its as-of time (a
computation takes seconds of CPU; the page answers at once).
Nothing here re-implements a statistic.
"""

from __future__ import annotations

import math
import os
import threading
import time
from collections import Counter
from concurrent.futures import wait
from concurrent.futures.process import BrokenProcessPool
from datetime import UTC, datetime

import sqlalchemy as sa

from clinieval.audit.settings import AuditSettings
from clinieval.platform.assignment import _live
from clinieval.platform.config import StudyConfig
from clinieval.storage import db
from clinieval.storage.schema import platform as platform_tables
from clinieval.storage.schema import snapshot as snapshot_tables

LIVE_SECTIONS = ("model_summary", "safety_leaderboard", "bradley_terry", "alignment",
                 "specialties", "reliability")
LIVE_JUDGED = ("judge_calibrated",)
"""Sections the view adds once the study has automated judgments: the
calibrated Fail % beside the clinicians-only one."""
LIVE_BOOTSTRAP = 200
"""Resamples for the live view (the full report uses the audit's default)."""
LIVE_EVERY_CHANGE_RATED = 2_000
"""Rated answers (answer x rater) up to which every change starts a new
computation; a larger study's view is recomputed at most every
:data:`LIVE_REFRESH_SECONDS`."""
LIVE_REFRESH_SECONDS = 30.0
"""Least time between two background computations of a large study's view."""
LIVE_WAIT_SECONDS = 0.15
"""How long a page waits for a computation it started before it serves the
last result: the page answers well within its budget either way."""

_cache: dict[tuple[str, str], tuple] = {}  # (version, view, finished at)
_running: set[tuple[str, str]] = set()
_started: dict[tuple[str, str], float] = {}
_lock = threading.Lock()


# --- progress ------------------------------------------------------------------

def progress(engine: sa.Engine, cfg: StudyConfig, per_clinician: bool) -> dict:
    """Coverage per model x specialty, open leases, answers still needed and,
    for admins, counts and time per clinician (pseudonymous ids). Raters per
    answer come from the trigger-kept ``answer_load`` (one row per answer)."""
    al, s, target = platform_tables.answer_load, platform_tables.answer_screens, cfg.overlap_target
    names = sa.select(snapshot_tables.models.c.display_name).where(
        snapshot_tables.models.c.model_id == al.c.model_id).scalar_subquery()
    query = (sa.select(al.c.model_id, sa.func.max(names), al.c.specialty, sa.func.count(),
                       sa.func.sum(sa.case((al.c.submitted >= target, 1), else_=0)),
                       sa.func.sum(sa.case((al.c.submitted < target, target - al.c.submitted),
                                           else_=0)))
             .join(s, sa.and_(s.c.answer_id == al.c.answer_id, s.c.study_id == al.c.study_id))
             .where(al.c.study_id == cfg.study_id, s.c.status == "clear")
             .group_by(al.c.model_id, al.c.specialty).order_by(al.c.model_id, al.c.specialty))
    tl = platform_tables.task_leases
    with db.reading(engine) as conn:
        cells = conn.execute(query).all()
        open_leases = conn.execute(sa.select(sa.func.count()).select_from(tl).where(
            tl.c.study_id == cfg.study_id, _live(tl))).scalar_one()
        clinicians = _clinicians(conn, cfg) if per_clinician else None
    coverage = [{"model": m, "model_name": name or m, "specialty": sp, "answers": n,
                 "complete": done, "complete_pct": round(100 * done / n, 1)}
                for m, name, sp, n, done, _ in cells]
    return {"overlap_target": target, "answers": sum(c["answers"] for c in coverage),
            "complete": sum(c["complete"] for c in coverage),
            "ratings_needed": sum(row[5] for row in cells),
            "open_leases": open_leases, "coverage": coverage, "clinicians": clinicians}


def coverage_grid(coverage: list[dict]) -> dict:
    """The coverage cells as a specialty x model grid for the page (a
    paper-scale study has 13 models and 76 specialties: a table of 988 rows
    hid which specialty lagged), with totals per specialty and per model."""
    names = {c["model"]: c["model_name"] for c in coverage}
    shared = {n for n, k in Counter(names.values()).items() if k > 1}
    # A display name two models share gets the model ids beside it.
    models = sorted((((f"{n} ({m})" if n in shared else n), m) for m, n in names.items()),
                    key=lambda label_id: (label_id[0].casefold(), label_id))
    columns = [m for _, m in models]
    rows: dict[str, dict] = {}
    totals = {m: [0, 0] for m in columns}
    for c in coverage:
        row = rows.setdefault(c["specialty"], {"cells": {}, "complete": 0, "answers": 0})
        row["cells"][c["model"]] = (c["complete"], c["answers"])
        row["complete"] += c["complete"]
        row["answers"] += c["answers"]
        totals[c["model"]][0] += c["complete"]
        totals[c["model"]][1] += c["answers"]
    return {"models": models,
            "rows": [(sp, [r["cells"].get(m) for m in columns], r["complete"], r["answers"])
                     for sp, r in sorted(rows.items())],
            "totals": [tuple(totals[m]) for m in columns]}


def _clinicians(conn: sa.Connection, cfg: StudyConfig) -> list[dict]:
    """Per clinician of the study: rated answers, votes and minutes spent, from
    the trigger-kept ``rater_load`` (one row per clinician; counted from the
    ratings, a paper-scale study's page read every rating)."""
    m, u, rt, rl = (platform_tables.memberships, platform_tables.users, snapshot_tables.raters,
                    platform_tables.rater_load)
    rows = conn.execute(
        sa.select(rt.c.rater_id, rt.c.specialty, rl.c.answers, rl.c.votes, rl.c.ms)
        .join(u, u.c.rater_id == rt.c.rater_id).join(m, m.c.user_id == u.c.user_id)
        .outerjoin(rl, sa.and_(rl.c.rater_id == rt.c.rater_id, rl.c.study_id == m.c.study_id))
        .where(m.c.study_id == cfg.study_id, m.c.role == "clinician")
        .order_by(rt.c.rater_id)).all()
    return [{"rater_id": x.rater_id, "specialty": x.specialty, "answers_rated": x.answers or 0,
             "votes": x.votes or 0, "minutes": round((x.ms or 0) / 60_000, 2)} for x in rows]


# --- the live safety view ----------------------------------------------------------

def data_version(engine: sa.Engine, study_id: str) -> tuple:
    """Changes whenever ratings or votes are added (largest ids: index reads)
    or the study's clear answers or raters per answer change."""
    r, p, al, s = (snapshot_tables.ratings, snapshot_tables.preferences,
                   platform_tables.answer_load,
                   platform_tables.answer_screens)
    with db.reading(engine) as conn:
        rating, vote = conn.execute(sa.select(
            sa.select(sa.func.max(r.c.rating_id)).scalar_subquery(),
            sa.select(sa.func.max(p.c.preference_id)).scalar_subquery())).one()
        rated = conn.execute(sa.select(sa.func.coalesce(sa.func.sum(al.c.submitted), 0)).where(
            al.c.study_id == study_id)).scalar_one()
        clear = conn.execute(sa.select(sa.func.count()).select_from(s).where(
            s.c.study_id == study_id, s.c.status == "clear")).scalar_one()
    return (rating, vote, rated, clear)


def safety_view(engine: sa.Engine, study_id: str) -> dict:
    """The live safety view of the study, with the time it was computed at.

    When the study's data changed since the last result, a background
    process at low priority recomputes it (on every change up to
    :data:`LIVE_EVERY_CHANGE_RATED` rated answers, at most every
    :data:`LIVE_REFRESH_SECONDS` above), and the page shows the last result,
    marked stale, with its as-of time and n, or says it is being computed."""
    key, version = (str(engine.url), study_id), data_version(engine, study_id)
    with _lock:
        cached = _cache.get(key)
    if cached and cached[0] == version:
        return cached[1]
    if version[2] == 0:  # nothing rated: there is no audit to run
        return {"empty": True, "min_n": AuditSettings().min_n, "sections": {}}
    small = version[2] < LIVE_EVERY_CHANGE_RATED
    future = _refresh(engine, key, version, 0.0 if small else LIVE_REFRESH_SECONDS)
    if future is not None:
        wait([future], timeout=LIVE_WAIT_SECONDS)
        with _lock:
            cached = _cache.get(key)
        if cached and cached[0] == version:
            return cached[1]
    if cached:
        return {**cached[1], "stale": True}
    return {"empty": True, "pending": True, "rated": version[2], "min_n": AuditSettings().min_n,
            "sections": {}}


def settle(timeout: float = 120.0) -> None:
    """Wait until no view is being computed (or ``timeout`` seconds): for a
    caller that wants the view of the data now, as a test does."""
    deadline = time.monotonic() + timeout
    while _running and time.monotonic() < deadline:
        time.sleep(0.05)


def _refresh(engine: sa.Engine, key: tuple[str, str], version: tuple, interval: float):
    """Start one background computation per study, not sooner than
    ``interval`` seconds after the last one started (a failed one is retried
    after the interval too); the future, or None when none was started."""
    with _lock:
        if key in _running or time.monotonic() - _started.get(key, -math.inf) < interval:
            return None
        _running.add(key)
        _started[key] = time.monotonic()
    url = engine.url.render_as_string(hide_password=False)
    try:
        future = _pool().submit(_compute_in_child, url, key[1])
    except BrokenProcessPool:  # a child died (killed, out of memory): start afresh
        global _executor
        _executor = None
        future = _pool().submit(_compute_in_child, url, key[1])

    def done(f) -> None:
        with _lock:
            _running.discard(key)
            if f.exception() is None:
                _cache[key] = (version, f.result(), time.monotonic())

    future.add_done_callback(done)
    return future


def warm(engine: sa.Engine) -> None:
    """Start computing the view of every study with ratings (at server
    start), so the first admin to open it finds a recent result."""
    with engine.connect() as conn:
        studies = conn.execute(sa.select(platform_tables.study_settings.c.study_id)).scalars().all()
    for study_id in studies:
        version = data_version(engine, study_id)
        if version[2] > 0:
            _refresh(engine, (str(engine.url), study_id), version, LIVE_REFRESH_SECONDS)


_executor = None


def _pool():
    global _executor
    if _executor is None:
        import multiprocessing
        from concurrent.futures import ProcessPoolExecutor

        _executor = ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("spawn"),
                                        initializer=_child_start, initargs=(os.getpid(),))
    return _executor


def _child_start(parent: int) -> None:
    """The view's process runs at low priority and does not outlive a killed
    server (SIGKILL gives it no chance to shut its pool down): a watcher
    thread ends this process once its parent is gone instead of leaving it
    computing a view nobody will read. (A clean shutdown still waits for a
    computation under way.) It relies on the worker being the server's own
    child, as the spawn start method makes it; not PR_SET_PDEATHSIG, which
    fires when the thread that started the process ends."""
    os.nice(10)

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(1.0)
        os._exit(0)

    threading.Thread(target=watch, name="clinieval-parent-watch", daemon=True).start()


def _compute_in_child(url: str, study_id: str) -> dict:
    from clinieval.storage import db

    engine = db.make_engine(url)
    try:
        return compute_view(engine, study_id)
    finally:
        engine.dispose()


def compute_view(engine: sa.Engine, study_id: str) -> dict:
    """The view from the audit's own section builders on the study's data now."""
    import numpy as np

    from clinieval.audit.context import Context
    from clinieval.audit.data import from_snapshot
    from clinieval.audit.run import build
    from clinieval.errors import ClinievalError
    from clinieval.io.export import pseudonymise
    from clinieval.platform.study_export import export_salt, study_snapshot

    as_of = datetime.now(UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
    # Under the export's pseudonyms: the audit's two-way bootstrap draws raters in
    # the order of their ids, so only these give the same intervals as auditing the
    # export with the same settings (and no stored rater id reaches the view).
    snap = pseudonymise(study_snapshot(engine, study_id), export_salt(engine))
    settings = AuditSettings(bootstrap=LIVE_BOOTSTRAP)
    # Rows stored, edits included; the analysed n (latest revisions) once read.
    n = {"as_of": as_of, "n_ratings": snap["ratings"].num_rows,
         "n_votes": snap["preferences"].num_rows, "settings": _settings_shown(settings)}
    if snap["ratings"].num_rows == 0:
        return {"empty": True, "min_n": settings.min_n, "sections": {}, **n}
    try:
        data = from_snapshot(snap)
        rated = data.rating_answer.astype("int64") * max(data.n_raters, 1) + data.rating_rater
        n |= {"n_ratings": int(len(data.rating_score)), "n_votes": int(len(data.pref_a)),
              "n_rated": int(np.unique(rated).size),
              "criterion_names": dict(zip(data.criteria, data.criterion_names, strict=True))}
        ctx = Context(data, settings)
        judged = snap["judgments"].num_rows > 0
        sections = build(ctx, LIVE_SECTIONS + (LIVE_JUDGED if judged else ()))
    except ClinievalError as err:  # e.g. a snapshot the audit cannot read yet
        return {"empty": True, "min_n": settings.min_n, "error": str(err),
                "sections": {}, **n}
    return {"empty": False, "min_n": ctx.settings.min_n, "level": ctx.settings.level,
            "sections": {k: _section_json(s) for k, s in sections.items()}, **n}


def _settings_shown(settings: AuditSettings) -> dict:
    """The audit settings that change the view's numbers, as the page prints
    them (`clinieval audit --bootstrap 200` on the export gives the same)."""
    from clinieval.audit.failure import rule_words

    return {**{name: getattr(settings, name) for name in
               ("bootstrap", "seed", "level", "cluster", "threshold", "response_rule",
                "min_n")},
            "rule": rule_words(settings.response_rule, settings.threshold)}


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


def calibrated_fails(view: dict) -> list[dict]:
    """The judge-calibrated Fail % of ratings per model and safety-critical
    criterion beside the clinicians-only one (rows of the section's
    ``by_criterion`` table); empty before the study has judgments."""
    section = view.get("sections", {}).get("judge_calibrated") or {}
    rows = section.get("tables", {}).get("by_criterion", [])
    return [r for r in rows if r.get("measure") == "Fail % of ratings"]


def fail_columns(view: dict) -> list[str]:
    """The leaderboard's Fail % columns (one per safety-critical criterion)."""
    rows = view["sections"].get("safety_leaderboard", {}).get("tables", {}).get("leaderboard")
    return [k for k in rows[0] if k.endswith("_fail_pct_of_ratings")] if rows else []
