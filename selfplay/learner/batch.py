"""From graded trajectories to training samples with advantages (pure Python).

Order: infrastructure failures out -> staleness filter -> overlong handling (may change rewards or drop)
-> grouping -> dynamic-sampling drop rules -> per-role advantages. A trajectory whose episode failed on
infrastructure (`metadata["infra_failure"]`, or termination "sandbox_error") says nothing about the
policy: it is dropped, never trained on, and counted in `batch/infra_failures`. Solver groups use a group
estimator (`advantages.ESTIMATORS`); injector samples use the running-mean baseline per (repo, strategy)
(`baseline.py`), or with `injector_baseline="group"` the same group estimator over each iteration's
episodes on one (repo, strategy) (`dynamic_sampling.injector_group_key`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from agent_scaffold.trajectory import Trajectory
from selfplay.config.bounds import check_bounds
from selfplay.learner.advantages import ESTIMATORS, group_advantages
from selfplay.learner.baseline import RunningMeanBaseline, injector_key
from selfplay.learner.dynamic_sampling import (
    DynamicSamplingConfig,
    Group,
    filter_groups,
    group_trajectories,
    has_variance,
)
from selfplay.learner.errors import BatchError
from selfplay.learner.overlong import OverlongConfig, shape_overlong
from selfplay.learner.staleness import filter_stale

INJECTOR_BASELINES = ("running", "group")


@dataclass(frozen=True)
class Sample:
    """One trajectory ready for the loss."""

    input_ids: tuple[int, ...]
    """All tokens of the trajectory."""
    loss_mask: tuple[int, ...]
    """1 on sampled assistant tokens."""
    old_logprobs: tuple[float, ...]
    """Behaviour logprob of each token (0.0 where loss_mask is 0)."""
    advantage: float
    """Scalar advantage, broadcast over the assistant tokens."""
    role: str = "solver"
    """Role, for per-role metrics."""
    group: str = ""
    """The group whose baseline gave the advantage (role and group key), so an update's mini-batches can
    keep a group together (`minibatches.split_update`)."""


@dataclass(frozen=True)
class BatchConfig:
    advantage: str = "grpo"
    """Solver group estimator: grpo, dr_grpo or rloo."""
    eps: float = 1e-6
    """Added to the group std in grpo."""
    max_staleness: int = 8
    """Drop samples more than this many policy versions old (SSR: 8)."""
    overlong: OverlongConfig = field(default_factory=OverlongConfig)
    """Overlong mode and its parameters."""
    sampling: DynamicSamplingConfig = field(default_factory=DynamicSamplingConfig)
    """Dynamic-sampling drop rules and batch size."""
    drop_zero_advantage: bool = True
    """Drop samples whose advantage is exactly 0 (Nebius): they cost compute and add no gradient."""
    group_size: int | None = None
    """Solver attempts per task (`RewardConfig.group_size`, G): a solver group with more members raises
    `BatchError`, since two groups then share an id and their baselines would mix. Fewer is normal
    (infrastructure failures, staleness and overlong masking remove members; `too_small` handles it).
    None: no check."""
    injector_baseline: str = "running"
    """running: each injector episode against the running mean of earlier rewards on its (repo, strategy);
    group: an iteration's injector episodes on one (repo, strategy) form a group, with the solver's
    estimator and drop rules (DAPO as written: an all-invalid group trains nothing). Needs several
    injector episodes per repo an iteration (`rollout.injector_episodes` over the run's repos)."""
    negative_scale: float = 1.0
    """Multiplies every negative advantage, both roles, after the estimator: 1 trains as the estimator
    says; 0 trains on the samples that beat their baseline only (filtered behaviour cloning: with
    `drop_zero_advantage` the rest are dropped). Pushing down failed episodes also pushes down the tokens
    they share with the successful ones (`learner.measure_shift` shows it)."""

    def __post_init__(self) -> None:
        if self.injector_baseline not in INJECTOR_BASELINES:
            raise ValueError(f"injector_baseline {self.injector_baseline!r} is unknown; choose one of "
                             f"{INJECTOR_BASELINES}")
        if self.advantage not in ESTIMATORS:
            raise ValueError(f"advantage {self.advantage!r} is unknown; choose one of {sorted(ESTIMATORS)}")
        if self.group_size is not None and self.group_size < 1:
            raise ValueError(f"BatchConfig.group_size must be >= 1 or None, got {self.group_size}")
        check_bounds(self, at_least={"max_staleness": 0}, above={"eps": 0})  # a group of equal rewards has std 0
        if not 0.0 <= self.negative_scale <= 1.0:
            raise ValueError(f"negative_scale must be in [0, 1] (a weight on negative advantages), got "
                             f"{self.negative_scale}")


def is_infra_failure(t: Trajectory) -> bool:
    """True when the episode failed on infrastructure, not on the model (never trained on)."""
    return bool(t.metadata.get("infra_failure")) or t.termination == "sandbox_error"


def check_trajectory(t: Trajectory) -> None:
    n = len(t.input_ids)
    if len(t.loss_mask) != n or len(t.logprobs) != n:
        raise BatchError(f"trajectory {t.metadata.get('id', '?')}: input_ids ({n}), loss_mask "
                         f"({len(t.loss_mask)}) and logprobs ({len(t.logprobs)}) must have the same length")
    if n and t.loss_mask[0]:
        raise BatchError(f"trajectory {t.metadata.get('id', '?')}: the first token cannot be sampled "
                         "(it has no context); start every trajectory with a prompt")


def prepare_groups(trajectories: Sequence[Trajectory], current_version: int,
                   config: BatchConfig) -> tuple[list[Group], dict[str, float]]:
    """Infrastructure failures out, staleness, overlong handling and grouping; no drop rules yet."""
    usable = [t for t in trajectories if not is_infra_failure(t)]
    for t in usable:
        check_trajectory(t)
    fresh, m_stale = filter_stale(usable, current_version, config.max_staleness)
    shaped, m_over = shape_overlong(fresh, config.overlong)
    groups = group_trajectories(shaped, injector_groups=config.injector_baseline == "group")
    if config.group_size is not None:
        for g in groups:
            if g.role != "injector" and len(g.members) > config.group_size:
                raise BatchError(f"{g.role} group {g.key!r} has {len(g.members)} trajectories, more than "
                                 f"group_size={config.group_size}: two groups share this id; give each "
                                 "(task, iteration) its own metadata['group_id']")
    return groups, {"batch/infra_failures": float(len(trajectories) - len(usable)), **m_stale, **m_over}


def to_samples(groups: Sequence[Group], config: BatchConfig,
               baseline: RunningMeanBaseline) -> tuple[list[Sample], dict[str, float]]:
    """Advantages per role; one `Sample` per trajectory segment (zero-advantage ones dropped if configured).
    Metrics count what trains: `batch/kept_groups` and `batch/<role>/samples_trained`."""
    pairs: list[tuple[Group, Trajectory, float]] = []
    singletons = [g for g in groups if g.running_baseline]
    metrics: dict[str, float] = {}
    for g in groups:
        if not g.running_baseline:
            adv, _ = group_advantages(g.rewards, config.advantage, config.eps)
            pairs.extend((g, t, a) for t, a in zip(g.members, adv))
    if singletons:
        injectors = [g.members[0] for g in singletons]
        adv, m = baseline.advantages([injector_key(t.metadata) for t in injectors],
                                     [float(t.reward) for t in injectors])  # type: ignore[arg-type]
        pairs.extend((g, t, a) for g, t, a in zip(singletons, injectors, adv))
        metrics.update({f"batch/{k}": v for k, v in m.items()})
    # A compacted episode (agent_scaffold context compaction) is several segments, each the exact token
    # sequence the policy conditioned on; each trains as its own sequence with the episode's advantage.
    samples: list[Sample] = []
    training: dict[str, set[str]] = {}
    if config.negative_scale != 1.0:
        pairs = [(g, t, a * config.negative_scale if a < 0 else a) for g, t, a in pairs]
    for g, t, a in pairs:
        if config.drop_zero_advantage and a == 0.0:
            continue
        segments = [Sample(ids, mask, lps, a, t.role, f"{g.role}:{g.key}") for ids, mask, lps in t.sequences()]
        samples.extend(segments)
        if segments:
            training.setdefault(g.role, set()).add(g.key)
    for role in sorted({t.role for _, t, _ in pairs}):
        rs = [float(t.reward) for _, t, _ in pairs if t.role == role]  # type: ignore[arg-type]
        metrics[f"batch/{role}_reward_mean"] = sum(rs) / len(rs)
        metrics[f"batch/{role}/groups_trained"] = float(len(training.get(role, ())))
        metrics[f"batch/{role}/samples_trained"] = float(sum(s.role == role for s in samples))
    metrics["batch/kept_groups"] = float(sum(len(keys) for keys in training.values()))
    metrics["batch/dropped_zero_advantage"] = float(sum(config.drop_zero_advantage and a == 0.0 for *_, a in pairs))
    metrics["batch/samples"] = float(len(samples))
    metrics["batch/tokens"] = float(sum(len(s.input_ids) for s in samples))
    return samples, metrics


def role_counts(groups: Sequence[Group], passed: Sequence[Group]) -> dict[str, float]:
    """`batch/<role>/groups`, `groups_with_variance` and `groups_dropped` (by the drop rules)."""
    metrics: dict[str, float] = {}
    kept = {id(g) for g in passed}
    for role in sorted({g.role for g in groups}):
        mine = [g for g in groups if g.role == role]
        metrics[f"batch/{role}/groups"] = float(len(mine))
        metrics[f"batch/{role}/groups_dropped"] = float(sum(id(g) not in kept for g in mine))
        if not any(g.running_baseline for g in mine):  # a singleton has no group variance
            metrics[f"batch/{role}/groups_with_variance"] = float(sum(has_variance(g) for g in mine))
    return metrics


def build_batch(trajectories: Sequence[Trajectory], current_version: int, config: BatchConfig,
                baseline: RunningMeanBaseline) -> tuple[list[Sample], dict[str, float]]:
    """The whole pipeline for one already-drawn set of trajectories (no redraws)."""
    groups, m1 = prepare_groups(trajectories, current_version, config)
    kept, m2 = filter_groups(groups, config.sampling)
    samples, m3 = to_samples(kept, config, baseline)
    return samples, {**m1, **m2, **role_counts(groups, kept), **m3}
