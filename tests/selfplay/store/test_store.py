"""TaskStore round-trips of every model and the store-side sampling, on SQLite and PostgreSQL."""

from __future__ import annotations

import random
from dataclasses import replace
from pathlib import Path

import pytest
from store_data import make_artifact, make_report

from selfplay.store import SamplingConfig, StoreError, TaskNotFound, open_store
from selfplay.store.engine import resolve_url
from selfplay.task import Task


def test_repo_run_checkpoint_round_trip(store):
    assert store.get_repo("toolz") is None
    store.upsert_repo("toolz", image="selfplay/toolz:1.0", base_commit="abc123")
    store.upsert_repo("toolz", version="1.0.0")
    repo = store.get_repo("toolz")
    assert (repo.name, repo.image, repo.base_commit, repo.version) == (
        "toolz",
        "selfplay/toolz:1.0",
        "abc123",
        "1.0.0",
    )
    run = store.register_run("run-1", {"lr": 1e-6, "group": 8}, note="smoke")
    assert store.register_run("run-1", {"other": 1}).config == {"lr": 1e-6, "group": 8}  # idempotent
    assert store.get_run("run-1") == run
    store.register_checkpoint("run-1", 2, "/ckpt/v2")
    store.register_checkpoint("run-1", 1, "/ckpt/v1")
    store.register_checkpoint("run-1", 2, Path("/ckpt/v2b"))
    assert [(c.version, c.path) for c in store.checkpoints("run-1")] == [(1, "/ckpt/v1"), (2, "/ckpt/v2b")]


def test_validation_artifact_task_round_trip(store):
    art = make_artifact(3)
    task_id = store.record_validation(
        art, "toolz", make_report(n=3), origin="injector", strategy="removal", episode_id="ep-1"
    )
    task = store.get_task(task_id)
    assert task == Task(
        task_id=task_id,
        repo="toolz",
        artifact=art,
        fail_to_pass=("tests/test_core.py::test_3",),
        pass_to_pass=("tests/test_core.py::test_ok", "tests/test_core.py::test_other"),
    )
    record = store.get_artifact(task.metadata["artifact_id"])
    assert (
        record.artifact == art
        and record.valid
        and record.strategy == "removal"
        and record.episode_id == "ep-1"
    )
    assert [(c.name, c.passed, c.detail) for c in record.checks] == [
        ("test_files", True, "1 file"),
        ("bug_validity", True, "3 tests fail"),
    ]
    assert set(record.hashes) == {
        "test_script.sh",
        "test_files.txt",
        "test_parser.py",
        "bug_inject.diff",
        "test_weaken.diff",
    }
    # An invalid artifact is stored with its failed check, and makes no task.
    bad = make_artifact(4)
    assert store.record_validation(bad, "toolz", make_report(valid=False), origin="procedural") is None
    assert [t.task_id for t in store.list_tasks()] == [task_id]


def test_dedup_by_what_the_bug_writes_and_where(store):
    art = make_artifact(5)
    first = store.record_validation(art, "toolz", make_report(n=5), origin="injector")
    # Same bug with a context line, a header's section text, trailing whitespace and a different test
    # script: the same task (leading and interior whitespace count: an indentation-only bug is another bug).
    noisy = art.__class__(
        test_script="pytest -x\n",
        test_files=art.test_files,
        test_parser=art.test_parser,
        bug_inject=art.bug_inject.replace("@@ -5,1 +5,1 @@\n", "@@ -4,2 +4,2 @@ def f(x):\n def f(x):\n").replace(
            "return x - 5", "return x - 5  "
        ),
        test_weaken=art.test_weaken,
    )
    assert store.record_validation(noisy, "toolz", make_report(n=5), origin="injector") == first
    assert len(store.list_tasks()) == 1
    assert store.record_validation(art, "boltons", make_report(n=5), origin="injector") != first  # other repo
    # The same text on other lines is another bug (`d2 = factory()` -> `pass` in two functions).
    elsewhere = replace(art, bug_inject=art.bug_inject.replace("@@ -5,1 +5,1 @@", "@@ -50,1 +50,1 @@"))
    other = store.record_validation(elsewhere, "toolz", make_report(n=5), origin="injector")
    assert other not in (None, first) and other.startswith(first + "-")
    assert store.record_validation(elsewhere, "toolz", make_report(n=5), origin="injector") == other
    assert len(store.list_tasks()) == 3


