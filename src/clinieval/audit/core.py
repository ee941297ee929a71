# TEMPORARY shim (issue 28 merge): web/live.py and benchmarks/bench_benchmarks.py import
# Context from here; the lead rewrites them to clinieval.audit.context and deletes this module.
"""Moved: the context to :mod:`clinieval.audit.context`, count arrays to
:mod:`clinieval.audit.counts`, failure to :mod:`clinieval.audit.failure` and the
bootstrap design to :mod:`clinieval.audit.design`."""

from clinieval.audit.context import *  # noqa: F403
from clinieval.audit.context import Context  # noqa: F401
from clinieval.audit.counts import SCORES, score_sum  # noqa: F401
from clinieval.audit.design import DESIGNS  # noqa: F401
