"""``python -m clinieval.cli``: the same command line as the ``clinieval`` script."""

from clinieval.cli import main

main()
