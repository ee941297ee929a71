# TEMPORARY shim (issue 28 merge): moved to clinieval.synth.judges; delete once importers move.
"""Old path of :mod:`clinieval.synth.judges`, kept only until the importers
(``cli.py`` and four test files) import the new path."""

from clinieval.synth.judges import *  # noqa: F403
