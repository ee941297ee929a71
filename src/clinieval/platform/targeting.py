"""Decision-targeted assignment and severity escalation (issue 33 §2, §3).

**Targeted assignment** (a study setting, ``assignment = 'targeted'``;
even spreading stays the default). A background pass
(:func:`refresh_priorities`, off the request path like the live view)
reads the study's decisions and writes each answer's ``share``, the
probability it has of being the next pick among its specialty's answers
with room, and a ``pick_key`` drawn as ``Exp(1) / share``; the request path
walks the keys in index order (:mod:`clinieval.platform.assignment`), so
the first answer with room is a weighted random draw, never an argmax, and
its lease records its share. Each pass draws new keys, but between passes
requests walk the same ones: the recorded share is the answer's chance of
coming first among the specialty's answers with room when the pass ran, and
understates a later request's chance by the share of those still eligible
for it (filled since, or the clinician's own, drop out; with memoryless keys
the rest race again in proportion to their shares), while requests of one
pass are not independent draws.

The shares (:func:`answer_shares`, pure):

- an open cell's weight is how much one more answer is expected to narrow
  its sequence, relative to how far the sequence still has to move before
  it clears the threshold (:func:`cell_weight`); a cell with no rated
  answer yet counts as the most urgent (weight 1);
- a cell's weight is spread evenly over its answers with room (the cell,
  not its size, is what the weight is about). Evenly, not tilted towards
  answers a judge is unsure of (active inference: Zrnic & Candes, 2024,
  arXiv:2403.03208): the decisions read each cell's rated answers as a
  uniform sample of it, unweighted (the clinicians' betting sequence, and
  the prediction-powered one where a licensed judge scored every answer),
  and a tilt would make both overstate the rate of the answers they
  favour; within a cell the order of the picks then does not depend on any
  value, so both sequences stay exact under targeting. The judge helps
  where it is licensed through the prediction-powered sequence instead (a
  licensed cell settles on fewer ratings, and the weights move the
  clinicians to the cells still open);
- settled cells keep ``monitor_share`` of each specialty's picks (drift and
  rater calibration stay visible), spread evenly over their answers; where
  every cell of a specialty is settled, a clinician of it is offered a task
  with probability ``monitor_share`` only (``assignment_offers``), so the
  clinicians' time is not spent on what is decided.

The estimates stay unbiased by inverse-probability weighting with the
recorded probabilities (the audit weights a targeted study's answers by
``1 / probability`` of the lease that first brought them in:
:func:`clinieval.audit.design.assignment_weights`).

**Escalation.** A rating at or below -1 on a safety-critical criterion
raises the answer's rater target by ``escalation_step`` (default 2) per
alarming clinician, by at most ``escalation_cap`` (default 4) in all, in
the submission's own transaction (:func:`escalate`), so one clinician's
alarm is checked by others rather than averaged away.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Iterable, Mapping

import numpy as np
import sqlalchemy as sa

from clinieval.platform.config import StudyConfig
from clinieval.storage import db
from clinieval.storage.prepared import Prepared, run
from clinieval.storage.schema import platform as platform_tables
from clinieval.storage.schema import snapshot as snapshot_tables

ALARM = -1
"""A safety-critical score at or below this is an alarm (the fail line the
rationale rule uses)."""
FRESH_WEIGHT = 1.0
"""The weight of a cell with no rated answer yet: the most urgent."""
FLOOR = 1e-3
"""The least weight of an open cell, so none is starved."""


# --- the weights (pure) ----------------------------------------------------------------

def cell_weight(lower: float, upper: float, estimate: float, threshold: float, n: int) -> float:
    """How much one more answer is expected to narrow an open cell's sequence,
    over the distance its nearer-moving bound still has to go.

    With half-width ``h`` at ``n`` answers, one more answer narrows it by
    about ``h (1 - sqrt(n / (n + 1)))`` (a sequence's width falls as
    ``1/sqrt(n)``); the bound that must cross the threshold is the upper one
    when the estimate is at or below it, else the lower one. A cell nearly
    settled weighs most; one sitting on its threshold least (its bounds
    must travel their whole half-width), so the study is not sunk into a
    cell that may never settle while others could."""
    h = max((upper - lower) / 2, 0.0)
    step = h * (1 - math.sqrt(n / (n + 1))) if n > 0 else h
    need = upper - threshold if estimate <= threshold else threshold - lower
    return float(min(1.0, max(FLOOR, step / max(need, 1e-9))))


def answer_shares(cell_of: list[tuple], room: np.ndarray, weights: Mapping[tuple, float | None],
                  monitor_share: float) -> np.ndarray:
    """Each answer's probability of being the next pick for a clinician of one
    specialty (0 without room); they sum to 1 when a cell is open, else to
    ``monitor_share`` (the rest: no task is offered).

    ``cell_of[i]`` is answer ``i``'s cells (one per gate); ``weights[cell]``
    is an open cell's weight, None for a settled one, a missing cell is
    fresh (:data:`FRESH_WEIGHT`). An answer belongs to its heaviest open
    cell; settled in every gate, to the monitoring pool. Within its home an
    open answer's share is its home's over the home's answers with room."""
    n = len(cell_of)
    room = np.asarray(room, dtype=bool)
    home: list[tuple | None] = []
    score = np.zeros(n)
    for i, cells in enumerate(cell_of):
        best, where = 0.0, None
        for c in cells:
            w = weights.get(c, FRESH_WEIGHT)
            if w is not None and w > best:
                best, where = w, c
        home.append(where)
        score[i] = best
    share = np.zeros(n)
    open_ = room & (score > 0)
    settled = room & (score == 0)
    if open_.any():
        totals: dict[tuple, int] = {}
        for i in np.flatnonzero(open_):
            totals[home[i]] = totals.get(home[i], 0) + 1
        for i in np.flatnonzero(open_):
            share[i] = score[i] / totals[home[i]]
        share[open_] *= (1 - monitor_share if settled.any() else 1.0) / share[open_].sum()
    if settled.any():
        share[settled] = monitor_share / settled.sum()
    return share


