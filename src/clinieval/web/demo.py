# TEMPORARY shim (issue 28 merge): moved to clinieval.platform.demo; for cli_web.py until
# the lead rewrites its imports.
from clinieval.platform.demo import *  # noqa: F403
