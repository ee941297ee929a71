"""What every table module of the database shares: one ``MetaData`` with the
constraint naming convention, and the SQL of a vocabulary CHECK.

Invariant: every table of clinieval's database is defined on this
``metadata`` (the snapshot's, the runs' and the platform's tables), so
constraint names follow one convention and the migrations check compares
against all of them; import :mod:`clinieval.storage.schema` to have them all.
"""

from __future__ import annotations

import sqlalchemy as sa

metadata = sa.MetaData(
    naming_convention={
        "pk": "pk_%(table_name)s",
        "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
        "uq": "uq_%(table_name)s_%(column_0_N_name)s",
        "ck": "ck_%(table_name)s_%(constraint_name)s",
        "ix": "ix_%(table_name)s_%(column_0_N_name)s",
    }
)


def one_of(column: str, values: tuple[str, ...], nullable: bool = False) -> str:
    """SQL for "``column`` is one of ``values``" (the contract's vocabulary),
    or null when ``nullable``."""
    quoted = ", ".join("'" + v.replace("'", "''") + "'" for v in values)
    return f"{column} IS NULL OR {column} IN ({quoted})" if nullable else f"{column} IN ({quoted})"
