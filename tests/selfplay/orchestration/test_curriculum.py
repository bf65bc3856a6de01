"""Curriculum draws: repos (round robin, weighted), strategies, tasks from a real SQLite store (fresh
first, higher-order, band, no repeats), and procedural seeding of a thin store from the seed cache."""

from __future__ import annotations

import logging
import random

import pytest

from selfplay.config.loader import load_config
from selfplay.config.run_config import CurriculumConfig, RolloutConfig
from selfplay.orchestration.curriculum import (
    draw_tasks,
    import_demonstrated,
    pick_repos,
    pick_strategies,
    seed_thin_store,
)
from selfplay.store import open_store
from selfplay.task import Task, make_task_id
from tests.selfplay.orchestration.loop_double import artifact
from tests.selfplay.store.store_data import make_report


def test_round_robin_continues_from_cursor():
    repos = ("a", "b", "c")
    picked, cursor = pick_repos(repos, 4, RolloutConfig(), 2, random.Random(0))
    assert picked == ["c", "a", "b", "c"] and cursor == 0


def test_weighted_repos_follow_weights():
    cfg = RolloutConfig(repo_sampling="weighted", repo_weights={"a": 0.0, "b": 1.0})
    picked, _ = pick_repos(("a", "b"), 50, cfg, 0, random.Random(0))
    assert set(picked) == {"b"}
    with pytest.raises(ValueError, match="repo_weights"):
        pick_repos(("a",), 1, RolloutConfig(repo_sampling="weighted", repo_weights={"a": 0.0}), 0, random.Random(0))


def test_strategies_drawn_from_config():
    assert set(pick_strategies(("removal", "history"), 40, random.Random(1))) == {"removal", "history"}
    with pytest.raises(ValueError, match="strategies"):
        pick_strategies((), 1, random.Random(0))


@pytest.fixture()
def store(tmp_path):
    with open_store(str(tmp_path / "s.db")) as s:
        yield s


def stored(store, n: int) -> str:
    return store.record_validation(artifact(n), "toolz", make_report(True, n), origin="injector")


def test_fresh_first_then_higher_order_then_band(store):
    ids = [stored(store, n) for n in range(1, 7)]
    parent = store.get_task(ids[0])
    layer = "diff --git a/pkg/x.py b/pkg/x.py\n--- a/pkg/x.py\n+++ b/pkg/x.py\n@@ -1 +1 @@\n-a\n+b\n"
    child = Task(make_task_id("toolz", parent.artifact, layer), "toolz", parent.artifact, parent.fail_to_pass,
                 parent.pass_to_pass, origin="higher_order", order=2, parent_id=parent.task_id, pred_patch=layer)
    store.add_task(child)
    fresh = [ids[4], ids[5], ids[5]]
    tasks = draw_tasks(store, fresh, 5, CurriculumConfig(), random.Random(0))
    got = [t.task_id for t in tasks]
    assert got[:2] == [ids[4], ids[5]] and len(got) == len(set(got)) == 5
    assert child.task_id in got
    # every fresh task is attempted even past n (each injector's reward needs its G attempts)
    assert [t.task_id for t in draw_tasks(store, ids[:3], 2, CurriculumConfig(), random.Random(0))] == ids[:3]


def test_draw_from_empty_store(store):
    assert draw_tasks(store, [], 4, CurriculumConfig(), random.Random(0)) == []


