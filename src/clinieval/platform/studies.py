"""Setting up a study from any importable source, adding cases to it and
giving it new rubric versions: what ``clinieval study`` and a study's admin
(pages and JSON API alike, so the two cannot drift apart) do to a study.

A study's content is written whole or not at all, one writer at a time;
every answer is screened by the leak guard before a clinician can get it;
every change an admin makes appends an audit event in the same transaction,
naming the admin who acted.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime

import pyarrow as pa
import pyarrow.compute as pc
import sqlalchemy as sa

from clinieval.contract import tabular
from clinieval.contract.validate import check_no_nul, has_nul
from clinieval.errors import InputError
from clinieval.io.importer import import_into
from clinieval.platform.config import (
    Gate,
    check_assignment,
    default_gates,
    gates_json,
    parse_gates,
    study_config,
)
from clinieval.platform.events import now, record
from clinieval.platform.leakguard import LeakGuard
from clinieval.platform.uploads import Upload, read_rubric, read_upload
from clinieval.rubric import rubric_to_dict, rubric_to_rows
from clinieval.schema.domain import Rubric
from clinieval.snapshot import Snapshot, conform
from clinieval.storage import db
from clinieval.storage.schema import platform as platform_tables
from clinieval.storage.schema import snapshot as snapshot_tables

DEFAULT_CONSENT = (
    "I take part voluntarily. My ratings are stored under a pseudonym and used to evaluate"
    " medical AI answers; my name and e-mail address are never exported. I may stop at any time."
)


@dataclass(frozen=True)
class StudyPlan:
    """What ``clinieval study create`` asks for."""

    study_id: str
    name: str
    rubric: Rubric
    overlap_target: int = 3
    pairwise_share: float = 0.2
    lease_minutes: int = 30
    specialties: tuple[str, ...] = ()
    consent_text: str = DEFAULT_CONSENT
    description: str | None = None
    max_cases: int | None = None
    rationale_required: bool = True
    extra: dict = field(default_factory=dict)
    gates: object = None
    """The study's gates as given (JSON text or a list of mappings); None: the
    defaults (:func:`~clinieval.platform.config.default_gates`), [] none."""
    assignment: dict = field(default_factory=dict)
    """How it assigns, by :func:`~clinieval.platform.targeting.set_assignment`'s
    names (``assignment``, ``monitor_share``, ``escalation_step``,
    ``escalation_cap``; one missing or None: the default), checked as there."""

    def study_gates(self) -> tuple[Gate, ...]:
        """The gates checked against the rubric's criteria (an InputError
        naming the field when one is bad)."""
        if self.gates is None or self.gates == "":
            return default_gates(self.rubric.safety_critical)
        return parse_gates(self.gates, [c.criterion_id for c in self.rubric.criteria],
                           "study create")

    def check(self) -> None:
        if not re.fullmatch(r"[a-z0-9][a-z0-9_-]{0,62}", self.study_id):
            raise InputError(
                "study create",
                "study ids are short lower-case slugs",
                field="study_id",
                expected="[a-z0-9_-], at most 63",
                got=self.study_id,
            )
        if self.overlap_target < 1:
            raise InputError(
                "study create",
                "must be at least 1",
                field="overlap_target",
                got=self.overlap_target,
            )
        if not 0 <= self.pairwise_share <= 1:
            raise InputError(
                "study create",
                "a share",
                field="pairwise_share",
                expected="0..1",
                got=self.pairwise_share,
            )
        for name, low, high in (("overlap_target", 1, MAX_OVERLAP),
                                ("lease_minutes", 1, MAX_LEASE_MINUTES)):
            if not low <= getattr(self, name) <= high:
                raise InputError("study create", "out of range", field=name,
                                 expected=f"{low}..{high}", got=getattr(self, name))
        texts = {"name": self.name, "description": self.description,
                 "consent_text": self.consent_text, "specialties": self.specialties,
                 "rubric": self.rubric.model_dump()}
        for name, value in texts.items():
            if has_nul(value):
                raise InputError("study create", "contains a NUL character", field=name)
        self.study_gates()
        check_assignment("study create", **self.assignment)


MAX_OVERLAP = 1000
MAX_LEASE_MINUTES = 7 * 24 * 60
"""Bounds of a study's settings (far beyond any real study; a database column
holds them whatever its kind)."""


def create_study(engine: sa.Engine, plan: StudyPlan, source: Snapshot,
                 then: Callable[[sa.Connection, dict[str, int]], None] | None = None
                 ) -> dict[str, int]:
    """Load the plan's cases and answers from ``source`` as a new study, screen
    every answer with the leak guard, and store the study's settings, all in one
    transaction: a study is made whole or not at all.

    Ratings, votes and raters in the source are not copied: a study starts
    empty. ``then`` writes more in the same transaction (the creator's
    membership, say), given the counts. Returns counts (cases, answers,
    flagged answers).
    """
    plan.check()
    check_no_nul(source)
    db.upgrade(engine)
    snap = _study_snapshot(engine, plan, source)
    specialties = plan.specialties or tuple(sorted(set(snap["cases"]["specialty"].to_pylist())))
    with engine.connect() as conn:
        models = _models_of(conn, snap["answers"], source["models"])
    screens = _screen(plan.study_id, snap, models)
    with _content_written(engine) as conn:
        counts = _create(conn, plan, snap, specialties, screens)
        if then is not None:
            then(conn, counts)
    return counts


@contextmanager
def _content_written(engine: sa.Engine) -> Iterator[sa.Connection]:
    """The write transaction that adds cases and answers to a study, one at a
    time with every other (creating a study, adding cases, an import), then
    fresh planner statistics."""
    with db.writing(engine) as conn:
        db.one_at_a_time(conn, "study content")
        yield conn
    db.analyze(engine)


def _create(conn: sa.Connection, plan: StudyPlan, snap: Snapshot,
            specialties: tuple[str, ...], screens: list[dict]) -> dict[str, int]:
    if conn.execute(sa.select(snapshot_tables.studies.c.study_id).where(
            snapshot_tables.studies.c.study_id == plan.study_id)).first():
        raise InputError("study create", "a study with this id exists", field="study_id",
                         got=plan.study_id)
    import_into(conn, snap)
    conn.execute(
        platform_tables.study_settings.insert().values(
            study_id=plan.study_id,
            overlap_target=plan.overlap_target,
            pairwise_share=plan.pairwise_share,
            lease_minutes=plan.lease_minutes,
            specialties=json.dumps(list(specialties)),
            criteria=json.dumps([c.criterion_id for c in plan.rubric.criteria]),
            consent_text=plan.consent_text,
            gates=gates_json(plan.study_gates()),
            **check_assignment("study create", **plan.assignment),
        )
    )
    conn.execute(platform_tables.answer_screens.insert(), screens)
    conn.execute(platform_tables.study_rubrics.insert().values(
        study_id=plan.study_id, rubric_id=plan.rubric.rubric_id,
        version=str(plan.rubric.version), rationale_required=plan.rationale_required))
    store_rubric_version(conn, plan.study_id, plan.rubric)
    flagged = sum(s["status"] == "flagged" for s in screens)
    return {"cases": snap["cases"].num_rows, "answers": len(screens), "flagged": flagged}


def _study_snapshot(engine: sa.Engine, plan: StudyPlan, source: Snapshot) -> Snapshot:
    cases = source["cases"]
    if plan.specialties:
        cases = cases.filter(_of_specialties(cases, plan.specialties))
    if plan.max_cases is not None:
        cases = cases.slice(0, plan.max_cases)
    if cases.num_rows == 0:
        raise InputError(
            "study create", "no cases match", field="specialties", got=list(plan.specialties)
        )
    cases = cases.set_column(
        cases.schema.get_field_index("study_id"),
        "study_id",
        pa.array([plan.study_id] * cases.num_rows, pa.string()),
    )
    answers = source["answers"].filter(pc.is_in(source["answers"]["case_id"], cases["case_id"]))
    models = source["models"].filter(pc.is_in(source["models"]["model_id"], answers["model_id"]))
    criteria = conform(pa.Table.from_pylist(rubric_to_rows(plan.rubric)), tabular.CRITERIA)
    study = conform(
        pa.Table.from_pylist(
            [
                {
                    "study_id": plan.study_id,
                    "name": plan.name,
                    "description": plan.description,
                    "blinded": True,
                    "created_at": datetime.now(UTC),
                }
            ]
        ),
        tabular.STUDIES,
    )
    content = {
        "studies": study,
        "cases": cases,
        "answers": answers,
        "models": _not_stored(engine, models),
        "criteria": criteria,  # the importer reuses criteria stored with the same definition
    }
    info = {k: getattr(plan.rubric, k) for k in ("rubric_id", "version", "description")}
    return Snapshot.from_tables(content, {"rubric": info})


def _not_stored(engine: sa.Engine, models: pa.Table) -> pa.Table:
    """Models another study already brought (studies share model rows)."""
    ids = models["model_id"].to_pylist()
    with engine.connect() as conn:
        stored = conn.execute(sa.select(snapshot_tables.models.c.model_id).where(
            snapshot_tables.models.c.model_id.in_(ids))).scalars().all()
    return models.filter(pc.invert(pc.is_in(models["model_id"], pa.array(stored, pa.string()))))


def add_cases(engine: sa.Engine, study_id: str, source: Snapshot,
              then: Callable[[sa.Connection, dict[str, int]], None] | None = None
              ) -> dict[str, int]:
    """Add a source's cases and answers to an existing study, all or nothing
    (with their leak-guard screens and what ``then`` writes, in one transaction).

    The source goes through the importer's checks (the same messages as
    ``clinieval import``); cases and answers already in the study are
    skipped, so the same file can be sent again. Cases of specialties the
    study does not offer are left out with their answers, as when the study
    was created from the same file (``left_out`` counts them); a source with
    nothing else is refused. Every new answer is screened by the leak guard
    before a clinician can get it. Returns counts of what was added.
    """
    check_no_nul(source)
    offered = _offered(engine, study_id)
    cases, answers = source["cases"], source["answers"]
    if cases.num_rows + answers.num_rows == 0:
        raise InputError("add cases", "the source has no cases or answers", field="cases")
    inside = _of_specialties(cases, offered)
    outside = cases.filter(pc.invert(inside))
    if outside.num_rows:
        answers = answers.filter(pc.invert(pc.is_in(answers["case_id"], outside["case_id"])))
        cases = cases.filter(inside)
        if cases.num_rows + answers.num_rows == 0:
            row = pc.index(inside, False).as_py() + 1
            raise InputError("cases", "specialty not offered by the study: every case of the"
                             " source is of one it does not offer", row=row, field="specialty",
                             expected=", ".join(offered), got=outside["specialty"][0].as_py())
    cases = cases.set_column(cases.schema.get_field_index("study_id"), "study_id",
                             pa.array([study_id] * cases.num_rows, pa.string()))
    _check_answer_cases(engine, study_id, answers, cases)
    models = source["models"].filter(pc.is_in(source["models"]["model_id"],
                                              answers["model_id"]))
    snap = Snapshot.from_tables({"cases": cases, "answers": answers,
                                 "models": _not_stored(engine, models)}, {})
    with _content_written(engine) as conn:
        # What the study has screened is read once the lock is held: the same
        # file sent twice at once adds its answers once and screens them once.
        known = conn.execute(sa.select(platform_tables.answer_screens.c.answer_id).where(
            platform_tables.answer_screens.c.study_id == study_id)).scalars().all()
        new_answers = answers.filter(pc.invert(pc.is_in(answers["answer_id"],
                                                        pa.array(known, pa.string()))))
        screens = _screen(study_id, Snapshot.from_tables({"answers": new_answers}, {}),
                          _models_of(conn, new_answers, source["models"]))
        stored = import_into(conn, snap)
        if screens:
            conn.execute(platform_tables.answer_screens.insert(), screens)
        counts = {"cases": stored["cases"], "answers": len(screens),
                  "flagged": sum(s["status"] == "flagged" for s in screens),
                  "left_out": outside.num_rows}
        if then is not None:
            then(conn, counts)
    return counts


def _of_specialties(cases: pa.Table, specialties) -> pa.ChunkedArray:
    """Which cases are of one of ``specialties`` (a case without one is not)."""
    return pc.fill_null(pc.is_in(cases["specialty"], pa.array(list(specialties), pa.string())),
                        False)


def _check_answer_cases(engine: sa.Engine, study_id: str, answers: pa.Table,
                        cases: pa.Table) -> None:
    """Answers may be to the source's cases or the study's own; a case of
    another study is refused here, an unknown one by the importer."""
    elsewhere = pc.unique(answers["case_id"].filter(
        pc.invert(pc.is_in(answers["case_id"], cases["case_id"])))).to_pylist()
    if not elsewhere:
        return
    c = snapshot_tables.cases
    with engine.connect() as conn:
        foreign = conn.execute(sa.select(c.c.case_id).where(
            c.c.case_id.in_(elsewhere), c.c.study_id != study_id)).scalars().first()
    if foreign is not None:
        row = answers["case_id"].to_pylist().index(foreign) + 1
        raise InputError("answers", "the answer is to a case of another study", row=row,
                         field="case_id", got=foreign)


def _offered(engine: sa.Engine, study_id: str) -> list[str]:
    """The study's offered specialties."""
    with engine.connect() as conn:
        offered = conn.execute(sa.select(platform_tables.study_settings.c.specialties).where(
            platform_tables.study_settings.c.study_id == study_id)).scalar()
    if offered is None:
        raise InputError("add cases", "no such study", field="study", got=study_id)
    return json.loads(offered)


