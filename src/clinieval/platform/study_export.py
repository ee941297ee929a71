"""A study leaving the platform: its slice of the database (with its gates,
adjudications and decision log), and the pseudonymous bundle of it
(``clinieval study export``, the admin's zip with the audit log beside it).
Rater ids leave only salted, under a salt that is never the public default.
"""

from __future__ import annotations

import io
import json
import shutil
import tempfile
import zipfile
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import sqlalchemy as sa

from clinieval.errors import InputError
from clinieval.platform.events import audit_log, aware, record
from clinieval.platform.studies import rubric_versions
from clinieval.snapshot import Snapshot
from clinieval.storage import db
from clinieval.storage.schema import platform as platform_tables


def study_snapshot(engine: sa.Engine, study_id: str) -> Snapshot:
    """The study's slice of the database: its cases, their answers and models,
    the ratings and votes given on them and the raters who gave them."""
    snap = db.read_snapshot(engine)
    if study_id not in snap["studies"]["study_id"].to_pylist():
        raise InputError("study export", "no such study", field="study", got=study_id)
    t = snap.tables
    cases = t["cases"].filter(pc.equal(t["cases"]["study_id"], study_id))
    answers = t["answers"].filter(pc.is_in(t["answers"]["case_id"], cases["case_id"]))
    ratings = t["ratings"].filter(pc.is_in(t["ratings"]["answer_id"], answers["answer_id"]))
    prefs = t["preferences"].filter(pc.is_in(t["preferences"]["case_id"], cases["case_id"]))
    verdicts = t["adjudications"].filter(
        pc.is_in(t["adjudications"]["answer_id"], answers["answer_id"]))
    raters_used = pa.concat_arrays(
        [ratings["rater_id"].combine_chunks(), prefs["rater_id"].combine_chunks(),
         verdicts["rater_id"].combine_chunks()]
    )
    with engine.connect() as conn:
        ids, gates = conn.execute(
            sa.select(platform_tables.study_settings.c.criteria,
                      platform_tables.study_settings.c.gates).where(
                platform_tables.study_settings.c.study_id == study_id
            )
        ).one()
    ids = json.loads(ids)
    tables = {
        "studies": t["studies"].filter(pc.equal(t["studies"]["study_id"], study_id)),
        "cases": cases,
        "answers": answers,
        "ratings": ratings,
        "preferences": prefs,
        "models": t["models"].filter(pc.is_in(t["models"]["model_id"], answers["model_id"])),
        "criteria": t["criteria"].filter(pc.is_in(t["criteria"]["criterion_id"], pa.array(ids))),
        "raters": t["raters"].filter(pc.is_in(t["raters"]["rater_id"], raters_used)),
        "judgments": t["judgments"].filter(
            pc.is_in(t["judgments"]["answer_id"], answers["answer_id"])
        ),
        "adjudications": verdicts,
    }
    meta = {**snap.meta, "study_id": study_id, "rubric_versions": rubric_versions(engine, study_id),
            "gates": json.loads(gates) if gates else [],
            "decision_log": decision_log(engine, study_id)}
    assignment = assignment_record(engine, study_id)
    if assignment is not None:
        meta["assignment"] = assignment
    return Snapshot.from_tables(tables, meta)


def assignment_record(engine: sa.Engine, study_id: str) -> dict | None:
    """How the study chose answers, for the audit's weights: its mode and,
    per answer, the probability recorded on the lease that first brought it
    to a clinician (a rating task, submitted). Answer ids only: nothing here
    names a clinician. None for a study that spread evenly throughout."""
    tl, ss = platform_tables.task_leases, platform_tables.study_settings
    with engine.connect() as conn:
        mode, share = conn.execute(sa.select(ss.c.assignment, ss.c.monitor_share).where(
            ss.c.study_id == study_id)).one()
        rows = conn.execute(
            sa.select(tl.c.answer_id, tl.c.probability)
            .where(tl.c.study_id == study_id, tl.c.kind == "rating", tl.c.status == "submitted")
            .order_by(tl.c.created_at, tl.c.token)).all()
    first: dict[str, float | None] = {}
    for answer_id, probability in rows:
        first.setdefault(answer_id, probability)
    if mode != "targeted" and all(p is None for p in first.values()):
        return None
    return {"mode": mode or "even", "monitor_share": share,
            "probability": {a: p for a, p in sorted(first.items()) if p is not None}}


