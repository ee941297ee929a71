# TEMPORARY shim (issue 28 merge): the validator moved to clinieval.contract.validate;
# the lead rewrites the importers and deletes this file.
"""Old path of :mod:`clinieval.contract.validate`."""

from clinieval.contract.validate import *  # noqa: F403
