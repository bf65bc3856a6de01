"""Which repos, strategies and tasks an iteration plays (SSR section 2; the draws are ours).

- Repos per injector episode: round robin over `RunConfig.repos` (a cursor kept in the loop state, so a
  resumed run continues where it was), or weighted at random by `rollout.repo_weights`.
- Strategy per injector episode: uniformly from `rollout.strategies` (SSR: removal or history-aware).
- Solver tasks: this iteration's fresh valid tasks first (all of them, even beyond `rollout.solver_tasks`,
  because each injector's Eq. 1 reward needs its bug's G attempts of this iteration), then higher-order
  tasks, then stored tasks from the difficulty band (`store.sample_tasks`).
- Procedural seeds (not in SSR) fill the store while it holds fewer than `curriculum.min_active_tasks`
  active tasks. Validated seeds are cached (`selfplay.demos.seed_cache`, keyed by repo, image, count and
  settings), so a repeated run reuses them instead of seeding again.
"""

from __future__ import annotations

import logging
import random
import time
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from repos.listfile import get_repo
from sandboxes.images import repo_image
from selfplay.config.run_config import CurriculumConfig, RolloutConfig, RunConfig
from selfplay.demos.seed_cache import cached_seed
from selfplay.procedural.seed import SeedConfig
from selfplay.task import Task, make_task_id

if TYPE_CHECKING:
    from selfplay.orchestration.ledger import RunLedger
    from selfplay.store.protocol import TaskStore

log = logging.getLogger(__name__)


def pick_repos(repos: Sequence[str], n: int, rollout: RolloutConfig, cursor: int,
               rng: random.Random) -> tuple[list[str], int]:
    """`n` repos for this iteration's injector episodes and the new round-robin cursor."""
    if rollout.repo_sampling == "weighted":
        weights = [float(rollout.repo_weights.get(r, 1.0)) for r in repos]
        if not any(w > 0 for w in weights):
            raise ValueError("rollout.repo_weights gives every repo weight 0; give at least one a positive weight")
        return rng.choices(list(repos), weights=weights, k=n), cursor
    return [repos[(cursor + i) % len(repos)] for i in range(n)], (cursor + n) % len(repos)


def pick_strategies(strategies: Sequence[str], n: int, rng: random.Random) -> list[str]:
    if not strategies:
        raise ValueError("rollout.strategies is empty; name at least one injection strategy (removal, history)")
    return [rng.choice(list(strategies)) for _ in range(n)]


def _sample(store: TaskStore, n: int, config: CurriculumConfig, rng: random.Random, **select: Any) -> list[Task]:
    if n <= 0:
        return []
    return list(store.sample_tasks(n, config=config.sampling, rng=rng, **select))


