"""``synth``, ``import``, ``export``, ``info``, ``demo`` and ``audit``: snapshots
in and out of the database, and the audit of any source (what a source string
means is :mod:`clinieval.sources`' to say)."""

from __future__ import annotations

import functools
import inspect
from pathlib import Path
from typing import Annotated

import typer

from clinieval.cli.common import (
    AllowDefaultSalt,
    DatabaseUrl,
    DropQuasiIdentifiers,
    console,
    handle_errors,
    open_engine,
    out,
    print_counts,
    print_manifest,
)


def register(app: typer.Typer) -> None:
    app.command()(synth)
    app.command("import")(import_)
    app.command()(export)
    app.command("export-eee")(export_eee)
    app.command()(info)
    app.command()(demo)
    app.command()(audit)


def _progress():
    from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

    return Progress(TextColumn("{task.description}"), BarColumn(), TextColumn("{task.completed:,}"),
                    TimeElapsedColumn(), console=console, transient=True)


@handle_errors
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
    from clinieval.synth.judges import JudgePlan, plant_judgments

    if not scale >= MIN_SCALE:  # NaN too
        raise InputError("synth", "too small to make a study of", field="scale",
                         expected=f"at least {MIN_SCALE}", got=scale)
    with console.status(f"generating scale {scale:g} (seed {seed})"):
        snap = generate(seed=seed, scale=scale)
        if judgments:
            snap = plant_judgments(snap, JudgePlan(seed=seed, calibration_judge=True))
    with console.status(f"writing {out_dir}"):
        manifest = write_bundle(snap, out_dir, overwrite=overwrite)
    print_manifest(manifest, f"wrote {out_dir}")


@handle_errors
def import_(
    source: Annotated[Path, typer.Argument(help="Bundle folder, tables folder or export file.")],
    database_url: DatabaseUrl = None,
    fmt: Annotated[str, typer.Option("--format", help="auto, bundle, tables, moove,"
                                     " arena, healthbench, medqa, medmcqa, pubmedqa or"
                                     " inspect.")] = "auto",
    rubric: Annotated[Path | None, typer.Option(help="Rubric JSON (default: bundled).")] = None,
    criterion_map: Annotated[Path | None, typer.Option(help="Criterion map JSON.")] = None,
    replace: Annotated[bool, typer.Option(help="Delete stored rows first (same transaction).")
                       ] = False,
) -> None:
    """Validate a source and load it into the database, all or nothing.

    Example: `clinieval import snap` or `clinieval import moove.json --format moove`
    """
    from clinieval.io.importer import import_snapshot
    from clinieval.rubric import load_criterion_map, load_rubric
    from clinieval.sources import read_source
    from clinieval.storage import db

    engine = open_engine(database_url)
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
    print_counts(counts, f"imported {source}")


@handle_errors
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
        snap = read_snapshot(open_engine(database_url))
    manifest = export_snapshot(snap, out_dir, fmt=fmt, keep_rater_ids=keep_rater_ids,
                               salt=get_settings().pseudonym_salt,
                               allow_default_salt=allow_default_salt,
                               quasi_identifiers=not drop_quasi_identifiers, overwrite=overwrite)
    print_manifest(manifest, f"exported {out_dir}")


@handle_errors
def export_eee(
    source: Annotated[str, typer.Argument(help="Database URL or SQLite file, bundle, tables"
                                          " folder, zip or foreign file (an inspect_ai log).")],
    out_dir: Annotated[Path, typer.Option("--out", help="Folder to write data/... into.")],
    collection: Annotated[str, typer.Option(help="The datastore collection (benchmark)"
                                            " folder.")] = "clinieval",
    organization: Annotated[str, typer.Option(help="source_organization_name: who ran the"
                                              " evaluation.")] = "unspecified",
    bootstrap: Annotated[int, typer.Option(help="Bootstrap replicates of each interval.",
                                           min=100)] = 2000,
) -> None:
    """Write the automated judgments of a source in the Every Eval Ever schema.

    Per model, `data/<collection>/<developer>/<model>/<uuid>.json` (one result
    per judge and criterion: mean, bootstrap interval over cases, n) and its
    `<uuid>_samples.jsonl` (one row per parsed judgment).

    Example: `clinieval export-eee clinieval.db --out eee`
    """
    from clinieval.io.every_eval_ever import Options
    from clinieval.io.every_eval_ever import export_eee as write_eee
    from clinieval.sources import read_for_audit

    with console.status(f"reading {source}"):
        snap, _ = read_for_audit(source)
    written = write_eee(snap, out_dir, Options(collection=collection, organization=organization,
                                               bootstrap=bootstrap))
    models = sorted({path.parent.relative_to(out_dir).as_posix() for path in written})
    console.print(f"wrote {len(written)} files, an aggregate and its samples for each of"
                  f" {len(models)} model(s), under {out_dir}: {', '.join(models[:5])}"
                  f"{' ...' if len(models) > 5 else ''}", soft_wrap=True)


@handle_errors
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
    """The snapshot ``source`` names, or the database's without one."""
    if source is None:
        from clinieval.storage.db import read_snapshot

        return read_snapshot(open_engine(database_url))
    from clinieval.sources import read_any

    return read_any(source)


def _setting_option(name: str, info) -> inspect.Parameter:
    """A ``--name`` option for one :class:`AuditSettings` field. Its default is
    None, so a value not given falls to the model (and so to ``CLINIEVAL_SEED``)."""
    from typing import Literal, get_args, get_origin

    from clinieval.audit.settings import default_words

    annotation = info.annotation
    choices = next((get_args(a) for a in (annotation, *get_args(annotation))
                    if get_origin(a) is Literal), None)
    kind = str if choices or name == "criteria" else annotation
    help_text = info.description or ""
    if choices:
        help_text += f" One of: {', '.join(choices)}."
    if name == "criteria":
        help_text += " Comma-separated criterion ids."
    option = typer.Option(f"--{name.replace('_', '-')}", help=help_text,
                          show_default=default_words(name))
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


@handle_errors
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
    from clinieval.io.importer import import_snapshot
    from clinieval.sources import read_any
    from clinieval.storage import db

    engine = open_engine(database_url)
    db.upgrade(engine)
    import_snapshot(engine, read_any("demo"), replace=True)
    url = engine.url.render_as_string()
    console.print(f"loaded the demo snapshot into {url}")
    _report(run_audit(url, settings), out_dir)


@handle_errors
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
