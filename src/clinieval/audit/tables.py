# TEMPORARY shim (issue 28 merge): web/live.py imports rule_words from here; the lead
# rewrites it to clinieval.audit.failure and deletes this module.
"""Moved: the report's columns and sentences to :mod:`clinieval.audit.formatting`,
the rate keys and the response rule in words to :mod:`clinieval.audit.failure`."""

from clinieval.audit.failure import *  # noqa: F403
from clinieval.audit.failure import RULE_WORDS, rule_words  # noqa: F401
from clinieval.audit.formatting import *  # noqa: F403
