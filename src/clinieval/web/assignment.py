# TEMPORARY shim (issue 28 merge): moved to clinieval.platform.assignment; for
# test_pair_options.py until the lead rewrites its imports.
from clinieval.platform.assignment import *  # noqa: F403
