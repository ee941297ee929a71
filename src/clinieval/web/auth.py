# TEMPORARY shim (issue 28 merge): accounts moved to clinieval.platform.accounts (and the
# clock and audit events to clinieval.platform.events); for cli_web.py, test_prepared.py
# and test_report_csp.py until the lead rewrites their imports.
from clinieval.platform.accounts import *  # noqa: F403
from clinieval.platform.events import now  # noqa: F401
