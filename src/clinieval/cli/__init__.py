"""The ``clinieval`` command line: each command a few lines over a library call.

One module per command group adds its commands with ``register(app)``, in the
order ``--help`` lists them; :mod:`clinieval.cli.common` holds what they share.
Commands import the services they call when they run (``clinieval --help``
stays quick), and only ``serve`` imports the web app.
"""

from __future__ import annotations

import os

# The audit's matrix products are small (replicates x a few hundred): OpenBLAS
# threads spin up and wait for more CPU than they save, which on two cores
# also starves the processes that draw the figures. An explicit setting wins.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import typer

from clinieval.cli import bench, calls, database, runs, snapshot, web

app = typer.Typer(no_args_is_help=True, add_completion=False, rich_markup_mode="markdown",
                  help="Safety-first evaluation of medical LLMs from clinician ratings and votes.")
for group in (database, snapshot, runs, calls, bench, web):
    group.register(app)


def main() -> None:
    app()