@pytest.mark.docker
def test_thin_store_is_seeded_from_the_cache(store, tmp_path, caplog):
    from repos.listfile import get_repo
    from selfplay.validation import ValidationConfig

    def record(art, repo, report, strategy):
        return store.record_artifact(art, repo, report, origin="procedural", strategy=strategy).task_id

    cfg = CurriculumConfig(seed_per_repo=1, min_active_tasks=1)
    spec = get_repo("toolz")
    assert seed_thin_store(store, [spec], cfg, seed=0, validation=ValidationConfig(), record=record) == 1
    (task,) = store.list_tasks()
    assert task.origin == "procedural"
    # no longer thin: nothing more is seeded
    assert seed_thin_store(store, [spec], cfg, seed=0, validation=ValidationConfig(), record=record) == 0
    # a second run (a new store) reuses the cached seeds instead of seeding again
    with open_store(str(tmp_path / "other.db")) as other, caplog.at_level(logging.INFO):
        def record2(art, repo, report, strategy):
            return other.record_artifact(art, repo, report, origin="procedural", strategy=strategy).task_id

        assert seed_thin_store(other, [spec], cfg, seed=0, validation=ValidationConfig(), record=record2) == 1
    assert "(cached)" in caplog.text


def test_demonstrated_tasks_come_from_the_warm_start_store(store, tmp_path, monkeypatch):
    """`curriculum.demonstrated_tasks` copies exactly the solver tasks with a kept (+1) demonstration from the
    warm start's own store: not a failed demonstration, not an injector's, and only once."""
    from selfplay.config.run_config import RunConfig
    from selfplay.demos.warm_start import cache_dir

    monkeypatch.setenv("SELFPLAY_CACHE", str(tmp_path / "cache"))
    config = RunConfig()
    root = cache_dir(config.warm_start.config)
    with pytest.raises(FileNotFoundError, match="curriculum.demonstrated_tasks.*selfplay warm-start"):
        import_demonstrated(config, store)
    root.mkdir(parents=True)
    with open_store(str(root / "store.db")) as ws:
        ids = [ws.record_validation(artifact(n), "toolz", make_report(True, n), origin="procedural") for n in (1, 2, 3)]
        for task_id, reward in zip(ids, (1.0, -1.0, 1.0)):
            ws.record_attempt(task_id, role="solver", policy_version=0, reward=reward, turns=4, tokens=100,
                              termination="submitted", source="demo")
        ws.record_attempt(None, role="injector", policy_version=0, reward=1.0, turns=8, tokens=900,
                          termination="submitted", source="demo")
    assert import_demonstrated(config, store) == 2
    assert sorted(t.task_id for t in store.list_tasks()) == sorted([ids[0], ids[2]])
    assert import_demonstrated(config, store) == 0  # a resumed run imports nothing twice
    assert config.starts_from_warm_start
    assert not load_config("default", ["policy.model_dir=/some/checkpoint"]).starts_from_warm_start


def test_a_named_warm_start_store_gives_its_demonstrated_tasks_on_the_runs_repos_only(store, tmp_path):
    """A run that starts from a warm start's checkpoint (`policy.model_dir`, the learning experiment's arms)
    imports that warm start's demonstrated tasks through `curriculum.demonstrated_store`: those of its own
    repos only, and the training stratum the experiment evaluates is exactly them."""
    from selfplay.experiment.stratum import training_tasks

    path = tmp_path / "ws" / "store.db"
    overrides = ["policy.model_dir=/some/checkpoint", "curriculum.demonstrated_tasks=true",
                 f"curriculum.demonstrated_store={path}", "repos=[toolz, marshmallow]"]
    config = load_config("default", overrides)
    assert not config.starts_from_warm_start
    with pytest.raises(FileNotFoundError, match="no warm-start store at .*name an existing warm start's store.db"):
        import_demonstrated(config, store)
    path.parent.mkdir()
    with open_store(str(path)) as ws:
        ids = [ws.record_validation(artifact(n), repo, make_report(True, n), origin="procedural")
               for n, repo in ((1, "toolz"), (2, "boltons"), (3, "toolz"))]
        for task_id in ids:
            ws.record_attempt(task_id, role="solver", policy_version=0, reward=1.0, turns=4, tokens=100,
                              termination="submitted", source="demo")
    assert import_demonstrated(config, store) == 2  # boltons is not among this run's repos
    assert sorted(t.task_id for t in store.list_tasks()) == sorted([ids[0], ids[2]])
    assert [t.task_id for _, t in training_tasks(config)] == [ids[0], ids[2]]  # 2 >= min_active_tasks: no seeds