def store_rubric_version(conn: sa.Connection, study_id: str, rubric: Rubric,
                         user_id: str | None = None) -> None:
    """Keep a rubric version of the study with its texts (what clinicians see)."""
    conn.execute(platform_tables.study_rubric_versions.insert().values(
        study_id=study_id, version=str(rubric.version), rubric_id=rubric.rubric_id,
        rubric=json.dumps(rubric_to_dict(rubric)), created_at=datetime.now(UTC),
        created_by=user_id))


_MODEL_TERMS = ("model_id", "display_name", "version", "provider")


def _models_of(conn: sa.Connection, answers: pa.Table, sent: pa.Table) -> list[dict]:
    """The models of ``answers`` as the leak guard screens for them: those the
    source sent and those already stored (a source adding answers of a study's
    models need not send the models again)."""
    ids = set(answers["model_id"].to_pylist())
    rows = [m for m in sent.select(list(_MODEL_TERMS)).to_pylist() if m["model_id"] in ids]
    m = snapshot_tables.models
    rows += [r._asdict() for r in conn.execute(
        sa.select(*(m.c[c] for c in _MODEL_TERMS)).where(m.c.model_id.in_(sorted(ids))))]
    return rows


def _screen(study_id: str, snap: Snapshot, models: list[dict]) -> list[dict]:
    """Each answer's leak-guard verdict, screened for the names of ``models``."""
    terms = sorted({m[c] for m in models for c in _MODEL_TERMS if m[c]})
    guard, at = LeakGuard(terms), datetime.now(UTC)
    rows = []
    for answer_id, text in zip(
        snap["answers"]["answer_id"].to_pylist(), snap["answers"]["text"].to_pylist(), strict=True
    ):
        verdict = guard.screen(text)
        rows.append(
            {
                "study_id": study_id,
                "answer_id": answer_id,
                "screened_at": at,
                "status": "flagged" if verdict.flagged else "clear",
                "reason": verdict.reason,
            }
        )
    return rows


