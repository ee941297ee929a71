"""Tables of the clinician platform: who may do what in which study, and the
state of open work (sessions, task leases, drafts, idempotency keys).

They sit beside the snapshot tables and never travel in a snapshot or an
export: they hold e-mail addresses, password hashes and session hashes.
Tokens handed to browsers (sessions, invitations) are stored only as SHA-256
digests, so a copy of the database does not let anyone sign in.
"""

from __future__ import annotations

import sqlalchemy as sa

from clinieval.contract import vocabulary
from clinieval.storage.schema.shared import metadata, one_of

TASK_KINDS = ("rating", "pair")
LEASE_STATUSES = ("open", "submitted", "skipped", "expired")
SCREEN_STATUSES = ("clear", "flagged")

_TS = sa.DateTime(timezone=True)

users = sa.Table(
    "users",
    metadata,
    sa.Column("user_id", sa.Text, primary_key=True),
    sa.Column("email", sa.Text, nullable=False, unique=True),
    sa.Column("password_hash", sa.Text, nullable=False),
    # The pseudonymous rater row this user's ratings are recorded under.
    sa.Column("rater_id", sa.Text, sa.ForeignKey("raters.rater_id"), nullable=False, unique=True),
    sa.Column("created_at", _TS, nullable=False),
)
"""Accounts. ``email`` is the sign-in name; it never leaves this table."""

memberships = sa.Table(
    "memberships",
    metadata,
    sa.Column("study_id", sa.Text, sa.ForeignKey("studies.study_id"), primary_key=True),
    sa.Column("user_id", sa.Text, sa.ForeignKey("users.user_id"), primary_key=True),
    sa.Column("role", sa.Text, nullable=False),
    sa.Column("consented_at", _TS),
    sa.CheckConstraint(one_of("role", vocabulary.ROLES), name="role_value"),
)
"""A user's role in one study; ``consented_at`` is set when the clinician
acknowledges the study's consent text."""

invitations = sa.Table(
    "invitations",
    metadata,
    sa.Column("token_hash", sa.Text, primary_key=True),
    sa.Column("study_id", sa.Text, sa.ForeignKey("studies.study_id"), nullable=False),
    sa.Column("role", sa.Text, nullable=False),
    sa.Column("created_at", _TS, nullable=False),
    sa.Column("expires_at", _TS, nullable=False),
    sa.Column("used_at", _TS),
    sa.Column("used_by", sa.Text, sa.ForeignKey("users.user_id")),
    sa.Column("email", sa.Text),
    sa.CheckConstraint(one_of("role", vocabulary.ROLES), name="role_value"),
)
"""Single-use, expiring invitations to a study with a role; one made for an
e-mail address (``email``, lower case) admits that address only, one made
without is a bearer link."""

sessions = sa.Table(
    "sessions",
    metadata,
    sa.Column("token_hash", sa.Text, primary_key=True),
    sa.Column("user_id", sa.Text, sa.ForeignKey("users.user_id"), nullable=False),
    sa.Column("created_at", _TS, nullable=False),
    sa.Column("expires_at", _TS, nullable=False),
    sa.Column("revoked_at", _TS),
)
"""Server-side sessions: signing out or an admin revoking a row ends it at once."""

study_settings = sa.Table(
    "study_settings",
    metadata,
    sa.Column("study_id", sa.Text, sa.ForeignKey("studies.study_id"), primary_key=True),
    sa.Column("overlap_target", sa.Integer, nullable=False),
    sa.Column("pairwise_share", sa.Float(precision=53), nullable=False),
    sa.Column("lease_minutes", sa.Integer, nullable=False),
    sa.Column("specialties", sa.Text, nullable=False),
    sa.Column("criteria", sa.Text, nullable=False),
    sa.Column("consent_text", sa.Text, nullable=False),
    sa.Column("gates", sa.Text),
    sa.Column("assignment", sa.Text),  # migration 0017
    sa.Column("monitor_share", sa.Float(precision=53)),
    sa.Column("escalation_step", sa.Integer),
    sa.Column("escalation_cap", sa.Integer),
    sa.CheckConstraint("overlap_target >= 1", name="overlap_positive"),
    sa.CheckConstraint("pairwise_share >= 0 AND pairwise_share <= 1", name="share_range"),
    sa.CheckConstraint("lease_minutes >= 1", name="lease_positive"),
)
"""How a study collects: ``specialties`` and ``criteria`` are JSON lists;
``gates`` a JSON list of its decision gates (NULL: a study made before gates
existed, which has none). Migration 0017: ``assignment`` ('even' or
'targeted'), ``monitor_share``, ``escalation_step`` and ``escalation_cap``
(NULL: the defaults of :class:`~clinieval.platform.config.StudyConfig`)."""

