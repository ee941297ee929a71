# TEMPORARY shim (issue 28 merge): moved to clinieval.platform.studies (export:
# clinieval.platform.study_export, flagged answers: clinieval.platform.screening); for
# cli_web.py and test_export_pseudonyms.py until the lead rewrites their imports.
from clinieval.platform.screening import flagged_answers  # noqa: F401
from clinieval.platform.studies import *  # noqa: F403
from clinieval.platform.study_export import export_study, study_snapshot  # noqa: F401
