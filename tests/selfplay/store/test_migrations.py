"""Alembic migrations up and down, on an empty and on a populated database, on both engines; and the
migrated schema matches the models exactly."""

from __future__ import annotations

from sqlalchemy import inspect, text
from store_data import make_artifact, make_report

from selfplay.store import open_store
from selfplay.store.engine import (
    current_revision,
    downgrade,
    head_revision,
    make_engine,
    migrate,
    resolve_url,
)
from selfplay.store.models import Base

TABLES = {"repos", "runs", "checkpoints", "artifacts", "check_results", "tasks", "attempts", "task_stats"}


def _tables(engine) -> set[str]:
    return set(inspect(engine).get_table_names()) - {"alembic_version"}


def test_up_and_down_on_empty_database(store_url):
    engine = make_engine(resolve_url(store_url))
    migrate(engine)
    assert current_revision(engine) == head_revision() and _tables(engine) == TABLES
    downgrade(engine, "0001")
    assert _tables(engine) == TABLES - {"task_stats"}
    downgrade(engine, "base")
    assert current_revision(engine) is None and _tables(engine) == set()
    migrate(engine)
    assert _tables(engine) == TABLES
    engine.dispose()


def test_up_and_down_on_populated_database_keeps_and_rebuilds_statistics(store_url):
    with open_store(store_url) as store:
        ids = [
            store.record_validation(make_artifact(i), "toolz", make_report(n=i), origin="injector")
            for i in range(3)
        ]
        for reward in (1.0, -1.0, 1.0):
            store.record_attempt(
                ids[0],
                role="solver",
                policy_version=1,
                reward=reward,
                turns=1,
                tokens=1,
                termination="submitted",
            )
        store.register_checkpoint("run", 1, "/ckpt")
        before = store.task_stats()
        engine = store.engine
        downgrade(engine, "0001")  # drops the statistics table, keeps tasks and attempts
        with engine.connect() as conn:
            assert conn.execute(text("SELECT count(*) FROM tasks")).scalar_one() == 3
            assert conn.execute(text("SELECT count(*) FROM attempts")).scalar_one() == 3
        migrate(engine)  # 0002 backfills the statistics from the attempts
        assert store.task_stats() == before
        assert [s.recent for s in store.task_stats([ids[0]])] == ["101"]
        downgrade(engine, "base")
        assert _tables(engine) == set()
        migrate(engine)
        assert store.task_stats() == [] and store.checkpoints("run") == []


def test_migrated_schema_matches_the_models(store_url):
    from alembic.autogenerate import compare_metadata
    from alembic.runtime.migration import MigrationContext

    with open_store(store_url) as store, store.engine.connect() as conn:
        diff = compare_metadata(MigrationContext.configure(conn), Base.metadata)
    assert diff == [], f"models and migrations disagree; add a migration for: {diff}"


def test_0004_indexes_higher_order_children(store_url):
    """`used_failed_patches` reads a parent's children per failed attempt: by index, not a scan of tasks."""
    with open_store(store_url) as store:
        parent = store.record_validation(make_artifact(1), "toolz", make_report(n=1), origin="injector")
        engine = store.engine

        def indexes() -> set[str]:
            return {ix["name"] for ix in inspect(engine).get_indexes("tasks")}

        assert "ix_tasks_parent_id" in indexes()
        downgrade(engine, "0003")
        assert "ix_tasks_parent_id" not in indexes()
        migrate(engine)
        assert "ix_tasks_parent_id" in indexes() and store.used_failed_patches(parent) == set()
        if engine.dialect.name == "sqlite":
            with engine.connect() as conn:
                plan = conn.execute(text("EXPLAIN QUERY PLAN SELECT pred_patch, meta FROM tasks "
                                         "WHERE parent_id = :p"), {"p": parent}).all()
            assert "ix_tasks_parent_id" in str(plan), plan