def rubric_versions(engine: sa.Engine, study_id: str) -> list[dict]:
    """The study's rubric versions, oldest first, with their texts when stored
    (``ratings.rubric_version`` names one of them)."""
    v, sr = platform_tables.study_rubric_versions, platform_tables.study_rubrics
    with engine.connect() as conn:
        current = conn.execute(sa.select(sr.c.version).where(sr.c.study_id == study_id)).scalar()
        rows = conn.execute(sa.select(v).where(v.c.study_id == study_id)
                            .order_by(v.c.created_at, v.c.version)).all()
    return [{"version": r.version, "rubric_id": r.rubric_id, "current": r.version == current,
             "created_at": r.created_at.isoformat(timespec="seconds"),
             "rubric": json.loads(r.rubric) if r.rubric else None} for r in rows]


# --- what an admin does to a study -----------------------------------------

def _number(form: dict, name: str, kind, default):
    raw = str(form.get(name) or "").strip()
    if not raw:
        return default
    try:
        return kind(raw)
    except ValueError:
        raise InputError("study form", "not a number", field=name, got=raw) from None


def plan_from_form(form: dict, rubric: Upload | None) -> StudyPlan:
    """A study plan from the admin's form (or the API's fields)."""
    rub = read_rubric(rubric)
    shown = [c.strip() for c in str(form.get("criteria") or "").split(",") if c.strip()]
    known = [c.criterion_id for c in rub.criteria]
    for c in shown:
        if c not in known:
            raise InputError("study form", "not a criterion of the rubric", field="criteria",
                             expected=", ".join(known), got=c)
    if shown:
        rub = rub.model_copy(update={"criteria": tuple(c for c in rub.criteria
                                                  if c.criterion_id in shown)})
    specialties = tuple(s.strip() for s in str(form.get("specialties") or "").split(",")
                        if s.strip())
    return StudyPlan(
        study_id=str(form.get("study_id") or "").strip(),
        name=str(form.get("name") or "").strip() or str(form.get("study_id") or ""),
        description=str(form.get("description") or "").strip() or None,
        consent_text=str(form.get("consent_text") or "").strip() or DEFAULT_CONSENT,
        rubric=rub,
        overlap_target=_number(form, "overlap_target", int, 3),
        pairwise_share=_number(form, "pairwise_share", float, 0.2),
        specialties=specialties,
        rationale_required=str(form.get("rationale_required", "yes")).lower()
        in ("yes", "true", "on", "1"),
        gates=form.get("gates") or None,
    )


