"""``clinieval serve --demo``: a small study from the bundled demo snapshot,
with a demo clinician, a demo admin (each reached by a one-time sign-in link;
no password is printed) and an invitation link.

The demo snapshot stores answer lengths but no answer text, so readable
stand-in answers are written here, deterministically per answer id. A study
made from it (``serve --demo``, ``study create --source demo``) gets case and
answer ids of its own, prefixed with the study's id: a case belongs to one
study, and ``clinieval demo`` stores the snapshot's own cases in the same
database, so each would otherwise refuse the others.
"""

from __future__ import annotations

import hashlib
import secrets
from datetime import UTC, datetime

import pyarrow as pa
import pyarrow.compute as pc
import sqlalchemy as sa

from clinieval.demo import demo_snapshot
from clinieval.platform import accounts
from clinieval.platform.studies import StudyPlan, create_study
from clinieval.rubric import load_rubric
from clinieval.snapshot import Snapshot
from clinieval.storage import db
from clinieval.storage.schema import platform as platform_tables
from clinieval.storage.schema import snapshot as snapshot_tables

DEMO_STUDY = "demo"
DEMO_SPECIALTIES = ("Cardiology ECG", "Pathology", "Pulmonology")

_OPENINGS = (
    "The most likely explanation should be confirmed before treatment is changed.",
    "Start by checking for warning signs that need same-day assessment.",
    "A careful history usually settles this question.",
    "This can usually be managed in primary care with clear safety-netting.",
)
_BODIES = (
    "Review current medicines, allergies and kidney function, then choose the lowest effective"
    " dose and arrange follow-up within two weeks.",
    "Explain the expected course, what to watch for, and when to return; document shared"
    " decisions in the notes.",
    "If chest pain, breathlessness at rest or confusion develop, the patient should seek"
    " emergency care immediately.",
    "Local guidelines and resource availability should shape the choice of tests.",
)


def stand_in_text(answer_id: str, prompt: str | None) -> str:
    """A short, plausible answer chosen by a hash of the answer id."""
    h = hashlib.sha256(answer_id.encode()).digest()
    topic = (prompt or "the question").split(":", 1)[-1].strip().rstrip("?")
    return (
        f"Regarding {topic[:1].lower()}{topic[1:]}: {_OPENINGS[h[0] % len(_OPENINGS)]} "
        f"{_BODIES[h[1] % len(_BODIES)]} {_BODIES[h[2] % len(_BODIES)]}"
    )


def demo_source(study_id: str | None = None) -> Snapshot:
    """The bundled demo snapshot with stand-in answer texts; with ``study_id``,
    only its cases, answers and models, under ids of that study's own."""
    snap = demo_snapshot()
    answers, cases = snap["answers"], snap["cases"]
    prompts = dict(zip(cases["case_id"].to_pylist(), cases["prompt"].to_pylist(), strict=True))
    texts = [
        stand_in_text(a, prompts.get(c))
        for a, c in zip(
            answers["answer_id"].to_pylist(), answers["case_id"].to_pylist(), strict=True
        )
    ]
    index = answers.schema.get_field_index("text")
    answers = answers.set_column(index, "text", pa.array(texts))
    if study_id is None:
        return Snapshot({**snap.tables, "answers": answers}, snap.meta)
    return Snapshot.from_tables(
        {**snap.tables, **_own_ids(study_id, cases, answers), "ratings": None,
         "preferences": None, "judgments": None, "raters": None}, snap.meta)


def _own_ids(study_id: str, cases: pa.Table, answers: pa.Table) -> dict[str, pa.Table]:
    """Cases and answers under ids prefixed with ``study_id``."""
    def prefixed(table: pa.Table, *columns: str) -> pa.Table:
        for column in columns:
            ids = pc.binary_join_element_wise(study_id, table[column], ":")
            table = table.set_column(table.schema.get_field_index(column), column, ids)
        return table

    return {"cases": prefixed(cases, "case_id"),
            "answers": prefixed(answers, "answer_id", "case_id")}


def setup_demo(engine: sa.Engine, link_minutes: int = accounts.SIGNIN_LINK_MINUTES
               ) -> dict[str, str]:
    """Create the demo study and two accounts (once); returns a fresh one-time
    sign-in token for each account and a clinician invitation token."""
    with engine.connect() as conn:
        exists = conn.execute(
            sa.select(snapshot_tables.studies.c.study_id)
            .where(snapshot_tables.studies.c.study_id == DEMO_STUDY)
        ).first()
    if exists is None:
        plan = StudyPlan(DEMO_STUDY, "Demo study", load_rubric(), specialties=DEMO_SPECIALTIES)
        create_study(engine, plan, demo_source(DEMO_STUDY))
    out = {"invitation": accounts.create_invitation(engine, DEMO_STUDY, "clinician")}
    for role in ("clinician", "admin"):
        user_id = _demo_account(engine, f"demo-{role}@example.org", role)
        out[role] = accounts.create_signin_link(engine, user_id, link_minutes)
    return out


def _demo_account(engine: sa.Engine, email: str, role: str) -> str:
    """The demo account's user id, created with its profile and consent in
    place. Its password is random and never shown: the sign-in links open it."""
    with engine.connect() as conn:
        existing = conn.execute(
            sa.select(platform_tables.users.c.user_id)
            .where(platform_tables.users.c.email == email)).scalar()
    if existing is not None:
        return existing
    token = accounts.create_invitation(engine, DEMO_STUDY, role)
    user_id = accounts.register(engine, token, email, secrets.token_urlsafe(24))
    with db.writing(engine) as conn:
        rater = conn.execute(sa.select(platform_tables.users.c.rater_id)
                             .where(platform_tables.users.c.user_id == user_id))
        conn.execute(
            snapshot_tables.raters.update()
            .where(snapshot_tables.raters.c.rater_id == rater.scalar_one())
            .values(
                specialty=DEMO_SPECIALTIES[0],
                country="Demo",
                organisation="Demo hospital",
                experience_years=10,
                role="specialist",
            )
        )
        conn.execute(
            platform_tables.memberships.update()
            .where(platform_tables.memberships.c.user_id == user_id)
            .values(consented_at=datetime.now(UTC))
        )
    return user_id
