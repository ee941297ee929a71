# TEMPORARY shim (issue 28 merge): the contract moved to clinieval.contract.tabular and
# clinieval.contract.vocabulary; the lead rewrites the importers and deletes this file.
"""Old path of the tabular contract and its vocabulary (see :mod:`clinieval.contract`)."""

from clinieval.contract.tabular import *  # noqa: F403
from clinieval.contract.vocabulary import *  # noqa: F403
