"""What a run is assembled from: the store, the model it starts from, the rollout policy and learner, the
executor, and the reaping of a crashed run's containers."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agent_scaffold.embedded import default_model_dir
from sandboxes.engine import docker_client
from sandboxes.reaper import _remove, list_sandboxes
from selfplay.config.run_config import RunConfig
from selfplay.demos.warm_start import warm_start_checkpoint, warm_start_info
from selfplay.learner.checkpoint import latest_checkpoint, read_version
from selfplay.orchestration.learning import PolicyLearner
from selfplay.orchestration.rundir import RunDir
from selfplay.orchestration.state import LoopState
from selfplay.rollout.executor import LocalExecutor
from selfplay.rollout.policy_factory import hf_policy
from selfplay.rollout.ray_executor import RayExecutor
from selfplay.rollout.requests import EpisodeExecutor
from selfplay.rollout.worker import build_runner
from selfplay.store import open_store

if TYPE_CHECKING:
    from selfplay.store.protocol import TaskStore

log = logging.getLogger(__name__)


def open_run_store(config: RunConfig, run: RunDir) -> TaskStore:
    return open_store(config.store_url or str(run.store_db.resolve()))


def start_model_dir(config: RunConfig) -> str:
    """The checkpoint the policy and the learner start from: `policy.model_dir`, else the warm-start
    checkpoint (hf with `warm_start.enabled`; built on first use and cached), else the embedded model."""
    if config.policy.model_dir:
        return config.policy.model_dir
    if config.starts_from_warm_start:
        problem = undemonstrated_strategies(config)
        if problem:
            log.warning("%s", problem)
        return str(warm_start_checkpoint(config.warm_start.config))

    return str(default_model_dir())


def undemonstrated_strategies(config: RunConfig) -> str | None:
    """What is wrong when a run that starts from the warm start draws injector strategies it never
    demonstrated (its injector episodes then play a prompt the policy has not seen), else None."""
    ws, rollout = config.warm_start.config, config.rollout
    other = [s for s in rollout.strategies if s != ws.injector_strategy]
    if not (config.starts_from_warm_start and ws.injector_per_repo and rollout.injector_episodes and other):
        return None
    return (f"the warm start demonstrates the {ws.injector_strategy} injector strategy, but the run's injector "
            f"episodes also draw {', '.join(other)}, a prompt it never showed; set "
            f"rollout.strategies=[{ws.injector_strategy}] (or warm_start.config.injector_strategy)")


def warm_start_record(config: RunConfig) -> dict[str, Any] | None:
    """Which warm start the run started from (config key, content key, demonstrations per role, SFT steps,
    checkpoint), for summary.json; None when it started from `policy.model_dir` or no warm start."""
    if not config.starts_from_warm_start:
        return None

    try:
        return warm_start_info(config.warm_start.config).record()
    except FileNotFoundError:  # a cache emptied under the run: the summary says nothing rather than guess
        return None


def resume_checkpoint(run: RunDir) -> tuple[Path | None, int]:
    """The newest complete checkpoint of the run and its policy version (None, 0 before the first)."""
    path = latest_checkpoint(run.checkpoints)
    return (path, read_version(path)) if path is not None else (None, 0)


def build_learner(config: RunConfig, run: RunDir, store: TaskStore, run_id: str, checkpoint: Path | None,
                  state: LoopState, *, rollout_policy: bool = True) -> tuple[Any, Any]:
    """(rollout policy or None, PolicyLearner or None). An hf policy is built here (from the checkpoint
    when resuming, reporting its version) so the learner can sync weights into it; other backends are
    built by the worker, and none when `rollout_policy` is False (a caller-supplied runner plays)."""
    hf = rollout_policy and config.policy.backend == "hf"
    model_dir = start_model_dir(config) if config.learner.enabled or hf else None
    policy = None
    if hf:
        policy = hf_policy(config.policy, model_dir=str(checkpoint or model_dir), version=state.policy_version)
    learner = None
    if config.learner.enabled:
        learner = PolicyLearner(config, str(model_dir), run.checkpoints, policy=policy, store=store, run_id=run_id,
                                initial_version=state.policy_version, resume_from=checkpoint,
                                baseline=state.baseline or None)
    return policy, learner


def build_executor(config: RunConfig, policy: Any, run_id: str, runner: Any = None) -> EpisodeExecutor:
    if config.rollout.executor == "ray":
        return RayExecutor(config, workers=config.rollout.workers, retries=config.rollout.episode_retries,
                           address=config.rollout.ray_address, run_id=run_id, policy=policy)

    if config.rollout.ray_address:  # not refused: a preset that sets it may have its executor overridden
        log.warning("rollout.ray_address=%s is not used: rollout.executor is local, so the episodes run in this "
                    "process's threads; set rollout.executor=ray to run them on that cluster",
                    config.rollout.ray_address)
    if runner is None:
        runner = build_runner(config, policy, run_id=run_id)
    return LocalExecutor(runner, workers=config.rollout.workers, retries=config.rollout.episode_retries)


def reap_containers(run_id: str) -> int:
    """Remove the containers of a crashed run: those labelled with `run_id` whose owner process is gone,
    and every other container of that dead owner. Process-wide ones, the parser boxes, carry no run id
    (one process may serve several runs), and a `kill -9` leaves them behind like the run's own."""
    try:
        client = docker_client()
    except Exception as exc:  # no Docker here: nothing of ours can be running either
        log.warning("could not reach Docker to reap containers of %s: %s", run_id, exc)
        return 0
    found = list_sandboxes(client)
    dead = {s.owner for s in found if s.run_id == run_id and s.owner_alive is False}
    doomed = [s.id for s in found if (s.run_id == run_id and s.owner_alive is not True)
              or (s.owner in dead and s.owner_alive is False)]
    _remove(client, doomed)
    if doomed:
        log.info("reaped %d containers of crashed run %s", len(doomed), run_id)
    return len(doomed)
