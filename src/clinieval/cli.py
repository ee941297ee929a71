"""The ``clinieval`` command line: each command a few lines over a library call."""

from __future__ import annotations

import os

# The audit's matrix products are small (replicates x a few hundred): OpenBLAS
# threads spin up and wait for more CPU than they save, which on two cores
# also starves the processes that draw the figures. An explicit setting wins.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import functools
import inspect
import re
from pathlib import Path
from typing import Annotated

import typer
from pydantic import ValidationError
from rich.console import Console
from rich.table import Table

from clinieval.errors import ClinievalError

app = typer.Typer(no_args_is_help=True, add_completion=False, rich_markup_mode="markdown",
                  help="Safety-first evaluation of medical LLMs from clinician ratings and votes.")
db_app = typer.Typer(no_args_is_help=True, help="Database schema management.")
app.add_typer(db_app, name="db")
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


def _handle_errors(func):
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


def _engine(url: str | None):
    from clinieval.settings import get_settings
    from clinieval.storage.db import make_engine

    return make_engine(url or get_settings().database_url)


def _progress():
    from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

    return Progress(TextColumn("{task.description}"), BarColumn(), TextColumn("{task.completed:,}"),
                    TimeElapsedColumn(), console=console, transient=True)


@db_app.command("upgrade")
@_handle_errors
def db_upgrade(database_url: DatabaseUrl = None,
               revision: Annotated[str, typer.Option(help="Target revision.")] = "head") -> None:
    """Create or migrate the database schema.

    Example: `clinieval db upgrade --database-url postgresql://localhost/test`
    """
    from clinieval.storage import db

    engine = _engine(database_url)
    db.upgrade(engine, revision)
    url = engine.url.render_as_string()
    console.print(f"schema at revision {db.current_revision(engine)} ({url})")


@app.command()
@_handle_errors
def synth(
    out_dir: Annotated[Path, typer.Option("--out", help="Bundle folder to write.")],
    seed: Annotated[int, typer.Option(help="Random seed.")] = 0,
    scale: Annotated[float, typer.Option(help="1 = the paper's scale (375,614 ratings).")] = 1.0,
    overwrite: Annotated[bool, typer.Option(help="Replace an existing bundle.")] = False,
    judgments: Annotated[bool, typer.Option(help="Also plant automated judgments (a jury, a"
                                            " position-biased pairwise judge, gate rules).")
                         ] = False,
) -> None:
    """Generate a synthetic snapshot bundle with planted, documented truths.

    Example: `clinieval synth --out snap --seed 1 --scale 0.1 --judgments`
    """
    from clinieval.errors import InputError
    from clinieval.io.bundle import write_bundle
    from clinieval.synth import MIN_SCALE, generate
    from clinieval.synth_judges import JudgePlan, plant_judgments

    if not scale >= MIN_SCALE:  # NaN too
        raise InputError("synth", "too small to make a study of", field="scale",
                         expected=f"at least {MIN_SCALE}", got=scale)
    with console.status(f"generating scale {scale:g} (seed {seed})"):
        snap = generate(seed=seed, scale=scale)
        if judgments:
            snap = plant_judgments(snap, JudgePlan(seed=seed))
    with console.status(f"writing {out_dir}"):
        manifest = write_bundle(snap, out_dir, overwrite=overwrite)
    _print_manifest(manifest, f"wrote {out_dir}")


@app.command("import")
@_handle_errors
def import_(
    source: Annotated[Path, typer.Argument(help="Bundle folder, tables folder or export file.")],
    database_url: DatabaseUrl = None,
    fmt: Annotated[str, typer.Option("--format", help="auto, bundle, tables, moove, arena or"
                                     " healthbench.")] = "auto",
    rubric: Annotated[Path | None, typer.Option(help="Rubric JSON (default: bundled).")] = None,
    criterion_map: Annotated[Path | None, typer.Option(help="Criterion map JSON.")] = None,
    replace: Annotated[bool, typer.Option(help="Delete stored rows first (same transaction).")
                       ] = False,
) -> None:
    """Validate a source and load it into the database, all or nothing.

    Example: `clinieval import snap` or `clinieval import moove.json --format moove`
    """
    from clinieval.io.importer import import_snapshot, read_source
    from clinieval.rubric import load_criterion_map, load_rubric
    from clinieval.storage import db

    engine = _engine(database_url)
    db.upgrade(engine)
    cmap = load_criterion_map(criterion_map, None) if criterion_map else None
    with console.status(f"reading {source}"):
        snap, sources = read_source(source, fmt=fmt, rubric=load_rubric(rubric), criterion_map=cmap)
    for note in snap.meta.get("notes", []):
        console.print(f"[yellow]note:[/yellow] {note}")
    with _progress() as bar:
        tasks = {n: bar.add_task(n, total=c) for n, c in snap.counts().items() if c}
        counts = import_snapshot(engine, snap, sources=sources, replace=replace,
                                 progress=lambda name, n: bar.advance(tasks[name], n))
    _print_counts(counts, f"imported {source}")