def test_higher_order_parent_and_family(store):
    parent = store.record_validation(make_artifact(6), "toolz", make_report(n=6), origin="injector")
    pred = (
        "diff --git a/pkg/core.py b/pkg/core.py\n--- a/pkg/core.py\n+++ b/pkg/core.py\n"
        "@@ -9,1 +9,1 @@\n-a\n+b\n"
    )
    child = store.record_validation(
        make_artifact(6),
        "toolz",
        make_report(n=6),
        origin="higher_order",
        parent_id=parent,
        order=2,
        pred_patch=pred,
    )
    assert child != parent
    task = store.get_task(child)
    assert (task.parent_id, task.order, task.pred_patch, task.origin) == (parent, 2, pred, "higher_order")
    families = {s.task_id: s.family for s in store.task_stats()}
    assert families[child] == families[parent] == parent
    with pytest.raises(StoreError, match="neither a stored task nor a stored artifact"):
        store.record_validation(
            make_artifact(8), "toolz", make_report(n=8), origin="injector", parent_id="nope"
        )
    with pytest.raises(StoreError, match="unknown origin"):
        store.record_validation(make_artifact(8), "toolz", make_report(n=8), origin="magic")


def test_attempts_update_statistics(store):
    task_id = store.record_validation(make_artifact(9), "toolz", make_report(n=9), origin="injector")
    outcomes = [1.0, -1.0, -1.0] + [1.0] * 33
    for i, reward in enumerate(outcomes):
        store.record_attempt(
            task_id,
            role="solver",
            policy_version=i,
            reward=reward,
            turns=i,
            tokens=100 * i,
            termination="submitted",
            trajectory_path=f"/traj/{i}.json",
            wall_time=1.5,
            run_id="r",
        )
    store.record_attempt(
        None,
        role="injector",
        policy_version=0,
        reward=0.3,
        turns=5,
        tokens=50,
        termination="submitted",
        run_id="r",
    )
    (stats,) = store.task_stats([task_id])
    assert (stats.attempts, stats.solves, stats.recent) == (36, 34, "1" * 32)
    assert stats.solve_rate == pytest.approx(34 / 36) and stats.recent_rate == 1.0
    first = store.attempts(task_id=task_id)[1]
    assert (
        first.role,
        first.policy_version,
        first.reward,
        first.solved,
        first.turns,
        first.tokens,
        first.termination,
        first.trajectory_path,
        first.wall_time,
        first.run_id,
    ) == ("solver", 1, -1.0, False, 1, 100, "submitted", "/traj/1.json", 1.5, "r")
    assert len(store.attempts(run_id="r")) == 37
    with pytest.raises(TaskNotFound, match="unknown task"):
        store.record_attempt(
            "missing", role="solver", policy_version=0, reward=1, turns=1, tokens=1, termination="submitted"
        )
    with pytest.raises(TaskNotFound, match="tasks list"):
        store.get_task("missing")


def test_two_stores_of_the_same_tasks_draw_the_same_tasks(store, tmp_path):
    """The sampling key is a function of the task id, not drawn at insertion: two stores holding the same
    tasks (the learning experiment's rl and control arms) draw the same ones from the same seeded rng,
    whatever order the tasks were stored in."""
    from selfplay.store.rows import rand_key

    artifacts = [make_artifact(i) for i in range(10, 50)]
    ids = [store.record_validation(a, "toolz", make_report(n=i), origin="procedural")
           for i, a in zip(range(10, 50), artifacts)]
    with open_store(f"sqlite:///{tmp_path / 'other.db'}") as other:
        for i, a in reversed(list(zip(range(10, 50), artifacts))):
            other.record_validation(a, "toolz", make_report(n=i), origin="procedural")
        cfg = SamplingConfig(max_repo_share=1.0, max_per_family=1)
        for seed in range(5):  # 3 of 40: the pool is 12 candidates from a point the rng picks among the keys
            drawn = [t.task_id for t in store.sample_tasks(3, config=cfg, rng=random.Random(seed))]
            assert drawn == [t.task_id for t in other.sample_tasks(3, config=cfg, rng=random.Random(seed))]
    keys = [rand_key(t) for t in ids]
    assert all(0.0 <= k < 1.0 for k in keys) and len(set(keys)) == len(keys)


