# TEMPORARY shim (issue 28 merge): the study services of manage.py moved to
# clinieval.platform (membership, studies, study_export); for cli_web.py, test_archive.py
# and test_export_pseudonyms.py until the lead rewrites their imports.
from clinieval.platform.membership import *  # noqa: F403
from clinieval.platform.studies import new_rubric_version  # noqa: F401
from clinieval.platform.study_export import export_salt, export_zip  # noqa: F401
