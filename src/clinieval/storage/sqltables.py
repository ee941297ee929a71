# TEMPORARY shim (issue 28 merge): the snapshot's tables moved to
# clinieval.storage.schema.snapshot, the run tables (RUN_TABLES) to
# clinieval.storage.schema.runs; the lead rewrites the importers and deletes this file.
"""Old path of the database's snapshot tables (see :mod:`clinieval.storage.schema`)."""

from clinieval.storage.schema.runs import RUN_TABLES  # noqa: F401
from clinieval.storage.schema.snapshot import *  # noqa: F403