def new_study(engine: sa.Engine, user_id: str, form: dict, source: Upload,
              rubric: Upload | None = None) -> dict:
    """Create a study from the form and an uploaded source; the creator becomes
    its admin. Nothing is written when the source or the form is bad."""
    return write_study(engine, user_id, *prepare_study(engine, form, source, rubric))


def prepare_study(engine: sa.Engine, form: dict, source: Upload, rubric: Upload | None = None
                  ) -> tuple[StudyPlan, Snapshot]:
    """What :func:`new_study` checks and reads before it writes: the plan from
    the form (the form is checked first) and the parsed source. Writes
    nothing and takes no lock, so the server runs it in a thread beside the
    clinicians' requests (a large upload takes seconds to parse)."""
    plan = plan_from_form(form, rubric)
    plan.check()
    with engine.connect() as conn:
        if conn.execute(sa.select(snapshot_tables.studies.c.study_id).where(
                snapshot_tables.studies.c.study_id == plan.study_id)).first():
            raise InputError("study form", "a study with this id exists", field="study_id",
                             got=plan.study_id)
    return plan, read_upload(source)


def write_study(engine: sa.Engine, user_id: str, plan: StudyPlan, snapshot: Snapshot) -> dict:
    """Store a study prepared by :func:`prepare_study` in one transaction,
    with the creator as its admin."""

    def creator_is_admin(conn: sa.Connection, counts: dict) -> None:
        record(conn, "study_created", user_id=user_id, study_id=plan.study_id,
                    detail=counts)
        conn.execute(platform_tables.memberships.insert().values(
            study_id=plan.study_id, user_id=user_id, role="admin", consented_at=now()))

    counts = create_study(engine, plan, snapshot, creator_is_admin)
    return {"study_id": plan.study_id, **counts}


