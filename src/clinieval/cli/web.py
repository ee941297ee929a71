"""Command-line set-up of the clinician platform: ``serve``, ``study create``,
``study add-cases``, ``study rubric``, ``study assignment``, ``study export``,
``study flagged`` and ``invite``."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from clinieval.cli.common import (
    DatabaseUrl,
    DropQuasiIdentifiers,
    console,
    handle_errors,
    open_engine,
    out,
    print_counts,
    print_manifest,
    study_engine,
)

study_app = typer.Typer(no_args_is_help=True, help="Studies on the clinician platform.")

BaseUrl = Annotated[str, typer.Option(help="Public address of the platform, for printed links.")]
# How a study assigns: `study create` and `study assignment` take the same options
# (None: not given), checked by platform.config.check_assignment.
AssignmentMode = Annotated[str | None, typer.Option(
    "--assignment", help="even (the fewest raters first) or targeted (where a decision is"
                         " still open, randomised with recorded probabilities).")]
MonitorShare = Annotated[float | None, typer.Option(
    help="Share of a specialty's picks kept on settled cells, 0 <= share < 1.")]
EscalationStep = Annotated[int | None, typer.Option(
    help="Raters added to an answer per clinician who scores a safety-critical"
         " criterion <= -1, 0..20.")]
EscalationCap = Annotated[int | None, typer.Option(
    help="The most raters escalation adds to one answer, 0..50.")]


def register(app: typer.Typer) -> None:
    app.add_typer(study_app, name="study")
    app.command()(serve)
    app.command()(invite)


@handle_errors
def serve(
    database_url: DatabaseUrl = None,
    host: Annotated[str, typer.Option(help="Interface to listen on.")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="Port.")] = 8000,
    demo: Annotated[bool, typer.Option("--demo", help="Create a demo study and accounts.")] = False,
    fd: Annotated[int | None, typer.Option(
        help="Serve on this inherited listening socket (socket activation, or a test that"
             " bound a free port first) instead of --host and --port.")] = None,
) -> None:
    """Start the clinician platform (migrating the database first).

    Example: `clinieval serve --demo` then open the printed link.
    """
    import uvicorn

    from clinieval.storage import db
    from clinieval.web.app import create_app

    engine = open_engine(database_url)
    db.upgrade(engine)
    sockets = None
    if fd is not None:
        import socket

        sockets = [socket.socket(fileno=fd)]  # its family and type as bound
        if sockets[0].family in (socket.AF_INET, socket.AF_INET6):  # else the links
            host, port = sockets[0].getsockname()[:2]  # name --host and --port (a proxy's)
    if demo:
        from clinieval.platform.demo import setup_demo

        accounts = setup_demo(engine)
        base = f"http://{host}:{port}"
        for label, path in (("demo clinician", f"signin/{accounts['clinician']}"),
                            ("demo admin", f"signin/{accounts['admin']}"),
                            ("invitation for a new clinician",
                             f"invite/{accounts['invitation']}")):
            out.print(f"{label}: {base}/{path}", highlight=False, soft_wrap=True)
        console.print("The sign-in links work once, within an hour; restart with --demo"
                      " for fresh ones.")
    server = uvicorn.Server(uvicorn.Config(create_app(engine), host=host, port=port,
                                           log_level="warning"))
    server.run(sockets=sockets)


@study_app.command("create")
@handle_errors
def study_create(
    study_id: Annotated[str, typer.Argument(help="Short id, e.g. cardio-2026.")],
    source: Annotated[Path, typer.Option(help="Bundle, tables folder, zip or export file with"
                                         " the cases and answers (their text); `demo`: the"
                                         " bundled demo cases with stand-in answers.")],
    name: Annotated[str | None, typer.Option(help="Display name.")] = None,
    database_url: DatabaseUrl = None,
    rubric: Annotated[Path | None, typer.Option(help="Rubric JSON (default: bundled).")] = None,
    overlap: Annotated[int, typer.Option(help="Ratings wanted per answer.")] = 3,
    pairwise_share: Annotated[float, typer.Option(help="Share of tasks that are pairs.")] = 0.2,
    specialties: Annotated[str | None, typer.Option(help="Comma-separated specialties offered"
                                                    " (default: all in the source).")] = None,
    max_cases: Annotated[int | None, typer.Option(help="Take at most this many cases.")] = None,
    lease_minutes: Annotated[int, typer.Option(help="Idle minutes before a task returns to"
                                               " the pool.")] = 30,
    gates: Annotated[Path | None, typer.Option(
        help="Decision gates file (TOML [[gates]] tables or a JSON list) of criterion (or"
             " dangerous), threshold 0..1, scope model|model_specialty, alpha (default: each"
             " safety-critical criterion at 0.10 per model x specialty, alpha 0.05).")] = None,
    assignment: AssignmentMode = None,
    monitor_share: MonitorShare = None,
    escalation_step: EscalationStep = None,
    escalation_cap: EscalationCap = None,
) -> None:
    """Create a study from a source's cases and answers; the leak guard screens every answer.
    The assignment options are `study assignment`'s (default: even, 0.1, 2, 4); a
    targeted study gets its first priorities before the command ends.

    Example: `clinieval study create cardio --source demo --specialties "Cardiology ECG"`
    """
    from clinieval.platform.config import read_gates_file, study_config
    from clinieval.platform.demo import demo_source
    from clinieval.platform.studies import StudyPlan, create_study
    from clinieval.platform.targeting import refresh_now
    from clinieval.rubric import load_rubric
    from clinieval.sources import read_source

    offered = tuple(s.strip() for s in specialties.split(",")) if specialties else ()
    plan = StudyPlan(study_id, name or study_id, load_rubric(rubric), overlap_target=overlap,
                     pairwise_share=pairwise_share, lease_minutes=lease_minutes,
                     specialties=offered, max_cases=max_cases,
                     gates=None if gates is None else read_gates_file(gates),
                     assignment={"assignment": assignment, "monitor_share": monitor_share,
                                 "escalation_step": escalation_step,
                                 "escalation_cap": escalation_cap})
    plan.check()  # before the source is read: a bad option costs nothing
    demo = str(source) == "demo" and not source.exists()
    engine = open_engine(database_url)
    counts = create_study(engine, plan, demo_source(study_id) if demo else read_source(source)[0])
    with engine.connect() as conn:
        cfg = study_config(conn, study_id)
    if cfg.targeted:
        refresh_now(engine, cfg)
    print_counts(counts, f"study {study_id}")


@study_app.command("add-cases")
@handle_errors
def study_add_cases(
    study_id: Annotated[str, typer.Argument(help="Study id.")],
    source: Annotated[Path, typer.Argument(help="Bundle, tables folder or export file with the"
                                           " cases and answers to add.")],
    database_url: DatabaseUrl = None,
) -> None:
    """Add cases and answers to an existing study, all or nothing; the leak
    guard screens every new answer. Cases and answers already in the study
    are skipped, so a grown file can be sent again.

    Example: `clinieval study add-cases cardio more-cases`
    """
    from clinieval.platform.studies import add_cases
    from clinieval.sources import read_source

    engine = study_engine(database_url, study_id, "study add-cases")
    counts = add_cases(engine, study_id, read_source(source)[0])
    print_counts(counts, f"added to study {study_id}")


@study_app.command("rubric")
@handle_errors
def study_rubric(
    study_id: Annotated[str, typer.Argument(help="Study id.")],
    rubric: Annotated[Path, typer.Argument(help="Rubric JSON with a new version.")],
    database_url: DatabaseUrl = None,
) -> None:
    """Give a running study a new rubric version: ratings given from now on
    record it (earlier ratings keep theirs).

    Example: `clinieval study rubric cardio rubric-v2.json`
    """
    from clinieval.platform.studies import new_rubric_version
    from clinieval.rubric import load_rubric

    engine = study_engine(database_url, study_id, "study rubric")
    made = new_rubric_version(engine, None, study_id, load_rubric(rubric))
    console.print(f"study {study_id} now rates under rubric version {made['version']}")


@study_app.command("assignment")
@handle_errors
def study_assignment(
    study_id: Annotated[str, typer.Argument(help="Study id.")],
    assignment: AssignmentMode = None,
    monitor_share: MonitorShare = None,
    escalation_step: EscalationStep = None,
    escalation_cap: EscalationCap = None,
    database_url: DatabaseUrl = None,
) -> None:
    """Change how the study assigns its next tasks (only the settings given;
    none: change nothing) and print the settings in force. A bad value is
    refused naming its field, and nothing is written.

    Example: `clinieval study assignment cardio --assignment targeted --monitor-share 0.1`
    """
    from clinieval.platform.config import study_config
    from clinieval.platform.targeting import set_assignment

    engine = study_engine(database_url, study_id, "study assignment")
    given = {"assignment": assignment, "monitor_share": monitor_share,
             "escalation_step": escalation_step, "escalation_cap": escalation_cap}
    if any(v is not None for v in given.values()):
        cfg = set_assignment(engine, None, study_id, **given)
    else:
        with engine.connect() as conn:
            cfg = study_config(conn, study_id)
    for name, value in cfg.assignment_settings().items():
        typer.echo(f"{name}\t{value}")


@study_app.command("export")
@handle_errors
def study_export(
    study_id: Annotated[str, typer.Argument(help="Study id.")],
    out_dir: Annotated[Path, typer.Option("--out", help="Bundle folder to write.")],
    database_url: DatabaseUrl = None,
    overwrite: Annotated[bool, typer.Option(help="Replace an existing folder.")] = False,
    drop_quasi_identifiers: DropQuasiIdentifiers = False,
) -> None:
    """Export a study as a bundle with pseudonymous rater ids (`clinieval audit` reads it).

    The salt is CLINIEVAL_PSEUDONYM_SALT, or else a secret one kept in the database.

    Example: `clinieval study export cardio --out cardio-export`
    """
    from clinieval.platform.study_export import export_salt, export_study

    engine = study_engine(database_url, study_id, "study export")
    manifest = export_study(engine, study_id, out_dir, salt=export_salt(engine),
                            overwrite=overwrite, quasi_identifiers=not drop_quasi_identifiers)
    print_manifest(manifest, f"exported {out_dir}")


@study_app.command("flagged")
@handle_errors
def study_flagged(
    study_id: Annotated[str, typer.Argument(help="Study id.")],
    database_url: DatabaseUrl = None,
) -> None:
    """List answers the leak guard held back from clinicians, with the reason.

    Example: `clinieval study flagged cardio`
    """
    from clinieval.platform.screening import flagged_answers

    rows = flagged_answers(study_engine(database_url, study_id, "study flagged"), study_id)
    for row in rows:
        typer.echo("\t".join(str(row[k]) for k in ("answer_id", "case_id", "model_id", "reason")))
    console.print(f"{len(rows)} answer(s) held back in study {study_id}")


@handle_errors
def invite(
    study_id: Annotated[str, typer.Argument(help="Study id.")],
    role: Annotated[str, typer.Option(
        help="admin, clinician, viewer or adjudicator.")] = "clinician",
    days: Annotated[int, typer.Option(help="Days until the link expires.")] = 14,
    email: Annotated[str | None, typer.Option(
        help="Only this e-mail address may use the link (without: anyone holding it).")] = None,
    base_url: BaseUrl = "http://127.0.0.1:8000",
    database_url: DatabaseUrl = None,
) -> None:
    """Print a single-use, expiring invitation link for a role in a study.

    Example: `clinieval invite cardio --role admin --email ana@example.org`
    """
    from clinieval.platform.accounts import create_invitations
    from clinieval.storage import db

    emails = None
    if email is not None:
        from clinieval.errors import InputError
        from clinieval.platform.membership import parse_emails

        emails = parse_emails(email)
        if len(emails) != 1:
            raise InputError("invite", "one e-mail address", field="email", got=email[:80])
    with db.writing(study_engine(database_url, study_id, "invite")) as conn:
        token = create_invitations(conn, study_id, role, 1, days, emails=emails)[0]
    out.print(f"{base_url.rstrip('/')}/invite/{token}", highlight=False, soft_wrap=True)
