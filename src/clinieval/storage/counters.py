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

from clinieval.storage.schema import platform as platform_tables
from clinieval.storage.schema import snapshot as snapshot_tables

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
    return (f"CREATE OR REPLACE FUNCTION {name}() RETURNS trigger LANGUAGE plpgsql AS $$"
            f" BEGIN {body} RETURN {returns}; END $$")


def _pg_statement_trigger(name: str, when: str, table: str) -> str:
    """A trigger run once per statement with the statement's rows as ``added``
    (a transition table): one call and a few set-based statements per
    submission (or per COPY of an import) instead of a call and several
    probes per row."""
    return (f"CREATE TRIGGER {name} {when} ON {table} REFERENCING NEW TABLE AS added"
            f" FOR EACH STATEMENT EXECUTE FUNCTION {name}()")


# The rows of a rater on an answer stored before the statement: the statement's
# own rows are visible to an AFTER trigger, and ``added``, grouped by answer and
# rater, lists their ids. (Asking ``added`` itself inside the probe made the
# planner scan it once per stored row: a COPY of 50,000 ratings ran for minutes.)
_BEFORE_STATEMENT = "o.rating_id <> ALL (p.ids)"


POSTGRES = [
    _pg_function("answer_load_screened",
                 f"{_INSERT_LOAD} {_NEW_ANSWER.format(row='NEW')} ON CONFLICT DO NOTHING;"),
    _pg_function("answer_load_unscreened",
                 "DELETE FROM answer_load WHERE answer_id = OLD.answer_id"
                 " AND study_id = OLD.study_id;"),
    # Each (answer, rater) of the statement that had no rating before it is a new rater.
    _pg_function("answer_load_rated", f"""UPDATE answer_load l SET submitted = l.submitted + n.k
        FROM (SELECT p.answer_id, count(*) AS k
              FROM (SELECT answer_id, rater_id, array_agg(rating_id) AS ids FROM added
                    GROUP BY answer_id, rater_id) p
              WHERE EXISTS (SELECT 1 FROM answer_load c WHERE c.answer_id = p.answer_id)
                AND NOT EXISTS (SELECT 1 FROM ratings o WHERE o.answer_id = p.answer_id
                                AND o.rater_id = p.rater_id AND {_BEFORE_STATEMENT})
              GROUP BY p.answer_id) n
        WHERE l.answer_id = n.answer_id;"""),
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
    _pg_statement_trigger("answer_load_rated", "AFTER INSERT", "ratings"),
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
    conn.execute(platform_tables.answer_load.delete())
    conn.execute(platform_tables.pair_load.delete())
    conn.execute(platform_tables.answer_load.insert().from_select(
        ["study_id", "answer_id", "case_id", "model_id", "specialty", "submitted"],
        _answer_counts()))
    conn.execute(platform_tables.pair_load.insert().from_select(
        ["study_id", "model_lo", "model_hi", "votes"], _pair_counts()))


def uninstall(conn: sa.Connection) -> None:
    for name, table in _PG_TABLES.items():
        if conn.dialect.name == "postgresql":
            conn.exec_driver_sql(f"DROP TRIGGER IF EXISTS {name} ON {table}")
            conn.exec_driver_sql(f"DROP FUNCTION IF EXISTS {name}()")
        else:
            conn.exec_driver_sql(f"DROP TRIGGER IF EXISTS {name}")


def _answer_counts() -> sa.Select:
    s, a = platform_tables.answer_screens, snapshot_tables.answers
    c, r = snapshot_tables.cases, snapshot_tables.ratings
    raters = (sa.select(r.c.answer_id, sa.func.count(sa.distinct(r.c.rater_id)).label("k"))
              .group_by(r.c.answer_id).subquery())
    return (sa.select(s.c.study_id, s.c.answer_id, a.c.case_id, a.c.model_id, c.c.specialty,
                      sa.func.coalesce(raters.c.k, 0))
            .join(a, a.c.answer_id == s.c.answer_id).join(c, c.c.case_id == a.c.case_id)
            .outerjoin(raters, raters.c.answer_id == s.c.answer_id))


def _pair_counts() -> sa.Select:
    p, c = snapshot_tables.preferences, snapshot_tables.cases
    a1, a2 = snapshot_tables.answers.alias("a1"), snapshot_tables.answers.alias("a2")
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
    al, pl = platform_tables.answer_load, platform_tables.pair_load
    answers = {(row[0], row[1]): tuple(row[2:]) for row in conn.execute(sa.select(
        al.c.study_id, al.c.answer_id, al.c.case_id, al.c.model_id, al.c.specialty,
        al.c.submitted))}
    pairs = {tuple(row[:3]): row[3] for row in conn.execute(sa.select(pl)) if row[3]}
    return answers, pairs


# --- per rater: rated answers, votes, time --------------------------------------------
# A rater's answer counts once, with the longest time recorded with its first
# ratings (revision 0), in whole milliseconds (a double: sums of whole numbers
# are exact below 2**53, and an absurd imported time cannot overflow). A rating
# row changes the counters only when it is the rater's first on that answer or
# records a longer time than the rows before it.

def _ms(value: str) -> str:
    return f"round(coalesce({value}, 0) * 1000)"


_OTHERS_MS = """(SELECT max({ms}) AS m FROM ratings o
    WHERE o.answer_id = {row}.answer_id AND o.rater_id = {row}.rater_id
    AND coalesce(o.revision, 0) = 0 AND o.rating_id <> {row}.rating_id)"""


def _rater_terms(row: str) -> dict[str, str]:
    others = _OTHERS_MS.format(ms=_ms("o.time_spent_s"), row=row)
    mine = _ms(f"{row}.time_spent_s")
    first = f"coalesce({row}.revision, 0) = 0 AND {_COUNTED.format(row=row)}"
    return {
        "first": first,
        "guard": f"{first} AND ({others} IS NULL OR {mine} > {others})",
        "answers": f"CASE WHEN {others} IS NULL THEN 1 ELSE 0 END",
        "ms": f"{mine} - coalesce({others}, 0)",
        "studies": f"SELECT l.study_id FROM answer_load l WHERE l.answer_id = {row}.answer_id",
    }


_UPSERT = ("INSERT INTO rater_load (study_id, rater_id, answers, votes, ms) {select}"
           " ON CONFLICT (study_id, rater_id) DO UPDATE SET"
           " answers = rater_load.answers + excluded.answers,"
           " votes = rater_load.votes + excluded.votes, ms = rater_load.ms + excluded.ms")


def _rated(row: str = "NEW") -> str:
    """The upsert for a new rating row; the rows before it are read once (the
    insert is the hot path: every submission writes a row per criterion)."""
    others = _OTHERS_MS.format(ms=_ms("o.time_spent_s"), row=row)
    mine = _ms(f"{row}.time_spent_s")
    return _UPSERT.format(select=(
        f"SELECT l.study_id, {row}.rater_id, CASE WHEN o.m IS NULL THEN 1 ELSE 0 END, 0,"
        f" {mine} - coalesce(o.m, 0) FROM answer_load l, {others} o"
        f" WHERE l.answer_id = {row}.answer_id AND (o.m IS NULL OR {mine} > o.m)"))


def _unrated(row: str = "OLD") -> str:
    t = _rater_terms(row)
    return (f"UPDATE rater_load SET answers = answers - {t['answers']}, ms = ms - ({t['ms']})"
            f" WHERE rater_id = {row}.rater_id AND study_id IN ({t['studies']})")


_SCREENED = _UPSERT.format(select=(
    f"SELECT NEW.study_id, r.rater_id, 1, 0, max({_ms('r.time_spent_s')}) FROM ratings r"
    " WHERE r.answer_id = NEW.answer_id AND coalesce(r.revision, 0) = 0 GROUP BY r.rater_id"))
_UNSCREENED = (
    "UPDATE rater_load SET answers = answers - 1, ms = ms - (SELECT"
    f" max({_ms('r.time_spent_s')}) FROM ratings r WHERE r.answer_id = OLD.answer_id"
    " AND r.rater_id = rater_load.rater_id AND coalesce(r.revision, 0) = 0)"
    " WHERE study_id = OLD.study_id AND rater_id IN (SELECT r.rater_id FROM ratings r"
    " WHERE r.answer_id = OLD.answer_id AND coalesce(r.revision, 0) = 0)")
_VOTED = _UPSERT.format(select=(
    "SELECT c.study_id, NEW.rater_id, 0, 1, 0 FROM cases c"
    " WHERE c.case_id = NEW.case_id AND c.study_id IS NOT NULL"))
# A vote may be stored without its rater (the data contract allows it): it
# counts for its model pair but for no rater.
_RATED_VOTE = _FIRST_VOTE + " AND {row}.rater_id IS NOT NULL"
_UNVOTED = ("UPDATE rater_load SET votes = votes - 1 WHERE rater_id = OLD.rater_id"
            " AND study_id IN (SELECT c.study_id FROM cases c WHERE c.case_id = OLD.case_id)")

RATER_SQLITE = [
    f"""CREATE TRIGGER rater_load_rated AFTER INSERT ON ratings
        WHEN {_rater_terms("NEW")["first"]} BEGIN {_rated()}; END""",
    f"""CREATE TRIGGER rater_load_unrated AFTER DELETE ON ratings
        WHEN {_rater_terms("OLD")["guard"]} BEGIN {_unrated()}; END""",
    f"CREATE TRIGGER rater_load_screened AFTER INSERT ON answer_screens BEGIN {_SCREENED}; END",
    f"CREATE TRIGGER rater_load_unscreened AFTER DELETE ON answer_screens BEGIN {_UNSCREENED};"
    " END",
    f"""CREATE TRIGGER rater_load_voted AFTER INSERT ON preferences
        WHEN {_RATED_VOTE.format(row="NEW")} BEGIN {_VOTED}; END""",
    f"""CREATE TRIGGER rater_load_unvoted AFTER DELETE ON preferences
        WHEN {_RATED_VOTE.format(row="OLD")} BEGIN {_UNVOTED}; END""",
]
# On PostgreSQL new ratings are counted once per statement (see
# _pg_statement_trigger): per (answer, rater) of the statement, its longest
# first-rating time against that of the rows stored before (none: a new
# answer for the rater). The delete trigger runs BEFORE the row goes, while
# it is still there, which ``o.rating_id <> row.rating_id`` leaves out.
_RATED_STATEMENT = _UPSERT.format(select=f"""
    SELECT l.study_id, p.rater_id, sum(CASE WHEN o.m IS NULL THEN 1 ELSE 0 END), 0,
           sum(p.m - coalesce(o.m, 0))
    FROM (SELECT answer_id, rater_id, max({_ms("time_spent_s")}) AS m,
                 array_agg(rating_id) AS ids FROM added
          WHERE coalesce(revision, 0) = 0 GROUP BY answer_id, rater_id) p
    JOIN answer_load l ON l.answer_id = p.answer_id
    CROSS JOIN LATERAL (SELECT max({_ms("o.time_spent_s")}) AS m FROM ratings o
        WHERE o.answer_id = p.answer_id AND o.rater_id = p.rater_id
        AND coalesce(o.revision, 0) = 0 AND {_BEFORE_STATEMENT}) o
    WHERE o.m IS NULL OR p.m > o.m
    GROUP BY l.study_id, p.rater_id""")
_RATER_PG = {
    "rater_load_rated": ("AFTER INSERT", "ratings", f"{_RATED_STATEMENT};", "NULL"),
    "rater_load_unrated": ("BEFORE DELETE", "ratings",
                           f"IF {_rater_terms('OLD')['guard']} THEN {_unrated()}; END IF;",
                           "OLD"),
    "rater_load_screened": ("AFTER INSERT", "answer_screens", f"{_SCREENED};", "NULL"),
    "rater_load_unscreened": ("AFTER DELETE", "answer_screens", f"{_UNSCREENED};", "NULL"),
    "rater_load_voted": ("AFTER INSERT", "preferences",
                         f"IF {_RATED_VOTE.format(row='NEW')} THEN {_VOTED}; END IF;", "NULL"),
    "rater_load_unvoted": ("AFTER DELETE", "preferences",
                           f"IF {_RATED_VOTE.format(row='OLD')} THEN {_UNVOTED}; END IF;",
                           "NULL"),
}
_PG_STATEMENT_LEVEL = {"rater_load_rated"}
RATER_POSTGRES = [
    *(_pg_function(name, body, returns) for name, (_, _, body, returns) in _RATER_PG.items()),
    *(_pg_statement_trigger(name, when, table) if name in _PG_STATEMENT_LEVEL else
      f"CREATE TRIGGER {name} {when} ON {table} FOR EACH ROW EXECUTE FUNCTION {name}()"
      for name, (when, table, _, _) in _RATER_PG.items()),
]


def install_raters(conn: sa.Connection) -> None:
    """Create the per-rater triggers and fill ``rater_load`` from the stored rows."""
    for statement in RATER_POSTGRES if conn.dialect.name == "postgresql" else RATER_SQLITE:
        conn.exec_driver_sql(statement)
    conn.execute(platform_tables.rater_load.delete())
    rows = [{"study_id": study, "rater_id": rater, "answers": answers, "votes": votes, "ms": ms}
            for (study, rater), (answers, votes, ms) in _rater_counts(conn).items()]
    if rows:
        conn.execute(platform_tables.rater_load.insert(), rows)


def uninstall_raters(conn: sa.Connection) -> None:
    for name, (_, table, _, _) in _RATER_PG.items():
        if conn.dialect.name == "postgresql":
            conn.exec_driver_sql(f"DROP TRIGGER IF EXISTS {name} ON {table}")
            conn.exec_driver_sql(f"DROP FUNCTION IF EXISTS {name}()")
        else:
            conn.exec_driver_sql(f"DROP TRIGGER IF EXISTS {name}")


_RATINGS_INSERTED = ("answer_load_rated", "rater_load_rated")


def count_per_statement(conn: sa.Connection) -> None:
    """On PostgreSQL, (re)create the triggers counting inserted ratings as
    statement-level ones (migration 0010; databases made since get them from
    :func:`install` and :func:`install_raters` already). The counters stay as
    they are: both kinds count the same."""
    if conn.dialect.name != "postgresql":
        return
    for name in _RATINGS_INSERTED:
        conn.exec_driver_sql(f"DROP TRIGGER IF EXISTS {name} ON ratings")
        for statement in POSTGRES + RATER_POSTGRES:  # its function, then its trigger
            if statement.startswith((f"CREATE OR REPLACE FUNCTION {name}()",
                                     f"CREATE TRIGGER {name} ")):
                conn.exec_driver_sql(statement)


def _rater_counts(conn: sa.Connection) -> dict[tuple[str, str], tuple[int, int, float]]:
    """Per (study, rater) from the source rows: screened answers rated, votes, milliseconds."""
    al, r = platform_tables.answer_load, snapshot_tables.ratings
    p, c = snapshot_tables.preferences, snapshot_tables.cases
    first = sa.func.coalesce(r.c.revision, 0) == 0
    ms = sa.func.round(sa.func.coalesce(r.c.time_spent_s, 0) * 1000)
    per_answer = (sa.select(al.c.study_id, r.c.rater_id, sa.func.max(ms).label("ms"))
                  .join(r, r.c.answer_id == al.c.answer_id).where(first)
                  .group_by(al.c.study_id, r.c.rater_id, r.c.answer_id).subquery())
    counts: dict[tuple[str, str], list[int]] = {}
    for study, rater, answers, total in conn.execute(
            sa.select(per_answer.c.study_id, per_answer.c.rater_id, sa.func.count(),
                      sa.func.sum(per_answer.c.ms))
            .group_by(per_answer.c.study_id, per_answer.c.rater_id)):
        counts[(study, rater)] = [answers, 0, float(total)]
    for study, rater, votes in conn.execute(
            sa.select(c.c.study_id, p.c.rater_id, sa.func.count())
            .join(c, c.c.case_id == p.c.case_id)
            .where(c.c.study_id.is_not(None), p.c.rater_id.is_not(None),
                   sa.func.coalesce(p.c.revision, 0) == 0)
            .group_by(c.c.study_id, p.c.rater_id)):
        counts.setdefault((study, rater), [0, 0, 0.0])[1] = votes
    return {key: tuple(value) for key, value in counts.items()}


def recount_raters(conn: sa.Connection) -> dict[tuple[str, str], tuple[int, int, float]]:
    """``rater_load`` as derived from the source tables (raters with something counted)."""
    return {key: value for key, value in _rater_counts(conn).items() if any(value)}


def stored_raters(conn: sa.Connection) -> dict[tuple[str, str], tuple[int, int, float]]:
    """``rater_load`` as stored (rows whose counts all dropped to 0 left out)."""
    rl = platform_tables.rater_load
    return {(row[0], row[1]): (row[2], row[3], float(row[4])) for row in conn.execute(
        sa.select(rl.c.study_id, rl.c.rater_id, rl.c.answers, rl.c.votes, rl.c.ms))
        if any(row[2:])}