def content_counts(engine: sa.Engine, study_id: str) -> dict[str, int]:
    c, a = snapshot_tables.cases, snapshot_tables.answers
    with engine.connect() as conn:
        cases = conn.execute(sa.select(sa.func.count()).where(
            c.c.study_id == study_id)).scalar_one()
        answers = conn.execute(sa.select(sa.func.count()).select_from(a).join(
            c, c.c.case_id == a.c.case_id).where(c.c.study_id == study_id)).scalar_one()
    return {"cases": cases, "answers": answers}


def add_cases_by(engine: sa.Engine, user_id: str, study_id: str, source: Upload | Snapshot
                 ) -> dict:
    """Add an uploaded source's cases and answers to the study, all or nothing
    (the importer's checks and messages), and log it. ``source`` may be
    parsed already (:func:`read_upload`)."""
    def logged(conn: sa.Connection, counts: dict) -> None:
        record(conn, "cases_added", user_id=user_id, study_id=study_id, detail=counts)

    snapshot = read_upload(source) if isinstance(source, Upload) else source
    counts = add_cases(engine, study_id, snapshot, logged)
    return {"study_id": study_id, **counts}


def new_rubric_version(engine: sa.Engine, user_id: str | None, study_id: str,
                       rubric) -> dict:
    """Make ``rubric`` (a :class:`~clinieval.schema.domain.Rubric`, or an
    :class:`Upload` of one) the study's current version: ratings given from
    now on record it. It must be the same rubric (id) under a version not used
    before, and keep every criterion the study shows."""
    if isinstance(rubric, Upload):
        if not rubric.content:
            raise InputError("rubric", "upload a rubric file", field="rubric")
        rubric = read_rubric(rubric)
    if has_nul(rubric.model_dump()):
        raise InputError("rubric", "contains a NUL character", field="rubric")
    sr = platform_tables.study_rubrics
    with db.writing(engine) as conn:
        current = conn.execute(sa.select(sr).where(sr.c.study_id == study_id)).first()
        cfg = study_config(conn, study_id)
        if current is None or cfg is None:
            raise InputError("rubric", "no such study", field="study", got=study_id)
        _check_new_version(conn, rubric, current, cfg.criteria)
        conn.execute(sr.update().where(sr.c.study_id == study_id)
                     .values(version=str(rubric.version)))
        store_rubric_version(conn, study_id, rubric, user_id)
        record(conn, "rubric_version_added", user_id=user_id, study_id=study_id,
                    subject=str(rubric.version), detail={"previous": current.version})
    return {"study_id": study_id, "version": str(rubric.version)}