answer_screens = sa.Table(
    "answer_screens",
    metadata,
    sa.Column("study_id", sa.Text, sa.ForeignKey("studies.study_id"), primary_key=True),
    sa.Column("answer_id", sa.Text, sa.ForeignKey("answers.answer_id"), primary_key=True),
    sa.Column("status", sa.Text, nullable=False),
    sa.Column("reason", sa.Text),
    sa.Column("screened_at", _TS, nullable=False),
    sa.CheckConstraint(one_of("status", SCREEN_STATUSES), name="status_value"),
)
"""The leak guard's verdict per answer; only ``clear`` answers reach clinicians."""

task_leases = sa.Table(
    "task_leases",
    metadata,
    # The opaque token is the task's only address in URLs and pages.
    sa.Column("token", sa.Text, primary_key=True),
    sa.Column("study_id", sa.Text, sa.ForeignKey("studies.study_id"), nullable=False),
    sa.Column("user_id", sa.Text, sa.ForeignKey("users.user_id"), nullable=False),
    sa.Column("kind", sa.Text, nullable=False),
    sa.Column("answer_id", sa.Text, sa.ForeignKey("answers.answer_id"), nullable=False),
    sa.Column("answer_b_id", sa.Text, sa.ForeignKey("answers.answer_id")),
    sa.Column("shown_left", sa.Text),
    sa.Column("status", sa.Text, nullable=False),
    sa.Column("created_at", _TS, nullable=False),
    sa.Column("expires_at", _TS, nullable=False),
    sa.Column("preference_id", sa.BigInteger),
    # Migration 0017: the probability the answer had of being chosen (targeted
    # assignment); NULL for an even-spreading lease.
    sa.Column("probability", sa.Float(precision=53)),
    sa.CheckConstraint(one_of("kind", TASK_KINDS), name="kind_value"),
    sa.CheckConstraint(one_of("status", LEASE_STATUSES), name="status_value"),
    sa.CheckConstraint(one_of("shown_left", vocabulary.SIDES, nullable=True), name="side_value"),
    sa.CheckConstraint("(kind = 'pair') = (answer_b_id IS NOT NULL)", name="pair_has_b"),
)
"""One task given to one clinician. A rating task holds ``answer_id``; a pair
holds A and B and the side A was shown on. Open leases count against the
overlap target until they expire."""

drafts = sa.Table(
    "drafts",
    metadata,
    sa.Column("token", sa.Text, sa.ForeignKey("task_leases.token"), primary_key=True),
    sa.Column("data", sa.Text, nullable=False),
    sa.Column("updated_at", _TS, nullable=False),
)
"""Unsubmitted form state of a task (JSON), restored when it is reopened."""

idempotency_keys = sa.Table(
    "idempotency_keys",
    metadata,
    sa.Column("key", sa.Text, primary_key=True),
    sa.Column("user_id", sa.Text, sa.ForeignKey("users.user_id"), nullable=False),
    sa.Column("token", sa.Text, sa.ForeignKey("task_leases.token"), nullable=False),
    sa.Column("result", sa.Text, nullable=False),
    sa.Column("created_at", _TS, nullable=False),
)
"""A submission's key and its stored result: a retry gets the same answer and
writes nothing."""