@app.command()
@_handle_errors
def export(
    out_dir: Annotated[Path, typer.Option("--out", help="Folder to write.")],
    database_url: DatabaseUrl = None,
    fmt: Annotated[str, typer.Option("--format", help="bundle, csv or parquet.")] = "bundle",
    keep_rater_ids: Annotated[bool, typer.Option(help="Do not pseudonymise rater ids (the"
                                                 " export then identifies raters).")] = False,
    allow_default_salt: AllowDefaultSalt = False,
    drop_quasi_identifiers: DropQuasiIdentifiers = False,
    overwrite: Annotated[bool, typer.Option(help="Replace an existing folder.")] = False,
) -> None:
    """Export the database as a bundle or table files, with pseudonymous rater ids.

    The salt comes from CLINIEVAL_PSEUDONYM_SALT; the public default is refused.

    Example: `clinieval export --out export --format bundle --drop-quasi-identifiers`
    """
    from clinieval.io.export import export_snapshot
    from clinieval.settings import get_settings
    from clinieval.storage.db import read_snapshot

    if keep_rater_ids:
        console.print("[yellow]warning:[/yellow] --keep-rater-ids writes raw rater ids; the"
                      " export identifies raters and must not leave your organisation")
    with console.status("reading database"):
        snap = read_snapshot(_engine(database_url))
    manifest = export_snapshot(snap, out_dir, fmt=fmt, keep_rater_ids=keep_rater_ids,
                               salt=get_settings().pseudonym_salt,
                               allow_default_salt=allow_default_salt,
                               quasi_identifiers=not drop_quasi_identifiers, overwrite=overwrite)
    _print_manifest(manifest, f"exported {out_dir}")


@app.command()
@_handle_errors
def info(
    source: Annotated[str | None, typer.Argument(help="Bundle/tables path, `demo`, or omit for"
                                                 " the database.")] = None,
    database_url: DatabaseUrl = None,
) -> None:
    """Summarise a snapshot: counts, models, specialties, criteria, date range.

    Example: `clinieval info` (database) or `clinieval info demo`
    """
    from clinieval.summary import summarise

    snap = _open(source, database_url)
    for label, value in summarise(snap).items():
        out.print(f"[bold]{label}[/bold]: {value}")


def _open(source: str | None, database_url: str | None):
    from clinieval.io.importer import read_source
    from clinieval.storage.db import read_snapshot

    if source is None:
        return read_snapshot(_engine(database_url))
    if source == "demo":
        from clinieval.demo import demo_snapshot

        return demo_snapshot()
    from clinieval.storage.sqlite_read import read_url, sqlite_file_url

    url = source if "://" in source else sqlite_file_url(source)
    if url is not None:
        return read_url(url)
    return read_source(source)[0]


def _setting_option(name: str, info) -> inspect.Parameter:
    """A ``--name`` option for one :class:`AuditSettings` field. Its default is
    None, so a value not given falls to the model (and so to ``CLINIEVAL_SEED``)."""
    from typing import Literal, get_args, get_origin

    annotation = info.annotation
    choices = next((get_args(a) for a in (annotation, *get_args(annotation))
                    if get_origin(a) is Literal), None)
    kind = str if choices or name == "criteria" else annotation
    help_text = info.description or ""
    if choices:
        help_text += f" One of: {', '.join(choices)}."
    if name == "criteria":
        help_text += " Comma-separated criterion ids."
    default = info.get_default(call_default_factory=True)
    option = typer.Option(f"--{name.replace('_', '-')}", help=help_text,
                          show_default="all" if default is None else str(default))
    return inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, default=None,
                             annotation=Annotated[kind | None, option])


