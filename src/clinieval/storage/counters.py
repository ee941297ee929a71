"""Load counters of the clinician platform, kept by the database itself.

``answer_load`` holds, per screened answer of a study, its case, model,
specialty and the number of distinct raters who rated it; ``pair_load``
holds the votes per unordered model pair of a study. Triggers on
``answer_screens``, ``ratings`` and ``preferences`` keep them in the same
transaction as the write, whoever writes (the platform, ``clinieval
import``, a study created or extended later), so assignment reads the
least-covered answers of a specialty from an index instead of counting
ratings, and the progress page aggregates 1 row per answer.

Ratings and votes are append-only (an edit is a new revision row), so
inserts and deletes are all the triggers follow. :func:`recount` derives the
same numbers from the source tables; tests compare the two.
"""

from __future__ import annotations

import sqlalchemy as sa

from clinieval.storage import platform_tables as P
from clinieval.storage import sqltables as S

_NEW_ANSWER = """
    SELECT {row}.study_id, {row}.answer_id, a.case_id, a.model_id, c.specialty,
           (SELECT count(DISTINCT r.rater_id) FROM ratings r WHERE r.answer_id = {row}.answer_id)
    FROM answers a JOIN cases c ON c.case_id = a.case_id
    WHERE a.answer_id = {row}.answer_id"""

# Asked first, so that rows of answers in no platform study (a plain
# ``clinieval import``) cost one probe of a small index and nothing more.
_COUNTED = "EXISTS (SELECT 1 FROM answer_load l WHERE l.answer_id = {row}.answer_id)"

_FIRST_OF_RATER = _COUNTED + """ AND NOT EXISTS (SELECT 1 FROM ratings o
    WHERE o.answer_id = {row}.answer_id AND o.rater_id = {row}.rater_id
    AND o.rating_id <> {row}.rating_id)"""

_PAIR = """
    SELECT c.study_id, {lo}(a1.model_id, a2.model_id), {hi}(a1.model_id, a2.model_id){votes}
    FROM answers a1, answers a2, cases c
    WHERE a1.answer_id = {row}.answer_a_id AND a2.answer_id = {row}.answer_b_id
      AND c.case_id = {row}.case_id AND c.study_id IS NOT NULL"""

# A vote counts once however often it is edited: its edits are rows with
# revision 1, 2, ... (migration 0006_webfeat); only revision 0 (or a row
# imported without revisions) is counted.
_FIRST_VOTE = "coalesce({row}.revision, 0) = 0"

_INSERT_LOAD = ("INSERT INTO answer_load (study_id, answer_id, case_id, model_id, specialty,"
                " submitted)")

SQLITE = [
    f"""CREATE TRIGGER answer_load_screened AFTER INSERT ON answer_screens BEGIN
        {_INSERT_LOAD} {_NEW_ANSWER.format(row="NEW")} ON CONFLICT DO NOTHING; END""",
    """CREATE TRIGGER answer_load_unscreened AFTER DELETE ON answer_screens BEGIN
        DELETE FROM answer_load WHERE answer_id = OLD.answer_id AND study_id = OLD.study_id;
        END""",
    f"""CREATE TRIGGER answer_load_rated AFTER INSERT ON ratings
        WHEN {_FIRST_OF_RATER.format(row="NEW")} BEGIN
        UPDATE answer_load SET submitted = submitted + 1 WHERE answer_id = NEW.answer_id; END""",
    f"""CREATE TRIGGER answer_load_unrated AFTER DELETE ON ratings
        WHEN {_FIRST_OF_RATER.format(row="OLD")} BEGIN
        UPDATE answer_load SET submitted = submitted - 1 WHERE answer_id = OLD.answer_id; END""",
    f"""CREATE TRIGGER pair_load_voted AFTER INSERT ON preferences
        WHEN {_FIRST_VOTE.format(row="NEW")} BEGIN
        INSERT INTO pair_load (study_id, model_lo, model_hi, votes)
        {_PAIR.format(lo="min", hi="max", row="NEW", votes=", 1")}
        ON CONFLICT (study_id, model_lo, model_hi) DO UPDATE SET votes = votes + 1; END""",
    f"""CREATE TRIGGER pair_load_unvoted AFTER DELETE ON preferences
        WHEN {_FIRST_VOTE.format(row="OLD")} BEGIN
        UPDATE pair_load SET votes = votes - 1 WHERE (study_id, model_lo, model_hi) IN
        ({_PAIR.format(lo="min", hi="max", row="OLD", votes="")}); END""",
]
SQLITE_NAMES = ("answer_load_screened", "answer_load_unscreened", "answer_load_rated",
                "answer_load_unrated", "pair_load_voted", "pair_load_unvoted")


