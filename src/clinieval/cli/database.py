"""``clinieval db``: the database's schema."""

from __future__ import annotations

from typing import Annotated

import typer

from clinieval.cli.common import DatabaseUrl, console, handle_errors, open_engine

db_app = typer.Typer(no_args_is_help=True, help="Database schema management.")


def register(app: typer.Typer) -> None:
    app.add_typer(db_app, name="db")


@db_app.command("upgrade")
@handle_errors
def db_upgrade(database_url: DatabaseUrl = None,
               revision: Annotated[str, typer.Option(help="Target revision.")] = "head") -> None:
    """Create or migrate the database schema.

    Example: `clinieval db upgrade --database-url postgresql://localhost/test`
    """
    from clinieval.storage import db

    engine = open_engine(database_url)
    db.upgrade(engine, revision)
    url = engine.url.render_as_string()
    console.print(f"schema at revision {db.current_revision(engine)} ({url})")