def draw_tasks(store: TaskStore, fresh: Sequence[str], n: int, config: CurriculumConfig,
               rng: random.Random) -> list[Task]:
    """Fresh tasks (every one), then higher-order ones (up to a quarter of the rest, at least one), then
    the band, without repeats; fewer than `n` when the store has no more."""
    chosen: list[Task] = []
    seen: set[str] = set()

    def take(tasks: Sequence[Task]) -> None:
        for t in tasks:
            if t.task_id not in seen:
                seen.add(t.task_id)
                chosen.append(t)

    if config.fresh_first:
        take(store.get_tasks(list(dict.fromkeys(fresh))))
    left = n - len(chosen)
    if left > 0:
        take(_sample(store, max(1, left // 4), config, rng, origin="higher_order"))
    left = n - len(chosen)
    if left > 0:
        # over-draw: the band may hand back tasks already chosen above
        take(_sample(store, left + len(seen), config, rng)[: left + len(seen)])
    return chosen[: max(n, len(fresh) if config.fresh_first else 0)]


def active_tasks(store: TaskStore) -> int:
    return len(store.task_stats(status="active"))


def seed_repo(spec: Any, k: int, *, seed: int, validation: Any) -> list[tuple[Any, Any, str]]:
    """`k` validated procedural seeds of `spec` as (artifact, report, operator): from the seed cache
    (`selfplay.demos.seed_cache`, keyed by repo, image, k and settings) or seeded and cached."""
    results, hit = cached_seed(spec, k, image=repo_image(spec), config=SeedConfig(seed=seed), validation=validation)
    log.info("procedural seeds of %s: %d (%s)", spec.name, len(results), "cached" if hit else "seeded")
    return [(r.artifact, r.report, r.operator) for r in results]


def seed_thin_store(store: TaskStore, specs: Sequence[Any], config: CurriculumConfig, *, seed: int, validation: Any,
                    record: Any) -> int:
    """While the store holds fewer than `min_active_tasks` active tasks, add `seed_per_repo` procedural
    seeds of each repo; `record(artifact, repo, report, strategy)` stores one and returns its task id.
    Returns how many new tasks were stored."""
    if config.seed_per_repo <= 0 or active_tasks(store) >= config.min_active_tasks:
        return 0
    added = 0
    for spec in specs:
        try:
            seeds = seed_repo(spec, config.seed_per_repo, seed=seed, validation=validation)
        except ValueError as exc:  # a repo that cannot be seeded (no test_<module>.py) is not fatal
            log.warning("no procedural seeds for %s: %s", spec.name, exc)
            continue
        for artifact, report, operator in seeds:
            before = store.has_task(_task_id(spec.name, artifact))
            task_id = record(artifact, spec.name, report, operator)
            added += int(task_id is not None and not before)
    log.info("procedural seeding: %d new tasks (store thin below %d active)", added, config.min_active_tasks)
    return added


def _task_id(repo: str, artifact: Any) -> str:
    return make_task_id(repo, artifact)


def demonstrated_tasks(warm_start_store: TaskStore) -> list[Task]:
    """The solver tasks of a warm start's store that a kept (+1) demonstration repaired, in order."""
    ids = [a.task_id for a in warm_start_store.attempts(source="demo")
           if a.role == "solver" and a.reward > 0 and a.task_id is not None]
    return warm_start_store.get_tasks(list(dict.fromkeys(ids)))


def run_demonstrated(config: RunConfig) -> list[Task]:
    """The demonstrated solver tasks `curriculum.demonstrated_tasks` gives the run of `config`: those of the
    warm start's store (`curriculum.demonstrated_store`, or `warm_start.config`'s) on the run's repos."""
    from selfplay.demos.warm_start import cache_dir  # lazy: pulls the demonstration machinery
    from selfplay.store import open_store

    named = config.curriculum.demonstrated_store
    path = Path(named).expanduser() if named else cache_dir(config.warm_start.config) / "store.db"
    if not path.is_file():
        hint = ("name an existing warm start's store.db (its cache directory holds one beside the model)" if named
                else "build the warm start of warm_start.config first (`selfplay warm-start`, or run with "
                     "warm_start.enabled)")
        raise FileNotFoundError(f"curriculum.demonstrated_tasks: no warm-start store at {path}; {hint}")
    with open_store(str(path), create=False) as ws:
        tasks = demonstrated_tasks(ws)
    other = sorted({t.repo for t in tasks} - set(config.repos))
    if other:  # a held-out repo is never among `repos` (RunConfig refuses it), so it never gets in here
        log.info("curriculum: demonstrated tasks of %s skipped (not among this run's repos)", ", ".join(other))
    return [t for t in tasks if t.repo in config.repos]


def import_demonstrated(config: RunConfig, store: TaskStore) -> int:
    """`curriculum.demonstrated_tasks`: copies the warm start's demonstrated solver tasks into `store`;
    returns how many were new there."""
    tasks = run_demonstrated(config)
    new = [t for t in tasks if not store.has_task(t.task_id)]
    for task in new:
        store.add_task(task)
    log.info("curriculum: %d demonstrated tasks of the warm start (%d new in the store)", len(tasks), len(new))
    return len(new)


def seed_store(config: RunConfig, store: TaskStore, ledger: RunLedger) -> float:
    """The warm start's demonstrated tasks when `curriculum.demonstrated_tasks`, then procedural seeds while
    the store is thin (both counted in the ledger); returns the seconds it took."""
    cur = config.curriculum
    t0 = time.monotonic()
    if cur.demonstrated_tasks and (config.starts_from_warm_start or cur.demonstrated_store):
        ledger.count(demonstrated_tasks=import_demonstrated(config, store))
    if cur.seed_per_repo <= 0 or active_tasks(store) >= cur.min_active_tasks:
        return time.monotonic() - t0

    def record(artifact: Any, repo: str, report: Any, strategy: str) -> str | None:
        return store.record_artifact(artifact, repo, report, origin="procedural", strategy=strategy).task_id

    specs = [get_repo(r, config.repo_list) for r in config.repos]
    added = seed_thin_store(store, specs, cur, seed=config.seed, validation=config.validation, record=record)
    ledger.count(seeded_tasks=added)
    return time.monotonic() - t0
