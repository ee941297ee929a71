"""Saving a task's unsubmitted answers (a draft) while the clinician works.

One call carries a save (:func:`save_draft`): in one write transaction it
reads the task's lease once, locked as a submission locks it (saves of one
task and its submission take turns), checks the body against the task, and
stores the draft. A save is refused once the task was submitted or its lease
lapsed beyond renewal; which of two pages' saves may replace the stored
draft is :func:`_draft_order`'s protocol.
"""

from __future__ import annotations

import json
import re

import sqlalchemy as sa
from pydantic import BaseModel, ConfigDict, ValidationInfo, field_validator

from clinieval.errors import InputError
from clinieval.platform.assignment import renewable, touch
from clinieval.platform.config import StudyConfig
from clinieval.platform.events import aware, now
from clinieval.platform.read_models import StoredDraft, criteria_views, stored_draft
from clinieval.platform.submissions import (
    MAX_COMMENT,
    Outcome,
    check_choice,
    check_value,
    locked_lease,
    task_fields,
)
from clinieval.storage import db
from clinieval.storage.schema import platform as platform_tables

MAX_DRAFT_FIELDS = 200
MAX_DRAFT_VERSION = 2**31
DRAFT_CHAIN = 4
"""Pages a draft save names before the one its page carries on from (``earlier``)."""
_PAGE_ID = re.compile(r"[A-Za-z0-9_-]{8,64}")


class DraftBody(BaseModel):
    """A draft save as sent. Each field is checked in the order declared and
    the first bad one is refused with an :class:`InputError` naming it (the
    validators raise it, so checking stops there); ``fields`` may hold only
    the task's own form fields, given as the validation context ``known``,
    each by the submission's rules (a draft may leave a field empty, never
    break a rule), and ``choice`` follows the task's ``kind`` (context too).
    Other keys are ignored."""

    model_config = ConfigDict(frozen=True, extra="ignore", validate_default=True)

    fields: dict[str, str] | None = None
    choice: str | None = None
    base: int | None = None
    seq: int | None = None
    continues_seq: int | None = None
    page: str | None = None
    continues: str | None = None
    earlier: list[tuple[str, int]] | None = None

    @field_validator("fields", mode="before")
    @classmethod
    def _fields(cls, fields: object, info: ValidationInfo) -> object:
        if not isinstance(fields, dict) or len(fields) > MAX_DRAFT_FIELDS:
            raise InputError("draft", "expected an object of form fields", field="fields")
        for name, value in fields.items():
            if name not in info.context["known"]:
                raise InputError("draft", "unknown field", field=str(name))
            if not isinstance(value, str) or len(value) > MAX_COMMENT:
                raise InputError("draft", "expected text", field=str(name))
            check_value("draft", name, value)
        return fields

    @field_validator("choice", mode="before")
    @classmethod
    def _choice(cls, choice: object, info: ValidationInfo) -> object:
        check_choice("draft", info.context["kind"], choice, required=False)
        return choice

    @field_validator("base", "seq", "continues_seq", mode="before")
    @classmethod
    def _number(cls, value: object, info: ValidationInfo) -> object:
        if value is not None and not (type(value) is int and 0 <= value < MAX_DRAFT_VERSION):
            raise InputError("draft", "expected a whole number (the draft version the page"
                             " started from, or a count of the page's changes)",
                             field=info.field_name)
        return value

    @field_validator("page", "continues", mode="before")
    @classmethod
    def _page(cls, value: object, info: ValidationInfo) -> object:
        if value is not None and not _is_page(value):
            raise InputError("draft", "expected a page id (8-64 letters, digits, - or _)",
                             field=info.field_name)
        return value

    @field_validator("earlier", mode="before")
    @classmethod
    def _earlier(cls, earlier: object) -> object:
        earlier = [] if earlier is None else earlier
        if not (isinstance(earlier, list) and len(earlier) <= DRAFT_CHAIN and all(
                isinstance(p, list) and len(p) == 2 and _is_page(p[0]) and type(p[1]) is int
                and 0 <= p[1] < MAX_DRAFT_VERSION for p in earlier)):
            raise InputError("draft", f"expected at most {DRAFT_CHAIN} [page id, change count]"
                             " pairs (the pages the one carried on from had carried on from)",
                             field="earlier")
        return earlier

    @property
    def numbers(self) -> dict:
        return {"base": self.base, "seq": self.seq, "continues_seq": self.continues_seq}

    @property
    def chain(self) -> list[tuple]:
        """The pages this one carries on from, each up to the change it was taken over at."""
        return [(self.continues, self.continues_seq), *self.earlier]