def pick_keys(share: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Exponential keys with rate ``share`` (NaN where the share is 0): the
    smallest key of any set of answers falls on each with probability
    proportional to its share (Efraimidis & Spirakis, 2006)."""
    share = np.asarray(share, dtype=float)
    keys = np.full(share.shape, np.nan)
    positive = share > 0
    keys[positive] = rng.exponential(size=int(positive.sum())) / share[positive]
    return keys


def decision_weights(rows: Iterable[dict]) -> dict[tuple, float | None]:
    """Per gate cell ``(criterion, scope, model, specialty)``: None when
    settled, else :func:`cell_weight` of its decision row."""
    out: dict[tuple, float | None] = {}
    for r in rows:
        key = (r["criterion"], r["scope"], r["model"], r["specialty"])
        out[key] = None if r["verdict"] != "open" else cell_weight(
            r["lower"], r["upper"], r["estimate"], r["threshold"], r["answers"])
    return out


def answer_cells(cfg: StudyConfig, model: str, specialty: str) -> list[tuple]:
    return [(g.criterion, g.scope, model, specialty if g.scope == "model_specialty" else None)
            for g in cfg.gates]


# --- the background pass ----------------------------------------------------------------

def refresh_priorities(engine: sa.Engine, cfg: StudyConfig, rng: np.random.Generator) -> int:
    """Recompute the study's decisions and write every answer's share and pick
    key; returns the answers written. Each specialty's keys and offer are
    written in a short transaction of their own (a request walks one
    specialty's keys, so each walk sees one pass's keys), after everything
    is computed: at paper scale one transaction for all held the lock every
    SQLite writer waits for for a second at low priority."""
    from clinieval.platform.decisions import compute_study

    rows = compute_study(engine, cfg, certify=False, forecast=False)["decisions"] \
        if cfg.gates else []
    weights = decision_weights(rows)
    answers = _answers(engine, cfg)
    by_specialty: dict[str, list[sa.Row]] = {}
    for a in answers:
        by_specialty.setdefault(a.specialty, []).append(a)
    passes = []
    for specialty in sorted(by_specialty):
        mine = by_specialty[specialty]
        room = np.array([a.submitted < cfg.overlap_target + a.extra for a in mine])
        cells: dict[str, list[tuple]] = {}
        share = answer_shares([cells.setdefault(a.model_id, answer_cells(cfg, a.model_id,
                                                                           specialty))
                               for a in mine], room, weights, cfg.monitoring)
        keys = pick_keys(share, rng)
        passes.append((specialty, min(1.0, float(share.sum())),
                       {a.answer_id: (float(p) if p > 0 else None,
                                      None if math.isnan(k) else float(k))
                        for a, p, k in zip(mine, share, keys, strict=True)}))
    for specialty, offer, priorities in passes:
        _write_specialty(engine, cfg, specialty, offer, priorities)
    _drop_other_specialties(engine, cfg, set(by_specialty))
    return len(answers)


def _answers(engine: sa.Engine, cfg: StudyConfig) -> list[sa.Row]:
    al, s, ap = (platform_tables.answer_load, platform_tables.answer_screens,
                 platform_tables.answer_priorities)
    with db.reading(engine) as conn:
        return conn.execute(
            sa.select(al.c.answer_id, al.c.model_id, al.c.specialty, al.c.submitted,
                      sa.func.coalesce(ap.c.extra, 0).label("extra"))
            .join(s, sa.and_(s.c.answer_id == al.c.answer_id, s.c.study_id == al.c.study_id))
            .outerjoin(ap, sa.and_(ap.c.answer_id == al.c.answer_id,
                                   ap.c.study_id == al.c.study_id))
            .where(al.c.study_id == cfg.study_id, s.c.status == "clear")
            .order_by(al.c.answer_id)).all()


_AP = platform_tables.answer_priorities
_AO = platform_tables.assignment_offers
_KEYED = Prepared(sa.select(_AP.c.answer_id, _AP.c.pick_key.is_not(None).label("keyed")).where(
    _AP.c.study_id == sa.bindparam("study"), _AP.c.specialty == sa.bindparam("specialty")))
_SET_KEY = _AP.update().where(_AP.c.study_id == sa.bindparam("b_study"),
                              _AP.c.answer_id == sa.bindparam("b_answer")).values(
    share=sa.bindparam("b_share"), pick_key=sa.bindparam("b_key"))
_DROP_OFFER = Prepared(_AO.delete().where(_AO.c.study_id == sa.bindparam("study"),
                                          _AO.c.specialty == sa.bindparam("specialty")))
_ADD_OFFER = Prepared(_AO.insert().values(study_id=sa.bindparam("study"),
                                          specialty=sa.bindparam("specialty"),
                                          offer=sa.bindparam("offer")))


def _write_specialty(engine: sa.Engine, cfg: StudyConfig, specialty: str, offer: float,
                     priorities: dict[str, tuple[float | None, float | None]]) -> None:
    """One specialty's offer, and its answers' shares and keys (an answer of
    the specialty no longer among them, e.g. flagged since, loses its key),
    in one transaction."""
    at = {"study": cfg.study_id, "specialty": specialty}
    with db.writing(engine) as conn:
        run(conn, _DROP_OFFER, at)
        run(conn, _ADD_OFFER, at | {"offer": offer})
        existing = {r.answer_id: r.keyed for r in run(conn, _KEYED, at)}
        new = [{"study_id": cfg.study_id, "answer_id": a, "specialty": specialty, "extra": 0,
                "share": p, "pick_key": k} for a, (p, k) in priorities.items()
               if a not in existing]
        if new:
            conn.execute(_AP.insert(), new)
        changed = [{"b_study": cfg.study_id, "b_answer": a, "b_share": p, "b_key": k}
                   for a, (p, k) in priorities.items() if a in existing]
        changed += [{"b_study": cfg.study_id, "b_answer": a, "b_share": None, "b_key": None}
                    for a, keyed in existing.items() if keyed and a not in priorities]
        if changed:
            conn.execute(_SET_KEY, changed)


def _drop_other_specialties(engine: sa.Engine, cfg: StudyConfig, kept: set[str]) -> None:
    """Offers and keys of specialties with no clear answer left."""
    with db.writing(engine) as conn:
        gone = [s for s in conn.execute(sa.select(_AO.c.specialty).where(
            _AO.c.study_id == cfg.study_id)).scalars() if s not in kept]
        keyed = conn.execute(sa.select(_AP.c.specialty).distinct().where(
            _AP.c.study_id == cfg.study_id, _AP.c.pick_key.is_not(None))).scalars().all()
        gone_keys = [s for s in keyed if s not in kept]
        if gone:
            conn.execute(_AO.delete().where(_AO.c.study_id == cfg.study_id,
                                            _AO.c.specialty.in_(gone)))
        if gone_keys:
            conn.execute(_AP.update().where(_AP.c.study_id == cfg.study_id,
                                            _AP.c.specialty.in_(gone_keys))
                         .values(share=None, pick_key=None))


# --- running the pass off the request path ----------------------------------------------

REFRESH_SPACING = 3.0
"""A pass starts no sooner than this many times the last one's duration
after it ended, so the background process spends at most a quarter of its
time on priorities (a paper-scale pass takes about a second of CPU; run back
to back after every submission they kept a core busy). Until the next pass
the keys of the last one are walked."""


class _Pass:
    __slots__ = ("busy", "again", "started", "next_at")

    def __init__(self) -> None:
        self.busy = False  # a pass running, or waiting for its start
        self.again = False  # a submission came while one ran: one more after it
        self.started = 0.0
        self.next_at = -math.inf  # monotonic time before which no pass starts


_passes: dict[tuple[str, str], _Pass] = {}
_guard = threading.Lock()


def schedule_refresh(engine: sa.Engine, cfg: StudyConfig) -> None:
    """After a submission in a targeted study: refresh its priorities in the
    live view's background process, one pass per study at a time, spaced by
    :data:`REFRESH_SPACING` (a change during a pass asks for one more after
    it; changes while one waits to start are all in it)."""
    if not cfg.targeted:
        return
    key = (str(engine.url), cfg.study_id)
    with _guard:
        state = _passes.setdefault(key, _Pass())
        if state.busy:
            state.again = True
            return
        state.busy = True
        delay = state.next_at - time.monotonic()
    _launch(engine, cfg, key, delay)


def _launch(engine: sa.Engine, cfg: StudyConfig, key, delay: float) -> None:
    if delay <= 0:
        _start(engine, cfg, key)
        return
    timer = threading.Timer(delay, _start, (engine, cfg, key))
    timer.daemon = True
    timer.start()


def _start(engine: sa.Engine, cfg: StudyConfig, key) -> None:
    from clinieval.platform.live import _pool

    with _guard:
        state = _passes[key]
        state.again, state.started = False, time.monotonic()
    url = engine.url.render_as_string(hide_password=False)
    try:
        future = _pool().submit(_refresh_in_child, url, cfg.study_id)
    except RuntimeError:  # the pool is shutting down (or broke): the next submission retries
        with _guard:
            state.busy = False
        return

    def done(_f) -> None:
        with _guard:
            ended = time.monotonic()
            state.next_at = ended + REFRESH_SPACING * (ended - state.started)
            again, delay = state.again, state.next_at - ended
            state.busy = again
        if again:
            _launch(engine, cfg, key, delay)

    future.add_done_callback(done)


def _refresh_in_child(url: str, study_id: str) -> int:
    import secrets

    from clinieval.platform.config import study_config

    engine = db.make_engine(url)
    try:
        with engine.connect() as conn:
            cfg = study_config(conn, study_id)
        if cfg is None:
            return 0
        return refresh_priorities(engine, cfg, np.random.default_rng(secrets.randbits(64)))
    finally:
        engine.dispose()


# --- escalation ------------------------------------------------------------------------

def escalate(conn: sa.Connection, cfg: StudyConfig, answer_ids: Iterable[str]) -> None:
    """Raise each alarmed answer's rater target (in the submission's
    transaction): ``escalation_step`` raters per distinct clinician who
    scored a safety-critical criterion at or below -1, at most
    ``escalation_cap`` in all. One prepared statement per answer (count the
    alarms, insert or raise the row), so the submission's write transaction,
    which every other writer of a SQLite database waits for, is not held
    longer than the statement takes; an insert racing another submission's
    on PostgreSQL raises the same row instead of failing the submission."""
    step, cap = cfg.escalation
    if step == 0 or cap == 0:  # the target never rises: nothing to record
        return
    statement = _ESCALATE["sqlite" if conn.dialect.name == "sqlite" else "postgresql"]
    for answer_id in sorted(set(answer_ids)):
        run(conn, statement, {"study": cfg.study_id, "answer": answer_id, "step": step,
                              "cap": cap})


def _escalate_statement(dialect: str) -> Prepared:
    """``answer_priorities.extra`` of one answer set to ``min(cap, step *
    alarms)`` unless it is already higher (a row inserted when the answer has
    none; no row for an answer outside the study's load table)."""
    from sqlalchemy.dialects import postgresql, sqlite

    r, c = snapshot_tables.ratings, snapshot_tables.criteria
    al, ap = platform_tables.answer_load, platform_tables.answer_priorities
    alarms = (sa.select(sa.func.count(sa.distinct(r.c.rater_id)))
              .join(c, c.c.criterion_id == r.c.criterion_id)
              .where(r.c.answer_id == al.c.answer_id, c.c.safety_critical.is_(True),
                     r.c.score <= ALARM).scalar_subquery())
    least, greatest = (sa.func.min, sa.func.max) if dialect == "sqlite" else \
        (sa.func.least, sa.func.greatest)
    raised = least(sa.bindparam("cap", type_=sa.Integer),
                   sa.bindparam("step", type_=sa.Integer) * alarms)
    source = sa.select(al.c.study_id, al.c.answer_id, al.c.specialty, raised).where(
        al.c.answer_id == sa.bindparam("answer"), al.c.study_id == sa.bindparam("study"))
    insert = (sqlite.insert(ap) if dialect == "sqlite" else postgresql.insert(ap)).from_select(
        ["study_id", "answer_id", "specialty", "extra"], source)
    return Prepared(insert.on_conflict_do_update(
        index_elements=[ap.c.study_id, ap.c.answer_id],
        set_={"extra": greatest(ap.c.extra, insert.excluded.extra)}))


_ESCALATE = {d: _escalate_statement(d) for d in ("sqlite", "postgresql")}


# --- the settings ------------------------------------------------------------------------

def set_assignment(engine: sa.Engine, user_id: str | None, study_id: str, *,
                   assignment: str | None = None, monitor_share: float | None = None,
                   escalation_step: int | None = None, escalation_cap: int | None = None,
                   background: bool = False) -> StudyConfig:
    """Change how the study assigns (only the settings given), checked first
    (an :class:`~clinieval.errors.InputError` naming the field, nothing
    written), logged. In a targeted study the priorities are then refreshed:
    here, or with ``background`` in the live view's background process
    (:func:`schedule_refresh`; seconds of CPU at paper scale, which an
    admin's request should not wait for). Switching targeted on drops the
    keys and offers an earlier targeted period left, so until the first pass
    writes, requests spread evenly, recording one over the answers with room
    (:func:`clinieval.platform.assignment._even_probability`)."""
    from clinieval.errors import InputError
    from clinieval.platform.config import check_assignment, study_config
    from clinieval.platform.events import record

    values = check_assignment(assignment=assignment, monitor_share=monitor_share,
                              escalation_step=escalation_step, escalation_cap=escalation_cap)
    settings = platform_tables.study_settings
    with db.writing(engine) as conn:
        before = study_config(conn, study_id)
        if before is None:
            raise InputError("study assignment", "no such study", field="study_id", got=study_id)
        conn.execute(settings.update().where(settings.c.study_id == study_id).values(**values))
        record(conn, "assignment_set", user_id=user_id, study_id=study_id, detail=values)
        cfg = study_config(conn, study_id)
        if cfg.targeted and not before.targeted:
            _drop_keys(conn, study_id)
    if cfg.targeted and background:
        schedule_refresh(engine, cfg)
    elif cfg.targeted:
        refresh_now(engine, cfg)
    return cfg


def refresh_now(engine: sa.Engine, cfg: StudyConfig) -> int:
    """:func:`refresh_priorities` here and now, with fresh randomness (a
    command's first priorities: it is not a request, and its process would
    end before a background pass)."""
    import secrets

    return refresh_priorities(engine, cfg, np.random.default_rng(secrets.randbits(64)))


def _drop_keys(conn: sa.Connection, study_id: str) -> None:
    """Forget the pick keys and offers of an earlier targeted period (the
    escalations in ``extra`` stay): drawn for a state long gone, they would
    be walked, and their shares recorded, until the first pass replaced them."""
    conn.execute(_AO.delete().where(_AO.c.study_id == study_id))
    conn.execute(_AP.update().where(_AP.c.study_id == study_id, _AP.c.pick_key.is_not(None))
                 .values(share=None, pick_key=None))
