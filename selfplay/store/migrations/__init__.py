"""Alembic migrations of the store, applied by `selfplay.store.engine.migrate` on open."""