def save_draft(engine: sa.Engine, cfg: StudyConfig, token: str, user: sa.Row,
               body: object) -> Outcome:
    """Keep unsubmitted form state; only this task's own fields are accepted.
    The result's version is the draft's (1, 2, ... per save). With ``base``,
    the version the page started from, a page that did not see the draft's last
    save is refused unless it sends the same again, made that save (``page``,
    an id per page load) or carries on from the page that did (``continues``).
    A task that is not this clinician's in this study raises :class:`NoSuchTask`."""
    with db.writing(engine) as conn:
        # The task's row read once, locked, as a submission locks it: saves of one task
        # and its submission take turns (two saves at once had both deleted the old
        # draft and inserted theirs, and one failed on PostgreSQL).
        lease = locked_lease(conn, token, user.user_id, cfg.study_id)
        sent = DraftBody.model_validate(body if isinstance(body, dict) else {}, context={
            "known": task_fields(lease.kind, criteria_views(conn, cfg)), "kind": lease.kind})
        _check_open(conn, cfg, lease)
        return Outcome({"saved": True, "version": _store(conn, cfg, lease, sent)})


def _check_open(conn: sa.Connection, cfg: StudyConfig, lease: sa.Row) -> None:
    """Refuse a save of a task no longer open to its clinician."""
    if lease.status == "submitted":  # from another tab, or its answer was lost
        raise InputError("draft", "this task was submitted meanwhile (from another page,"
                         " or the answer to your submission did not arrive); press"
                         " Submit to store these answers as a new revision",
                         field="lease")
    if lease.status != "open" or (aware(lease.expires_at) <= now()
                                  and not renewable(conn, cfg, lease)):
        raise InputError("draft", "this task's lease has expired; take a new task",
                         field="lease")


def _store(conn: sa.Connection, cfg: StudyConfig, lease: sa.Row, sent: DraftBody) -> int:
    """Store the save if :func:`_draft_order` lets it replace the stored draft;
    returns the draft's version."""
    stored = stored_draft(conn, lease.token)
    if (stored.fields, stored.choice) == (dict(sent.fields), sent.choice or None):
        # The same again: a retry, or a reloaded page's copy of what its predecessor
        # sent. A later change of the page that saved it (changed and changed back)
        # is noted, so its save of the change between, arriving late, is taken
        # for late and not stored over it.
        if (stored.page is not None and stored.page == sent.page
                and None not in (sent.seq, stored.seq) and sent.seq > stored.seq):
            _put_draft(conn, lease.token, stored._replace(seq=sent.seq))
        touch(conn, cfg, lease.token)
        return stored.version
    verdict = _draft_order(stored, sent.numbers, sent.page, sent.chain)
    if verdict == "late":
        return stored.version  # this page's newer save is stored already
    if verdict == "stale":
        raise InputError("draft", "another page saved a newer draft of this task; reload"
                         " this page to carry on from it", field="base")
    _put_draft(conn, lease.token, StoredDraft(dict(sent.fields), sent.choice or None,
                                              stored.version + 1, sent.page, sent.seq))
    touch(conn, cfg, lease.token)
    return stored.version + 1


def _is_page(value: object) -> bool:
    return isinstance(value, str) and _PAGE_ID.fullmatch(value) is not None


def _put_draft(conn: sa.Connection, token: str, draft: StoredDraft) -> None:
    payload = json.dumps({"fields": draft.fields, "choice": draft.choice,
                          "version": draft.version, "page": draft.page, "seq": draft.seq})
    d = platform_tables.drafts
    conn.execute(d.delete().where(d.c.token == token))
    conn.execute(d.insert().values(token=token, data=payload, updated_at=now()))


def _draft_order(stored: StoredDraft, numbers: dict, page: str | None,
                 chain: list[tuple]) -> str:
    """Whether a save with a different content may replace the stored draft:
    "ok"; "late", an older save of the page that saved the stored one,
    arriving after it (saves may overtake each other); or "stale", a page
    that did not see the stored draft (another tab left open). A page may
    replace the draft it started from (``base``), one it saved itself, and
    one the page it carries on from (its browser copy, restored after a
    reload) saved up to the change that copy holds (``continues_seq``): that
    page's late save, not a later change it made while still open; and the
    same for the pages that one had carried on from (``earlier``, after
    several reloads): ``chain``, (page, change) pairs."""
    mine = page is not None and stored.page == page
    if mine and None not in (numbers["seq"], stored.seq) and numbers["seq"] <= stored.seq:
        return "late"
    if numbers["base"] is None or numbers["base"] == stored.version or mine:
        return "ok"
    carried = stored.seq is not None and any(
        before is not None and before == stored.page and seq is not None and stored.seq <= seq
        for before, seq in chain)
    return "ok" if carried else "stale"