def _settings_options(func):
    """Give a command one option per :class:`AuditSettings` field (help and
    defaults from the model) and call it with ``settings=AuditSettings(...)``."""
    from clinieval.audit import AuditSettings

    fields = AuditSettings.model_fields
    signature = inspect.signature(func, eval_str=True)
    own = [p for p in signature.parameters.values() if p.name != "settings"]

    @functools.wraps(func)
    def command(**kwargs):
        values = {name: kwargs.pop(name, None) for name in fields}
        given = {name: value for name, value in values.items() if value is not None}
        if "criteria" in given:
            given["criteria"] = tuple(c.strip() for c in given["criteria"].split(",") if c)
        return func(settings=AuditSettings(**given), **kwargs)

    command.__signature__ = signature.replace(
        parameters=own + [_setting_option(n, info) for n, info in fields.items()])
    return command


@app.command()
@_handle_errors
@_settings_options
def demo(
    settings,
    out_dir: Annotated[Path, typer.Option("--out", help="Report folder.")] = Path("demo-out"),
    database_url: DatabaseUrl = None,
) -> None:
    """The main job on the embedded default: load the bundled demo snapshot into
    the database (SQLite unless DATABASE_URL says otherwise), audit it and
    write the report.

    Example: `clinieval demo --out demo-out`
    """
    from clinieval.audit import audit as run_audit
    from clinieval.demo import demo_snapshot
    from clinieval.io.importer import import_snapshot
    from clinieval.storage import db

    engine = _engine(database_url)
    db.upgrade(engine)
    import_snapshot(engine, demo_snapshot(), replace=True)
    url = engine.url.render_as_string()
    console.print(f"loaded the demo snapshot into {url}")
    _report(run_audit(url, settings), out_dir)


@app.command()
@_handle_errors
@_settings_options
def audit(
    settings,
    source: Annotated[str, typer.Argument(help="Bundle folder, database URL or SQLite file,"
                                          " tables folder, export file, or `demo`.")],
    out_dir: Annotated[Path, typer.Option("--out", help="Report folder.")] = Path("audit-out"),
) -> None:
    """Write the safety-first audit report (HTML, Markdown, JSON, figures).

    Every setting of the audit is an option (see the Settings table of the report).
    Example: `clinieval audit demo --out report` or
    `clinieval audit snap --bootstrap 2000 --response-rule majority --cluster rater`
    """
    from clinieval._alloc import steady_state_allocator
    from clinieval.audit.ahead import read_ahead

    steady_state_allocator()  # one large computation per process: see the module
    ahead = read_ahead(source)  # a child reads while the audit and the report import
    try:
        from clinieval.audit import audit as run_audit
        from clinieval.report import render_report  # noqa: F401  (its import overlaps too)

        with console.status(f"auditing {source}"):
            data = ahead.result() if ahead else None
            result = run_audit(source if data is None else data, settings)
    finally:
        if ahead:
            ahead.cancel()
    _report(result, out_dir)


def _report(result, out_dir: Path) -> None:
    from clinieval.report import render_report

    with console.status("rendering the report"):
        paths = render_report(result, out_dir)
    out.print("[bold]Summary[/bold]")
    for line in result.headlines:
        out.print(f"- {line}", highlight=False)
    out.print(f"\nreport: {paths['html'].resolve()}")


def _print_manifest(manifest: dict, title: str) -> None:
    """The row counts of a bundle or export just written."""
    _print_counts({name: entry["rows"] for name, entry in manifest["tables"].items()}, title)


def _print_counts(counts: dict[str, int], title: str) -> None:
    table = Table(title=title)
    table.add_column("table")
    table.add_column("rows", justify="right")
    for name, n in counts.items():
        table.add_row(name, f"{n:,}")
    out.print(table)


# The run commands live in their own module; importing it registers them.
import clinieval.cli_runs  # noqa: E402, F401


def main() -> None:
    app()


from clinieval import cli_web  # noqa: E402  (the platform's commands, registered below)

cli_web.register(app)


if __name__ == "__main__":
    main()
