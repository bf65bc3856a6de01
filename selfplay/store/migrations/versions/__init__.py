"""Revision scripts (Alembic skips this file)."""
