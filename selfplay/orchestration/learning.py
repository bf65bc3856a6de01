"""`PolicyLearner`: one learner update per iteration, the way SSR's loop needs it.

trajectories -> (infrastructure failures and unrewarded episodes out, counted) -> `build_batch` (per-role
advantages with the injector's running-mean baseline, dynamic sampling, overlong handling, staleness)
-> `LearnerEngine.train_step` (skipped, and counted, when nothing is left) -> weight sync to the rollout
policy -> a checkpoint every `learner.checkpoint_every` updates (with retention, registered in the store)
-> periodic evaluation every `eval.every` checkpoints.

torch and DeepSpeed are imported only when a `PolicyLearner` is built (the `train` extra).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agent_scaffold.trajectory import Trajectory
from selfplay.config.run_config import RunConfig
from selfplay.eval.dataset import load_instances
from selfplay.eval.progress import log_step
from selfplay.eval.runner import evaluate_checkpoint
from selfplay.learner.baseline import RunningMeanBaseline
from selfplay.learner.batch import build_batch
from selfplay.learner.minibatches import split_update
from selfplay.learner.update_shift import update_shift
from selfplay.learner.weight_sync import HFPolicySync, HTTPPolicySync, MultiSync, VLLMDiskSync
from selfplay.orchestration.rundir import prune_checkpoints

if TYPE_CHECKING:
    from selfplay.store.protocol import TaskStore

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class UpdateResult:
    """What one `PolicyLearner.update` did."""

    metrics: dict[str, float]
    trained: bool
    """False when the batch was empty (the update was skipped)."""
    version: int
    checkpoint: Path | None = None
    eval_metrics: dict[str, float] = field(default_factory=dict)


def trainable(trajectories: Sequence[Trajectory]) -> tuple[list[Trajectory], int]:
    """The trajectories a learner may see, and how many were left out: infrastructure failures (never the
    model's doing), episodes without a reward (an injector whose bug got no gradable attempt) and episodes
    without a sampled token (the prompt alone filled the context: no gradient, only a wasted pass)."""
    kept = [t for t in trajectories
            if not t.metadata.get("infra_failure") and t.reward is not None and any(t.loss_mask)]
    return kept, len(trajectories) - len(kept)


def weight_sync(config: RunConfig, policy: Any) -> Any:
    """The `WeightSync` that moves learner weights into the rollout policy, or None when the policy has no
    weights (scripted: it plays at whatever version it is asked for)."""
    backend = config.policy.backend
    if backend == "hf" and policy is not None:
        # BatchingPolicy exposes model, version, load_weights and the lock its batches hold
        return HFPolicySync(policy, mode=config.learner.weight_sync)
    if backend == "openai":
        return MultiSync(*(HTTPPolicySync(url) for url in config.policy.endpoints))
    if backend == "vllm":
        return MultiSync(*(VLLMDiskSync(url) for url in config.policy.endpoints))
    return None


class PolicyLearner:
    """The learner engine plus everything an update needs around it."""

    def __init__(self, config: RunConfig, model_dir: str, checkpoints: Path, *, policy: Any = None,
                 store: TaskStore | None = None, run_id: str = "", initial_version: int = 0,
                 resume_from: Path | None = None, baseline: dict[str, Any] | None = None) -> None:
        from selfplay.learner.engine import LearnerEngine

        self.config, self.checkpoints, self.store, self.run_id = config, checkpoints, store, run_id
        self.engine = LearnerEngine(replace(config.learner.engine, model_dir=model_dir,
                                            temperature=config.rollout.temperature),
                                    initial_version=initial_version)
        state: dict[str, Any] = {}
        if resume_from is not None:
            state = self.engine.resume(resume_from)
        saved = state.get("injector_baseline") or baseline
        self.baseline = RunningMeanBaseline.from_state_dict(saved) if saved else RunningMeanBaseline()
        self.sync = weight_sync(config, policy)
        self.policy = policy
        self.checkpoints_written = 0

    @property
    def version(self) -> int:
        return int(self.engine.version)

    def close(self) -> None:
        """Frees the engine's model and optimizer state (`LearnerEngine.close`) and the sync's connections."""
        try:
            self.engine.close()
        finally:
            close_sync = getattr(self.sync, "close", None)
            if callable(close_sync):
                close_sync()

    def __enter__(self) -> PolicyLearner:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def batch(self, trajectories: Sequence[Trajectory]) -> tuple[list[Any], dict[str, float]]:
        """The samples an update of these trajectories trains on (untrainable episodes out, advantages,
        dynamic sampling), with the batch/* metrics; advances the injector's running baseline."""
        kept, excluded = trainable(trajectories)
        batch = self.config.learner.batch
        if getattr(batch, "group_size", 0) is None:  # G is the reward's group size unless set apart
            batch = replace(batch, group_size=self.config.reward.group_size)
        samples, metrics = build_batch(kept, self.version, batch, self.baseline)
        return samples, {**metrics, "batch/excluded_untrainable": float(excluded)}

    def update(self, trajectories: Sequence[Trajectory]) -> UpdateResult:
        samples, metrics = self.batch(trajectories)
        if not samples:
            log.info("learner: empty batch (%d trajectories, %d excluded); update skipped", len(trajectories),
                     metrics["batch/excluded_untrainable"])
            return UpdateResult({**metrics, "learner/skipped_empty_batch": 1.0}, False, self.version)
        t0 = time.perf_counter()
        metrics.update(self.train(samples))
        train_s = time.perf_counter() - t0
        metrics["learner/train_s"] = train_s
        version = self.version
        checkpoint = None
        t_save = time.perf_counter()
        if version % max(1, self.config.learner.checkpoint_every) == 0:
            checkpoint = self.save()
        metrics["learner/checkpoint_s"] = time.perf_counter() - t_save
        t1 = time.perf_counter()
        self._push(version, checkpoint)
        # Weight sync against the update's optimizer steps (checkpoint writes on the schedule excluded; a
        # disk sync's own off-schedule checkpoint is counted): the rollout engine waits on it.
        metrics["learner/sync_s"] = time.perf_counter() - t1
        metrics["learner/sync_share"] = metrics["learner/sync_s"] / max(train_s, 1e-9)
        evals = self._maybe_eval(checkpoint)
        return UpdateResult({**metrics, **evals, "learner/skipped_empty_batch": 0.0}, True, version, checkpoint,
                            evals)

    def train(self, samples: list[Any]) -> dict[str, float]:
        """`learner.steps_per_update` optimizer steps over seeded mini-batches of `samples`; metrics of the
        last step, plus the mean loss over all of them and the step count (and, with
        `learner.measure_shift`, how far the whole update moved the policy)."""
        parts = split_update([s.group for s in samples], [len(s.input_ids) for s in samples],
                             self.config.learner.steps_per_update, f"{self.config.seed}:{self.version}",
                             self.config.learner.minibatches)
        steps = len(parts)
        measure = self.config.learner.measure_shift
        old: list[Any] = [None] * len(samples)
        # TIS's ratio needs the learner's logprobs before the first step moves the weights. The first
        # mini-batch takes them from its own forward (engine.train_step with None); only the later ones
        # need a pass of their own, made here before any step. measure_shift needs them all.
        tis = self.config.learner.engine.loss.tis_cap is not None
        need = list(range(len(samples))) if measure else [i for part in parts[1:] for i in part] if tis else []
        if need:
            for i, row in zip(need, self.engine.logprobs([samples[i].input_ids for i in need])):
                old[i] = row
        losses, metrics = [], {}
        for part in parts:
            mine = [old[i] for i in part]
            metrics = self.engine.train_step([samples[i] for i in part], None if None in mine else mine)
            losses.append(metrics["learner/loss"])
        metrics = {**metrics, "learner/loss_mean": sum(losses) / steps, "learner/steps": float(steps)}
        if measure:
            after = self.engine.logprobs([s.input_ids for s in samples])
            shift = update_shift(old, after, [s.loss_mask for s in samples], [s.advantage for s in samples])
            metrics.update({f"learner/{k}": v for k, v in shift.items()})
        return metrics

    def save(self) -> Path:
        path = self.engine.save(self.checkpoints, state={"injector_baseline": self.baseline.state_dict()})
        self.checkpoints_written += 1
        prune_checkpoints(self.checkpoints, self.config.learner.keep_checkpoints)
        if self.store is not None and self.run_id:
            self.store.register_checkpoint(self.run_id, self.version, path)
        return path

    def _push(self, version: int, checkpoint: Path | None) -> None:
        if self.sync is None:
            return
        needs_disk = self.config.policy.backend != "hf" or self.config.learner.weight_sync == "disk"
        if needs_disk and checkpoint is None:
            # HTTP engines and disk sync load from a checkpoint: one is written now, off the schedule.
            checkpoint = self.save()
        state = None if needs_disk else self.engine.state_dict()
        self.sync.push(version, checkpoint_dir=checkpoint, state_dict=state)

    def _maybe_eval(self, checkpoint: Path | None) -> dict[str, float]:
        every = self.config.eval.every
        if not every or checkpoint is None or self.checkpoints_written % every:
            return {}
        try:
            instances = load_instances(self.config.eval.dataset, split=self.config.eval.split)
            settings, limits = self.config.eval, self.config.rollout.solver_limits  # budgets that fit the run
            return evaluate_checkpoint(checkpoint, instances, checkpoint.parent.parent / "eval" / checkpoint.name,
                                       runs=settings.runs, max_turns=settings.max_turns or limits.max_turns,
                                       max_new_tokens=settings.max_new_tokens or limits.max_new_tokens,
                                       max_context=limits.max_context_tokens, max_repeats=limits.max_repeats,
                                       on_step=log_step)
        except Exception as exc:  # an evaluation must not end the training run
            log.exception("evaluation of %s failed: %s", checkpoint, exc)
            return {"eval/swebench/failed": 1.0}
