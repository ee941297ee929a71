"""What the command groups share: the consoles, the options several commands
take, the error handling every command is wrapped in, and the engine.

Messages go to ``console`` (standard error) and results to ``out`` (standard
output), so a command's output can be piped. A command wrapped in
:func:`handle_errors` reports clinieval's own errors as one red line and exits
with status 2, never with a traceback.
"""

from __future__ import annotations

import functools
import re
from typing import Annotated

import typer
from pydantic import ValidationError
from rich.console import Console
from rich.table import Table

from clinieval.errors import ClinievalError

console = Console(stderr=True)
out = Console()

DatabaseUrl = Annotated[str | None, typer.Option(
    "--database-url", envvar="DATABASE_URL", show_envvar=True,
    help="SQLAlchemy URL; defaults to the settings (sqlite:///clinieval.db).")]
AllowDefaultSalt = Annotated[bool, typer.Option(
    help="Pseudonymise with the public default salt (anyone can reverse it).")]
DropQuasiIdentifiers = Annotated[bool, typer.Option(
    help="Blank rater organisation, country, experience and comments; round timestamps"
         " to the day.")]


def handle_errors(func):
    """Report clinieval's own errors as one red line and exit 2 (no traceback)."""

    @functools.wraps(func)
    def wrapper(*args, **kwargs):
        try:
            return func(*args, **kwargs)
        except ClinievalError as err:
            console.print(f"[red]error:[/red] {err}", highlight=False, soft_wrap=True)
            raise typer.Exit(2) from None
        except ValidationError as err:
            first = err.errors()[0]
            option = "--" + str(first["loc"][0]).replace("_", "-") if first["loc"] else "input"
            console.print(f"[red]error:[/red] {option}: {first['msg']}", highlight=False)
            raise typer.Exit(2) from None
        except Exception as err:
            table = _missing_table(err)
            if table is None:
                raise
            console.print(f"[red]error:[/red] the database has no table {table!r}: is it the one"
                          " you meant (--database-url, or DATABASE_URL; by default"
                          " sqlite:///clinieval.db in the current folder)? `clinieval db upgrade`"
                          " creates the tables in a new one.", highlight=False, soft_wrap=True)
            raise typer.Exit(2) from None

    return wrapper


def _missing_table(err: Exception) -> str | None:
    """The table named by a database's "no such table" error (SQLite's
    message, PostgreSQL's undefined_table state), else None."""
    import sqlalchemy.exc

    if not isinstance(err, sqlalchemy.exc.DBAPIError):
        return None
    text = str(err.orig)
    found = re.search(r"no such table: (\S+)", text)
    if found is None and getattr(err.orig, "sqlstate", None) == "42P01":
        found = re.search(r'relation "([^"]+)" does not exist', text)
    return None if found is None else found.group(1)


def open_engine(url: str | None):
    """An engine on ``url`` (``--database-url``), else on the settings' database."""
    from clinieval.settings import get_settings
    from clinieval.storage.db import make_engine

    return make_engine(url or get_settings().database_url)


def study_engine(url: str | None, study_id: str, command: str):
    """An engine on ``url`` whose database holds ``study_id``; else an error
    naming the study (a study command on a missing study did nothing and
    said so as if it had worked)."""
    import sqlalchemy as sa

    from clinieval.errors import InputError
    from clinieval.storage.schema import snapshot as snapshot_tables

    engine = open_engine(url)
    studies = snapshot_tables.studies
    with engine.connect() as conn:
        found = conn.execute(sa.select(studies.c.study_id)
                             .where(studies.c.study_id == study_id)).first()
    if found is None:
        raise InputError(command, "no such study", field="study", got=study_id)
    return engine


def print_manifest(manifest: dict, title: str) -> None:
    """The row counts of a bundle or export just written."""
    print_counts({name: entry["rows"] for name, entry in manifest["tables"].items()}, title)


def print_counts(counts: dict[str, int], title: str) -> None:
    table = Table(title=title)
    table.add_column("table")
    table.add_column("rows", justify="right")
    for name, n in counts.items():
        table.add_row(name, f"{n:,}")
    out.print(table)
