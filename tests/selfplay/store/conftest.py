"""Store fixtures: every store test runs on a SQLite file and on PostgreSQL (a fresh schema per test,
dropped afterwards; the `postgres` marker skips it outside CI when no server is configured)."""

from __future__ import annotations

import os
import uuid
from types import SimpleNamespace

import pytest
from store_data import make_artifact, make_report


def _pg_schema_url(base: str, schema: str) -> str:
    sep = "&" if "?" in base else "?"
    return f"{base}{sep}options=-csearch_path%3D{schema}"


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def store_url(request, tmp_path):
    """A URL of an empty store on each engine."""
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'selfplay.db'}"
        return
    from sqlalchemy import create_engine, text

    base = os.environ["SELFPLAY_TEST_POSTGRES_URL"]
    schema = f"t_{uuid.uuid4().hex[:12]}"
    admin = create_engine(base, isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.execute(text(f"CREATE SCHEMA {schema}"))
    try:
        yield _pg_schema_url(base, schema)
    finally:
        with admin.connect() as conn:
            conn.execute(text(f"DROP SCHEMA {schema} CASCADE"))
        admin.dispose()


@pytest.fixture
def store(store_url):
    from selfplay.store import open_store

    st = open_store(store_url)
    yield st
    st.close()


@pytest.fixture
def artifacts():
    return SimpleNamespace(make=make_artifact, report=make_report)