def test_sample_tasks_from_store_retires_and_targets_band(store):
    ids = [
        store.record_validation(make_artifact(i), "toolz", make_report(n=i), origin="injector")
        for i in range(10, 40)
    ]
    plan = {"easy": ids[:10], "mid": ids[10:20], "dead": ids[20:25]}  # ids[25:] stay unseen
    for kind, outcomes in (("easy", [1.0] * 4), ("mid", [1.0, -1.0, -1.0, -1.0]), ("dead", [-1.0] * 16)):
        for task_id in plan[kind]:
            for reward in outcomes:
                store.record_attempt(
                    task_id,
                    role="solver",
                    policy_version=0,
                    reward=reward,
                    turns=1,
                    tokens=1,
                    termination="submitted",
                )
    cfg = SamplingConfig(unseen_share=0.0, max_repo_share=1.0, max_per_family=1)
    batch = store.sample_tasks(10, config=cfg, rng=random.Random(0))
    assert {t.task_id for t in batch} == set(plan["mid"])
    # Sampling retires the exhausted candidates it meets; retire_exhausted sweeps the rest.
    retired = {s.task_id for s in store.task_stats(status="retired")}
    assert retired and retired <= set(plan["easy"]) | set(plan["dead"])
    assert store.retire_exhausted(cfg) == 15 - len(retired)
    retired = {s.task_id for s in store.task_stats(status="retired")}
    assert retired == set(plan["easy"]) | set(plan["dead"])
    batch = store.sample_tasks(30, config=cfg, rng=random.Random(1))
    assert {t.task_id for t in batch} == set(plan["mid"]) | set(ids[25:])
    assert store.set_status([ids[25]], "invalid", "flaky") == 1
    assert ids[25] not in {t.task_id for t in store.sample_tasks(30, config=cfg)}


def test_sample_tasks_fills_up_nearest_the_band_when_none_is_in_it(store):
    """No task in the 0.2-0.5 band: the draw takes the two nearest it (5 of 8 solved, 0.125 above; 1 of 8,
    0.075 below), not the hopeless ones (0 of 8, 0.2 below) that a random pool of n mostly held. The store
    holds no more than pool_factor * n active tasks, so nearest-first is exact here."""
    ids = [store.record_validation(make_artifact(i), "toolz", make_report(n=i), origin="injector")
           for i in range(10, 17)]
    plan = [[1, 1, 0, 1, 1, 0, 1, 0], [0, 0, 0, 1, 0, 0, 0, 0]] + [[0] * 8] * 5
    for task_id, outcomes in zip(ids, plan, strict=True):
        for solved in outcomes:
            store.record_attempt(task_id, role="solver", policy_version=0, reward=1.0 if solved else -1.0,
                                 turns=1, tokens=1, termination="submitted")
    cfg = SamplingConfig(unseen_share=0.0, max_repo_share=1.0)
    for seed in range(10):
        drawn = {t.task_id for t in store.sample_tasks(2, config=cfg, rng=random.Random(seed))}
        assert drawn == set(ids[:2]), seed


def test_open_store_defaults_to_a_file_in_the_run_dir(tmp_path, monkeypatch):
    monkeypatch.delenv("SELFPLAY_STORE", raising=False)
    assert resolve_url(None, tmp_path / "run") == f"sqlite:///{tmp_path / 'run' / 'selfplay.db'}"
    assert resolve_url("postgresql://u:p@h/db") == "postgresql+psycopg://u:p@h/db"
    with pytest.raises(StoreError, match="unsupported store URL"):
        resolve_url("mysql://x/y")
    with open_store(run_dir=tmp_path / "run") as st:
        with st.engine.connect() as conn:
            assert conn.exec_driver_sql("PRAGMA journal_mode").scalar() == "wal"
            assert conn.exec_driver_sql("PRAGMA foreign_keys").scalar() == 1
            assert conn.exec_driver_sql("PRAGMA busy_timeout").scalar() >= 1000
    assert (tmp_path / "run" / "selfplay.db").exists()
