# TEMPORARY shim (issue 28 merge): the platform's tables moved to
# clinieval.storage.schema.platform; the lead rewrites the importers and deletes this file.
"""Old path of :mod:`clinieval.storage.schema.platform`."""

from clinieval.storage.schema.platform import *  # noqa: F403
