"""The training stratum: the procedural tasks an arm's loop seeds its store with, evaluated like the held-out
ones so that "training solve rate" can be compared between arms on the same tasks with the same seeds.

The loop's own per-iteration solve rate is measured on whatever tasks the curriculum drew that iteration,
by episodes the two arms sample differently; it cannot be paired. These tasks are fixed by the arms'
config (`curriculum.seed_per_repo` seeds of each training repo, SeedConfig seed = the run's seed, the
run's validation settings), read from the same seed cache the loop reads, so they are exactly the tasks
both arms' stores start from. They are training tasks: both arms train on them (and with the default
split they overlap the warm start's demonstrations, whose first seeding round uses the same SeedConfig
seed), which is what this stratum measures. Held-out generalisation is `heldout.py`'s.
"""

from __future__ import annotations

import logging
from typing import Any

from repos.listfile import get_repo
from selfplay.orchestration.curriculum import run_demonstrated, seed_repo
from selfplay.task import Task, make_task_id

log = logging.getLogger(__name__)


def training_tasks(config: Any, per_repo: int | None = None) -> list[tuple[Any, Task]]:
    """(RepoSpec, Task) pairs: the warm start's demonstrated tasks that the loop of `config` (a RunConfig)
    stores first when `curriculum.demonstrated_tasks` and `curriculum.demonstrated_store` are set, then,
    while they leave the store thin, the first `per_repo` (default all) of the procedural seeds it stores
    for each of its repos."""
    cur = config.curriculum
    shown = run_demonstrated(config) if cur.demonstrated_tasks and cur.demonstrated_store else []
    demonstrated = [(get_repo(t.repo, config.repo_list), t) for t in shown]
    if len(shown) >= cur.min_active_tasks:  # the store is not thin: the loop seeds nothing procedural
        return demonstrated
    ids = {t.task_id for t in shown}
    return demonstrated + [p for p in _procedural(config, per_repo) if p[1].task_id not in ids]


def _procedural(config: Any, per_repo: int | None) -> list[tuple[Any, Task]]:
    k = config.curriculum.seed_per_repo
    if k <= 0:
        raise ValueError("the training stratum is the loop's procedural seeds, but curriculum.seed_per_repo is "
                         f"{k}; set it to at least 1 or evaluate no training tasks")
    out: list[tuple[Any, Task]] = []
    for name in config.repos:
        spec = get_repo(name, config.repo_list)
        try:
            seeds = seed_repo(spec, k, seed=config.seed, validation=config.validation)
        except ValueError as exc:  # a repo that cannot be seeded is skipped by the loop as well
            log.warning("training stratum: no seeds for %s: %s", name, exc)
            continue
        tasks = [(spec, Task(make_task_id(name, artifact), name, artifact, tuple(report.fail_to_pass),
                             tuple(report.pass_to_pass), origin="procedural"))
                 for artifact, report, _ in seeds]
        out += tasks[:per_repo] if per_repo is not None else tasks
    return out