def _pg_function(name: str, body: str, returns: str = "NULL") -> str:
    return (f"CREATE FUNCTION {name}() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN {body}"
            f" RETURN {returns}; END $$")


# PostgreSQL runs AFTER ROW triggers once the whole statement is done, when
# every row of a multi-row INSERT (or COPY) is visible; BEFORE ROW triggers
# see the rows the statement processed so far, so "first row of this rater
# on this answer" is asked there.
_FIRST_BEFORE_INSERT = _COUNTED.format(row="NEW") + """ AND NOT EXISTS (SELECT 1 FROM ratings o
    WHERE o.answer_id = NEW.answer_id AND o.rater_id = NEW.rater_id)"""


POSTGRES = [
    _pg_function("answer_load_screened",
                 f"{_INSERT_LOAD} {_NEW_ANSWER.format(row='NEW')} ON CONFLICT DO NOTHING;"),
    _pg_function("answer_load_unscreened",
                 "DELETE FROM answer_load WHERE answer_id = OLD.answer_id"
                 " AND study_id = OLD.study_id;"),
    _pg_function("answer_load_rated",
                 f"IF {_FIRST_BEFORE_INSERT} THEN UPDATE answer_load SET"
                 " submitted = submitted + 1 WHERE answer_id = NEW.answer_id; END IF;", "NEW"),
    _pg_function("answer_load_unrated",
                 f"IF {_FIRST_OF_RATER.format(row='OLD')} THEN UPDATE answer_load SET"
                 " submitted = submitted - 1 WHERE answer_id = OLD.answer_id; END IF;", "OLD"),
    _pg_function("pair_load_voted",
                 f"IF {_FIRST_VOTE.format(row='NEW')} THEN"
                 " INSERT INTO pair_load (study_id, model_lo, model_hi, votes)"
                 f" {_PAIR.format(lo='LEAST', hi='GREATEST', row='NEW', votes=', 1')}"
                 " ON CONFLICT (study_id, model_lo, model_hi) DO UPDATE"
                 " SET votes = pair_load.votes + 1; END IF;"),
    _pg_function("pair_load_unvoted",
                 f"IF {_FIRST_VOTE.format(row='OLD')} THEN"
                 " UPDATE pair_load SET votes = votes - 1 WHERE (study_id, model_lo, model_hi) IN"
                 f" ({_PAIR.format(lo='LEAST', hi='GREATEST', row='OLD', votes='')}); END IF;"),
    "CREATE TRIGGER answer_load_screened AFTER INSERT ON answer_screens FOR EACH ROW"
    " EXECUTE FUNCTION answer_load_screened()",
    "CREATE TRIGGER answer_load_unscreened AFTER DELETE ON answer_screens FOR EACH ROW"
    " EXECUTE FUNCTION answer_load_unscreened()",
    "CREATE TRIGGER answer_load_rated BEFORE INSERT ON ratings FOR EACH ROW"
    " EXECUTE FUNCTION answer_load_rated()",
    "CREATE TRIGGER answer_load_unrated BEFORE DELETE ON ratings FOR EACH ROW"
    " EXECUTE FUNCTION answer_load_unrated()",
    "CREATE TRIGGER pair_load_voted AFTER INSERT ON preferences FOR EACH ROW"
    " EXECUTE FUNCTION pair_load_voted()",
    "CREATE TRIGGER pair_load_unvoted AFTER DELETE ON preferences FOR EACH ROW"
    " EXECUTE FUNCTION pair_load_unvoted()",
]
_PG_TABLES = {"answer_load_screened": "answer_screens", "answer_load_unscreened": "answer_screens",
              "answer_load_rated": "ratings", "answer_load_unrated": "ratings",
              "pair_load_voted": "preferences", "pair_load_unvoted": "preferences"}


