"""``clinieval runs`` and ``clinieval view``: what the runs in a database did,
and a browsable log of every answer and judgment they made (for the
evaluation team; the clinician platform never serves it)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer
from click import Context
from rich.markup import escape
from rich.table import Table
from typer.core import TyperGroup

from clinieval.cli.common import DatabaseUrl, console, handle_errors, open_engine, out
from clinieval.errors import InputError

Database = Annotated[str | None, typer.Argument(
    help="SQLite file or SQLAlchemy URL; else --database-url or the settings' database.",
    show_default=False)]
Json = Annotated[bool, typer.Option("--json", help="Print JSON (for scripts).")]


class _ListByDefault(TyperGroup):
    """``clinieval runs [DATABASE]`` lists the runs: anything that is not a
    subcommand goes to ``list``."""

    def parse_args(self, ctx: Context, args: list[str]) -> list[str]:
        if not args or (args[0] not in self.commands and args[0] not in ("--help", "-h")):
            args = ["list", *args]
        return super().parse_args(ctx, args)


runs_app = typer.Typer(cls=_ListByDefault, help="The runs in a database: `clinieval runs"
                       " [DATABASE]` lists them, `clinieval runs show RUN` prints one's"
                       " failures by cause.")


def register(app: typer.Typer) -> None:
    app.add_typer(runs_app, name="runs")
    app.command("view")(view)


def database_engine(database: str | None, database_url: str | None, command: str):
    """An engine on DATABASE (a SQLite file that must exist, or a URL), else
    on --database-url or the settings' database; a missing SQLite file is an
    error naming it, not a new empty database."""
    from clinieval.storage.db import make_engine
    from clinieval.storage.sqlite_read import sqlite_file_url, sqlite_path

    target = database or database_url
    if target is None:
        engine = open_engine(None)
        path = sqlite_path(engine.url.render_as_string())
        if path is not None and not path.exists():
            raise InputError(command, "no database here (pass DATABASE or --database-url)",
                             field="DATABASE", got=str(path))
        return engine
    if "://" in target:
        path = sqlite_path(target)
        if path is not None and not path.exists():
            raise InputError(command, "no such SQLite file", field="DATABASE", got=str(path))
        return make_engine(target)
    url = sqlite_file_url(target)
    if url is None:
        raise InputError(command, "not a SQLite database file" if Path(target).exists() else
                         "no such file", field="DATABASE", got=target)
    return make_engine(url)


@runs_app.command("list")
@handle_errors
def runs_list(database: Database = None, database_url: DatabaseUrl = None,
              as_json: Json = False) -> None:
    """List the runs: kind, model, judged models, tasks by status, attempts,
    what was spent and at list price, started and finished.

    Example: `clinieval runs clinieval.db`
    """
    from clinieval.runs.history import list_runs

    records = list_runs(database_engine(database, database_url, "runs"))
    if as_json:
        typer.echo(json.dumps(records, indent=2))
        return
    if not records:
        console.print("no runs in this database")
        return
    table = Table(title="runs")
    for column in ("run (kind)", "model (judged)", "status",
                   "tasks done / cached / failed, unparsed", "attempts", "USD spent (list)",
                   "started / finished"):
        table.add_column(column, no_wrap=column == "run (kind)", overflow="fold")
    for r in records:
        t = r["tasks"]
        judged = f" ({', '.join(r['judged_models'])})" if r["judged_models"] else ""
        attempts = ", ".join(f"{s} {n:,}" for s, n in r["attempts"].items()) or "-"
        table.add_row(escape(f"{r['run_id']}\n({r['run']})"), escape(r["model"] + judged),
                      r["status"],
                      f"{t['done']:,} / {t['cached']:,} / {t['failed']:,}, {r['unparsed']:,}",
                      attempts, f"{r['spent_usd']:,.4f} ({r['list_price_usd']:,.4f})",
                      f"{_short(r['started_at'])}\n{_short(r['finished_at'])}")
    out.print(table)


@runs_app.command("show")
@handle_errors
def runs_show(run: Annotated[str, typer.Argument(help="The run id (see `clinieval runs`).")],
              database: Database = None, database_url: DatabaseUrl = None,
              as_json: Json = False) -> None:
    """One run: its counts and its failures by cause, with one example each.

    Example: `clinieval runs show rubric-0123456789ab clinieval.db`
    """
    from clinieval.runs.history import show_run

    record = show_run(database_engine(database, database_url, "runs show"), run)
    if as_json:
        typer.echo(json.dumps(record, indent=2))
        return
    t = record["tasks"]
    out.print(f"[bold]{escape(record['run_id'])}[/bold] ({escape(record['run'])}, model"
              f" {escape(record['model'])})"
              f" {record['status']}: {record['planned']:,} tasks, {t['done']:,} called,"
              f" {t['cached']:,} from cache, {t['failed']:,} failed, {record['unparsed']:,}"
              f" unparsed; spent ${record['spent_usd']:,.4f}, ${record['list_price_usd']:,.4f}"
              f" at list price; started {_short(record['started_at'])}, finished"
              f" {_short(record['finished_at'])}", highlight=False)
    if not record["failures"]:
        out.print("no failures")
        return
    table = Table(title="failures by cause")
    for column in ("cause", "count", "fails the run", "example"):
        table.add_column(column, justify="right" if column == "count" else "left",
                         overflow="fold")
    for f in record["failures"]:
        table.add_row(escape(f["cause"]), f"{f['count']:,}", "yes" if f["fatal"] else "no",
                      escape(f["example"][:300]))
    out.print(table)


def _short(iso: str | None) -> str:
    return "-" if iso is None else iso[:19].replace("T", " ")


@handle_errors
def view(database: Database = None, database_url: DatabaseUrl = None,
         out_dir: Annotated[Path | None, typer.Option(
             "--out", help="Write a static, self-contained site to this folder instead of"
                           " serving.")] = None,
         host: Annotated[str, typer.Option(help="Address to serve on.")] = "127.0.0.1",
         port: Annotated[int, typer.Option(help="Port to serve on.")] = 8010) -> None:
    """Browse every case x model x sample x judgment of the runs: prompt,
    answer, judge output and rationale, score, parse status; filter by model,
    judge, criterion, parse failure and score. For the evaluation team only:
    it shows model identities.

    Example: `clinieval view clinieval.db --out viewer/`
    """
    from clinieval.viewer import build_site, serve

    engine = database_engine(database, database_url, "view")
    if out_dir is not None:
        pages = build_site(engine, out_dir)
        console.print(f"wrote {pages:,} pages to {out_dir}/ (open index.html)")
        return
    serve(engine, host, port)
