"""The database's tables (SQLAlchemy Core), one module per part:
:mod:`~clinieval.storage.schema.snapshot` (the snapshot's tables, built from
the contract), :mod:`~clinieval.storage.schema.runs` (automated runs and the
call cache), :mod:`~clinieval.storage.schema.platform` (the clinician
platform) and :mod:`~clinieval.storage.schema.benchmarks` (benchmark runs'
per-instance results).

Invariant: importing this package defines every table on :data:`metadata`,
complete by construction (no table module attaches itself as a side effect of
another's import). Alembic's environment and the migrations check import it.
"""

# Each module defines its tables on metadata when imported; they are imported
# in the order the tables have always been defined (metadata.tables keeps it).
# isort: off
from clinieval.storage.schema import snapshot  # noqa: F401
from clinieval.storage.schema import runs  # noqa: F401
from clinieval.storage.schema import platform  # noqa: F401
from clinieval.storage.schema import benchmarks  # noqa: F401
# isort: on
from clinieval.storage.schema.shared import metadata

__all__ = ["metadata"]