audit_events = sa.Table(
    "audit_events",
    metadata,
    sa.Column("event_id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("at", _TS, nullable=False),
    sa.Column("kind", sa.Text, nullable=False),
    sa.Column("user_id", sa.Text),
    sa.Column("study_id", sa.Text),
    sa.Column("subject", sa.Text),
    sa.Column("detail", sa.Text),
    sa.Column("client", sa.Text),  # migration 0013
)
"""Who did what when: sign-ins (and failures, which the throttling counts by
address and by client), invitations, assignments, submissions."""

platform_secrets = sa.Table(
    "platform_secrets",
    metadata,
    sa.Column("name", sa.Text, primary_key=True),
    sa.Column("value", sa.Text, nullable=False),
)
"""The cookie-signing key when no ``CLINIEVAL_SECRET_KEY`` is set, so
sessions survive a restart."""

study_closures = sa.Table(
    "study_closures",
    metadata,
    sa.Column("study_id", sa.Text, sa.ForeignKey("studies.study_id"), primary_key=True),
    sa.Column("closed_at", _TS, nullable=False),
    sa.Column("user_id", sa.Text, sa.ForeignKey("users.user_id"), nullable=False),
    sa.Column("decisions", sa.Text, nullable=False),
)
"""A study an admin closed once every decision was settled (migration 0018):
no new tasks are handed out; ``decisions`` is the JSON table it closed on."""

sa.Index("ix_task_leases_answer", task_leases.c.answer_id, task_leases.c.status)
sa.Index("ix_task_leases_user", task_leases.c.user_id, task_leases.c.study_id,
         task_leases.c.status)
sa.Index("ix_audit_events_kind", audit_events.c.kind, audit_events.c.subject, audit_events.c.at)
sa.Index("ix_audit_events_client", audit_events.c.kind, audit_events.c.client, audit_events.c.at)

# --- study administration (migration 0005) ----------------------------------------

API_TOKEN_ROLES = tuple(r for r in vocabulary.ROLES if r not in ("clinician", "adjudicator"))
"""Roles an API token can carry: clinicians and adjudicators work in the browser."""

api_tokens = sa.Table(
    "api_tokens",
    metadata,
    sa.Column("token_hash", sa.Text, primary_key=True),
    sa.Column("label", sa.Text, nullable=False),
    # NULL: every study the owner administers (and creating new ones).
    sa.Column("study_id", sa.Text, sa.ForeignKey("studies.study_id")),
    sa.Column("user_id", sa.Text, sa.ForeignKey("users.user_id"), nullable=False),
    sa.Column("role", sa.Text, nullable=False),
    sa.Column("created_at", _TS, nullable=False),
    sa.Column("revoked_at", _TS),
    sa.CheckConstraint(one_of("role", API_TOKEN_ROLES), name="role_value"),
)
"""Bearer tokens of the JSON API, stored as SHA-256 digests like sessions."""

SCREEN_DECISIONS = ("release", "withdraw")

screen_decisions = sa.Table(
    "screen_decisions",
    metadata,
    sa.Column("decision_id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("study_id", sa.Text, sa.ForeignKey("studies.study_id"), nullable=False),
    sa.Column("answer_id", sa.Text, sa.ForeignKey("answers.answer_id"), nullable=False),
    sa.Column("decision", sa.Text, nullable=False),
    sa.Column("user_id", sa.Text, sa.ForeignKey("users.user_id"), nullable=False),
    sa.Column("decided_at", _TS, nullable=False),
    sa.CheckConstraint(one_of("decision", SCREEN_DECISIONS), name="decision_value"),
)
"""An admin's decision on a flagged answer. Released answers turn ``clear``;
withdrawn ones stay ``flagged`` (never shown) and leave the review queue."""

study_rubrics = sa.Table(
    "study_rubrics",
    metadata,
    sa.Column("study_id", sa.Text, sa.ForeignKey("studies.study_id"), primary_key=True),
    sa.Column("rubric_id", sa.Text, nullable=False),
    sa.Column("version", sa.Text, nullable=False),
    sa.Column("rationale_required", sa.Boolean, nullable=False),
)
"""The rubric (id and current version) a study's ratings are given under, and
whether a safety-critical score <= -1 needs a rationale. Each rating records
the version current when it was given (``ratings.rubric_version``)."""

# --- sign-in links, rubric versions (migration 0006) ---------------------------------

signin_links = sa.Table(
    "signin_links",
    metadata,
    sa.Column("token_hash", sa.Text, primary_key=True),
    sa.Column("user_id", sa.Text, sa.ForeignKey("users.user_id"), nullable=False),
    sa.Column("created_at", _TS, nullable=False),
    sa.Column("expires_at", _TS, nullable=False),
    sa.Column("used_at", _TS),
)
"""Single-use, expiring sign-in links for an existing account (``serve --demo``
prints them instead of passwords); stored as SHA-256 digests."""

study_rubric_versions = sa.Table(
    "study_rubric_versions",
    metadata,
    sa.Column("study_id", sa.Text, sa.ForeignKey("studies.study_id"), primary_key=True),
    sa.Column("version", sa.Text, primary_key=True),
    sa.Column("rubric_id", sa.Text, nullable=False),
    # The rubric file as JSON: the criteria texts clinicians see under this version.
    sa.Column("rubric", sa.Text),
    sa.Column("created_at", _TS, nullable=False),
    sa.Column("created_by", sa.Text, sa.ForeignKey("users.user_id")),
)
"""Every rubric version a study has used; ``study_rubrics.version`` is the
current one. Rows migrated from before 0006 have no stored ``rubric`` (their
texts are the criteria table's)."""

# --- load counters and lookup indexes (migration 0006_webperf) ----------------------

answer_load = sa.Table(
    "answer_load",
    metadata,
    sa.Column("answer_id", sa.Text, primary_key=True),
    sa.Column("study_id", sa.Text, primary_key=True),
    sa.Column("case_id", sa.Text, nullable=False),
    sa.Column("model_id", sa.Text, nullable=False),
    sa.Column("specialty", sa.Text, nullable=False),
    sa.Column("submitted", sa.Integer, nullable=False),
)
"""Per screened answer of a study: how many distinct raters have rated it.
A derived table kept by database triggers (see :mod:`clinieval.storage.counters`)
in the transaction of every write to ``answer_screens`` and ``ratings``,
whoever writes, so picking the least-covered answer is an index scan."""

pair_load = sa.Table(
    "pair_load",
    metadata,
    sa.Column("study_id", sa.Text, primary_key=True),
    sa.Column("model_lo", sa.Text, primary_key=True),
    sa.Column("model_hi", sa.Text, primary_key=True),
    sa.Column("votes", sa.Integer, nullable=False),
)
"""Votes per unordered model pair of a study (``model_lo`` < ``model_hi``),
kept by a trigger on ``preferences`` like :data:`answer_load`."""

rater_load = sa.Table(
    "rater_load",
    metadata,
    sa.Column("study_id", sa.Text, primary_key=True),
    sa.Column("rater_id", sa.Text, primary_key=True),
    sa.Column("answers", sa.Integer, nullable=False),
    sa.Column("votes", sa.Integer, nullable=False),
    sa.Column("ms", sa.Float, nullable=False),
)
"""Per rater of a study: screened answers rated (first ratings, revision 0),
votes (first votes) and the time spent on the rated answers in milliseconds
(per answer the longest time recorded with its first ratings), kept by
triggers like :data:`answer_load`, so the progress page reads one row per
clinician instead of every rating."""

sa.Index("ix_answer_load_pick", answer_load.c.study_id, answer_load.c.specialty,
         answer_load.c.submitted, answer_load.c.answer_id)
sa.Index("ix_task_leases_answer_b", task_leases.c.answer_b_id, task_leases.c.status)
sa.Index("ix_task_leases_study", task_leases.c.study_id, task_leases.c.status,
         task_leases.c.expires_at)
# Migration 0007: the "not already theirs" probe of each candidate answer (answer and
# clinician); without it SQLite walked all of the clinician's past leases per candidate.
sa.Index("ix_task_leases_answer_user", task_leases.c.answer_id, task_leases.c.user_id)

# --- decision-targeted assignment (migration 0017) -----------------------------------

answer_priorities = sa.Table(
    "answer_priorities",
    metadata,
    sa.Column("study_id", sa.Text, sa.ForeignKey("studies.study_id"), primary_key=True),
    sa.Column("answer_id", sa.Text, sa.ForeignKey("answers.answer_id"), primary_key=True),
    sa.Column("specialty", sa.Text, nullable=False),
    sa.Column("extra", sa.Integer, nullable=False, server_default="0"),
    sa.Column("share", sa.Float(precision=53)),
    sa.Column("pick_key", sa.Float(precision=53)),
)
"""Per answer of a study: ``extra`` raters beyond the overlap target (raised
in the submission's transaction when a clinician alarms on a safety-critical
criterion), and, for targeted assignment, ``share`` (the probability the
answer has of being chosen among its specialty's answers with room) and
``pick_key`` (an exponential key with rate ``share``: walking a specialty's
answers by key draws them with those probabilities), both written by
:func:`clinieval.platform.targeting.refresh_priorities` off the request path."""

assignment_offers = sa.Table(
    "assignment_offers",
    metadata,
    sa.Column("study_id", sa.Text, sa.ForeignKey("studies.study_id"), primary_key=True),
    sa.Column("specialty", sa.Text, primary_key=True),
    sa.Column("offer", sa.Float(precision=53), nullable=False),
)
"""Targeted assignment: the probability a clinician of the specialty is
offered a rating task at all (1 while a decision there is open; the study's
monitoring share once all are settled), written with the priorities."""

sa.Index("ix_answer_priorities_pick", answer_priorities.c.study_id,
         answer_priorities.c.specialty, answer_priorities.c.pick_key)
