"""Grouping and DAPO dynamic sampling (pure Python).

A `Group` is what shares a baseline. Solver trajectories are grouped by `metadata["group_id"]` (falling
back to `task_id`): the G attempts on one bug. Injector trajectories are, by default, singletons whose
baseline is the running mean of `baseline.RunningMeanBaseline`, so the group rules below do not apply to
them. With `injector_groups`, an iteration's injector episodes on one (repo, strategy) form a group
instead: they share a prompt and a policy, so they are DAPO's G samples of it, and the group rules and
estimators apply to them as to the solver's. An all-invalid group then trains nothing, where the running
baseline would push down every one of its episodes (and with them the plan the valid ones share).

Drop rules (`DynamicSamplingConfig.drop_rules`), applied to solver-style groups:
- ``all_equal``: every reward equal, so every advantage is 0 and the group carries no gradient (DAPO's
  0 < |correct| < G constraint, generalised to any reward).
- ``too_small``: fewer than `min_group_size` members left (e.g. after staleness or overlong masking), so
  the baseline is too noisy.

`DynamicSampler.fill` keeps drawing groups until `batch_groups` survive or `max_draws` draws were made
(DAPO Algorithm 1). Survivors beyond the batch size wait in a buffer for the next batch: nothing is lost.
The self-play loop redraws at the rollout level instead (`rollout.redraw_rounds`: more tasks, G attempts
each, while fewer than `rollout.min_signal_groups` solver groups have reward variance), using
`signal_groups` to count; an iteration's batch is what its rounds produced.

Counters: `batch/kept_groups` counts only groups that train (after zero-advantage samples are dropped,
`batch.to_samples`), never an injector singleton whose advantage came out 0; `batch/<role>/...` splits
groups seen, dropped, with variance, and samples trained by role.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from agent_scaffold.trajectory import Trajectory
from selfplay.learner.baseline import injector_key

log = logging.getLogger(__name__)

RULES = ("all_equal", "too_small")


@dataclass(frozen=True)
class Group:
    key: str
    """Group id (solver: group_id or task_id; injector: the trajectory's own id)."""
    role: str
    """Role of every member."""
    members: tuple[Trajectory, ...]
    """The trajectories sharing this baseline."""
    running_baseline: bool = False
    """True for injector singletons, whose baseline is a running mean rather than the group."""

    @property
    def rewards(self) -> list[float]:
        return [float(t.reward) for t in self.members]  # type: ignore[arg-type]


def injector_group_key(metadata: dict[str, object]) -> str:
    """The group of an injector episode under `injector_groups`: one (repo, strategy) in one iteration."""
    return f"{injector_key(metadata)}|it{metadata.get('iteration', '?')}"


def group_trajectories(trajectories: Sequence[Trajectory], *, injector_groups: bool = False) -> list[Group]:
    """Solver (and any non-injector role) by group_id/task_id; each injector trajectory alone, or, with
    `injector_groups`, by `injector_group_key`."""
    groups: dict[tuple[str, str], list[Trajectory]] = {}
    out: list[Group] = []
    for i, t in enumerate(trajectories):
        if t.role == "injector" and not injector_groups:
            out.append(Group(str(t.metadata.get("id", f"injector-{i}")), t.role, (t,), running_baseline=True))
            continue
        if t.role == "injector":
            key = injector_group_key(t.metadata)
        else:
            key = t.metadata.get("group_id", t.metadata.get("task_id"))
        if key is None:
            raise ValueError(f"{t.role} trajectory {t.metadata.get('id', i)} has neither metadata['group_id'] "
                             "nor metadata['task_id']; the learner needs one to form its group")
        groups.setdefault((t.role, str(key)), []).append(t)
    out.extend(Group(k, role, tuple(ms)) for (role, k), ms in groups.items())
    return out


@dataclass(frozen=True)
class DynamicSamplingConfig:
    drop_rules: tuple[str, ...] = ("all_equal", "too_small")
    """Which rules drop a group (any of all_equal, too_small); () keeps every group."""
    min_group_size: int = 2
    """`too_small`: groups with fewer members are dropped."""
    batch_groups: int = 8
    """Groups per training batch."""
    max_draws: int = 16
    """Cap on draws per batch; when hit, the batch is trained with what it has (and a warning)."""

    def __post_init__(self) -> None:
        bad = [r for r in self.drop_rules if r not in RULES]
        if bad:
            raise ValueError(f"unknown drop rule(s) {bad}; choose from {RULES}")
        if self.batch_groups < 1 or self.max_draws < 1 or self.min_group_size < 1:
            raise ValueError("batch_groups, max_draws and min_group_size must be >= 1")


def drop_reason(group: Group, config: DynamicSamplingConfig) -> str | None:
    """The first rule that drops `group`, or None if it is kept."""
    if group.running_baseline:
        return None
    if "too_small" in config.drop_rules and len(group.members) < config.min_group_size:
        return "too_small"
    rewards = group.rewards
    if "all_equal" in config.drop_rules and max(rewards) == min(rewards):
        return "all_equal"
    return None


def has_variance(group: Group) -> bool:
    """The group's rewards differ, so a group baseline gives some member a non-zero advantage."""
    rewards = group.rewards
    return max(rewards) != min(rewards)


def signal_groups(trajectories: Sequence[Trajectory]) -> int:
    """Solver-style groups (G attempts on one task) whose rewards differ: the ones DAPO trains on. Injector
    singletons (running baseline) and unrewarded trajectories do not count."""
    rewarded = [t for t in trajectories if t.reward is not None and t.role != "injector"]
    return sum(has_variance(g) for g in group_trajectories(rewarded))


def filter_groups(groups: Sequence[Group], config: DynamicSamplingConfig) -> tuple[list[Group], dict[str, float]]:
    """Groups that pass the drop rules, and metrics batch/dropped_<rule> and batch/passed_groups (injector
    singletons included: whether they train depends on their advantage, see `batch.to_samples`)."""
    kept: list[Group] = []
    metrics = {f"batch/dropped_{r}": 0.0 for r in RULES}
    for g in groups:
        reason = drop_reason(g, config)
        if reason is None:
            kept.append(g)
        else:
            metrics[f"batch/dropped_{reason}"] += 1
    metrics["batch/passed_groups"] = float(len(kept))
    return kept, metrics


@dataclass
class DynamicSampler:
    """Draws groups until a batch is full of groups that carry signal."""

    config: DynamicSamplingConfig
    """Batch size, draw cap and drop rules."""
    buffer: list[Group] = field(default_factory=list)
    """Kept groups not yet trained on (overflow of the previous fill)."""

    def fill(self, draw: Callable[[], Sequence[Group]]) -> tuple[list[Group], dict[str, float]]:
        """Call `draw()` (one rollout round of groups) until `batch_groups` are kept or the cap is hit."""
        cfg = self.config
        totals = {f"batch/dropped_{r}": 0.0 for r in RULES}
        draws = 0
        while len(self.buffer) < cfg.batch_groups and draws < cfg.max_draws:
            kept, m = filter_groups(draw(), cfg)
            draws += 1
            self.buffer.extend(kept)
            for k in totals:
                totals[k] += m[k]
        capped = len(self.buffer) < cfg.batch_groups
        if capped:
            log.warning("dynamic sampling hit max_draws=%d with %d/%d groups kept; training on what there is",
                        cfg.max_draws, len(self.buffer), cfg.batch_groups)
        batch, self.buffer = self.buffer[: cfg.batch_groups], self.buffer[cfg.batch_groups:]
        kept = sum(not g.running_baseline for g in batch)  # a singleton's advantage is decided later
        return batch, {**totals, "batch/kept_groups": float(kept), "batch/draws": float(draws),
                       "batch/draws_capped": float(capped), "batch/buffered_groups": float(len(self.buffer))}
