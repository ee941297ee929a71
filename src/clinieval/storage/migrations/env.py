"""Alembic environment: runs migrations on the connection clinieval passes in
(``config.attributes['connection']``) or on ``sqlalchemy.url``."""

from alembic import context
from sqlalchemy import engine_from_config, pool

from clinieval.storage.schema import metadata

config = context.config


def _run(connection) -> None:
    context.configure(connection=connection, target_metadata=metadata,
                      render_as_batch=connection.dialect.name == "sqlite")
    with context.begin_transaction():
        context.run_migrations()


connection = config.attributes.get("connection")
if connection is not None:
    _run(connection)
else:
    engine = engine_from_config(config.get_section(config.config_ini_section, {}),
                                prefix="sqlalchemy.", poolclass=pool.NullPool)
    with engine.connect() as conn:
        _run(conn)