def install(conn: sa.Connection) -> None:
    """Create the triggers and fill both tables from the stored rows."""
    for statement in POSTGRES if conn.dialect.name == "postgresql" else SQLITE:
        conn.exec_driver_sql(statement)
    conn.execute(P.answer_load.delete())
    conn.execute(P.pair_load.delete())
    conn.execute(P.answer_load.insert().from_select(
        ["study_id", "answer_id", "case_id", "model_id", "specialty", "submitted"],
        _answer_counts()))
    conn.execute(P.pair_load.insert().from_select(
        ["study_id", "model_lo", "model_hi", "votes"], _pair_counts()))


def uninstall(conn: sa.Connection) -> None:
    for name, table in _PG_TABLES.items():
        if conn.dialect.name == "postgresql":
            conn.exec_driver_sql(f"DROP TRIGGER IF EXISTS {name} ON {table}")
            conn.exec_driver_sql(f"DROP FUNCTION IF EXISTS {name}()")
        else:
            conn.exec_driver_sql(f"DROP TRIGGER IF EXISTS {name}")


def _answer_counts() -> sa.Select:
    s, a, c, r = P.answer_screens, S.answers, S.cases, S.ratings
    raters = (sa.select(r.c.answer_id, sa.func.count(sa.distinct(r.c.rater_id)).label("k"))
              .group_by(r.c.answer_id).subquery())
    return (sa.select(s.c.study_id, s.c.answer_id, a.c.case_id, a.c.model_id, c.c.specialty,
                      sa.func.coalesce(raters.c.k, 0))
            .join(a, a.c.answer_id == s.c.answer_id).join(c, c.c.case_id == a.c.case_id)
            .outerjoin(raters, raters.c.answer_id == s.c.answer_id))


def _pair_counts() -> sa.Select:
    p, c = S.preferences, S.cases
    a1, a2 = S.answers.alias("a1"), S.answers.alias("a2")
    lo = sa.case((a1.c.model_id < a2.c.model_id, a1.c.model_id), else_=a2.c.model_id)
    hi = sa.case((a1.c.model_id < a2.c.model_id, a2.c.model_id), else_=a1.c.model_id)
    return (sa.select(c.c.study_id, lo, hi, sa.func.count())
            .select_from(p).join(a1, a1.c.answer_id == p.c.answer_a_id)
            .join(a2, a2.c.answer_id == p.c.answer_b_id).join(c, c.c.case_id == p.c.case_id)
            .where(c.c.study_id.is_not(None), sa.func.coalesce(p.c.revision, 0) == 0)
            .group_by(c.c.study_id, lo, hi))


def recount(conn: sa.Connection) -> tuple[dict, dict]:
    """Both counters as derived from the source tables, keyed like the tables."""
    answers = {(row[0], row[1]): tuple(row[2:]) for row in conn.execute(_answer_counts())}
    pairs = {tuple(row[:3]): row[3] for row in conn.execute(_pair_counts())}
    return answers, pairs


def stored(conn: sa.Connection) -> tuple[dict, dict]:
    """Both counters as stored (pairs whose votes dropped to 0 left out)."""
    al, pl = P.answer_load, P.pair_load
    answers = {(row[0], row[1]): tuple(row[2:]) for row in conn.execute(sa.select(
        al.c.study_id, al.c.answer_id, al.c.case_id, al.c.model_id, al.c.specialty,
        al.c.submitted))}
    pairs = {tuple(row[:3]): row[3] for row in conn.execute(sa.select(pl)) if row[3]}
    return answers, pairs