DECISION_EVENTS = ("gates_set", "adjudicated", "study_closed")
"""The events of a study's decision log: its gates as set, each adjudication,
and closing the study (which records the verdicts it was closed on)."""


def decision_log(engine: sa.Engine, study_id: str) -> list[dict]:
    """The study's decision events, oldest first, without who acted (an
    adjudication's rows carry their adjudicator's pseudonym)."""
    e = platform_tables.audit_events
    with engine.connect() as conn:
        rows = conn.execute(sa.select(e.c.at, e.c.kind, e.c.detail).where(
            e.c.study_id == study_id, e.c.kind.in_(DECISION_EVENTS)).order_by(e.c.event_id))
        return [{"at": aware(r.at).isoformat(timespec="seconds"), "kind": r.kind,
                 "detail": json.loads(r.detail) if r.detail else None} for r in rows]


def export_study(engine: sa.Engine, study_id: str, out: Path, *, salt: str,
                 overwrite: bool = False, **options) -> dict:
    """Write the study as a bundle with pseudonymous rater ids; ``options`` are
    :func:`clinieval.io.export.export_snapshot`'s (e.g. quasi-identifiers)."""
    from clinieval.io.export import export_snapshot

    return export_snapshot(study_snapshot(engine, study_id), out, salt=salt,
                           overwrite=overwrite, **options)


def export_salt(engine: sa.Engine) -> str:
    """The pseudonym salt of exports from the browser: the configured one, or
    else a secret one created once per database (never the public default,
    from which anyone could recompute the pseudonyms)."""
    import secrets

    from clinieval.io.export import DEFAULT_SALT
    from clinieval.settings import get_settings

    configured = get_settings().pseudonym_salt
    if configured != DEFAULT_SALT:
        return configured
    table = platform_tables.platform_secrets
    stored = sa.select(table.c.value).where(table.c.name == "pseudonym_salt")
    with db.reading(engine) as conn:  # once created, read without the write lock
        value = conn.execute(stored).scalar()
    if value is not None:
        return value
    with db.writing(engine) as conn:
        value = conn.execute(stored).scalar()
        if value is None:
            value = secrets.token_hex(32)
            conn.execute(table.insert().values(name="pseudonym_salt", value=value))
    return value


def export_zip(engine: sa.Engine, user_id: str, study_id: str) -> bytes:
    """The study's pseudonymous bundle (what ``clinieval study export`` writes),
    with the audit log beside it, as a zip archive."""
    folder = Path(tempfile.mkdtemp(prefix="clinieval-export-"))
    try:
        bundle = folder / f"{study_id}-export"
        export_study(engine, study_id, bundle, salt=export_salt(engine))
        with db.writing(engine) as conn:
            record(conn, "exported", user_id=user_id, study_id=study_id)
        # Who acted (and on whom) is left out: the bundle's rater ids are salted.
        log = [{k: v for k, v in e.items() if k not in ("who", "subject")}
               for e in audit_log(engine, study_id)]
        buffer = io.BytesIO()
        with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as zf:
            for path in sorted(bundle.rglob("*")):
                if path.is_file():
                    zf.write(path, path.relative_to(folder).as_posix())
            zf.writestr(f"{study_id}-audit-log.json", json.dumps(log, indent=1))
        return buffer.getvalue()
    finally:
        shutil.rmtree(folder, ignore_errors=True)