def _check_new_version(conn: sa.Connection, rubric, current: sa.Row, shown: list[str]) -> None:
    v = platform_tables.study_rubric_versions
    if rubric.rubric_id != current.rubric_id:
        raise InputError("rubric", "a new version must be of the study's rubric",
                         field="rubric_id", expected=current.rubric_id, got=rubric.rubric_id)
    used = conn.execute(sa.select(v.c.version).where(
        v.c.study_id == current.study_id)).scalars().all()
    if str(rubric.version) in {*used, current.version}:
        raise InputError("rubric", "this version was already used in the study",
                         field="version", expected=f"not one of {', '.join(sorted(used))}",
                         got=rubric.version)
    missing = [c for c in shown if c not in rubric.ids]
    if missing:
        raise InputError("rubric", "the new version drops criteria the study shows",
                         field="criteria", got=", ".join(missing))


def set_gates(engine: sa.Engine, user_id: str | None, study_id: str, raw) -> list[dict]:
    """Replace the study's gates (checked against its criteria first; nothing
    is written when one is bad), logged as an admin event."""
    cfg = _config(engine, study_id)
    gates = parse_gates(raw, cfg.criteria, "study gates")
    with db.writing(engine) as conn:
        conn.execute(platform_tables.study_settings.update().where(
            platform_tables.study_settings.c.study_id == study_id).values(
            gates=gates_json(gates)))
        record(conn, "gates_set", user_id=user_id, study_id=study_id,
               detail={"gates": len(gates)})
    return [g.model_dump() for g in gates]


def _config(engine: sa.Engine, study_id: str):
    with engine.connect() as conn:
        cfg = study_config(conn, study_id)
    if cfg is None:
        raise InputError("study gates", "no such study", field="study_id", got=study_id)
    return cfg


def may_create_studies(conn: sa.Connection, user_id: str) -> bool:
    """Admins of any study may create more (the first admin comes from the CLI)."""
    m = platform_tables.memberships
    return conn.execute(sa.select(m.c.study_id).where(
        m.c.user_id == user_id, m.c.role == "admin")).first() is not None
