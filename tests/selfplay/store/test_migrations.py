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


def test_0005_hashes_what_a_bug_writes_and_where(store_url):
    """Up: every task's hash (and its `task_stats` copy) is `task_hash`, what the bug writes and where. Down:
    text only again, except that a second task writing the same text elsewhere keeps its own hash."""
    from selfplay.diffs import normalised_hash
    from selfplay.store.store import task_hash

    with open_store(store_url) as store:
        art = make_artifact(3)
        elsewhere = art.__class__(test_script=art.test_script, test_files=art.test_files, test_parser=art.test_parser,
                                  bug_inject=art.bug_inject.replace("@@ -3,1 +3,1 @@", "@@ -30,1 +30,1 @@"),
                                  test_weaken=art.test_weaken)
        ids = [store.record_validation(a, "toolz", make_report(n=3), origin="injector")
               for a in (art, elsewhere, make_artifact(4))]
        bugs = {i: store.get_task(i).artifact.bug_inject for i in ids}
        engine = store.engine

        def hashes() -> dict[str, tuple[str, str]]:
            with engine.connect() as conn:
                return {t: (h, conn.execute(text("SELECT diff_hash FROM task_stats WHERE task_id = :t"),
                                            {"t": t}).scalar_one())
                        for t, h in conn.execute(text("SELECT task_id, diff_hash FROM tasks")).all()}

        assert hashes() == {i: (task_hash(b, None),) * 2 for i, b in bugs.items()}
        downgrade(engine, "0004")
        down = hashes()
        assert down[ids[0]] == (normalised_hash(art.bug_inject),) * 2
        assert down[ids[2]] == (normalised_hash(bugs[ids[2]]),) * 2
        assert down[ids[1]] == (task_hash(elsewhere.bug_inject, None),) * 2  # the same text: kept its own
        migrate(engine)
        assert hashes() == {i: (task_hash(b, None),) * 2 for i, b in bugs.items()}
        assert store.record_artifact(elsewhere, "toolz", make_report(n=3), origin="injector").task_id == ids[1]
