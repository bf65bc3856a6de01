"""Alembic environment: always runs on the connection `selfplay.store.engine` hands over."""

from alembic import context

from selfplay.store.models import Base

connection = context.config.attributes.get("connection")
if connection is None:
    raise RuntimeError("run migrations through selfplay.store.engine.migrate(), which passes a connection")
context.configure(
    connection=connection, target_metadata=Base.metadata, render_as_batch=connection.dialect.name == "sqlite"
)
with context.begin_transaction():
    context.run_migrations()
